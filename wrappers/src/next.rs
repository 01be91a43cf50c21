//! The one way to reach "the next definition in the preload chain": `next::MPI_Irecv()` is the
//! `MPI_Irecv` that follows the calling library (the tools library's counting interposer when it is
//! loaded after us, else MPICH's), looked up once and kept in a static of the calling library. Where
//! nothing follows in the global scope (MPICH loaded with `RTLD_LOCAL`, as Python does), it is the
//! loaded MPICH's `PMPI_Irecv`. Every interposer that forwards a call uses it: the lean library's
//! routes around native defects and its nonblocking collectives, and every interposer of the tools
//! library, so a call routed by one library is still seen by the libraries behind it.
//!
//! One accessor per row of `wrappers/mpi.prototypes`, generated; a missing definition aborts with its
//! name (an interposer cannot forward a call to nothing).
#![allow(non_snake_case)]

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The address kept in `slot`, resolved on first use: `name` after this library in the preload chain,
/// else `pmpi_name` in the loaded MPICH. The fast path is one relaxed load: the address, once stored,
/// never changes, and the code it points to was mapped before `dlsym` returned it.
#[inline]
pub fn resolve_once(slot: &AtomicUsize, name: &CStr, pmpi_name: &CStr) -> usize {
    match slot.load(Ordering::Relaxed) {
        0 => resolve(slot, name, pmpi_name),
        addr => addr,
    }
}

#[cold]
#[inline(never)]
fn resolve(slot: &AtomicUsize, name: &CStr, pmpi_name: &CStr) -> usize {
    // RTLD_NEXT is relative to the object that contains this code: each library has its own copy of
    // this crate, so each finds what follows itself.
    let mut addr = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if addr == 0 {
        addr = crate::pmpi::lookup(pmpi_name) as usize;
    }
    if addr == 0 {
        eprintln!(
            "mpixstream: no definition of {} follows this library and the loaded MPI library has no {}",
            name.to_string_lossy(),
            pmpi_name.to_string_lossy()
        );
        std::process::abort();
    }
    slot.store(addr, Ordering::Relaxed);
    addr
}

include!(concat!(env!("OUT_DIR"), "/next.rs"));

//! The one way to reach "the next definition in the preload chain": `next!(MPI_Irecv)` is the
//! `MPI_Irecv` that follows the calling library (the tools library's counting interposer when it is
//! loaded after us, else MPICH's), looked up once and kept in a static of the calling library. Where
//! nothing follows in the global scope (MPICH loaded with `RTLD_LOCAL`, as Python does), it is the
//! loaded MPICH's `PMPI_Irecv`. Every interposer that forwards a call uses it: the lean library's
//! routes around native defects and its nonblocking collectives, and every interposer of the tools
//! library, so a call routed by one library is still seen by the libraries behind it.
//!
//! `next!` takes the name of a row of `wrappers/mpi.prototypes` and has its generated type
//! (`fn_types::MPI_Irecv`): a name that is not listed does not compile. Its slot is a static of the
//! crate where it is written, so the hot path reads it directly (a static of this crate would be reached
//! through the GOT from another crate). A missing definition aborts with its name (an interposer cannot
//! forward a call to nothing).

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
    let mut addr = crate::dl::next_symbol(name) as usize;
    if addr == 0 {
        addr = crate::pmpi::lookup(pmpi_name) as usize;
    }
    if addr == 0 {
        crate::say_once!(
            "mpixstream: no definition of {} follows this library and the loaded MPI library has no {}",
            name.to_string_lossy(),
            pmpi_name.to_string_lossy()
        );
        std::process::abort();
    }
    slot.store(addr, Ordering::Relaxed);
    addr
}

/// The next definition of the listed function `$name` in the preload chain, as its
/// `fn_types::$name`; see the module's documentation.
#[macro_export]
macro_rules! next {
    ($name:ident) => {
        $crate::next_typed!($name, $crate::fn_types::$name)
    };
}

/// The same definition as its wide twin `fn_types::wide::$name` (handles passed by value are
/// register-wide): what an interposer forwards a standard-ABI program's call to, arguments unchanged
/// (`crate::abi`).
#[macro_export]
macro_rules! next_wide {
    ($name:ident) => {
        $crate::next_typed!($name, $crate::fn_types::wide::$name)
    };
}

/// `next!` and `next_wide!`: the slot of `$name` in the calling crate, typed `$ty`.
#[doc(hidden)]
#[macro_export]
macro_rules! next_typed {
    ($name:ident, $ty:ty) => {{
        static SLOT: ::std::sync::atomic::AtomicUsize = ::std::sync::atomic::AtomicUsize::new(0);
        const NAME: &::std::ffi::CStr =
            match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("a function name without NUL"),
            };
        const PMPI_NAME: &::std::ffi::CStr =
            match ::std::ffi::CStr::from_bytes_with_nul(concat!("P", stringify!($name), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("a function name without NUL"),
            };
        let addr = $crate::next::resolve_once(&SLOT, NAME, PMPI_NAME);
        // SAFETY: a non-zero address of the symbol whose C prototype is the row's.
        #[allow(unused_unsafe)]
        let f = unsafe { ::std::mem::transmute::<usize, $ty>(addr) };
        f
    }};
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_next_definition_is_found_once_and_typed() {
        // No MPI in a unit test: the slot logic, with a symbol every process has behind it (libc's).
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SLOT: AtomicUsize = AtomicUsize::new(0);
        let a = super::resolve_once(&SLOT, c"getpid", c"getpid");
        assert_ne!(a, 0);
        assert_eq!(SLOT.load(Ordering::Relaxed), a);
        // Once stored, the slot is what is returned (no second lookup).
        SLOT.store(a + 1, Ordering::Relaxed);
        assert_eq!(super::resolve_once(&SLOT, c"getpid", c"getpid"), a + 1);
    }
}

//! Which user communicators are multiplex: handle -> record.
//!
//! The send and receive paths find their record through a one-entry cache per thread (the last
//! multiplex handle this thread used): a hit is two loads and a compare, with no lock, no hash and no
//! reference count. A miss looks in the map. Records are never deallocated (see `Multiplex`), so a
//! cached reference never dangles; a record whose communicator was freed has `freed` set, so a
//! handle MPICH reuses is never taken for the old communicator.
use super::matching::lock;
use super::Multiplex;
use crate::runtime::Runtime;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

fn map() -> &'static DashMap<MPI_Comm, &'static Multiplex> {
    static MAP: OnceLock<DashMap<MPI_Comm, &'static Multiplex>> = OnceLock::new();
    MAP.get_or_init(DashMap::new)
}

/// Live records, for the progress thread.
static LIVE: Mutex<Vec<&'static Multiplex>> = Mutex::new(Vec::new());

thread_local! {
    static LAST: Cell<Option<&'static Multiplex>> = const { Cell::new(None) };
}

/// The multiplex communicator behind `comm`, if it is one.
#[inline]
pub fn lookup(comm: MPI_Comm) -> Option<&'static Multiplex> {
    if let Some(mx) = LAST.with(Cell::get) {
        if mx.comm == comm && !mx.freed.load(Ordering::Acquire) {
            return Some(mx);
        }
    }
    lookup_slow(comm)
}

#[cold]
fn lookup_slow(comm: MPI_Comm) -> Option<&'static Multiplex> {
    let mx = *map().get(&comm)?;
    LAST.with(|c| c.set(Some(mx)));
    Some(mx)
}

/// Records the multiplex communicator `mx.comm` (never deallocated); counts an attachment on each of
/// its local streams.
pub fn register(rt: &Runtime, mx: Multiplex) -> &'static Multiplex {
    let mx: &'static Multiplex = Box::leak(Box::new(mx));
    for &s in mx.streams.iter().flatten() {
        rt.streams.slot(s).comms.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(old) = map().insert(mx.comm, mx) {
        // A reused handle whose free we did not see: drop the stale attachments.
        if !old.freed.swap(true, Ordering::AcqRel) {
            release_streams(rt, old);
        }
    }
    let mut live = lock(&LIVE);
    live.retain(|m| !m.released.load(Ordering::Acquire));
    live.push(mx);
    mx
}

fn release_streams(rt: &Runtime, mx: &Multiplex) {
    for &s in mx.streams.iter().flatten() {
        rt.streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Forgets the multiplex communicator `comm` (freed by the user) if it is still `mx` (the handle may
/// have been reused); releases the attachments of its streams and marks it freed.
pub fn unregister(rt: &Runtime, comm: MPI_Comm, mx: &'static Multiplex) -> bool {
    if map().remove_if(&comm, |_, v| std::ptr::eq(*v, mx)).is_none() {
        return false;
    }
    if !mx.freed.swap(true, Ordering::AcqRel) {
        release_streams(rt, mx);
    }
    true
}

/// The records whose hidden communicators are not released yet.
pub fn live() -> Vec<&'static Multiplex> {
    lock(&LIVE).clone()
}

/// At `MPI_Finalize`: forget everything.
pub fn clear() {
    lock(&LIVE).clear();
    map().clear();
}

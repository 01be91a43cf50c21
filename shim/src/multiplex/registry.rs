//! Which user communicators are multiplex: handle -> record.
//!
//! The send and receive paths find their record in a table indexed by the handle's low bits (MPICH's
//! object index: block and slot of its handle allocator): one load, a compare of the handle and a load
//! of `freed`, with no lock, no hash, no reference count and no thread-local access. Two live
//! multiplex communicators whose handles share those bits: the later one is found in the map (the
//! slow path). Records are never deallocated (see `Multiplex`), so a table entry never dangles; a
//! record whose communicator was freed has `freed` set, so a handle MPICH reuses is never taken for
//! the old communicator.
//!
//! It also knows which hidden communicator belongs to which multiplex communicator, and which local
//! index's stream it carries here (`hidden_comm`): what the tools library reports a hidden
//! communicator's traffic under (`query`). Kept at creation and release; no message path reads it.
use super::matching::lock;
use super::Multiplex;
use crate::runtime::Runtime;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

fn map() -> &'static DashMap<MPI_Comm, &'static Multiplex> {
    static MAP: OnceLock<DashMap<MPI_Comm, &'static Multiplex>> = OnceLock::new();
    MAP.get_or_init(DashMap::new)
}

/// Hidden communicator -> (its multiplex communicator's record, the local index whose stream this
/// process attached in it: `Endpoints::attached_indices`).
fn hidden_map() -> &'static DashMap<MPI_Comm, (&'static Multiplex, Option<usize>)> {
    static MAP: OnceLock<DashMap<MPI_Comm, (&'static Multiplex, Option<usize>)>> = OnceLock::new();
    MAP.get_or_init(DashMap::new)
}

/// A hidden communicator as the tools library sees it.
pub struct HiddenComm {
    /// The user's multiplex communicator.
    pub user: MPI_Comm,
    /// The local index whose stream this process attached in it; `None` for the ones on MPICH's
    /// implicit pool (`P_j`), which carry any index.
    pub index: Option<usize>,
    /// That index's stream (a slot of the stream table); `None` on the implicit pool or for a
    /// conventional index (`MPIX_STREAM_NULL`).
    pub stream: Option<usize>,
}

/// `comm`, if it is a hidden communicator of a live multiplex communicator.
pub fn hidden_comm(comm: MPI_Comm) -> Option<HiddenComm> {
    let (mx, index) = *hidden_map().get(&comm)?;
    let stream = index.and_then(|i| mx.streams.get(i).copied().flatten());
    Some(HiddenComm { user: mx.comm, index, stream })
}

/// Forgets `mx`'s hidden communicators (freed: MPICH may hand their handles out again).
pub(super) fn forget_hidden(mx: &Multiplex) {
    for (c, _) in mx.endpoints.attached_indices() {
        hidden_map().remove_if(&c, |_, v| std::ptr::eq(v.0, mx));
    }
}

/// Live records, for the progress thread.
static LIVE: Mutex<Vec<&'static Multiplex>> = Mutex::new(Vec::new());

const TABLE_BITS: u32 = 12;
static TABLE: [AtomicPtr<Multiplex>; 1 << TABLE_BITS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 1 << TABLE_BITS];

/// The table slot of a handle: MPICH's handles keep the object's slot in the low 12 bits and its
/// allocator block above (indirect handles), so folding the two spreads live communicators.
#[inline]
fn slot(comm: MPI_Comm) -> &'static AtomicPtr<Multiplex> {
    let h = comm as u32;
    let mask = (1u32 << TABLE_BITS) - 1;
    &TABLE[((h ^ (h >> TABLE_BITS)) & mask) as usize]
}

/// The multiplex communicator behind `comm`, if it is one.
#[inline]
pub fn lookup(comm: MPI_Comm) -> Option<&'static Multiplex> {
    lookup_table(comm).or_else(|| lookup_slow(comm))
}

/// `lookup` in the table only: `None` also for a multiplex communicator whose slot another one holds
/// (`lookup` finds it in the map). The send and receive fast paths use this and leave the rest to
/// their checked paths: with no call before MPICH's, their arguments stay in their registers and
/// the entry saves almost none.
#[inline(always)]
pub fn lookup_table(comm: MPI_Comm) -> Option<&'static Multiplex> {
    let p = slot(comm).load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // Records are never deallocated: the pointer is valid.
    let mx = unsafe { &*p };
    (mx.comm == comm && !mx.freed.load(Ordering::Acquire)).then_some(mx)
}

#[cold]
fn lookup_slow(comm: MPI_Comm) -> Option<&'static Multiplex> {
    map().get(&comm).map(|e| *e)
}

/// Records the multiplex communicator `mx.comm` (never deallocated); counts an attachment on each of
/// its local streams.
pub fn register(rt: &Runtime, mx: Multiplex) -> &'static Multiplex {
    let mx: &'static Multiplex = Box::leak(Box::new(mx));
    for &s in mx.streams.iter().flatten() {
        rt.streams.slot(s).comms.fetch_add(1, Ordering::AcqRel);
    }
    for (c, index) in mx.endpoints.attached_indices() {
        hidden_map().insert(c, (mx, index));
    }
    slot(mx.comm).store(mx as *const Multiplex as *mut Multiplex, Ordering::Release);
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
    let me = mx as *const Multiplex as *mut Multiplex;
    let _ = slot(comm).compare_exchange(me, std::ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire);
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
    for s in TABLE.iter() {
        s.store(std::ptr::null_mut(), Ordering::Release);
    }
    lock(&LIVE).clear();
    map().clear();
    hidden_map().clear();
}

//! Which user communicators are multiplex: handle -> record.
//!
//! Records are reference-counted (`Arc`) and reclaimed: the registry holds one reference from the
//! communicator's creation to its destruction (the record's delete callback, `lifecycle::comm_freed`),
//! the progress thread one while the hidden communicators live, and each pending engine receive one.
//!
//! The send and receive paths find their record in a table indexed by the handle's low bits (MPICH's
//! object index: block and slot of its handle allocator) with no lock, no hash, no reference count and
//! no thread-local access: a slot holds a handle and its record's address, written by the registration
//! and cleared by the destruction. A slot is never taken from a live communicator (a second live
//! multiplex communicator whose handle has the same bits is found in the map, the slow path), so a slot
//! that names the handle a call was made with holds that communicator's record, which lives at least as
//! long as the communicator, and MPI does not let a communicator be used concurrently with or after its
//! free. That is the lifetime of the reference `with_table` lends its closure (the fast paths, within
//! a call on the communicator); `lookup` gives counted references.
//!
//! It also knows which hidden communicator belongs to which multiplex communicator, and which local
//! index's stream it carries here (`hidden_comm`): what the tools library reports a hidden
//! communicator's traffic under (`query`). Kept at creation and release; no message path reads it.
use super::matching::lock;
use super::Multiplex;
use crate::runtime::Runtime;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

fn map() -> &'static DashMap<MPI_Comm, Arc<Multiplex>> {
    static MAP: OnceLock<DashMap<MPI_Comm, Arc<Multiplex>>> = OnceLock::new();
    MAP.get_or_init(DashMap::new)
}

/// A hidden communicator as the tools library sees it.
#[derive(Clone, Copy)]
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

/// Hidden communicator -> what the tools library is told about it (`Endpoints::attached_indices`).
fn hidden_map() -> &'static DashMap<MPI_Comm, HiddenComm> {
    static MAP: OnceLock<DashMap<MPI_Comm, HiddenComm>> = OnceLock::new();
    MAP.get_or_init(DashMap::new)
}

/// `comm`, if it is a hidden communicator of a live multiplex communicator.
pub fn hidden_comm(comm: MPI_Comm) -> Option<HiddenComm> {
    hidden_map().get(&comm).map(|h| *h)
}

/// Forgets `mx`'s hidden communicators (freed: MPICH may hand their handles out again).
pub(super) fn forget_hidden(mx: &Multiplex) {
    for (c, _) in mx.endpoints.attached_indices() {
        hidden_map().remove_if(&c, |_, h| h.user == mx.comm);
    }
}

/// Records whose hidden communicators are not released yet, for the progress thread.
static LIVE: Mutex<Vec<Arc<Multiplex>>> = Mutex::new(Vec::new());

struct Slot {
    /// The registered handle, 0 (free) or `CLAIMED` (being written).
    handle: AtomicU32,
    record: AtomicPtr<Multiplex>,
}

/// A slot being written: no MPICH communicator handle is 1.
const CLAIMED: u32 = 1;
const TABLE_BITS: u32 = 12;
static TABLE: [Slot; 1 << TABLE_BITS] =
    [const { Slot { handle: AtomicU32::new(0), record: AtomicPtr::new(std::ptr::null_mut()) } }; 1 << TABLE_BITS];

/// The table slot of a handle: MPICH's handles keep the object's slot in the low 12 bits and its
/// allocator block above (indirect handles), so folding the two spreads live communicators.
#[inline]
fn slot(comm: MPI_Comm) -> &'static Slot {
    let h = comm as u32;
    let mask = (1u32 << TABLE_BITS) - 1;
    &TABLE[((h ^ (h >> TABLE_BITS)) & mask) as usize]
}

/// The multiplex communicator behind `comm`, if it is one: a counted reference (off the per-message
/// fast paths, which use [`with_table`]).
#[inline]
pub fn lookup(comm: MPI_Comm) -> Option<Arc<Multiplex>> {
    with_table(comm, |mx| {
        let p: *const Multiplex = mx;
        // SAFETY: every record in the table is one `register` put there from an `Arc` (`Arc::as_ptr`),
        // and `with_table` hands `mx` out only while the registry's own reference keeps it alive (module
        // doc): the count is positive, so one more reference may be taken from the pointer.
        Some(unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        })
    })
    .or_else(|| lookup_slow(comm))
}

/// Runs `f` on the record of `comm` if the table holds it, without a lock, a hash or a reference
/// count (the send and receive fast paths): `None` also for a multiplex communicator whose slot another
/// one holds (`lookup` finds it in the map), which the fast paths leave to their checked paths. The
/// reference is valid for `f`'s run only, which is inside the caller's call on `comm`.
#[inline(always)]
pub fn with_table<R>(comm: MPI_Comm, f: impl FnOnce(&Multiplex) -> Option<R>) -> Option<R> {
    let s = slot(comm);
    if s.handle.load(Ordering::Acquire) != comm as u32 {
        return None;
    }
    let record = s.record.load(Ordering::Acquire);
    if record.is_null() {
        return None;
    }
    // SAFETY: the slot names `comm`, so it holds `comm`'s record (a slot is never taken from a live
    // communicator), which the registry keeps alive until `comm`'s destruction (module doc); the caller
    // is in a call on `comm`, which MPI forbids to overlap its free, and the reference does not leave
    // `f`.
    f(unsafe { &*record })
}

#[cold]
fn lookup_slow(comm: MPI_Comm) -> Option<Arc<Multiplex>> {
    map().get(&comm).map(|e| e.value().clone())
}

/// Records the multiplex communicator `mx.comm`; counts an attachment on each of its local streams.
pub fn register(rt: &Runtime, mx: Multiplex) -> Arc<Multiplex> {
    let mx = Arc::new(mx);
    for &s in mx.streams.iter().flatten() {
        rt.streams.slot(s).comms.fetch_add(1, Ordering::AcqRel);
    }
    for (c, index) in mx.endpoints.attached_indices() {
        let stream = index.and_then(|i| mx.streams.get(i).copied().flatten());
        hidden_map().insert(c, HiddenComm { user: mx.comm, index, stream });
    }
    map().insert(mx.comm, mx.clone());
    let s = slot(mx.comm);
    if s.handle.compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        s.record.store(Arc::as_ptr(&mx) as *mut Multiplex, Ordering::Release);
        s.handle.store(mx.comm as u32, Ordering::Release);
    }
    let mut live = lock(&LIVE);
    live.retain(|m| !m.released.load(Ordering::Acquire));
    live.push(mx.clone());
    mx
}

fn release_streams(rt: &Runtime, mx: &Multiplex) {
    for &s in mx.streams.iter().flatten() {
        rt.streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel);
    }
}

/// At the destruction of the multiplex communicator `comm` (its record's delete callback): forgets it
/// if it is still `mx`, releases the attachments of its streams and marks it freed.
pub fn unregister(rt: &Runtime, comm: MPI_Comm, mx: &Multiplex) -> bool {
    let Some((_, held)) = map().remove_if(&comm, |_, v| std::ptr::eq(Arc::as_ptr(v), mx)) else {
        return false;
    };
    let s = slot(comm);
    if s.handle.load(Ordering::Acquire) == comm as u32 && std::ptr::eq(s.record.load(Ordering::Acquire), mx) {
        s.handle.store(CLAIMED, Ordering::Release);
        s.record.store(std::ptr::null_mut(), Ordering::Release);
        s.handle.store(0, Ordering::Release);
    }
    if !mx.freed.swap(true, Ordering::AcqRel) {
        release_streams(rt, mx);
    }
    drop(held);
    true
}

/// After `mx`'s hidden communicators were released: the progress thread lets it go.
pub fn released(mx: &Multiplex) {
    lock(&LIVE).retain(|m| !std::ptr::eq(Arc::as_ptr(m), mx));
}

/// The records whose hidden communicators are not released yet.
pub fn live() -> Vec<Arc<Multiplex>> {
    lock(&LIVE).clone()
}

/// At `MPI_Finalize`: forget everything.
pub fn clear() {
    for s in TABLE.iter() {
        s.handle.store(0, Ordering::Release);
        s.record.store(std::ptr::null_mut(), Ordering::Release);
    }
    lock(&LIVE).clear();
    map().clear();
    hidden_map().clear();
}

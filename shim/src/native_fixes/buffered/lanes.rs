//! The routed buffered messages of each thread (its *lane*), who tests them and when (the module doc
//! of `buffered`), the hand-off thread for the exited threads' messages, and the waits of
//! `MPI_Buffer_detach` and `MPI_Finalize` for all of them.
use crate::native_fixes::native_streams::{native_stream_of, THREAD_BOUND};
use crate::runtime;
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::cell::{Cell, OnceCell};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Space the routed messages not yet known complete take (packed bytes + overhead each).
pub(super) static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);
/// How many routed messages are not yet known complete, all lanes together.
pub(super) static PENDING: AtomicUsize = AtomicUsize::new(0);

/// A routed message whose request is not freed yet.
pub(super) struct Held {
    /// The packed message (MPICH reads it until the request completes).
    pub(super) memory: Vec<u8>,
    pub(super) space: i64,
    /// The stream-table slot of its communicator's stream.
    pub(super) slot: usize,
    /// Seen complete by a thread that may not free it (`Lane::observe`): its space is given back
    /// already; whoever may drive its stream frees the request.
    pub(super) settled: bool,
    /// It leaves without its receiver matching it (eager: packed size up to `DEPART_MAX_BYTES`, not to
    /// this process itself), so a blocking call that cannot test it waits for it first
    /// (`before_blocking`).
    pub(super) departs: bool,
}

/// One thread's routed messages: their requests (for `MPI_Testsome`) and, at the same index, what each
/// holds; `spare` keeps freed messages' memory for reuse.
#[derive(Default)]
pub(super) struct Lane {
    pub(super) requests: Vec<MPI_Request>,
    pub(super) held: Vec<Held>,
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) indices: Vec<c_int>,
}

/// A message is complete: its space counts no more.
pub(super) fn give_back(space: i64) {
    IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
    PENDING.fetch_sub(1, Ordering::AcqRel);
}

impl Lane {
    pub(super) fn push(&mut self, request: MPI_Request, held: Held) {
        self.requests.push(request);
        self.held.push(held);
        PENDING.fetch_add(1, Ordering::AcqRel);
        THREAD_BOUND.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets the messages whose requests a completion call freed (now `MPI_REQUEST_NULL`).
    pub(super) fn sweep(&mut self) {
        let mut i = 0;
        while i < self.requests.len() {
            if self.requests[i] == MPI_REQUEST_NULL {
                self.requests.swap_remove(i);
                let held = self.held.swap_remove(i);
                if !held.settled {
                    give_back(held.space);
                }
                self.spare.push(held.memory);
                THREAD_BOUND.fetch_sub(1, Ordering::Relaxed);
            } else {
                i += 1;
            }
        }
    }

    /// The owner's turn: tests every message (driving their streams: its own) and frees the complete.
    pub(super) unsafe fn reap(&mut self) {
        if self.requests.is_empty() {
            return;
        }
        self.indices.resize(self.requests.len(), 0);
        let mut done: c_int = 0;
        let rc = next!(MPI_Testsome)(
            self.requests.len() as c_int,
            self.requests.as_mut_ptr(),
            &mut done,
            self.indices.as_mut_ptr(),
            MPI_STATUSES_IGNORE,
        );
        if rc == MPI_SUCCESS && done > 0 {
            self.sweep();
        }
    }

    /// The owner's turn from inside the progress of its stream `current` (the policy's async thing,
    /// `policy::progress_rule`): the messages on other streams are tested (each test turns its stream,
    /// whose own async-thing mutex is free), those on `current` only observed: a test there would turn
    /// `current` again and take MPICH's async-thing mutex of `current`, which this thread holds (it is not
    /// recursive). `current`'s own progress, the turn we are in, moves them.
    pub(super) unsafe fn reap_from_progress_of(&mut self, current: usize) {
        let mut any = false;
        for (request, held) in self.requests.iter_mut().zip(self.held.iter()) {
            if held.slot != current {
                let mut done = 0;
                next!(MPI_Test)(request, &mut done, MPI_STATUS_IGNORE);
                any |= done != 0;
            }
        }
        self.observe();
        if any {
            self.sweep();
        }
    }

    /// Another thread's look, with no progress (`MPIX_Request_is_complete`, an atomic load; nothing
    /// where MPICH lacks it, before 4.3): the complete messages give their space back, their requests
    /// stay for a thread that may drive their streams.
    pub(super) unsafe fn observe(&mut self) {
        let Some(is_complete) = pmpi::pmpi().PMPIX_Request_is_complete else { return };
        for (request, held) in self.requests.iter().zip(self.held.iter_mut()) {
            if !held.settled && is_complete(*request) != 0 {
                held.settled = true;
                give_back(held.space);
            }
        }
    }

    /// The turn of a thread that may drive these streams now that their owner is gone (detach,
    /// finalize): each message is tested under its stream's driver claim, and only observed while
    /// another driver of ours holds the stream. Returns whether a message was skipped so.
    pub(super) unsafe fn drive_claimed(&mut self) -> bool {
        let Some(rt) = runtime::active() else { return false };
        let mut skipped = false;
        for i in 0..self.requests.len() {
            match rt.streams.slot(self.held[i].slot).drive_for_call() {
                Ok(_claim) => {
                    let mut done = 0;
                    next!(MPI_Test)(&mut self.requests[i], &mut done, MPI_STATUS_IGNORE);
                }
                Err(_) => skipped = true,
            }
        }
        if skipped {
            self.observe();
        }
        self.sweep();
        skipped
    }

    /// Takes the exited threads' messages on stream `slot` (the caller owns that stream now).
    pub(super) fn adopt(&mut self, slot: usize) {
        if EXITED.load(Ordering::Acquire) == 0 {
            return;
        }
        let exited: Vec<Arc<Shared>> = {
            let lanes = LANES.lock().unwrap_or_else(|e| e.into_inner());
            lanes.iter().filter(|l| l.exited.load(Ordering::Acquire)).cloned().collect()
        };
        for shared in exited {
            let mut other = shared.lock();
            let mut i = 0;
            while i < other.requests.len() {
                if other.held[i].slot == slot {
                    self.requests.push(other.requests.swap_remove(i));
                    self.held.push(other.held.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        prune();
    }

    /// Memory for `bytes` packed bytes: a spare one large enough, else a new one.
    pub(super) fn memory(&mut self, bytes: usize) -> Vec<u8> {
        match self.spare.iter().position(|m| m.capacity() >= bytes) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(bytes),
        }
    }
}

/// A lane in the registry: its thread and, for their looks, detach, finalize and the threads that wait
/// for space reach it through the lock.
#[derive(Default)]
pub(super) struct Shared {
    lane: Mutex<Lane>,
    /// Messages in the lane (read without the lock).
    len: AtomicUsize,
    /// Its thread has exited.
    exited: AtomicBool,
}

/// The lane locked; its length is published when the lock is released.
struct Locked<'a> {
    shared: &'a Shared,
    lane: MutexGuard<'a, Lane>,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.shared.len.store(self.lane.requests.len(), Ordering::Release);
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = Lane;
    fn deref(&self) -> &Lane {
        &self.lane
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Lane {
        &mut self.lane
    }
}

impl Shared {
    fn lock(&self) -> Locked<'_> {
        Locked { shared: self, lane: self.lane.lock().unwrap_or_else(|e| e.into_inner()) }
    }
}

/// Every thread's lane that has held a message, and the exited threads' lanes still holding some.
/// Lock order: a thread may hold its own lane's lock and then take this one (briefly, never a lane's
/// lock under it) or an exited lane's; it never holds two live lanes' locks.
static LANES: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());
/// How many exited lanes the registry holds (0: nothing to adopt).
static EXITED: AtomicUsize = AtomicUsize::new(0);

/// Drops the exited lanes that hold nothing more (nobody adds to an exited lane).
pub(super) fn prune() {
    let mut lanes = LANES.lock().unwrap_or_else(|e| e.into_inner());
    lanes.retain(|l| {
        let gone = l.exited.load(Ordering::Acquire) && l.len.load(Ordering::Acquire) == 0;
        if gone {
            EXITED.fetch_sub(1, Ordering::AcqRel);
        }
        !gone
    });
}

/// The calling thread's lane, registered on its first routed message.
struct Mine {
    shared: OnceCell<Arc<Shared>>,
    /// In use by this thread (a call re-entered from MPICH's progress finds it busy).
    busy: Cell<bool>,
}

impl Drop for Mine {
    /// The thread exits: one last test of its messages, no wait; what is still pending is handed on
    /// (module doc).
    fn drop(&mut self) {
        let Some(shared) = self.shared.get() else { return };
        {
            let mut lane = shared.lock();
            if runtime::active().is_some() {
                unsafe { lane.reap() };
            }
            // Counted before it is flagged, so that a prune seeing the flag finds it counted; flagged
            // under the lock, so that an adopter sees the flag and the messages together.
            EXITED.fetch_add(1, Ordering::AcqRel);
            shared.exited.store(true, Ordering::Release);
        }
        prune();
        if EXITED.load(Ordering::Acquire) != 0 {
            if let Some(t) = HANDOFF_WAKE.get() {
                t.unpark();
            }
        }
    }
}

thread_local! {
    static MINE: Mine = const { Mine { shared: OnceCell::new(), busy: Cell::new(false) } };
}

/// Runs `f` on the calling thread's lane (registered if new; nothing if it is in use by this thread,
/// or the thread is exiting).
pub(super) fn with_own_lane<R>(f: impl FnOnce(&mut Lane) -> R) -> Option<R> {
    MINE.try_with(|mine| {
        if mine.busy.replace(true) {
            return None;
        }
        struct Release<'a>(&'a Cell<bool>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _release = Release(&mine.busy);
        let shared = mine.shared.get_or_init(|| {
            let shared = Arc::new(Shared::default());
            LANES.lock().unwrap_or_else(|e| e.into_inner()).push(shared.clone());
            start_handoff();
            shared
        });
        let mut lane = shared.lock();
        Some(f(&mut lane))
    })
    .ok()
    .flatten()
}

/// Whether the calling thread has routed messages not yet freed (its completion calls test them).
pub fn own_pending() -> bool {
    MINE.try_with(|m| m.shared.get().is_some_and(|s| s.len.load(Ordering::Acquire) != 0)).unwrap_or(false)
}

/// One test of the calling thread's routed messages, no wait (its completion calls, between polls).
pub fn progress_own() {
    if own_pending() {
        with_own_lane(|l| unsafe { l.reap() });
    }
}

/// From the policy's async thing on stream-table slot `current`, run by the thread driving it: its
/// routed messages are tested where that is safe (`Lane::reap_from_progress_of`). Nothing when the
/// thread's lane is in use already (this poll re-entered through a test of ours).
pub fn progress_own_from(current: usize) {
    if own_pending() {
        with_own_lane(|l| unsafe { l.reap_from_progress_of(current) });
    }
}

/// Before a blocking call on `comm` that tests none of the calling thread's routed messages (the
/// `lean:blocking` rows of wrappers/mpi.prototypes, communicator constructors, `MPI_Sendrecv`, the
/// probes): while the thread has some pending, the call cannot deliver them, and its peer may wait for
/// them to complete the call (MPICH's `threads/pt2pt/mt_bsendrecv`: buffered sends on a dup, then
/// `MPI_Barrier` on `MPI_COMM_WORLD`). So those that leave without their receiver's match (`departs`)
/// are delivered first; larger ones wait for the thread's next test (their receiver reads them without
/// the sender's progress once it matches). Nothing where `comm`'s stream carries the policy's async
/// thing (`StreamSlot::progress_rule_thing`): its progress tests the thread's messages itself, so a blocking call
/// there needs no wait (a send on another dup that the receiver takes first: tests/c/policy_bsend_local.c).
/// Cost while no thread has routed messages pending: one relaxed load.
#[inline(always)]
pub fn before_blocking(comm: MPI_Comm) {
    if THREAD_BOUND.load(Ordering::Relaxed) != 0 {
        deliver_departing(comm);
    }
}

#[cold]
#[inline(never)]
fn deliver_departing(comm: MPI_Comm) {
    ffi_guard("a blocking call after buffered sends", || {
        let tested_there = native_stream_of(comm).is_some_and(|s| s.progress_rule_thing.load(Ordering::Acquire));
        if own_pending() && !tested_there {
            while with_own_lane(|l| unsafe {
                l.reap();
                l.held.iter().any(|h| h.departs && !h.settled)
            }) == Some(true)
            {
                std::thread::yield_now();
            }
        }
        MPI_SUCCESS
    });
}

/// The other threads' lanes: observed (where MPICH can tell completion without progress), and the
/// exited ones tested if `drive_exited`.
pub(super) fn others(drive_exited: bool) {
    let mine = MINE.try_with(|m| m.shared.get().cloned()).ok().flatten();
    let observable = pmpi::pmpi().PMPIX_Request_is_complete.is_some();
    let lanes: Vec<Arc<Shared>> = {
        let lanes = LANES.lock().unwrap_or_else(|e| e.into_inner());
        lanes
            .iter()
            .filter(|l| l.len.load(Ordering::Acquire) != 0 && !mine.as_ref().is_some_and(|m| Arc::ptr_eq(m, l)))
            .filter(|l| observable || (drive_exited && l.exited.load(Ordering::Acquire)))
            .cloned()
            .collect()
    };
    for shared in lanes {
        let mut lane = shared.lock();
        if drive_exited && shared.exited.load(Ordering::Acquire) {
            unsafe { lane.drive_claimed() };
        } else {
            unsafe { lane.observe() };
        }
    }
    prune();
}

/// The hand-off thread (MPI_THREAD_MULTIPLE), once started.
static HANDOFF: Mutex<Option<BackgroundThread>> = Mutex::new(None);
/// Its handle, for waking it from an exiting thread (no lock, no thread started there).
static HANDOFF_WAKE: OnceLock<std::thread::Thread> = OnceLock::new();
/// How long the hand-off thread sleeps while no exited thread's message is pending (it is woken
/// when one exits with some).
const HANDOFF_IDLE: Duration = Duration::from_millis(50);

/// Starts the hand-off thread once, with the first lane, where MPI allows a thread of ours to call it
/// (`MPI_THREAD_MULTIPLE`). It tests the exited threads' messages until they complete (module doc);
/// started here, not at a thread's exit, which runs in a thread-local destructor.
fn start_handoff() {
    let mut slot = HANDOFF.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() || !runtime::active().is_some_and(|rt| rt.thread_multiple()) {
        return;
    }
    let spawned = BackgroundThread::spawn("mpixstream-handoff", |_| {
        if EXITED.load(Ordering::Acquire) == 0 {
            std::thread::park_timeout(HANDOFF_IDLE);
            return Turn::Again;
        }
        let exited: Vec<Arc<Shared>> = {
            let lanes = LANES.lock().unwrap_or_else(|e| e.into_inner());
            lanes.iter().filter(|l| l.exited.load(Ordering::Acquire)).cloned().collect()
        };
        for shared in exited {
            unsafe { shared.lock().drive_claimed() };
        }
        prune();
        // Leave the core to the application's threads between turns (2-core machines).
        std::thread::yield_now();
        Turn::Again
    });
    match spawned {
        Ok(t) => {
            if let Some(handle) = t.thread() {
                let _ = HANDOFF_WAKE.set(handle.clone());
            }
            *slot = Some(t);
        }
        // Without it, the exited threads' messages wait for the other ways (module doc).
        Err(e) => eprintln!("mpixstream: buffered sends: no thread to deliver exited threads' messages ({e})"),
    }
}

/// Stops the hand-off thread (`MPI_Finalize`).
fn stop_handoff() {
    let thread = HANDOFF.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(t) = thread {
        t.request_stop();
        if let Some(handle) = t.thread() {
            handle.unpark();
        }
        t.stop();
    }
}

/// Before `MPI_Buffer_detach(_c)`: waits until every routed message is complete (module doc: the
/// calling thread tests its own and the exited threads', and observes the live threads').
pub(super) fn drain() {
    while PENDING.load(Ordering::Acquire) != 0 {
        with_own_lane(|l| unsafe { l.reap() });
        others(true);
        if PENDING.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }
}

/// At `MPI_Finalize`, before MPICH's (no other thread calls MPI any more: MPI 4.1 §11.2.2): every
/// routed message is delivered, the lanes of all threads tested under their streams' driver claims, as
/// MPICH delivers its own buffered messages there. Should only messages of streams another driver of
/// ours holds remain, and MPICH cannot tell their completion without progress (before 4.3), they are
/// left to MPICH's finalize.
pub fn finalize() {
    stop_handoff();
    loop {
        let lanes: Vec<Arc<Shared>> = LANES.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut skipped = false;
        for shared in lanes {
            skipped |= unsafe { shared.lock().drive_claimed() };
        }
        prune();
        if PENDING.load(Ordering::Acquire) == 0 || (skipped && pmpi::pmpi().PMPIX_Request_is_complete.is_none()) {
            return;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests below share the process-wide counters and registry: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn held(space: i64, slot: usize) -> Held {
        IN_FLIGHT.fetch_add(space, Ordering::AcqRel);
        Held { memory: Vec::with_capacity(16), space, slot, settled: false, departs: true }
    }

    fn counters() -> (i64, usize, usize) {
        (IN_FLIGHT.load(Ordering::Acquire), PENDING.load(Ordering::Acquire), THREAD_BOUND.load(Ordering::Acquire))
    }

    /// A freed message gives its space back once: not again if another thread saw it complete first.
    #[test]
    fn a_freed_message_gives_its_space_back_once() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let before = counters();
        let mut lane = Lane::default();
        lane.push(0x1111, held(100, 0));
        lane.push(0x2222, held(200, 0));
        assert_eq!(counters(), (before.0 + 300, before.1 + 2, before.2 + 2));
        // Seen complete by another thread (Lane::observe): its space is back, its request still held.
        lane.held[1].settled = true;
        give_back(200);
        assert_eq!(counters(), (before.0 + 100, before.1 + 1, before.2 + 2));
        // A completion call freed both.
        lane.requests.iter_mut().for_each(|r| *r = MPI_REQUEST_NULL);
        lane.sweep();
        assert_eq!(counters(), before);
        assert!(lane.requests.is_empty() && lane.held.is_empty());
        assert_eq!(lane.spare.len(), 2, "their memory is kept for reuse");
    }

    /// A buffered send on a stream takes the exited threads' messages on that stream, none of a live
    /// thread's and none on another stream; an exited lane left empty leaves the registry.
    #[test]
    fn a_sender_adopts_only_the_exited_threads_messages_on_its_stream() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let before = counters();
        let exited_before = EXITED.load(Ordering::Acquire);
        let dead = Arc::new(Shared::default());
        let live = Arc::new(Shared::default());
        {
            let mut d = dead.lock();
            d.push(0x31, held(10, 3));
            d.push(0x51, held(10, 5));
            d.push(0x32, held(10, 3));
            live.lock().push(0x33, held(10, 3));
        }
        dead.exited.store(true, Ordering::Release);
        EXITED.fetch_add(1, Ordering::AcqRel);
        LANES.lock().unwrap().extend([dead.clone(), live.clone()]);

        let mut mine = Lane::default();
        mine.adopt(3);
        let mut adopted = mine.requests.clone();
        adopted.sort_unstable();
        assert_eq!(adopted, [0x31, 0x32]);
        assert!(mine.held.iter().all(|h| h.slot == 3));
        assert_eq!(dead.len.load(Ordering::Acquire), 1, "the message on stream 5 stays");
        assert_eq!(live.len.load(Ordering::Acquire), 1, "a live thread's message stays");
        assert!(LANES.lock().unwrap().iter().any(|l| Arc::ptr_eq(l, &dead)));

        mine.adopt(5);
        assert_eq!(mine.requests.len(), 3);
        assert!(!LANES.lock().unwrap().iter().any(|l| Arc::ptr_eq(l, &dead)), "emptied: pruned");
        assert_eq!(EXITED.load(Ordering::Acquire), exited_before);

        LANES.lock().unwrap().retain(|l| !Arc::ptr_eq(l, &live));
        let mut l = live.lock();
        l.requests[0] = MPI_REQUEST_NULL;
        l.sweep();
        mine.requests.iter_mut().for_each(|r| *r = MPI_REQUEST_NULL);
        mine.sweep();
        drop(l);
        assert_eq!(counters(), before);
    }

    /// A completed message's memory is reused for a message that fits it; a larger one gets new memory.
    #[test]
    fn memory_is_reused_when_large_enough() {
        let mut lane = Lane::default();
        lane.spare.push(Vec::with_capacity(100));
        let reused = lane.memory(50);
        assert!(reused.capacity() >= 100 && lane.spare.is_empty(), "the spare memory is taken");
        lane.spare.push(reused);
        let fresh = lane.memory(200);
        assert!(fresh.capacity() >= 200);
        assert_eq!(lane.spare.len(), 1, "the too-small spare stays");
    }
}

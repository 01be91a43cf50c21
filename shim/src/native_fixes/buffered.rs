//! Buffered sends on native stream communicators (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Bsend_init` +
//! `MPI_Start`/`MPI_Startall`, and their large-count forms).
//!
//! Native MPICH's own buffered sends there never leave, or fail with `MPI_ERR_BUFFER`, because
//! nothing turns the stream's reserved VCI (docs/native-defects.md, "Global progress skips a stream's
//! reserved VCI").
//!
//! The route, on native stream communicators only: we buffer the message ourselves. The calling thread
//! (the communicator's one user under the policy: the stream's owner) packs it into memory of ours,
//! sends it with `MPI_Isend_c` (`MPI_PACKED`) on the same communicator, so it keeps its place among that
//! thread's messages (a buffered send and a later `MPI_Send` to the same peer match in order), tests it
//! once and returns: the call is local (MPI 4.1 §3.4), it never waits for the receiver
//! (`tests/c/policy_bsend_local.c`). A message not yet
//! complete stays in the thread's *lane* (its requests and memory) and holds its space in the attached
//! buffer until its request completes.
//!
//! Who progresses a pending message while its thread lives: only that thread, its stream's owner (a
//! reserved VCI has no lock). Its completion is collected (`MPI_Testsome` over the lane) by the thread's
//! next buffered send, its completion calls (`MPI_Wait*`/`MPI_Test*` test the lane between their polls
//! while it is not empty: `persistent.rs`), its `MPI_Buffer_detach` and `MPI_Finalize`, and every
//! progress turn of one of its policy streams (`progress_own_from`, from the policy's async thing:
//! `policy::progress_rule`), so a blocking call on a policy communicator keeps delivering them. A
//! blocking call that turns none of them (on a communicator without such a stream: `before_blocking`)
//! first waits until the small ones (`departs`) have left. MPICH's global progress cannot do it for us:
//! an async thing on the implicit pool would have to turn the stream from inside MPICH's async-thing
//! mutex of the implicit pool, which every progress turn takes again (it is not recursive).
//!
//! Space: `MPI_Buffer_attach` records the buffer's size; the space our messages take (packed size +
//! `MPI_BSEND_OVERHEAD` each) never exceeds it. A message larger than the buffer even when empty (or
//! with no buffer) goes to MPICH's own call, which reports `MPI_ERR_BUFFER` through the communicator's
//! handler. One that fits the empty buffer but finds no space waits for it: it tests its own lane, the
//! exited threads' messages (below), and looks at the live threads' (`MPIX_Request_is_complete`, an
//! atomic load, no progress: MPICH >= 4.3). MPI would allow `MPI_ERR_BUFFER` there instead; we wait, as
//! MPICH's own `MPI_Bsend` tests its pending messages for space, and the wait never ends only if the
//! messages holding the space wait for this thread's next step. The memory is ours (kept for reuse), so
//! the attached buffer itself serves the other communicators' buffered sends, which pass through.
//! `MPI_Ibsend` returns an already complete request (a send to `MPI_PROC_NULL`), as MPICH 5 does for a
//! buffered send.
//!
//! A thread's exit never waits for a receiver: one last `MPI_Testsome` of its lane (no wait), and the
//! lane, with what is still pending, is marked exited and stays in the registry. Such a message may
//! still need its stream's progress after the receiver took it (a rendezvous send completes when the
//! receiver's acknowledgement arrives on the sender's VCI; MPICH 4.3's shared memory copies a large
//! message chunk by chunk as the receiver frees cells), and its stream has lost its owner. So until it
//! completes it is tested, each time under its stream's driver claim (`StreamSlot::drive_for_call`:
//! skipped while a progress thread or another call of ours drives the stream), by: the *hand-off
//! thread* (under `MPI_THREAD_MULTIPLE`: a thread of ours started with the first lane, asleep while no
//! exited thread's message is pending), a thread that waits for buffer space, `MPI_Buffer_detach` and
//! `MPI_Finalize`; and the next thread that makes a buffered send on that stream takes it into its own
//! lane (that thread owns the stream then, by the stream model). The rule: while a thread lives, only
//! it drives the streams of its messages; once it has exited, we drive them until they complete. The
//! cost: a program that gives an exited thread's communicator to another thread before those messages
//! complete, and calls on it there with calls we do not see (`MPI_Recv`), has two drivers on that
//! stream meanwhile; `MPI_Buffer_detach` before handing the communicator on rules it out (it waits for
//! them). MPICH's own buffered sends do that for every pending message, a live thread's too: whichever
//! thread looks for space or detaches waits on each buffered request on the request's VCI.
//! `MPI_Buffer_detach` keeps MPI's rule: it returns when every routed message is complete, its own and
//! the exited threads' tested as above, the live threads' observed complete (`MPIX_Request_is_complete`;
//! before MPICH 4.3, their threads must test them: their next buffered send or completion call).
//!
//! `MPI_Start` of a persistent buffered send made on such a communicator (recorded at `MPI_Bsend_init`)
//! is the same routed buffered send with the recorded arguments; MPICH's request stays inactive, and
//! `MPI_Wait`/`MPI_Test` on an inactive persistent request return at once with an empty status, as
//! they do for a started buffered send (complete when it starts).
//!
//! Not routed: MPI-4.1's per-communicator and per-session buffers (`MPI_Comm_attach_buffer`,
//! `MPI_Session_attach_buffer`): a routed message counts against the process buffer's size only, and
//! `MPI_Buffer_flush`/`MPI_Buffer_iflush`/`MPI_Comm_flush_buffer` wait for MPICH's own buffered
//! messages, not ours.
//!
//! Cost on everything else: the buffered-send interposers are one lookup (`native_stream_of`) and a
//! call through `next!`; `MPI_Start`/`MPI_Startall`/`MPI_Request_free` one relaxed load while no
//! persistent buffered send is recorded (always, under `implicit`).
use crate::native_fixes::native_streams::{native_stream_index_of, native_stream_of, THREAD_BOUND};
use crate::runtime;
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// MPICH's `MPI_BSEND_OVERHEAD` (96 in the `mpi.h` of 4.0.2 and 5.0.2): the space each buffered
/// message takes in the attached buffer besides its packed bytes.
const BSEND_OVERHEAD: i64 = 96;
/// MPI 4.1's `MPI_BUFFER_AUTOMATIC` (MPICH: `(void *) -2`): a buffer that never runs out.
const MPI_BUFFER_AUTOMATIC: *mut c_void = -2isize as *mut c_void;

/// Size of the buffer attached with `MPI_Buffer_attach` (0: none; `i64::MAX`: automatic).
static ATTACHED: AtomicI64 = AtomicI64::new(0);
/// Space the routed messages not yet known complete take (packed bytes + overhead each).
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);
/// How many routed messages are not yet known complete, all lanes together.
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// A message up to this size (packed) leaves without the receiver matching it (eager protocols: below
/// MPICH's shared-memory cell, 8 KiB, and its single-copy threshold, `MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`
/// = 8 KiB); a larger one may need the receiver to match it first.
const DEPART_MAX_BYTES: i64 = 4096;

/// A routed message whose request is not freed yet.
struct Held {
    /// The packed message (MPICH reads it until the request completes).
    memory: Vec<u8>,
    space: i64,
    /// The stream-table slot of its communicator's stream.
    slot: usize,
    /// Seen complete by a thread that may not free it (`Lane::observe`): its space is given back
    /// already; whoever may drive its stream frees the request.
    settled: bool,
    /// It leaves without its receiver matching it (eager: packed size up to `DEPART_MAX_BYTES`, not to
    /// this process itself), so a blocking call that cannot test it waits for it first
    /// (`before_blocking`).
    departs: bool,
}

/// One thread's routed messages: their requests (for `MPI_Testsome`) and, at the same index, what each
/// holds; `spare` keeps freed messages' memory for reuse.
#[derive(Default)]
struct Lane {
    requests: Vec<MPI_Request>,
    held: Vec<Held>,
    spare: Vec<Vec<u8>>,
    indices: Vec<c_int>,
}

/// A message is complete: its space counts no more.
fn give_back(space: i64) {
    IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
    PENDING.fetch_sub(1, Ordering::AcqRel);
}

impl Lane {
    fn push(&mut self, request: MPI_Request, held: Held) {
        self.requests.push(request);
        self.held.push(held);
        PENDING.fetch_add(1, Ordering::AcqRel);
        THREAD_BOUND.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets the messages whose requests a completion call freed (now `MPI_REQUEST_NULL`).
    fn sweep(&mut self) {
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
    unsafe fn reap(&mut self) {
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
    unsafe fn reap_from_progress_of(&mut self, current: usize) {
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
    unsafe fn observe(&mut self) {
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
    unsafe fn drive_claimed(&mut self) -> bool {
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
    fn adopt(&mut self, slot: usize) {
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
    fn memory(&mut self, bytes: usize) -> Vec<u8> {
        match self.spare.iter().position(|m| m.capacity() >= bytes) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(bytes),
        }
    }
}

/// A lane in the registry: its thread and, for their looks, detach, finalize and the threads that wait
/// for space reach it through the lock.
#[derive(Default)]
struct Shared {
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
fn prune() {
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
fn with_own_lane<R>(f: impl FnOnce(&mut Lane) -> R) -> Option<R> {
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
fn others(drive_exited: bool) {
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

/// After `MPI_Buffer_attach(_c)`.
fn attached(rc: c_int, buffer: *mut c_void, size: i64) -> c_int {
    if rc == MPI_SUCCESS {
        let size = if buffer == MPI_BUFFER_AUTOMATIC { i64::MAX } else { size.max(0) };
        ATTACHED.store(size, Ordering::Release);
    }
    rc
}

pub unsafe fn buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    attached(next!(MPI_Buffer_attach)(buffer, size), buffer, size as i64)
}

pub unsafe fn buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    attached(next!(MPI_Buffer_attach_c)(buffer, size), buffer, size)
}

/// Before `MPI_Buffer_detach(_c)`: waits until every routed message is complete (module doc: the
/// calling thread tests its own and the exited threads', and observes the live threads').
fn drain() {
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

pub unsafe fn buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    drain();
    let rc = next!(MPI_Buffer_detach)(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

pub unsafe fn buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    drain();
    let rc = next!(MPI_Buffer_detach_c)(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

/// What one try of a routed send did.
enum Try {
    /// Sent (or failed with this code).
    Done(c_int),
    /// No space now.
    Wait,
    /// MPICH's own call: the buffer was detached or shrank meanwhile.
    Mpich,
}

/// The routed buffered send of `count` elements of `datatype` at `buf` (see the module doc). `mpich`
/// makes MPICH's own call instead: for a message that can never fit, a send to `MPI_PROC_NULL`, or
/// arguments MPICH must judge.
#[allow(clippy::too_many_arguments)]
unsafe fn send_routed(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    let p = pmpi::pmpi();
    let mut packed: MPI_Count = 0;
    if dest == MPI_PROC_NULL || (p.PMPI_Pack_size_c)(count, datatype, comm, &mut packed) != MPI_SUCCESS {
        return mpich();
    }
    let space = packed + BSEND_OVERHEAD;
    let Some(slot) = native_stream_index_of(comm) else { return mpich() };
    if space > ATTACHED.load(Ordering::Acquire) {
        // Too large for the buffer even when empty, or no buffer: MPICH's MPI_ERR_BUFFER.
        return mpich();
    }
    loop {
        let step = with_own_lane(|lane| {
            lane.adopt(slot);
            lane.reap();
            let limit = ATTACHED.load(Ordering::Acquire);
            if space > limit {
                return Try::Mpich;
            }
            if IN_FLIGHT.fetch_add(space, Ordering::AcqRel) + space > limit {
                IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
                return Try::Wait;
            }
            let mut memory = lane.memory(packed as usize);
            let mut position: MPI_Count = 0;
            let mut rc = (p.PMPI_Pack_c)(buf, count, datatype, memory.as_mut_ptr().cast(), packed, &mut position, comm);
            let mut request = MPI_REQUEST_NULL;
            if rc == MPI_SUCCESS {
                rc = next!(MPI_Isend_c)(memory.as_ptr().cast(), position, MPI_PACKED, dest, tag, comm, &mut request);
            }
            if rc == MPI_SUCCESS {
                // One test, never a wait: a message that left at once (eager, room in the queue) gives
                // its space back now; any other stays pending (module doc).
                let mut done = 0;
                next!(MPI_Test)(&mut request, &mut done, MPI_STATUS_IGNORE);
            }
            if rc != MPI_SUCCESS || request == MPI_REQUEST_NULL {
                IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
                lane.spare.push(memory);
                return Try::Done(rc);
            }
            let mut me = MPI_PROC_NULL;
            (p.PMPI_Comm_rank)(comm, &mut me);
            let departs = packed <= DEPART_MAX_BYTES && dest != me;
            lane.push(request, Held { memory, space, slot, settled: false, departs });
            Try::Done(MPI_SUCCESS)
        });
        match step {
            Some(Try::Done(rc)) => return rc,
            Some(Try::Wait) => {
                // Our own were tested above; the other threads' may have completed unseen, and the
                // exited threads' need a driver (module doc).
                others(true);
                std::thread::yield_now();
            }
            // The buffer went away meanwhile, or this thread's lane is busy (re-entered from MPICH's
            // progress) or gone (the thread is exiting): MPICH's own call.
            Some(Try::Mpich) | None => return mpich(),
        }
    }
}

pub unsafe fn bsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend", || unsafe {
        send_routed(buf, count.into(), datatype, dest, tag, comm, || {
            next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
        })
    })
}

pub unsafe fn bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend_c", || unsafe {
        send_routed(buf, count, datatype, dest, tag, comm, || next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm))
    })
}

/// A routed `MPI_Ibsend`: the message is buffered when the call returns, so its request is complete
/// at once (a send to `MPI_PROC_NULL`, as MPICH 5 returns a completed request for a buffered send).
unsafe fn ibsend_routed(
    comm: MPI_Comm,
    tag: c_int,
    request: *mut MPI_Request,
    send: impl FnOnce() -> c_int,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    if request.is_null() {
        return mpich();
    }
    let rc = send();
    if rc != MPI_SUCCESS {
        return rc;
    }
    (pmpi::pmpi().PMPI_Isend)(std::ptr::null(), 0, MPI_BYTE, MPI_PROC_NULL, tag, comm, request)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
    }
    let mpich = || next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
    ffi_guard("MPI_Ibsend", || unsafe {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count.into(), datatype, dest, tag, comm, || {
                    next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
    }
    let mpich = || next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
    ffi_guard("MPI_Ibsend_c", || unsafe {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count, datatype, dest, tag, comm, || {
                    next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

/// The arguments of a persistent buffered send made on a native stream communicator.
#[derive(Clone, Copy)]
struct Recorded {
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
}
// The pointer is the application's buffer, only passed back to MPICH.
unsafe impl Send for Recorded {}

static PERSISTENT: Mutex<Option<HashMap<MPI_Request, Recorded>>> = Mutex::new(None);
/// How many are recorded; 0 keeps `MPI_Start`/`MPI_Startall`/`MPI_Request_free` on their pass-through path.
static LIVE: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

fn recorded(request: MPI_Request) -> Option<Recorded> {
    let map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    map.as_ref()?.get(&request).copied()
}

#[allow(clippy::too_many_arguments)]
/// After `MPI_Bsend_init(_c)`'s constructor (`create` makes the call, and the completion calls'
/// own record, `persistent::persistent_created`): records the arguments if `comm` is a native stream
/// communicator.
pub unsafe fn persistent_bsend_created(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    create: &dyn Fn() -> c_int,
) -> c_int {
    let rc = create();
    if rc != MPI_SUCCESS || request.is_null() || *request == MPI_REQUEST_NULL || native_stream_of(comm).is_none() {
        return rc;
    }
    let args = Recorded { buf, count, datatype, dest, tag, comm };
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.get_or_insert_with(HashMap::new).insert(*request, args).is_none() {
        LIVE.fetch_add(1, Ordering::Release);
    }
    rc
}

/// Before `MPI_Request_free` of `request` succeeds: the handle's value (to forget it after), if any
/// persistent buffered send is recorded.
#[inline(always)]
pub unsafe fn freeing(request: *const MPI_Request) -> Option<MPI_Request> {
    if none_live() || request.is_null() {
        None
    } else {
        Some(*request)
    }
}

/// After `MPI_Request_free` of `handle` succeeded.
pub fn freed(handle: MPI_Request) {
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.as_mut().and_then(|m| m.remove(&handle)).is_some() {
        LIVE.fetch_sub(1, Ordering::Release);
    }
}

/// Starts one request: a recorded persistent buffered send as our routed buffered send (MPICH's
/// request stays inactive), anything else through the next definition.
unsafe fn start_one(request: *mut MPI_Request) -> c_int {
    let Some(r) = recorded(*request) else {
        return next!(MPI_Start)(request);
    };
    if native_stream_of(r.comm).is_none() {
        // The communicator was freed under its persistent request: MPICH's own start reports it.
        return next!(MPI_Start)(request);
    }
    send_routed(r.buf, r.count, r.datatype, r.dest, r.tag, r.comm, || {
        next!(MPI_Bsend_c)(r.buf, r.count, r.datatype, r.dest, r.tag, r.comm)
    })
}

pub unsafe fn start(request: *mut MPI_Request) -> c_int {
    if none_live() || request.is_null() {
        return next!(MPI_Start)(request);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    unsafe fn slow(request: *mut MPI_Request) -> c_int {
        ffi_guard("MPI_Start", || unsafe { start_one(request) })
    }
    slow(request)
}

pub unsafe fn startall(count: c_int, array: *mut MPI_Request) -> c_int {
    if none_live() || array.is_null() || count <= 0 {
        return next!(MPI_Startall)(count, array);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    unsafe fn slow(count: c_int, array: *mut MPI_Request) -> c_int {
        ffi_guard("MPI_Startall", || unsafe {
            let requests = std::slice::from_raw_parts(array, count as usize);
            if requests.iter().all(|r| recorded(*r).is_none()) {
                return next!(MPI_Startall)(count, array);
            }
            // MPI_Startall is MPI_Start on each request, in order (MPI 4.1 §3.9).
            for i in 0..count as usize {
                let rc = start_one(array.add(i));
                if rc != MPI_SUCCESS {
                    return rc;
                }
            }
            MPI_SUCCESS
        })
    }
    slow(count, array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native_fixes::native_streams::PANIC_FOR_TEST;

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

    /// `MPI_BUFFER_AUTOMATIC` never runs out; a failed attach records nothing.
    #[test]
    fn attach_records_the_size_only_on_success() {
        assert_eq!(attached(MPI_ERR_BUFFER, std::ptr::null_mut(), 4096), MPI_ERR_BUFFER);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 0);
        attached(MPI_SUCCESS, MPI_BUFFER_AUTOMATIC, 0);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), i64::MAX);
        attached(MPI_SUCCESS, 0x1000 as *mut c_void, 4096);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 4096);
        ATTACHED.store(0, Ordering::Relaxed);
    }

    /// A panic inside the buffered-send interposers comes back as `MPI_ERR_INTERN` (the exported
    /// symbols, as C calls them), never as an abort.
    #[test]
    fn a_panic_in_a_buffered_send_interposer_returns_mpi_err_intern() {
        PANIC_FOR_TEST.with(|p| p.set(true));
        let mut request = MPI_REQUEST_NULL;
        let one = 1;
        let p = &one as *const i32 as *const c_void;
        let bsend =
            unsafe { crate::interposed::MPI_Bsend(p, 1, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle) };
        let ibsend_c = unsafe {
            crate::interposed::MPI_Ibsend_c(
                p,
                1,
                MPI_INT as WideHandle,
                0,
                0,
                MPI_COMM_WORLD as WideHandle,
                &mut request,
            )
        };
        PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((bsend, ibsend_c), (MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

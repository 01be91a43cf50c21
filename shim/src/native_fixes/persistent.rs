//! Persistent requests on native stream communicators (point-to-point `MPI_*_init`, the MPI-4 persistent
//! collectives, their large-count forms).
//!
//! Natively their waits never turn the stream's reserved VCI, where `MPI_Start`'s operation runs
//! (docs/native-defects.md, "Global progress skips a stream's reserved VCI"). We record each persistent request made on a native stream communicator (`persistent_created`), and
//! the completion calls, when one of theirs is recorded, wait with the non-blocking form of the call and
//! a turn of the stream's own progress between polls (`native_streams::progress_turn`: skipped while
//! another driver holds the stream, which then progresses it). A stale record (a handle freed where we
//! did not see it and reused) costs only an extra progress turn.
//!
//! The same completion calls also keep MPI's progress rule for wrapped nonblocking collectives: while
//! the calling thread has some outstanding, they turn those collectives' streams as well
//! (`wrapped_collectives`). And while the calling thread has routed buffered messages pending
//! (`buffered`: sent on its streams, not yet complete), they test those between their polls, so a
//! thread that waits for anything keeps delivering its buffered messages (a blocking wait becomes a
//! poll then).
//!
//! Cost on everything else: while no such request is live and no thread has a wrapped collective
//! outstanding or a routed buffered message pending (always, under `implicit`), each completion
//! interposer is two relaxed loads and a call through `next!` ([performance.md](../../docs/performance.md)).
use crate::native_fixes::buffered;
use crate::native_fixes::native_streams::{native_record_of, native_stream_index_of, progress_turn, THREAD_BOUND};
use crate::native_fixes::wrapped_collectives;
use crate::runtime;
use crate::streams::StreamSlot;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::{request_slice, PersistentKind};
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Recorded persistent requests: the stream slot each was made on, and whether it is partitioned. A
/// sharded map, so that the completion calls of threads waiting for different requests take no common
/// lock.
fn recorded() -> &'static DashMap<MPI_Request, (usize, bool)> {
    static RECORDED: OnceLock<DashMap<MPI_Request, (usize, bool)>> = OnceLock::new();
    RECORDED.get_or_init(DashMap::new)
}
/// How many are recorded; 0 keeps every completion call on its pass-through path.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether the completion calls can pass through: no recorded request is live and the calling thread
/// has no wrapped nonblocking collective outstanding (whose streams its waits must turn too) and no
/// routed buffered message pending (which its waits must test too).
#[inline(always)]
fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0 && (THREAD_BOUND.load(Ordering::Relaxed) == 0 || !thread_bound_here())
}

/// Whether the calling thread itself has work that only its completion calls progress.
#[cold]
fn thread_bound_here() -> bool {
    wrapped_collectives::thread_has_outstanding() || buffered::own_pending()
}

/// Whether a wait must poll (and not block in MPICH's wait): it has streams to turn, or the calling
/// thread has buffered messages to test.
fn must_poll(streams: &[&StreamSlot]) -> bool {
    !streams.is_empty() || buffered::own_pending()
}

/// One turn of what a completion call progresses besides its requests: the streams, then the calling
/// thread's buffered messages.
fn turn(streams: &[&StreamSlot]) {
    streams.iter().for_each(|s| progress_turn(s));
    buffered::progress_own();
}

fn record(request: MPI_Request, slot: usize, partitioned: bool) {
    if recorded().insert(request, (slot, partitioned)).is_none() {
        LIVE.fetch_add(1, Ordering::Release);
    }
}

fn forget(request: MPI_Request) {
    if recorded().remove(&request).is_some() {
        LIVE.fetch_sub(1, Ordering::Release);
    }
}

/// The streams behind the recorded requests among `requests` (deduplicated; empty if none).
/// With them, the streams on which this thread has wrapped nonblocking collectives outstanding
/// (`wrapped_collectives`: MPI's progress rule).
fn streams_of(requests: &[MPI_Request]) -> Vec<&'static StreamSlot> {
    let Some(rt) = runtime::active() else { return Vec::new() };
    let mut streams = wrapped_collectives::thread_streams();
    if LIVE.load(Ordering::Relaxed) == 0 {
        // Only this thread's collectives brought the call here: no need for the shared record.
        return streams;
    }
    let map = recorded();
    let mut slots: Vec<usize> = requests.iter().filter_map(|r| map.get(r).map(|e| e.0)).collect();
    slots.sort_unstable();
    slots.dedup();
    for s in slots.into_iter().map(|s| rt.streams.slot(s)) {
        if !streams.iter().any(|t| std::ptr::eq(*t, s)) {
            streams.push(s);
        }
    }
    streams
}

/// Whether a recorded partitioned request is among `requests`.
fn any_partitioned(requests: &[MPI_Request]) -> bool {
    let map = recorded();
    requests.iter().any(|r| map.get(r).is_some_and(|e| e.1))
}

/// A persistent request's constructor (`create` makes the call on the communicator it is given):
/// records the request if `comm` is a native stream communicator. A persistent collective's schedule
/// goes to MPICH's one global list at each `MPI_Start`, as a nonblocking collective's does: a policy
/// communicator's is made on its plain base, for the same reason (`wrapped_collectives::schedule_comm`),
/// and still recorded with the communicator's stream, so that its waits turn that stream too.
pub unsafe fn persistent_created(
    comm: MPI_Comm,
    request: *mut MPI_Request,
    kind: PersistentKind,
    create: &dyn Fn(MPI_Comm) -> c_int,
) -> c_int {
    let on = match kind {
        PersistentKind::Collective | PersistentKind::NeighbourhoodCollective => match native_record_of(comm) {
            Some(record) => wrapped_collectives::schedule_comm(
                comm,
                record.collectives,
                kind == PersistentKind::NeighbourhoodCollective,
            ),
            None => comm,
        },
        _ => comm,
    };
    let rc = create(on);
    if rc != MPI_SUCCESS || request.is_null() || *request == MPI_REQUEST_NULL {
        return rc;
    }
    mpixstream_wrappers::guard::ffi_guard("persistent request", || unsafe {
        if let Some(index) = native_stream_index_of(comm) {
            record(*request, index, kind == PersistentKind::Partitioned);
        }
        rc
    })
}

/// (status, whether every one of `requests` is complete), asked without completing any
/// (`MPI_Request_get_status`; a null or inactive request counts as complete). An error ends the wait.
unsafe fn all_complete(requests: &[MPI_Request]) -> (c_int, bool) {
    let p = pmpi::pmpi();
    for &r in requests {
        let mut flag = 0;
        let rc = (p.PMPI_Request_get_status)(r, &mut flag, MPI_STATUS_IGNORE);
        if rc != MPI_SUCCESS {
            return (rc, true);
        }
        if flag == 0 {
            return (MPI_SUCCESS, false);
        }
    }
    (MPI_SUCCESS, true)
}

/// Polls `test` (the non-blocking form of a completion call) until it reports completion, turning the
/// streams' progress and the calling thread's buffered messages between polls.
unsafe fn poll(streams: &[&StreamSlot], mut test: impl FnMut() -> (c_int, bool)) -> c_int {
    loop {
        let (rc, done) = test();
        if rc != MPI_SUCCESS || done {
            return rc;
        }
        turn(streams);
    }
}

// The completion interposers are generated from the `lean:test` and `lean:wait` rows of
// wrappers/mpi.prototypes: each passes straight through while `completion_passes`, else calls one of
// the two functions below out of line.

/// Whether a completion call passes straight through (two relaxed loads while nothing is recorded).
#[inline(always)]
pub fn completion_passes() -> bool {
    none_live()
}

/// `MPI_Test*`: one turn of the requests' streams (and of what the calling thread must progress), then
/// `test`, MPICH's call through the next definition.
/// `count` requests at `array` (what `request_slice` makes of them); the slices made of them here end
/// before MPICH's calls change the array.
pub unsafe fn completion_test(count: c_int, array: *mut MPI_Request, test: impl FnOnce() -> c_int) -> c_int {
    turn(&streams_of(request_slice(count, array)));
    test()
}

/// `MPI_Wait*`: MPICH's blocking call (`wait`) where nothing of the requests' is on a stream and the
/// calling thread has nothing of its own to progress; else `test`, its non-blocking form (returning
/// (error, done)), polled with turns of the streams between polls. `all`: `MPI_Waitall`, whose
/// partitioned requests are waited for without completing one, then completed by MPICH's
/// `MPI_Waitall`, because MPICH 5.0.2's `MPI_Testall` fails a completed partitioned request
/// ([native-defects.md](../../docs/native-defects.md#mpi_testall-on-partitioned-requests)).
pub unsafe fn completion_wait(
    count: c_int,
    array: *mut MPI_Request,
    all: bool,
    wait: impl FnOnce() -> c_int,
    test: impl FnMut() -> (c_int, bool),
) -> c_int {
    let streams = streams_of(request_slice(count, array));
    if !must_poll(&streams) {
        return wait();
    }
    if all && any_partitioned(request_slice(count, array)) {
        poll(&streams, || all_complete(request_slice(count, array)));
        return wait();
    }
    poll(&streams, test)
}

pub unsafe fn request_free(request: *mut MPI_Request) -> c_int {
    if none_live() || request.is_null() {
        return next!(MPI_Request_free)(request);
    }
    let handle = *request;
    let rc = next!(MPI_Request_free)(request);
    if rc == MPI_SUCCESS {
        mpixstream_wrappers::guard::ffi_guard("MPI_Request_free", || {
            forget(handle);
            MPI_SUCCESS
        });
    }
    rc
}

//! Persistent requests on native stream communicators (point-to-point `MPI_*_init`, the MPI-4 persistent
//! collectives, their large-count forms), and the completion calls' claims.
//!
//! Natively their waits never turn the stream's reserved VCI, where `MPI_Start`'s operation runs
//! (docs/native-defects.md, "Global progress skips a stream's reserved VCI"). We record each persistent
//! request made on a native stream communicator (`persistent_created`), and the completion calls, when
//! one of theirs is recorded, wait with the non-blocking form of the call and a turn of the stream's own
//! progress between polls. A stale record (a handle freed where we did not see it and reused) costs
//! only an extra progress turn.
//!
//! Every completion call on requests of streams' reserved endpoints holds those endpoints' claims for
//! the call (`streams::ClaimSet`): a request names its endpoint by its handle's pool bits
//! (`StreamTable::of_request`), a recorded persistent request by its record. MPI's progress rule for the
//! rest (the other streams, the operations nobody waits for) is the progress helper's (`crate::helper`),
//! which every poll here runs once.
//!
//! Cost on everything else: while no stream has a reserved endpoint and no persistent request of one is
//! recorded (always, under `implicit` without the MPIX API), each completion interposer is two relaxed
//! loads and a call through `next!`; with reserved endpoints, a look at each request's handle and the
//! claims of the endpoints found ([performance.md](../../docs/performance.md)).
use crate::forward;
use crate::native_fixes::native_streams::{native_record_of, native_stream_index_of, progress_turn};
use crate::native_fixes::wrapped_collectives;
use crate::runtime::{self, Runtime};
use crate::streams;
use dashmap::DashMap;
use mpixstream_wrappers::app::{AppArg, AppArray};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::PersistentKind;
use mpixstream_wrappers::mpi::Request;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A recorded persistent request: the stream slot it was made on, and what it is.
#[derive(Clone, Copy)]
struct Recorded {
    slot: usize,
    partitioned: bool,
    /// A point-to-point send (`MPI_Send_init`, `Ssend_init`, `Rsend_init`): `MPI_Cancel` tells it
    /// (`native_fixes::cancel`).
    send: bool,
}

/// Recorded persistent requests. A sharded map, so that the completion calls of threads waiting for
/// different requests take no common lock.
fn recorded() -> &'static DashMap<MPI_Request, Recorded> {
    static RECORDED: OnceLock<DashMap<MPI_Request, Recorded>> = OnceLock::new();
    RECORDED.get_or_init(DashMap::new)
}
/// How many are recorded; 0 keeps every completion call on its pass-through path.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether no persistent request of a stream is recorded (one relaxed load).
#[inline(always)]
pub fn none_recorded() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

/// The stream a recorded persistent request was made on.
pub fn stream_of(request: MPI_Request) -> Option<usize> {
    if none_recorded() {
        return None;
    }
    recorded().get(&request).map(|e| e.slot)
}

/// The stream a recorded persistent point-to-point send was made on (`MPI_Cancel`; one relaxed load
/// while none is recorded).
pub fn send_stream_of(request: MPI_Request) -> Option<usize> {
    if none_recorded() {
        return None;
    }
    recorded().get(&request).filter(|e| e.send).map(|e| e.slot)
}

/// `call` on persistent request `request` (`MPI_Start`), inside the endpoint of the stream it was
/// made on, if it is recorded.
pub fn claimed(request: MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    match (stream_of(request), runtime::active()) {
        (Some(s), Some(rt)) => {
            let _claim = rt.streams.slot(s).claim();
            call()
        }
        _ => call(),
    }
}

fn record(request: MPI_Request, entry: Recorded) {
    if recorded().insert(request, entry).is_none() {
        LIVE.fetch_add(1, Ordering::Release);
    }
}

fn forget(request: MPI_Request) {
    if recorded().remove(&request).is_some() {
        LIVE.fetch_sub(1, Ordering::Release);
    }
}

/// The endpoints `requests` enter, as a bit set of stream slots (`streams::ClaimSet`), and those of
/// the recorded persistent requests among them (which a completion call must turn itself). Inlined
/// into each completion call, with the map's part kept out of line: every wait on a stream's requests
/// runs the first loop, few ever have a persistent request recorded (benches/claim_cost.sh).
#[inline(always)]
fn endpoints_of(rt: &Runtime, requests: AppArray<MPI_Request>) -> (u64, u64) {
    let mut all = 0u64;
    for r in requests.iter() {
        if let Some(i) = rt.streams.of_request(r) {
            all |= 1 << i;
        }
    }
    if none_recorded() {
        return (all, 0);
    }
    let persistent = recorded_endpoints(requests);
    (all | persistent, persistent)
}

/// The endpoints of the recorded persistent requests among `requests`.
#[cold]
#[inline(never)]
fn recorded_endpoints(requests: AppArray<MPI_Request>) -> u64 {
    let map = recorded();
    let mut persistent = 0u64;
    for r in requests.iter() {
        if let Some(e) = map.get(&r) {
            persistent |= 1 << e.slot;
        }
    }
    persistent
}

/// One progress turn of each stream in the bit set (inside the endpoints the caller claimed).
fn turn(rt: &Runtime, mut slots: u64) {
    while slots != 0 {
        progress_turn(rt.streams.slot(slots.trailing_zeros() as usize));
        slots &= slots - 1;
    }
}

/// Whether a recorded partitioned request is among `requests`.
fn any_partitioned(requests: AppArray<MPI_Request>) -> bool {
    let map = recorded();
    requests.iter().any(|r| map.get(&r).is_some_and(|e| e.partitioned))
}

/// A persistent request's constructor (`create` makes the call on the communicator it is given):
/// records the request (the application's argument) if `comm` is a native stream communicator. A
/// persistent collective's schedule
/// goes to MPICH's one global list at each `MPI_Start`, as a nonblocking collective's does: a policy
/// communicator's is made on its plain base, for the same reason (`wrapped_collectives::schedule_comm`),
/// and is not recorded: on the implicit pool, MPICH's own waits progress it.
pub fn persistent_created(
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
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
    if rc != MPI_SUCCESS || on != comm {
        // On the plain base: on the implicit pool, where MPICH's own waits progress it.
        return rc;
    }
    let made = match request.get() {
        Some(made) if made != MPI_REQUEST_NULL => made,
        _ => return rc,
    };
    mpixstream_wrappers::guard::ffi_guard("persistent request", || {
        if let Some(index) = native_stream_index_of(comm) {
            let partitioned = kind == PersistentKind::Partitioned;
            record(made, Recorded { slot: index, partitioned, send: kind == PersistentKind::PointToPointSend });
        }
        rc
    })
}

/// (status, whether every one of `requests` is complete), asked without completing any
/// (`MPI_Request_get_status`; a null or inactive request counts as complete). An error ends the wait.
fn all_complete(requests: AppArray<MPI_Request>) -> (c_int, bool) {
    for r in requests.iter() {
        match Request(r).status() {
            Err(rc) => return (rc, true),
            Ok(None) => return (MPI_SUCCESS, false),
            Ok(Some(_)) => {}
        }
    }
    (MPI_SUCCESS, true)
}

// The completion interposers are generated from the `lean:test` and `lean:wait` rows of
// wrappers/mpi.prototypes: each passes straight through while `completion_passes`, else calls one of
// the two functions below out of line.

/// Whether a completion call passes straight through: no stream has a reserved endpoint and no
/// persistent request of one is recorded (two relaxed loads).
#[inline(always)]
pub fn completion_passes() -> bool {
    !streams::any_reserved() && none_recorded()
}

/// `MPI_Test*`: `test`, MPICH's call through the next definition, inside the endpoints its requests
/// enter, after a turn of the recorded persistent requests' streams. `requests`: the application's
/// array (read before `test` changes it).
pub fn completion_test(requests: AppArray<MPI_Request>, test: impl FnOnce() -> c_int) -> c_int {
    let Some(rt) = runtime::active() else { return test() };
    let (all, persistent) = endpoints_of(rt, requests);
    let _claims = rt.streams.claim_set(all);
    turn(rt, persistent);
    test()
}

/// `MPI_Wait*`: MPICH's blocking call (`wait`) inside the endpoints its requests enter; where a
/// recorded persistent request is among them, `test`, its non-blocking form (returning (error, done)),
/// polled with turns of their streams and a help between polls (MPICH's wait would never turn the
/// stream). `all`: `MPI_Waitall`, whose partitioned requests are waited for without completing one,
/// then completed by MPICH's `MPI_Waitall`, because MPICH 5.0.2's `MPI_Testall` fails a completed
/// partitioned request ([native-defects.md](../../docs/native-defects.md#mpi_testall-on-partitioned-requests)).
/// `requests`: the application's array, read between the calls of `wait` and `test` that change it.
/// Inlined into each interposer's out-of-line part: every wait on a stream's requests takes the path
/// without a persistent request (benches/claim_cost.sh), the polls stay out of line.
#[inline(always)]
pub fn completion_wait(
    requests: AppArray<MPI_Request>,
    all: bool,
    wait: impl FnOnce() -> c_int,
    test: impl FnMut() -> (c_int, bool),
) -> c_int {
    let Some(rt) = runtime::active() else { return wait() };
    let (endpoints, persistent) = endpoints_of(rt, requests);
    if persistent == 0 {
        let _claims = rt.streams.claim_set(endpoints);
        return wait();
    }
    polled_wait(rt, requests, all, endpoints, persistent, wait, test)
}

/// [`completion_wait`] where a recorded persistent request is among `requests` (`persistent`: their
/// streams; `endpoints`: every stream the requests enter).
#[cold]
#[inline(never)]
fn polled_wait(
    rt: &Runtime,
    requests: AppArray<MPI_Request>,
    all: bool,
    endpoints: u64,
    persistent: u64,
    wait: impl FnOnce() -> c_int,
    mut test: impl FnMut() -> (c_int, bool),
) -> c_int {
    let partitioned = all && any_partitioned(requests);
    loop {
        let (rc, done) = {
            let _claims = rt.streams.claim_set(endpoints);
            let polled = if partitioned { all_complete(requests) } else { test() };
            if !polled.1 {
                turn(rt, persistent);
            }
            polled
        };
        if rc != MPI_SUCCESS || done {
            if partitioned && rc == MPI_SUCCESS {
                let _claims = rt.streams.claim_set(endpoints);
                return wait();
            }
            return rc;
        }
        // Between polls, outside the endpoints: the rest of MPI's progress rule.
        crate::helper::help(rt, false);
    }
}

/// `MPI_Request_free` of `request`, which held `handle` (`None`: a null pointer), through the next
/// definition; a recorded persistent request freed is forgotten.
pub fn request_free(request: AppArg<MPI_Request>, handle: Option<MPI_Request>) -> c_int {
    let handle = handle.filter(|_| !none_recorded());
    let rc = forward::MPI_Request_free(request);
    let Some(handle) = handle else { return rc };
    if rc == MPI_SUCCESS {
        mpixstream_wrappers::guard::ffi_guard("MPI_Request_free", || {
            forget(handle);
            MPI_SUCCESS
        });
    }
    rc
}

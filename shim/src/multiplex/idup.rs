//! `MPI_Comm_idup`/`MPI_Comm_idup_with_info` of a multiplex communicator: multiplex too, with the same
//! streams and indices, ready when its request completes (as natively).
//!
//! The application's request is an MPICH extended generalized request whose poll function (run in the
//! thread that waits for it) tests MPICH's idup of the user's communicator and completes once the
//! hidden communicators exist too. Two ways to make them:
//! - **nonblocking dups** of the parent's hidden communicators (`Endpoints::idup`): MPICH's idup keeps a
//!   stream communicator's stream, so each child is on its original's endpoints, and the poll function
//!   tests their requests too, turning the local streams; nothing of ours runs between the calls.
//!   Wherever no other thread of the application can run MPICH's progress meanwhile (below
//!   `MPI_THREAD_MULTIPLE`) and wherever the hidden communicators are all on the implicit pool (the
//!   pooled layout). As for MPICH's own idup of a stream communicator, the dups of the hidden stream
//!   communicators progress only in calls that turn their streams, the waits and tests of the idup: a
//!   process that waits for its idup before it receives what a peer sends before waiting for its own
//!   hangs there, streams layout below `MPI_THREAD_MULTIPLE` only (docs/multiplex.md);
//! - **a thread of ours**, in the streams layout under `MPI_THREAD_MULTIPLE`: MPICH progresses an idup's
//!   schedule from whichever thread runs progress, and would post a round of a stream communicator's
//!   idup on its unlocked reserved VCI beside the stream's owner
//!   ([native-defects.md](../../../docs/native-defects.md)). The thread waits for an idup of the
//!   parent's `P_0` (a plain communicator on the implicit pool with the same group and ranks) and
//!   makes the hidden communicators from it with blocking collectives on that base only (as
//!   `MPI_Comm_dup` of a multiplex communicator does), then registers the record; one thread per idup,
//!   because idups of different communicators may be started in different orders on different
//!   processes. (Blocking collectives in the poll function instead would hang a peer that waits for
//!   something else before it waits for its idup.)
use super::endpoints::Endpoints;
use super::{creation, Multiplex};
use crate::native_fixes::greq::{collective_status, poll_each};
use crate::runtime::Runtime;
use crate::thread::BackgroundThread;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// One nonblocking dup in flight.
struct IdupOp {
    /// MPICH's idup of the user's communicator; `MPI_REQUEST_NULL` once complete.
    inner: AtomicI32,
    /// The first error of MPICH's idup or of our thread (the request's error).
    error: AtomicI32,
    /// Our thread made and registered the hidden communicators (or failed).
    built: AtomicBool,
    /// `MPI_Grequest_complete` was called.
    completed: AtomicBool,
    /// The application's (generalized) request.
    greq: AtomicI32,
    /// The nonblocking way: the hidden communicators being dupped, until they are (then `built`).
    dups: Mutex<Option<Dups>>,
}

/// A multiplex idup's hidden communicators on their way (the nonblocking way), and what the record
/// needs once they are there.
struct Dups {
    rt: &'static Runtime,
    newcomm: MPI_Comm,
    endpoints: Option<Endpoints>,
    requests: Vec<MPI_Request>,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
}

// The handles and requests are MPICH's integers; the runtime is shared state.
unsafe impl Send for Dups {}

/// After MPICH's `MPI_Comm_idup*` of the multiplex communicator `parent` gave `newcomm` and
/// `*request`: replaces `*request` by ours, and starts the nonblocking dups or our thread (module doc).
pub unsafe fn started(rt: &'static Runtime, parent: &Multiplex, newcomm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    if rt.thread_multiple() && parent.on_streams() {
        return with_thread(rt, parent, newcomm, request);
    }
    let (endpoints, requests) = match parent.endpoints.idup() {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    let dups = Dups {
        rt,
        newcomm,
        endpoints: Some(endpoints),
        requests,
        rank: parent.rank,
        counts: parent.counts.clone(),
        tag_ub: parent.tag_ub,
        streams: parent.streams.clone(),
    };
    match start_request(request, Some(dups)) {
        Ok(_) => MPI_SUCCESS,
        Err(rc) => rc,
    }
}

/// Our request in place of MPICH's idup request `*request` (which it tests).
unsafe fn start_request(request: *mut MPI_Request, dups: Option<Dups>) -> Result<Arc<IdupOp>, c_int> {
    let op = Arc::new(IdupOp {
        inner: AtomicI32::new(*request),
        error: AtomicI32::new(MPI_SUCCESS),
        built: AtomicBool::new(false),
        completed: AtomicBool::new(false),
        greq: AtomicI32::new(MPI_REQUEST_NULL),
        dups: Mutex::new(dups),
    });
    let extra = Arc::into_raw(op.clone()) as *mut c_void;
    let mut greq = MPI_REQUEST_NULL;
    let rc =
        (pmpi().PMPIX_Grequest_start)(greq_query, greq_free, greq_cancel, greq_poll, Some(greq_wait), extra, &mut greq);
    if rc != MPI_SUCCESS {
        drop(Arc::from_raw(extra as *const IdupOp));
        return Err(rc);
    }
    op.greq.store(greq, Ordering::Release);
    *request = greq;
    Ok(op)
}

/// The way with a thread of ours (module doc).
unsafe fn with_thread(rt: &'static Runtime, parent: &Multiplex, newcomm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    let p = pmpi();
    // The base: an idup of the parent's plain P_0 (none where no process has an index).
    let (mut base, mut base_req) = (MPI_COMM_NULL, MPI_REQUEST_NULL);
    if let Some(plain) = parent.endpoints.plain() {
        let rc = (p.PMPI_Comm_idup)(plain, &mut base, &mut base_req);
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    let op = match start_request(request, None) {
        Ok(op) => op,
        Err(rc) => return rc,
    };
    let (rank, counts, tag_ub, streams) = (parent.rank, parent.counts.clone(), parent.tag_ub, parent.streams.clone());
    let worker = op.clone();
    let spawned = BackgroundThread::run("mpixstream-idup", move || {
        let rc = ffi_guard("MPI_Comm_idup (multiplex)", || unsafe {
            let p = pmpi();
            if base_req != MPI_REQUEST_NULL {
                let rc = (p.PMPI_Wait)(&mut base_req, MPI_STATUS_IGNORE);
                if rc != MPI_SUCCESS {
                    return rc;
                }
            }
            let base = if base == MPI_COMM_NULL { None } else { Some(base) };
            match creation::build(rt, newcomm, base, rank, counts, tag_ub, streams) {
                Ok(_) => MPI_SUCCESS,
                Err(rc) => rc,
            }
        });
        let _ = worker.error.compare_exchange(MPI_SUCCESS, rc, Ordering::AcqRel, Ordering::Acquire);
        worker.built.store(true, Ordering::Release);
    });
    match spawned {
        Ok(t) => {
            let mut threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
            threads.retain(|t| !t.finished());
            threads.push(t);
        }
        Err(_) => {
            // Without our thread the request would never complete: fail it now.
            op.error.store(MPI_ERR_OTHER, Ordering::Release);
            op.built.store(true, Ordering::Release);
        }
    }
    MPI_SUCCESS
}

/// The idup threads started and not yet joined (each ends once its hidden communicators exist).
static THREADS: Mutex<Vec<BackgroundThread>> = Mutex::new(Vec::new());

/// At `MPI_Finalize` (multiplex `shutdown`): every idup thread is joined. Each has ended already
/// unless the application finalizes with a multiplex idup it never completed (erroneous in MPI).
pub fn join_all() {
    let threads = std::mem::take(&mut *THREADS.lock().unwrap_or_else(|e| e.into_inner()));
    for t in threads {
        t.join();
    }
}

/// One look at `op`: tests MPICH's idup, completes the request once both parts are done. Never
/// blocks.
unsafe fn advance(op: &IdupOp) {
    let p = pmpi();
    let mut inner = op.inner.load(Ordering::Acquire);
    if inner != MPI_REQUEST_NULL {
        let mut flag = 0;
        let rc = (p.PMPI_Test)(&mut inner, &mut flag, MPI_STATUS_IGNORE);
        if rc != MPI_SUCCESS {
            let _ = op.error.compare_exchange(MPI_SUCCESS, rc, Ordering::AcqRel, Ordering::Acquire);
            inner = MPI_REQUEST_NULL;
        } else if flag == 0 {
            return;
        }
        op.inner.store(inner, Ordering::Release);
    }
    if let Ok(mut dups) = op.dups.try_lock() {
        if let Some(d) = dups.as_mut() {
            if !dups_done(d, op) {
                return;
            }
            *dups = None;
        }
    }
    if op.built.load(Ordering::Acquire) && !op.completed.swap(true, Ordering::AcqRel) {
        (p.PMPI_Grequest_complete)(op.greq.load(Ordering::Acquire));
    }
}

/// Whether the nonblocking dups are complete (then the record is registered and `op.built` set).
unsafe fn dups_done(d: &mut Dups, op: &IdupOp) -> bool {
    let p = pmpi();
    // MPICH's test of a request progresses the VCI of the request's pool, not the stream's reserved VCI
    // on which a stream communicator's idup runs: turn each local stream (this thread drives them all:
    // below MPI_THREAD_MULTIPLE, the only thread in MPI).
    for &slot in d.streams.iter().flatten() {
        crate::native_fixes::native_streams::progress_turn(d.rt.streams.slot(slot));
    }
    let mut rc = MPI_SUCCESS;
    for r in d.requests.iter_mut().filter(|r| **r != MPI_REQUEST_NULL) {
        let mut flag = 0;
        rc = (p.PMPI_Test)(r, &mut flag, MPI_STATUS_IGNORE);
        if rc != MPI_SUCCESS {
            break;
        }
    }
    if rc == MPI_SUCCESS && d.requests.iter().any(|&r| r != MPI_REQUEST_NULL) {
        return false;
    }
    if rc != MPI_SUCCESS {
        let _ = op.error.compare_exchange(MPI_SUCCESS, rc, Ordering::AcqRel, Ordering::Acquire);
    } else if let Some(endpoints) = d.endpoints.take() {
        let (counts, streams) = (std::mem::take(&mut d.counts), std::mem::take(&mut d.streams));
        creation::finish(d.rt, d.newcomm, d.rank, counts, d.tag_ub, streams, endpoints);
    }
    op.built.store(true, Ordering::Release);
    true
}

unsafe extern "C" fn greq_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    ffi_guard("MPI_Comm_idup (poll)", || unsafe {
        advance(&*(extra as *const IdupOp));
        MPI_SUCCESS
    })
}

/// `MPI_Waitall` calls this in a loop until the requests complete: one poll of each.
unsafe extern "C" fn greq_wait(
    count: c_int,
    states: *mut *mut c_void,
    _timeout: f64,
    _status: *mut MPI_Status,
) -> c_int {
    poll_each(count, states, greq_poll)
}

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    ffi_guard("MPI_Comm_idup (query)", || unsafe {
        collective_status(status, (*(extra as *const IdupOp)).error.load(Ordering::Acquire))
    })
}

/// Runs inside MPICH's critical section (4.0.2): no MPI calls here.
unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    ffi_guard("MPI_Comm_idup (free)", || unsafe {
        drop(Arc::from_raw(extra as *const IdupOp));
        MPI_SUCCESS
    })
}

/// A dup cannot be cancelled (MPICH's own idup request ignores it too).
unsafe extern "C" fn greq_cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("greq_cancel", MPI_ERR_INTERN, || MPI_SUCCESS)
}

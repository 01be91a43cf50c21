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
use super::creation::{self, Base};
use super::endpoints::Endpoints;
use super::Multiplex;
use crate::runtime::Runtime;
use crate::thread::BackgroundThread;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::mpi::{kept, request, Comm, GrequestFns, OwnedRequest, Request};
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
    requests: Vec<OwnedRequest>,
    rank: c_int,
    counts: Box<[c_int]>,
    tag_ub: c_int,
    streams: Box<[Option<usize>]>,
}

/// After MPICH's `MPI_Comm_idup*` of the multiplex communicator `parent` gave `newcomm` and
/// `*request`: replaces `*request` by ours, and starts the nonblocking dups or our thread (module doc).
pub fn started(rt: &'static Runtime, parent: &Multiplex, newcomm: MPI_Comm, request: &mut MPI_Request) -> c_int {
    let inner = *request;
    let started = if rt.thread_multiple() && parent.on_streams() {
        with_thread(rt, parent, newcomm, inner)
    } else {
        with_dups(rt, parent, newcomm, inner)
    };
    match started {
        Ok(greq) => {
            *request = greq.raw();
            MPI_SUCCESS
        }
        Err(rc) => rc,
    }
}

/// The nonblocking way (module doc): our request, in place of MPICH's idup request `inner`.
fn with_dups(
    rt: &'static Runtime,
    parent: &Multiplex,
    newcomm: MPI_Comm,
    inner: MPI_Request,
) -> Result<Request, c_int> {
    let (endpoints, requests) = parent.endpoints.idup()?;
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
    start_request(inner, Some(dups)).map(|(_, greq)| greq)
}

const FNS: GrequestFns =
    GrequestFns { query: greq_query, free: greq_free, cancel: greq_cancel, poll: greq_poll, wait: Some(greq_wait) };

/// Our request in place of MPICH's idup request `inner` (which it tests).
fn start_request(inner: MPI_Request, dups: Option<Dups>) -> Result<(Arc<IdupOp>, Request), c_int> {
    let op = Arc::new(IdupOp {
        inner: AtomicI32::new(inner),
        error: AtomicI32::new(MPI_SUCCESS),
        built: AtomicBool::new(false),
        completed: AtomicBool::new(false),
        greq: AtomicI32::new(MPI_REQUEST_NULL),
        dups: Mutex::new(dups),
    });
    let extra = kept::give(&op);
    let greq = match FNS.start(extra.word()) {
        Ok(greq) => {
            extra.taken();
            greq
        }
        Err(rc) => {
            // MPICH did not take the reference (the start failed): it is ours again.
            drop(extra.refused());
            return Err(rc);
        }
    };
    op.greq.store(greq.raw(), Ordering::Release);
    // The application's request from here on (MPI_Wait or MPI_Request_free frees it).
    Ok((op, Request(greq.into_raw())))
}

/// The way with a thread of ours (module doc): our request, in place of MPICH's idup request `inner`.
fn with_thread(
    rt: &'static Runtime,
    parent: &Multiplex,
    newcomm: MPI_Comm,
    inner: MPI_Request,
) -> Result<Request, c_int> {
    // The base: an idup of the parent's plain P_0 (none where no process has an index).
    let (base, mut base_req) = match parent.endpoints.plain() {
        Some(plain) => {
            let (base, req) = Comm(plain).idup()?;
            (Some(base), Some(req))
        }
        None => (None, None),
    };
    let (op, greq) = start_request(inner, None)?;
    let (rank, counts, tag_ub, streams) = (parent.rank, parent.counts.clone(), parent.tag_ub, parent.streams.clone());
    let worker = op.clone();
    let spawned = BackgroundThread::run("mpixstream-idup", move || {
        let rc = ffi_guard("MPI_Comm_idup (multiplex)", || {
            if let Some(base_req) = base_req.as_mut().filter(|r| !r.is_null()) {
                if let Err(rc) = base_req.wait() {
                    return rc;
                }
            }
            let base = base.filter(|b| b.raw() != MPI_COMM_NULL);
            match creation::build(
                rt,
                newcomm,
                base.map_or(Base::Split, Base::Made),
                rank,
                counts,
                tag_ub,
                streams,
                None,
            ) {
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
    Ok(greq)
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
fn advance(op: &IdupOp) {
    let mut inner = Request(op.inner.load(Ordering::Acquire));
    if inner != Request::NULL {
        match inner.test() {
            Err(rc) => {
                let _ = op.error.compare_exchange(MPI_SUCCESS, rc, Ordering::AcqRel, Ordering::Acquire);
                inner = Request::NULL;
            }
            Ok(None) => return,
            Ok(Some(_)) => {}
        }
        op.inner.store(inner.raw(), Ordering::Release);
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
        let _ = Request(op.greq.load(Ordering::Acquire)).grequest_complete();
    }
}

/// Whether the nonblocking dups are complete (then the record is registered and `op.built` set).
fn dups_done(d: &mut Dups, op: &IdupOp) -> bool {
    // MPICH's test of a request progresses the VCI of the request's pool, not the stream's reserved VCI
    // on which a stream communicator's idup runs: turn each local stream (this thread drives them all:
    // below MPI_THREAD_MULTIPLE, the only thread in MPI).
    for &slot in d.streams.iter().flatten() {
        crate::native_fixes::native_streams::progress_turn(d.rt.streams.slot(slot));
    }
    let mut rc = MPI_SUCCESS;
    for r in d.requests.iter_mut().filter(|r| !r.is_null()) {
        if let Err(e) = r.test() {
            rc = e;
            break;
        }
    }
    if rc == MPI_SUCCESS && d.requests.iter().any(|r| !r.is_null()) {
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
    ffi_guard("MPI_Comm_idup (poll)", || {
        // SAFETY: MPICH calls the poll function with our `extra` (`kept::give` in `start_request`) only
        // until the free function ran.
        unsafe { kept::lend::<IdupOp, _>(extra, |op| advance(op)) };
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
    // SAFETY: MPICH passes the `count` extra states of our requests being waited for, each polled by
    // our poll function.
    ffi_guard("MPI_Comm_idup (wait)", || unsafe { request::poll_each(count, states, greq_poll) })
}

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    ffi_guard("MPI_Comm_idup (query)", || {
        // SAFETY: MPICH calls the query function with our `extra` only until the free function ran, and
        // with a status of its own to fill in, valid for the call.
        unsafe {
            let error = kept::lend::<IdupOp, _>(extra, |op| op.error.load(Ordering::Acquire));
            request::collective_status(status, error)
        }
    })
}

/// Runs inside MPICH's critical section (4.0.2): no MPI calls here.
unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    ffi_guard("MPI_Comm_idup (free)", || {
        // SAFETY: `extra` is the reference `start_request` gave MPICH; MPICH calls the free function
        // once, last.
        drop(unsafe { kept::take_back::<IdupOp>(extra) });
        MPI_SUCCESS
    })
}

/// A dup cannot be cancelled (MPICH's own idup request ignores it too).
unsafe extern "C" fn greq_cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("greq_cancel", MPI_ERR_INTERN, || MPI_SUCCESS)
}

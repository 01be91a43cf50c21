//! `MPI_Comm_idup`/`MPI_Comm_idup_with_info` of a multiplex communicator: multiplex too, with the same
//! streams and indices, ready when its request completes (as natively).
//!
//! Making the hidden communicators is a sequence of blocking collectives (`MPIX_Stream_comm_create`
//! has no nonblocking form), which the idup's caller must not wait for: a process may start the idup
//! and then wait for a message that another process sends before it starts its own. So:
//! - the caller's thread starts MPICH's idup of the user's communicator (its handle is valid at once)
//!   and an idup of the parent's `P_0`, a plain communicator on the implicit pool with the same group
//!   and ranks: the base of the new hidden communicators;
//! - a thread of ours per idup waits for that base and makes the hidden communicators from it
//!   (collectives on the base only: `MPIX_Stream_comm_create` dups it and gathers the VCIs there, so
//!   no reserved VCI is touched), then registers the record; one thread per idup, because idups of
//!   different communicators may be started in different orders on different processes;
//! - the application's request is an MPICH generalized request whose poll function tests MPICH's
//!   idup (in the thread that waits, the one that drives the user's communicator) and completes once
//!   both are done.
//!
//! Our thread makes MPI calls, so this needs `MPI_THREAD_MULTIPLE`; below it the dup stays a plain
//! communicator (rank 0 says so once on stderr; `docs/multiplex.md`).
use super::{creation, Multiplex};
use crate::ffi_guard;
use crate::greq::{collective_status, poll_each};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

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
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// After MPICH's `MPI_Comm_idup*` of the multiplex communicator `parent` gave `newcomm` and
/// `*request`: replaces `*request` by ours and starts our thread. `None`: below
/// `MPI_THREAD_MULTIPLE` (`newcomm` stays plain).
pub unsafe fn started(
    rt: &'static Runtime,
    parent: &Multiplex,
    newcomm: MPI_Comm,
    request: *mut MPI_Request,
) -> Option<c_int> {
    if !rt.thread_multiple() {
        if parent.rank == 0 && !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "mpixstream: MPI_Comm_idup of a multiplex communicator below MPI_THREAD_MULTIPLE gives a plain \
                 communicator (its hidden communicators need a thread of ours that makes MPI calls); \
                 MPI_Comm_dup gives a multiplex one"
            );
        }
        return None;
    }
    let p = pmpi();
    // The base: an idup of the parent's plain P_0 (none where no process has an index).
    let (mut base, mut base_req) = (MPI_COMM_NULL, MPI_REQUEST_NULL);
    if let Some(plain) = parent.endpoints.plain() {
        let rc = (p.PMPI_Comm_idup)(plain, &mut base, &mut base_req);
        if rc != MPI_SUCCESS {
            return Some(rc);
        }
    }
    let op = Arc::new(IdupOp {
        inner: AtomicI32::new(*request),
        error: AtomicI32::new(MPI_SUCCESS),
        built: AtomicBool::new(false),
        completed: AtomicBool::new(false),
        greq: AtomicI32::new(MPI_REQUEST_NULL),
    });
    let extra = Arc::into_raw(op.clone()) as *mut c_void;
    let mut greq = MPI_REQUEST_NULL;
    let rc = (p.PMPIX_Grequest_start)(greq_query, greq_free, greq_cancel, greq_poll, Some(greq_wait), extra, &mut greq);
    if rc != MPI_SUCCESS {
        drop(Arc::from_raw(extra as *const IdupOp));
        return Some(rc);
    }
    op.greq.store(greq, Ordering::Release);
    *request = greq;
    let (rank, counts, tag_ub, streams) = (parent.rank, parent.counts.clone(), parent.tag_ub, parent.streams.clone());
    let worker = op.clone();
    let spawned = std::thread::Builder::new().name("mpixstream-idup".into()).spawn(move || {
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
    if spawned.is_err() {
        // Without our thread the request would never complete: fail it now.
        op.error.store(MPI_ERR_OTHER, Ordering::Release);
        op.built.store(true, Ordering::Release);
    }
    Some(MPI_SUCCESS)
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
    if op.built.load(Ordering::Acquire) && !op.completed.swap(true, Ordering::AcqRel) {
        (p.PMPI_Grequest_complete)(op.greq.load(Ordering::Acquire));
    }
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
    MPI_SUCCESS
}

//! The generalized-request callbacks of nonblocking engine receives (`extra_state`: a counted
//! reference to the `RecvOp`). MPICH's `MPI_Wait*`/`MPI_Test*` call the poll function (and
//! `MPI_Waitall` the wait function), which run a turn of the receive's engine; neither ever waits
//! for the engine's lock nor blocks in MPICH. The free and cancel functions run inside MPICH's
//! critical section on 4.0.2 and call no MPI function.
use super::matching::RecvOp;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::mpi::datatype::{set_cancelled, set_elements};
use mpixstream_wrappers::mpi::{kept, Datatype, GrequestFns, MpiResult, Request};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const FNS: GrequestFns =
    GrequestFns { query: greq_query, free: greq_free, cancel: greq_cancel, poll: greq_poll, wait: Some(greq_wait) };

/// Starts the generalized request of `op`; on failure the reference it would have held is dropped.
pub fn start(op: &Arc<RecvOp>) -> MpiResult<Request> {
    let extra = kept::give(op);
    match FNS.start(extra.word()) {
        Ok(req) => {
            extra.taken();
            op.greq.store(req.raw(), Ordering::Release);
            // The application's request from here on (MPI_Wait or MPI_Request_free frees it).
            Ok(Request(req.into_raw()))
        }
        Err(rc) => {
            // MPICH did not take the reference (the start failed): it is ours again.
            drop(extra.refused());
            Err(rc)
        }
    }
}

/// One turn of the engine of `op`'s receive, unless it is done; false where another thread drives it.
fn turn(op: &RecvOp) -> bool {
    if op.is_done() {
        return true;
    }
    let mx = &op.mx;
    let engine = &mx.engines[op.index];
    let turned = match engine.state.try_lock() {
        Ok(mut st) => {
            engine.drive(mx, &mut st, Some(op));
            true
        }
        Err(_) => false,
    };
    mx.maybe_release();
    turned
}

unsafe extern "C" fn greq_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (poll)", || {
        // SAFETY: MPICH calls the poll function with our `extra` (`kept::give` in `start`) only until the
        // free function ran.
        unsafe {
            kept::lend::<RecvOp, _>(extra, |op| {
                let engine = &op.mx.engines[op.index];
                // MPICH calls this from its wait and test loops, in any thread: never wait for the engine.
                if op.is_done() || (!engine.cancels.load(Ordering::Relaxed) && engine.skip_idle_poll()) {
                    return;
                }
                turn(op);
            })
        };
        MPI_SUCCESS
    })
}

/// MPICH requires a wait function with a poll function; `MPI_Waitall` calls it in a loop until the
/// request completes (and must not see its status pointer written: it may be `MPI_STATUSES_IGNORE`
/// plus an offset). One turn of each engine involved.
unsafe extern "C" fn greq_wait(
    count: c_int,
    states: *mut *mut c_void,
    _timeout: f64,
    _status: *mut MPI_Status,
) -> c_int {
    ffi_guard("MPIX_Stream_irecv (wait)", || {
        let states: &[*mut c_void] = if count <= 0 || states.is_null() {
            &[]
        } else {
            // SAFETY: MPICH passes the `count` extra states of the requests being waited for.
            unsafe { std::slice::from_raw_parts(states, count as usize) }
        };
        let mut busy = false;
        for &extra in states {
            // SAFETY: each is our `extra` of a request not yet freed (MPICH waits for it).
            busy |= !unsafe { kept::lend::<RecvOp, _>(extra, |op| turn(op)) };
        }
        if busy {
            // Another thread is driving the engine: let it run (MPICH calls us again at once).
            std::thread::yield_now();
        }
        MPI_SUCCESS
    })
}

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (query)", || {
        // SAFETY: MPICH calls the query function with our `extra` only until the free function ran.
        let o = unsafe { kept::lend::<RecvOp, _>(extra, |op| op.outcome()) };
        // SAFETY: MPICH's own status to fill in, valid for the call.
        let status = unsafe { &mut *status };
        if o.cancelled {
            let _ = set_elements(status, Datatype::BYTE, 0);
            let _ = set_cancelled(status, true);
            status.MPI_SOURCE = MPI_ANY_SOURCE;
            status.MPI_TAG = MPI_ANY_TAG;
            return MPI_SUCCESS;
        }
        // The receive's own status (MPICH's layout: byte count, cancelled bit 0), with the user's tag:
        // what MPI_Status_set_elements_x(MPI_BYTE) and MPI_Status_set_cancelled(0) would write.
        status.count_lo = o.status.count_lo;
        status.count_hi_and_cancelled = o.status.count_hi_and_cancelled & !1;
        status.MPI_SOURCE = o.status.MPI_SOURCE;
        status.MPI_TAG = o.status.MPI_TAG;
        o.error
    })
}

/// Runs inside MPICH's critical section (4.0.2): no MPI calls here.
unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    ffi_guard("MPIX_Stream_irecv (free)", || {
        // SAFETY: `extra` is the reference `start` gave MPICH; MPICH calls the free function once, last.
        drop(unsafe { kept::take_back::<RecvOp>(extra) });
        MPI_SUCCESS
    })
}

/// Runs inside MPICH's critical section (4.0.2): only flags the receive; the engine's next turn (the
/// wait or test that follows) removes it if it is not matched yet, and completes it as cancelled.
unsafe extern "C" fn greq_cancel(extra: *mut c_void, complete: c_int) -> c_int {
    ffi_guard("MPIX_Stream_irecv (cancel)", || {
        // SAFETY: MPICH calls the cancel function with our `extra` only until the free function ran.
        unsafe {
            kept::lend::<RecvOp, _>(extra, |op| {
                if complete == 0 && !op.is_done() {
                    op.cancel.store(true, Ordering::Release);
                    op.mx.engines[op.index].cancels.store(true, Ordering::Release);
                }
            })
        };
        MPI_SUCCESS
    })
}

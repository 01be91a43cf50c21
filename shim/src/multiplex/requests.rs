//! The generalized-request callbacks of nonblocking engine receives (`extra_state`: a counted
//! reference to the `RecvOp`). MPICH's `MPI_Wait*`/`MPI_Test*` call the poll function (and
//! `MPI_Waitall` the wait function), which run a turn of the receive's engine; neither ever waits
//! for the engine's lock nor blocks in MPICH. The free and cancel functions run inside MPICH's
//! critical section on 4.0.2 and call no MPI function.
use super::matching::RecvOp;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Starts the generalized request of `op` into `request`; on failure the reference is dropped.
pub unsafe fn start(op: &Arc<RecvOp>, request: *mut MPI_Request) -> c_int {
    let extra = Arc::into_raw(op.clone()) as *mut c_void;
    let rc =
        (pmpi().PMPIX_Grequest_start)(greq_query, greq_free, greq_cancel, greq_poll, Some(greq_wait), extra, request);
    if rc != MPI_SUCCESS {
        drop(Arc::from_raw(extra as *const RecvOp));
    } else {
        op.greq.store(*request, Ordering::Release);
    }
    rc
}

unsafe extern "C" fn greq_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (poll)", || unsafe {
        let op = &*(extra as *const RecvOp);
        if op.is_done() {
            return MPI_SUCCESS;
        }
        let mx = &*op.mx;
        let engine = &mx.engines[op.index];
        if !engine.cancels.load(Ordering::Relaxed) && engine.skip_idle_poll() {
            return MPI_SUCCESS;
        }
        // MPICH calls this from its wait and test loops, in any thread: never wait for the engine.
        if let Ok(mut st) = engine.state.try_lock() {
            engine.drive(mx, &mut st, Some(op));
        }
        mx.maybe_release();
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
    ffi_guard("MPIX_Stream_irecv (wait)", || unsafe {
        let mut busy = false;
        for i in 0..count.max(0) as usize {
            let op = &*(*states.add(i) as *const RecvOp);
            if op.is_done() {
                continue;
            }
            let mx = &*op.mx;
            let engine = &mx.engines[op.index];
            match engine.state.try_lock() {
                Ok(mut st) => engine.drive(mx, &mut st, Some(op)),
                Err(_) => busy = true,
            }
            mx.maybe_release();
        }
        if busy {
            // Another thread is driving the engine: let it run (MPICH calls us again at once).
            std::thread::yield_now();
        }
        MPI_SUCCESS
    })
}

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (query)", || unsafe {
        let op = &*(extra as *const RecvOp);
        let o = op.outcome();
        let p = pmpi();
        if o.cancelled {
            (p.PMPI_Status_set_elements_x)(status, MPI_BYTE, 0);
            (p.PMPI_Status_set_cancelled)(status, 1);
            (*status).MPI_SOURCE = MPI_ANY_SOURCE;
            (*status).MPI_TAG = MPI_ANY_TAG;
            return MPI_SUCCESS;
        }
        // The receive's own status (MPICH's layout: byte count, cancelled bit 0), with the user's tag:
        // what MPI_Status_set_elements_x(MPI_BYTE) and MPI_Status_set_cancelled(0) would write.
        (*status).count_lo = o.status.count_lo;
        (*status).count_hi_and_cancelled = o.status.count_hi_and_cancelled & !1;
        (*status).MPI_SOURCE = o.status.MPI_SOURCE;
        (*status).MPI_TAG = o.status.MPI_TAG;
        o.error
    })
}

/// Runs inside MPICH's critical section (4.0.2): no MPI calls here.
unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    ffi_guard("MPIX_Stream_irecv (free)", || unsafe {
        drop(Arc::from_raw(extra as *const RecvOp));
        MPI_SUCCESS
    })
}

/// Runs inside MPICH's critical section (4.0.2): only flags the receive; the engine's next turn (the
/// wait or test that follows) removes it if it is not matched yet, and completes it as cancelled.
unsafe extern "C" fn greq_cancel(extra: *mut c_void, complete: c_int) -> c_int {
    ffi_guard("MPIX_Stream_irecv (cancel)", || unsafe {
        let op = &*(extra as *const RecvOp);
        if complete == 0 && !op.is_done() {
            op.cancel.store(true, Ordering::Release);
            op.mx.engines[op.index].cancels.store(true, Ordering::Release);
        }
        MPI_SUCCESS
    })
}

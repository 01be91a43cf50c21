//! Requests: completion, cancelling and freeing; generalized requests and async things (ours, with
//! callbacks MPICH calls).
use super::{call, call_optional, check, MpiResult, Opaque, OwnedRequest, Request, Stream};
use crate::ffi::*;

impl Request {
    /// `MPI_Test`: the status once complete (the request is then `Request::NULL` or, persistent, inactive:
    /// `self` is updated), `None` while pending.
    pub fn test(&mut self) -> MpiResult<Option<MPI_Status>> {
        let mut flag = 0;
        let mut status = MPI_Status::default();
        check(call!(PMPI_Test(&mut self.0, &mut flag, &mut status)))?;
        Ok((flag != 0).then_some(status))
    }

    /// `MPI_Test` into `status`, as the caller initialised it: MPICH writes only the fields the request
    /// kind defines (a send's completion sets the cancelled bit alone), so the rest keep the caller's
    /// values. True once complete (`self` is updated as by [`Request::test`]); on `Err`, `status` holds
    /// whatever MPICH wrote before it failed (a truncated receive's source, tag and count).
    pub fn test_into(&mut self, status: &mut MPI_Status) -> MpiResult<bool> {
        let mut flag = 0;
        check(call!(PMPI_Test(&mut self.0, &mut flag, status)))?;
        Ok(flag != 0)
    }

    /// `MPI_Wait`: the status; `self` is updated as by `MPI_Wait`.
    pub fn wait(&mut self) -> MpiResult<MPI_Status> {
        let mut status = MPI_Status::default();
        check(call!(PMPI_Wait(&mut self.0, &mut status)))?;
        Ok(status)
    }

    /// `MPI_Request_get_status`: the status once complete, without freeing the request.
    pub fn status(self) -> MpiResult<Option<MPI_Status>> {
        let mut flag = 0;
        let mut status = MPI_Status::default();
        check(call!(PMPI_Request_get_status(self.0, &mut flag, &mut status)))?;
        Ok((flag != 0).then_some(status))
    }

    /// `MPI_Cancel`.
    pub fn cancel(self) -> MpiResult {
        let mut r = self.0;
        check(call!(PMPI_Cancel(&mut r)))
    }

    /// `MPI_Grequest_complete` of a generalized request of ours.
    pub fn grequest_complete(self) -> MpiResult {
        check(call!(PMPI_Grequest_complete(self.0)))
    }
}

/// A generalized request's callbacks (`MPIX_Grequest_start`): MPICH calls them with the `extra` word
/// given at the start and its own valid status pointers.
#[derive(Clone, Copy)]
pub struct GrequestFns {
    pub query: MPI_Grequest_query_function,
    pub free: MPI_Grequest_free_function,
    pub cancel: MPI_Grequest_cancel_function,
    pub poll: MPIX_Grequest_poll_function,
    pub wait: Option<MPIX_Grequest_wait_function>,
}

impl GrequestFns {
    /// `MPIX_Grequest_start`: a new generalized request. `extra` is an opaque word MPICH keeps and hands
    /// to the callbacks until the free function ran; it never dereferences it (the callbacks do, and their
    /// own safety notes say why that is sound).
    pub fn start(self, extra: Opaque) -> MpiResult<OwnedRequest> {
        let mut req = MPI_REQUEST_NULL;
        check(call!(PMPIX_Grequest_start(
            self.query,
            self.free,
            self.cancel,
            self.poll,
            self.wait,
            extra.0,
            &mut req
        )))?;
        Ok(OwnedRequest::made(req))
    }
}

/// MPICH >= 4.3's async things: a poll function MPICH's progress calls with `extra` until it returns
/// `MPIX_ASYNC_DONE`.
pub struct AsyncThing;

impl AsyncThing {
    /// `MPIX_Async_start` on `stream`'s progress (`Stream::NULL`: the implicit pool's). `extra` is an
    /// opaque word MPICH hands to `poll`; it never dereferences it.
    pub fn start(poll: MPIX_Async_poll_function, extra: Opaque, stream: Stream) -> MpiResult {
        check(call_optional!(PMPIX_Async_start(Some(poll), extra.0, stream.0)))
    }

    /// Whether the loaded MPICH has async things.
    pub fn supported() -> bool {
        crate::pmpi::pmpi().PMPIX_Async_start.is_some()
    }
}

/// The body of a generalized request's wait function: MPICH calls it in a loop for the requests of one
/// `MPI_Wait*`, and each call polls every request once.
///
/// # Safety
/// `states` holds `count` extra words MPICH passed to the wait function, each one `poll` accepts (its
/// request's, still held by MPICH).
pub unsafe fn poll_each(
    count: std::os::raw::c_int,
    states: *mut *mut std::os::raw::c_void,
    poll: unsafe extern "C" fn(*mut std::os::raw::c_void, *mut MPI_Status) -> std::os::raw::c_int,
) -> std::os::raw::c_int {
    for i in 0..count.max(0) as usize {
        // SAFETY: `states` holds `count` words (the caller's contract: MPICH's array), each a state
        // `poll` accepts, and a poll function takes a null status (ours never write one).
        unsafe { poll(*states.add(i), std::ptr::null_mut()) };
    }
    MPI_SUCCESS
}

/// A collective's status (of a generalized request's query function): nothing but the error, which
/// it returns; MPICH reads source and tag as "any".
///
/// # Safety
/// `status` is the query function's status argument: valid for writes (MPICH's own).
pub unsafe fn collective_status(status: *mut MPI_Status, error: std::os::raw::c_int) -> std::os::raw::c_int {
    // SAFETY: MPICH passes the query function a status of its own, valid and not otherwise used during
    // the call (the caller's contract).
    let status = unsafe { &mut *status };
    status.MPI_SOURCE = MPI_ANY_SOURCE;
    status.MPI_TAG = MPI_ANY_TAG;
    // As MPICH's own zero-byte status: failures leave the fields as they were, nothing to report.
    let _ = super::datatype::set_elements(status, super::Datatype::BYTE, 0);
    let _ = super::datatype::set_cancelled(status, false);
    error
}

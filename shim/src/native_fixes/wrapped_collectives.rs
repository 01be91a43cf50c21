//! Nonblocking collectives on native stream communicators (the explicit policy's, the application's
//! own), handed to the application as MPICH extended generalized requests.
//!
//! MPICH runs such a collective's sub-operations on the stream's explicit VCI, which its global
//! progress never turns, and completes a generalized request only by polling it, from the
//! `MPI_Wait*`/`MPI_Test*` of the thread that waits for it. Our poll turns the stream's own progress
//! and tests the real request. A policy communicator's collectives run on its plain base instead
//! (`schedule_comm`), where MPICH's own request progresses as anywhere: they are not wrapped. MPI's progress
//! rule for the rest (a peer waiting for another collective of this process, on another stream) is the
//! progress helper's (`crate::helper`): every stream nobody is inside is turned, whoever waits.
//!
//! A collective freed before it completed (`MPI_Request_free`) becomes an orphan (`crate::orphans`,
//! `greq::Open`), which the helper polls to its end.
use crate::comms::Route;
use crate::native_fixes::greq::{Open, Operation, Shared};
use crate::native_fixes::native_streams::{native_record_of, panic_for_test, progress_turn};
use crate::orphans::Orphan;
use crate::runtime;
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{kept, request};
use mpixstream_wrappers::mpi::{GrequestFns, Request};
use mpixstream_wrappers::pmpi::{self, Pmpi};
use std::os::raw::{c_int, c_void};

/// A wrapped collective: its real request, and the stream whose endpoint it runs on, if it does.
struct WrappedCollective {
    /// The stream-table slot to turn (the collective runs on the stream's endpoint), if any.
    slot: Option<usize>,
    inner: MPI_Request,
    error: c_int,
    /// Counted on its stream's endpoint as a schedule MPICH's progress hooks advance
    /// (`ownership::Endpoint::schedule`) until it completed.
    scheduled: bool,
}

impl WrappedCollective {
    /// It completed (or is gone): MPICH's hooks no longer post its rounds.
    fn unschedule(&mut self) {
        if std::mem::take(&mut self.scheduled) {
            if let (Some(rt), Some(s)) = (runtime::active(), self.slot) {
                rt.streams.slot(s).endpoint().unschedule();
            }
        }
    }
}

impl Drop for WrappedCollective {
    fn drop(&mut self) {
        self.unschedule();
    }
}

impl Operation for WrappedCollective {
    fn stream(&self) -> Option<usize> {
        self.slot
    }

    fn step(&mut self) -> bool {
        if self.inner == MPI_REQUEST_NULL {
            return true;
        }
        let Some(rt) = runtime::active() else { return false };
        // Inside the stream's endpoint, or not at all now: a poll runs inside MPICH's wait and must not
        // wait for the thread inside it (that thread progresses it; MPICH polls again).
        let _claim = match self.slot.map(|s| rt.streams.slot(s)) {
            Some(slot) => match slot.try_claim() {
                Some(claim) => {
                    progress_turn(slot);
                    Some(claim)
                }
                None => return false,
            },
            None => None,
        };
        let mut inner = Request(self.inner);
        match inner.test() {
            Ok(None) => false,
            done => {
                self.error = done.err().unwrap_or(MPI_SUCCESS);
                self.inner = MPI_REQUEST_NULL;
                self.unschedule();
                true
            }
        }
    }
}

/// The wrapped collectives handed out and not complete.
static OPEN: Open<WrappedCollective> = Open::new();

/// Before `MPI_Request_free` of `request` (`None`: a null pointer): a wrapped collective not yet
/// complete becomes an orphan.
pub fn freeing(request: Option<MPI_Request>) -> Option<Box<dyn Orphan>> {
    OPEN.freeing(request)
}

/// Interposer hook of the nonblocking collectives: `create(p, comm, request)` makes the real call (the
/// application's, with its other arguments); `request`: the application's; `neighbourhood`: an
/// `MPI_Ineighbor_*` (see `schedule_comm`).
pub fn nonblocking_collective(
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
    neighbourhood: bool,
    create: &dyn Fn(&Pmpi, MPI_Comm, AppArg<MPI_Request>) -> c_int,
) -> c_int {
    panic_for_test();
    let p = match pmpi::load() {
        Ok(p) => p,
        Err(_) => return MPI_ERR_OTHER,
    };
    let (Some(record), Some(rt)) = (native_record_of(comm), runtime::active()) else {
        return create(p, comm, request);
    };
    let on = schedule_comm(comm, record.collectives, neighbourhood);
    let (Some(slot), false, true) = (record.stream, request.is_empty(), on == comm) else {
        // No stream here (its peers may have one: the route is the same on all), or on the plain base
        // (implicit pool), where MPICH's own request progresses as anywhere; or a null request, which
        // MPICH's own argument check reports.
        return create(p, on, request);
    };
    // On the stream's endpoint from its first round on.
    let shared = Shared::new(WrappedCollective {
        slot: Some(slot),
        inner: MPI_REQUEST_NULL,
        error: MPI_SUCCESS,
        scheduled: false,
    });
    let rc = {
        let _claim = rt.streams.slot(slot).claim();
        let mut op = shared.op();
        let rc = create(p, on, AppArg::local(&mut op.inner));
        if rc == MPI_SUCCESS && op.inner != MPI_REQUEST_NULL {
            // Its rounds are MPICH's schedule: whichever thread runs MPICH's progress posts them.
            rt.streams.slot(slot).endpoint().schedule();
            op.scheduled = true;
        }
        rc
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    let extra = Shared::into_extra(&shared);
    let fns = GrequestFns {
        query: wrapped_query,
        free: wrapped_free,
        cancel: wrapped_cancel,
        poll: wrapped_poll,
        wait: Some(wrapped_wait),
    };
    let outer = match fns.start(extra.word()) {
        Ok(outer) => {
            extra.taken();
            outer.raw()
        }
        Err(rc) => {
            // Cannot wrap: complete the real operation here rather than lose it.
            // MPICH did not take `extra` (no request was made): the reference is ours again.
            Shared::released(extra.refused());
            let mut inner = Request(shared.op().inner);
            let _claim = rt.streams.slot(slot).claim();
            let _ = inner.wait();
            shared.op().unschedule();
            return rc;
        }
    };
    shared.set_outer(outer);
    OPEN.insert(&shared);
    // The tools library (if loaded) tracked the inner request through the next definition: it tracks
    // the one the application waits on instead.
    crate::tools_link::tools_request_replaced(shared.op().inner, outer);
    request.set(outer);
    MPI_SUCCESS
}

/// The communicator a nonblocking or persistent collective of `comm` runs on, by its record's route
/// (`comms::Route`, agreed by every member when `comm` was made: `policy::agree`): a policy
/// communicator's plain base (`policy/base.rs`: the same group and ranks on the implicit pool, whose VCIs
/// MPICH locks), out of reach of another thread's progress, which would post the collective's rounds on
/// the stream's unlocked VCI (docs/native-defects.md, "Any thread's progress posts a stream's collective
/// rounds"); the request stays wrapped, so the thread's waits still turn its streams. Elsewhere (an
/// application's own stream communicator, or a base some member could not serve) the communicator itself.
pub fn schedule_comm(comm: MPI_Comm, route: Route, neighbourhood: bool) -> MPI_Comm {
    if route == Route::Comm {
        return comm;
    }
    route.comm_for(comm, runtime::active().and_then(|rt| rt.comms.base(comm)), neighbourhood)
}

unsafe extern "C" fn wrapped_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (poll)", || {
        // SAFETY: MPICH calls the poll function with the request's extra state only until it ran the
        // free function, which is when it lets go of it (`greq`).
        unsafe { kept::lend::<Shared<WrappedCollective>, _>(extra, |shared| shared.poll(&OPEN)) };
        MPI_SUCCESS
    })
}

/// MPICH requires a wait function too, and calls it in a loop for the generalized requests of one
/// `MPI_Wait*`: one turn of each request's poll.
unsafe extern "C" fn wrapped_wait(
    count: c_int,
    states: *mut *mut c_void,
    _timeout: f64,
    _status: *mut MPI_Status,
) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (wait)", || {
        // SAFETY: MPICH passes `count` extra states of its requests with this wait function, each
        // still held by MPICH (their free functions have not run): what `wrapped_poll` takes.
        unsafe { request::poll_each(count, states, wrapped_poll) }
    })
}

unsafe extern "C" fn wrapped_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (query)", || {
        // SAFETY: MPICH calls the query function with the request's extra state only until it ran the
        // free function (`greq`), and with a status of its own, valid for writes.
        unsafe {
            request::collective_status(
                status,
                kept::lend::<Shared<WrappedCollective>, _>(extra, |shared| shared.op().error),
            )
        }
    })
}

unsafe extern "C" fn wrapped_free(extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (free)", || {
        // SAFETY: MPICH runs the free function once, with the extra state `into_extra` made for it.
        Shared::released(unsafe { kept::take_back::<Shared<WrappedCollective>>(extra) });
        MPI_SUCCESS
    })
}

/// Nonblocking collectives cannot be cancelled (MPI 4.0 §6.12): nothing to do.
unsafe extern "C" fn wrapped_cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    mpixstream_wrappers::guard::guard_with("wrapped_cancel", MPI_ERR_INTERN, || MPI_SUCCESS)
}

//! Nonblocking collectives on native stream communicators (the explicit policy's, the application's
//! own), handed to the application as MPICH extended generalized requests.
//!
//! MPICH runs such a collective's sub-operations on the stream's explicit VCI, which its global
//! progress never turns, and completes a generalized request only by polling it, from the
//! `MPI_Wait*`/`MPI_Test*` of the thread that waits for it. Our poll function turns the stream's own
//! progress and tests the real request.
//!
//! MPI's progress rule reaches further: while a process waits for one request, every operation it
//! started must progress, or a peer that waits for another of them hangs. `coll/nonblocking3` of
//! MPICH's suite is such a program: nonblocking collectives on four communicators, each rank waiting
//! for a different one. So a thread's poll turns the progress of every stream on which *it* has
//! nonblocking collectives outstanding (the thread's `Started` set), not only the stream of the
//! request it waits for. Only its own: a stream the policy gave one thread's communicator is that
//! thread's to drive, and a reserved VCI has no lock (another thread driving it meanwhile would
//! corrupt it), so a stream is never driven from a thread that did not start work on it (and
//! `progress_turn` skips a stream another driver of ours holds). The same goes for the thread's
//! other completion calls while it has wrapped collectives outstanding (`MPI_Wait` on a
//! point-to-point request, say: `persistent.rs` turns `thread_streams()` as well).
use crate::comms::Route;
use crate::native_fixes::greq::{collective_status, poll_each};
use crate::native_fixes::native_streams::{native_record_of, panic_for_test, progress_turn, THREAD_BOUND};
use crate::runtime;
use crate::streams::StreamSlot;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::{self, Pmpi};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Whether the calling thread has a wrapped collective outstanding. Wrapped collectives count in
/// `native_streams::THREAD_BOUND`, which the completion interposers load first (`persistent.rs`):
/// while it is 0 they never ask this.
#[cold]
pub fn thread_has_outstanding() -> bool {
    STARTED.try_with(|s| s.1.load(Ordering::Relaxed)).unwrap_or(0) != 0
}

/// The streams on which the calling thread has wrapped collectives outstanding: a completion call of
/// this thread turns their progress while it waits, whatever it waits for (module doc).
pub fn thread_streams() -> Vec<&'static StreamSlot> {
    STARTED
        .try_with(|s| s.0.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|&(s, _)| s).collect())
        .unwrap_or_default()
}

/// The streams on which one thread has nonblocking collectives outstanding, with how many, and
/// their total (read without the lock by the thread's completion calls).
#[derive(Default)]
struct Started(Mutex<Vec<(&'static StreamSlot, u32)>>, AtomicUsize);

impl Started {
    fn add(&self, slot: &'static StreamSlot) {
        THREAD_BOUND.fetch_add(1, Ordering::Relaxed);
        self.1.fetch_add(1, Ordering::Relaxed);
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match v.iter_mut().find(|(s, _)| std::ptr::eq(*s, slot)) {
            Some((_, n)) => *n += 1,
            None => v.push((slot, 1)),
        }
    }

    fn done(&self, slot: &'static StreamSlot) {
        THREAD_BOUND.fetch_sub(1, Ordering::Relaxed);
        self.1.fetch_sub(1, Ordering::Relaxed);
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = v.iter().position(|(s, _)| std::ptr::eq(*s, slot)) {
            v[i].1 -= 1;
            if v[i].1 == 0 {
                v.swap_remove(i);
            }
        }
    }

    /// One progress turn of each stream in the set except `skip` (turned by the caller).
    fn turn_others(&self, skip: &'static StreamSlot) {
        // Copied out: a progress turn may run our poll functions again (nested generalized requests).
        let mut slots = [None; 8];
        let mut more = Vec::new();
        {
            let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
            for (k, &(s, _)) in v.iter().filter(|(s, _)| !std::ptr::eq(*s, skip)).enumerate() {
                match slots.get_mut(k) {
                    Some(x) => *x = Some(s),
                    None => more.push(s),
                }
            }
        }
        for s in slots.iter().flatten().copied().chain(more) {
            progress_turn(s);
        }
    }
}

thread_local! {
    static STARTED: Arc<Started> = Arc::new(Started::default());
}

struct WrappedCollective {
    slot: &'static StreamSlot,
    /// The set of the thread that started it (completion may happen on another thread).
    started: Arc<Started>,
    inner: MPI_Request,
    outer: MPI_Request,
    error: c_int,
}

impl WrappedCollective {
    /// It completed, or was freed before: it no longer counts as outstanding for its thread's waits.
    fn finished(&self) {
        self.started.done(self.slot);
    }
}

/// Interposer hook of the nonblocking collectives: `create(p, comm, request)` makes the real call;
/// `neighbourhood`: an `MPI_Ineighbor_*` (see `schedule_comm`).
pub unsafe fn nonblocking_collective(
    comm: MPI_Comm,
    request: *mut MPI_Request,
    neighbourhood: bool,
    create: &dyn Fn(&Pmpi, MPI_Comm, *mut MPI_Request) -> c_int,
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
    let (Some(slot), false) = (record.stream.map(|s| rt.streams.slot(s)), request.is_null()) else {
        // No stream here (its peers may have one: the route is the same on all), nothing for this
        // process's waits to turn; or a null request, which MPICH's own argument check reports.
        return create(p, on, request);
    };
    let state = Box::into_raw(Box::new(WrappedCollective {
        slot,
        started: STARTED.with(|s| s.clone()),
        inner: MPI_REQUEST_NULL,
        outer: MPI_REQUEST_NULL,
        error: MPI_SUCCESS,
    }));
    let rc = create(p, on, &mut (*state).inner);
    if rc != MPI_SUCCESS {
        drop(Box::from_raw(state));
        return rc;
    }
    let rc = (p.PMPIX_Grequest_start)(
        wrapped_query,
        wrapped_free,
        wrapped_cancel,
        wrapped_poll,
        Some(wrapped_wait),
        state as *mut c_void,
        &mut (*state).outer,
    );
    if rc != MPI_SUCCESS {
        // Cannot wrap: complete the real operation here rather than lose it.
        (p.PMPI_Wait)(&mut (*state).inner, MPI_STATUS_IGNORE);
        drop(Box::from_raw(state));
        return rc;
    }
    (*state).started.add(slot);
    // The tools library (if loaded) tracked the inner request through the next definition: it tracks
    // the one the application waits on instead.
    crate::tools_link::tools_request_replaced((*state).inner, (*state).outer);
    *request = (*state).outer;
    MPI_SUCCESS
}

/// The communicator a nonblocking or persistent collective of `comm` runs on, by its record's route
/// (`comms::Route`, agreed by every member when `comm` was made: `policy::agree`): a policy
/// communicator's plain base (`policy/base.rs`: the same group and ranks on the implicit pool, whose VCIs
/// MPICH locks), out of reach of another thread's progress, which would post the collective's rounds on
/// the stream's unlocked VCI (docs/native-defects.md, "Any thread's progress posts a stream's collective
/// rounds"); the request stays wrapped, so the thread's waits still turn its streams. Elsewhere (an
/// application's own stream communicator, or a base some member could not serve) the communicator itself.
pub unsafe fn schedule_comm(comm: MPI_Comm, route: Route, neighbourhood: bool) -> MPI_Comm {
    if route == Route::Comm {
        return comm;
    }
    route.comm_for(comm, runtime::active().and_then(|rt| rt.comms.base(comm)), neighbourhood)
}

unsafe extern "C" fn wrapped_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (poll)", || unsafe {
        let st = &mut *(extra as *mut WrappedCollective);
        if st.inner == MPI_REQUEST_NULL {
            return MPI_SUCCESS;
        }
        let p = pmpi::pmpi();
        progress_turn(st.slot);
        let _ = STARTED.try_with(|s| s.turn_others(st.slot));
        let mut flag = 0;
        let mut status = MPI_Status::default();
        let rc = (p.PMPI_Test)(&mut st.inner, &mut flag, &mut status);
        if rc != MPI_SUCCESS || flag != 0 {
            st.error = rc;
            st.inner = MPI_REQUEST_NULL;
            st.finished();
            (p.PMPI_Grequest_complete)(st.outer);
        }
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
    poll_each(count, states, wrapped_poll)
}

unsafe extern "C" fn wrapped_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (query)", || unsafe {
        collective_status(status, (*(extra as *const WrappedCollective)).error)
    })
}

unsafe extern "C" fn wrapped_free(extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("nonblocking collective (free)", || unsafe {
        let st = Box::from_raw(extra as *mut WrappedCollective);
        if st.inner != MPI_REQUEST_NULL {
            // Freed before it completed (MPI_Request_free).
            st.finished();
        }
        MPI_SUCCESS
    })
}

/// Nonblocking collectives cannot be cancelled (MPI 4.0 §6.12): nothing to do.
unsafe extern "C" fn wrapped_cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    MPI_SUCCESS
}

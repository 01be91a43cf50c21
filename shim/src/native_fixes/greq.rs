//! Pieces shared by the generalized requests this library hands out (nonblocking collectives and
//! send-receives on native stream communicators, `wrapped_collectives.rs`, `sendrecv_requests.rs`;
//! multiplex `MPI_Comm_idup`, `multiplex/idup.rs`).
//!
//! A request's state is shared by MPICH, which holds it from `MPIX_Grequest_start` until it runs the
//! free function, and, once the application frees the request before it completes, by the orphan that
//! completes it (`crate::orphans`). MPICH's versions differ on when the free function runs: 4.1 runs it
//! inside `MPI_Request_free` of a request not yet complete, 4.2 and later only after
//! `MPI_Grequest_complete`. So the state is reference-counted ([`Shared`]) and records whether MPICH
//! has let go of it: the orphan completes the request with `MPI_Grequest_complete` only while MPICH
//! still holds it, and whoever lets go last frees the state. (4.1's way, with the state freed inside
//! `MPI_Request_free`, was a use after free: the replace form's receive wrote into freed memory.)
//!
//! The callbacks get the state back from MPICH's `extra` word only through [`Shared::with_extra`],
//! whose reference lasts for one closure: no callback can keep it past its own return.
use crate::orphans::Orphan;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{self, Datatype, Opaque, Request};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a generalized request of ours does: one poll that drives it, the stream it runs on.
pub(crate) trait Operation: Send {
    /// The stream-table slot whose endpoint a poll enters (`None`: none).
    fn stream(&self) -> Option<usize>;
    /// One poll (inside the stream's endpoint where it has one); `true` once the operation is
    /// complete (its status and error then stay for the query function).
    fn step(&mut self) -> bool;
}

/// A generalized request's state, shared by MPICH and, once the application freed the request
/// before it completed, by its orphan.
pub(crate) struct Shared<T> {
    op: Mutex<T>,
    /// The request the application holds (`MPI_REQUEST_NULL` until made).
    outer: AtomicUsize,
    /// MPICH ran the free function: it holds the state no more, and the request is gone.
    released: AtomicBool,
    /// `MPI_Grequest_complete` was called (once).
    completed: AtomicBool,
}

impl<T: Operation + 'static> Shared<T> {
    pub(crate) fn new(op: T) -> Arc<Shared<T>> {
        Arc::new(Shared {
            op: Mutex::new(op),
            outer: AtomicUsize::new(MPI_REQUEST_NULL as u32 as usize),
            released: AtomicBool::new(false),
            completed: AtomicBool::new(false),
        })
    }

    pub(crate) fn op(&self) -> MutexGuard<'_, T> {
        self.op.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn outer(&self) -> MPI_Request {
        self.outer.load(Ordering::Acquire) as u32 as MPI_Request
    }

    /// The extra state MPICH keeps: one reference, given back by [`free`](Self::free).
    pub(crate) fn into_extra(this: &Arc<Shared<T>>) -> Opaque {
        Opaque(Arc::into_raw(this.clone()) as *mut c_void)
    }

    /// `f` of the state behind `extra`, borrowed for the call of `f` only (a callback's whole use of it).
    ///
    /// # Safety
    /// `extra` came from [`into_extra`](Self::into_extra) and MPICH still holds it: its free function
    /// ([`free`](Self::free)) has not run.
    pub(crate) unsafe fn with_extra<R>(extra: *mut c_void, f: impl FnOnce(&Shared<T>) -> R) -> R {
        // SAFETY: `extra` is the pointer of an `Arc<Shared<T>>` whose reference MPICH holds until the
        // free function gives it back (the caller's contract), so the state lives for this whole call,
        // and the borrow given to `f` ends with it. Shared use only: the state's mutable parts are
        // behind its mutex and atomics.
        let shared = unsafe { &*(extra as *const Shared<T>) };
        f(shared)
    }

    /// Hands the request out: MPICH made it as `outer`.
    pub(crate) fn set_outer(&self, outer: MPI_Request) {
        self.outer.store(outer as u32 as usize, Ordering::Release);
    }

    /// One poll; the first time the operation is found complete, `open` forgets the request (before
    /// MPICH may hand its handle out again) and, while MPICH still holds it, it is completed
    /// (`MPI_Grequest_complete`). Returns whether it is complete.
    pub(crate) fn poll(&self, open: &Open<T>) -> bool {
        let done = {
            let mut op = self.op();
            op.step()
        };
        if done && !self.completed.swap(true, Ordering::AcqRel) {
            let outer = self.outer();
            open.remove(outer);
            if outer != MPI_REQUEST_NULL && !self.released.load(Ordering::Acquire) {
                // An error here has nobody to go to: the request's waiter gets the query's error.
                let _ = Request(outer).grequest_complete();
            }
        }
        done
    }

    /// The free function's body: MPICH lets go of its reference.
    ///
    /// # Safety
    /// `extra` came from [`into_extra`](Self::into_extra), and MPICH frees it once.
    pub(crate) unsafe fn free(extra: *mut c_void) {
        // SAFETY: `extra` is the raw form of the reference `into_extra` made for MPICH, given back here
        // once (the caller's contract), so the count it takes over is one nobody else drops.
        let this = unsafe { Arc::from_raw(extra as *const Shared<T>) };
        this.released.store(true, Ordering::Release);
    }
}

/// An orphaned generalized request: polled until its operation completes.
struct Orphaned<T: Operation + 'static>(Arc<Shared<T>>, &'static Open<T>);

impl<T: Operation + 'static> Orphan for Orphaned<T> {
    fn stream(&self) -> Option<usize> {
        self.0.op().stream()
    }

    unsafe fn poll(&mut self) -> bool {
        self.0.poll(self.1)
    }
}

/// The requests of one kind handed out and not yet complete, by the handle the application holds,
/// for `MPI_Request_free` (one relaxed load while none is open).
pub(crate) struct Open<T> {
    map: Mutex<Option<HashMap<MPI_Request, Arc<Shared<T>>>>>,
    count: AtomicUsize,
}

impl<T: Operation + 'static> Open<T> {
    pub(crate) const fn new() -> Open<T> {
        Open { map: Mutex::new(None), count: AtomicUsize::new(0) }
    }

    pub(crate) fn insert(&self, shared: &Arc<Shared<T>>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.get_or_insert_with(HashMap::new).insert(shared.outer(), shared.clone()).is_none() {
            self.count.fetch_add(1, Ordering::Release);
        }
    }

    pub(crate) fn remove(&self, outer: MPI_Request) -> Option<Arc<Shared<T>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let shared = map.as_mut().and_then(|m| m.remove(&outer));
        if shared.is_some() {
            self.count.fetch_sub(1, Ordering::Release);
        }
        shared
    }

    /// Before `MPI_Request_free` of `request` (`None`: a null pointer): if it is one of these, not
    /// complete, its orphan (adopted once MPICH's free returned, `native_fixes::request_free`).
    pub(crate) fn freeing(&'static self, request: Option<MPI_Request>) -> Option<Box<dyn Orphan>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let shared = self.remove(request?)?;
        if shared.completed.load(Ordering::Acquire) {
            return None;
        }
        Some(Box::new(Orphaned(shared, self)))
    }
}

/// The body of a generalized request's wait function: MPICH calls it in a loop for the requests of
/// one `MPI_Wait*`, and each call polls every request once.
///
/// # Safety
/// `states` holds `count` extra words MPICH passed to the wait function, each one `poll` accepts
/// (its request's, still held by MPICH).
pub(crate) unsafe fn poll_each(
    count: c_int,
    states: *mut *mut c_void,
    poll: unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int,
) -> c_int {
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
pub(crate) unsafe fn collective_status(status: *mut MPI_Status, error: c_int) -> c_int {
    // SAFETY: MPICH passes the query function a status of its own, valid and not otherwise used
    // during the call (the caller's contract).
    let status = unsafe { &mut *status };
    status.MPI_SOURCE = MPI_ANY_SOURCE;
    status.MPI_TAG = MPI_ANY_TAG;
    // As MPICH's own zero-byte status: failures leave the fields as they were, nothing to report.
    let _ = mpi::datatype::set_elements(status, Datatype::BYTE, 0);
    let _ = mpi::datatype::set_cancelled(status, false);
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Steps(u32);
    impl Operation for Steps {
        fn stream(&self) -> Option<usize> {
            None
        }
        fn step(&mut self) -> bool {
            self.0 = self.0.saturating_sub(1);
            self.0 == 0
        }
    }

    /// MPICH 4.1's order: the free function runs before the operation completes; the orphan still
    /// holds the state, completes it without touching the request MPICH freed, and the state goes with
    /// the last reference.
    #[test]
    fn a_state_outlives_an_early_free() {
        static OPEN: Open<Steps> = Open::new();
        let shared = Shared::new(Steps(2));
        let extra = Shared::into_extra(&shared);
        OPEN.insert(&shared);
        let mut orphan = OPEN.freeing(Some(shared.outer())).expect("an open request becomes an orphan");
        // SAFETY: `extra` is the reference `into_extra` made, given back once, as MPICH's free function does.
        unsafe { Shared::<Steps>::free(extra.0) };
        assert_eq!(Arc::strong_count(&shared), 2, "the orphan and this test hold it");
        // SAFETY: an orphan without a stream needs no claim; this one calls no MPI (below).
        assert!(!unsafe { orphan.poll() });
        // Complete: MPICH released it, so no MPI_Grequest_complete (which would be a use after free: in
        // a unit test, an unresolved PMPI table would abort).
        // SAFETY: as above.
        assert!(unsafe { orphan.poll() });
        drop(orphan);
        assert_eq!(Arc::strong_count(&shared), 1);
    }
}

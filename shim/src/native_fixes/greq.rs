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
//! The callbacks get the state back from MPICH's `extra` word only through `kept::lend`, whose reference
//! lasts for one closure: no callback can keep it past its own return; the free function's
//! `kept::take_back` ends MPICH's hold.
use crate::orphans::{MayPoll, Orphan};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{kept, Request};
use std::collections::HashMap;

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

    /// The extra state MPICH keeps: one reference (`kept`), which the free function gives back
    /// ([`released`](Self::released)).
    pub(crate) fn into_extra(this: &Arc<Shared<T>>) -> kept::Given<Shared<T>> {
        kept::give(this)
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

    /// The free function's body (or a start MPICH refused): MPICH's reference, back from it
    /// (`kept::take_back`, `Given::refused`), is let go of.
    pub(crate) fn released(this: Arc<Shared<T>>) {
        this.released.store(true, Ordering::Release);
    }
}

/// An orphaned generalized request: polled until its operation completes.
struct Orphaned<T: Operation + 'static>(Arc<Shared<T>>, &'static Open<T>);

impl<T: Operation + 'static> Orphan for Orphaned<T> {
    fn stream(&self) -> Option<usize> {
        self.0.op().stream()
    }

    fn poll(&mut self, _: MayPoll) -> bool {
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
        let word = extra.word().0;
        extra.taken();
        OPEN.insert(&shared);
        let mut orphan = OPEN.freeing(Some(shared.outer())).expect("an open request becomes an orphan");
        // SAFETY: `word` is the reference `into_extra` made, given back once, as MPICH's free function does.
        Shared::released(unsafe { kept::take_back::<Shared<Steps>>(word) });
        assert_eq!(Arc::strong_count(&shared), 2, "the orphan and this test hold it");
        // An orphan without a stream needs no claim; this one calls no MPI (below).
        assert!(!orphan.poll(crate::orphans::MayPoll::for_test()));
        // Complete: MPICH released it, so no MPI_Grequest_complete (which would be a use after free: in
        // a unit test, an unresolved PMPI table would abort).
        assert!(orphan.poll(crate::orphans::MayPoll::for_test()));
        drop(orphan);
        assert_eq!(Arc::strong_count(&shared), 1);
    }
}

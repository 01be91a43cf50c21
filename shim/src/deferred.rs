//! Destruction work that calls MPI, kept out of MPICH's callbacks.
//!
//! A communicator's record goes in its attribute delete callback, which MPICH runs wherever it drops
//! the communicator's last reference: inside `MPI_Comm_free`, but also inside another thread's wait or
//! test that completed the communicator's last pending operation, or a generalized request's poll.
//! MPI called from there could enter an endpoint another thread owns, or re-enter MPICH where it does
//! not expect it. So the callback only does bookkeeping and defers what calls MPI (freeing a policy
//! communicator's base, a multiplex communicator's hidden communicators and the messages nobody
//! received there) to here; it runs where the library is in control, and each piece claims the
//! endpoints it enters (a piece that finds one busy defers itself again): right after `MPI_Comm_free`
//! returns, in every help (`helper::help`), and at `MPI_Finalize`. [`settle`] also waits for the pieces
//! other threads are running, so that what `MPI_Comm_free` gives back is back when it returns.
use crate::runtime::Runtime;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

type Work = Box<dyn FnOnce(&Runtime) + Send>;

static WORK: Mutex<Vec<Work>> = Mutex::new(Vec::new());
/// Pieces deferred and not yet taken by a `run`.
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Pieces a `run` took and is running now.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Keeps `work` for the next [`run`].
pub fn defer(work: impl FnOnce(&Runtime) + Send + 'static) {
    PENDING.fetch_add(1, Ordering::AcqRel);
    WORK.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(work));
}

/// Whether work is waiting (one relaxed load).
#[inline]
pub fn pending() -> bool {
    PENDING.load(Ordering::Relaxed) != 0
}

/// Runs the work kept so far, in the order it was deferred, outside the lock (a piece may defer more,
/// itself included, which the next run takes).
pub fn run(rt: &Runtime) {
    let work = {
        let mut list = WORK.lock().unwrap_or_else(|e| e.into_inner());
        RUNNING.fetch_add(list.len(), Ordering::AcqRel);
        PENDING.fetch_sub(list.len(), Ordering::AcqRel);
        std::mem::take(&mut *list)
    };
    for w in work {
        w(rt);
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs the work kept so far and waits until no other thread is running any: every piece deferred
/// before the call has run once (pieces that found an endpoint busy are deferred again, for later).
pub fn settle(rt: &Runtime) {
    run(rt);
    while RUNNING.load(Ordering::Acquire) != 0 {
        std::thread::yield_now();
    }
}

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
use crate::ownership::Deferred;
use crate::runtime::Runtime;
use std::sync::LazyLock;

type Work = Box<dyn FnOnce(&Runtime) + Send>;

static WORK: LazyLock<Deferred<Work>> = LazyLock::new(Deferred::new);

/// Keeps `work` for the next [`run`].
pub fn defer(work: impl FnOnce(&Runtime) + Send + 'static) {
    WORK.defer(Box::new(work));
}

/// Whether work is waiting.
#[inline]
pub fn pending() -> bool {
    WORK.pending()
}

/// Says that a piece panicked (it counts as run: `ownership::Deferred`); what it had to give back may
/// be lost, the process goes on.
fn report(panicked: usize) {
    if panicked != 0 {
        mpixstream_wrappers::say!(
            "mpixstream: {panicked} piece(s) of deferred destruction work panicked; what they free may leak"
        );
    }
}

/// Runs the work kept so far, in the order it was deferred, outside the lock (a piece may defer more,
/// itself included, which the next run takes). A piece that panics counts as run; the others still run.
pub fn run(rt: &Runtime) {
    report(WORK.run(|w| w(rt)));
}

/// Runs the work kept so far and waits until no other thread is running any: every piece deferred
/// before the call has run once (pieces that found an endpoint busy are deferred again, for later; a
/// piece that panicked is finished, so this never waits for it).
pub fn settle(rt: &Runtime) {
    report(WORK.settle(|w| w(rt)));
}

//! Operations that no application thread will wait for any more: a routed buffered message
//! (`MPI_Bsend` is local, so it returns before its message has left), a routed nonblocking
//! send-receive or collective the application freed before it completed. Each still needs its
//! stream's endpoint turned until it completes, and the thread that started it may be blocked
//! elsewhere, busy, or gone.
//!
//! So none belongs to a thread: they are kept here, and whoever helps (`helper::help`: the progress
//! helper thread, every wait of ours, `MPI_Buffer_detach`, `MPI_Finalize`) polls them, each poll under
//! its stream's claim (`StreamSlot::try_claim`: skipped while another thread is inside that endpoint;
//! that thread progresses it). No thread ever waits for a peer at its own exit, and no operation
//! depends on the thread that started it (docs/architecture.md, "Ownership and the progress helper").
use crate::ownership::Orphans;
use crate::runtime::Runtime;
use std::sync::LazyLock;

/// An operation nobody waits for.
pub trait Orphan: Send {
    /// The stream-table slot whose endpoint a poll enters (`None`: it needs no claim).
    fn stream(&self) -> Option<usize>;
    /// One poll, inside the stream's endpoint; `true` once complete (it is then dropped, which gives
    /// back what it holds).
    fn poll(&mut self, may: MayPoll) -> bool;
    /// The endpoint is busy (its owner inside, maybe blocked there for good): gives back what the
    /// application may wait for (a buffered message's space) if the operation is known complete
    /// without entering the endpoint. The rest (the request, the memory) waits for a poll.
    fn reclaim(&mut self, _: MayReclaim) {}
}

/// What lets an orphan be polled, made only by [`turn`]: the caller holds the claim of the orphan's
/// endpoint (or it needs none), and MPI is initialised (two threads inside one reserved endpoint would
/// corrupt MPICH's state: docs/architecture.md).
pub struct MayPoll(());

impl MayPoll {
    /// For unit tests of orphans that need neither a claim nor MPI.
    #[cfg(test)]
    pub fn for_test() -> MayPoll {
        MayPoll(())
    }
}

/// What lets an orphan reclaim, made only by [`turn`] from an application's thread of ours waiting for
/// such a resource (`MPI_Bsend` waiting for space, `MPI_Buffer_detach`): MPI is initialised and the
/// calling thread is one the program runs, which may enter MPICH's implicit pool (MPICH 4.1.3 broke
/// beside a thread of ours there, docs/native-defects.md).
pub struct MayReclaim(());

static LIST: LazyLock<Orphans<Box<dyn Orphan>>> = LazyLock::new(Orphans::new);

/// Keeps `orphan` until a helper completes it (it holds its stream's slot until then: the slot is not
/// handed to another stream meanwhile).
pub fn adopt(orphan: Box<dyn Orphan>) {
    let endpoint = orphan.stream().and_then(|s| crate::runtime::active().map(|rt| rt.streams.slot(s).endpoint()));
    LIST.adopt(orphan, endpoint);
}

/// How many orphans are not complete.
#[inline]
pub fn pending() -> usize {
    LIST.pending()
}

/// Polls every orphan whose endpoint the calling thread can enter now and drops the complete ones;
/// with `reclaim` (a program's thread waiting for what an orphan holds), the others give back what is
/// known complete without entering their endpoint (`ownership::Orphans::turn`).
pub fn turn(rt: &Runtime, reclaim: bool) {
    let me = crate::streams::thread_token();
    LIST.turn(
        me,
        |o| o.stream().map(|s| rt.streams.slot(s).endpoint()),
        // MPI is initialised (`rt` exists) and this thread holds the claim of the orphan's stream for
        // the poll (`Orphans::turn`).
        |o| o.poll(MayPoll(())),
        |o| {
            if reclaim {
                o.reclaim(MayReclaim(()))
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Countdown(u32, Arc<AtomicUsize>);
    impl Orphan for Countdown {
        fn stream(&self) -> Option<usize> {
            None
        }
        fn poll(&mut self, _: MayPoll) -> bool {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0 = self.0.saturating_sub(1);
            self.0 == 0
        }
    }

    /// Each orphan is polled until it completes, then dropped; the count follows.
    #[test]
    fn orphans_are_polled_until_complete() {
        let polls = Arc::new(AtomicUsize::new(0));
        let list: Orphans<Box<dyn Orphan>> = Orphans::new();
        list.adopt(Box::new(Countdown(1, polls.clone())), None);
        list.adopt(Box::new(Countdown(3, polls.clone())), None);
        assert_eq!(list.pending(), 2);
        for _ in 0..3 {
            // `Countdown` needs neither a claim nor MPI: what `turn` does for orphans without a stream.
            list.turn(1, |o| o.stream().map(|_| unreachable!()), |o| o.poll(MayPoll::for_test()), |_| {});
        }
        assert_eq!(list.pending(), 0);
        assert_eq!(polls.load(Ordering::Relaxed), 1 + 3);
    }
}

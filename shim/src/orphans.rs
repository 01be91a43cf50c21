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
use crate::runtime::Runtime;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// An operation nobody waits for.
pub trait Orphan: Send {
    /// The stream-table slot whose endpoint a poll enters (`None`: it needs no claim).
    fn stream(&self) -> Option<usize>;
    /// One poll, inside the stream's endpoint; `true` once complete (it is then dropped, which gives
    /// back what it holds).
    fn poll(&mut self, may: MayPoll) -> bool;
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

static LIST: Mutex<Vec<Box<dyn Orphan>>> = Mutex::new(Vec::new());
/// How many orphans are not complete (the fast check of every helper).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Keeps `orphan` until a helper completes it.
pub fn adopt(orphan: Box<dyn Orphan>) {
    PENDING.fetch_add(1, Ordering::AcqRel);
    LIST.lock().unwrap_or_else(|e| e.into_inner()).push(orphan);
}

/// How many orphans are not complete.
#[inline]
pub fn pending() -> usize {
    PENDING.load(Ordering::Acquire)
}

/// Polls every orphan whose endpoint the calling thread can enter now; drops the complete ones.
/// The list is taken out of its lock for the polls (a poll calls MPI, whose callbacks may adopt more).
pub fn turn(rt: &Runtime) {
    if pending() == 0 {
        return;
    }
    let mut mine = std::mem::take(&mut *LIST.lock().unwrap_or_else(|e| e.into_inner()));
    let before = mine.len();
    mine.retain_mut(|o| {
        // MPI is initialised: `rt` exists.
        let done = match o.stream() {
            None => o.poll(MayPoll(())),
            // This thread holds the claim of the orphan's stream for the poll (`_claim`).
            Some(s) => match rt.streams.slot(s).try_claim() {
                Some(_claim) => o.poll(MayPoll(())),
                None => false,
            },
        };
        !done
    });
    PENDING.fetch_sub(before - mine.len(), Ordering::AcqRel);
    LIST.lock().unwrap_or_else(|e| e.into_inner()).append(&mut mine);
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let base = pending();
        adopt(Box::new(Countdown(1, polls.clone())));
        adopt(Box::new(Countdown(3, polls.clone())));
        assert_eq!(pending(), base + 2);
        let list = std::mem::take(&mut *LIST.lock().unwrap());
        let mut list: Vec<_> = list.into_iter().collect();
        // Polled by hand (no runtime in a unit test): what `turn` does for orphans without a stream.
        for _ in 0..3 {
            let before = list.len();
            // `Countdown` needs neither a claim nor MPI.
            list.retain_mut(|o| !o.poll(MayPoll::for_test()));
            PENDING.fetch_sub(before - list.len(), Ordering::AcqRel);
        }
        assert!(list.is_empty());
        assert_eq!(pending(), base);
        assert_eq!(polls.load(Ordering::Relaxed), 1 + 3);
    }
}

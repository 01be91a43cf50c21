//! The ownership protocol, with no MPI in it (docs/architecture.md, "Ownership and the progress
//! helper", says what it assumes of MPICH):
//! - [`Endpoint`]: one owner per reserved endpoint at every instant ([`Endpoint::claim`],
//!   [`Endpoint::try_claim`], both nesting for the owner), the count of claims the progress helper reads
//!   ([`Presence`]), and the orphans that still need the endpoint ([`Endpoint::holds`]): a slot is handed
//!   out again ([`Endpoint::reusable`]) only once they are done, so an orphan is never polled under
//!   another stream's claim.
//! - [`Orphans`]: operations nobody waits for. A turn polls each under its endpoint's claim when that is
//!   free; when another thread is inside the endpoint (its owner, possibly blocked there for as long as
//!   the program likes), the orphan is only asked to *reclaim*: to give back what the application may
//!   wait for ([`Held`] from a [`Budget`]) if its operation is known complete without entering the
//!   endpoint. So no resource the application waits for comes back only under a claim its holder may
//!   keep while blocked.
//! - [`Deferred`]: destruction work kept out of MPICH's callbacks; a piece that panics is counted as
//!   finished and the rest of its batch still runs, so [`Deferred::settle`] never waits for it forever.
//!
//! Written against `super::sync` (std here, loom in `shim/tests/ownership_model.rs`), so the file the
//! library runs is the file the model check explores.
use super::sync::{yield_now, AtomicI64, AtomicU32, AtomicUsize, Mutex, Ordering, SPINS};

/// A stream's reserved endpoint: who is inside it, how often someone entered it, and how many orphans
/// still need it.
pub struct Endpoint {
    /// The token of the one thread inside it now (0: none). MPICH's reserved VCI has no lock.
    owner: AtomicUsize,
    /// Outermost claims taken so far (written by the owner only).
    claims: AtomicU32,
    /// Orphans adopted on this endpoint and not complete.
    holds: AtomicU32,
    /// Operations on this endpoint that MPICH's progress hooks advance from whichever thread runs
    /// progress (a nonblocking collective's schedule): a thread of ours that no program call made (the
    /// helper) runs progress only while it holds the claims of all such endpoints.
    scheduled: AtomicU32,
}

/// An endpoint between two looks of the progress helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// A thread entered it since the previous look: its owner is at work and turns it.
    Entered,
    /// One thread has been inside it since before the previous look: blocked in a call there.
    Blocked,
    /// Nobody entered it since the previous look: its owner is away.
    Away,
}

/// The calling thread's claim of an endpoint, released when dropped (a nested claim releases nothing).
#[must_use]
pub struct Claim<'a> {
    endpoint: &'a Endpoint,
    outermost: bool,
}

impl Claim<'_> {
    /// Whether this claim took the endpoint (else the thread owned it already further up its stack).
    #[inline(always)]
    pub fn outermost(&self) -> bool {
        self.outermost
    }

    /// Keeps the endpoint past this value's life: the caller releases it with [`Endpoint::leave`]
    /// (a set of claims kept as a bit set).
    #[inline(always)]
    pub fn keep(self) -> bool {
        let outermost = self.outermost;
        std::mem::forget(self);
        outermost
    }
}

impl Drop for Claim<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.outermost {
            self.endpoint.leave();
        }
    }
}

impl Default for Endpoint {
    fn default() -> Self {
        Endpoint::new()
    }
}

impl Endpoint {
    pub fn new() -> Endpoint {
        Endpoint {
            owner: AtomicUsize::new(0),
            claims: AtomicU32::new(0),
            holds: AtomicU32::new(0),
            scheduled: AtomicU32::new(0),
        }
    }

    /// Takes the endpoint for thread `me` now or never (`None`: another thread is inside).
    #[inline(always)]
    pub fn try_claim(&self, me: usize) -> Option<Claim<'_>> {
        match self.owner.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(self.taken()),
            Err(current) if current == me => Some(Claim { endpoint: self, outermost: false }),
            Err(_) => None,
        }
    }

    /// Takes the endpoint for thread `me`, calling `contended` once and waiting while another thread is
    /// inside.
    #[inline(always)]
    pub fn claim_reporting(&self, me: usize, contended: impl FnOnce()) -> Claim<'_> {
        match self.try_claim(me) {
            Some(c) => c,
            None => {
                contended();
                self.claim_contended(me)
            }
        }
    }

    /// Takes the endpoint for thread `me`, waiting while another thread is inside.
    #[inline(always)]
    pub fn claim(&self, me: usize) -> Claim<'_> {
        self.claim_reporting(me, || {})
    }

    #[cold]
    #[inline(never)]
    fn claim_contended(&self, me: usize) -> Claim<'_> {
        let mut spins = 0u32;
        loop {
            if self.owner.load(Ordering::Relaxed) == 0
                && self.owner.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return self.taken();
            }
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                yield_now();
            }
        }
    }

    #[inline(always)]
    fn taken(&self) -> Claim<'_> {
        // Only the owner writes the count: a load and a store, no read-modify-write.
        self.claims.store(self.claims.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        Claim { endpoint: self, outermost: true }
    }

    /// Leaves an endpoint taken by a claim kept with [`Claim::keep`].
    #[inline(always)]
    pub fn leave(&self) {
        self.owner.store(0, Ordering::Release);
    }

    /// What the progress helper sees since its previous look (`seen`: the claim count then, updated).
    pub fn presence(&self, seen: &mut u32) -> Presence {
        let now = self.claims.load(Ordering::Relaxed);
        let presence = if now != *seen {
            Presence::Entered
        } else if self.owned() {
            Presence::Blocked
        } else {
            Presence::Away
        };
        *seen = now;
        presence
    }

    /// The claim count now.
    pub fn claim_count(&self) -> u32 {
        self.claims.load(Ordering::Relaxed)
    }

    /// Whether some thread is inside the endpoint right now (a snapshot).
    pub fn owned(&self) -> bool {
        self.owner.load(Ordering::Acquire) != 0
    }

    /// Orphans that still need the endpoint.
    pub fn holds(&self) -> u32 {
        self.holds.load(Ordering::Acquire)
    }

    /// Whether the endpoint's slot may be handed to another stream: no orphan needs it any more.
    pub fn reusable(&self) -> bool {
        self.holds() == 0
    }

    /// An operation MPICH's progress hooks advance started on this endpoint ([`Endpoint::unschedule`]
    /// once it completed).
    pub fn schedule(&self) {
        self.scheduled.fetch_add(1, Ordering::AcqRel);
    }

    pub fn unschedule(&self) {
        self.scheduled.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether MPICH's progress hooks may enter this endpoint (an operation of [`Endpoint::schedule`]).
    pub fn scheduled(&self) -> bool {
        self.scheduled.load(Ordering::Acquire) != 0
    }

    /// Before the endpoint goes back (`MPIX_Stream_free`: MPICH hands its VCI to the next stream
    /// created): `help`s (a turn of the orphans) until no orphan needs it.
    pub fn until_reusable(&self, mut help: impl FnMut()) {
        while !self.reusable() {
            help();
            if !self.reusable() {
                yield_now();
            }
        }
    }
}

/// An amount the application may wait for (the attached buffer's space): a limit and what is taken.
pub struct Budget {
    limit: AtomicI64,
    used: AtomicI64,
}

/// What [`Budget::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// Taken: give it back once what it paid for is done.
    Taken(Held),
    /// Not now: held by others, who give it back.
    NotNow,
    /// Never: larger than the whole limit.
    Never,
}

/// An amount taken from a [`Budget`]; [`Held::give_back`] consumes it, so it comes back exactly once.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub struct Held(i64);

impl Held {
    /// Gives the amount back to `budget`.
    pub fn give_back(self, budget: &Budget) {
        budget.used.fetch_sub(self.0, Ordering::AcqRel);
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

impl Budget {
    pub fn new() -> Budget {
        Budget { limit: AtomicI64::new(0), used: AtomicI64::new(0) }
    }

    pub fn set_limit(&self, limit: i64) {
        self.limit.store(limit, Ordering::Release);
    }

    pub fn limit(&self) -> i64 {
        self.limit.load(Ordering::Acquire)
    }

    /// What is taken now (0: everything given back).
    pub fn used(&self) -> i64 {
        self.used.load(Ordering::Acquire)
    }

    /// Takes `amount` if it fits now.
    pub fn take(&self, amount: i64) -> Take {
        let limit = self.limit();
        if amount > limit {
            return Take::Never;
        }
        if self.used.fetch_add(amount, Ordering::AcqRel) + amount > limit {
            self.used.fetch_sub(amount, Ordering::AcqRel);
            return Take::NotNow;
        }
        Take::Taken(Held(amount))
    }
}

/// Operations nobody waits for, each possibly needing an endpoint, kept until complete.
pub struct Orphans<O> {
    list: Mutex<Vec<O>>,
    pending: AtomicUsize,
}

impl<O> Default for Orphans<O> {
    fn default() -> Self {
        Orphans::new()
    }
}

impl<O> Orphans<O> {
    pub fn new() -> Orphans<O> {
        Orphans { list: Mutex::new(Vec::new()), pending: AtomicUsize::new(0) }
    }

    /// Keeps `orphan` until a turn completes it; `endpoint`: the one its polls enter (it holds it).
    pub fn adopt(&self, orphan: O, endpoint: Option<&Endpoint>) {
        if let Some(e) = endpoint {
            e.holds.fetch_add(1, Ordering::AcqRel);
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push(orphan);
    }

    /// How many orphans are not complete.
    #[inline]
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// One turn by thread `me`: each orphan whose endpoint (`endpoint_of`) is free is polled inside its
    /// claim (`poll`: `true` once complete; it is then dropped, which gives back what it holds, and
    /// its hold on the endpoint ends); one whose endpoint another thread is inside gets `reclaim`,
    /// outside the endpoint: what the application may wait for comes back there if its operation is
    /// known complete. The list is taken out of its lock for the turn (a poll may adopt more).
    pub fn turn<'e>(
        &self,
        me: usize,
        endpoint_of: impl Fn(&O) -> Option<&'e Endpoint>,
        mut poll: impl FnMut(&mut O) -> bool,
        mut reclaim: impl FnMut(&mut O),
    ) {
        if self.pending() == 0 {
            return;
        }
        let mut mine = std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()));
        let before = mine.len();
        mine.retain_mut(|o| match endpoint_of(o) {
            None => !poll(o),
            Some(e) => match e.try_claim(me) {
                Some(_claim) => {
                    let done = poll(o);
                    if done {
                        e.holds.fetch_sub(1, Ordering::AcqRel);
                    }
                    !done
                }
                None => {
                    reclaim(o);
                    true
                }
            },
        });
        let done = before - mine.len();
        // Put back before counting down: `pending() == 0` means the list is empty.
        self.list.lock().unwrap_or_else(|e| e.into_inner()).append(&mut mine);
        self.pending.fetch_sub(done, Ordering::AcqRel);
    }
}

/// Destruction work: pieces deferred, run later where calling MPI is safe.
pub struct Deferred<W> {
    work: Mutex<Vec<W>>,
    /// Pieces deferred and not yet taken by a run.
    pending: AtomicUsize,
    /// Pieces a run took and has not finished.
    running: AtomicUsize,
}

/// Counts a running piece as finished when dropped, also when the piece panicked.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<W> Default for Deferred<W> {
    fn default() -> Self {
        Deferred::new()
    }
}

impl<W> Deferred<W> {
    pub fn new() -> Deferred<W> {
        Deferred { work: Mutex::new(Vec::new()), pending: AtomicUsize::new(0), running: AtomicUsize::new(0) }
    }

    /// Keeps `work` for the next run.
    pub fn defer(&self, work: W) {
        let mut list = self.work.lock().unwrap_or_else(|e| e.into_inner());
        self.pending.fetch_add(1, Ordering::AcqRel);
        list.push(work);
    }

    /// Whether work is waiting.
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) != 0
    }

    /// Pieces taken by a run and not finished.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Runs the work kept so far with `exec`, in the order deferred, outside the lock. A piece that
    /// panics is finished all the same and the rest of the batch runs; how many panicked is returned.
    pub fn run(&self, mut exec: impl FnMut(W)) -> usize {
        let batch = {
            let mut list = self.work.lock().unwrap_or_else(|e| e.into_inner());
            self.running.fetch_add(list.len(), Ordering::AcqRel);
            self.pending.fetch_sub(list.len(), Ordering::AcqRel);
            std::mem::take(&mut *list)
        };
        let mut panicked = 0;
        for w in batch {
            let _finished = Finished(&self.running);
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exec(w)));
            panicked += ran.is_err() as usize;
        }
        panicked
    }

    /// Runs the work kept so far and waits until no other thread runs any: every piece deferred before
    /// the call has run once (or panicked). How many of this thread's pieces panicked.
    pub fn settle(&self, exec: impl FnMut(W)) -> usize {
        let panicked = self.run(exec);
        while self.running() != 0 {
            yield_now();
        }
        panicked
    }
}

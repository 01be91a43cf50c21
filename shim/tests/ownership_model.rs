//! The ownership protocol (`shim/src/ownership/protocol.rs`, the very file the library runs) checked
//! with loom over every interleaving of its threads (2 or 3 per scenario). MPICH is outside the model;
//! what the model assumes of it (docs/architecture.md, "What the protocol assumes of MPICH"):
//! - a reserved endpoint's progress must never run in two threads at once: a turn marks the endpoint
//!   occupied and fails the check if it already was;
//! - a thread blocked in a call inside an endpoint turns that endpoint (it completes the operations
//!   there), and a message's completion is readable without entering its endpoint
//!   (`MPI_Request_get_status`): an atomic flag;
//! - freeing an operation's request needs its endpoint (a poll under the claim).
//!
//! `cargo test` runs it (about a second in release on two cores).
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The primitives the protocol is written against, loom's here.
#[allow(unused_imports)]
mod sync {
    pub use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};
    pub use loom::sync::Mutex;
    pub use loom::thread::yield_now;
    /// A waiting claim yields at once (its first spin already counts 1; loom schedules the others).
    pub const SPINS: u32 = 1;
}

#[allow(dead_code)]
#[path = "../src/ownership/protocol.rs"]
mod protocol;

use protocol::{Budget, Deferred, Endpoint, Held, Orphans, Take};

/// Every interleaving with up to `PREEMPTIONS` preemptions (a thread switched out where it could have
/// gone on; switches at a thread's end or wait are free): loom's bound, without which the waiting
/// claims' spin loops make the count of schedules unbounded. The bugs it is for need one or two (issue 46's deadlock needs none).
const PREEMPTIONS: usize = 2;

/// Runs `f` under loom with the bound above; the waiting loops (a claim waiting, a waiter for space)
/// make each schedule long, hence the branch limit above loom's default.
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(PREEMPTIONS);
    model.max_branches = 100_000;
    model.check(f);
}

/// MPICH's reserved endpoint (a VCI without a lock): whether a thread is inside its progress now,
/// which two threads must never be at once, and which stream it serves now (a VCI is handed to the
/// next stream once freed).
struct Vci {
    inside: AtomicBool,
    turns: AtomicU32,
    generation: AtomicU32,
    /// The VCI's own state, which MPICH touches without a lock: loom fails the check where two turns
    /// are not ordered by happens-before (a claim that let a thread in on a stale view of another's
    /// release), which the swap on `inside` alone, always reading the latest value, cannot see.
    unlocked: UnsafeCell<u32>,
}

impl Vci {
    fn new() -> Vci {
        Vci {
            inside: AtomicBool::new(false),
            turns: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            unlocked: UnsafeCell::new(0),
        }
    }

    /// One progress turn: loom may switch threads at each step inside it, so a second thread entering
    /// meanwhile (in any interleaving) finds `inside` set and fails the check; and a turn that does not
    /// happen after the previous one fails loom's causality check on `unlocked`.
    fn turn(&self) {
        assert!(!self.inside.swap(true, Ordering::AcqRel), "two threads inside one reserved endpoint");
        // SAFETY: loom's cell checks that no other access to it is concurrent (it panics otherwise);
        // the pointer is to a live u32 owned by this Vci.
        self.unlocked.with_mut(|p| unsafe { *p += 1 });
        self.turns.fetch_add(1, Ordering::Relaxed);
        self.inside.store(false, Ordering::Release);
    }
}

/// A routed buffered message nobody waits for: the space it holds until it is known transmitted, its
/// request (freed by a poll under the claim).
struct Departing {
    vci: Arc<Vci>,
    /// The stream generation of its VCI when it was sent.
    generation: u32,
    /// Set by a turn of its endpoint (the owner's blocked call or a poll): the message left.
    left: Arc<AtomicBool>,
    space: Option<Held>,
    budget: Arc<Budget>,
}

impl Departing {
    fn poll(&mut self) -> bool {
        assert_eq!(self.vci.generation.load(Ordering::Acquire), self.generation, "polled another stream's endpoint");
        self.vci.turn();
        self.left.store(true, Ordering::Release);
        self.give_back();
        true
    }

    fn reclaim(&mut self) {
        if self.left.load(Ordering::Acquire) {
            self.give_back();
        }
    }

    fn give_back(&mut self) {
        if let Some(s) = self.space.take() {
            s.give_back(&self.budget);
        }
    }
}

/// One endpoint with its claim, and a message sent there holding the whole buffer.
struct World {
    endpoint: Endpoint,
    vci: Arc<Vci>,
    budget: Arc<Budget>,
    orphans: Orphans<Departing>,
    left: Arc<AtomicBool>,
}

impl World {
    /// Thread 1's `MPI_Bsend` of m1 on c1 (before the scenario's threads start): the buffer is full.
    fn with_m1() -> Arc<World> {
        let budget = Arc::new(Budget::new());
        budget.set_limit(1);
        let Take::Taken(space) = budget.take(1) else { panic!("an empty buffer has space") };
        let w = World {
            endpoint: Endpoint::new(),
            vci: Arc::new(Vci::new()),
            budget: budget.clone(),
            orphans: Orphans::new(),
            left: Arc::new(AtomicBool::new(false)),
        };
        let m1 = Departing { vci: w.vci.clone(), generation: 0, left: w.left.clone(), space: Some(space), budget };
        w.orphans.adopt(m1, Some(&w.endpoint));
        Arc::new(w)
    }

    /// A turn of the orphans by thread `me`; `reclaim`: a waiter for space (the fix), else the turn of
    /// before (polls only).
    fn turn(&self, me: usize, reclaim: bool) {
        self.orphans.turn(
            me,
            |_| Some(&self.endpoint),
            |o| o.poll(),
            |o| {
                if reclaim {
                    o.reclaim()
                }
            },
        );
    }
}

/// Issue 46's deadlock: thread 1 owns c1's endpoint and blocks there (its `MPI_Recv` turns the
/// endpoint, so m1 leaves) until thread 2's `MPI_Bsend` of m2, which needs m1's space, has gone; the
/// progress helper (a third thread) turns what it can. `reclaim`: whether waiters reclaim.
fn blocked_owner(reclaim: bool) {
    let w = World::with_m1();
    let answered = Arc::new(AtomicBool::new(false));
    let owner = {
        let (w, answered) = (w.clone(), answered.clone());
        thread::spawn(move || {
            let _claim = w.endpoint.claim(1);
            // Blocked in MPI_Recv on c1: its progress turns c1's endpoint until the answer comes.
            loop {
                w.vci.turn();
                w.left.store(true, Ordering::Release);
                if answered.load(Ordering::Acquire) {
                    break;
                }
                thread::yield_now();
            }
        })
    };
    let helper = {
        let w = w.clone();
        thread::spawn(move || {
            // The helper thread's look: never inside an endpoint another thread is in; never reclaims.
            if let Some(_c) = w.endpoint.try_claim(3) {
                w.vci.turn();
            }
            w.turn(3, false);
        })
    };
    // Thread 2: MPI_Bsend of m2 waits for space, helping (and, with the fix, reclaiming).
    let m2 = loop {
        match w.budget.take(1) {
            Take::Taken(space) => break space,
            Take::NotNow => {
                w.turn(2, reclaim);
                thread::yield_now();
            }
            Take::Never => panic!("m2 fits the empty buffer"),
        }
    };
    // The peer got m2 and answers thread 1.
    answered.store(true, Ordering::Release);
    m2.give_back(&w.budget);
    owner.join().unwrap();
    helper.join().unwrap();
    // Nobody is inside any more: a last help completes what is left (MPI_Finalize's).
    w.turn(2, false);
    assert_eq!(w.orphans.pending(), 0);
    assert_eq!(w.budget.used(), 0);
    assert!(w.endpoint.reusable());
}

#[test]
fn a_waiter_reclaims_space_an_owner_blocked_in_its_endpoint_cannot_give_back() {
    check(|| blocked_owner(true));
}

/// The negative control: with polls only under the claim (the code before issue 46), the same model
/// never ends: the check must fail on it.
#[test]
fn without_reclaim_the_blocked_owner_deadlocks_and_the_check_says_so() {
    let failed = std::panic::catch_unwind(|| {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(PREEMPTIONS);
        model.max_branches = 2_000;
        model.check(|| blocked_owner(false));
    });
    let why = failed.expect_err("the model of the old protocol must fail (it spins forever)");
    let text = why.downcast_ref::<String>().cloned().or_else(|| why.downcast_ref::<&str>().map(|s| s.to_string()));
    assert!(text.unwrap_or_default().contains("maximum number of branches"), "it fails because it never ends");
}

/// The owner returns while the helper is inside its endpoint for a turn, and a nested claim of the
/// owner (a route of ours inside its call) releases nothing; a third thread breaking the stream model
/// waits instead of entering. The loom cell proves no two are ever inside at once.
#[test]
fn an_owner_returning_during_a_helper_turn_waits_for_it() {
    check(|| {
        let ep = Arc::new(Endpoint::new());
        let vci = Arc::new(Vci::new());
        let helper = {
            let (ep, vci) = (ep.clone(), vci.clone());
            thread::spawn(move || {
                if let Some(c) = ep.try_claim(3) {
                    assert!(c.outermost());
                    vci.turn();
                }
            })
        };
        let other = {
            let (ep, vci) = (ep.clone(), vci.clone());
            thread::spawn(move || {
                let _c = ep.claim(2);
                vci.turn();
            })
        };
        {
            let outer = ep.claim(1);
            assert!(outer.outermost());
            vci.turn();
            {
                let inner = ep.try_claim(1).expect("the owner's own claim nests");
                assert!(!inner.outermost());
                vci.turn();
            }
            // Still inside after the nested claim ended.
            vci.turn();
        }
        helper.join().unwrap();
        other.join().unwrap();
        assert!(!ep.owned());
        assert!(ep.claim_count() >= 2);
    });
}

/// A deferred piece that panics: counted as run, the rest of its batch runs, and a concurrent settle
/// (the next `MPI_Comm_free`) returns instead of spinning forever.
#[test]
fn a_panicking_deferred_piece_never_blocks_settle() {
    std::panic::set_hook(Box::new(|info| {
        let text = info.payload().downcast_ref::<&str>().copied().unwrap_or("");
        if text != "deferred piece panics" {
            eprintln!("{info}");
        }
    }));
    check(|| {
        let deferred: Arc<Deferred<Box<dyn FnOnce() + Send>>> = Arc::new(Deferred::new());
        let ran = Arc::new(AtomicBool::new(false));
        deferred.defer(Box::new(|| panic!("deferred piece panics")));
        {
            let ran = ran.clone();
            deferred.defer(Box::new(move || ran.store(true, Ordering::Release)));
        }
        let runner = {
            let deferred = deferred.clone();
            thread::spawn(move || deferred.run(|w| w()))
        };
        let panicked_here = deferred.settle(|w| w());
        let panicked_there = runner.join().unwrap();
        assert_eq!(panicked_here + panicked_there, 1);
        // The settle above returned; one more settles too.
        deferred.settle(|w| w());
        assert_eq!(deferred.running(), 0);
        assert!(!deferred.pending());
        assert!(ran.load(Ordering::Acquire), "the piece after the panicking one ran");
    });
}

/// `MPIX_Stream_free` while an orphan on its endpoint is pending: the endpoint (and its VCI, which
/// MPICH hands to the next stream created) goes back only once no orphan holds it, so the orphan never
/// polls a VCI serving another stream; the helper polls it meanwhile.
#[test]
fn a_free_while_an_orphan_is_pending_waits_for_it() {
    check(|| {
        let w = World::with_m1();
        let helper = {
            let w = w.clone();
            thread::spawn(move || w.turn(3, false))
        };
        // The application frees the stream: its endpoint goes back once reusable, helping meanwhile.
        w.endpoint.until_reusable(|| w.turn(1, false));
        // MPICH hands the VCI to the next stream created, whose owner enters it.
        w.vci.generation.store(1, Ordering::Release);
        {
            let _c = w.endpoint.claim(1);
            w.vci.turn();
        }
        helper.join().unwrap();
        assert_eq!(w.orphans.pending(), 0);
        assert_eq!(w.budget.used(), 0);
    });
}

/// A retired policy stream handed to the next communicator while an orphan of the freed one is pending:
/// the new owner and the orphan's polls share the endpoint under one claim, never at once, and both
/// finish.
#[test]
fn a_retired_stream_handed_out_again_serves_both_under_one_claim() {
    check(|| {
        let w = World::with_m1();
        let helper = {
            let w = w.clone();
            thread::spawn(move || {
                w.turn(3, false);
            })
        };
        let new_owner = {
            let w = w.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    let _c = w.endpoint.claim(1);
                    w.vci.turn();
                }
            })
        };
        helper.join().unwrap();
        new_owner.join().unwrap();
        w.turn(2, false);
        assert_eq!(w.orphans.pending(), 0);
        assert_eq!(w.budget.used(), 0);
    });
}

/// A nonblocking collective's schedule open on a stream (MPICH's progress hooks post its rounds from
/// whichever thread runs progress): the helper thread runs progress only while it holds that endpoint's
/// claim, so its hook never posts a round while the owner is inside (blocked in a call there, or
/// returning to it).
#[test]
fn the_helper_runs_progress_hooks_only_under_the_claims_of_scheduled_endpoints() {
    check(|| {
        let ep = Arc::new(Endpoint::new());
        let vci = Arc::new(Vci::new());
        ep.schedule();
        let helper = {
            let (ep, vci) = (ep.clone(), vci.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    // The helper's look: the claims of the scheduled endpoints, all or none.
                    if !ep.scheduled() {
                        return;
                    }
                    if let Some(_c) = ep.try_claim(3) {
                        // Its global progress: the hook posts the collective's next round on the VCI.
                        vci.turn();
                    }
                    thread::yield_now();
                }
            })
        };
        for _ in 0..2 {
            let _c = ep.claim(1);
            vci.turn();
        }
        ep.unschedule();
        helper.join().unwrap();
        assert!(!ep.scheduled());
    });
}

/// The negative control of the endpoint check: a helper that turns the endpoint without its claim is
/// caught in some interleaving (the model fails).
#[test]
fn a_turn_without_the_claim_is_caught() {
    let failed = std::panic::catch_unwind(|| {
        check(|| {
            let ep = Arc::new(Endpoint::new());
            let vci = Arc::new(Vci::new());
            let helper = {
                let vci = vci.clone();
                thread::spawn(move || vci.turn())
            };
            {
                let _c = ep.claim(1);
                vci.turn();
            }
            helper.join().unwrap();
        })
    });
    assert!(failed.is_err(), "two threads inside one endpoint must fail the model");
}

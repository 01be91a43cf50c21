//! The host queue (`type=mpixstream_host_queue`): a serial CPU work queue whose items are run by the
//! stream's one driver: its worker thread, or the application thread that synchronises the queue.
//! The driver takes the items in the order they were queued and, on reaching an operation, starts it
//! itself (no hand-off to another thread); a blocking operation, or a wait for a nonblocking one,
//! holds the queue until the operation completed, while the driver keeps every operation in flight
//! moving. The application adds its own callbacks (`MPIX_Host_queue_launch`) and waits for
//! everything queued so far (`MPIX_Host_queue_synchronize`).
//!
//! The driver claim: everything a driver needs (the MPI driver, the items taken and not yet run) is
//! the `Runner`, behind one mutex; whoever holds it is the stream's only driver. The worker holds it
//! while it has work, and lets go as soon as it has none. A blocking operation enqueued on an idle
//! queue is run at once by the enqueuing thread (`try_run_now`: it takes the claim, starts the
//! operation and polls it briefly; only if it is not complete by then is it left, holding the
//! queue, to the worker), so a ping-pong runs without any other thread. `synchronize` takes the
//! claim over: it announces itself (`want`), the worker lets go at the next item boundary and sleeps, and the synchronising thread runs the items itself up to
//! its target, then gives the claim back (waking the worker only if work is left). So in the common
//! "enqueue, then synchronise" pattern the operations run on the thread that waits for them anyway,
//! and on a small machine two threads per rank do not compete for the cores (on the 2-core
//! development machine a ping-pong through the worker, app threads asleep, was about 1.7 × slower
//! than the same nonblocking calls on the application thread).
//!
//! Hand-off cost: a producer takes one uncontended lock and, only when the worker sleeps, signals a
//! condition variable; a driver takes every queued item at once (one lock per batch). With nothing
//! to run, the worker spins, then yields, then sleeps, without the claim; while an operation holds
//! the queue it polls MPI, then polls and yields, then polls every 50 µs (a late peer).
use super::driver::Driver;
use super::ledger::Ledger;
use super::ops::Op;
use crate::thread::BackgroundThread;
use std::collections::VecDeque;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub type UserFn = unsafe extern "C" fn(*mut c_void);

pub enum Item {
    /// Start the operation; a blocking one holds the queue until it completes.
    Start { op: Op, blocking: bool },
    /// Hold the queue until operation `seq` (started earlier, nonblocking) completes.
    WaitFor(u32),
    /// The application's callback.
    User(UserFn, usize),
}

struct Items {
    queue: VecDeque<Item>,
    stop: bool,
    /// The worker is asleep on `work` (a producer must notify).
    sleeping: bool,
    /// A synchronising thread gave the claim back with work left: the worker must resume.
    kick: bool,
}

/// The driver claim's contents: whoever holds the lock on it drives the stream.
struct Runner {
    driver: Driver,
    /// Items taken from the queue and not yet run (in order).
    batch: VecDeque<Item>,
    /// Items ever taken from the queue.
    taken: u64,
    /// An operation could not be released at finalize: nothing more may run.
    stuck: bool,
}

/// How long an enqueuing thread polls the blocking operation it started at once (`try_run_now`)
/// before it leaves it to the worker (plus the first 32 polls, before the clock is read). Long
/// enough for a peer a few scheduler wake-ups late (with 64 polls instead, about 6 µs, several
/// hundred of the enqueue bench's 88,000 operations were left on the 2-core development machine,
/// and every operation queued behind one then went through the worker); short enough that an
/// enqueue call never waits long for a peer that is not ready.
const EAGER_WINDOW: Duration = Duration::from_micros(100);
/// How long a worker with an operation in flight polls MPI before it starts yielding its core.
const POLLS_BEFORE_YIELD: u32 = 4096;
/// How long a worker with an operation in flight polls and yields before it polls slowly.
const BUSY_YIELD: Duration = Duration::from_millis(5);
/// How often a worker polls MPI after that without progress (a very late peer).
const SLOW_POLL: Duration = Duration::from_micros(50);

/// Keeps what one side writes off the other side's cache lines (producer: `items`, `queued`; driver:
/// `executed`, `runner`): a line shared by both moves between cores at every item.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared {
    items: Padded<Mutex<Items>>,
    work: Condvar,
    runner: Padded<Mutex<Runner>>,
    /// Threads in `synchronize` waiting to take the claim over (the worker lets go when nonzero).
    want: AtomicU32,
    /// Items queued (written under `items`' lock), and executed (by the driver).
    queued: Padded<AtomicU64>,
    executed: Padded<AtomicU64>,
    /// Threads in `synchronize`, waiting on `idle`, and the lowest count of executed items one of
    /// them waits for (the worker signals only then: no system call per item).
    syncers: AtomicU32,
    wake_at: AtomicU64,
    idle_lock: Mutex<()>,
    idle: Condvar,
    /// Set at finalize: operations in flight are cancelled or left, later ones are not started.
    give_up: AtomicBool,
    /// Set by `shutdown` (with `Items::stop`): nothing more may run at once.
    stopping: AtomicBool,
    exited: AtomicBool,
    spin: u32,
    yield_for: Duration,
}

pub struct HostQueue {
    shared: Arc<Shared>,
    worker: Mutex<Option<BackgroundThread>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostQueue {
    /// Starts the worker thread, which drives the stream's operations with `driver`.
    pub fn start(driver: Driver, spin: u32, yield_for: Duration, name: String) -> std::io::Result<HostQueue> {
        let shared = Arc::new(Shared {
            items: Padded(Mutex::new(Items {
                queue: VecDeque::with_capacity(1024),
                stop: false,
                sleeping: false,
                kick: false,
            })),
            work: Condvar::new(),
            runner: Padded(Mutex::new(Runner { driver, batch: VecDeque::with_capacity(1024), taken: 0, stuck: false })),
            want: AtomicU32::new(0),
            queued: Padded(AtomicU64::new(0)),
            executed: Padded(AtomicU64::new(0)),
            syncers: AtomicU32::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            idle_lock: Mutex::new(()),
            idle: Condvar::new(),
            give_up: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            spin,
            yield_for,
        });
        let w = shared.clone();
        let handle = BackgroundThread::run(&name, move || worker(w))?;
        Ok(HostQueue { shared, worker: Mutex::new(Some(handle)) })
    }

    /// Runs blocking operation `op` at once on the calling (enqueuing) thread, if the queue is empty,
    /// nothing is in flight and no other thread is running items: it takes the driver claim, starts
    /// the operation and polls it for up to `EAGER_WINDOW`. Completed: the call is done, and the
    /// operation never entered the queue or the ledger (no count had to show it). Not yet: it is registered in
    /// `ledger`, stays in flight at the head of the queue, and the worker is woken to drive it.
    /// Err(op): not possible now (the caller registers and queues it). The caller holds the engine's
    /// order lock: nothing is queued meanwhile.
    pub fn try_run_now(&self, mut op: Op, ledger: &Ledger) -> Result<(), Op> {
        let q = &self.shared;
        if q.want.load(Ordering::SeqCst) > 0 || q.give_up.load(Ordering::Acquire) || q.stopping.load(Ordering::Acquire)
        {
            return Err(op);
        }
        let Ok(mut r) = q.runner.try_lock() else {
            return Err(op);
        };
        // The queue is empty when every item queued was taken: items are queued only under the order
        // lock (held), and taken only under the claim (held).
        if r.stuck || !r.batch.is_empty() || !r.driver.idle() || q.queued.load(Ordering::Acquire) != r.taken {
            return Err(op);
        }
        let req = match r.driver.start_and_poll(&op, EAGER_WINDOW) {
            Ok((status, err)) => {
                drop(r);
                ledger.complete_unregistered(&op, status, err);
                return Ok(());
            }
            Err(req) => req,
        };
        // Still in flight: it holds the queue, like a blocking operation the worker started.
        op.comm_slot = ledger.register_blocking(op.comm, op.seq);
        let seq = op.seq;
        q.queued.fetch_add(1, Ordering::Release);
        r.taken += 1;
        r.driver.adopt(op, req);
        r.batch.push_front(Item::WaitFor(seq));
        drop(r);
        let mut s = lock(&q.items);
        s.kick = true;
        s.sleeping = false;
        q.work.notify_one();
        Ok(())
    }

    pub fn push(&self, item: Item) {
        let mut s = self.shared.items.lock().unwrap_or_else(|e| e.into_inner());
        s.queue.push_back(item);
        self.shared.queued.fetch_add(1, Ordering::Release);
        if s.sleeping {
            s.sleeping = false;
            self.shared.work.notify_one();
        }
    }

    /// Items queued and not yet executed.
    pub fn outstanding(&self) -> u64 {
        let executed = self.shared.executed.load(Ordering::SeqCst);
        self.shared.queued.load(Ordering::SeqCst).saturating_sub(executed)
    }

    /// Waits until every item queued before the call has executed; false if the queue was given up
    /// (or `deadline` passed) first. Without a deadline the calling thread takes the driver claim
    /// over and runs the items itself (module doc); with one it waits for the worker.
    pub fn synchronize(&self, deadline: Option<Instant>) -> bool {
        let q = &self.shared;
        let target = q.queued.load(Ordering::SeqCst);
        if q.executed.load(Ordering::SeqCst) >= target {
            return true;
        }
        if deadline.is_none() {
            return drive_to(q, target);
        }
        q.syncers.fetch_add(1, Ordering::SeqCst);
        let mut g = lock(&q.idle_lock);
        let ok = loop {
            q.wake_at.fetch_min(target, Ordering::SeqCst);
            if q.executed.load(Ordering::SeqCst) >= target {
                break true;
            }
            if q.give_up.load(Ordering::Acquire)
                || q.exited.load(Ordering::Acquire)
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                break false;
            }
            g = q.idle.wait_timeout(g, Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
        };
        drop(g);
        q.syncers.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    /// Stops the worker after the items already queued (with `abandon`: operations in flight are
    /// cancelled or left, later ones are not started). Waits for it up to `grace`; a worker stuck in
    /// an application callback is left behind (false).
    pub fn shutdown(&self, abandon: bool, grace: Duration) -> bool {
        if abandon {
            self.shared.give_up.store(true, Ordering::Release);
        }
        self.shared.stopping.store(true, Ordering::Release);
        {
            let mut s = lock(&self.shared.items);
            s.stop = true;
            self.shared.work.notify_all();
        }
        let deadline = Instant::now() + grace;
        while !self.shared.exited.load(Ordering::Acquire) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(h) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            h.join();
        }
        true
    }
}

/// What the worker does between two pieces of progress: spin, then yield, then sleep or poll slowly.
/// The clock is read only once spinning is over (the common wait, a peer a fraction of a microsecond
/// away, never reads it), then once every `CLOCK_EVERY` turns (a read costs as much as a poll).
struct Backoff {
    turns: u32,
    /// When yielding began.
    since: Option<Instant>,
    /// Set once yielding has lasted the caller's `yield_for`.
    expired: bool,
}

const CLOCK_EVERY: u32 = 64;

impl Backoff {
    fn new() -> Backoff {
        Backoff { turns: 0, since: None, expired: false }
    }

    fn reset(&mut self) {
        self.turns = 0;
        self.since = None;
        self.expired = false;
    }

    /// One idle turn; `spin_turns` before yielding. Returns true once yielding has lasted `yield_for`.
    #[inline]
    fn pause(&mut self, spin_turns: u32, yield_for: Duration) -> bool {
        self.turns = self.turns.saturating_add(1);
        if self.turns <= spin_turns {
            std::hint::spin_loop();
            return false;
        }
        match self.since {
            None => self.since = Some(Instant::now()),
            Some(t) if !self.expired && self.turns.is_multiple_of(CLOCK_EVERY) => {
                self.expired = t.elapsed() >= yield_for;
            }
            Some(_) => {}
        }
        if !self.expired {
            std::thread::yield_now();
        }
        self.expired
    }
}

/// Why a worker's turn with the claim ended.
enum Until {
    /// Nothing queued, nothing in flight, and the idle wait is over.
    Idle,
    /// A synchronising thread wants the claim.
    HandOver,
    /// Stopped (queue empty) or stuck: the worker exits.
    Stopped,
}

fn worker(q: Arc<Shared>) {
    loop {
        let mut r = lock(&q.runner);
        match work(&q, &mut r) {
            Until::Stopped => {
                if !r.stuck && !r.driver.idle() {
                    // Stopped with operations in flight (finalize after a timeout): the same rule.
                    abandon(&mut r.driver);
                }
                break;
            }
            Until::Idle | Until::HandOver => {
                // Everything queued so far was taken (and, idle, has run).
                let seen = r.taken;
                drop(r);
                sleep(&q, seen);
            }
        }
    }
    q.exited.store(true, Ordering::Release);
    let _g = lock(&q.idle_lock);
    q.idle.notify_all();
}

/// The worker without the claim: waits until there is work for it (a producer queued an item and
/// nobody is taking the claim over, an enqueuing thread left it an operation in flight, a
/// synchronising thread gave the claim back with work left) or a stop. It spins, then yields, for
/// the configured time (an item queued meanwhile, counted past `seen`, is seen without a wake-up),
/// then sleeps.
fn sleep(q: &Shared, seen: u64) {
    let mut backoff = Backoff::new();
    while q.queued.load(Ordering::Acquire) == seen && !q.stopping.load(Ordering::Acquire) {
        if backoff.pause(q.spin, q.yield_for) {
            break;
        }
    }
    let mut s = lock(&q.items);
    loop {
        if s.stop || s.kick || (!s.queue.is_empty() && q.want.load(Ordering::SeqCst) == 0) {
            s.kick = false;
            s.sleeping = false;
            return;
        }
        s.sleeping = true;
        s = q.work.wait(s).unwrap_or_else(|e| e.into_inner());
    }
}

/// The worker's turn with the claim: runs items until idle, asked to hand over, or stopped.
fn work(q: &Shared, r: &mut Runner) -> Until {
    loop {
        if r.stuck {
            return Until::Stopped;
        }
        if q.want.load(Ordering::SeqCst) > 0 {
            return Until::HandOver;
        }
        match r.batch.pop_front() {
            Some(item) => run(q, r, item),
            None => match take(q, r) {
                Some(until) => return until,
                None => continue,
            },
        }
    }
}

/// A synchronising thread's turn: takes the claim (the worker lets go at its next item boundary),
/// runs items until `target` have executed, gives the claim back. False if the queue was given up
/// or stopped first.
fn drive_to(q: &Shared, target: u64) -> bool {
    q.want.fetch_add(1, Ordering::SeqCst);
    let mut r = lock(&q.runner);
    let ok = loop {
        if q.executed.load(Ordering::SeqCst) >= target {
            break true;
        }
        if r.stuck || q.give_up.load(Ordering::Acquire) || q.exited.load(Ordering::Acquire) {
            break false;
        }
        match r.batch.pop_front() {
            Some(item) => run(q, &mut r, item),
            None => {
                let mut s = lock(&q.items);
                r.taken += s.queue.len() as u64;
                std::mem::swap(&mut s.queue, &mut r.batch);
                // Below the target, something is queued (only a driver executes items): never empty.
                debug_assert!(!r.batch.is_empty());
            }
        }
    };
    let left = !r.batch.is_empty() || !r.driver.idle();
    drop(r);
    q.want.fetch_sub(1, Ordering::SeqCst);
    let mut s = lock(&q.items);
    if left || !s.queue.is_empty() {
        s.kick = true;
        q.work.notify_all();
    }
    ok
}

/// Runs one item (the claim is held); sets `r.stuck` if the queue was given up with an operation
/// that could not be released.
fn run(q: &Shared, r: &mut Runner, item: Item) {
    let giving_up = q.give_up.load(Ordering::Acquire);
    if giving_up && !r.driver.idle() && !abandon(&mut r.driver) {
        r.stuck = true;
        return;
    }
    match item {
        Item::Start { op, blocking } => {
            if giving_up {
                r.driver.skip(op);
            } else {
                let seq = op.seq;
                r.driver.start(op);
                if blocking && !drive_until(q, &mut r.driver, seq) {
                    r.stuck = true;
                    return;
                }
            }
        }
        Item::WaitFor(seq) => {
            if !drive_until(q, &mut r.driver, seq) {
                r.stuck = true;
                return;
            }
        }
        // SAFETY: `f` and `arg` are what the application gave MPIX_Host_queue_launch, whose contract
        // (include/mpix_stream.h) is that the queue runs `f(arg)` once, after everything queued before
        // it, on its worker or a synchronising thread: here, the stream's one driver.
        Item::User(f, arg) => unsafe { f(arg as *mut c_void) },
    }
    count_executed(q);
}

/// One more item executed: wakes a waiting synchroniser whose target is reached.
fn count_executed(q: &Shared) {
    let executed = q.executed.fetch_add(1, Ordering::SeqCst) + 1;
    if q.syncers.load(Ordering::SeqCst) > 0 && executed >= q.wake_at.load(Ordering::SeqCst) {
        // Under the lock: a syncer registers its target and checks under it too.
        let _g = lock(&q.idle_lock);
        q.wake_at.store(u64::MAX, Ordering::SeqCst);
        q.idle.notify_all();
    }
}

/// Cancels or finishes what is in flight; false (reported) if an operation could not be released.
fn abandon(driver: &mut Driver) -> bool {
    let left = driver.abandon();
    for l in &left {
        mpixstream_wrappers::say!("mpixstream: host queue given up at MPI_Finalize: {l}");
    }
    left.is_empty()
}

/// Moves every queued item into the runner's batch (None: go on), progressing operations in flight
/// while there is none; or why the worker's turn ends: with nothing queued and nothing in flight it
/// ends at once (`Idle`), so that the claim is free for an enqueuing thread to run the next
/// operation itself (`sleep` waits for work without it).
fn take(q: &Shared, r: &mut Runner) -> Option<Until> {
    let mut backoff = Backoff::new();
    loop {
        if q.want.load(Ordering::SeqCst) > 0 {
            return Some(Until::HandOver);
        }
        if q.queued.load(Ordering::Acquire) != r.taken || backoff.turns == 0 || backoff.expired {
            let mut s = lock(&q.items);
            if !s.queue.is_empty() {
                r.taken += s.queue.len() as u64;
                std::mem::swap(&mut s.queue, &mut r.batch);
                return None;
            }
            if s.stop {
                return Some(Until::Stopped);
            }
        }
        if r.driver.idle() {
            return Some(Until::Idle);
        }
        if r.driver.poll() {
            backoff.reset();
            continue;
        }
        if backoff.pause(q.spin.max(1), (q.yield_for * 50).max(BUSY_YIELD)) {
            std::thread::sleep(SLOW_POLL);
        }
    }
}

/// Progresses until operation `seq` is no longer in flight. False if the queue was given up with an
/// operation that could not be released (the worker must stop).
fn drive_until(q: &Shared, driver: &mut Driver, seq: u32) -> bool {
    let mut backoff = Backoff::new();
    while driver.holds(seq) {
        if q.give_up.load(Ordering::Acquire) {
            return abandon(driver);
        }
        if driver.poll() {
            backoff.reset();
            continue;
        }
        // A peer that is late by a few scheduler slices is the common case on a loaded machine:
        // keep polling (yielding) for much longer than an idle worker waits before sleeping.
        if backoff.pause(POLLS_BEFORE_YIELD.max(q.spin), (q.yield_for * 50).max(BUSY_YIELD)) {
            std::thread::sleep(SLOW_POLL);
        }
    }
    true
}

//! The host queue (`type=mpixstream_host_queue`): a serial CPU work queue whose one worker thread is
//! also the stream's driver. It takes the items in the order they were queued and, on reaching an
//! operation, starts it itself (no hand-off to another thread); a blocking operation, or a wait for a
//! nonblocking one, holds the queue until the operation completed, while the worker keeps every
//! operation in flight moving. The application adds its own callbacks (`MPIX_Host_queue_launch`) and
//! waits for everything queued so far (`MPIX_Host_queue_synchronize`).
//!
//! Hand-off cost: a producer takes one uncontended lock and, only when the worker sleeps, signals a
//! condition variable; the worker takes every queued item at once (one lock per batch). While it has
//! no item, the worker spins, then yields, then sleeps; while an operation holds the queue it polls
//! MPI, then polls and yields, then polls every 50 µs (a late peer).
use super::driver::Driver;
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
}

/// How long a worker with an operation in flight polls MPI before it starts yielding its core.
const POLLS_BEFORE_YIELD: u32 = 4096;
/// How long a worker with an operation in flight polls and yields before it polls slowly.
const BUSY_YIELD: Duration = Duration::from_millis(5);
/// How often a worker polls MPI after that without progress (a very late peer).
const SLOW_POLL: Duration = Duration::from_micros(50);

struct Shared {
    items: Mutex<Items>,
    work: Condvar,
    /// Items queued (written under `items`' lock), and executed (by the worker).
    queued: AtomicU64,
    executed: AtomicU64,
    /// Threads in `synchronize`, waiting on `idle`, and the lowest count of executed items one of
    /// them waits for (the worker signals only then: no system call per item).
    syncers: AtomicU32,
    wake_at: AtomicU64,
    idle_lock: Mutex<()>,
    idle: Condvar,
    /// Set at finalize: operations in flight are cancelled or left, later ones are not started.
    give_up: AtomicBool,
    exited: AtomicBool,
    spin: u32,
    yield_for: Duration,
}

pub struct HostQueue {
    shared: Arc<Shared>,
    worker: Mutex<Option<BackgroundThread>>,
}

impl HostQueue {
    /// Starts the worker thread, which drives the stream's operations with `driver`.
    pub fn start(driver: Driver, spin: u32, yield_for: Duration, name: String) -> std::io::Result<HostQueue> {
        let shared = Arc::new(Shared {
            items: Mutex::new(Items { queue: VecDeque::with_capacity(1024), stop: false, sleeping: false }),
            work: Condvar::new(),
            queued: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            syncers: AtomicU32::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            idle_lock: Mutex::new(()),
            idle: Condvar::new(),
            give_up: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            spin,
            yield_for,
        });
        let w = shared.clone();
        let handle = BackgroundThread::run(&name, move || worker(w, driver))?;
        Ok(HostQueue { shared, worker: Mutex::new(Some(handle)) })
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
    /// (or `deadline` passed) first.
    pub fn synchronize(&self, deadline: Option<Instant>) -> bool {
        let q = &self.shared;
        let target = q.queued.load(Ordering::SeqCst);
        q.syncers.fetch_add(1, Ordering::SeqCst);
        let mut g = q.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
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
        {
            let mut s = self.shared.items.lock().unwrap_or_else(|e| e.into_inner());
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
/// The clock is read once every `CLOCK_EVERY` turns (a read costs as much as a poll).
struct Backoff {
    turns: u32,
    since: Instant,
    /// Set once yielding has lasted the caller's `yield_for`.
    expired: bool,
}

const CLOCK_EVERY: u32 = 64;

impl Backoff {
    fn new() -> Backoff {
        Backoff { turns: 0, since: Instant::now(), expired: false }
    }

    fn reset(&mut self) {
        self.turns = 0;
        self.expired = false;
    }

    /// One idle turn; `spin_turns` before yielding. Returns true once yielding has lasted `yield_for`.
    fn pause(&mut self, spin_turns: u32, yield_for: Duration) -> bool {
        if self.turns == 0 {
            self.since = Instant::now();
        }
        self.turns = self.turns.saturating_add(1);
        if self.turns <= spin_turns {
            std::hint::spin_loop();
            return false;
        }
        if !self.expired && self.turns.is_multiple_of(CLOCK_EVERY) {
            self.expired = self.since.elapsed() >= yield_for;
        }
        if !self.expired {
            std::thread::yield_now();
        }
        self.expired
    }
}

fn worker(q: Arc<Shared>, mut driver: Driver) {
    let mut batch: VecDeque<Item> = VecDeque::with_capacity(1024);
    let mut taken: u64 = 0;
    let mut stuck = false;
    'run: loop {
        if batch.is_empty() && !take(&q, &mut batch, &mut taken, &mut driver) {
            break;
        }
        while let Some(item) = batch.pop_front() {
            let giving_up = q.give_up.load(Ordering::Acquire);
            if giving_up && !driver.idle() && !abandon(&mut driver) {
                stuck = true;
                break 'run;
            }
            match item {
                Item::Start { op, blocking } => unsafe {
                    if giving_up {
                        driver.skip(op);
                    } else {
                        let seq = op.seq;
                        driver.start(op);
                        if blocking && !drive_until(&q, &mut driver, seq) {
                            stuck = true;
                            break 'run;
                        }
                    }
                },
                Item::WaitFor(seq) => {
                    if !drive_until(&q, &mut driver, seq) {
                        stuck = true;
                        break 'run;
                    }
                }
                Item::User(f, arg) => unsafe { f(arg as *mut c_void) },
            }
            let executed = q.executed.fetch_add(1, Ordering::SeqCst) + 1;
            if q.syncers.load(Ordering::SeqCst) > 0 && executed >= q.wake_at.load(Ordering::SeqCst) {
                // Under the lock: a syncer registers its target and checks under it too.
                let _g = q.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
                q.wake_at.store(u64::MAX, Ordering::SeqCst);
                q.idle.notify_all();
            }
        }
    }
    if !stuck && !driver.idle() {
        // Stopped with operations in flight (finalize after a timeout): the same rule.
        abandon(&mut driver);
    }
    q.exited.store(true, Ordering::Release);
    let _g = q.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
    q.idle.notify_all();
}

/// Cancels or finishes what is in flight; false (reported) if an operation could not be released.
fn abandon(driver: &mut Driver) -> bool {
    let left = unsafe { driver.abandon() };
    for l in &left {
        eprintln!("mpixstream: host queue given up at MPI_Finalize: {l}");
    }
    left.is_empty()
}

/// Moves every queued item into `batch`, progressing operations in flight while there is none.
/// False when the queue is stopped and empty.
fn take(q: &Shared, batch: &mut VecDeque<Item>, taken: &mut u64, driver: &mut Driver) -> bool {
    let mut backoff = Backoff::new();
    loop {
        let expired = backoff.expired;
        if q.queued.load(Ordering::Acquire) != *taken || backoff.turns == 0 || expired {
            let mut s = q.items.lock().unwrap_or_else(|e| e.into_inner());
            if !s.queue.is_empty() {
                *taken += s.queue.len() as u64;
                std::mem::swap(&mut s.queue, batch);
                return true;
            }
            if s.stop {
                return false;
            }
            if driver.idle() && expired {
                // Nothing to do: sleep until a producer (or shutdown) wakes us.
                s.sleeping = true;
                while s.sleeping && !s.stop {
                    s = q.work.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.sleeping = false;
                backoff.reset();
                continue;
            }
        }
        if unsafe { driver.poll() } {
            backoff.reset();
            continue;
        }
        let yield_for = if driver.idle() { q.yield_for } else { (q.yield_for * 50).max(BUSY_YIELD) };
        if backoff.pause(q.spin.max(1), yield_for) && !driver.idle() {
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
        if unsafe { driver.poll() } {
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

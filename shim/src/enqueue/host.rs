//! The host queue (`type=mpixstream_host_queue`): a serial CPU work queue, one worker thread executing
//! items in the order they were queued. Communication items only write and wait for flag words (the
//! engine thread makes the MPI calls); the application adds its own callbacks with
//! `MPIX_Host_queue_launch` and waits for everything queued so far with `MPIX_Host_queue_synchronize`.
use super::flags::Flags;
use std::collections::VecDeque;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub type UserFn = unsafe extern "C" fn(*mut c_void);

pub enum Item {
    /// Operation k is ready to start: write the ready word.
    Ready(u32),
    /// Block the queue until operation k is done.
    WaitDone(u32),
    /// The application's callback.
    User(UserFn, usize),
}

struct State {
    items: VecDeque<Item>,
    queued: u64,
    executed: u64,
    stop: bool,
    /// The worker is asleep on `work` (a producer must notify).
    sleeping: bool,
    /// Threads in `synchronize`.
    syncers: u32,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
    idle: Condvar,
    /// Items queued and not taken by the worker (lets the worker spin without the lock).
    backlog: AtomicU32,
    /// Set at shutdown: blocking items give up.
    give_up: AtomicBool,
    exited: AtomicBool,
    flags: Arc<Flags>,
    spin: u32,
    yield_for: Duration,
}

pub struct HostQueue {
    inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl HostQueue {
    pub fn start(flags: Arc<Flags>, spin: u32, yield_for: Duration, name: String) -> std::io::Result<HostQueue> {
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                items: VecDeque::new(),
                queued: 0,
                executed: 0,
                stop: false,
                sleeping: false,
                syncers: 0,
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
            backlog: AtomicU32::new(0),
            give_up: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            flags,
            spin,
            yield_for,
        });
        let w = inner.clone();
        let handle = std::thread::Builder::new().name(name).spawn(move || worker(w))?;
        Ok(HostQueue { inner, worker: Mutex::new(Some(handle)) })
    }

    pub fn push(&self, item: Item) {
        let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        s.items.push_back(item);
        s.queued += 1;
        self.inner.backlog.fetch_add(1, Ordering::Release);
        if s.sleeping {
            s.sleeping = false;
            self.inner.work.notify_one();
        }
    }

    /// Items queued and not yet executed.
    pub fn outstanding(&self) -> u64 {
        let s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        s.queued - s.executed
    }

    /// Waits until every item queued before the call has executed; false if the queue was shut down
    /// (or `deadline` passed) first.
    pub fn synchronize(&self, deadline: Option<Instant>) -> bool {
        let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let target = s.queued;
        s.syncers += 1;
        let ok = loop {
            if s.executed >= target {
                break true;
            }
            if self.inner.give_up.load(Ordering::Acquire) || deadline.is_some_and(|d| Instant::now() >= d) {
                break false;
            }
            s = self.inner.idle.wait_timeout(s, Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
        };
        s.syncers -= 1;
        ok
    }

    /// Stops the worker after the items already queued (blocking ones give up at once if `abandon`).
    /// Waits for it up to `grace`; a worker stuck in an application callback is left behind (false).
    pub fn shutdown(&self, abandon: bool, grace: Duration) -> bool {
        if abandon {
            self.inner.give_up.store(true, Ordering::Release);
            self.inner.flags.wake_all();
        }
        {
            let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            s.stop = true;
            self.inner.work.notify_all();
            self.inner.idle.notify_all();
        }
        let deadline = Instant::now() + grace;
        while !self.inner.exited.load(Ordering::Acquire) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(h) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        true
    }
}

fn worker(q: Arc<Inner>) {
    loop {
        // Spin, then yield, briefly for work before sleeping: a wake-up costs a context switch.
        let mut turns = 0;
        while q.backlog.load(Ordering::Acquire) == 0 && turns < q.spin {
            std::hint::spin_loop();
            turns += 1;
        }
        let start = Instant::now();
        while q.backlog.load(Ordering::Acquire) == 0 && start.elapsed() < q.yield_for {
            std::thread::yield_now();
        }
        let item = {
            let mut s = q.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(item) = s.items.pop_front() {
                    q.backlog.fetch_sub(1, Ordering::AcqRel);
                    break Some(item);
                }
                if s.stop {
                    break None;
                }
                s.sleeping = true;
                s = q.work.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        let Some(item) = item else { break };
        match item {
            Item::Ready(seq) => q.flags.signal_ready(seq),
            Item::WaitDone(seq) => {
                q.flags.wait_until(|f| f.is_done(seq), &q.give_up, q.spin, q.yield_for);
            }
            Item::User(f, arg) => unsafe { f(arg as *mut c_void) },
        }
        let mut s = q.state.lock().unwrap_or_else(|e| e.into_inner());
        s.executed += 1;
        if s.syncers > 0 && s.executed == s.queued {
            q.idle.notify_all();
        }
    }
    q.exited.store(true, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static LOG: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    unsafe extern "C" fn record(arg: *mut c_void) {
        LOG.lock().unwrap().push(arg as usize);
    }

    #[test]
    fn runs_in_order_and_waits_for_flags() {
        let flags = Arc::new(Flags::on_heap());
        let q = HostQueue::start(flags.clone(), 100, Duration::from_micros(20), "test-hostq".into()).unwrap();
        q.push(Item::User(record, 1));
        q.push(Item::Ready(1));
        q.push(Item::WaitDone(1));
        q.push(Item::User(record, 2));
        std::thread::sleep(Duration::from_millis(30));
        assert!(flags.is_ready(1));
        assert_eq!(*LOG.lock().unwrap(), vec![1]);
        assert_eq!(q.outstanding(), 2);
        flags.mark_done(1);
        assert!(q.synchronize(None));
        assert_eq!(*LOG.lock().unwrap(), vec![1, 2]);
        assert!(q.shutdown(false, Duration::from_secs(1)));
    }

    #[test]
    fn abandon_releases_a_blocked_queue() {
        static N: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn count(_: *mut c_void) {
            N.fetch_add(1, Ordering::SeqCst);
        }
        let flags = Arc::new(Flags::on_heap());
        let q = HostQueue::start(flags, 10, Duration::ZERO, "test-hostq2".into()).unwrap();
        q.push(Item::WaitDone(3));
        q.push(Item::User(count, 0));
        assert!(!q.synchronize(Some(Instant::now() + Duration::from_millis(30))));
        assert!(q.shutdown(true, Duration::from_secs(1)));
        assert_eq!(N.load(Ordering::SeqCst), 1);
    }
}

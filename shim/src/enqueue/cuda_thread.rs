//! The driver thread of a CUDA queue: the GPU stream only writes "operation k is ready" into a flag
//! word, so a thread of ours must watch the word and make the MPI calls. It takes operations from
//! its inbox in sequence order, starts each once the stream reached it, completes it (writing its
//! done word, which releases the stream's wait), batching every ready operation per turn. It spins,
//! then yields, then sleeps: parked until a submission while it has nothing, polling every 50 µs
//! while it waits for a busy GPU stream or a late peer.
//!
//! The driver thread never calls the CUDA driver. The stream waits for it (a done word, or with host
//! functions a host function blocking CUDA's one callback thread), and a CUDA call may block behind a
//! launch that waits for that very host function: with host functions, the launches queued behind a
//! blocked one fill the driver's queue, the enqueuing thread blocks inside cuLaunchHostFunc holding
//! the context's driver lock, and a CUDA call of the driver thread would wait for it forever (the
//! 8-byte latency run with host functions did not finish on an NVIDIA H200; tests/gpu/
//! enqueue_cuda_backlog.c is its shape). So the stream's health is asked by a watchdog thread of the
//! queue: every 10 ms while operations wait for the stream; after a context failure (sticky: the
//! stream runs nothing more) the driver thread fails them with that reason instead of waiting forever.
//! A watchdog blocked in a CUDA call blocks nobody.
use super::driver::Driver;
use super::flags::Flags;
use super::ops::Op;
use crate::ownership::stop_gate::StopGate;
use crate::thread::BackgroundThread;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Shared {
    inbox: Mutex<VecDeque<Op>>,
    /// Operations pushed and not yet taken (counted after the push, uncounted after the take: it may
    /// dip below 0 for a moment). The driver thread takes the inbox's lock only when it is positive,
    /// so its spinning and polling never touch the lock the enqueuing thread pushes under.
    queued: AtomicIsize,
    flags: Arc<Flags>,
    stop: AtomicBool,
    abandon: AtomicBool,
    /// Operations abandoned at finalize that MPICH still held: their done words were never written.
    stuck: AtomicBool,
    /// Operations handed over and not yet seen ready (published by the driver thread for the watchdog).
    unready: AtomicUsize,
    /// The watchdog's finding: the stream cannot reach its operations any more, and why.
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    /// The watchdog thread, woken when operations start to wait for the stream (it sleeps otherwise).
    watchdog: OnceLock<std::thread::Thread>,
    /// The watchdog asks the stream's health only through this gate, so that once `stop` returns no
    /// health call runs beside the program's destruction of the stream and its context.
    watch_gate: StopGate,
}

impl Shared {
    /// Publishes how many operations wait for the stream; wakes the watchdog when some start to.
    fn set_unready(&self, n: usize) {
        if self.unready.swap(n, Ordering::AcqRel) == 0 && n > 0 {
            if let Some(w) = self.watchdog.get() {
                w.unpark();
            }
        }
    }
}

/// Whether the stream can still reach what is queued on it (Err: the reason it cannot).
pub type Health = Box<dyn Fn() -> Result<(), String> + Send>;

const HEALTH_EVERY: Duration = Duration::from_millis(10);

/// The longest `stop` waits for a health call the watchdog started before the gate closed (one such
/// call takes microseconds; a watchdog blocked in CUDA must not block the program).
const WATCH_STOP_WAIT: Duration = Duration::from_secs(1);

pub struct CudaDriverThread {
    shared: Arc<Shared>,
    thread: Mutex<Option<BackgroundThread>>,
    watchdog: Mutex<Option<BackgroundThread>>,
}

impl CudaDriverThread {
    pub fn start(
        driver: Driver,
        flags: Arc<Flags>,
        health: Health,
        spin: u32,
        yield_for: Duration,
        name: String,
    ) -> std::io::Result<CudaDriverThread> {
        let shared = Arc::new(Shared {
            inbox: Mutex::new(VecDeque::with_capacity(256)),
            queued: AtomicIsize::new(0),
            flags,
            stop: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            stuck: AtomicBool::new(false),
            unready: AtomicUsize::new(0),
            watch_gate: StopGate::new(),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            watchdog: OnceLock::new(),
        });
        let s = shared.clone();
        let t = BackgroundThread::run(&name, move || run(s, driver, spin, yield_for))?;
        if let Some(thread) = t.thread() {
            shared.flags.set_engine(thread.clone());
        }
        let s = shared.clone();
        let w = BackgroundThread::run(&format!("{name}-watch"), move || watch(s, health))?;
        if let Some(thread) = w.thread() {
            let _ = shared.watchdog.set(thread.clone());
        }
        Ok(CudaDriverThread { shared, thread: Mutex::new(Some(t)), watchdog: Mutex::new(Some(w)) })
    }

    /// Hands operation `op` over (before the stream can signal it ready).
    pub fn submit(&self, op: Op) {
        self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner()).push_back(op);
        self.shared.queued.fetch_add(1, Ordering::Release);
        self.shared.flags.wake_engine();
    }

    /// Finalize gave up: cancel, finish or (reported) leave what is in flight, skip the rest.
    pub fn abandon(&self) {
        self.shared.abandon.store(true, Ordering::Release);
        self.shared.flags.wake_engine();
    }

    /// Whether abandoning left operations in MPICH's hands (their done words never written).
    pub fn stuck(&self) -> bool {
        self.shared.stuck.load(Ordering::Acquire)
    }

    /// Stops the thread once everything handed over is complete (or abandoned) and joins it. The
    /// watchdog's gate is closed, and a health call it started before is waited for up to
    /// [`WATCH_STOP_WAIT`] (the program may destroy the stream and its context next); the watchdog is
    /// then left to end by itself: it may be inside a CUDA call that waits for the stream (the module
    /// doc), which nothing here may wait for longer.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.flags.wake_engine();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.join();
        }
        self.shared.watch_gate.close();
        if let Some(w) = self.watchdog.lock().unwrap_or_else(|e| e.into_inner()).take() {
            if let Some(thread) = w.thread() {
                thread.unpark();
            }
            let since = Instant::now();
            while self.shared.watch_gate.busy() && since.elapsed() < WATCH_STOP_WAIT {
                std::thread::sleep(Duration::from_micros(100));
            }
            // Detached, not joined (dropping it would join).
            std::mem::forget(w);
        }
    }
}

/// The watchdog: while operations wait for the stream, asks its health every `HEALTH_EVERY`; a
/// failure is handed to the driver thread. Parked while none waits (no periodic wake-up then).
fn watch(s: Arc<Shared>, health: Health) {
    while !s.watch_gate.is_closed() {
        if s.unready.load(Ordering::Acquire) == 0 {
            std::thread::park();
            continue;
        }
        std::thread::park_timeout(HEALTH_EVERY);
        if s.unready.load(Ordering::Acquire) == 0 || s.failed.load(Ordering::Acquire) {
            continue;
        }
        if !s.watch_gate.enter() {
            break;
        }
        let asked = health();
        s.watch_gate.leave();
        if let Err(reason) = asked {
            *s.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
            s.failed.store(true, Ordering::Release);
            s.flags.wake_engine();
        }
    }
}

fn run(s: Arc<Shared>, mut driver: Driver, spin: u32, yield_for: Duration) {
    let mut waiting: VecDeque<Op> = VecDeque::with_capacity(256);
    let mut idle: u32 = 0;
    let mut idle_since = Instant::now();
    loop {
        if s.queued.load(Ordering::Acquire) > 0 {
            let mut inbox = s.inbox.lock().unwrap_or_else(|e| e.into_inner());
            let taken = inbox.len();
            if waiting.is_empty() {
                std::mem::swap(&mut *inbox, &mut waiting);
            } else {
                waiting.extend(inbox.drain(..));
            }
            drop(inbox);
            s.queued.fetch_sub(taken as isize, Ordering::AcqRel);
            s.set_unready(waiting.len());
        }
        if s.failed.load(Ordering::Acquire) {
            let reason = s.failure.lock().unwrap_or_else(|e| e.into_inner()).take();
            s.failed.store(false, Ordering::Release);
            if let Some(reason) = reason {
                for op in waiting.drain(..) {
                    driver.fail(op, &reason);
                }
                s.set_unready(0);
            }
        }
        if s.abandon.load(Ordering::Acquire) {
            let left = driver.abandon();
            for l in &left {
                mpixstream_wrappers::say!("mpixstream: CUDA queue given up at MPI_Finalize: {l}");
            }
            if !left.is_empty() {
                s.stuck.store(true, Ordering::Release);
            }
            for op in waiting.drain(..) {
                // Never started: MPICH never saw the buffer; the stream may pass.
                driver.skip(op);
            }
            break;
        }
        let mut progressed = false;
        while waiting.front().is_some_and(|op| s.flags.is_ready(op.seq)) {
            let Some(op) = waiting.pop_front() else { break };
            driver.start(op);
            progressed = true;
        }
        if progressed {
            s.set_unready(waiting.len());
        }
        progressed |= driver.poll();
        if progressed {
            idle = 0;
            continue;
        }
        if s.stop.load(Ordering::Acquire) && waiting.is_empty() && driver.idle() {
            if s.inbox.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                break;
            }
            continue;
        }
        if idle == 0 {
            idle_since = Instant::now();
        }
        idle = idle.saturating_add(1);
        if idle <= spin {
            std::hint::spin_loop();
        } else if idle_since.elapsed() < yield_for {
            std::thread::yield_now();
        } else if driver.idle() && waiting.is_empty() {
            // Nothing to watch: sleep until a submission unparks us.
            std::thread::park_timeout(Duration::from_millis(20));
        } else {
            // A GPU stream busy with the application's work, or a late peer.
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

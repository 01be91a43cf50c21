//! The enqueue engine: MPI operations queued on a stream's execution queue (DESIGN.md §3 "Enqueue";
//! user documentation in docs/enqueue.md).
//!
//! A stream created with info `type=cudaStream_t` (a CUDA stream) or `type=mpixstream_host_queue`
//! (a serial CPU work queue, [`host`]) is *queue-backed*. `MPIX_*_enqueue` on a communicator of such a
//! stream appends to its queue, for operation k, "k is ready" and, for the blocking forms, "wait until
//! k is done" ([`flags`]). The queue never makes an MPI call. The stream's **engine thread** (one per
//! queue-backed stream, the only thread that drives that stream's endpoint) takes the operations in
//! order, starts each one, as its nonblocking MPI form, once the queue has reached it, completes it
//! with `MPI_Test`, and marks it done.
//!
//! `MPIX_Isend_enqueue`/`MPIX_Irecv_enqueue` return request handles of ours (valid only for
//! `MPIX_Wait_enqueue`/`MPIX_Waitall_enqueue`; MPICH rejects them as invalid requests elsewhere).
pub mod api;
pub mod cuda;
pub mod flags;
pub mod host;
pub mod ops;

use crate::errors::Class;
use crate::runtime::Runtime;
use crate::streams::StreamTable;
use flags::Flags;
use host::{HostQueue, Item};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use ops::Kind;
use std::collections::{HashMap, VecDeque};
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The info `type` of a host queue.
pub const HOST_QUEUE_TYPE: &str = "mpixstream_host_queue";
pub const CUDA_TYPE: &str = "cudaStream_t";
pub const HIP_TYPE: &str = "hipStream_t";

/// Settings of the engine, from `MPIXSTREAM_*` variables (read once; docs/enqueue.md lists them).
pub struct EnqConfig {
    /// `MPIXSTREAM_THREAD_MULTIPLE=1`: our `MPI_Init*` asks MPICH for `MPI_THREAD_MULTIPLE`.
    pub thread_multiple: bool,
    /// `MPIXSTREAM_FINALIZE_TIMEOUT` (seconds): how long `MPI_Finalize` waits for enqueued work.
    pub finalize_timeout: Duration,
    /// `MPIXSTREAM_ENQUEUE_SPIN`: turns a waiting thread spins (`spin_loop`) before it yields.
    pub spin: u32,
    /// `MPIXSTREAM_ENQUEUE_YIELD_US`: how long a waiting thread then yields its core before it sleeps.
    pub yield_for: Duration,
    /// `MPIXSTREAM_GPU_AWARE=1`: the MPI library takes device pointers (no staging).
    pub gpu_aware: bool,
    /// `MPIXSTREAM_CUDA_SYNC=auto|memops|hostfn`.
    pub cuda_sync: cuda::SyncMode,
}

/// The engine's settings, from the one settings table (`crate::config`, parsed strictly at `MPI_Init*`);
/// the defaults left open there are chosen here by core count.
pub fn config() -> &'static EnqConfig {
    static CONFIG: OnceLock<EnqConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let s = crate::runtime::active()
            .map(|rt| rt.config.enqueue.clone())
            .unwrap_or_else(|| crate::config::Config::from_lookup(|_| None).expect("the defaults parse").enqueue);
        // Spinning pays where cores are spare; on a small or oversubscribed machine every spinning
        // thread delays the one it waits for, so the defaults scale with the cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin = s.spin.unwrap_or(if cores >= 8 { 2000 } else { 0 });
        let yield_for = s.yield_for.unwrap_or(Duration::from_micros(if cores >= 8 { 200 } else { 100 }));
        let cuda_sync = match s.cuda_sync {
            crate::config::CudaSync::Auto => cuda::SyncMode::Auto,
            crate::config::CudaSync::Memops => cuda::SyncMode::Memops,
            crate::config::CudaSync::HostFn => cuda::SyncMode::HostFn,
        };
        EnqConfig {
            thread_multiple: s.thread_multiple,
            finalize_timeout: s.finalize_timeout,
            spin,
            yield_for,
            gpu_aware: s.gpu_aware,
            cuda_sync,
        }
    })
}

/// A queue kind, as `MPIX_Stream_create`'s info asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSpec {
    Host,
    /// A `cudaStream_t` handle.
    Cuda(u64),
}

/// Reads the queue kind out of `MPIX_Stream_create`'s info (`ty` is its non-empty `type`). Errors are
/// (class, message) for `errors::raise`.
pub unsafe fn parse_info(rt: &Runtime, info: MPI_Info, ty: &str) -> Result<QueueSpec, (Class, String)> {
    let spec = match ty {
        HOST_QUEUE_TYPE => QueueSpec::Host,
        CUDA_TYPE => {
            let value = crate::info::info_get_string(info, c"value".as_ptr() as *const c_char)
                .map_err(|_| (Class::InfoValue, "cannot read info key \"value\"".to_string()))?
                .ok_or_else(|| {
                    (
                        Class::InfoValue,
                        "info type=cudaStream_t needs key \"value\": the stream handle, set with \
                         MPIX_Info_set_hex(info, \"value\", &stream, sizeof(cudaStream_t))"
                            .to_string(),
                    )
                })?;
            let bytes = crate::hex::decode(&value, 8).map_err(|e| {
                (
                    Class::InfoValue,
                    format!("info type=cudaStream_t: value \"{value}\" is not an 8-byte stream handle: {e}"),
                )
            })?;
            let handle = u64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
            cuda::probe().map_err(|e| (Class::Other, format!("info type=cudaStream_t: {e}")))?;
            QueueSpec::Cuda(handle)
        }
        HIP_TYPE => {
            return Err((
                Class::Unsupported,
                "info type=hipStream_t: HIP streams are not supported by mpixstream \
                 (supported queue types: cudaStream_t, mpixstream_host_queue)"
                    .into(),
            ))
        }
        other => {
            return Err((
                Class::InfoValue,
                format!(
                    "info type=\"{other}\" is not a stream type this library supports \
                     (cudaStream_t, {HOST_QUEUE_TYPE}, or none)"
                ),
            ))
        }
    };
    if !rt.thread_multiple() {
        return Err((
            Class::Other,
            format!(
                "a stream with info type={ty} runs its MPI operations on a thread of ours, which needs \
                 MPI_THREAD_MULTIPLE: initialise with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) \
                 or set MPIXSTREAM_THREAD_MULTIPLE=1"
            ),
        ));
    }
    Ok(spec)
}

pub enum Queue {
    Host(HostQueue),
    Cuda(cuda::CudaQueue),
}

impl Queue {
    fn signal_ready(&self, seq: u32) -> Result<(), String> {
        match self {
            Queue::Host(q) => {
                q.push(Item::Ready(seq));
                Ok(())
            }
            Queue::Cuda(q) => q.signal_ready(seq),
        }
    }

    fn wait_done(&self, seq: u32) -> Result<(), String> {
        match self {
            Queue::Host(q) => {
                q.push(Item::WaitDone(seq));
                Ok(())
            }
            Queue::Cuda(q) => q.wait_done(seq),
        }
    }

    fn copy_back(&self, staged: Option<cuda::Staged>) -> Result<(), String> {
        match (self, staged) {
            (Queue::Cuda(q), Some(s)) => q.copy_back(s),
            _ => Ok(()),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Queue::Host(_) => "host queue".into(),
            Queue::Cuda(q) => q.describe(),
        }
    }

    /// Whether the queue has run everything queued on it.
    fn idle(&self) -> bool {
        match self {
            Queue::Host(q) => q.outstanding() == 0,
            Queue::Cuda(q) => q.idle(),
        }
    }
}

/// An operation on its way to the engine thread.
struct Op {
    seq: u32,
    comm: MPI_Comm,
    kind: Kind,
    /// Our request handle (nonblocking forms): the status goes through `Engine::reqs`.
    request: Option<MPI_Request>,
    /// Where a blocking receive's status goes (null or `MPI_STATUS_IGNORE`: nowhere).
    status: *mut MPI_Status,
    /// Which call queued it (for error messages).
    func: &'static str,
}

unsafe impl Send for Op {}

/// A request of ours between `MPIX_I*_enqueue` and its completion and wait.
struct ReqState {
    seq: u32,
    done: bool,
    waited: bool,
    status: MPI_Status,
    /// Where `MPIX_Wait*_enqueue` wants the status.
    dst: *mut MPI_Status,
    /// Copies back to the device owed after the wait (CUDA staging).
    staged: Option<cuda::Staged>,
}

unsafe impl Send for ReqState {}

/// What `Engine::enq` serialises: sequence numbers and queue order are assigned under it together.
struct EnqState {
    next_seq: u32,
    next_req: u32,
}

pub struct Engine {
    pub index: usize,
    pub handle: MPIX_Stream,
    /// The native MPICH stream behind ours (native backend), else `MPIX_STREAM_NULL`.
    native: MPIX_Stream,
    pub queue: Queue,
    flags: Arc<Flags>,
    enq: Mutex<EnqState>,
    inbox: Mutex<VecDeque<Op>>,
    reqs: Mutex<HashMap<MPI_Request, ReqState>>,
    /// Incomplete operations per communicator (`MPI_Comm_free` refuses while any).
    comm_ops: Mutex<HashMap<MPI_Comm, u32>>,
    /// Operations queued and not complete.
    incomplete: AtomicU32,
    stop: AtomicBool,
    abandon: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The first failure of an enqueued operation not yet reported to the application.
    error: Mutex<Option<String>>,
    spin: u32,
}

const MAX_STREAMS: usize = 64;

fn registry() -> &'static [RwLock<Option<Arc<Engine>>>] {
    static ENGINES: OnceLock<Box<[RwLock<Option<Arc<Engine>>>]>> = OnceLock::new();
    ENGINES.get_or_init(|| (0..MAX_STREAMS).map(|_| RwLock::new(None)).collect())
}

/// The engine of stream slot `index`, if the stream is queue-backed.
#[inline]
pub fn engine(index: usize) -> Option<Arc<Engine>> {
    registry().get(index)?.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether our engine thread drives stream slot `index` (then nobody else may).
pub fn drives(index: usize) -> bool {
    registry().get(index).is_some_and(|e| e.read().unwrap_or_else(|e| e.into_inner()).is_some())
}

fn all_engines() -> Vec<Arc<Engine>> {
    registry().iter().filter_map(|e| e.read().unwrap_or_else(|e| e.into_inner()).clone()).collect()
}

/// Makes stream slot `index` queue-backed (from `MPIX_Stream_create`).
pub fn attach(rt: &'static Runtime, index: usize, spec: QueueSpec) -> Result<(), String> {
    if index >= MAX_STREAMS {
        return Err(format!("stream slot {index} is beyond the engine's {MAX_STREAMS}"));
    }
    let cfg = config();
    let handle = StreamTable::handle(index);
    let (queue, flags) = match spec {
        QueueSpec::Host => {
            let flags = Arc::new(Flags::on_heap());
            let q = HostQueue::start(flags.clone(), cfg.spin, cfg.yield_for, format!("mpixstream-hostq-{index}"))
                .map_err(|e| format!("cannot start the host queue's thread: {e}"))?;
            (Queue::Host(q), flags)
        }
        QueueSpec::Cuda(h) => {
            let (q, flags) = cuda::CudaQueue::create(h, cfg.cuda_sync, cfg.gpu_aware, cfg.spin, cfg.yield_for)?;
            (Queue::Cuda(q), flags)
        }
    };
    let eng = Arc::new(Engine {
        index,
        handle,
        native: rt.streams.slot(index).native(),
        queue,
        flags,
        enq: Mutex::new(EnqState { next_seq: 1, next_req: 0 }),
        inbox: Mutex::new(VecDeque::new()),
        reqs: Mutex::new(HashMap::new()),
        comm_ops: Mutex::new(HashMap::new()),
        incomplete: AtomicU32::new(0),
        stop: AtomicBool::new(false),
        abandon: AtomicBool::new(false),
        thread: Mutex::new(None),
        error: Mutex::new(None),
        spin: cfg.spin,
    });
    let e = eng.clone();
    let spawned = std::thread::Builder::new().name(format!("mpixstream-enqueue-{index}")).spawn(move || e.run(rt));
    let thread = match spawned {
        Ok(t) => t,
        Err(err) => {
            eng.shutdown_queue(false);
            return Err(format!("cannot start the engine thread: {err}"));
        }
    };
    eng.flags.set_engine(thread.thread().clone());
    *eng.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    *registry()[index].write().unwrap_or_else(|e| e.into_inner()) = Some(eng);
    Ok(())
}

/// Tears down stream slot `index`'s engine (from `MPIX_Stream_free`, after it checked that no
/// operation is pending). Refuses while the queue still has items to run.
pub fn detach(index: usize) -> Result<(), (Class, String)> {
    let Some(eng) = engine(index) else {
        return Ok(());
    };
    if let Queue::Host(q) = &eng.queue {
        let n = q.outstanding();
        if n > 0 {
            return Err((
                Class::Pending,
                format!(
                    "stream 0x{:08x}'s host queue still has {n} item(s) to run; call MPIX_Host_queue_synchronize first",
                    eng.handle as u32
                ),
            ));
        }
    }
    if let Some(e) = eng.take_error() {
        eprintln!(
            "mpixstream: MPIX_Stream_free: an enqueued operation on stream 0x{:08x} failed: {e}",
            eng.handle as u32
        );
    }
    *registry()[index].write().unwrap_or_else(|e| e.into_inner()) = None;
    if let Queue::Cuda(q) = &eng.queue {
        // Every operation is complete, so every wait of ours on the stream is satisfied.
        if let Err(e) = q.synchronize() {
            eprintln!("mpixstream: MPIX_Stream_free: {e}");
        }
    }
    eng.stop_thread();
    eng.shutdown_queue(false);
    Ok(())
}

/// `MPI_Comm_free`'s check: a communicator with enqueued operations not complete cannot be freed
/// (the engine thread has yet to use it). The error is (class, message) for `errors::raise`.
pub fn check_comm_free(rt: &Runtime, comm: MPI_Comm) -> Result<(), (Class, String)> {
    let Some(entry) = rt.comms.get(comm) else {
        return Ok(());
    };
    let Some(eng) = engine(entry.stream) else {
        return Ok(());
    };
    let n = eng.comm_ops.lock().unwrap_or_else(|e| e.into_inner()).get(&comm).copied().unwrap_or(0);
    if n > 0 {
        return Err((
            Class::Pending,
            format!(
                "communicator 0x{:08x} has {n} enqueued operation(s) not complete on stream 0x{:08x}; \
                 synchronize the stream's queue first",
                comm as u32, eng.handle as u32
            ),
        ));
    }
    Ok(())
}

/// `MPI_Finalize`'s drain: waits up to `MPIXSTREAM_FINALIZE_TIMEOUT` for every engine's operations and
/// queue; then reports what did not finish, abandons it (cancelling receives, releasing the queues'
/// waits), and stops every engine. Never blocks longer than the timeout plus a short grace. Returns
/// false if work was abandoned.
pub fn finalize() -> bool {
    let engines = all_engines();
    if engines.is_empty() {
        return true;
    }
    let deadline = Instant::now() + config().finalize_timeout;
    let mut clean = true;
    let mut leave_memory = Vec::new();
    for eng in &engines {
        let host = matches!(eng.queue, Queue::Host(_));
        while (eng.incomplete.load(Ordering::Acquire) > 0 || !eng.queue.idle()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        let n = eng.incomplete.load(Ordering::Acquire);
        // A CUDA stream still running the application's own work is not ours to report; but its
        // staging buffers and flag words may still be used by it, so they are left allocated.
        let queue_busy = !eng.queue.idle();
        if !host && queue_busy {
            leave_memory.push(eng.index);
        }
        if n > 0 || (host && queue_busy) {
            clean = false;
            eprintln!(
                "mpixstream: MPI_Finalize: stream 0x{:08x} ({}): {n} enqueued operation(s) did not complete{} \
                 within {:.1} s (MPIXSTREAM_FINALIZE_TIMEOUT); abandoning them (receives are cancelled)",
                eng.handle as u32,
                eng.queue.describe(),
                if queue_busy { " and its queue did not drain" } else { "" },
                config().finalize_timeout.as_secs_f64()
            );
            eng.abandon.store(true, Ordering::Release);
        }
        if let Some(e) = eng.take_error() {
            eprintln!(
                "mpixstream: MPI_Finalize: an enqueued operation on stream 0x{:08x} failed: {e}",
                eng.handle as u32
            );
        }
    }
    for eng in &engines {
        let abandoned = eng.abandon.load(Ordering::Acquire);
        eng.stop_thread();
        if abandoned || leave_memory.contains(&eng.index) {
            // The GPU may still write a flag word: never free them under it.
            std::mem::forget(eng.flags.clone());
        }
        if !eng.shutdown_queue(abandoned || leave_memory.contains(&eng.index)) {
            eprintln!(
                "mpixstream: MPI_Finalize: stream 0x{:08x}'s host queue is stuck in an application callback; leaving it",
                eng.handle as u32
            );
        }
        *registry()[eng.index].write().unwrap_or_else(|e| e.into_inner()) = None;
    }
    clean
}

impl Engine {
    fn take_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn record_error(&self, msg: String) {
        eprintln!("mpixstream: {msg}");
        let mut e = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
    }

    fn stop_thread(&self) {
        self.stop.store(true, Ordering::Release);
        self.flags.wake_engine();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }

    /// Stops the queue's machinery; false if a host worker could not be stopped.
    fn shutdown_queue(&self, abandon: bool) -> bool {
        match &self.queue {
            Queue::Host(q) => q.shutdown(abandon, Duration::from_secs(1)),
            Queue::Cuda(q) => {
                if abandon {
                    q.give_up();
                    // The stream may still run copies from staging buffers: leave them allocated.
                } else {
                    q.release();
                }
                true
            }
        }
    }

    /// A pending failure, reported once, as an error of the call `func` on `comm`.
    pub fn report_error(&self, comm: MPI_Comm, func: &str) -> Result<(), c_int> {
        match self.take_error() {
            None => Ok(()),
            Some(e) => Err(crate::errors::raise(
                comm,
                Class::Other,
                func,
                &format!("an earlier enqueued operation failed: {e}"),
            )),
        }
    }

    /// Queues operation `kind` on `comm`: blocking (`request` null) or nonblocking (a request of ours
    /// is stored in `*request`).
    pub unsafe fn submit(
        &self,
        rt: &Runtime,
        func: &'static str,
        comm: MPI_Comm,
        mut kind: Kind,
        status: *mut MPI_Status,
        request: *mut MPI_Request,
    ) -> Result<(), (Class, String)> {
        let mut st = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        let seq = st.next_seq;
        if !self.flags.slot_free(seq) {
            // RING operations outstanding: wait for the oldest (the queue keeps running meanwhile).
            let never = AtomicBool::new(false);
            self.flags.wait_until(|f| f.slot_free(seq), &never, self.spin, config().yield_for);
        }
        let staged = match &self.queue {
            Queue::Cuda(q) => Some(q.stage(&mut kind, comm, seq).map_err(|e| (Class::Other, e))?),
            Queue::Host(_) => None,
        };
        let handle = if request.is_null() {
            None
        } else {
            let mut reqs = self.reqs.lock().unwrap_or_else(|e| e.into_inner());
            let mut h;
            let mut tries = 0;
            loop {
                st.next_req = st.next_req % 0xF_FFFF + 1;
                h = request_handle(self.index, st.next_req);
                if !reqs.contains_key(&h) {
                    break;
                }
                tries += 1;
                if tries > 16 {
                    return Err((
                        Class::Other,
                        "too many requests of MPIX_Isend_enqueue/MPIX_Irecv_enqueue were never waited for".into(),
                    ));
                }
            }
            reqs.insert(
                h,
                ReqState {
                    seq,
                    done: false,
                    waited: false,
                    status: ops::empty_status(),
                    dst: std::ptr::null_mut(),
                    staged: None,
                },
            );
            Some(h)
        };
        st.next_seq = seq.wrapping_add(1);
        let slot = rt.streams.slot(self.index);
        slot.pending.fetch_add(if handle.is_some() { 2 } else { 1 }, Ordering::AcqRel);
        self.incomplete.fetch_add(1, Ordering::AcqRel);
        *self.comm_ops.lock().unwrap_or_else(|e| e.into_inner()).entry(comm).or_insert(0) += 1;
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push_back(Op {
            seq,
            comm,
            kind,
            request: handle,
            status,
            func,
        });
        self.flags.wake_engine();
        let queued = self.queue.signal_ready(seq).and_then(|_| match handle {
            None => self.queue.wait_done(seq).and_then(|_| self.queue.copy_back(staged)),
            Some(h) => {
                if let Some(r) = self.reqs.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&h) {
                    r.staged = staged;
                }
                Ok(())
            }
        });
        if let Err(e) = queued {
            // The operation is registered; the engine will run it when (if) the stream gets there.
            return Err((Class::Other, e));
        }
        if let Some(h) = handle {
            *request = h;
        }
        Ok(())
    }

    /// Queues the waits for `requests` (all of this engine, checked by the caller). Statuses go to
    /// `statuses[i]` (null: ignored) when the operation completes.
    pub unsafe fn wait_requests(
        &self,
        rt: &Runtime,
        requests: &[MPI_Request],
        statuses: &[*mut MPI_Status],
    ) -> Result<(), (Class, String)> {
        let _st = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        let mut result = Ok(());
        for (i, &h) in requests.iter().enumerate() {
            let dst = statuses.get(i).copied().unwrap_or(std::ptr::null_mut());
            let (seq, staged) = {
                let mut reqs = self.reqs.lock().unwrap_or_else(|e| e.into_inner());
                // Missing or already waited: a duplicate in the array, or a concurrent wait.
                let Some(r) = reqs.get_mut(&h).filter(|r| !r.waited) else {
                    continue;
                };
                let seq = r.seq;
                let staged = r.staged.take();
                if r.done {
                    if status_is_real(dst) {
                        *dst = r.status;
                    }
                    reqs.remove(&h);
                } else {
                    r.waited = true;
                    r.dst = dst;
                }
                (seq, staged)
            };
            rt.streams.slot(self.index).pending.fetch_sub(1, Ordering::AcqRel);
            if result.is_ok() {
                result =
                    self.queue.wait_done(seq).and_then(|_| self.queue.copy_back(staged)).map_err(|e| (Class::Other, e));
            }
        }
        result
    }

    /// Queues the application's callback (host queues), in order with the operations.
    pub fn launch(&self, f: host::UserFn, arg: *mut std::os::raw::c_void) {
        let _st = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        if let Queue::Host(q) = &self.queue {
            q.push(Item::User(f, arg as usize));
        }
    }

    /// Whether `h` is a live, unwaited request of this engine.
    pub fn owns_request(&self, h: MPI_Request) -> bool {
        self.reqs.lock().unwrap_or_else(|e| e.into_inner()).get(&h).is_some_and(|r| !r.waited)
    }

    /// Completes operation `op` with `status` (the engine thread).
    unsafe fn complete(&self, rt: &Runtime, op: Op, mut status: MPI_Status, err: Option<c_int>) {
        if let Some(code) = err {
            status.MPI_ERROR = code;
            let mut text = vec![0 as c_char; MPI_MAX_ERROR_STRING];
            let mut len = 0;
            (pmpi().PMPI_Error_string)(code, text.as_mut_ptr(), &mut len);
            let bytes: Vec<u8> = text[..len.max(0) as usize].iter().map(|&c| c as u8).collect();
            self.record_error(format!(
                "{} on communicator 0x{:08x} (enqueued {}, stream 0x{:08x}): {}",
                op.func,
                op.comm as u32,
                op.kind.name(),
                self.handle as u32,
                String::from_utf8_lossy(&bytes)
            ));
        }
        let slot = rt.streams.slot(self.index);
        match op.request {
            Some(h) => {
                let mut reqs = self.reqs.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(r) = reqs.get_mut(&h) {
                    if r.waited {
                        if status_is_real(r.dst) {
                            *r.dst = status;
                        }
                        reqs.remove(&h);
                    } else {
                        r.done = true;
                        r.status = status;
                    }
                }
            }
            None => {
                if status_is_real(op.status) {
                    *op.status = status;
                }
            }
        }
        {
            let mut m = self.comm_ops.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = m.get_mut(&op.comm) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&op.comm);
                }
            }
        }
        slot.pending.fetch_sub(1, Ordering::AcqRel);
        self.incomplete.fetch_sub(1, Ordering::AcqRel);
        // Last: this releases the queue (and whoever synchronises with it).
        self.flags.mark_done(op.seq);
    }

    /// The engine thread: starts operations in queue order once ready, completes them, never blocks
    /// in MPI. Sleeps when there is nothing to do (woken by submissions and host-queue ready signals).
    fn run(self: Arc<Self>, rt: &'static Runtime) {
        let p = pmpi();
        let mut waiting: VecDeque<Op> = VecDeque::new();
        let mut inflight: Vec<(Op, MPI_Request)> = Vec::new();
        // Turns and time since the last thing done: spin, then yield, then sleep (see EnqConfig).
        let mut idle: u32 = 0;
        let mut idle_since = Instant::now();
        let yield_for = config().yield_for;
        let host_queue = matches!(self.queue, Queue::Host(_));
        loop {
            {
                let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
                waiting.extend(inbox.drain(..));
            }
            if self.abandon.load(Ordering::Acquire) {
                unsafe { self.abandon_all(rt, &mut waiting, &mut inflight) };
                break;
            }
            let mut progressed = false;
            while waiting.front().is_some_and(|op| self.flags.is_ready(op.seq)) {
                let Some(op) = waiting.pop_front() else { break };
                match unsafe { op.kind.start(op.comm) } {
                    Ok(req) => inflight.push((op, req)),
                    Err(code) => unsafe { self.complete(rt, op, ops::empty_status(), Some(code)) },
                }
                progressed = true;
            }
            if !inflight.is_empty() {
                if self.native != MPIX_STREAM_NULL {
                    rt.progress(self.native);
                }
                let mut i = 0;
                while i < inflight.len() {
                    let mut flag = 0;
                    let mut status = ops::empty_status();
                    let rc = unsafe { (p.PMPI_Test)(&mut inflight[i].1, &mut flag, &mut status) };
                    if rc != MPI_SUCCESS || flag != 0 {
                        let (op, _) = inflight.swap_remove(i);
                        let err = if rc != MPI_SUCCESS {
                            Some(rc)
                        } else if status.MPI_ERROR != MPI_SUCCESS && op.kind.is_recv() {
                            Some(status.MPI_ERROR)
                        } else {
                            None
                        };
                        // Nonblocking collectives and sends leave MPI_ERROR undefined: clear it.
                        if err.is_none() {
                            status.MPI_ERROR = MPI_SUCCESS;
                        }
                        unsafe { self.complete(rt, op, status, err) };
                        progressed = true;
                    } else {
                        i += 1;
                    }
                }
            }
            if progressed {
                idle = 0;
                continue;
            }
            if self.stop.load(Ordering::Acquire) && waiting.is_empty() && inflight.is_empty() {
                let inbox_empty = self.inbox.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
                if inbox_empty {
                    break;
                }
                continue;
            }
            if idle == 0 {
                idle_since = Instant::now();
            }
            idle = idle.saturating_add(1);
            if idle <= self.spin / 16 {
                std::hint::spin_loop();
            } else if idle_since.elapsed() < yield_for {
                std::thread::yield_now();
            } else if inflight.is_empty() && (waiting.is_empty() || host_queue) {
                // Nothing to poll: sleep until a submission or a host queue's ready signal unparks us.
                std::thread::park_timeout(Duration::from_millis(20));
            } else if idle_since.elapsed() < yield_for * 50 {
                std::thread::yield_now();
            } else {
                // A long wait (a peer late, or a GPU stream busy): poll every 50 us.
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Finalize gave up on the stream: cancel receives, forget the rest, mark everything done so that
    /// no queue waits forever.
    unsafe fn abandon_all(&self, rt: &Runtime, waiting: &mut VecDeque<Op>, inflight: &mut Vec<(Op, MPI_Request)>) {
        let p = pmpi();
        for (op, mut req) in inflight.drain(..) {
            if op.kind.is_recv() {
                (p.PMPI_Cancel)(&mut req);
                let deadline = Instant::now() + Duration::from_millis(100);
                let mut flag = 0;
                while flag == 0 && Instant::now() < deadline {
                    (p.PMPI_Test)(&mut req, &mut flag, MPI_STATUS_IGNORE);
                }
            }
            let mut status = ops::empty_status();
            status.MPI_ERROR = MPI_ERR_PENDING;
            self.complete(rt, op, status, None);
        }
        for op in waiting.drain(..) {
            let mut status = ops::empty_status();
            status.MPI_ERROR = MPI_ERR_PENDING;
            self.complete(rt, op, status, None);
        }
    }
}

/// Our request handles: MPICH's request object type with the "invalid" handle kind (bits 30-31 = 0),
/// so MPICH rejects them as invalid requests instead of misreading them; bits 20-25 hold the stream
/// slot, bits 0-19 a counter (never 0, which would be `MPI_REQUEST_NULL`).
pub fn request_handle(index: usize, n: u32) -> MPI_Request {
    (0x2c00_0000u32 | ((index as u32 & 0x3f) << 20) | (n & 0xf_ffff)) as MPI_Request
}

/// The stream slot of a request handle of ours, or None.
pub fn request_stream(h: MPI_Request) -> Option<usize> {
    let u = h as u32;
    if u & 0xfc00_0000 != 0x2c00_0000 || u & 0xf_ffff == 0 {
        return None;
    }
    Some(((u >> 20) & 0x3f) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_handles_round_trip_and_differ_from_mpich() {
        for idx in [0usize, 1, 63] {
            for n in [1u32, 2, 0xf_ffff] {
                let h = request_handle(idx, n);
                assert_ne!(h, MPI_REQUEST_NULL);
                assert_eq!(request_stream(h), Some(idx));
                // MPICH's handle kind (bits 30-31) is "invalid": MPI_Wait rejects it cleanly.
                assert_eq!((h as u32) >> 30, 0);
            }
        }
        assert_eq!(request_stream(MPI_REQUEST_NULL), None);
        // A real MPICH request (direct kind).
        assert_eq!(request_stream(0xac00_0001u32 as i32), None);
    }
}

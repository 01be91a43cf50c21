//! The CUDA queue (`type=cudaStream_t`): the application's CUDA stream, driven through the CUDA
//! driver API (`cudarc`, with `libcuda` loaded at run time).
//!
//! The stream never runs MPI: for operation k it gets `cuStreamWriteValue32(ready, k)` where the
//! operation may start, and `cuStreamWaitValue32(done[k] >= k)` where the stream must wait for it
//! (both on pinned, device-mapped host memory). Our driver thread makes the MPI calls. Where stream
//! memory operations are unavailable, the same two steps run as host functions (`cuLaunchHostFunc`)
//! that only touch the flag words (the wait blocks CUDA's callback thread, never inside MPI).
//!
//! Device buffers are staged through pinned host memory ([`super::cuda_staging`]);
//! `MPIXSTREAM_GPU_AWARE=1` passes device pointers through.
//!
//! `cudarc` panics when it cannot load `libcuda`: [`probe`] checks with `libloading` first, and
//! nothing here calls into `cudarc` before a successful probe.
use super::flags::{self, FlagMem, Flags, POSITION_WORD, READY_WORD, WORDS};
use cudarc::driver::sys;
use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const LIBCUDA: &str = "libcuda.so.1";

/// Every driver entry point we use; checked present before `cudarc` resolves (and would panic on) any.
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuGetErrorName",
    "cuStreamGetCtx",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuPointerGetAttribute",
    "cuStreamWaitValue32_v2",
    "cuStreamWriteValue32_v2",
    "cuLaunchHostFunc",
    "cuStreamSynchronize",
    "cuStreamQuery",
];

/// Whether the CUDA driver is usable in this process (checked once). The error names the cause.
pub fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        // SAFETY: loading libcuda runs its initialisers, which are the driver's own; every symbol we use
        // is checked present before cudarc resolves it (cudarc would panic), and `cuInit` takes a flags
        // word only.
        .get_or_init(|| unsafe {
            let lib = libloading::Library::new(LIBCUDA).map_err(|e| {
                format!("CUDA streams need the CUDA driver, but {LIBCUDA} cannot be loaded ({e}): this node has no usable CUDA")
            })?;
            for s in SYMBOLS {
                if lib.get::<unsafe extern "C" fn()>(s.as_bytes()).is_err() {
                    return Err(format!("the CUDA driver ({LIBCUDA}) has no {s}: mpixstream needs a CUDA 12 driver or newer"));
                }
            }
            // Keep it loaded for the life of the process (cudarc opens it again by its own search).
            std::mem::forget(lib);
            if !sys::is_culib_present() {
                return Err(format!("{LIBCUDA} loads, but cudarc's search for the CUDA driver library fails"));
            }
            check(sys::cuInit(0), "cuInit")
        })
        .clone()
}

fn error_name(r: sys::CUresult) -> String {
    let mut p: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: the driver stores into a live local a pointer to one of its static, NUL-terminated names
    // (or fails, leaving it null), which lives as long as the loaded library: for the process.
    unsafe {
        if sys::cuGetErrorName(r, &mut p) == sys::CUresult::CUDA_SUCCESS && !p.is_null() {
            return CStr::from_ptr(p).to_string_lossy().into_owned();
        }
    }
    format!("CUDA error {}", r as u32)
}

/// A pinned staging buffer of the queue's pool (filled and recycled by [`super::cuda_staging`]).
pub(super) struct StageBuf {
    pub(super) host: *mut u8,
    pub(super) cap: usize,
    pub(super) busy: bool,
    /// The operation using it: reusable once it is done...
    pub(super) seq: u32,
    /// ...and, for an output, once the stream passed the position after its copy back (None: that
    /// copy is not queued yet, an unwaited nonblocking receive).
    pub(super) output: bool,
    pub(super) pos: Option<u32>,
}

pub(super) struct Staging {
    pub(super) pool: Vec<StageBuf>,
    pub(super) next_pos: u32,
}

pub(super) fn check(r: sys::CUresult, what: &str) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", error_name(r)))
    }
}

/// Makes `ctx` current on this thread for the guard's life.
pub(super) struct CtxGuard;

impl CtxGuard {
    /// # Safety
    /// `ctx` is a live CUDA context of this process.
    pub(super) unsafe fn push(ctx: sys::CUcontext) -> Result<CtxGuard, String> {
        // SAFETY: `ctx` is live (the contract).
        check(unsafe { sys::cuCtxPushCurrent_v2(ctx) }, "cuCtxPushCurrent")?;
        Ok(CtxGuard)
    }
}

impl Drop for CtxGuard {
    fn drop(&mut self) {
        let mut old = std::ptr::null_mut();
        // SAFETY: pops the context `push` made current on this thread (a guard is not `Send`: it is
        // dropped on the thread that pushed); the old context goes into a live local.
        unsafe { sys::cuCtxPopCurrent_v2(&mut old) };
    }
}

/// The pinned block holding a CUDA queue's flag words.
struct PinnedBlock {
    ptr: *mut c_void,
    ctx: sys::CUcontext,
}

// SAFETY: the block is the driver's pinned memory, usable from any thread; its words are only accessed
// as atomics (through `Flags`), and it is freed once, by `drop`.
unsafe impl Send for PinnedBlock {}
// SAFETY: as for `Send`: shared access is atomic.
unsafe impl Sync for PinnedBlock {}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // SAFETY: `ctx` is the context the block was allocated in, kept alive by the application's
        // stream (never dropped while the GPU may still use the block: finalize leaks it then), and
        // `ptr` is that allocation, freed here once.
        unsafe {
            if let Ok(_g) = CtxGuard::push(self.ctx) {
                sys::cuMemFreeHost(self.ptr);
            }
        }
    }
}

/// How the stream signals and waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// `MPIXSTREAM_CUDA_SYNC=auto` (default): stream memory operations where the device supports them.
    Auto,
    Memops,
    HostFn,
}

/// What the host functions of the fallback mode need.
struct Shared {
    flags: Arc<Flags>,
    give_up: AtomicBool,
    spin: u32,
    yield_for: std::time::Duration,
}

struct HostArg {
    shared: Arc<Shared>,
    word: usize,
    value: u32,
}

/// A host function the CUDA driver calls on its callback thread (`cuLaunchHostFunc`): the fallback's
/// "ready k" (or position) write.
unsafe extern "C" fn host_write(arg: *mut c_void) {
    mpixstream_wrappers::guard::guard_with("host_write", (), || {
        // SAFETY: `arg` is the `Box<HostArg>` that `write_word` leaked for this one launch; the driver
        // calls the function once with it, so the box is taken back exactly once.
        let a = unsafe { Box::from_raw(arg as *mut HostArg) };
        if a.word == READY_WORD {
            a.shared.flags.signal_ready(a.value);
        } else {
            a.shared.flags.word(a.word).store(a.value, Ordering::Release);
        }
    })
}

/// A host function the CUDA driver calls on its callback thread: the fallback's "wait for done k"
/// (it blocks the stream, never inside MPI).
unsafe extern "C" fn host_wait(arg: *mut c_void) {
    mpixstream_wrappers::guard::guard_with("host_wait", (), || {
        // SAFETY: as in `host_write`: the box `wait_done` leaked for this one launch.
        let a = unsafe { Box::from_raw(arg as *mut HostArg) };
        let seq = a.value;
        a.shared.flags.wait_until(|f| f.is_done(seq), &a.shared.give_up, a.shared.spin, a.shared.yield_for);
    })
}

/// Queues host function `f` with `arg` on `stream` (the context is current): the driver calls it once,
/// and it takes the argument back; a launch that fails takes it back here.
fn launch(stream: sys::CUstream, f: unsafe extern "C" fn(*mut c_void), arg: HostArg) -> Result<(), String> {
    let arg = Box::into_raw(Box::new(arg));
    // SAFETY: `f` takes exactly this boxed `HostArg` back (`host_write`, `host_wait`); the driver checks
    // the stream handle.
    let r = unsafe { sys::cuLaunchHostFunc(stream, Some(f), arg as *mut c_void) };
    if r != sys::CUresult::CUDA_SUCCESS {
        // SAFETY: not launched, so `f` never runs: the box is still ours, and taken back once.
        drop(unsafe { Box::from_raw(arg) });
    }
    check(r, "cuLaunchHostFunc")
}

pub struct CudaQueue {
    pub(super) stream: sys::CUstream,
    pub(super) ctx: sys::CUcontext,
    memops: bool,
    /// Device address of the flag block's word 0.
    dev_flags: u64,
    shared: Arc<Shared>,
    pub(super) gpu_aware: bool,
    pub(super) state: Mutex<Staging>,
}

// SAFETY: the raw parts are driver handles (stream, context) and pinned pool memory; the driver API is
// thread-safe, and the queue's own state (the pool) is behind `state`'s lock.
unsafe impl Send for CudaQueue {}
// SAFETY: as for `Send`.
unsafe impl Sync for CudaQueue {}

impl CudaQueue {
    /// Attaches the application's stream `handle` (a `cudaStream_t`/`CUstream`). Returns the queue and
    /// its flag words (pinned).
    pub fn create(
        handle: u64,
        mode: SyncMode,
        gpu_aware: bool,
        spin: u32,
        yield_for: std::time::Duration,
    ) -> Result<(CudaQueue, Arc<Flags>), String> {
        probe()?;
        // SAFETY: the driver is loaded (`probe`). `handle` is passed to the driver only, which refuses
        // a handle that is no stream; the context it names is made current for the calls that follow.
        // Every out-pointer is a live local; the flag block is `WORDS` u32s of fresh pinned memory,
        // suitably aligned, initialised here before any other use and owned by `block` from then on.
        unsafe {
            let stream = handle as usize as sys::CUstream;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            check(sys::cuStreamGetCtx(stream, &mut ctx), "cuStreamGetCtx").map_err(|e| {
                format!(
                    "{e}: value 0x{handle:x} is not a CUDA stream of this process \
                     (or, for the default stream, no CUDA context is current on this thread)"
                )
            })?;
            let _g = CtxGuard::push(ctx)?;
            let mut host: *mut c_void = std::ptr::null_mut();
            check(
                sys::cuMemHostAlloc(
                    &mut host,
                    WORDS * 4,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                ),
                "cuMemHostAlloc (flag words)",
            )?;
            let block = PinnedBlock { ptr: host, ctx };
            let words = host as *const AtomicU32;
            for i in 0..WORDS {
                (*words.add(i)).store(flags::initial_word(i), Ordering::Relaxed);
            }
            let mut dev: sys::CUdeviceptr = 0;
            check(sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0), "cuMemHostGetDevicePointer")?;
            let flags = Arc::new(Flags::new(words, FlagMem::Pinned(Box::new(block))));
            let memops = match mode {
                SyncMode::HostFn => false,
                SyncMode::Auto | SyncMode::Memops => {
                    // A harmless write of the position word's initial value tells whether the
                    // device takes stream memory operations on host memory.
                    let r = sys::cuStreamWriteValue32_v2(
                        stream,
                        dev + (POSITION_WORD * 4) as u64,
                        0,
                        sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
                    );
                    if r != sys::CUresult::CUDA_SUCCESS && mode == SyncMode::Memops {
                        return Err(format!(
                            "MPIXSTREAM_CUDA_SYNC=memops, but cuStreamWriteValue32 fails on this device ({})",
                            error_name(r)
                        ));
                    }
                    r == sys::CUresult::CUDA_SUCCESS
                }
            };
            let shared = Arc::new(Shared { flags: flags.clone(), give_up: AtomicBool::new(false), spin, yield_for });
            let q = CudaQueue {
                stream,
                ctx,
                memops,
                dev_flags: dev,
                shared,
                gpu_aware,
                state: Mutex::new(Staging { pool: Vec::new(), next_pos: 1 }),
            };
            Ok((q, flags))
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "CUDA stream {:p} ({}, {})",
            self.stream,
            if self.memops { "stream memory operations" } else { "host functions" },
            if self.gpu_aware { "device buffers passed to MPI" } else { "device buffers staged through pinned memory" }
        )
    }

    pub(super) fn flags(&self) -> &Flags {
        &self.shared.flags
    }

    /// Makes the stream's context current on this thread for the guard's life.
    pub(super) fn current(&self) -> Result<CtxGuard, String> {
        // SAFETY: `ctx` is the application's stream's context (`create`), alive while the stream is:
        // the application keeps the stream until MPIX_Stream_free detached it (docs/enqueue.md).
        unsafe { CtxGuard::push(self.ctx) }
    }

    /// The stream writes `value` into flag word `word` when it gets there (the context is current).
    pub(super) fn write_word(&self, word: usize, value: u32) -> Result<(), String> {
        assert!(word < WORDS, "flag word {word} is outside the block");
        if self.memops {
            // SAFETY: the address is flag word `word` of the block's device mapping, which outlives
            // every use the stream makes of it (the block is leaked where the GPU may still use it).
            let r = unsafe {
                sys::cuStreamWriteValue32_v2(
                    self.stream,
                    self.dev_flags + (word * 4) as u64,
                    value,
                    sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
                )
            };
            check(r, "cuStreamWriteValue32")
        } else {
            launch(self.stream, host_write, HostArg { shared: self.shared.clone(), word, value })
        }
    }

    pub fn signal_ready(&self, seq: u32) -> Result<(), String> {
        let _g = self.current()?;
        self.write_word(READY_WORD, seq)
    }

    pub fn wait_done(&self, seq: u32) -> Result<(), String> {
        let _g = self.current()?;
        if self.memops {
            // SAFETY: as in `write_word`: a done word of the block's device mapping.
            let r = unsafe {
                sys::cuStreamWaitValue32_v2(
                    self.stream,
                    self.dev_flags + (flags::done_word(seq) * 4) as u64,
                    seq,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                )
            };
            check(r, "cuStreamWaitValue32")
        } else {
            launch(self.stream, host_wait, HostArg { shared: self.shared.clone(), word: 0, value: seq })
        }
    }

    /// Whether the stream can still run what is queued on it: an error other than "not ready" from
    /// `cuStreamQuery` is a context failure (a GPU fault is sticky: nothing queued will run). A
    /// destroyed stream's handle is refused, but the work queued on it still runs (the driver's
    /// documented behaviour), so that is not a failure.
    pub fn health(&self) -> Result<(), String> {
        let _g = self.current()?;
        match self.query() {
            sys::CUresult::CUDA_SUCCESS
            | sys::CUresult::CUDA_ERROR_NOT_READY
            | sys::CUresult::CUDA_ERROR_INVALID_HANDLE => Ok(()),
            r => Err(format!("the CUDA stream failed: cuStreamQuery returns {}", error_name(r))),
        }
    }

    /// `cuStreamQuery` of the stream (the context is current).
    fn query(&self) -> sys::CUresult {
        // SAFETY: a query of the stream handle, which the driver checks (a destroyed stream's is refused).
        unsafe { sys::cuStreamQuery(self.stream) }
    }

    /// Whether the stream has run everything queued on it (the application's work too).
    pub fn idle(&self) -> bool {
        match self.current() {
            // A failed context runs nothing more; a destroyed stream may still (not idle).
            Ok(_g) => {
                !matches!(self.query(), sys::CUresult::CUDA_ERROR_NOT_READY | sys::CUresult::CUDA_ERROR_INVALID_HANDLE)
            }
            Err(_) => true,
        }
    }

    pub fn synchronize(&self) -> Result<(), String> {
        let _g = self.current()?;
        // SAFETY: waits on the stream handle, which the driver checks.
        check(unsafe { sys::cuStreamSynchronize(self.stream) }, "cuStreamSynchronize")
    }

    /// Makes fallback host functions stop waiting (finalize after abandoning operations).
    pub fn give_up(&self) {
        self.shared.give_up.store(true, Ordering::Release);
        self.shared.flags.wake_all();
    }

    /// Frees the staging buffers; only when the stream no longer uses them (after `synchronize`).
    pub fn release(&self) {
        let Ok(_g) = self.current() else {
            return;
        };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for b in st.pool.drain(..) {
            // SAFETY: a pool buffer allocated by `cuMemHostAlloc` in this context, drained from the pool
            // so freed once; the stream no longer uses it (the caller's condition).
            unsafe { sys::cuMemFreeHost(b.host as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a CUDA driver the probe fails with the cause, and nothing panics (cudarc is never
    /// reached). With one, it succeeds or names what is missing.
    /// Whether libcuda loads here.
    fn libcuda_present() -> bool {
        // SAFETY: loading the CUDA driver runs only its own initialisers (as `probe` does).
        unsafe { libloading::Library::new(LIBCUDA) }.is_ok()
    }

    #[test]
    fn probe_never_panics_and_names_the_cause() {
        let present = libcuda_present();
        match probe() {
            Ok(()) => assert!(present),
            Err(e) if !present => assert!(e.contains("libcuda.so.1 cannot be loaded"), "{e}"),
            Err(e) => assert!(e.contains("CUDA") || e.contains("cu"), "{e}"),
        }
        // Asking again gives the same answer (checked once).
        assert_eq!(probe().is_ok(), probe().is_ok());
    }

    #[test]
    fn create_without_cuda_is_an_error() {
        if libcuda_present() {
            return;
        }
        let e = CudaQueue::create(0x1234, SyncMode::Auto, false, 0, std::time::Duration::ZERO).err().unwrap();
        assert!(e.contains("cannot be loaded"), "{e}");
    }
}

//! The CUDA driver (`libcuda`, through `cudarc` with the library loaded at run time), as the lean
//! library's CUDA queues use it: typed handles ([`Stream`], [`Context`]), pinned host memory that owns
//! itself ([`PinnedWords`], [`PinnedBuf`]), and the calls, each safe where the driver checks what it is
//! given. Two kinds of call stay `unsafe`, because their obligation is about time, which only the queue
//! knows: the stream's asynchronous writes, waits and copies read or write memory when the stream gets
//! there, so that memory must outlive the stream's use of it.
//!
//! `cudarc` panics when it cannot load `libcuda`: [`probe`] checks with `libloading` first, and nothing
//! here calls into `cudarc` before a successful probe (every other entry takes a [`Stream`] or a
//! [`Context`], which only exist after one).
use cudarc::driver::sys;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;

pub use sys::CUresult as Status;

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
    "cuStreamIsCapturing",
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

/// Whether `libcuda` loads here at all (the unit tests' question).
pub fn library_present() -> bool {
    // SAFETY: loading the CUDA driver runs only its own initialisers (as `probe` does).
    unsafe { libloading::Library::new(LIBCUDA) }.is_ok()
}

/// The driver's name of `r`.
pub fn error_name(r: Status) -> String {
    let mut p: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: the driver stores into a live local a pointer to one of its static, NUL-terminated names
    // (or fails, leaving it null), which lives as long as the loaded library: for the process.
    unsafe {
        if sys::cuGetErrorName(r, &mut p) == Status::CUDA_SUCCESS && !p.is_null() {
            return CStr::from_ptr(p).to_string_lossy().into_owned();
        }
    }
    format!("CUDA error {}", r as u32)
}

/// Whether `r` is the driver refusing a stream handle: a destroyed stream (an NVIDIA H200's driver
/// answered `CUDA_ERROR_INVALID_CONTEXT`), or a value that is not a stream of the context.
pub fn refuses_handle(r: Status) -> bool {
    matches!(
        r,
        Status::CUDA_ERROR_INVALID_HANDLE
            | Status::CUDA_ERROR_INVALID_CONTEXT
            | Status::CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// Whether `r` is an error about stream capture (a call not allowed on a capturing stream).
pub fn capture_error(r: Status) -> bool {
    matches!(
        r,
        Status::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
            | Status::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
            | Status::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED
            | Status::CUDA_ERROR_STREAM_CAPTURE_UNJOINED
            | Status::CUDA_ERROR_STREAM_CAPTURE_ISOLATION
            | Status::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
            | Status::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
    )
}

/// A stream's capture status (`cuStreamIsCapturing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    None,
    Active,
    /// Captured, then invalidated: the capture still has to be ended.
    Invalidated,
}

pub fn check(r: Status, what: &str) -> Result<(), String> {
    if r == Status::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", error_name(r)))
    }
}

/// A CUDA stream of the application's (`cudaStream_t`/`CUstream`).
#[derive(Clone, Copy, Debug)]
pub struct Stream(sys::CUstream);

// SAFETY: a driver handle; the driver API is thread-safe.
unsafe impl Send for Stream {}
// SAFETY: as for `Send`.
unsafe impl Sync for Stream {}

/// A CUDA context: the one of an application's stream.
#[derive(Clone, Copy, Debug)]
pub struct Context(sys::CUcontext);

// SAFETY: a driver handle; the driver API is thread-safe.
unsafe impl Send for Context {}
// SAFETY: as for `Send`.
unsafe impl Sync for Context {}

/// A context made current on this thread, for the guard's life (not `Send`: popped where pushed).
pub struct Current<'c>(PhantomData<(&'c Context, *const ())>);

impl Context {
    /// Makes this context current on the calling thread until the guard drops.
    pub fn make_current(&self) -> Result<Current<'_>, String> {
        // SAFETY: the context of a stream of the application's (`Stream::context`), alive while the stream
        // is: the application keeps it until `MPIX_Stream_free` detached it (docs/enqueue.md).
        check(unsafe { sys::cuCtxPushCurrent_v2(self.0) }, "cuCtxPushCurrent")?;
        Ok(Current(PhantomData))
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        let mut old = std::ptr::null_mut();
        // SAFETY: pops the context `make_current` made current on this thread (a guard is not `Send`);
        // the old context goes into a live local.
        unsafe { sys::cuCtxPopCurrent_v2(&mut old) };
    }
}

impl Stream {
    /// The application's stream `handle`.
    ///
    /// # Safety
    /// `handle` is a `CUstream` of this process (0: the legacy default stream), alive for as long as the
    /// result is used (the application keeps it until `MPIX_Stream_free`); after [`probe`] succeeded.
    pub unsafe fn from_handle(handle: u64) -> Stream {
        Stream(handle as usize as sys::CUstream)
    }

    pub fn handle(self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// The stream's context.
    pub fn context(self) -> Result<Context, Status> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver checks the handle (`from_handle`'s contract) and writes into a live local.
        let r = unsafe { sys::cuStreamGetCtx(self.0, &mut ctx) };
        if r == Status::CUDA_SUCCESS {
            Ok(Context(ctx))
        } else {
            Err(r)
        }
    }

    /// `cuStreamQuery` (its context current).
    pub fn query(self, _current: &Current) -> Status {
        // SAFETY: a query of the stream handle, which the driver checks (a destroyed stream's is refused).
        unsafe { sys::cuStreamQuery(self.0) }
    }

    /// `cuStreamIsCapturing` (its context current): whether work queued now would be recorded into a
    /// graph instead of run. Allowed on a capturing stream (a query or synchronisation is not).
    pub fn capture(self, _current: &Current) -> Result<Capture, Status> {
        let mut status: u32 = 0;
        // SAFETY: the driver checks the handle and writes a `CUstreamCaptureStatus` (a 32-bit enum) into
        // a live local, read back as the integer it is (an unknown value is not an enum of ours).
        let r = unsafe { sys::cuStreamIsCapturing(self.0, &mut status as *mut u32 as *mut sys::CUstreamCaptureStatus) };
        if r != Status::CUDA_SUCCESS {
            return Err(r);
        }
        Ok(match status {
            0 => Capture::None,
            1 => Capture::Active,
            _ => Capture::Invalidated,
        })
    }

    /// `cuStreamSynchronize` (its context current).
    pub fn synchronize(self, current: &Current) -> Result<(), String> {
        check(self.synchronize_status(current), "cuStreamSynchronize")
    }

    /// `cuStreamSynchronize` (its context current): the driver's answer.
    pub fn synchronize_status(self, _current: &Current) -> Status {
        // SAFETY: waits on the stream handle, which the driver checks.
        unsafe { sys::cuStreamSynchronize(self.0) }
    }

    /// Queues `f` on the stream: the driver calls it once, on its callback thread, when the stream gets
    /// there (its context current); a launch that fails drops it here. The driver's answer.
    pub fn launch_host_fn(self, _current: &Current, f: Box<dyn FnOnce() + Send>) -> Status {
        let arg = Box::into_raw(Box::new(f));
        // SAFETY: `host_fn` takes exactly this boxed closure back, once; the driver checks the stream.
        let r = unsafe { sys::cuLaunchHostFunc(self.0, Some(host_fn), arg as *mut c_void) };
        if r != Status::CUDA_SUCCESS {
            // SAFETY: not launched, so `host_fn` never runs: the box is still ours, and taken back once.
            drop(unsafe { Box::from_raw(arg) });
        }
        r
    }

    /// The stream writes `value` into `word` when it gets there (its context current).
    ///
    /// # Safety
    /// `word`'s block outlives every use the stream makes of it (it is never freed while the stream may
    /// still reach this write).
    pub unsafe fn write_value32(self, _current: &Current, word: DeviceWord, value: u32) -> Status {
        // SAFETY: a device address of a live pinned block (the caller's contract).
        unsafe {
            sys::cuStreamWriteValue32_v2(
                self.0,
                word.0,
                value,
                sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
            )
        }
    }

    /// The stream waits until `word` reaches `value` (cyclically, `>=`), when it gets there.
    ///
    /// # Safety
    /// As [`Stream::write_value32`].
    pub unsafe fn wait_value32(self, _current: &Current, word: DeviceWord, value: u32) -> Status {
        // SAFETY: a device address of a live pinned block (the caller's contract).
        unsafe {
            sys::cuStreamWaitValue32_v2(
                self.0,
                word.0,
                value,
                sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
            )
        }
    }

    /// The stream copies `bytes` from device address `dev` into `buf` at `offset` when it gets there.
    ///
    /// # Safety
    /// `buf` outlives the copy (it is neither freed nor reused before the stream passed it), and nothing
    /// reads those bytes before then; `dev` is the device memory the operation's buffer argument spans.
    pub unsafe fn copy_from_device(self, _current: &Current, buf: &PinnedBuf, dev: u64, bytes: usize) -> Status {
        assert!(bytes <= buf.cap, "a copy of {bytes} bytes into a pinned buffer of {}", buf.cap);
        // SAFETY: `bytes` fit the buffer (checked); the caller's contract covers the time and the source.
        unsafe { sys::cuMemcpyDtoHAsync_v2(buf.ptr as *mut c_void, dev, bytes, self.0) }
    }

    /// The stream copies `bytes` of `buf` to device address `dev` when it gets there.
    ///
    /// # Safety
    /// As [`Stream::copy_from_device`], `buf` read instead of written.
    pub unsafe fn copy_to_device(self, _current: &Current, dev: u64, buf: &PinnedBuf, bytes: usize) -> Status {
        assert!(bytes <= buf.cap, "a copy of {bytes} bytes from a pinned buffer of {}", buf.cap);
        // SAFETY: `bytes` within the buffer (checked); the caller's contract covers the time and the target.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dev, buf.ptr as *const c_void, bytes, self.0) }
    }
}

/// The callback of [`Stream::launch_host_fn`]: runs the boxed closure, once.
///
/// # Safety
/// `arg` is the `Box<Box<dyn FnOnce()>>` that `launch_host_fn` leaked for this one launch.
unsafe extern "C" fn host_fn(arg: *mut c_void) {
    crate::guard::guard_with("CUDA host function", (), || {
        // SAFETY: the driver calls a launched host function once, with its argument: the box is taken
        // back exactly once.
        let f = unsafe { Box::from_raw(arg as *mut Box<dyn FnOnce() + Send>) };
        f()
    })
}

/// The device address of one word of a [`PinnedWords`] block.
#[derive(Clone, Copy, Debug)]
pub struct DeviceWord(u64);

/// Pinned, device-mapped host memory of `len` 32-bit words, accessed as atomics on the host and by the
/// stream's memory operations on the device; freed (in its context) when dropped.
pub struct PinnedWords {
    ptr: *mut AtomicU32,
    len: usize,
    device: u64,
    ctx: Context,
}

// SAFETY: the driver's pinned memory, usable from any thread; its words are only accessed as atomics.
unsafe impl Send for PinnedWords {}
// SAFETY: as for `Send`: shared access is atomic.
unsafe impl Sync for PinnedWords {}

impl PinnedWords {
    /// `len` words, word `i` initialised to `init(i)`, in the current context `ctx`.
    pub fn alloc(
        ctx: Context,
        _current: &Current,
        len: usize,
        init: impl Fn(usize) -> u32,
    ) -> Result<PinnedWords, String> {
        let mut host: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: the driver writes the new allocation's address into a live local.
        check(unsafe { sys::cuMemHostAlloc(&mut host, len * 4, flags) }, "cuMemHostAlloc (flag words)")?;
        let ptr = host as *mut AtomicU32;
        for i in 0..len {
            // SAFETY: word `i` of the fresh allocation of `len` words (the driver aligns it for any type),
            // ours alone until this returns.
            unsafe { ptr.add(i).write(AtomicU32::new(init(i))) };
        }
        let mut words = PinnedWords { ptr, len, device: 0, ctx };
        // SAFETY: the block's device address into a live local (the block is device-mapped).
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut words.device, host, 0) };
        check(r, "cuMemHostGetDevicePointer")?;
        Ok(words)
    }

    /// The words, on the host.
    pub fn words(&self) -> &[AtomicU32] {
        // SAFETY: `len` initialised atomics (`alloc`), valid until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Word `i`'s device address.
    pub fn device_word(&self, i: usize) -> DeviceWord {
        assert!(i < self.len, "word {i} of a block of {}", self.len);
        DeviceWord(self.device + (i * 4) as u64)
    }
}

impl Drop for PinnedWords {
    fn drop(&mut self) {
        // The owner never drops a block the GPU may still use (finalize leaks it then).
        if let Ok(_current) = self.ctx.make_current() {
            // SAFETY: the allocation `alloc` made in this context, freed here once.
            unsafe { sys::cuMemFreeHost(self.ptr as *mut c_void) };
        }
    }
}

/// A pinned host buffer of `cap` bytes (a staging buffer); freed by [`PinnedBuf::free`] only, never on
/// drop (the stream may still copy from it: its owner knows when it cannot).
pub struct PinnedBuf {
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: the driver's pinned memory, usable from any thread; it is read and written only by MPI (as an
// operation's buffer) and the stream's copies, in the order the queue makes them.
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    /// `cap` bytes (the context current).
    pub fn alloc(_current: &Current, cap: usize) -> Result<PinnedBuf, String> {
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: the driver writes the new allocation's address into a live local.
        let r = unsafe { sys::cuMemHostAlloc(&mut host, cap, sys::CU_MEMHOSTALLOC_PORTABLE) };
        check(r, "cuMemHostAlloc (staging)")?;
        Ok(PinnedBuf { ptr: host as *mut u8, cap })
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Frees the buffer (the context it was allocated in current), once the stream uses it no more.
    pub fn free(self, _current: &Current) {
        // SAFETY: the allocation `alloc` made, consumed here: freed once.
        unsafe { sys::cuMemFreeHost(self.ptr as *mut c_void) };
    }
}

/// Pointer attribute `attr` of `addr`, for the attributes that are a 32-bit value (memory type,
/// managed); None where the driver does not know the address.
pub fn pointer_attribute(attr: sys::CUpointer_attribute, addr: u64) -> Option<u32> {
    probe().ok()?;
    let mut value: u32 = 0;
    // SAFETY: the driver writes the attribute, 32 bits for the attributes asked here, into a live local;
    // the address itself is only looked up.
    let r = unsafe { sys::cuPointerGetAttribute(&mut value as *mut u32 as *mut c_void, attr, addr) };
    (r == Status::CUDA_SUCCESS).then_some(value)
}

pub use sys::CUmemorytype as MemoryType;
pub use sys::CUpointer_attribute as PointerAttribute;

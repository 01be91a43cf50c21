//! UCX's worker calls as MPICH's ch4:ucx netmod makes them, and the route around its `MPI_Init` hang
//! between hosts (docs/native-defects.md, "More than one VCI over UCX's tcp between hosts").
//!
//! MPICH (4.1 … 5.0) creates one UCX worker per VCI at `MPI_Init`, exchanges their addresses, flushes
//! every worker and waits for the flushes with its global progress, which turns VCI 0's worker only. A
//! TCP endpoint's flush waits for its connection's handshake, which the peer answers only when its
//! worker of that VCI turns: with more than one VCI and ranks on two hosts, both sides wait forever.
//!
//! The route: `libmpi.so` calls `ucp_worker_create` and `ucp_worker_progress` through its PLT (checked
//! with `readelf -r` on PyPI's 4.1.3, 4.3.2 and 5.0.2: `R_X86_64_JUMP_SLOT` relocations), so the
//! library's definitions, first in the global scope, see them. While the init window is open (the
//! lean library opens it just before `PMPI_Init*` and closes it when that returns), every worker
//! created is recorded, and a progress call turns every recorded worker, so each VCI's handshake
//! completes. Closed, `ucp_worker_progress` is one relaxed load and a jump to UCX's.
//!
//! The exported symbols are made by [`ucx_interposers!`], instantiated by the lean library only (a
//! `#[no_mangle]` function of this crate would be exported by the tools library too).
use std::ffi::CStr;
use std::os::raw::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// `ucp_worker_h`, `ucp_context_h`: UCX's opaque handles, passed through unchanged.
pub type Handle = *mut c_void;

type CreateFn = unsafe extern "C" fn(Handle, *const c_void, *mut Handle) -> c_int;
type ProgressFn = unsafe extern "C" fn(Handle) -> c_uint;

/// At most this many workers are recorded per window (MPICH has at most 64 VCIs).
const MAX_WORKERS: usize = 128;
/// `UCS_OK`.
const UCS_OK: c_int = 0;

static OPEN: AtomicBool = AtomicBool::new(false);
/// Held while one thread turns the recorded workers: a second thread, or UCX calling
/// `ucp_worker_progress` from inside a progress call, turns its own worker only.
static TURNING: AtomicBool = AtomicBool::new(false);
static RECORDED: AtomicUsize = AtomicUsize::new(0);
static WORKERS: [AtomicPtr<c_void>; MAX_WORKERS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_WORKERS];
/// Progress calls that turned the other recorded workers too (the banner's figure).
static ROUTED_CALLS: AtomicUsize = AtomicUsize::new(0);
static NEXT_CREATE: AtomicUsize = AtomicUsize::new(0);
static NEXT_PROGRESS: AtomicUsize = AtomicUsize::new(0);
/// The progress call's fast path, one load: UCX's `ucp_worker_progress` while the window is closed,
/// 0 while it is open or before the first call resolved it (the slow path decides).
static PASS_THROUGH: AtomicUsize = AtomicUsize::new(0);

/// Opens the init window: forgets the workers of an earlier one (MPICH destroyed them at its
/// `MPI_Finalize`), then records every worker created and turns them all at each progress call.
pub fn open_init_window() {
    for w in &WORKERS {
        w.store(std::ptr::null_mut(), Ordering::Relaxed);
    }
    RECORDED.store(0, Ordering::Relaxed);
    ROUTED_CALLS.store(0, Ordering::Relaxed);
    OPEN.store(true, Ordering::Release);
    PASS_THROUGH.store(0, Ordering::Relaxed);
}

/// Closes the window: from now on a pure pass-through. Returns how many workers MPICH created in it
/// and how many progress calls turned them all.
pub fn close_init_window() -> (usize, usize) {
    OPEN.store(false, Ordering::Release);
    PASS_THROUGH.store(NEXT_PROGRESS.load(Ordering::Relaxed), Ordering::Relaxed);
    (RECORDED.load(Ordering::Acquire).min(MAX_WORKERS), ROUTED_CALLS.load(Ordering::Relaxed))
}

/// Whether the loaded MPI library's calls to `ucp_worker_progress` reach this library: our definition
/// is the global scope's, and the object defining `PMPI_Init` (at `mpi_code`) imports the function
/// rather than defining it. Err names what stands in the way; Ok(false): that library calls no UCX.
pub fn routable(mpi_code: usize) -> Result<bool, String> {
    let name = c"ucp_worker_progress";
    let ours = crate::dl::library_path_of(routable as fn(usize) -> Result<bool, String> as usize);
    let mpi = crate::dl::library_path_of(mpi_code).ok_or("the MPI library's file is unknown (dladdr)")?;
    let path = std::ffi::CString::new(mpi.as_str()).map_err(|_| format!("{mpi}: a path with a NUL"))?;
    let Some(mpi_lib) = crate::dl::loaded(&path) else {
        return Err(format!("{mpi} is not loaded under its own path"));
    };
    let in_mpi = mpi_lib.symbol(name) as usize;
    if in_mpi == 0 {
        return Ok(false);
    }
    if crate::dl::library_path_of(in_mpi).as_deref() == Some(mpi.as_str()) {
        return Err(format!("{mpi} defines ucp_worker_progress itself (UCX linked in statically)"));
    }
    let global = crate::dl::default_symbol(name) as usize;
    let first = crate::dl::library_path_of(global);
    if global == 0 || first != ours {
        return Err(format!(
            "ucp_worker_progress resolves to {} before this library (LD_PRELOAD order)",
            first.unwrap_or_else(|| "nothing".into())
        ));
    }
    Ok(true)
}

/// UCX's definition of `name`: the next one after this library in the global scope, else the loaded
/// `libucp.so.0`'s (MPICH loaded with `RTLD_LOCAL`, as Python does, keeps UCX out of the global
/// scope). Aborts where there is none: a call to forward means the caller links UCX.
#[cold]
#[inline(never)]
fn resolve(slot: &AtomicUsize, name: &CStr) -> usize {
    let mut addr = crate::dl::next_symbol(name) as usize;
    if addr == 0 {
        addr = crate::dl::loaded(c"libucp.so.0").map_or(0, |l| l.symbol(name) as usize);
    }
    if addr == 0 {
        crate::say!("mpixstream: no definition of {} follows this library", name.to_string_lossy());
        std::process::abort();
    }
    slot.store(addr, Ordering::Relaxed);
    addr
}

#[inline(always)]
fn next_progress() -> ProgressFn {
    let addr = match NEXT_PROGRESS.load(Ordering::Relaxed) {
        0 => resolve(&NEXT_PROGRESS, c"ucp_worker_progress"),
        addr => addr,
    };
    // SAFETY: a non-zero slot holds the address `dlsym` gave for `ucp_worker_progress`, whose C
    // prototype is `unsigned ucp_worker_progress(ucp_worker_h)`: this type.
    unsafe { std::mem::transmute::<usize, ProgressFn>(addr) }
}

/// `ucp_worker_create`: UCX's, and inside the init window the new worker recorded.
///
/// # Safety
/// The arguments are the C caller's, as `ucp_worker_create` takes them; they are passed on unchanged.
pub unsafe fn worker_create(context: Handle, params: *const c_void, worker: *mut Handle) -> c_int {
    let addr = match NEXT_CREATE.load(Ordering::Relaxed) {
        0 => resolve(&NEXT_CREATE, c"ucp_worker_create"),
        addr => addr,
    };
    // SAFETY: the address `dlsym` gave for `ucp_worker_create`, of C prototype
    // `ucs_status_t ucp_worker_create(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *)`
    // (`ucs_status_t` is a C enum: an int).
    let create = unsafe { std::mem::transmute::<usize, CreateFn>(addr) };
    // SAFETY: the caller's arguments, unchanged (this function's contract).
    let status = unsafe { create(context, params, worker) };
    if status == UCS_OK && !worker.is_null() && OPEN.load(Ordering::Acquire) {
        // SAFETY: on success UCX stored the new worker at `worker`, the caller's non-null out pointer.
        let created = unsafe { *worker };
        let k = RECORDED.fetch_add(1, Ordering::AcqRel);
        if k < MAX_WORKERS {
            WORKERS[k].store(created, Ordering::Release);
        }
    }
    status
}

/// `ucp_worker_progress`: UCX's; inside the init window, then every other recorded worker's too.
///
/// # Safety
/// `worker` is the C caller's argument to `ucp_worker_progress`, passed on unchanged.
#[inline(always)]
pub unsafe fn worker_progress(worker: Handle) -> c_uint {
    let addr = PASS_THROUGH.load(Ordering::Relaxed);
    if addr != 0 {
        // SAFETY: a non-zero PASS_THROUGH is UCX's `ucp_worker_progress` (as in `next_progress`); the
        // caller's worker, unchanged (this function's contract).
        return unsafe { std::mem::transmute::<usize, ProgressFn>(addr)(worker) };
    }
    // SAFETY: as above.
    crate::guard::guard_with("ucp_worker_progress", 0, || unsafe { progress_slow(worker) })
}

/// The window open, or the first call: turns every recorded worker while open, else resolves UCX's
/// definition for the fast path.
///
/// # Safety
/// As [`worker_progress`].
#[cold]
#[inline(never)]
unsafe fn progress_slow(worker: Handle) -> c_uint {
    if OPEN.load(Ordering::Acquire) {
        // SAFETY: this function's contract.
        return unsafe { progress_all(worker) };
    }
    let progress = next_progress();
    // Not stored where a window opened meanwhile. (A window opening between this check and the store
    // would be bypassed: that needs a thread's first UCX progress call to race MPI_Init's first one,
    // while MPI_Init is what creates MPICH's workers.)
    if !OPEN.load(Ordering::Acquire) {
        PASS_THROUGH.store(progress as usize, Ordering::Relaxed);
    }
    // SAFETY: the caller's worker, unchanged.
    unsafe { progress(worker) }
}

/// # Safety
/// As [`worker_progress`].
unsafe fn progress_all(worker: Handle) -> c_uint {
    let progress = next_progress();
    // SAFETY: the caller's worker, unchanged.
    let mut events = unsafe { progress(worker) };
    if TURNING.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return events;
    }
    ROUTED_CALLS.fetch_add(1, Ordering::Relaxed);
    let recorded = RECORDED.load(Ordering::Acquire).min(MAX_WORKERS);
    for slot in &WORKERS[..recorded] {
        let other = slot.load(Ordering::Acquire);
        if !other.is_null() && other != worker {
            // SAFETY: a worker MPICH created in this window and has not destroyed (it destroys them at
            // MPI_Finalize, and the window closes when MPI_Init returns); while MPI_Init runs only its
            // thread turns workers, and TURNING keeps a second turn of ours out.
            events = events.saturating_add(unsafe { progress(other) });
        }
    }
    TURNING.store(false, Ordering::Release);
    events
}

/// The exported `ucp_worker_create` and `ucp_worker_progress` of the library that instantiates it
/// (the lean library: `shim/src/interposed.rs`).
#[macro_export]
macro_rules! ucx_interposers {
    () => {
        /// UCX's `ucp_worker_create`, seen on its way (`mpixstream_wrappers::ucx`).
        ///
        /// # Safety
        /// A C entry point: the arguments are UCX's.
        #[no_mangle]
        pub unsafe extern "C" fn ucp_worker_create(
            context: $crate::ucx::Handle,
            params: *const ::std::os::raw::c_void,
            worker: *mut $crate::ucx::Handle,
        ) -> ::std::os::raw::c_int {
            // SAFETY: the C caller's arguments, unchanged.
            $crate::guard::guard_with("ucp_worker_create", -1, || unsafe {
                $crate::ucx::worker_create(context, params, worker)
            })
        }

        /// UCX's `ucp_worker_progress`, seen on its way (`mpixstream_wrappers::ucx`): the path taken
        /// after `MPI_Init` is a load and a call, which cannot panic; the open window's runs in the guard.
        ///
        /// # Safety
        /// A C entry point: the argument is UCX's.
        #[no_mangle]
        pub unsafe extern "C" fn ucp_worker_progress(worker: $crate::ucx::Handle) -> ::std::os::raw::c_uint {
            // SAFETY: the C caller's worker, unchanged.
            unsafe { $crate::ucx::worker_progress(worker) }
        }
    };
}

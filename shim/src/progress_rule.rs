//! MPI's progress rule on the explicit policy's native stream communicators.
//!
//! A blocking call on a native stream communicator (`MPI_Recv`, `MPI_Allreduce`, `MPI_Wait` on one of
//! its requests) makes MPICH progress only the stream's reserved VCI (`MPID_Wait` progresses the VCI of
//! the request's pool, and an explicit VCI skips global progress: ch4_wait.h, ch4_progress.h). Whatever
//! needs this process's progress on the implicit pool meanwhile starves: passive-target RMA from a
//! peer on a window of `MPI_COMM_WORLD` never completes while this process waits on a policy
//! communicator, though the program is correct (`tests/c/policy_rma_progress.c`). The application did
//! not ask for a stream: the policy made one, so the policy must keep MPI's progress guarantee.
//!
//! The fix runs in the thread that waits, and only there: each policy stream carries an MPICH "async
//! thing" (`MPIX_Async_start(poll, NULL, stream)`, MPICH >= 4.3) whose poll function MPICH calls from
//! the progress of that stream's VCI, that is from the thread driving the stream (the stream's owner,
//! in the stream model; nothing of ours drives a reserved VCI from another thread). Every
//! [`PERIOD`]-th such turn the poll turns the implicit pool's progress once (`MPIX_Stream_progress(
//! MPIX_STREAM_NULL)`: the implicit VCIs are locked, so any thread may drive them), unless another
//! thread is turning it right now. Calls on communicators without a stream are untouched; a stream's
//! progress turn gains MPICH's hook call (one mutex per turn under `MPI_THREAD_MULTIPLE`) and a counter.
//!
//! MPICH 4.1 and 4.2 have no `MPIX_Async_start`. On 4.2 a thread of ours turns the implicit pool instead
//! (the *pool thread*, started with the first policy stream): one turn per [`IDLE_PERIOD`], and turn
//! after turn while the policy runs nonblocking collectives on the implicit pool
//! ([`collective_on_pool`]; `wrapped_collectives::schedule_comm`). It drives only the implicit pool
//! (`MPIX_Stream_progress(MPIX_STREAM_NULL)`: `MPID_Progress_test(NULL)` over the implicit VCIs, which
//! MPICH locks), never a reserved VCI. It needs `MPI_THREAD_MULTIPLE`, and MPICH 4.2: below that level,
//! and on 4.1 (which fails beside it), the policy gives no communicator a stream ([`streams_served`]).
//!
//! MPICH's `MPI_Finalize` waits for every async thing to finish but polls only the implicit pool's, so
//! [`finalize`] makes ours finish before it, and stops the pool thread.
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi;
use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Stream progress turns between two turns of the implicit pool (MPICH's own global-progress period).
const PERIOD: u32 = 256;

/// The native streams that carry our async thing.
static WATCHED: Mutex<Vec<MPIX_Stream>> = Mutex::new(Vec::new());
/// Set at `MPI_Finalize`: the poll functions finish.
static FINISHING: AtomicBool = AtomicBool::new(false);
/// A thread is turning the implicit pool from a poll function now (others skip their turn).
static TURNING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static TURNS: Cell<u32> = const { Cell::new(0) };
}

/// The pool thread's pause between two turns while no collective of the policy is on the implicit pool
/// (MPICH 4.2): what a peer's passive-target RMA waits at most per step that needs this process.
const IDLE_PERIOD: Duration = Duration::from_millis(1);

/// The pool thread (MPICH 4.2), once started.
static POOL_THREAD: Mutex<Option<BackgroundThread>> = Mutex::new(None);
/// Whether the pool thread runs (read by `implicit_pool_served` and `collective_on_pool` without the lock).
static POOL_THREAD_RUNS: AtomicBool = AtomicBool::new(false);
/// The pool thread's handle, for waking it without the lock of `POOL_THREAD` (a nonblocking collective's
/// path).
static POOL_THREAD_WAKE: OnceLock<std::thread::Thread> = OnceLock::new();
/// The policy's collectives on the implicit pool not yet complete: while not 0 the pool thread turns
/// without pausing.
static ON_POOL: AtomicUsize = AtomicUsize::new(0);

/// Gives a new native policy stream its async thing (nothing where MPICH has no `MPIX_Async_start`).
/// Never for `MPIX_STREAM_NULL`: MPICH would poll that one from every progress call of every thread,
/// the implicit pool's included, and our turn of the implicit pool would re-enter it.
pub fn watch(native: MPIX_Stream) {
    if native == MPIX_STREAM_NULL {
        return;
    }
    let Some(start) = pmpi::pmpi().PMPIX_Async_start else {
        start_pool_thread();
        return;
    };
    if unsafe { start(Some(poll), std::ptr::null_mut(), native) } == MPI_SUCCESS {
        WATCHED.lock().unwrap_or_else(|e| e.into_inner()).push(native);
    }
}

/// Whether something turns the implicit pool while a thread blocks on its policy stream (the stream's
/// async thing, MPICH >= 4.3; the pool thread, MPICH 4.2): then what the policy runs on the
/// implicit pool for a thread still progresses for its peers (`wrapped_collectives::schedule_comm`).
pub fn implicit_pool_served() -> bool {
    pmpi::pmpi().PMPIX_Async_start.is_some() || POOL_THREAD_RUNS.load(Ordering::Acquire)
}

/// Whether the policy can keep MPI's progress rule for a stream of this MPICH: with `MPIX_Async_start`
/// (MPICH >= 4.3), or with a pool thread, which calls MPI beside the application's threads and so needs
/// `MPI_THREAD_MULTIPLE`, on MPICH 4.2 only. Where it cannot, the policy leaves every communicator
/// implicit (`policy::take_stream`): a stream's blocking call would starve the implicit pool
/// (`tests/c/policy_rma_progress.c` hung there), and below `MPI_THREAD_MULTIPLE` a stream buys no
/// concurrency anyway.
pub fn streams_served(rt: &crate::runtime::Runtime) -> bool {
    pmpi::pmpi().PMPIX_Async_start.is_some() || (rt.thread_multiple() && pool_thread_allowed(rt))
}

/// MPICH 4.1.3 fails beside the pool thread, though the thread drives only the implicit VCIs, which
/// MPICH locks: persistent point-to-point requests on a stream communicator delivered the next round's
/// message (`policy_persistent`, 4 ranks, 2 runs of 2), and windows of stream communicators
/// deadlocked, the pool thread waiting for an MPICH mutex in `MPIX_Stream_progress`
/// (`policy_windows_files`, 4 ranks, 3 of 3); neither happened without it. Not seen on 4.2.3.
fn pool_thread_allowed(rt: &crate::runtime::Runtime) -> bool {
    rt.mpich_version.is_some_and(|v| (v.0, v.1) >= (4, 2))
}

/// What the banner says after `policy explicit` about MPI's progress rule: nothing where this MPICH has
/// `MPIX_Async_start` (or the policy gives no native streams at all), else the pool thread, or why
/// every communicator stays implicit.
pub fn banner_note(rt: &crate::runtime::Runtime) -> Option<&'static str> {
    if rt.backend != crate::backend::Backend::Native || pmpi::pmpi().PMPIX_Async_start.is_some() {
        None
    } else if streams_served(rt) {
        Some("no MPIX_Async_start in this MPICH: a thread of ours turns the implicit pool")
    } else if !pool_thread_allowed(rt) {
        Some("MPICH 4.1 has no MPIX_Async_start, and a thread of ours beside the application's breaks it: every communicator stays implicit")
    } else {
        Some("no MPIX_Async_start in this MPICH and not MPI_THREAD_MULTIPLE: every communicator stays implicit; MPIXSTREAM_THREAD_MULTIPLE=1 gives them streams")
    }
}

/// A nonblocking collective of the policy now runs on the implicit pool: where the pool thread runs, it
/// turns without pausing until [`collective_done`]; returns whether it counted (then call that once,
/// when the collective completes or is freed). Persistent collectives are not counted: the pool
/// thread's idle turns serve them.
pub fn collective_on_pool() -> bool {
    if !POOL_THREAD_RUNS.load(Ordering::Acquire) {
        return false;
    }
    if ON_POOL.fetch_add(1, Ordering::AcqRel) == 0 {
        if let Some(t) = POOL_THREAD_WAKE.get() {
            t.unpark();
        }
    }
    true
}

/// One collective that [`collective_on_pool`] counted completed or was freed.
pub fn collective_done() {
    ON_POOL.fetch_sub(1, Ordering::AcqRel);
}

/// Starts the pool thread once, where MPI allows a thread of ours to call it (`MPI_THREAD_MULTIPLE`;
/// below it no policy stream exists, `streams_served`). Should the thread not start, nothing turns the
/// implicit pool for a blocked thread, and `implicit_pool_served` keeps the collectives on the streams.
fn start_pool_thread() {
    let mut slot = POOL_THREAD.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() || !crate::runtime::active().is_some_and(|rt| rt.thread_multiple()) {
        return;
    }
    let Some(progress) = pmpi::pmpi().PMPIX_Stream_progress else { return };
    let spawned = BackgroundThread::spawn("mpixstream-pool", move |_| {
        unsafe { progress(MPIX_STREAM_NULL) };
        if ON_POOL.load(Ordering::Acquire) == 0 {
            std::thread::park_timeout(IDLE_PERIOD);
        } else {
            // Leave the core to the application's threads between turns (2-core machines).
            std::thread::yield_now();
        }
        Turn::Again
    });
    match spawned {
        Ok(t) => {
            if let Some(handle) = t.thread() {
                let _ = POOL_THREAD_WAKE.set(handle.clone());
            }
            *slot = Some(t);
            POOL_THREAD_RUNS.store(true, Ordering::Release);
        }
        Err(e) => eprintln!("mpixstream: explicit policy: no thread to progress the implicit pool ({e})"),
    }
}

unsafe extern "C" fn poll(_thing: MPIX_Async_thing) -> c_int {
    if FINISHING.load(Ordering::Relaxed) {
        return MPIX_ASYNC_DONE;
    }
    let due = TURNS
        .try_with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n % PERIOD == 0
        })
        .unwrap_or(false);
    if due && !TURNING.swap(true, Ordering::Acquire) {
        if let Some(progress) = pmpi::pmpi().PMPIX_Stream_progress {
            progress(MPIX_STREAM_NULL);
        }
        TURNING.store(false, Ordering::Release);
    }
    // Never "made progress": MPICH then goes on to progress the stream's VCI itself.
    MPIX_ASYNC_NOPROGRESS
}

/// Before `PMPI_Finalize` (no thread of ours drives a stream any more): one turn of each watched
/// stream's progress, in which its poll function finishes.
pub fn finalize() {
    let pool_thread = POOL_THREAD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(t) = pool_thread {
        // Stops within one IDLE_PERIOD.
        t.stop();
        POOL_THREAD_RUNS.store(false, Ordering::Release);
    }
    FINISHING.store(true, Ordering::Relaxed);
    let watched = std::mem::take(&mut *WATCHED.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(progress) = pmpi::pmpi().PMPIX_Stream_progress {
        for native in watched {
            unsafe { progress(native) };
        }
    }
}

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
//! thing" (`MPIX_Async_start(poll, slot, stream)`, MPICH >= 4.3) whose poll function MPICH calls from
//! the progress of that stream's VCI, that is from the thread driving the stream (the stream's owner,
//! in the stream model; nothing of ours drives a reserved VCI from another thread). Every
//! [`PERIOD`]-th such turn the poll turns the implicit pool's progress once (`MPIX_Stream_progress(
//! MPIX_STREAM_NULL)`: the implicit VCIs are locked, so any thread may drive them), unless another
//! thread is turning it right now. Calls on communicators without a stream are untouched; a stream's
//! progress turn gains MPICH's hook call (one mutex per turn under `MPI_THREAD_MULTIPLE`) and a counter.
//!
//! The same poll tests the driving thread's routed buffered messages while it has some
//! (`native_fixes::buffered`), so that a blocking call on a policy communicator keeps delivering them.
//!
//! MPICH 4.1 and 4.2 have no `MPIX_Async_start`, and nothing else can turn the implicit pool from the
//! waiting thread: there the policy gives no communicator a stream ([`streams_served`]). (A thread of
//! ours turning the implicit pool is no way out: MPICH's progress of the implicit pool also walks its
//! one global list of collective schedules, and so posts the rounds of collectives still on a stream,
//! an application's stream communicator's or an enqueued one, onto that stream's unlocked reserved
//! VCI from the wrong thread.)
//!
//! MPICH's `MPI_Finalize` waits for every async thing to finish but polls only the implicit pool's, so
//! [`finalize`] makes ours finish before it.
use crate::native_fixes::buffered;
use crate::native_fixes::native_streams::THREAD_BOUND;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi;
use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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

/// Gives a new native policy stream its async thing (nothing where MPICH has no `MPIX_Async_start`);
/// returns whether it has one whose poll tests the driving thread's buffered messages
/// (`StreamSlot::progress_rule_thing`). Never for `MPIX_STREAM_NULL`: MPICH would poll that one from every
/// progress call of every thread, the implicit pool's included, and our turn of the implicit pool would
/// re-enter it (with MPICH's async-thing mutex of the implicit pool held: it is not recursive).
/// `slot`: the stream's index in the stream table, the thing's state (its poll needs to know which
/// stream it runs in).
pub fn watch(native: MPIX_Stream, slot: usize) -> bool {
    if native == MPIX_STREAM_NULL {
        return false;
    }
    let Some(start) = pmpi::pmpi().PMPIX_Async_start else { return false };
    if unsafe { start(Some(poll), slot as *mut std::ffi::c_void, native) } != MPI_SUCCESS {
        return false;
    }
    WATCHED.lock().unwrap_or_else(|e| e.into_inner()).push(native);
    // The poll tests the driving thread's buffered messages only where it can tell its stream.
    thing_state().is_some()
}

/// Whether something turns the implicit pool while a thread blocks on its policy stream (the stream's
/// async thing, MPICH >= 4.3): then what the policy runs on the implicit pool for a thread still
/// progresses for its peers (`wrapped_collectives::schedule_comm`).
pub fn implicit_pool_served() -> bool {
    pmpi::pmpi().PMPIX_Async_start.is_some()
}

/// Whether the policy can keep MPI's progress rule for a stream of this MPICH (`MPIX_Async_start`,
/// MPICH >= 4.3). Where it cannot, the policy leaves every communicator implicit
/// (`policy::take_stream`): a stream's blocking call would starve the implicit pool
/// (`tests/c/policy_rma_progress.c` hung there).
pub fn streams_served() -> bool {
    implicit_pool_served()
}

/// What the banner says after `policy explicit` about MPI's progress rule: nothing where this MPICH has
/// `MPIX_Async_start` (or the policy gives no native streams at all), else why every communicator
/// stays implicit.
pub fn banner_note(rt: &crate::runtime::Runtime) -> Option<&'static str> {
    if rt.backend != crate::backend::Backend::Native || streams_served() {
        None
    } else {
        Some("no MPIX_Async_start in this MPICH (4.1, 4.2), so nothing could keep MPI's progress rule for a stream: every communicator stays implicit")
    }
}

/// MPICH's `void *MPIX_Async_get_state(MPIX_Async_thing)` (MPICH >= 4.3, with `MPIX_Async_start`):
/// resolved by hand (`pmpi::lookup`), as the prototype list holds only functions returning `int`.
type GetState = unsafe extern "C" fn(MPIX_Async_thing) -> *mut std::ffi::c_void;

fn thing_state() -> Option<GetState> {
    static GET_STATE: std::sync::OnceLock<Option<GetState>> = std::sync::OnceLock::new();
    *GET_STATE.get_or_init(|| {
        // Where the PMPI table's entries come from: a program that loads MPICH with RTLD_LOCAL (a Python
        // extension module: mpi4py) hides it from RTLD_DEFAULT.
        let f = pmpi::lookup(c"PMPIX_Async_get_state");
        // SAFETY: MPICH's symbol of that name has this type (mpi.h of 4.3 and 5.0).
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut std::ffi::c_void, GetState>(f) })
    })
}

unsafe extern "C" fn poll(thing: MPIX_Async_thing) -> c_int {
    if FINISHING.load(Ordering::Relaxed) {
        return MPIX_ASYNC_DONE;
    }
    // The driving thread's routed buffered messages (on its streams: it owns them) are tested on every
    // turn while it has some, so that a blocking call on a policy communicator keeps delivering them
    // (`buffered::before_blocking`); those on this stream only observed (`progress_own_from`). A test
    // from here re-enters this poll through another stream's progress; the lane's own guard makes that
    // a no-op.
    if THREAD_BOUND.load(Ordering::Relaxed) != 0 {
        if let Some(get_state) = thing_state() {
            buffered::progress_own_from(get_state(thing) as usize);
        }
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
    FINISHING.store(true, Ordering::Relaxed);
    let watched = std::mem::take(&mut *WATCHED.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(progress) = pmpi::pmpi().PMPIX_Stream_progress {
        for native in watched {
            unsafe { progress(native) };
        }
    }
}

//! The multiplex progress thread.
//!
//! MPI's progress rule: a posted receive is matched while its process is in *any* MPI call. Engine
//! receives are matched by turns of their engine, which only calls on their index run (blocking
//! receives, `MPI_Wait*`/`MPI_Test*` on their requests). A process that posts one and then waits in
//! something else (a barrier, its own send to itself, a large send that needs the peer to take a
//! rendezvous message) would wait forever. With `MPI_THREAD_MULTIPLE` this thread runs a turn of every
//! engine that has receives pending and that no one has turned for one period, but **only engines on
//! MPICH's implicit (locked) pool**: an engine that receives on a stream's reserved VCI belongs to
//! that stream's thread (MPICH takes no lock there), so its receives progress only in calls on its
//! index (`docs/multiplex.md`, "Progress"). While a receive of a communicator is pending, the thread
//! also takes the messages of its engines that have nothing posted into their unexpected queues
//! (`MatchingEngine::gather`), so that they do not stall the netmod's connections. Stopped at
//! `MPI_Finalize`.
use super::matching::lock;
use super::registry;
use crate::runtime::Runtime;
use crate::thread::{BackgroundThread, Turn};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

const PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// The multiplex progress thread, while it runs.
static THREAD: Mutex<Option<BackgroundThread>> = Mutex::new(None);

/// Starts the thread if the process runs `MPI_THREAD_MULTIPLE` and it is not running yet (called for
/// each new multiplex communicator with an index on the implicit pool).
pub fn ensure_started(rt: &Runtime) {
    if !rt.thread_multiple() {
        return;
    }
    let mut guard = lock(&THREAD);
    if guard.is_some() {
        return;
    }
    let spawned = BackgroundThread::spawn("mpixstream-multiplex", |_| {
        std::thread::sleep(PERIOD);
        for mx in registry::live() {
            if mx.released.load(Ordering::Acquire) || mx.pending.load(Ordering::Acquire) == 0 {
                continue;
            }
            for e in mx.engines.iter().filter(|e| !e.on_reserved_vci) {
                let turns = e.turns.load(Ordering::Relaxed);
                if e.watched.swap(turns, Ordering::Relaxed) != turns {
                    continue; // someone turned it since our last look
                }
                if let Ok(mut st) = e.state.try_lock() {
                    if !st.posted.is_empty() || !st.inflight.is_empty() {
                        e.drive(&mx, &mut st, None);
                        e.watched.store(e.turns.load(Ordering::Relaxed), Ordering::Relaxed);
                    } else {
                        // Another receive of the communicator is pending: this index's messages must
                        // not stall it in the netmod (`MatchingEngine::gather`).
                        e.gather(&mx, &mut st);
                    }
                }
            }
            mx.maybe_release();
        }
        // What calls MPI for a destroyed communicator (its release above, among others), here where a
        // thread of ours is in control (`crate::deferred`).
        if crate::deferred::pending() {
            if let Some(rt) = crate::runtime::active() {
                crate::deferred::run(rt);
            }
        }
        Turn::Again
    });
    if let Ok(t) = spawned {
        *guard = Some(t);
    }
}

/// Stops the thread (before `PMPI_Finalize`).
pub fn stop() {
    if let Some(t) = lock(&THREAD).take() {
        t.stop();
    }
}

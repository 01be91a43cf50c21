//! The stop handshake (`shim/src/ownership/stop_gate.rs`, the very file the library runs) checked with
//! loom over every interleaving of a worker and its stopper. CUDA is outside the model; what the model
//! assumes of it: the section (a CUDA queue watchdog's health call) touches the stream, and the stopper's
//! caller destroys the stream once `stop` returned, here a flag the section asserts is not set.
//!
//! `cargo test` runs it.
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The primitives the gate is written against, loom's here.
#[allow(unused_imports)]
mod sync {
    pub use loom::sync::atomic::{fence, AtomicBool, Ordering};
}

#[allow(dead_code)]
#[path = "../src/ownership/stop_gate.rs"]
mod stop_gate;

use stop_gate::StopGate;

/// The worker's loop (two sections at most, as the watchdog's turns) against a stopper that closes the
/// gate, waits while the worker is inside, then "destroys the stream": no section may touch it after.
fn worker_and_stopper(wait_for_busy: bool) {
    loom::model(move || {
        let gate = Arc::new(StopGate::new());
        let destroyed = Arc::new(AtomicBool::new(false));
        let (g, d) = (gate.clone(), destroyed.clone());
        let worker = thread::spawn(move || {
            for _ in 0..2 {
                if g.is_closed() || !g.enter() {
                    return;
                }
                assert!(!d.load(Ordering::SeqCst), "a section ran after the stream was destroyed");
                thread::yield_now();
                assert!(!d.load(Ordering::SeqCst), "a section ran after the stream was destroyed");
                g.leave();
            }
        });
        gate.close();
        if wait_for_busy {
            while gate.busy() {
                thread::yield_now();
            }
        }
        destroyed.store(true, Ordering::SeqCst);
        worker.join().unwrap();
    });
}

#[test]
fn no_section_runs_after_stop_returns() {
    worker_and_stopper(true);
}

/// The negative control: a stopper that does not wait for the section lets it meet the destroyed
/// stream in some interleaving (the model fails).
#[test]
fn without_the_wait_a_section_meets_the_destroyed_stream() {
    let failed = std::panic::catch_unwind(|| worker_and_stopper(false));
    assert!(failed.is_err(), "a section after the stream's destruction must fail the model");
}

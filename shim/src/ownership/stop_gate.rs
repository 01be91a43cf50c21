//! The stop handshake of a thread of ours whose work may touch what its stopper frees next: a CUDA
//! queue's watchdog asks the stream's health (`cuStreamIsCapturing`, `cuStreamQuery`) while
//! `CudaDriverThread::stop` lets the program go on to destroy that stream and its context. A health
//! call still running then touched a destroyed context: the CUDA stand-in's protected memory, a
//! SIGSEGV after ` No Errors` in one CI run (`tests/scripts/enqueue_cuda_standin.sh`, 2026-12-05).
//!
//! The worker enters the guarded section only while the gate is open ([`StopGate::enter`]), and the
//! stopper, once it closed the gate ([`StopGate::close`]), waits while [`StopGate::busy`]: both sides
//! store their own flag before reading the other's, all sequentially consistent, so either the worker
//! sees the gate closed and stays out, or the stopper sees it inside and waits for it to leave (a
//! sequentially consistent fence between each side's store and its load: without one, each store may
//! still sit in its core's store buffer when the other side loads, which loom finds).
//! `shim/tests/stop_gate_model.rs` checks that over every interleaving with loom. The stopper's wait is
//! bounded by its caller (a worker blocked inside a CUDA call must not block the program).
use super::sync::{fence, AtomicBool, Ordering};

pub struct StopGate {
    closed: AtomicBool,
    inside: AtomicBool,
}

impl Default for StopGate {
    fn default() -> Self {
        StopGate::new()
    }
}

impl StopGate {
    pub fn new() -> StopGate {
        StopGate { closed: AtomicBool::new(false), inside: AtomicBool::new(false) }
    }

    /// The worker: true if it may run its section (then [`StopGate::leave`] after it), false once the
    /// gate is closed.
    pub fn enter(&self) -> bool {
        self.inside.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.inside.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The worker, after its section.
    pub fn leave(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }

    /// The stopper: no section starts after this returns.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Whether the gate is closed (the worker's loop condition).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The stopper, after [`StopGate::close`]: whether a section that started before is still running.
    pub fn busy(&self) -> bool {
        self.inside.load(Ordering::SeqCst)
    }
}

//! The ownership protocol (docs/architecture.md, "Ownership and the progress helper") as one small
//! state machine with no MPI in it: [`protocol`]. The library uses it (the stream slots' claims, the
//! orphans and what they hold, the attached buffer's space, the deferred destruction), and
//! `shim/tests/ownership_model.rs` compiles the same file against `loom`'s atomics and checks it over
//! every interleaving of two and three threads (in `cargo test`).
//!
//! [`stop_gate`] is the stop handshake of a worker thread whose section may touch what its stopper frees
//! next, checked the same way (`shim/tests/stop_gate_model.rs`).
//!
//! [`sync`] is what the protocol is written against: the standard library's primitives here, loom's
//! in the model check.
pub mod protocol;
pub mod stop_gate;

/// The primitives [`protocol`] uses (loom's in the model check).
pub mod sync {
    pub use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};
    pub use std::sync::Mutex;
    pub use std::thread::yield_now;
    /// Spins of a waiting claim before it yields (the model check yields at once).
    pub const SPINS: u32 = 64;
}

pub use protocol::*;

//! mpixstream: the MPIX Stream API and explicit endpoint control, preloaded in front of an unmodified
//! MPICH. See the README for the user's view and `../shared/DESIGN.md` for what each MPICH allows.
//!
//! The library is inert until the application calls `MPI_Init*` (no constructor does work), so it can
//! be preloaded into `mpiexec`, shells and non-MPI programs without effect.
#![allow(clippy::missing_safety_doc)]

pub mod backend;
pub mod comms;
pub mod config;
pub mod enqueue;
pub mod errors;
pub mod hex;
pub mod hooks;
pub mod info;
pub mod mpix;
pub mod multiplex;
pub mod native_fixes;
pub mod policy;
pub mod progress;
pub mod query;
pub mod runtime;
pub mod streams;

use mpixstream_wrappers::ffi::MPI_ERR_INTERN;
use std::os::raw::c_int;

mpixstream_wrappers::interposers!(crate::hooks, crate::native_fixes);

/// Runs an MPIX entry point: `ffi_guard`, and the runtime for the body, or, for a call outside
/// `MPI_Init`..`MPI_Finalize`, the error it must return.
pub(crate) fn mpix_entry(name: &'static str, body: impl FnOnce(&'static runtime::Runtime) -> c_int) -> c_int {
    ffi_guard(name, || match runtime::require(name) {
        Ok(rt) => body(rt),
        Err(code) => code,
    })
}

/// Runs the body of a C entry point; a Rust panic never crosses the C boundary: it is reported and
/// turned into `MPI_ERR_INTERN`.
pub fn ffi_guard(func: &str, body: impl FnOnce() -> c_int) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(rc) => rc,
        Err(cause) => {
            let what = cause
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| cause.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            eprintln!("mpixstream: internal error in {func}: {what}");
            MPI_ERR_INTERN
        }
    }
}

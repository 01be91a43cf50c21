//! libmpixstream_tools.so: what the lean library must not carry (DESIGN.md §3), preloaded after
//! libmpixstream.so only when asked for (`scripts/mpixrun` adds it when `MPIXSTREAM_REPORT` or
//! `MPIXSTREAM_CHECK` is set):
//! - traffic counters per communicator and per stream/endpoint (messages and bytes, sent and received),
//!   and a report at `MPI_Finalize` (a table on rank 0's stderr and a JSON file, `docs/report.schema.json`);
//! - the one-thread-per-communicator check of the explicit policy (`MPIXSTREAM_CHECK`).
//!
//! The communication interposers come from the one table in `mpixstream_wrappers::tools`; what they do is
//! in [`hooks`]. The stream mapping (which communicator carries which stream, on which VCI) is asked of
//! the lean library through its small C query API (`shim/src/query.rs`), never duplicated here.
#![allow(clippy::missing_safety_doc)]

pub mod check;
pub mod hooks;
pub mod json;
pub mod report;
pub mod shim;
pub mod state;

mpixstream_wrappers::comm_call_interposers!(crate::hooks);

/// Called by the lean library at the end of `MPI_Init*`.
#[no_mangle]
pub extern "C" fn mpixstream_tools_init() {
    let r = std::panic::catch_unwind(|| unsafe { state::init() });
    if r.is_err() {
        eprintln!("mpixstream-tools: internal error at MPI_Init; counters and checks are off");
    }
}

/// Called by the lean library at the start of `MPI_Finalize`, while MPI is still fully up.
#[no_mangle]
pub extern "C" fn mpixstream_tools_finalize() {
    let r = std::panic::catch_unwind(|| unsafe { state::finalize() });
    if r.is_err() {
        eprintln!("mpixstream-tools: internal error while writing the report");
    }
}

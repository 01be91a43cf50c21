//! What the lean library tells the companion library `libmpixstream_tools.so`, when it is preloaded:
//! that MPI is up, that it is about to go down, which request the application holds in place of one
//! of ours, which call found its endpoint owned by another thread, and which communicators its
//! constructors made. The entry points are looked up once at `MPI_Init*` (they exist only when the
//! tools library is preloaded, i.e. when a report or the check is asked for). What the tools library
//! asks us is `query`.
//!
//! Each hook is called through a function pointer of the prototype the tools library defines under its
//! symbol (`mpixstream_wrappers::tools`, shared by both libraries, so the two sides cannot differ).
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::tools::ToolsEntries;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Set once, at `MPI_Init*` ([`tools_init`]); read without a lock by every hook call.
static HOOKS: OnceLock<ToolsEntries> = OnceLock::new();
/// The finalize hook runs once ([`tools_finalize`]).
static FINALIZED: AtomicBool = AtomicBool::new(false);

/// At the end of our `MPI_Init*`: starts the tools library if it is preloaded.
pub fn tools_init() {
    let hooks = ToolsEntries::lookup();
    let init = hooks.init;
    let _ = HOOKS.set(hooks);
    if let Some(f) = init {
        f();
    }
}

/// We hand the application `outer` in place of `inner` (a wrapped nonblocking collective, whose inner
/// request the poll completes with `PMPI_Test`, unseen by the tools library): the tools library tracks
/// `outer` instead, so that the application's wait on it is checked and counted on the right
/// communicator, and no entry for `inner` outlives it (MPICH reuses request handles). `outer`
/// `MPI_REQUEST_NULL`: nobody waits for `inner` (a routed buffered send, completed by the progress
/// helper): the tools library forgets it.
pub fn tools_request_replaced(inner: MPI_Request, outer: MPI_Request) {
    if let Some(f) = HOOKS.get().and_then(|h| h.request_replaced) {
        f(inner, outer);
    }
}

/// A call `call` on `comm` found the communicator's endpoint owned by another thread: the tools
/// library's check (if loaded) reports a violation where that thread is the application's, inside a
/// call on the same stream (before this thread would wait for the endpoint and never reach the check).
#[cold]
pub fn tools_contended(comm: MPI_Comm, call: &'static std::ffi::CStr) {
    if let Some(f) = HOOKS.get().and_then(|h| h.contended) {
        f(comm, call.as_ptr());
    }
}

/// A constructor we interpose made `newcomm` (`MPI_COMM_NULL` on a process that got none) from
/// `parent`: the tools library counts it as MPICH's round robin over its implicit VCIs does.
pub fn tools_comm_created(kind: CommCtor, parent: MPI_Comm, newcomm: MPI_Comm) {
    if let Some(f) = HOOKS.get().and_then(|h| h.comm_created) {
        let code = CommCtor::ALL.iter().position(|&k| k == kind).unwrap_or(usize::MAX) as c_int;
        f(code, parent, newcomm);
    }
}

/// The calling thread is one of ours (`thread::BackgroundThread`): the tools library leaves its calls out
/// of the program's (its profile counts the program's threads). Before `MPI_Init*` ends nothing is
/// loaded yet, and none of our threads runs then.
pub fn tools_library_thread() {
    if let Some(f) = HOOKS.get().and_then(|h| h.library_thread) {
        f();
    }
}

/// At the start of our `MPI_Finalize`, while MPI and our state are still up: the tools library's
/// report (a collective over `MPI_COMM_WORLD`), once.
pub fn tools_finalize() {
    if let Some(f) = HOOKS.get().and_then(|h| h.finalize) {
        if !FINALIZED.swap(true, Ordering::AcqRel) {
            f();
        }
    }
}

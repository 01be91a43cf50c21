//! What the lean library tells the companion library `libmpixstream_tools.so`, when it is preloaded:
//! that MPI is up, that it is about to go down, which request the application holds in place of one
//! of ours, which call found its endpoint owned by another thread, and which communicators its
//! constructors made. The entry points are looked up once at `MPI_Init*` (they exist only when the
//! tools library is preloaded, i.e. when a report or the check is asked for). What the tools library
//! asks us is `query`.
//!
//! Each hook is called through a function pointer of the prototype the tools library defines under its
//! symbol (`mpixstream_wrappers::tools`, shared by both libraries, so the two sides cannot differ).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::tools::{
    COMM_CREATED_SYMBOL, CONTENDED_SYMBOL, FINALIZE_SYMBOL, INIT_SYMBOL, REQUEST_REPLACED_SYMBOL,
};
use std::sync::atomic::{AtomicUsize, Ordering};

static FINALIZE_HOOK: AtomicUsize = AtomicUsize::new(0);
static REQUEST_REPLACED_HOOK: AtomicUsize = AtomicUsize::new(0);
static CONTENDED_HOOK: AtomicUsize = AtomicUsize::new(0);
static COMM_CREATED_HOOK: AtomicUsize = AtomicUsize::new(0);

/// The address of `name` in the global scope (0: not loaded).
fn symbol(name: &std::ffi::CStr) -> usize {
    // SAFETY: `dlsym` with the default scope and a NUL-terminated name only looks the name up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// At the end of our `MPI_Init*`: starts the tools library if it is preloaded.
pub fn tools_init() {
    let init = symbol(INIT_SYMBOL);
    FINALIZE_HOOK.store(symbol(FINALIZE_SYMBOL), Ordering::Release);
    REQUEST_REPLACED_HOOK.store(symbol(REQUEST_REPLACED_SYMBOL), Ordering::Release);
    CONTENDED_HOOK.store(symbol(CONTENDED_SYMBOL), Ordering::Release);
    COMM_CREATED_HOOK.store(symbol(COMM_CREATED_SYMBOL), Ordering::Release);
    if init != 0 {
        // SAFETY: a non-zero address of `INIT_SYMBOL`, which the tools library defines with this
        // prototype (module comment).
        let f: extern "C" fn() = unsafe { std::mem::transmute(init) };
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
    let hook = REQUEST_REPLACED_HOOK.load(Ordering::Acquire);
    if hook != 0 {
        // SAFETY: the non-zero address of `REQUEST_REPLACED_SYMBOL`, defined with this prototype.
        let f: extern "C" fn(MPI_Request, MPI_Request) = unsafe { std::mem::transmute(hook) };
        f(inner, outer);
    }
}

/// A call `call` on `comm` found the communicator's endpoint owned by another thread: the tools
/// library's check (if loaded) reports a violation where that thread is the application's, inside a
/// call on the same stream (before this thread would wait for the endpoint and never reach the check).
#[cold]
pub fn tools_contended(comm: MPI_Comm, call: &'static std::ffi::CStr) {
    let hook = CONTENDED_HOOK.load(Ordering::Acquire);
    if hook != 0 {
        // SAFETY: the non-zero address of `CONTENDED_SYMBOL`, defined with this prototype.
        let f: extern "C" fn(MPI_Comm, *const std::os::raw::c_char) = unsafe { std::mem::transmute(hook) };
        f(comm, call.as_ptr());
    }
}

/// A constructor we interpose made `newcomm` (`MPI_COMM_NULL` on a process that got none) from
/// `parent`: the tools library counts it as MPICH's round robin over its implicit VCIs does.
pub fn tools_comm_created(kind: CommCtor, parent: MPI_Comm, newcomm: MPI_Comm) {
    let hook = COMM_CREATED_HOOK.load(Ordering::Acquire);
    if hook != 0 {
        let code = CommCtor::ALL.iter().position(|&k| k == kind).unwrap_or(usize::MAX) as std::os::raw::c_int;
        // SAFETY: the non-zero address of `COMM_CREATED_SYMBOL`, defined with this prototype.
        let f: extern "C" fn(std::os::raw::c_int, MPI_Comm, MPI_Comm) = unsafe { std::mem::transmute(hook) };
        f(code, parent, newcomm);
    }
}

/// At the start of our `MPI_Finalize`, while MPI and our state are still up: the tools library's
/// report (a collective over `MPI_COMM_WORLD`).
pub fn tools_finalize() {
    let fin = FINALIZE_HOOK.swap(0, Ordering::AcqRel);
    if fin != 0 {
        // SAFETY: the non-zero address of `FINALIZE_SYMBOL`, defined with this prototype.
        let f: extern "C" fn() = unsafe { std::mem::transmute(fin) };
        f();
    }
}

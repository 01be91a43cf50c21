//! Which communicators are native stream communicators of this process, and one turn of a stream's own
//! progress by a thread that may drive it: shared by the routes around native MPICH's defects
//! (`native_fixes`, `persistent`).
use crate::backend::Backend;
use crate::runtime;
use crate::streams::StreamSlot;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi;
use std::sync::atomic::AtomicUsize;

/// Operations that only the thread that started them progresses, from its completion calls
/// (`MPI_Wait*`/`MPI_Test*`, `persistent.rs`): wrapped nonblocking collectives outstanding
/// (`wrapped_collectives`) and routed buffered messages not yet freed (`buffered`). One counter for
/// both, so that while it is 0 a completion call passes through after one relaxed load, and a blocking
/// call after one more (`buffered::before_blocking`).
pub(crate) static THREAD_BOUND: AtomicUsize = AtomicUsize::new(0);

// Unit tests only (nothing in a release build): a panic on request, proving that the generated
// interposers run under the panic guard (`mpixstream_wrappers::guard`).
#[cfg(test)]
thread_local! {
    pub(crate) static PANIC_FOR_TEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
#[inline(always)]
pub(crate) fn panic_for_test() {
    #[cfg(test)]
    if PANIC_FOR_TEST.with(|p| p.get()) {
        panic!("provoked by a unit test");
    }
}

/// The stream behind `comm` if it is a native stream communicator of this process.
#[inline]
pub(crate) fn native_stream_of(comm: MPI_Comm) -> Option<&'static StreamSlot> {
    panic_for_test();
    let rt = runtime::active()?;
    Some(rt.streams.slot(native_stream_index_of(comm)?))
}

/// What the native routes need of `comm`'s record (its stream here, where its collectives run), if it
/// has one, on the native backend.
#[inline]
pub(crate) fn native_record_of(comm: MPI_Comm) -> Option<crate::comms::Cached> {
    let rt = runtime::active()?;
    if rt.backend != Backend::Native {
        return None;
    }
    rt.comms.lookup(comm)
}

/// The stream-table slot behind `comm` if it is a native stream communicator of this process.
#[inline]
pub(crate) fn native_stream_index_of(comm: MPI_Comm) -> Option<usize> {
    let rt = runtime::active()?;
    if rt.backend != Backend::Native {
        return None;
    }
    rt.comms.stream_of(comm)
}

/// One turn of the stream's own progress, unless another driver holds its endpoint right now (its
/// progress thread or engine, or another thread's call): then that driver progresses it, and a second
/// one must not (a reserved VCI has no lock).
pub(crate) fn progress_turn(slot: &StreamSlot) {
    if let (Ok(_claim), Some(progress)) = (slot.drive_for_call(), pmpi::pmpi().PMPIX_Stream_progress) {
        unsafe { progress(slot.native()) };
    }
}

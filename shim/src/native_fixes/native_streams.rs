//! Which communicators are native stream communicators of this process, the claim a call on one takes
//! on its endpoint, and one turn of a stream's own progress: shared by the routes around native MPICH's
//! defects and the generated interposers.
use crate::backend::Backend;
use crate::runtime::{self, Runtime};
use crate::streams::StreamSlot;
use mpixstream_wrappers::ffi::*;
use std::ffi::CStr;
use std::os::raw::c_int;

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

/// [`native_stream_of`] with the runtime it was found in (one look at the runtime for the call).
#[inline(always)]
pub(crate) fn native_stream_and_runtime(comm: MPI_Comm) -> Option<(&'static Runtime, &'static StreamSlot)> {
    panic_for_test();
    let rt = runtime::active()?;
    if rt.backend != Backend::Native {
        return None;
    }
    Some((rt, rt.streams.slot(rt.comms.stream_of(comm)?)))
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
    panic_for_test();
    let rt = runtime::active()?;
    if rt.backend != Backend::Native {
        return None;
    }
    rt.comms.stream_of(comm)
}

/// A call on `comm` (the `lean:claim` rows of wrappers/mpi.prototypes: point-to-point, collectives,
/// probes…): where `comm` is a native stream communicator, its endpoint is claimed for the call
/// (docs/architecture.md, "Ownership"); elsewhere the call passes straight through after one relaxed
/// load (no record exists) or one cache slot.
/// `name`: the call's, for the check's report where another application thread is inside the endpoint
/// (`tools_link::tools_contended`).
#[inline(always)]
pub fn claimed(comm: MPI_Comm, name: &'static CStr, call: impl FnOnce() -> c_int) -> c_int {
    match native_stream_of(comm) {
        None => call(),
        Some(slot) => {
            let _claim = slot.claim_reporting(|| crate::tools_link::tools_contended(comm, name));
            call()
        }
    }
}

/// One turn of the stream's own progress, unless another thread is inside its endpoint right now
/// (that thread progresses it; a second one must not: a reserved VCI has no lock).
pub(crate) fn progress_turn(slot: &StreamSlot) {
    if let Some(_claim) = slot.try_claim() {
        if let Some(rt) = runtime::active() {
            rt.progress(slot.native());
        }
    }
}

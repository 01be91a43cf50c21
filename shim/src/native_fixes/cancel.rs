//! `MPI_Cancel` of a send on the explicit policy's streams: never passed to MPICH, whose cancel of a
//! send on a native stream communicator crashes (MPICH 5.0.2, in `ucp_request_cancel`:
//! docs/native-defects.md, "MPI_Cancel of a send on a stream communicator"). The program never asked
//! for the stream; the policy put it there. MPI lets a cancel fail: the send then completes normally,
//! and `MPI_Test_cancelled` on its status says false (a program that cancels must handle both outcomes,
//! as mpi4py's tests do: they receive the message when the cancel failed). A cancel of a receive, and
//! every cancel on the application's own stream communicators, goes to MPICH as before, inside the
//! endpoint the request names.
//!
//! Telling a send from a receive: the nonblocking point-to-point calls on a policy communicator note
//! the request they made in its pool's send marks (`request_handles::SendMarks`, one bit per handle,
//! indexed by the handle's own bits) inside the claim they take anyway (`claimed_nonblocking`, the
//! `lean:claim_send`/`lean:claim_recv` rows); the probes note their matched message as a receive (it
//! becomes `MPI_Imrecv`'s request). A persistent send is told by its record (`persistent`), since MPICH
//! makes persistent requests from the implicit pool. Cost (docs/performance.md): nothing on a
//! communicator without a stream; on a stream communicator a load of the slot's flag; on the policy's,
//! in a program that names `MPI_Cancel`, a load and a store of one word. A program that names no
//! `MPI_Cancel` in any object loaded at `MPI_Init` (`program_scan::names_cancel`) cannot cancel, so
//! nothing is noted for it; one that reaches `MPI_Cancel` anyway (by `dlsym`, or from a library
//! `dlopen`ed later) has its cancels passed to MPICH, as without the library.
use crate::forward;
use crate::native_fixes::native_streams::native_stream_and_runtime;
use crate::runtime::{self, Runtime};
use crate::streams::StreamSlot;
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

/// Cancels of sends on the policy's streams kept from MPICH (for the report and the tests' reading).
pub static SENDS_NOT_CANCELLED: AtomicU64 = AtomicU64::new(0);

/// A nonblocking point-to-point call on `comm` that makes `request` (`send`: `MPI_Isend`, `Issend`,
/// `Irsend` and their `_c` forms; else `MPI_Irecv`, `MPI_Irecv_c`): the endpoint claimed for the call,
/// as every call on a stream communicator (`claimed`); on a policy stream the request made is noted as
/// a send or not.
#[inline(always)]
pub fn claimed_nonblocking(
    comm: MPI_Comm,
    name: &'static CStr,
    send: bool,
    request: AppArg<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let Some((rt, slot)) = native_stream_and_runtime(comm) else { return call() };
    let _claim = slot.claim_reporting(|| crate::tools_link::tools_contended(comm, name));
    let rc = call();
    if rc == MPI_SUCCESS && notes_sends(slot) {
        if let (Some(made), Some(vci)) = (request.get(), slot.vci()) {
            rt.streams.send_marks.note_on(vci, made, send);
        }
    }
    rc
}

/// Notes the request (or matched message) a call just made on a policy stream, inside its claim.
#[inline(always)]
pub(crate) fn note_made(handle: AppArg<MPI_Request>, send: bool) {
    if let (Some(made), Some(rt)) = (handle.get(), runtime::active()) {
        rt.streams.send_marks.note(made, send);
    }
}

/// Whether `slot` is a policy stream.
#[inline(always)]
fn is_policy_stream(slot: &StreamSlot) -> bool {
    slot.policy_owned.load(Ordering::Relaxed)
}

/// Whether `slot`'s requests are noted (a policy stream of a program that names `MPI_Cancel`): what
/// the calls that make requests, and the probes, ask before noting.
#[inline(always)]
pub(crate) fn notes_sends(slot: &StreamSlot) -> bool {
    slot.notes_sends.load(Ordering::Relaxed)
}

/// `MPI_Cancel`: a send on a policy stream is left to complete (the call succeeds, the request is
/// untouched); everything else goes to MPICH, inside the endpoint the request names.
pub fn cancel(request: AppArg<MPI_Request>) -> c_int {
    let call = || forward::MPI_Cancel(request);
    if !crate::streams::any_reserved() {
        return call();
    }
    let (Some(rt), Some(handle)) = (runtime::active(), request.get()) else { return call() };
    if let Some(i) = rt.streams.of_request(handle) {
        let slot = rt.streams.slot(i);
        let _claim = slot.claim();
        if notes_sends(slot) && rt.streams.send_marks.is_send(handle) {
            return not_cancelled();
        }
        return call();
    }
    match crate::native_fixes::persistent::send_stream_of(handle) {
        Some(i) => persistent_send(rt, i, call),
        None => call(),
    }
}

/// A recorded persistent send made on stream `i`: on a policy stream, left to complete as any send.
/// Asking MPICH whether it is active cannot help: MPICH 5.0.2 drops a started persistent send's
/// operation once it completes, and then refuses its cancel as that of an inactive request (without
/// streams too), so MPICH's error there says nothing an MPI program did wrong. So the cancel of an
/// inactive persistent send, erroneous in MPI, is not reported on a policy stream.
fn persistent_send(rt: &Runtime, i: usize, call: impl FnOnce() -> c_int) -> c_int {
    let slot = rt.streams.slot(i);
    let _claim = slot.claim();
    if is_policy_stream(slot) {
        return not_cancelled();
    }
    call()
}

#[cold]
fn not_cancelled() -> c_int {
    SENDS_NOT_CANCELLED.fetch_add(1, Ordering::Relaxed);
    MPI_SUCCESS
}

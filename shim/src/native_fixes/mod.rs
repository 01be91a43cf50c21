//! The routes around native MPICH's defects on stream communicators: on such communicators only, the
//! operations MPICH completes through its global progress, which never turns a stream's reserved VCI
//! (the defects and their reproducers: docs/native-defects.md; which module routes which: docs/
//! architecture.md §4). Here: `MPI_Sendrecv` (Irecv + Send + Wait) and the probes (a turn of the
//! stream's own progress first, inside the endpoint the call claimed); each other kind of operation has
//! its own file, re-exported here for the generated interposers, with the claims of the calls that only
//! take their endpoint (`claimed`, `claimed_request`). Everything else passes through (its cost:
//! docs/performance.md, "The lean library's interposers").
//!
//! The interposers' bodies here take the application's arguments as its call gave them, its pointers
//! wrapped by the generated interposer (`mpixstream_wrappers::app`), and pass them on unchanged to the
//! next definition of the same call, or to the calls its route makes of them (`crate::forward`).
pub mod buffered;
pub mod cancel;
pub mod greq;
pub mod native_streams;
pub mod persistent;
pub mod plain_twin;
pub mod sendrecv_requests;
pub mod wrapped_collectives;

use crate::forward;
use crate::streams::StreamSlot;
use mpixstream_wrappers::app::{AppArg, AppIn, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{MpiResult, OwnedRequest};
pub use native_streams::claimed;
use native_streams::{native_stream_of, progress_turn};
use std::os::raw::{c_int, c_void};

// Windows, files and distributed graphs: made on a plain twin of the communicator (their own file).
pub use plain_twin::{
    dist_graph_create, file_open, win_allocate, win_allocate_c, win_allocate_shared, win_allocate_shared_c, win_create,
    win_create_c, win_create_dynamic,
};
// Persistent requests and the completion calls that wait for them (their own file).
pub use persistent::{completion_passes, completion_test, completion_wait, persistent_created};
// Nonblocking collectives (their own file).
pub use wrapped_collectives::nonblocking_collective;
// Nonblocking send-receives (their own file).
pub use sendrecv_requests::{isendrecv, isendrecv_c, isendrecv_replace, isendrecv_replace_c};
// MPI_Cancel, and the nonblocking point-to-point calls that note what they made for it (their own file).
pub use cancel::{cancel, claimed_nonblocking};
// Buffered sends (their own file).
pub use buffered::{
    bsend, bsend_c, buffer_attach, buffer_attach_c, buffer_detach, buffer_detach_c, ibsend, ibsend_c, start, startall,
};

/// `r` as the MPI return code it carries.
#[inline(always)]
pub(crate) fn rc(r: MpiResult) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(code) => code,
    }
}

/// A call on request or matched message `handle` (the `lean:claim_request` rows: `MPI_Mrecv`,
/// `MPI_Imrecv`): the endpoint the handle's pool names is claimed for the call (one
/// relaxed load while no stream has a reserved endpoint).
#[inline(always)]
pub fn claimed_request(handle: MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    if !crate::streams::any_reserved() {
        return call();
    }
    match crate::runtime::active().and_then(|rt| Some(rt.streams.slot(rt.streams.of_request(handle)?))) {
        None => call(),
        Some(slot) => {
            let _claim = slot.claim();
            call()
        }
    }
}

/// `MPI_Intercomm_create`: collective over `local_comm`, and between the leaders over `peer_comm`:
/// inside both communicators' stream endpoints, where they have them (claimed in ascending order, as
/// every claim of several endpoints).
pub fn intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: AppArg<MPI_Comm>,
) -> c_int {
    let call = || forward::MPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm);
    let (Some(rt), Some(_)) = (crate::runtime::active(), crate::streams::any_reserved().then_some(())) else {
        return call();
    };
    let slots = [local_comm, peer_comm]
        .iter()
        .filter_map(|&c| native_streams::native_stream_index_of(c))
        .fold(0u64, |m, s| m | 1 << s);
    let _claims = rt.streams.claim_set(slots);
    call()
}

/// `MPI_Request_free`: forgets the request in the records (persistent requests, persistent buffered
/// sends); a routed nonblocking send-receive or collective not yet complete becomes an orphan, which
/// the progress helper completes (`crate::orphans`). Each check is one relaxed load while nothing is
/// recorded.
pub fn request_free(request: AppArg<MPI_Request>) -> c_int {
    let handle = request.get();
    let buffered = crate::native_fixes::buffered::freeing(handle);
    let orphan = crate::native_fixes::sendrecv_requests::freeing(handle)
        .or_else(|| crate::native_fixes::wrapped_collectives::freeing(handle));
    let rc = crate::native_fixes::persistent::request_free(request, handle);
    if buffered.is_some() || orphan.is_some() {
        mpixstream_wrappers::guard::ffi_guard("MPI_Request_free", || {
            if let (Some(handle), MPI_SUCCESS) = (buffered, rc) {
                crate::native_fixes::buffered::freed(handle);
            }
            // Adopted after MPICH's free: MPICH 4.1 runs a generalized request's free function inside
            // `MPI_Request_free`, and the orphan must see that it did (`sendrecv_requests`).
            if let Some(orphan) = orphan {
                crate::orphans::adopt(orphan);
            }
            MPI_SUCCESS
        });
    }
    rc
}

/// `MPI_Bsend_init`: on a native stream communicator, recorded so that `MPI_Start` routes it (the
/// buffer recorded is the one MPI requires valid while the request exists).
#[allow(clippy::too_many_arguments)]
pub fn bsend_init(
    buf: AppIn<c_void>,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    let rc = forward::MPI_Bsend_init(buf, count, datatype, dest, tag, comm, request);
    let made = if rc == MPI_SUCCESS { request.get() } else { None };
    // SAFETY: `MPI_Bsend_init`'s buffer with its count and datatype, which MPI requires valid for each
    // start while the request exists.
    let buf = unsafe { PendingBuf::new(buf.ptr().cast_mut(), count.into(), datatype) };
    crate::native_fixes::buffered::persistent_bsend_created(buf, dest, tag, comm, made);
    rc
}

/// `MPI_Bsend_init_c`: as `MPI_Bsend_init`.
#[allow(clippy::too_many_arguments)]
pub fn bsend_init_c(
    buf: AppIn<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    let rc = forward::MPI_Bsend_init_c(buf, count, datatype, dest, tag, comm, request);
    let made = if rc == MPI_SUCCESS { request.get() } else { None };
    // SAFETY: `MPI_Bsend_init`'s buffer with its count and datatype, which MPI requires valid for each
    // start while the request exists.
    let buf = unsafe { PendingBuf::new(buf.ptr().cast_mut(), count, datatype) };
    crate::native_fixes::buffered::persistent_bsend_created(buf, dest, tag, comm, made);
    rc
}

/// `MPI_Sendrecv`: on a native stream communicator, the same operation as Irecv + Send + Wait (the
/// receive completes in its wait, before the call returns).
#[allow(clippy::too_many_arguments)]
pub fn sendrecv(
    sendbuf: AppIn<c_void>,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: AppArg<c_void>,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: AppArg<MPI_Status>,
) -> c_int {
    let Some(slot) = native_stream_of(comm) else {
        return forward::MPI_Sendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status,
        );
    };
    sendrecv_on_stream(
        slot,
        |r| forward::MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, AppArg::local(r)),
        || forward::MPI_Send(sendbuf, sendcount, sendtype, dest, sendtag, comm),
        |r| forward::MPI_Wait(AppArg::local(r), status),
    )
}

/// `MPI_Sendrecv_c` (large counts): as `MPI_Sendrecv`.
#[allow(clippy::too_many_arguments)]
pub fn sendrecv_c(
    sendbuf: AppIn<c_void>,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: AppArg<c_void>,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: AppArg<MPI_Status>,
) -> c_int {
    let Some(slot) = native_stream_of(comm) else {
        return forward::MPI_Sendrecv_c(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status,
        );
    };
    sendrecv_on_stream(
        slot,
        |r| forward::MPI_Irecv_c(recvbuf, recvcount, recvtype, source, recvtag, comm, AppArg::local(r)),
        || forward::MPI_Send_c(sendbuf, sendcount, sendtype, dest, sendtag, comm),
        |r| forward::MPI_Wait(AppArg::local(r), status),
    )
}

/// Irecv, then a blocking Send, then Wait for the receive: MPICH's blocking send and wait progress the
/// requests' own VCI (the stream's), where its `MPI_Sendrecv` turns only the implicit pool. The receive
/// is posted before the send, so two ranks exchanging this way cannot deadlock (the order MPICH's own
/// Sendrecv uses). Cheaper than Irecv + Isend + Waitall, the route before: one request, no status array
/// (callgrind, 8-byte Sendrecv to self, MPICH 5.0.2: 1,985 instructions against 2,247; docs/performance.md).
/// The whole of it inside the stream's endpoint, claimed as for any call on the communicator.
fn sendrecv_on_stream(
    slot: &StreamSlot,
    irecv: impl FnOnce(&mut MPI_Request) -> c_int,
    send: impl FnOnce() -> c_int,
    wait: impl FnOnce(&mut MPI_Request) -> c_int,
) -> c_int {
    let _claim = slot.claim();
    let mut recv = MPI_REQUEST_NULL;
    let rc = irecv(&mut recv);
    if rc != MPI_SUCCESS {
        return rc;
    }
    let rc = send();
    if rc != MPI_SUCCESS {
        // A native stream communicator exists, so MPI_Init resolved the table.
        // SAFETY: `recv` is the receive `irecv` just started into our local: ours alone, freed once here.
        let recv = unsafe { OwnedRequest::from_raw(recv) };
        let _ = recv.cancel();
        let _ = recv.free();
        return rc;
    }
    wait(&mut recv)
}

// The pass-through path of every interposer here is `native_stream_of` (one acquire load of the
// runtime's phase and, once a stream communicator exists, one cache slot) and a call through `next!`
// (the next definition in the preload chain: the tools library's counters when it is loaded, else
// MPICH's, so that nothing we route is invisible to the report). Before `MPI_Init` nothing is a stream
// communicator and the call goes straight on.

/// Polls `test` until it reports a match, driving the stream's own progress between polls, inside the
/// stream's endpoint (claimed for the call, as for any call on the communicator).
fn poll_on_stream(slot: &StreamSlot, mut test: impl FnMut() -> (c_int, bool)) -> c_int {
    let _claim = slot.claim();
    loop {
        let (rc, matched) = test();
        if rc != MPI_SUCCESS || matched {
            return rc;
        }
        progress_turn(slot);
    }
}

/// `MPI_Probe`: on a native stream communicator, `MPI_Iprobe` polled with the stream's progress.
pub fn probe(source: c_int, tag: c_int, comm: MPI_Comm, status: AppArg<MPI_Status>) -> c_int {
    match native_stream_of(comm) {
        None => forward::MPI_Probe(source, tag, comm, status),
        Some(slot) => poll_on_stream(slot, || {
            let mut flag = 0;
            let rc = forward::MPI_Iprobe(source, tag, comm, AppArg::local(&mut flag), status);
            (rc, flag != 0)
        }),
    }
}

/// `MPI_Mprobe`: on a native stream communicator, `MPI_Improbe` polled with the stream's progress.
pub fn mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: AppArg<MPI_Message>,
    status: AppArg<MPI_Status>,
) -> c_int {
    match native_stream_of(comm) {
        None => forward::MPI_Mprobe(source, tag, comm, message, status),
        Some(slot) => {
            let rc = poll_on_stream(slot, || {
                let mut flag = 0;
                let rc = forward::MPI_Improbe(source, tag, comm, AppArg::local(&mut flag), message, status);
                (rc, flag != 0)
            });
            matched_message(slot, rc, message);
            rc
        }
    }
}

/// A message a probe matched on a policy stream becomes `MPI_Imrecv`'s receive request (MPICH reuses
/// it): noted as no send, for `MPI_Cancel` (`cancel`). Inside the stream's claim.
fn matched_message(slot: &StreamSlot, rc: c_int, message: AppArg<MPI_Message>) {
    if rc == MPI_SUCCESS && cancel::notes_sends(slot) {
        let _claim = slot.claim();
        cancel::note_made(message, false);
    }
}

/// `MPI_Iprobe`: on a native stream communicator, one turn of the stream's own progress first, so that
/// a polling loop sees messages that arrive on the stream's VCI (MPICH's Iprobe alone never looks there).
pub fn iprobe(source: c_int, tag: c_int, comm: MPI_Comm, flag: AppArg<c_int>, status: AppArg<MPI_Status>) -> c_int {
    match native_stream_of(comm) {
        None => forward::MPI_Iprobe(source, tag, comm, flag, status),
        Some(slot) => {
            let _claim = slot.claim();
            progress_turn(slot);
            forward::MPI_Iprobe(source, tag, comm, flag, status)
        }
    }
}

/// `MPI_Improbe`: as `MPI_Iprobe`.
pub fn improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: AppArg<c_int>,
    message: AppArg<MPI_Message>,
    status: AppArg<MPI_Status>,
) -> c_int {
    match native_stream_of(comm) {
        None => forward::MPI_Improbe(source, tag, comm, flag, message, status),
        Some(slot) => {
            let _claim = slot.claim();
            progress_turn(slot);
            let rc = forward::MPI_Improbe(source, tag, comm, flag, message, status);
            if flag.get() == Some(1) {
                matched_message(slot, rc, message);
            }
            rc
        }
    }
}

#[cfg(test)]
mod tests {
    use super::native_streams::PANIC_FOR_TEST;
    use mpixstream_wrappers::ffi::*;

    /// A panic inside a native-fix interposer and a nonblocking-collective interposer comes back as
    /// `MPI_ERR_INTERN` (the exported symbols themselves, as C calls them), never as an abort.
    #[test]
    fn a_panic_in_a_generated_interposer_returns_mpi_err_intern() {
        PANIC_FOR_TEST.with(|p| p.set(true));
        let mut flag = 0;
        let mut request = MPI_REQUEST_NULL;
        // SAFETY: valid arguments (live locals, null buffers of 0 elements, `MPI_STATUS_IGNORE`); each call
        // panics at its first check (`PANIC_FOR_TEST`), before any MPI.
        let (iprobe, sendrecv, ibarrier, isendrecv_replace) = unsafe {
            (
                crate::interposed::MPI_Iprobe(0, 0, MPI_COMM_WORLD as WideHandle, &mut flag, MPI_STATUS_IGNORE),
                crate::interposed::MPI_Sendrecv(
                    std::ptr::null(),
                    0,
                    MPI_INT as WideHandle,
                    0,
                    0,
                    std::ptr::null_mut(),
                    0,
                    MPI_INT as WideHandle,
                    0,
                    0,
                    MPI_COMM_WORLD as WideHandle,
                    MPI_STATUS_IGNORE,
                ),
                crate::interposed::MPI_Ibarrier(MPI_COMM_WORLD as WideHandle, &mut request),
                crate::interposed::MPI_Isendrecv_replace(
                    std::ptr::null_mut(),
                    0,
                    MPI_INT as WideHandle,
                    0,
                    0,
                    0,
                    0,
                    MPI_COMM_WORLD as WideHandle,
                    &mut request,
                ),
            )
        };
        PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!(
            (iprobe, sendrecv, ibarrier, isendrecv_replace),
            (MPI_ERR_INTERN, MPI_ERR_INTERN, MPI_ERR_INTERN, MPI_ERR_INTERN)
        );
    }
}

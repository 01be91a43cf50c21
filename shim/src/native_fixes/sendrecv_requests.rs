//! Nonblocking send-receives on native stream communicators (`MPI_Isendrecv`, `MPI_Isendrecv_replace`
//! and their large-count forms), handed to the application as MPICH extended generalized requests.
//!
//! Why they hang in native MPICH 5.0.2 there: MPICH runs both as a schedule (`MPIR_Sched_start`,
//! src/mpi/pt2pt/sendrecv.c) that only its global progress advances, and global progress skips the
//! stream's reserved VCI: the schedule's send and receive never start or finish (mpi4py's
//! `test_p2p_buf` `testISendrecv` under the explicit policy; `tests/c/policy_isendrecv.c`).
//!
//! The route, on native stream communicators only: an `MPI_Irecv_c` and an `MPI_Isend_c` on the same
//! communicator (so matching is MPI's own: the peer may use any send or receive), handed out as one
//! generalized request whose poll, run by the thread that waits for it, turns the stream's own progress
//! and tests both. Its status is the receive's (source, tag, count, cancelled), which MPICH's own
//! calls do not give (their schedule receives with `MPI_STATUS_IGNORE`). The replace forms receive into
//! a packed copy (`MPI_PACKED`, `MPI_Pack_size` bytes) and unpack it into the buffer once both halves
//! completed, since the send reads that buffer until then (MPICH instead sends a packed copy with the
//! user's datatype, which breaks non-contiguous ones).
//!
//! Errors: one of the inner calls failing when started is the call's return value; one of them
//! completing with an error (or the unpack failing) is the query function's return value, which MPICH
//! returns from the completion call (5.0.2 keeps its class and message: a truncated receive is
//! `MPI_ERR_TRUNCATE`, where MPICH's own `MPI_Isendrecv` returns success). `MPI_Cancel` cancels the
//! receive; the send is left to complete (cancelling a send crashes native MPICH 5.0.2,
//! tests/native_defects/cancel_send.c), and the request completes when both have.
//!
//! `MPI_Request_free` before completion: MPICH polls a generalized request only from completion calls
//! on it, so a request the application freed would never finish. Our `MPI_Request_free` interposer
//! makes it an orphan, which the progress helper completes (`crate::orphans`, `greq::Open`); its state
//! is shared with MPICH so that MPICH 4.1, which runs the free function inside `MPI_Request_free`,
//! frees nothing the orphan still uses (`greq`).
//!
//! Cost on everything else: the four interposers are `native_stream_of` and a call through `next!`;
//! `MPI_Request_free` one relaxed load while no routed request is open.
use crate::forward;
use crate::native_fixes::greq::{Open, Operation, Shared};
use crate::native_fixes::native_streams::{native_stream_index_of, progress_turn};
use crate::native_fixes::rc;
use crate::orphans::Orphan;
use crate::runtime;
use mpixstream_wrappers::app::{AppArg, AppIn, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{self, Comm, Datatype, GrequestFns, OwnedRequest};
use mpixstream_wrappers::mpi::{kept, request};
use mpixstream_wrappers::next;
use std::os::raw::{c_int, c_void};

/// One routed send-receive: the generalized request's operation.
struct SendRecv {
    /// The stream-table slot of its communicator's stream.
    slot: usize,
    recv: OwnedRequest,
    send: OwnedRequest,
    /// The receive's status, once it completed.
    status: MPI_Status,
    /// The first error of the inner operations or the unpack.
    error: c_int,
    /// The replace forms: where the message goes once both halves completed.
    unpack: Option<Unpack>,
}

/// Made only by `replace_on_stream`, from the application's `MPI_Isendrecv_replace(_c)` arguments:
/// the unpack into `buf` relies on that (MPI's buffer rule).
struct Unpack {
    /// What the receive wrote, packed (its heap memory, `Pack_size` zeroed bytes, is the receive buffer:
    /// it never moves).
    packed: Vec<u8>,
    buf: PendingBuf,
}

/// The routed send-receives handed out and not complete.
static OPEN: Open<SendRecv> = Open::new();

/// Before `MPI_Request_free` of `request` (`None`: a null pointer): a routed send-receive not yet
/// complete becomes an orphan.
pub fn freeing(request: Option<MPI_Request>) -> Option<Box<dyn Orphan>> {
    OPEN.freeing(request)
}

/// Starts a routed send-receive on stream `slot`'s communicator: `irecv` and `isend` make the inner
/// calls (the receive into the packed copy of `unpack`, if any), inside the stream's endpoint, then the
/// request is handed out in `request`.
fn start(
    slot: usize,
    request: AppArg<MPI_Request>,
    unpack: Option<Unpack>,
    irecv: impl FnOnce(&mut MPI_Request) -> c_int,
    isend: impl FnOnce(&mut MPI_Request) -> c_int,
) -> c_int {
    let Some(rt) = runtime::active() else { return MPI_ERR_OTHER };
    let _claim = rt.streams.slot(slot).claim();
    let (mut recv, mut send) = (MPI_REQUEST_NULL, MPI_REQUEST_NULL);
    // The receive first, as MPICH's own send-receives do.
    let rc = irecv(&mut recv);
    if rc != MPI_SUCCESS {
        return rc;
    }
    crate::request_check::verify(rt, slot, recv);
    let rc = isend(&mut send);
    // SAFETY: the requests the two calls just made into our locals (`MPI_REQUEST_NULL` where one made
    // none): ours alone, the program never sees them.
    let (recv, send) = unsafe { (OwnedRequest::from_raw(recv), OwnedRequest::from_raw(send)) };
    let mut op = SendRecv {
        slot,
        recv,
        send,
        status: MPI_Status { MPI_SOURCE: MPI_ANY_SOURCE, MPI_TAG: MPI_ANY_TAG, ..MPI_Status::default() },
        error: MPI_SUCCESS,
        unpack,
    };
    if rc != MPI_SUCCESS {
        // The receive may be matched already, to a message still arriving in pieces (a large one, or
        // one whose rendezvous began): a cancel then fails silently and the receive goes on writing.
        // So it is not freed here with its memory dropped (MPICH would write into freed memory, the
        // replace forms' packed copy): it is cancelled and becomes an orphan that keeps that memory
        // until the receive is known complete or cancelled (a poll under the stream's claim).
        let _ = op.recv.cancel();
        let recv = op.recv.take();
        crate::orphans::adopt(Box::new(Abandoned { slot, recv, _into: op.unpack.take().map(|u| u.packed) }));
        return rc;
    }
    let (send, recv) = (op.send.raw(), op.recv.raw());
    let shared = Shared::new(op);
    let extra = Shared::into_extra(&shared);
    let fns = GrequestFns { query: sr_query, free: sr_free, cancel: sr_cancel, poll: sr_poll, wait: Some(sr_wait) };
    let outer = match fns.start(extra.word()) {
        Ok(outer) => {
            extra.taken();
            outer.raw()
        }
        Err(rc) => {
            // Cannot hand it out: complete the operation here rather than lose it.
            // MPICH did not take `extra` (no request was made): the reference is ours again.
            Shared::released(extra.refused());
            while !shared.op().step() {}
            return rc;
        }
    };
    shared.set_outer(outer);
    OPEN.insert(&shared);
    // The tools library (if loaded) tracked the inner requests through the next definitions, and never
    // sees them complete (we test them through PMPI): it tracks the one the application waits on
    // instead, as the receive (its completion counts one).
    crate::tools_link::tools_request_replaced(send, outer);
    crate::tools_link::tools_request_replaced(recv, outer);
    request.set(outer);
    MPI_SUCCESS
}

/// The receive of a send-receive whose send failed to start: cancelled, kept with the memory it
/// receives into until it completes (matched before the cancel) or is cancelled.
struct Abandoned {
    slot: usize,
    recv: OwnedRequest,
    /// The replace forms' packed copy, the receive's buffer.
    _into: Option<Vec<u8>>,
}

impl Orphan for Abandoned {
    fn stream(&self) -> Option<usize> {
        Some(self.slot)
    }

    fn poll(&mut self, _: crate::orphans::MayPoll) -> bool {
        let tested = self.recv.test();
        tested.is_err() || self.recv.is_null()
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.recv.is_null() {
            // Its test failed: nobody will test it again (MPICH completed it with the error).
            let _ = self.recv.take().free();
        }
    }
}

impl Operation for SendRecv {
    fn stream(&self) -> Option<usize> {
        Some(self.slot)
    }

    /// One poll, inside the stream's endpoint or not at all now (a poll runs inside MPICH's wait and
    /// must not wait for the thread inside it): a turn of its stream's progress, a test of each inner
    /// request not yet complete, and, once both are, the unpack. Returns whether it is complete.
    fn step(&mut self) -> bool {
        if self.recv.is_null() && self.send.is_null() && self.unpack.is_none() {
            return true;
        }
        let Some(rt) = runtime::active() else { return false };
        let slot = rt.streams.slot(self.slot);
        let Some(_claim) = slot.try_claim() else { return false };
        progress_turn(slot);
        if !self.recv.is_null() {
            let tested = self.recv.test_into(&mut self.status);
            if let Err(rc) = tested {
                self.failed(rc);
                if !self.recv.is_null() {
                    // Not completed by the failing test: nobody will test it again.
                    let _ = self.recv.cancel();
                    free_or_keep(&mut self.recv);
                }
            }
        }
        if !self.send.is_null() {
            let tested = self.send.test();
            if let Err(rc) = tested {
                self.failed(rc);
                if !self.send.is_null() {
                    free_or_keep(&mut self.send);
                }
            }
        }
        if !self.recv.is_null() || !self.send.is_null() {
            return false;
        }
        if let Some(u) = self.unpack.take() {
            // A cancelled or failed receive wrote nothing (count 0): the buffer keeps the sent data.
            let bytes = mpi::datatype::get_count(&self.status, Datatype::BYTE).unwrap_or(0);
            if self.error == MPI_SUCCESS && bytes > 0 {
                self.failed(rc(u.unpack(bytes)));
            }
        }
        true
    }
}

/// Frees `request`, or keeps it where MPICH refuses (as before: tested again at the next step).
fn free_or_keep(request: &mut OwnedRequest) {
    if let Err((kept, _)) = request.take().free_or_keep() {
        *request = kept;
    }
}

impl SendRecv {
    fn failed(&mut self, rc: c_int) {
        if self.error == MPI_SUCCESS {
            self.error = rc;
        }
    }
}

impl Unpack {
    /// Unpacks the `bytes` the receive wrote into the application's buffer (both halves completed).
    fn unpack(self, bytes: MPI_Count) -> mpi::MpiResult {
        // The completed receive wrote `bytes` from the start, its status's count.
        let bytes = (bytes as usize).min(self.packed.len());
        let mut position: MPI_Count = 0;
        // On MPI_COMM_SELF: a request the application freed completes later, maybe after its
        // communicator was freed; one process packs and unpacks alike on any communicator.
        // Into the application's buffer, valid until the request completes (now, once this returns); the
        // send that read it completed.
        Comm::SELF.unpack(&self.packed[..bytes], &mut position, &self.buf)
    }
}

unsafe extern "C" fn sr_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (poll)", || {
        // SAFETY: MPICH calls the poll function with the request's extra state only until it ran the
        // free function, which is when it lets go of it (`greq`).
        unsafe { kept::lend::<Shared<SendRecv>, _>(extra, |shared| shared.poll(&OPEN)) };
        MPI_SUCCESS
    })
}

/// MPICH requires a wait function too, and calls it in a loop for the generalized requests of one
/// `MPI_Wait*`: one turn of each request's poll.
unsafe extern "C" fn sr_wait(count: c_int, states: *mut *mut c_void, _timeout: f64, _status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (wait)", || {
        // SAFETY: MPICH passes `count` extra states of its requests with this wait function, each
        // still held by MPICH (their free functions have not run): what `sr_poll` takes.
        unsafe { request::poll_each(count, states, sr_poll) }
    })
}

/// The receive's status, with the first error (also the return value: MPICH makes it the completion
/// call's error).
unsafe extern "C" fn sr_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (query)", || {
        // SAFETY: MPICH calls the query function with the request's extra state only until it ran the
        // free function (`greq`), and with a status of its own, valid for writes.
        unsafe {
            kept::lend::<Shared<SendRecv>, _>(extra, |shared| {
                let op = shared.op();
                *status = MPI_Status { MPI_ERROR: op.error, ..op.status };
                op.error
            })
        }
    })
}

unsafe extern "C" fn sr_free(extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (free)", || {
        // SAFETY: MPICH runs the free function once, with the extra state `into_extra` made for it.
        Shared::released(unsafe { kept::take_back::<Shared<SendRecv>>(extra) });
        MPI_SUCCESS
    })
}

/// Cancels the receive, if it is still open; the send is left to complete (module doc).
unsafe extern "C" fn sr_cancel(extra: *mut c_void, complete: c_int) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (cancel)", || {
        // SAFETY: MPICH calls the cancel function with the request's extra state only until it ran the
        // free function (`greq`).
        unsafe { kept::lend::<Shared<SendRecv>, _>(extra, |shared| cancel_receive(shared, complete != 0)) }
    })
}

fn cancel_receive(shared: &Shared<SendRecv>, complete: bool) -> c_int {
    let op = shared.op();
    if complete || op.recv.is_null() {
        return MPI_SUCCESS;
    }
    let Some(rt) = runtime::active() else { return MPI_SUCCESS };
    let _claim = rt.streams.slot(op.slot).claim();
    rc(op.recv.cancel())
}

/// `MPI_Isendrecv`: on a native stream communicator, the routed send-receive (module doc). The
/// application's buffers go on to MPICH's calls of the same operation (the inner calls start within this
/// call; MPI keeps the buffers valid until the request handed out completes, which is when the inner
/// ones have).
#[allow(clippy::too_many_arguments)]
pub fn isendrecv(
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
    request: AppArg<MPI_Request>,
) -> c_int {
    match native_stream_index_of(comm).filter(|_| !request.is_empty()) {
        Some(slot) => start(
            slot,
            request,
            None,
            |r| forward::MPI_Irecv_c(recvbuf, recvcount.into(), recvtype, source, recvtag, comm, AppArg::local(r)),
            |r| forward::MPI_Isend_c(sendbuf, sendcount.into(), sendtype, dest, sendtag, comm, AppArg::local(r)),
        ),
        None => forward::MPI_Isendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request,
        ),
    }
}

/// `MPI_Isendrecv_c` (large counts): as `MPI_Isendrecv`.
#[allow(clippy::too_many_arguments)]
pub fn isendrecv_c(
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
    request: AppArg<MPI_Request>,
) -> c_int {
    match native_stream_index_of(comm).filter(|_| !request.is_empty()) {
        Some(slot) => start(
            slot,
            request,
            None,
            |r| forward::MPI_Irecv_c(recvbuf, recvcount, recvtype, source, recvtag, comm, AppArg::local(r)),
            |r| forward::MPI_Isend_c(sendbuf, sendcount, sendtype, dest, sendtag, comm, AppArg::local(r)),
        ),
        None => forward::MPI_Isendrecv_c(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request,
        ),
    }
}

/// The routed replace: the receive goes into a packed copy, unpacked into `buf` (the application's
/// buffer, valid until the request completes: MPI's rule) once both halves completed (module doc).
#[allow(clippy::too_many_arguments)]
fn replace_on_stream(
    slot: usize,
    buf: AppArg<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    let bytes = match Comm(comm).pack_size(count, Datatype(datatype)) {
        Ok(bytes) => bytes,
        Err(rc) => return rc,
    };
    // Zeroed, so that the unpack reads initialised bytes whatever the receive wrote (a pass over memory
    // the pack and unpack pass over anyway).
    let mut packed: Vec<u8> = vec![0; bytes.max(0) as usize];
    let into: *mut c_void = packed.as_mut_ptr().cast();
    // SAFETY: `MPI_Isendrecv_replace`'s buffer with its count and datatype, which MPI keeps valid until
    // the request completes: the unpack into it is this operation's last step.
    let unpack = Unpack { packed, buf: unsafe { buf.pending(count, datatype) } };
    start(
        slot,
        request,
        Some(unpack),
        // SAFETY: the receive goes into `into`, the `bytes` of the packed copy, which the
        // request's state keeps (moving a Vec moves no heap memory) until the receive completed.
        |r| unsafe { next!(MPI_Irecv_c)(into, bytes, MPI_PACKED, source, recvtag, comm, r) },
        |r| forward::MPI_Isend_c(buf.as_in(), count, datatype, dest, sendtag, comm, AppArg::local(r)),
    )
}

/// `MPI_Isendrecv_replace`: on a native stream communicator, the routed replace.
#[allow(clippy::too_many_arguments)]
pub fn isendrecv_replace(
    buf: AppArg<c_void>,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    match native_stream_index_of(comm).filter(|_| !request.is_empty()) {
        Some(slot) => {
            replace_on_stream(slot, buf, count.into(), datatype, dest, sendtag, source, recvtag, comm, request)
        }
        None => forward::MPI_Isendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, request),
    }
}

/// `MPI_Isendrecv_replace_c` (large counts): as `MPI_Isendrecv_replace`.
#[allow(clippy::too_many_arguments)]
pub fn isendrecv_replace_c(
    buf: AppArg<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    match native_stream_index_of(comm).filter(|_| !request.is_empty()) {
        Some(slot) => replace_on_stream(slot, buf, count, datatype, dest, sendtag, source, recvtag, comm, request),
        None => forward::MPI_Isendrecv_replace_c(buf, count, datatype, dest, sendtag, source, recvtag, comm, request),
    }
}

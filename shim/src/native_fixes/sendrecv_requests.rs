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
//! `MPI_Request_free` before completion: MPICH calls a generalized request's free function only once it
//! completes, and polls it only from completion calls on it, so a request the application freed would
//! never finish. Our `MPI_Request_free` interposer hands it to the freeing thread's own list, whose
//! requests that thread completes in its next send-receive here, at its exit, or at `MPI_Finalize`
//! (only a thread that waits on the stream drives its reserved VCI, which has no lock).
//!
//! Cost on everything else: the four interposers are `native_stream_of` and a call through `next!`;
//! `MPI_Request_free` one relaxed load while no routed request is open.
use crate::native_fixes::greq::poll_each;
use crate::native_fixes::native_streams::{native_stream_of, progress_turn};
use crate::runtime;
use crate::streams::StreamSlot;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The open routed requests (handed out, not yet complete), by the handle the application holds: the
/// `MPI_Request_free` interposer looks here.
static OPEN: Mutex<Option<HashMap<MPI_Request, usize>>> = Mutex::new(None);
/// How many are open; 0 keeps `MPI_Request_free` on its pass-through path.
static OPEN_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Requests freed by the application before they completed, all threads together (each thread's are in
/// its `FREED` list).
static FREED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// One routed send-receive: the generalized request's extra state.
struct SendRecv {
    slot: &'static StreamSlot,
    recv: MPI_Request,
    send: MPI_Request,
    /// The request the application holds (`MPI_REQUEST_NULL` while none was made).
    outer: MPI_Request,
    /// The receive's status, once it completed.
    status: MPI_Status,
    /// The first error of the inner operations or the unpack.
    error: c_int,
    /// The replace forms: where the message goes once both halves completed.
    unpack: Option<Unpack>,
    /// `MPI_Grequest_complete` was called.
    completed: bool,
}

struct Unpack {
    /// What the receive wrote, packed (its heap memory is the receive buffer: it never moves).
    packed: Vec<u8>,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
}

/// The requests this thread freed before they completed (raw extra states: MPICH frees each, through
/// `sr_free`, when the thread completes it).
struct Freed(Vec<*mut SendRecv>);

impl Freed {
    /// Polls each once; forgets those that completed (their state is gone with them).
    unsafe fn reap(&mut self) {
        let before = self.0.len();
        self.0.retain(|&st| !step(st));
        FREED_COUNT.fetch_sub(before - self.0.len(), Ordering::AcqRel);
    }
}

impl Drop for Freed {
    /// The thread exits: nobody else may drive its streams, so its freed requests complete now.
    fn drop(&mut self) {
        if runtime::active().is_none() {
            return;
        }
        while !self.0.is_empty() {
            unsafe { self.reap() };
            std::thread::yield_now();
        }
    }
}

thread_local! {
    static FREED: RefCell<Freed> = const { RefCell::new(Freed(Vec::new())) };
}

/// Polls this thread's freed requests once (nothing while no thread has any).
fn reap_freed() {
    if FREED_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let _ = FREED.try_with(|f| {
        if let Ok(mut f) = f.try_borrow_mut() {
            unsafe { f.reap() };
        }
    });
}

/// At `MPI_Finalize`, before MPICH's: the calling thread's freed requests complete (the other threads'
/// completed when they exited).
pub fn finalize() {
    while FREED.try_with(|f| f.try_borrow().is_ok_and(|f| !f.0.is_empty())).unwrap_or(false) {
        reap_freed();
        std::thread::yield_now();
    }
}

/// `MPI_Request_free`, before the call: the handle, if it may be an open routed request (one relaxed
/// load while none is open).
#[inline(always)]
pub unsafe fn freeing(request: *const MPI_Request) -> Option<MPI_Request> {
    if OPEN_COUNT.load(Ordering::Relaxed) == 0 || request.is_null() {
        None
    } else {
        Some(*request)
    }
}

/// After `MPI_Request_free` of `handle` succeeded: an open routed request goes to this thread's freed
/// list (MPICH keeps the request until we complete it).
pub fn freed(handle: MPI_Request) {
    if let Some(st) = forget(handle) {
        FREED_COUNT.fetch_add(1, Ordering::AcqRel);
        let kept =
            FREED.try_with(|f| f.try_borrow_mut().map(|mut f| f.0.push(st as *mut SendRecv)).is_ok()).unwrap_or(false);
        if !kept {
            // The thread is exiting (no list any more), or its list is in use: complete it here.
            FREED_COUNT.fetch_sub(1, Ordering::AcqRel);
            while !unsafe { step(st as *mut SendRecv) } {
                std::thread::yield_now();
            }
        }
    }
}

fn remember(outer: MPI_Request, st: *mut SendRecv) {
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    if open.get_or_insert_with(HashMap::new).insert(outer, st as usize).is_none() {
        OPEN_COUNT.fetch_add(1, Ordering::Release);
    }
}

fn forget(outer: MPI_Request) -> Option<usize> {
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let st = open.as_mut().and_then(|m| m.remove(&outer));
    if st.is_some() {
        OPEN_COUNT.fetch_sub(1, Ordering::Release);
    }
    st
}

/// Starts a routed send-receive on `slot`'s communicator `comm`: `irecv` and `isend` make the inner
/// calls (the receive into the packed copy of `unpack`, if any), then the request is handed out.
unsafe fn start(
    slot: &'static StreamSlot,
    request: *mut MPI_Request,
    unpack: Option<Unpack>,
    irecv: impl FnOnce(*mut MPI_Request) -> c_int,
    isend: impl FnOnce(*mut MPI_Request) -> c_int,
) -> c_int {
    reap_freed();
    let p = pmpi::pmpi();
    let st = Box::into_raw(Box::new(SendRecv {
        slot,
        recv: MPI_REQUEST_NULL,
        send: MPI_REQUEST_NULL,
        outer: MPI_REQUEST_NULL,
        status: MPI_Status { MPI_SOURCE: MPI_ANY_SOURCE, MPI_TAG: MPI_ANY_TAG, ..MPI_Status::default() },
        error: MPI_SUCCESS,
        unpack,
        completed: false,
    }));
    // The receive first, as MPICH's own send-receives do.
    let rc = irecv(&mut (*st).recv);
    if rc != MPI_SUCCESS {
        drop(Box::from_raw(st));
        return rc;
    }
    let rc = isend(&mut (*st).send);
    if rc != MPI_SUCCESS {
        (p.PMPI_Cancel)(&mut (*st).recv);
        (p.PMPI_Request_free)(&mut (*st).recv);
        drop(Box::from_raw(st));
        return rc;
    }
    let rc =
        (p.PMPIX_Grequest_start)(sr_query, sr_free, sr_cancel, sr_poll, Some(sr_wait), st.cast(), &mut (*st).outer);
    if rc != MPI_SUCCESS {
        // Cannot hand it out: complete the operation here rather than lose it.
        (*st).outer = MPI_REQUEST_NULL;
        while !step(st) {}
        drop(Box::from_raw(st));
        return rc;
    }
    // The tools library (if loaded) tracked the inner requests through the next definitions, and never
    // sees them complete (we test them through PMPI): it tracks the one the application waits on
    // instead, as the receive (its completion counts one).
    crate::tools_link::tools_request_replaced((*st).send, (*st).outer);
    crate::tools_link::tools_request_replaced((*st).recv, (*st).outer);
    remember((*st).outer, st);
    *request = (*st).outer;
    MPI_SUCCESS
}

/// One poll of a routed send-receive: a turn of its stream's progress, a test of each inner request
/// not yet complete, and, once both are, the unpack and `MPI_Grequest_complete`. Returns whether it is
/// complete; after it returns true for a request the application freed, `st` is gone.
unsafe fn step(st: *mut SendRecv) -> bool {
    let s = &mut *st;
    if s.completed {
        return true;
    }
    let p = pmpi::pmpi();
    progress_turn(s.slot);
    if s.recv != MPI_REQUEST_NULL {
        let mut flag = 0;
        let rc = (p.PMPI_Test)(&mut s.recv, &mut flag, &mut s.status);
        if rc != MPI_SUCCESS {
            s.failed(rc);
            if s.recv != MPI_REQUEST_NULL {
                // Not completed by the failing test: nobody will test it again.
                (p.PMPI_Cancel)(&mut s.recv);
                (p.PMPI_Request_free)(&mut s.recv);
            }
        }
    }
    if s.send != MPI_REQUEST_NULL {
        let mut flag = 0;
        let rc = (p.PMPI_Test)(&mut s.send, &mut flag, MPI_STATUS_IGNORE);
        if rc != MPI_SUCCESS {
            s.failed(rc);
            if s.send != MPI_REQUEST_NULL {
                (p.PMPI_Request_free)(&mut s.send);
            }
        }
    }
    if s.recv != MPI_REQUEST_NULL || s.send != MPI_REQUEST_NULL {
        return false;
    }
    if let Some(u) = s.unpack.take() {
        // A cancelled or failed receive wrote nothing (count 0): the buffer keeps the sent data.
        let mut bytes: MPI_Count = 0;
        (p.PMPI_Get_count_c)(&s.status, MPI_BYTE, &mut bytes);
        if s.error == MPI_SUCCESS && bytes > 0 {
            let mut position: MPI_Count = 0;
            // On MPI_COMM_SELF: a request the application freed completes later, maybe after its
            // communicator was freed; one process packs and unpacks alike on any communicator.
            let rc = (p.PMPI_Unpack_c)(
                u.packed.as_ptr().cast(),
                bytes,
                &mut position,
                u.buf,
                u.count,
                u.datatype,
                MPI_COMM_SELF,
            );
            s.failed(rc);
        }
    }
    s.completed = true;
    let outer = s.outer;
    if outer != MPI_REQUEST_NULL {
        forget(outer);
        // Frees `st` (through sr_free) if the application already freed the request.
        (p.PMPI_Grequest_complete)(outer);
    }
    true
}

impl SendRecv {
    fn failed(&mut self, rc: c_int) {
        if self.error == MPI_SUCCESS {
            self.error = rc;
        }
    }
}

unsafe extern "C" fn sr_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (poll)", || unsafe {
        reap_freed();
        step(extra.cast());
        MPI_SUCCESS
    })
}

/// MPICH requires a wait function too, and calls it in a loop for the generalized requests of one
/// `MPI_Wait*`: one turn of each request's poll.
unsafe extern "C" fn sr_wait(count: c_int, states: *mut *mut c_void, _timeout: f64, _status: *mut MPI_Status) -> c_int {
    poll_each(count, states, sr_poll)
}

/// The receive's status, with the first error (also the return value: MPICH makes it the completion
/// call's error).
unsafe extern "C" fn sr_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (query)", || unsafe {
        let s = &*(extra as *const SendRecv);
        *status = s.status;
        (*status).MPI_ERROR = s.error;
        s.error
    })
}

unsafe extern "C" fn sr_free(extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (free)", || unsafe {
        // Only after MPI_Grequest_complete (MPICH holds the request until then): nothing inner is open.
        drop(Box::from_raw(extra as *mut SendRecv));
        MPI_SUCCESS
    })
}

/// Cancels the receive, if it is still open; the send is left to complete (module doc).
unsafe extern "C" fn sr_cancel(extra: *mut c_void, complete: c_int) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("MPI_Isendrecv (cancel)", || unsafe {
        let s = &mut *(extra as *mut SendRecv);
        if complete != 0 || s.recv == MPI_REQUEST_NULL {
            return MPI_SUCCESS;
        }
        (pmpi::pmpi().PMPI_Cancel)(&mut s.recv)
    })
}

/// `MPI_Isendrecv`: on a native stream communicator, the routed send-receive (module doc).
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    match native_stream_of(comm) {
        Some(slot) if !request.is_null() => start(
            slot,
            request,
            None,
            |r| next!(MPI_Irecv_c)(recvbuf, recvcount.into(), recvtype, source, recvtag, comm, r),
            |r| next!(MPI_Isend_c)(sendbuf, sendcount.into(), sendtype, dest, sendtag, comm, r),
        ),
        _ => next!(MPI_Isendrecv)(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request,
        ),
    }
}

/// `MPI_Isendrecv_c` (large counts): as `MPI_Isendrecv`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    match native_stream_of(comm) {
        Some(slot) if !request.is_null() => start(
            slot,
            request,
            None,
            |r| next!(MPI_Irecv_c)(recvbuf, recvcount, recvtype, source, recvtag, comm, r),
            |r| next!(MPI_Isend_c)(sendbuf, sendcount, sendtype, dest, sendtag, comm, r),
        ),
        _ => next!(MPI_Isendrecv_c)(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request,
        ),
    }
}

/// The routed replace: the receive goes into a packed copy, unpacked into `buf` once both halves
/// completed (module doc).
#[allow(clippy::too_many_arguments)]
unsafe fn replace_on_stream(
    slot: &'static StreamSlot,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let mut bytes: MPI_Count = 0;
    let rc = (pmpi::pmpi().PMPI_Pack_size_c)(count, datatype, comm, &mut bytes);
    if rc != MPI_SUCCESS {
        return rc;
    }
    let packed: Vec<u8> = Vec::with_capacity(bytes.max(0) as usize);
    let into = packed.as_ptr() as *mut c_void;
    let unpack = Unpack { packed, buf, count, datatype };
    start(
        slot,
        request,
        Some(unpack),
        |r| next!(MPI_Irecv_c)(into, bytes, MPI_PACKED, source, recvtag, comm, r),
        |r| next!(MPI_Isend_c)(buf, count, datatype, dest, sendtag, comm, r),
    )
}

/// `MPI_Isendrecv_replace`: on a native stream communicator, the routed replace.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    match native_stream_of(comm) {
        Some(slot) if !request.is_null() => {
            replace_on_stream(slot, buf, count.into(), datatype, dest, sendtag, source, recvtag, comm, request)
        }
        _ => next!(MPI_Isendrecv_replace)(buf, count, datatype, dest, sendtag, source, recvtag, comm, request),
    }
}

/// `MPI_Isendrecv_replace_c` (large counts): as `MPI_Isendrecv_replace`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    match native_stream_of(comm) {
        Some(slot) if !request.is_null() => {
            replace_on_stream(slot, buf, count, datatype, dest, sendtag, source, recvtag, comm, request)
        }
        _ => next!(MPI_Isendrecv_replace_c)(buf, count, datatype, dest, sendtag, source, recvtag, comm, request),
    }
}

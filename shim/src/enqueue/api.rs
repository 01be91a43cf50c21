//! The enqueue entry points. Prototypes are native MPICH 5's where it has the function
//! (`MPIX_Send_enqueue` ... `MPIX_Allreduce_enqueue`, and their `_c` forms); the collectives beyond
//! native follow MPI's prototypes; `MPIX_Host_queue_*` are ours (include/mpix_stream.h).
use super::engine::Queue;
use super::ops::{Kind, StatusDst};
use super::registry::{engine, EngineRef};
use super::requests::request_stream;
use crate::comms::Origin;
use crate::errors::{raise, Class};
use crate::runtime::mpix_entry;
use crate::runtime::Runtime;
use crate::streams::StreamTable;
use mpixstream_wrappers::app::{AppArg, CallScope, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi;
use std::os::raw::{c_int, c_void};

/// The engine of `comm`'s local stream, or the error (raised on `comm`).
fn engine_for(rt: &Runtime, comm: MPI_Comm, func: &str) -> Result<EngineRef, c_int> {
    // The common case through the communicator table's cache (no hashing, no lock).
    if let Some(e) = rt.comms.stream_of(comm).and_then(engine) {
        e.report_error(comm, func)?;
        return Ok(e);
    }
    if comm == MPI_COMM_NULL {
        return Err(raise(MPI_COMM_WORLD, Class::Comm, func, "the communicator is MPI_COMM_NULL"));
    }
    let Some((stream, origin)) = rt.comms.get(comm).and_then(|r| r.stream.map(|s| (s, r.origin))) else {
        if crate::multiplex::registry::lookup(comm).is_some() {
            return Err(raise(
                comm,
                Class::Comm,
                func,
                &format!(
                    "communicator 0x{:08x} is a multiplex stream communicator: it has several local streams and \
                     none is queue-backed, so there is no single queue to put the operation on; enqueue on a \
                     communicator made by MPIX_Stream_comm_create from a stream created with info \
                     type=cudaStream_t or type=mpixstream_host_queue",
                    comm as u32
                ),
            ));
        }
        return Err(raise(
            comm,
            Class::Comm,
            func,
            &format!(
                "communicator 0x{:08x} has no local stream: enqueue needs a communicator made by \
                 MPIX_Stream_comm_create from a stream created with info type=cudaStream_t or \
                 type=mpixstream_host_queue",
                comm as u32
            ),
        ));
    };
    match engine(stream) {
        Some(e) => {
            e.report_error(comm, func)?;
            Ok(e)
        }
        None if origin == Origin::Policy => Err(raise(
            comm,
            Class::Stream,
            func,
            &format!(
                "the local stream 0x{:08x} of communicator 0x{:08x} was given to it by the explicit endpoint \
                 policy (MPIXSTREAM_POLICY=explicit), which carries the application's own MPI calls and has no \
                 queue; enqueue on a communicator made by MPIX_Stream_comm_create from a stream created with \
                 info type=cudaStream_t or type=mpixstream_host_queue",
                StreamTable::handle(stream) as u32,
                comm as u32
            ),
        )),
        None => Err(raise(
            comm,
            Class::Stream,
            func,
            &format!(
                "the local stream 0x{:08x} of communicator 0x{:08x} has no queue: create the stream with \
                 info type=cudaStream_t or type=mpixstream_host_queue to enqueue on it",
                StreamTable::handle(stream) as u32,
                comm as u32
            ),
        )),
    }
}

/// How an operation entry point hands its operation back.
enum Completion<'call> {
    /// The blocking forms: the call returns once the operation is queued; its status (a receive's,
    /// else nowhere) is written when it completes.
    Blocking(StatusDst),
    /// `MPIX_Isend_enqueue`/`MPIX_Irecv_enqueue`: a request of ours is stored in the application's
    /// argument.
    Request(AppArg<'call, MPI_Request>),
}

/// The one path of every operation entry point: checks the request pointer and the counts, finds
/// `comm`'s queue and queues `kind` on it.
fn enqueue(func: &'static str, comm: MPI_Comm, counts: &[MPI_Count], kind: Kind, done: Completion) -> c_int {
    mpix_entry(func, |rt| {
        let (status, request) = match done {
            Completion::Request(r) if r.is_empty() => {
                return raise(comm, Class::Arg, func, "the request argument is a null pointer");
            }
            Completion::Request(r) => (StatusDst::NOWHERE, Some(r)),
            Completion::Blocking(s) => (s, None),
        };
        if let Some(count) = counts.iter().find(|&&c| c < 0) {
            return raise(comm, Class::Count, func, &format!("count {count} is negative"));
        }
        let eng = match engine_for(rt, comm, func) {
            Ok(e) => e,
            Err(code) => return code,
        };
        match eng.submit(func, comm, kind, status, request) {
            Ok(()) => MPI_SUCCESS,
            Err((class, msg)) => raise(comm, class, func, &msg),
        }
    })
}

/// An entry point's call of the one path ([`enqueue`]) with its own arguments: `$func` (the entry
/// point's name), the communicator, the counts to check, the operation and how it completes.
macro_rules! enqueue {
    ($func:ident, $comm:expr, [$($count:expr),*], $kind:expr, $done:expr) => {
        enqueue(stringify!($func), $comm, &[$($count),*], $kind, $done)
    };
}

// The entry points: each turns its arguments into the operation and takes the one path.

macro_rules! p2p {
    ($send:ident, $recv:ident, $isend:ident, $irecv:ident, $cnt:ty) => {
        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $send(
            buf: *const c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            let count = count as MPI_Count;
            let kind =
                // SAFETY: the application's buffers for this operation, valid until it completes (MPI's rule).
                unsafe { Kind::Send { buf: PendingBuf::new(buf.cast_mut(), count, datatype), dest, tag } };
            enqueue!($send, comm, [count], kind, Completion::Blocking(StatusDst::NOWHERE))
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $recv(
            buf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            source: c_int,
            tag: c_int,
            comm: MPI_Comm,
            status: *mut MPI_Status,
        ) -> c_int {
            let count = count as MPI_Count;
            // SAFETY: the application's buffers for this operation, valid until it completes (MPI's rule).
            let kind = unsafe { Kind::Recv { buf: PendingBuf::new(buf, count, datatype), source, tag } };
            // SAFETY: the application's status for this operation: null, ignored, or writable until it
            // completes (MPI's rule for a queued call).
            let done = Completion::Blocking(unsafe { StatusDst::new(status) });
            enqueue!($recv, comm, [count], kind, done)
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $isend(
            buf: *const c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            let count = count as MPI_Count;
            let kind =
                // SAFETY: the application's buffers for this operation, valid until it completes (MPI's rule).
                unsafe { Kind::Send { buf: PendingBuf::new(buf.cast_mut(), count, datatype), dest, tag } };
            let scope = CallScope::new();
            // SAFETY: the application's request argument: null (refused) or writable during the call.
            let done = Completion::Request(unsafe { AppArg::new(&scope, request) });
            enqueue!($isend, comm, [count], kind, done)
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $irecv(
            buf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            source: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            let count = count as MPI_Count;
            // SAFETY: the application's buffers for this operation, valid until it completes (MPI's rule).
            let kind = unsafe { Kind::Recv { buf: PendingBuf::new(buf, count, datatype), source, tag } };
            let scope = CallScope::new();
            // SAFETY: the application's request argument: null (refused) or writable during the call.
            let done = Completion::Request(unsafe { AppArg::new(&scope, request) });
            enqueue!($irecv, comm, [count], kind, done)
        }
    };
}

p2p!(MPIX_Send_enqueue, MPIX_Recv_enqueue, MPIX_Isend_enqueue, MPIX_Irecv_enqueue, c_int);
p2p!(MPIX_Send_enqueue_c, MPIX_Recv_enqueue_c, MPIX_Isend_enqueue_c, MPIX_Irecv_enqueue_c, MPI_Count);

macro_rules! collectives {
    ($allreduce:ident, $bcast:ident, $reduce:ident, $allgather:ident, $alltoall:ident, $cnt:ty) => {
        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $allreduce(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            op: MPI_Op,
            comm: MPI_Comm,
        ) -> c_int {
            let count = count as MPI_Count;
            let (sbuf, op) = (sendbuf.cast_mut(), mpi::Op(op));
            let kind =
                // SAFETY: the application's buffers for this operation, each with the call's count and
                // datatype, valid until it completes (MPI's rule).
                unsafe { Kind::Allreduce { sbuf: PendingBuf::new(sbuf, count, datatype), rbuf: PendingBuf::new(recvbuf, count, datatype), op } };
            enqueue!($allreduce, comm, [count], kind, Completion::Blocking(StatusDst::NOWHERE))
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $bcast(
            buffer: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            let count = count as MPI_Count;
            // SAFETY: the application's buffers for this operation, valid until it completes (MPI's rule).
            let kind = unsafe { Kind::Bcast { buf: PendingBuf::new(buffer, count, datatype), root } };
            enqueue!($bcast, comm, [count], kind, Completion::Blocking(StatusDst::NOWHERE))
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $reduce(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            op: MPI_Op,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            let count = count as MPI_Count;
            let (sbuf, op) = (sendbuf.cast_mut(), mpi::Op(op));
            let kind =
                // SAFETY: the application's buffers for this operation, each with the call's count and
                // datatype, valid until it completes (MPI's rule).
                unsafe { Kind::Reduce { sbuf: PendingBuf::new(sbuf, count, datatype), rbuf: PendingBuf::new(recvbuf, count, datatype), op, root } };
            enqueue!($reduce, comm, [count], kind, Completion::Blocking(StatusDst::NOWHERE))
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $allgather(
            sendbuf: *const c_void,
            sendcount: $cnt,
            sendtype: MPI_Datatype,
            recvbuf: *mut c_void,
            recvcount: $cnt,
            recvtype: MPI_Datatype,
            comm: MPI_Comm,
        ) -> c_int {
            let (scount, rcount) = (sendcount as MPI_Count, recvcount as MPI_Count);
            let sbuf = sendbuf.cast_mut();
            // SAFETY: the application's buffers for this operation, each with its count (per process) and
            // datatype in the call, valid until it completes (MPI's rule).
            let kind = unsafe {
                Kind::Allgather { sbuf: PendingBuf::new(sbuf, scount, sendtype), rbuf: PendingBuf::new(recvbuf, rcount, recvtype) }
            };
            enqueue!($allgather, comm, [scount, rcount], kind, Completion::Blocking(StatusDst::NOWHERE))
        }

        /// # Safety
        /// A C entry point: the arguments are as MPI defines them for the call ([`enqueue`]).
        #[no_mangle]
        pub unsafe extern "C" fn $alltoall(
            sendbuf: *const c_void,
            sendcount: $cnt,
            sendtype: MPI_Datatype,
            recvbuf: *mut c_void,
            recvcount: $cnt,
            recvtype: MPI_Datatype,
            comm: MPI_Comm,
        ) -> c_int {
            let (scount, rcount) = (sendcount as MPI_Count, recvcount as MPI_Count);
            let sbuf = sendbuf.cast_mut();
            // SAFETY: the application's buffers for this operation, each with its count (per process) and
            // datatype in the call, valid until it completes (MPI's rule).
            let kind = unsafe {
                Kind::Alltoall { sbuf: PendingBuf::new(sbuf, scount, sendtype), rbuf: PendingBuf::new(recvbuf, rcount, recvtype) }
            };
            enqueue!($alltoall, comm, [scount, rcount], kind, Completion::Blocking(StatusDst::NOWHERE))
        }
    };
}

collectives!(
    MPIX_Allreduce_enqueue,
    MPIX_Bcast_enqueue,
    MPIX_Reduce_enqueue,
    MPIX_Allgather_enqueue,
    MPIX_Alltoall_enqueue,
    c_int
);
collectives!(
    MPIX_Allreduce_enqueue_c,
    MPIX_Bcast_enqueue_c,
    MPIX_Reduce_enqueue_c,
    MPIX_Allgather_enqueue_c,
    MPIX_Alltoall_enqueue_c,
    MPI_Count
);

#[no_mangle]
pub extern "C" fn MPIX_Barrier_enqueue(comm: MPI_Comm) -> c_int {
    enqueue!(MPIX_Barrier_enqueue, comm, [], Kind::Barrier, Completion::Blocking(StatusDst::NOWHERE))
}

/// Checks `requests` (all ours, live, of one stream) and queues their waits. Null requests are
/// skipped (their statuses set empty); requests are set to `MPI_REQUEST_NULL`.
fn wait_enqueue(func: &'static str, requests: &mut [MPI_Request], statuses: &[StatusDst]) -> c_int {
    let mut eng: Option<EngineRef> = None;
    let mut live = Vec::new();
    let mut dsts = Vec::new();
    for (i, &h) in requests.iter().enumerate() {
        let dst = statuses.get(i).copied().unwrap_or(StatusDst::NOWHERE);
        if h == MPI_REQUEST_NULL {
            dst.write(super::ops::empty_status());
            continue;
        }
        let not_ours = || {
            raise(
                MPI_COMM_WORLD,
                Class::Request,
                func,
                &format!(
                    "request 0x{:08x} (index {i}) is not a pending request of MPIX_Isend_enqueue/MPIX_Irecv_enqueue \
                     (already waited for, or an ordinary MPI request: use MPI_Wait for those)",
                    h as u32
                ),
            )
        };
        let Some(e) = request_stream(h).and_then(engine) else {
            return not_ours();
        };
        if !e.owns_request(h) {
            return not_ours();
        }
        match &eng {
            None => eng = Some(e),
            Some(first) if first.index != e.index => {
                return raise(
                    MPI_COMM_WORLD,
                    Class::Request,
                    func,
                    &format!(
                        "the requests belong to different streams (0x{:08x} and 0x{:08x}): all requests of one \
                         MPIX_Waitall_enqueue must come from the same local stream",
                        first.handle as u32, e.handle as u32
                    ),
                );
            }
            Some(_) => {}
        }
        live.push(h);
        dsts.push(dst);
    }
    let Some(eng) = eng else { return MPI_SUCCESS };
    let result = eng.wait_requests(&live, &dsts);
    for h in requests.iter_mut() {
        *h = MPI_REQUEST_NULL;
    }
    match result {
        Ok(()) => MPI_SUCCESS,
        Err((class, msg)) => raise(MPI_COMM_WORLD, class, func, &msg),
    }
}

/// # Safety
/// A C entry point: the arguments are as MPI defines them for the call.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Wait_enqueue(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    mpix_entry("MPIX_Wait_enqueue", |_| {
        // SAFETY: the application's request and status objects (MPI: the request readable and writable
        // for the call, the status null, MPI_STATUS_IGNORE or writable until the wait completes).
        let (request, status) = unsafe { (request.as_mut(), StatusDst::new(status)) };
        let Some(request) = request else {
            return raise(MPI_COMM_WORLD, Class::Arg, "MPIX_Wait_enqueue", "the request argument is a null pointer");
        };
        wait_enqueue("MPIX_Wait_enqueue", std::slice::from_mut(request), &[status])
    })
}

/// # Safety
/// A C entry point: the arguments are as MPI defines them for the call.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Waitall_enqueue(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    mpix_entry("MPIX_Waitall_enqueue", |_| {
        const F: &str = "MPIX_Waitall_enqueue";
        if count < 0 {
            return raise(MPI_COMM_WORLD, Class::Count, F, &format!("count {count} is negative"));
        }
        if count == 0 {
            return MPI_SUCCESS;
        }
        if array_of_requests.is_null() {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "array_of_requests is a null pointer");
        }
        let n = count as usize;
        // SAFETY: the application's arrays (MPI: `count` requests, readable and writable for the call;
        // `count` statuses, writable until the waits complete, unless MPI_STATUSES_IGNORE).
        let (reqs, dsts) = unsafe {
            let reqs = std::slice::from_raw_parts_mut(array_of_requests, n);
            let dsts: Vec<StatusDst> = if status_is_real(array_of_statuses) {
                (0..n).map(|i| StatusDst::new(array_of_statuses.add(i))).collect()
            } else {
                vec![StatusDst::NOWHERE; n]
            };
            (reqs, dsts)
        };
        wait_enqueue(F, reqs, &dsts)
    })
}

/// The host queue behind `stream`, or the error.
fn host_engine(rt: &Runtime, stream: MPIX_Stream, func: &str) -> Result<EngineRef, c_int> {
    let index = rt
        .streams
        .lookup(stream)
        .map(|(i, _)| i)
        .map_err(|e| raise(MPI_COMM_WORLD, Class::Stream, func, &e.describe(stream)))?;
    match engine(index) {
        Some(e) if matches!(e.queue, Queue::Host(_)) => Ok(e),
        _ => Err(raise(
            MPI_COMM_WORLD,
            Class::Stream,
            func,
            &format!(
                "stream 0x{:08x} is not a host queue (create it with info type=mpixstream_host_queue)",
                stream as u32
            ),
        )),
    }
}

/// Ours: runs `fn(arg)` on the host queue of `stream`, after everything queued on it before.
///
/// # Safety
/// A C entry point: the arguments are as include/mpix_stream.h defines them.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Host_queue_launch(
    stream: MPIX_Stream,
    func: Option<unsafe extern "C" fn(*mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    mpix_entry("MPIX_Host_queue_launch", |rt| {
        const F: &str = "MPIX_Host_queue_launch";
        let Some(f) = func else {
            return raise(MPI_COMM_WORLD, Class::Arg, F, "the function is a null pointer");
        };
        let eng = match host_engine(rt, stream, F) {
            Ok(e) => e,
            Err(c) => return c,
        };
        eng.launch(f, arg);
        MPI_SUCCESS
    })
}

/// Ours: waits until everything queued on `stream`'s host queue so far has run; reports the failure
/// of an enqueued operation since the last report.
#[no_mangle]
pub extern "C" fn MPIX_Host_queue_synchronize(stream: MPIX_Stream) -> c_int {
    mpix_entry("MPIX_Host_queue_synchronize", |rt| {
        const F: &str = "MPIX_Host_queue_synchronize";
        let eng = match host_engine(rt, stream, F) {
            Ok(e) => e,
            Err(c) => return c,
        };
        if let Queue::Host(q) = &eng.queue {
            if !q.synchronize(None) {
                return raise(
                    MPI_COMM_WORLD,
                    Class::Other,
                    F,
                    "the host queue was stopped before everything queued on it ran",
                );
            }
        }
        match eng.report_error(MPI_COMM_WORLD, F) {
            Ok(()) => MPI_SUCCESS,
            Err(c) => c,
        }
    })
}

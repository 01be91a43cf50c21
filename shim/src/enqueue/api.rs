//! The enqueue entry points. Prototypes are native MPICH 5's where it has the function
//! (`MPIX_Send_enqueue` ... `MPIX_Allreduce_enqueue`, and their `_c` forms); the collectives beyond
//! native follow MPI's prototypes; `MPIX_Host_queue_*` are ours (include/mpix_stream.h).
use super::engine::{Queue, QueueEngine};
use super::ops::Kind;
use super::registry::engine;
use super::requests::request_stream;
use crate::comms::Origin;
use crate::errors::{raise, Class};
use crate::runtime::mpix_entry;
use crate::runtime::Runtime;
use crate::streams::StreamTable;
use mpixstream_wrappers::ffi::*;
use std::os::raw::{c_int, c_void};

/// The engine of `comm`'s local stream, or the error (raised on `comm`).
fn engine_for(rt: &Runtime, comm: MPI_Comm, func: &str) -> Result<&'static QueueEngine, c_int> {
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

fn count_ok(count: MPI_Count, comm: MPI_Comm, func: &str) -> Result<(), c_int> {
    if count < 0 {
        return Err(raise(comm, Class::Count, func, &format!("count {count} is negative")));
    }
    Ok(())
}

/// Queues `kind` on `comm`'s stream; blocking when `request` is null.
unsafe fn enqueue(
    rt: &Runtime,
    func: &'static str,
    comm: MPI_Comm,
    kind: Kind,
    status: *mut MPI_Status,
    request: *mut MPI_Request,
) -> c_int {
    let eng = match engine_for(rt, comm, func) {
        Ok(e) => e,
        Err(code) => return code,
    };
    match eng.submit(func, comm, kind, status, request) {
        Ok(()) => MPI_SUCCESS,
        Err((class, msg)) => raise(comm, class, func, &msg),
    }
}

macro_rules! p2p {
    ($send:ident, $recv:ident, $isend:ident, $irecv:ident, $cnt:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $send(
            buf: *const c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            mpix_entry(stringify!($send), |rt| unsafe {
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($send)) {
                    return c;
                }
                let kind = Kind::Send { buf: buf as *mut c_void, count: count as MPI_Count, dt: datatype, dest, tag };
                enqueue(rt, stringify!($send), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
        }

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
            mpix_entry(stringify!($recv), |rt| unsafe {
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($recv)) {
                    return c;
                }
                let kind = Kind::Recv { buf, count: count as MPI_Count, dt: datatype, source, tag };
                enqueue(rt, stringify!($recv), comm, kind, status, std::ptr::null_mut())
            })
        }

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
            mpix_entry(stringify!($isend), |rt| unsafe {
                if request.is_null() {
                    return raise(comm, Class::Arg, stringify!($isend), "the request argument is a null pointer");
                }
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($isend)) {
                    return c;
                }
                let kind = Kind::Send { buf: buf as *mut c_void, count: count as MPI_Count, dt: datatype, dest, tag };
                enqueue(rt, stringify!($isend), comm, kind, std::ptr::null_mut(), request)
            })
        }

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
            mpix_entry(stringify!($irecv), |rt| unsafe {
                if request.is_null() {
                    return raise(comm, Class::Arg, stringify!($irecv), "the request argument is a null pointer");
                }
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($irecv)) {
                    return c;
                }
                let kind = Kind::Recv { buf, count: count as MPI_Count, dt: datatype, source, tag };
                enqueue(rt, stringify!($irecv), comm, kind, std::ptr::null_mut(), request)
            })
        }
    };
}

p2p!(MPIX_Send_enqueue, MPIX_Recv_enqueue, MPIX_Isend_enqueue, MPIX_Irecv_enqueue, c_int);
p2p!(MPIX_Send_enqueue_c, MPIX_Recv_enqueue_c, MPIX_Isend_enqueue_c, MPIX_Irecv_enqueue_c, MPI_Count);

macro_rules! collectives {
    ($allreduce:ident, $bcast:ident, $reduce:ident, $allgather:ident, $alltoall:ident, $cnt:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $allreduce(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            op: MPI_Op,
            comm: MPI_Comm,
        ) -> c_int {
            mpix_entry(stringify!($allreduce), |rt| unsafe {
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($allreduce)) {
                    return c;
                }
                let kind = Kind::Allreduce {
                    sbuf: sendbuf as *mut c_void,
                    rbuf: recvbuf,
                    count: count as MPI_Count,
                    dt: datatype,
                    op,
                };
                enqueue(rt, stringify!($allreduce), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $bcast(
            buffer: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            mpix_entry(stringify!($bcast), |rt| unsafe {
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($bcast)) {
                    return c;
                }
                let kind = Kind::Bcast { buf: buffer, count: count as MPI_Count, dt: datatype, root };
                enqueue(rt, stringify!($bcast), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
        }

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
            mpix_entry(stringify!($reduce), |rt| unsafe {
                if let Err(c) = count_ok(count as MPI_Count, comm, stringify!($reduce)) {
                    return c;
                }
                let kind = Kind::Reduce {
                    sbuf: sendbuf as *mut c_void,
                    rbuf: recvbuf,
                    count: count as MPI_Count,
                    dt: datatype,
                    op,
                    root,
                };
                enqueue(rt, stringify!($reduce), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
        }

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
            mpix_entry(stringify!($allgather), |rt| unsafe {
                for c in [sendcount as MPI_Count, recvcount as MPI_Count] {
                    if let Err(code) = count_ok(c, comm, stringify!($allgather)) {
                        return code;
                    }
                }
                let kind = Kind::Allgather {
                    sbuf: sendbuf as *mut c_void,
                    scount: sendcount as MPI_Count,
                    stype: sendtype,
                    rbuf: recvbuf,
                    rcount: recvcount as MPI_Count,
                    rtype: recvtype,
                };
                enqueue(rt, stringify!($allgather), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
        }

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
            mpix_entry(stringify!($alltoall), |rt| unsafe {
                for c in [sendcount as MPI_Count, recvcount as MPI_Count] {
                    if let Err(code) = count_ok(c, comm, stringify!($alltoall)) {
                        return code;
                    }
                }
                let kind = Kind::Alltoall {
                    sbuf: sendbuf as *mut c_void,
                    scount: sendcount as MPI_Count,
                    stype: sendtype,
                    rbuf: recvbuf,
                    rcount: recvcount as MPI_Count,
                    rtype: recvtype,
                };
                enqueue(rt, stringify!($alltoall), comm, kind, std::ptr::null_mut(), std::ptr::null_mut())
            })
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
pub unsafe extern "C" fn MPIX_Barrier_enqueue(comm: MPI_Comm) -> c_int {
    mpix_entry("MPIX_Barrier_enqueue", |rt| unsafe {
        enqueue(rt, "MPIX_Barrier_enqueue", comm, Kind::Barrier, std::ptr::null_mut(), std::ptr::null_mut())
    })
}

/// Checks `requests` (all ours, live, of one stream) and queues their waits. Null requests are
/// skipped (their statuses set empty); requests are set to `MPI_REQUEST_NULL`.
unsafe fn wait_enqueue(func: &'static str, requests: &mut [MPI_Request], statuses: &[*mut MPI_Status]) -> c_int {
    let mut eng: Option<&'static QueueEngine> = None;
    let mut live = Vec::new();
    let mut dsts = Vec::new();
    for (i, &h) in requests.iter().enumerate() {
        let dst = statuses.get(i).copied().unwrap_or(std::ptr::null_mut());
        if h == MPI_REQUEST_NULL {
            if status_is_real(dst) {
                *dst = super::ops::empty_status();
            }
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

#[no_mangle]
pub unsafe extern "C" fn MPIX_Wait_enqueue(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    mpix_entry("MPIX_Wait_enqueue", |_| unsafe {
        if request.is_null() {
            return raise(MPI_COMM_WORLD, Class::Arg, "MPIX_Wait_enqueue", "the request argument is a null pointer");
        }
        wait_enqueue("MPIX_Wait_enqueue", std::slice::from_raw_parts_mut(request, 1), &[status])
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPIX_Waitall_enqueue(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    mpix_entry("MPIX_Waitall_enqueue", |_| unsafe {
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
        let reqs = std::slice::from_raw_parts_mut(array_of_requests, count as usize);
        let dsts: Vec<*mut MPI_Status> = if status_is_real(array_of_statuses) {
            (0..count as usize).map(|i| array_of_statuses.add(i)).collect()
        } else {
            vec![std::ptr::null_mut(); count as usize]
        };
        wait_enqueue(F, reqs, &dsts)
    })
}

/// The host queue behind `stream`, or the error.
fn host_engine(rt: &Runtime, stream: MPIX_Stream, func: &str) -> Result<&'static QueueEngine, c_int> {
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
pub unsafe extern "C" fn MPIX_Host_queue_synchronize(stream: MPIX_Stream) -> c_int {
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

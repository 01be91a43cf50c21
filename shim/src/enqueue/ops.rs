//! The operations that can be enqueued, and how the driving thread starts each one: always as the
//! nonblocking MPI call, completed by `MPI_Test` in the engine's loop (so one thread keeps every
//! operation of the stream moving, and never blocks inside MPI).
use mpixstream_wrappers::app::Pending;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{self, Comm, Datatype, MpiResult, OwnedRequest};
use std::os::raw::{c_int, c_void};

/// MPICH's `MPI_IN_PLACE`, `(void *) -1`.
pub const MPI_IN_PLACE: *mut c_void = usize::MAX as *mut c_void;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Send {
        buf: Pending<c_void>,
        count: MPI_Count,
        dt: Datatype,
        dest: c_int,
        tag: c_int,
    },
    Recv {
        buf: Pending<c_void>,
        count: MPI_Count,
        dt: Datatype,
        source: c_int,
        tag: c_int,
    },
    Barrier,
    Bcast {
        buf: Pending<c_void>,
        count: MPI_Count,
        dt: Datatype,
        root: c_int,
    },
    Reduce {
        sbuf: Pending<c_void>,
        rbuf: Pending<c_void>,
        count: MPI_Count,
        dt: Datatype,
        op: mpi::Op,
        root: c_int,
    },
    Allreduce {
        sbuf: Pending<c_void>,
        rbuf: Pending<c_void>,
        count: MPI_Count,
        dt: Datatype,
        op: mpi::Op,
    },
    Allgather {
        sbuf: Pending<c_void>,
        scount: MPI_Count,
        stype: Datatype,
        rbuf: Pending<c_void>,
        rcount: MPI_Count,
        rtype: Datatype,
    },
    Alltoall {
        sbuf: Pending<c_void>,
        scount: MPI_Count,
        stype: Datatype,
        rbuf: Pending<c_void>,
        rcount: MPI_Count,
        rtype: Datatype,
    },
}

/// One buffer of an operation on this rank, as staging sees it: which argument, its extent in
/// elements of `dt`, and whether the operation reads it (input) and/or writes it (output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub which: Which,
    pub ptr: *mut c_void,
    pub count: MPI_Count,
    pub dt: Datatype,
    pub input: bool,
    pub output: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Send,
    Recv,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Send { .. } => "send",
            Kind::Recv { .. } => "receive",
            Kind::Barrier => "barrier",
            Kind::Bcast { .. } => "broadcast",
            Kind::Reduce { .. } => "reduce",
            Kind::Allreduce { .. } => "allreduce",
            Kind::Allgather { .. } => "allgather",
            Kind::Alltoall { .. } => "alltoall",
        }
    }

    /// The buffers this rank's part of the operation reads and writes (`rank`, `size`: in `comm`).
    pub fn buffers(&self, rank: c_int, size: c_int) -> Vec<Buf> {
        let n = size.max(0) as MPI_Count;
        let b = |which, ptr: Pending<c_void>, count, dt, input, output| Buf {
            which,
            ptr: ptr.ptr(),
            count,
            dt,
            input,
            output,
        };
        match *self {
            Kind::Send { buf, count, dt, .. } => vec![b(Which::Send, buf, count, dt, true, false)],
            Kind::Recv { buf, count, dt, .. } => vec![b(Which::Recv, buf, count, dt, false, true)],
            Kind::Barrier => vec![],
            Kind::Bcast { buf, count, dt, root } => vec![b(Which::Recv, buf, count, dt, rank == root, rank != root)],
            Kind::Reduce { sbuf, rbuf, count, dt, root, .. } => {
                if rank == root && sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, count, dt, true, true)]
                } else if rank == root {
                    vec![b(Which::Send, sbuf, count, dt, true, false), b(Which::Recv, rbuf, count, dt, false, true)]
                } else {
                    vec![b(Which::Send, sbuf, count, dt, true, false)]
                }
            }
            Kind::Allreduce { sbuf, rbuf, count, dt, .. } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, count, dt, true, true)]
                } else {
                    vec![b(Which::Send, sbuf, count, dt, true, false), b(Which::Recv, rbuf, count, dt, false, true)]
                }
            }
            Kind::Allgather { sbuf, scount, stype, rbuf, rcount, rtype } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, rcount * n, rtype, true, true)]
                } else {
                    vec![
                        b(Which::Send, sbuf, scount, stype, true, false),
                        b(Which::Recv, rbuf, rcount * n, rtype, false, true),
                    ]
                }
            }
            Kind::Alltoall { sbuf, scount, stype, rbuf, rcount, rtype } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, rcount * n, rtype, true, true)]
                } else {
                    vec![
                        b(Which::Send, sbuf, scount * n, stype, true, false),
                        b(Which::Recv, rbuf, rcount * n, rtype, false, true),
                    ]
                }
            }
        }
    }

    /// Replaces one buffer argument (staging).
    pub fn set_buffer(&mut self, which: Which, ptr: Pending<c_void>) {
        match (self, which) {
            (Kind::Send { buf, .. }, Which::Send) => *buf = ptr,
            (Kind::Recv { buf, .. } | Kind::Bcast { buf, .. }, Which::Recv) => *buf = ptr,
            (
                Kind::Reduce { sbuf, .. }
                | Kind::Allreduce { sbuf, .. }
                | Kind::Allgather { sbuf, .. }
                | Kind::Alltoall { sbuf, .. },
                Which::Send,
            ) => *sbuf = ptr,
            (
                Kind::Reduce { rbuf, .. }
                | Kind::Allreduce { rbuf, .. }
                | Kind::Allgather { rbuf, .. }
                | Kind::Alltoall { rbuf, .. },
                Which::Recv,
            ) => *rbuf = ptr,
            _ => {}
        }
    }

    /// Whether the operation is a receive (the only kind whose cancellation is meaningful).
    pub fn is_recv(&self) -> bool {
        matches!(self, Kind::Recv { .. })
    }
}

/// One enqueued operation, on its way to the thread that starts it (its buffers the application's for it,
/// `Pending` until it completes, or staging's copies of them).
pub struct Op {
    /// Its place in the stream's queue (CUDA: the flag words' sequence number).
    pub seq: u32,
    pub comm: MPI_Comm,
    kind: Kind,
    /// Our request handle (nonblocking forms): the status goes through the request table.
    pub request: Option<MPI_Request>,
    /// The index of its communicator's counter of incomplete operations (the ledger's).
    pub comm_slot: u16,
    /// Where a blocking receive's status goes.
    pub status: StatusDst,
    /// Which call queued it (for error messages).
    pub func: &'static str,
}

impl Op {
    pub fn new(
        seq: u32,
        comm: MPI_Comm,
        kind: Kind,
        request: Option<MPI_Request>,
        comm_slot: u16,
        status: StatusDst,
        func: &'static str,
    ) -> Op {
        Op { seq, comm, kind, request, comm_slot, status, func }
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// Starts the operation on its communicator.
    pub fn start(&self) -> MpiResult<OwnedRequest> {
        let comm = Comm(self.comm);
        {
            match self.kind {
                // The int forms where the count fits (the typed layer picks them): MPICH's large-count
                // entry points take a slower path (measured on Debian's 4.0.2).
                Kind::Send { buf, count, dt, dest, tag } => comm.isend(buf, count, dt, dest, tag),
                Kind::Recv { buf, count, dt, source, tag } => comm.irecv(buf, count, dt, source, tag),
                Kind::Barrier => comm.ibarrier(),
                Kind::Bcast { buf, count, dt, root } => comm.ibcast(buf, count, dt, root),
                Kind::Reduce { sbuf, rbuf, count, dt, op, root } => comm.ireduce(sbuf, rbuf, count, dt, op, root),
                Kind::Allreduce { sbuf, rbuf, count, dt, op } => comm.iallreduce(sbuf, rbuf, count, dt, op),
                Kind::Allgather { sbuf, scount, stype, rbuf, rcount, rtype } => {
                    comm.iallgather(sbuf, scount, stype, rbuf, rcount, rtype)
                }
                Kind::Alltoall { sbuf, scount, stype, rbuf, rcount, rtype } => {
                    comm.ialltoall(sbuf, scount, stype, rbuf, rcount, rtype)
                }
            }
        }
    }
}

/// Where an operation's status goes (`app::PendingStatus`: the application's status object, or nowhere).
pub use mpixstream_wrappers::app::PendingStatus as StatusDst;

/// The status MPI gives a null or cancelled-before-start request.
pub fn empty_status() -> MPI_Status {
    MPI_Status {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_follow_in_place_and_root() {
        // SAFETY: addresses only: no operation is started on them.
        let (s, r, in_place) = unsafe {
            (Pending::new(0x10 as *mut c_void), Pending::new(0x20 as *mut c_void), Pending::new(MPI_IN_PLACE))
        };
        let k = Kind::Allreduce { sbuf: in_place, rbuf: r, count: 3, dt: Datatype::INT, op: mpi::Op::SUM };
        assert_eq!(
            k.buffers(0, 2),
            vec![Buf { which: Which::Recv, ptr: r.ptr(), count: 3, dt: Datatype::INT, input: true, output: true }]
        );
        let k = Kind::Reduce { sbuf: s, rbuf: r, count: 3, dt: Datatype::INT, op: mpi::Op::SUM, root: 1 };
        assert_eq!(k.buffers(0, 2).len(), 1);
        assert_eq!(k.buffers(1, 2).len(), 2);
        let k = Kind::Alltoall { sbuf: s, scount: 2, stype: Datatype::INT, rbuf: r, rcount: 2, rtype: Datatype::INT };
        let b = k.buffers(0, 4);
        assert_eq!((b[0].count, b[1].count), (8, 8));
        let mut k = Kind::Bcast { buf: s, count: 1, dt: Datatype::INT, root: 0 };
        assert!(k.buffers(0, 2)[0].input && !k.buffers(0, 2)[0].output);
        assert!(!k.buffers(1, 2)[0].input && k.buffers(1, 2)[0].output);
        k.set_buffer(Which::Recv, r);
        assert!(matches!(k, Kind::Bcast { buf, .. } if buf == r));
    }
}

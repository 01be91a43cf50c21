//! The operations that can be enqueued, and how the driving thread starts each one: always as the
//! nonblocking MPI call, completed by `MPI_Test` in the engine's loop (so one thread keeps every
//! operation of the stream moving, and never blocks inside MPI).
use mpixstream_wrappers::app::PendingBuf;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{self, Comm, Datatype, MpiResult, OwnedRequest};
use std::os::raw::{c_int, c_void};

/// MPICH's `MPI_IN_PLACE`, `(void *) -1`.
pub const MPI_IN_PLACE: *mut c_void = usize::MAX as *mut c_void;

/// An enqueued operation: each buffer the application's (`PendingBuf`: with its call's count and
/// datatype), or staging's copy of it.
#[derive(Debug)]
pub enum Kind {
    Send {
        buf: PendingBuf,
        dest: c_int,
        tag: c_int,
    },
    Recv {
        buf: PendingBuf,
        source: c_int,
        tag: c_int,
    },
    Barrier,
    Bcast {
        buf: PendingBuf,
        root: c_int,
    },
    Reduce {
        sbuf: PendingBuf,
        rbuf: PendingBuf,
        op: mpi::Op,
        root: c_int,
    },
    Allreduce {
        sbuf: PendingBuf,
        rbuf: PendingBuf,
        op: mpi::Op,
    },
    /// Counts per process, as the call gives them.
    Allgather {
        sbuf: PendingBuf,
        rbuf: PendingBuf,
    },
    Alltoall {
        sbuf: PendingBuf,
        rbuf: PendingBuf,
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
        // `per`: elements of the buffer per count (the group size for a buffer of one part per process).
        let b = |which, buf: &PendingBuf, per: MPI_Count, input, output| Buf {
            which,
            ptr: buf.ptr(),
            count: buf.count() * per,
            dt: Datatype(buf.datatype()),
            input,
            output,
        };
        match self {
            Kind::Send { buf, .. } => vec![b(Which::Send, buf, 1, true, false)],
            Kind::Recv { buf, .. } => vec![b(Which::Recv, buf, 1, false, true)],
            Kind::Barrier => vec![],
            Kind::Bcast { buf, root } => vec![b(Which::Recv, buf, 1, rank == *root, rank != *root)],
            Kind::Reduce { sbuf, rbuf, root, .. } => {
                if rank == *root && sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, 1, true, true)]
                } else if rank == *root {
                    vec![b(Which::Send, sbuf, 1, true, false), b(Which::Recv, rbuf, 1, false, true)]
                } else {
                    vec![b(Which::Send, sbuf, 1, true, false)]
                }
            }
            Kind::Allreduce { sbuf, rbuf, .. } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, 1, true, true)]
                } else {
                    vec![b(Which::Send, sbuf, 1, true, false), b(Which::Recv, rbuf, 1, false, true)]
                }
            }
            Kind::Allgather { sbuf, rbuf } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, n, true, true)]
                } else {
                    vec![b(Which::Send, sbuf, 1, true, false), b(Which::Recv, rbuf, n, false, true)]
                }
            }
            Kind::Alltoall { sbuf, rbuf } => {
                if sbuf.ptr() == MPI_IN_PLACE {
                    vec![b(Which::Recv, rbuf, n, true, true)]
                } else {
                    vec![b(Which::Send, sbuf, n, true, false), b(Which::Recv, rbuf, n, false, true)]
                }
            }
        }
    }

    /// The buffer argument `which` (staging), `None` where the operation has none.
    pub fn buffer_mut(&mut self, which: Which) -> Option<&mut PendingBuf> {
        match (self, which) {
            (Kind::Send { buf, .. }, Which::Send) => Some(buf),
            (Kind::Recv { buf, .. } | Kind::Bcast { buf, .. }, Which::Recv) => Some(buf),
            (
                Kind::Reduce { sbuf, .. }
                | Kind::Allreduce { sbuf, .. }
                | Kind::Allgather { sbuf, .. }
                | Kind::Alltoall { sbuf, .. },
                Which::Send,
            ) => Some(sbuf),
            (
                Kind::Reduce { rbuf, .. }
                | Kind::Allreduce { rbuf, .. }
                | Kind::Allgather { rbuf, .. }
                | Kind::Alltoall { rbuf, .. },
                Which::Recv,
            ) => Some(rbuf),
            _ => None,
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
        // The int forms where the count fits (the typed layer picks them): MPICH's large-count entry
        // points take a slower path (measured on Debian's 4.0.2).
        match &self.kind {
            Kind::Send { buf, dest, tag } => comm.isend(buf, *dest, *tag),
            Kind::Recv { buf, source, tag } => comm.irecv(buf, *source, *tag),
            Kind::Barrier => comm.ibarrier(),
            Kind::Bcast { buf, root } => comm.ibcast(buf, *root),
            Kind::Reduce { sbuf, rbuf, op, root } => comm.ireduce(sbuf, rbuf, *op, *root),
            Kind::Allreduce { sbuf, rbuf, op } => comm.iallreduce(sbuf, rbuf, *op),
            Kind::Allgather { sbuf, rbuf } => comm.iallgather(sbuf, rbuf),
            Kind::Alltoall { sbuf, rbuf } => comm.ialltoall(sbuf, rbuf),
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
        let int = Datatype::INT.raw();
        // SAFETY: addresses only: no operation is started on them.
        let buf = |p: usize, count| unsafe { PendingBuf::new(p as *mut c_void, count, int) };
        let r = 0x20 as *mut c_void;
        let k = Kind::Allreduce { sbuf: buf(usize::MAX, 3), rbuf: buf(0x20, 3), op: mpi::Op::SUM };
        assert_eq!(
            k.buffers(0, 2),
            vec![Buf { which: Which::Recv, ptr: r, count: 3, dt: Datatype::INT, input: true, output: true }]
        );
        let k = Kind::Reduce { sbuf: buf(0x10, 3), rbuf: buf(0x20, 3), op: mpi::Op::SUM, root: 1 };
        assert_eq!(k.buffers(0, 2).len(), 1);
        assert_eq!(k.buffers(1, 2).len(), 2);
        let k = Kind::Alltoall { sbuf: buf(0x10, 2), rbuf: buf(0x20, 2) };
        let b = k.buffers(0, 4);
        assert_eq!((b[0].count, b[1].count), (8, 8));
        let mut k = Kind::Bcast { buf: buf(0x10, 1), root: 0 };
        assert!(k.buffers(0, 2)[0].input && !k.buffers(0, 2)[0].output);
        assert!(!k.buffers(1, 2)[0].input && k.buffers(1, 2)[0].output);
        let staged = k.buffer_mut(Which::Recv).expect("a broadcast has a buffer");
        // SAFETY: an address only, as above.
        unsafe { staged.retarget(r) };
        assert!(matches!(&k, Kind::Bcast { buf, .. } if buf.ptr() == r && buf.count() == 1));
        assert!(k.buffer_mut(Which::Send).is_none());
    }
}

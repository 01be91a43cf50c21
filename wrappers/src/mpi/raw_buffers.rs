//! Calls that carry the application's own buffers through (enqueued operations, routed collectives,
//! the multiplex communicators' sends and receives): each buffer comes as the application's argument
//! with the count and datatype it gave, `crate::app::AppIn` for a call that reads it before returning,
//! `crate::app::Pending` for an operation that completes later; MPICH checks counts and datatypes, the
//! argument's type carries MPI's rule on the memory.
use super::{call, check, Comm, Datatype, MpiResult, Op, OwnedRequest};
use crate::app::{AppIn, Pending};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

macro_rules! start {
    ($name:ident ( $($arg:expr),* )) => {{
        let mut req = MPI_REQUEST_NULL;
        check(call!($name($($arg),*, &mut req)))?;
        Ok(OwnedRequest::made(req))
    }};
}

impl Comm {
    /// `MPI_Isend_c` (the `int` form where the count fits, as MPICH's own binding would pick).
    pub fn isend(
        self,
        buf: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
    ) -> MpiResult<OwnedRequest> {
        match c_int::try_from(count) {
            Ok(n) => start!(PMPI_Isend(buf.ptr(), n, datatype.0, dest, tag, self.0)),
            Err(_) => start!(PMPI_Isend_c(buf.ptr(), count, datatype.0, dest, tag, self.0)),
        }
    }

    /// `MPI_Irecv_c` (the `int` form where the count fits).
    pub fn irecv(
        self,
        buf: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
    ) -> MpiResult<OwnedRequest> {
        match c_int::try_from(count) {
            Ok(n) => start!(PMPI_Irecv(buf.ptr(), n, datatype.0, source, tag, self.0)),
            Err(_) => start!(PMPI_Irecv_c(buf.ptr(), count, datatype.0, source, tag, self.0)),
        }
    }

    /// `MPI_Iallreduce_c` (the `int` form where the count fits).
    pub fn iallreduce(
        self,
        send: Pending<c_void>,
        recv: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        op: Op,
    ) -> MpiResult<OwnedRequest> {
        match c_int::try_from(count) {
            Ok(n) => start!(PMPI_Iallreduce(send.ptr(), recv.ptr(), n, datatype.0, op.0, self.0)),
            Err(_) => start!(PMPI_Iallreduce_c(send.ptr(), recv.ptr(), count, datatype.0, op.0, self.0)),
        }
    }

    /// `MPI_Ireduce_c`.
    pub fn ireduce(
        self,
        send: Pending<c_void>,
        recv: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        op: Op,
        root: c_int,
    ) -> MpiResult<OwnedRequest> {
        start!(PMPI_Ireduce_c(send.ptr(), recv.ptr(), count, datatype.0, op.0, root, self.0))
    }

    /// `MPI_Ibcast_c`.
    pub fn ibcast(
        self,
        buf: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        root: c_int,
    ) -> MpiResult<OwnedRequest> {
        start!(PMPI_Ibcast_c(buf.ptr(), count, datatype.0, root, self.0))
    }

    /// `MPI_Iallgather_c`.
    pub fn iallgather(
        self,
        send: Pending<c_void>,
        send_count: MPI_Count,
        send_type: Datatype,
        recv: Pending<c_void>,
        recv_count: MPI_Count,
        recv_type: Datatype,
    ) -> MpiResult<OwnedRequest> {
        start!(PMPI_Iallgather_c(send.ptr(), send_count, send_type.0, recv.ptr(), recv_count, recv_type.0, self.0))
    }

    /// `MPI_Ialltoall_c`.
    pub fn ialltoall(
        self,
        send: Pending<c_void>,
        send_count: MPI_Count,
        send_type: Datatype,
        recv: Pending<c_void>,
        recv_count: MPI_Count,
        recv_type: Datatype,
    ) -> MpiResult<OwnedRequest> {
        start!(PMPI_Ialltoall_c(send.ptr(), send_count, send_type.0, recv.ptr(), recv_count, recv_type.0, self.0))
    }

    /// `MPI_Pack_c` of the application's `count` elements into `out` at `*position` (advanced).
    pub fn pack(
        self,
        inbuf: AppIn<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        out: &mut [u8],
        position: &mut MPI_Count,
    ) -> MpiResult {
        check(call!(PMPI_Pack_c(
            inbuf.ptr(),
            count,
            datatype.0,
            out.as_mut_ptr().cast(),
            out.len() as MPI_Count,
            position,
            self.0
        )))
    }

    /// A send of nothing to `MPI_PROC_NULL`: a request complete at once (what a call that finished its
    /// work itself hands out).
    pub fn completed_request(self, tag: c_int) -> MpiResult<OwnedRequest> {
        start!(PMPI_Isend(std::ptr::null::<c_void>(), 0, MPI_BYTE, MPI_PROC_NULL, tag, self.0))
    }

    /// `MPI_Pack_c` of the application's `count` elements at the end of `out`, into its spare capacity
    /// (reserve the `MPI_Pack_size` bytes first): `out` grows by the bytes packed, none of them zeroed
    /// beforehand. `inbuf`: the application's argument, with its call's own `count` and `datatype`
    /// (`crate::app`).
    pub fn pack_append(
        self,
        inbuf: AppIn<c_void>,
        count: MPI_Count,
        datatype: Datatype,
        out: &mut Vec<u8>,
    ) -> MpiResult {
        let spare = out.spare_capacity_mut();
        let mut position: MPI_Count = 0;
        check(call!(PMPI_Pack_c(
            inbuf.ptr(),
            count,
            datatype.0,
            spare.as_mut_ptr().cast(),
            spare.len() as MPI_Count,
            &mut position,
            self.0
        )))?;
        let packed = (position.max(0) as usize).min(spare.len());
        // SAFETY: MPI_Pack_c wrote `position` bytes from the start of the spare capacity (never more than
        // the `outsize` it was given: its length), so they are initialised.
        unsafe { out.set_len(out.len() + packed) };
        Ok(())
    }

    /// `MPI_Unpack_c` from `packed` at `*position` (advanced) into the application's `count` elements.
    pub fn unpack(
        self,
        packed: &[u8],
        position: &mut MPI_Count,
        outbuf: Pending<c_void>,
        count: MPI_Count,
        datatype: Datatype,
    ) -> MpiResult {
        check(call!(PMPI_Unpack_c(
            packed.as_ptr().cast(),
            packed.len() as MPI_Count,
            position,
            outbuf.ptr(),
            count,
            datatype.0,
            self.0
        )))
    }
}

//! Calls that carry the application's own buffers through (enqueued operations, routed collectives,
//! the multiplex communicators' sends and receives). A buffer of an operation that completes later is a
//! `crate::app::PendingBuf`: its address with the count and datatype the application's call gave for it,
//! one value, so that these safe functions pass MPI a buffer only with its own count and datatype (the
//! pairing is asserted once, by the `unsafe` constructor). A buffer read before the call returns is a
//! `crate::app::AppIn` beside its call's count and datatype (`pack`, `pack_append`).
use super::{call, check, Comm, Datatype, MpiResult, Op, OwnedRequest};
use crate::app::{AppIn, PendingBuf};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

macro_rules! start {
    ($name:ident ( $($arg:expr),* )) => {{
        let mut req = MPI_REQUEST_NULL;
        check(call!($name($($arg),*, &mut req)))?;
        Ok(OwnedRequest::made(req))
    }};
}

/// A reduction's send buffer goes with the receive buffer's count and datatype (one pair in MPI's
/// call): where they differ (or the send is `MPI_IN_PLACE`, which has none), the receive's are MPI's,
/// and a send buffer of another count is refused rather than read past its end.
fn same_elements(send: &PendingBuf, recv: &PendingBuf) -> MpiResult {
    if send.ptr() == MPI_IN_PLACE || (send.count(), send.datatype()) == (recv.count(), recv.datatype()) {
        Ok(())
    } else {
        Err(MPI_ERR_ARG)
    }
}

impl Comm {
    /// `MPI_Isend_c` (the `int` form where the count fits, as MPICH's own binding would pick).
    pub fn isend(self, buf: &PendingBuf, dest: c_int, tag: c_int) -> MpiResult<OwnedRequest> {
        match c_int::try_from(buf.count()) {
            Ok(n) => start!(PMPI_Isend(buf.ptr(), n, buf.datatype(), dest, tag, self.0)),
            Err(_) => start!(PMPI_Isend_c(buf.ptr(), buf.count(), buf.datatype(), dest, tag, self.0)),
        }
    }

    /// `MPI_Irecv_c` (the `int` form where the count fits).
    pub fn irecv(self, buf: &PendingBuf, source: c_int, tag: c_int) -> MpiResult<OwnedRequest> {
        match c_int::try_from(buf.count()) {
            Ok(n) => start!(PMPI_Irecv(buf.ptr(), n, buf.datatype(), source, tag, self.0)),
            Err(_) => start!(PMPI_Irecv_c(buf.ptr(), buf.count(), buf.datatype(), source, tag, self.0)),
        }
    }

    /// `MPI_Iallreduce_c` (the `int` form where the count fits) of `send` into `recv` (the same count
    /// and datatype, or `send` `MPI_IN_PLACE`).
    pub fn iallreduce(self, send: &PendingBuf, recv: &PendingBuf, op: Op) -> MpiResult<OwnedRequest> {
        same_elements(send, recv)?;
        let (count, datatype) = (recv.count(), recv.datatype());
        match c_int::try_from(count) {
            Ok(n) => start!(PMPI_Iallreduce(send.ptr(), recv.ptr(), n, datatype, op.0, self.0)),
            Err(_) => start!(PMPI_Iallreduce_c(send.ptr(), recv.ptr(), count, datatype, op.0, self.0)),
        }
    }

    /// `MPI_Ireduce_c` of `send` into `recv` at `root` (as [`Comm::iallreduce`]).
    pub fn ireduce(self, send: &PendingBuf, recv: &PendingBuf, op: Op, root: c_int) -> MpiResult<OwnedRequest> {
        same_elements(send, recv)?;
        start!(PMPI_Ireduce_c(send.ptr(), recv.ptr(), recv.count(), recv.datatype(), op.0, root, self.0))
    }

    /// `MPI_Ibcast_c`.
    pub fn ibcast(self, buf: &PendingBuf, root: c_int) -> MpiResult<OwnedRequest> {
        start!(PMPI_Ibcast_c(buf.ptr(), buf.count(), buf.datatype(), root, self.0))
    }

    /// `MPI_Iallgather_c` (`recv`'s count: per process, as MPI's call takes it).
    pub fn iallgather(self, send: &PendingBuf, recv: &PendingBuf) -> MpiResult<OwnedRequest> {
        start!(PMPI_Iallgather_c(
            send.ptr(),
            send.count(),
            send.datatype(),
            recv.ptr(),
            recv.count(),
            recv.datatype(),
            self.0
        ))
    }

    /// `MPI_Ialltoall_c` (both counts per process, as MPI's call takes them).
    pub fn ialltoall(self, send: &PendingBuf, recv: &PendingBuf) -> MpiResult<OwnedRequest> {
        start!(PMPI_Ialltoall_c(
            send.ptr(),
            send.count(),
            send.datatype(),
            recv.ptr(),
            recv.count(),
            recv.datatype(),
            self.0
        ))
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

    /// `MPI_Unpack_c` from `packed` at `*position` (advanced) into the application's buffer `outbuf`, its
    /// own count and datatype.
    pub fn unpack(self, packed: &[u8], position: &mut MPI_Count, outbuf: &PendingBuf) -> MpiResult {
        check(call!(PMPI_Unpack_c(
            packed.as_ptr().cast(),
            packed.len() as MPI_Count,
            position,
            outbuf.ptr(),
            outbuf.count(),
            outbuf.datatype(),
            self.0
        )))
    }
}

/// A matched message (`MPI_Improbe`'s) being received, as bytes, into a buffer of ours
/// (`MPI_Imrecv_c`): the buffer and its request in one value, so the buffer lives until MPI has written
/// it. Dropped before it completed, it waits for it (`MPI_Wait`).
#[derive(Debug)]
pub struct MessageCopy {
    req: MPI_Request,
    /// Written by MPI until `req` completes: a heap buffer, which stays where it is when the value
    /// moves, and is let go only once `req` is `MPI_REQUEST_NULL` (`finish`, `Drop`).
    data: Box<[u8]>,
    /// The error of a receive that `test` found failed.
    failed: c_int,
}

impl MessageCopy {
    /// Starts receiving `message`, `bytes` long (its probe's byte count), into a new buffer.
    pub fn start(message: &mut MPI_Message, bytes: usize) -> MpiResult<MessageCopy> {
        let mut data = vec![0u8; bytes].into_boxed_slice();
        let mut req = MPI_REQUEST_NULL;
        check(call!(PMPI_Imrecv_c(data.as_mut_ptr().cast(), bytes as MPI_Count, MPI_BYTE, message, &mut req)))?;
        Ok(MessageCopy { req, data, failed: MPI_SUCCESS })
    }

    /// `MPI_Test`: true once every byte is in (or the receive failed: [`MessageCopy::finish`] says so).
    pub fn test(&mut self) -> bool {
        if self.req == MPI_REQUEST_NULL {
            return true;
        }
        let mut flag = 0;
        if let Err(rc) = check(call!(PMPI_Test(&mut self.req, &mut flag, MPI_STATUS_IGNORE))) {
            // A receive that failed is complete (MPICH freed its request); `finish` reports it.
            self.req = MPI_REQUEST_NULL;
            self.failed = rc;
            return true;
        }
        flag != 0
    }

    /// The bytes, after waiting for the rest (`MPI_Wait`) where needed; `Err` where the receive failed.
    pub fn finish(mut self) -> MpiResult<Box<[u8]>> {
        if self.req != MPI_REQUEST_NULL {
            let rc = check(call!(PMPI_Wait(&mut self.req, MPI_STATUS_IGNORE)));
            self.req = MPI_REQUEST_NULL;
            rc?;
        }
        check(self.failed)?;
        Ok(std::mem::take(&mut self.data))
    }
}

impl Drop for MessageCopy {
    fn drop(&mut self) {
        if self.req != MPI_REQUEST_NULL {
            let _ = call!(PMPI_Wait(&mut self.req, MPI_STATUS_IGNORE));
        }
    }
}

/// MPICH's `MPI_IN_PLACE`, `(void *) -1`.
const MPI_IN_PLACE: *mut c_void = usize::MAX as *mut c_void;

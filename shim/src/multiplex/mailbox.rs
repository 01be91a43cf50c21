//! Messages between two different indices of one process on dedicated endpoints (the split backend,
//! `endpoints`). Intel MPI carries a message between the same endpoint number on both ends: from this
//! process to itself that is one endpoint, which the sending index's thread and the receiving index's
//! thread would both drive, and Intel MPI's thread-split mode forbids that. So such a message never
//! enters MPI: the send packs it (`MPI_Pack_c`, the user's datatype) and hands it to the destination
//! index's matching engine, which gives it to the first posted receive that matches or keeps it in its
//! unexpected queue, in order with everything else it holds (`MatchingEngine::deliver_local`).
//!
//! The send is complete when it returns (MPI allows a standard send to buffer); a nonblocking one gets
//! a request that is already complete.
use super::errors::forward;
use super::Multiplex;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_int, c_void};

/// Sends `count` elements of `datatype` at `buf` from local index `si` to local index `di` (both
/// checked, `si != di`) with user tag `tag`; `request`: a nonblocking send's request, set to a
/// complete one.
#[allow(clippy::too_many_arguments)]
pub unsafe fn send(
    mx: &Multiplex,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    tag: c_int,
    si: usize,
    di: usize,
    request: Option<*mut MPI_Request>,
) -> c_int {
    let p = pmpi();
    let mut size: MPI_Count = 0;
    let rc = (p.PMPI_Pack_size_c)(count, datatype, mx.comm, &mut size);
    if rc != MPI_SUCCESS {
        return forward(mx.comm, rc);
    }
    let mut data = vec![0u8; size.max(0) as usize];
    let mut used: MPI_Count = 0;
    if size > 0 {
        let rc = (p.PMPI_Pack_c)(buf, count, datatype, data.as_mut_ptr() as *mut c_void, size, &mut used, mx.comm);
        if rc != MPI_SUCCESS {
            return forward(mx.comm, rc);
        }
    }
    data.truncate(used.max(0) as usize);
    mx.engines[di].deliver_local(mx, si as c_int, tag, data.into_boxed_slice());
    match request {
        // A send to MPI_PROC_NULL: a request MPICH completes at once, with the usual status.
        Some(r) => forward(mx.comm, (p.PMPI_Isend)(buf, 0, MPI_BYTE, MPI_PROC_NULL, 0, mx.comm, r)),
        None => MPI_SUCCESS,
    }
}

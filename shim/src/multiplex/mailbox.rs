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
use mpixstream_wrappers::app::{AppArg, AppIn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Datatype};
use std::os::raw::{c_int, c_void};

/// Sends `count` elements of `datatype` at `buf` from local index `si` to local index `di` (both
/// checked, `si != di`) with user tag `tag`; `buf`: the application's send buffer (packed before the
/// call returns); `request`: a nonblocking send's request, set to a complete one.
#[allow(clippy::too_many_arguments)]
pub fn send(
    mx: &Multiplex,
    buf: AppIn<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    tag: c_int,
    si: usize,
    di: usize,
    request: Option<AppArg<MPI_Request>>,
) -> c_int {
    let comm = Comm(mx.comm);
    let size = match comm.pack_size(count, Datatype(datatype)) {
        Ok(size) => size,
        Err(rc) => return forward(mx.comm, rc),
    };
    let mut data = vec![0u8; size.max(0) as usize];
    let mut used: MPI_Count = 0;
    if size > 0 {
        // `data` holds the `size` bytes MPI_Pack_size asked for.
        if let Err(rc) = comm.pack(buf, count, Datatype(datatype), &mut data, &mut used) {
            return forward(mx.comm, rc);
        }
    }
    data.truncate(used.max(0) as usize);
    mx.engines[di].deliver_local(mx, si as c_int, tag, data.into_boxed_slice());
    match request {
        // A send to MPI_PROC_NULL: a request MPICH completes at once, with the usual status.
        Some(r) => match comm.completed_request(0) {
            Ok(req) => {
                r.set(req.raw());
                MPI_SUCCESS
            }
            Err(rc) => forward(mx.comm, rc),
        },
        None => MPI_SUCCESS,
    }
}

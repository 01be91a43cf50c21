//! Serial backend: MPICH without native streams. A stream communicator is a duplicate of its parent;
//! every stream shares MPICH's endpoint. Correct, serialised, and honest about it in the banner.
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, MpiResult, OwnedComm};
use std::os::raw::c_int;

pub fn stream_comm_create(parent: Comm) -> MpiResult<OwnedComm> {
    parent.dup()
}

/// One turn of MPICH's progress engine: `MPI_Iprobe` on a private communicator that never carries a
/// message, so it matches nothing and only progresses.
pub fn global_progress(quiet_comm: MPI_Comm) -> c_int {
    Comm(quiet_comm).iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG).err().unwrap_or(MPI_SUCCESS)
}

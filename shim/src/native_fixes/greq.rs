//! Pieces shared by the generalized requests this library hands out (nonblocking collectives on
//! native stream communicators, `wrapped_collectives.rs`; multiplex `MPI_Comm_idup`,
//! `multiplex/idup.rs`).
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi;
use std::os::raw::{c_int, c_void};

/// The body of a generalized request's wait function: MPICH calls it in a loop for the requests of
/// one `MPI_Wait*`, and each call polls every request once.
pub(crate) unsafe fn poll_each(
    count: c_int,
    states: *mut *mut c_void,
    poll: unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int,
) -> c_int {
    for i in 0..count.max(0) as usize {
        poll(*states.add(i), std::ptr::null_mut());
    }
    MPI_SUCCESS
}

/// A collective's status (of a generalized request's query function): nothing but the error, which
/// it returns; MPICH reads source and tag as "any".
pub(crate) unsafe fn collective_status(status: *mut MPI_Status, error: c_int) -> c_int {
    let p = pmpi::pmpi();
    (*status).MPI_SOURCE = MPI_ANY_SOURCE;
    (*status).MPI_TAG = MPI_ANY_TAG;
    (p.PMPI_Status_set_elements_x)(status, MPI_BYTE, 0);
    (p.PMPI_Status_set_cancelled)(status, 0);
    error
}

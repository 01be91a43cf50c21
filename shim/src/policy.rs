//! The explicit endpoint policy for unmodified programs: each communicator the application creates
//! gets its own stream, so codes that give each thread its own communicator get dedicated endpoints.
//! The policy is the user's assertion that each such communicator is used by one thread at a time.
use crate::backend::Backend;
use crate::comms::{CommEntry, Origin};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the policy did, for the report.
#[derive(Default)]
pub struct PolicyStats {
    pub attached: AtomicU64,
    /// Left on the implicit pool because every stream was taken.
    pub exhausted: AtomicU64,
    /// Left on the implicit pool because MPICH refused a native stream.
    pub refused: AtomicU64,
    /// Left implicit because the constructor was nonblocking (`MPI_Comm_idup*`: attaching a stream is a
    /// blocking collective, which would change the program's synchronisation).
    pub nonblocking: AtomicU64,
    /// Left implicit: intercommunicators have no stream communicators.
    pub intercomm: AtomicU64,
    /// Native streams whose communicators were freed, kept until `MPI_Finalize` (see `release_stream`).
    pub retired: AtomicU64,
}

pub static STATS: PolicyStats = PolicyStats {
    attached: AtomicU64::new(0),
    exhausted: AtomicU64::new(0),
    refused: AtomicU64::new(0),
    nonblocking: AtomicU64::new(0),
    intercomm: AtomicU64::new(0),
    retired: AtomicU64::new(0),
};

/// Gives the new communicator `*newcomm` a stream of its own. On the native backend this replaces it
/// with a native stream communicator (a collective every member makes, whether or not its own pool is
/// exhausted, so that all members take the same path).
pub unsafe fn attach_stream(rt: &Runtime, kind: CommCtor, newcomm: *mut MPI_Comm) -> c_int {
    let p = pmpi();
    if !kind.is_blocking() {
        STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
        return MPI_SUCCESS;
    }
    let mut inter = 0;
    (p.PMPI_Comm_test_inter)(*newcomm, &mut inter);
    if inter != 0 {
        STATS.intercomm.fetch_add(1, Ordering::Relaxed);
        return MPI_SUCCESS;
    }
    let mut index = rt.streams.allocate();
    if index.is_none() {
        STATS.exhausted.fetch_add(1, Ordering::Relaxed);
    }
    let mut native = MPIX_STREAM_NULL;
    if let Some(i) = index {
        match rt.backend.create_stream() {
            Ok(n) => {
                native = n;
                let slot = rt.streams.slot(i);
                slot.native.store(native, Ordering::Release);
                slot.policy_owned.store(true, Ordering::Release);
            }
            Err(e) => {
                // MPICH refused the endpoint: this process attaches MPIX_STREAM_NULL, but still takes
                // part in the collective below, as its peers do.
                eprintln!("mpixstream: explicit policy: {e}; this communicator stays implicit here");
                STATS.refused.fetch_add(1, Ordering::Relaxed);
                rt.streams.release(i);
                index = None;
            }
        }
    }
    if rt.backend == Backend::Native {
        let mut streamed = MPI_COMM_NULL;
        let rc = rt.backend.stream_comm_create(*newcomm, native, &mut streamed);
        if rc != MPI_SUCCESS {
            if let Some(i) = index {
                // No communicator ever used it: MPICH holds no reference, so it can go at once.
                let _ = rt.backend.free_stream(native);
                rt.streams.release(i);
            }
            return rc;
        }
        (p.PMPI_Comm_free)(newcomm);
        *newcomm = streamed;
    }
    finish(rt, index, *newcomm)
}

fn finish(rt: &Runtime, index: Option<usize>, comm: MPI_Comm) -> c_int {
    if let Some(i) = index {
        rt.comms.attach(&rt.streams, comm, CommEntry { stream: i, origin: Origin::Policy });
        STATS.attached.fetch_add(1, Ordering::Relaxed);
    }
    MPI_SUCCESS
}

/// Gives back a stream the policy created, once the last communicator using it is freed.
///
/// On the native backend the stream is retired, not freed: `MPI_Comm_free` only marks a communicator
/// for deallocation, and MPICH keeps its reference to the native stream while operations on it are
/// pending (a buffered send, a request not yet waited for), so freeing the native stream now could fail
/// inside MPICH, whose error handler aborts. A retired stream keeps its slot until `MPI_Finalize`; once
/// the pool is used up, later communicators stay implicit, which the report counts.
pub fn release_stream(rt: &Runtime, index: usize) {
    if rt.backend == Backend::Native {
        STATS.retired.fetch_add(1, Ordering::Relaxed);
        return;
    }
    rt.streams.release(index);
}

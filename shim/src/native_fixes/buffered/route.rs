//! The routed buffered send itself (pack, `MPI_Isend_c`, one test, the lane) and the attached buffer
//! whose size bounds the routed messages' space.
use super::lanes::{drain, others, with_own_lane, Held, IN_FLIGHT};
use crate::native_fixes::native_streams::native_stream_index_of;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI64, Ordering};

/// MPICH's `MPI_BSEND_OVERHEAD` (96 in the `mpi.h` of 4.0.2 and 5.0.2): the space each buffered
/// message takes in the attached buffer besides its packed bytes.
const BSEND_OVERHEAD: i64 = 96;
/// MPI 4.1's `MPI_BUFFER_AUTOMATIC` (MPICH: `(void *) -2`): a buffer that never runs out.
const MPI_BUFFER_AUTOMATIC: *mut c_void = -2isize as *mut c_void;

/// Size of the buffer attached with `MPI_Buffer_attach` (0: none; `i64::MAX`: automatic).
static ATTACHED: AtomicI64 = AtomicI64::new(0);
/// A message up to this size (packed) leaves without the receiver matching it (eager protocols: below
/// MPICH's shared-memory cell, 8 KiB, and its single-copy threshold, `MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`
/// = 8 KiB); a larger one may need the receiver to match it first.
const DEPART_MAX_BYTES: i64 = 4096;

/// After `MPI_Buffer_attach(_c)`.
fn attached(rc: c_int, buffer: *mut c_void, size: i64) -> c_int {
    if rc == MPI_SUCCESS {
        let size = if buffer == MPI_BUFFER_AUTOMATIC { i64::MAX } else { size.max(0) };
        ATTACHED.store(size, Ordering::Release);
    }
    rc
}

pub unsafe fn buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    attached(next!(MPI_Buffer_attach)(buffer, size), buffer, size as i64)
}

pub unsafe fn buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    attached(next!(MPI_Buffer_attach_c)(buffer, size), buffer, size)
}

pub unsafe fn buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    drain();
    let rc = next!(MPI_Buffer_detach)(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

pub unsafe fn buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    drain();
    let rc = next!(MPI_Buffer_detach_c)(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

/// What one try of a routed send did.
enum Try {
    /// Sent (or failed with this code).
    Done(c_int),
    /// No space now.
    Wait,
    /// MPICH's own call: the buffer was detached or shrank meanwhile.
    Mpich,
}

/// The routed buffered send of `count` elements of `datatype` at `buf` (see the module doc). `mpich`
/// makes MPICH's own call instead: for a message that can never fit, a send to `MPI_PROC_NULL`, or
/// arguments MPICH must judge.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn send_routed(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    let p = pmpi::pmpi();
    let mut packed: MPI_Count = 0;
    if dest == MPI_PROC_NULL || (p.PMPI_Pack_size_c)(count, datatype, comm, &mut packed) != MPI_SUCCESS {
        return mpich();
    }
    let space = packed + BSEND_OVERHEAD;
    let Some(slot) = native_stream_index_of(comm) else { return mpich() };
    if space > ATTACHED.load(Ordering::Acquire) {
        // Too large for the buffer even when empty, or no buffer: MPICH's MPI_ERR_BUFFER.
        return mpich();
    }
    loop {
        let step = with_own_lane(|lane| {
            lane.adopt(slot);
            lane.reap();
            let limit = ATTACHED.load(Ordering::Acquire);
            if space > limit {
                return Try::Mpich;
            }
            if IN_FLIGHT.fetch_add(space, Ordering::AcqRel) + space > limit {
                IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
                return Try::Wait;
            }
            let mut memory = lane.memory(packed as usize);
            let mut position: MPI_Count = 0;
            let mut rc = (p.PMPI_Pack_c)(buf, count, datatype, memory.as_mut_ptr().cast(), packed, &mut position, comm);
            let mut request = MPI_REQUEST_NULL;
            if rc == MPI_SUCCESS {
                rc = next!(MPI_Isend_c)(memory.as_ptr().cast(), position, MPI_PACKED, dest, tag, comm, &mut request);
            }
            if rc == MPI_SUCCESS {
                // One test, never a wait: a message that left at once (eager, room in the queue) gives
                // its space back now; any other stays pending (module doc).
                let mut done = 0;
                next!(MPI_Test)(&mut request, &mut done, MPI_STATUS_IGNORE);
            }
            if rc != MPI_SUCCESS || request == MPI_REQUEST_NULL {
                IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
                lane.spare.push(memory);
                return Try::Done(rc);
            }
            let mut me = MPI_PROC_NULL;
            (p.PMPI_Comm_rank)(comm, &mut me);
            let departs = packed <= DEPART_MAX_BYTES && dest != me;
            lane.push(request, Held { memory, space, slot, settled: false, departs });
            Try::Done(MPI_SUCCESS)
        });
        match step {
            Some(Try::Done(rc)) => return rc,
            Some(Try::Wait) => {
                // Our own were tested above; the other threads' may have completed unseen, and the
                // exited threads' need a driver (module doc).
                others(true);
                std::thread::yield_now();
            }
            // The buffer went away meanwhile, or this thread's lane is busy (re-entered from MPICH's
            // progress) or gone (the thread is exiting): MPICH's own call.
            Some(Try::Mpich) | None => return mpich(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MPI_BUFFER_AUTOMATIC` never runs out; a failed attach records nothing.
    #[test]
    fn attach_records_the_size_only_on_success() {
        assert_eq!(attached(MPI_ERR_BUFFER, std::ptr::null_mut(), 4096), MPI_ERR_BUFFER);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 0);
        attached(MPI_SUCCESS, MPI_BUFFER_AUTOMATIC, 0);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), i64::MAX);
        attached(MPI_SUCCESS, 0x1000 as *mut c_void, 4096);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 4096);
        ATTACHED.store(0, Ordering::Relaxed);
    }
}

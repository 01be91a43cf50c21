//! The routed buffered send itself (pack, `MPI_Isend_c`, one test, then an orphan until it completes)
//! and the attached buffer whose size bounds the routed messages' space.
use crate::forward;
use crate::native_fixes::native_streams::native_stream_index_of;
use crate::orphans::{self, MayPoll, Orphan};
use crate::runtime;
use mpixstream_wrappers::app::{AppArg, AppIn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Datatype, Request};
use mpixstream_wrappers::next;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// MPICH's `MPI_BSEND_OVERHEAD` (96 in the `mpi.h` of 4.0.2 and 5.0.2): the space each buffered
/// message takes in the attached buffer besides its packed bytes.
const BSEND_OVERHEAD: i64 = 96;
/// MPI 4.1's `MPI_BUFFER_AUTOMATIC` (MPICH: `(void *) -2`): a buffer that never runs out.
const MPI_BUFFER_AUTOMATIC: *mut c_void = -2isize as *mut c_void;

/// Size of the buffer attached with `MPI_Buffer_attach` (0: none; `i64::MAX`: automatic).
static ATTACHED: AtomicI64 = AtomicI64::new(0);
/// Space the routed messages not yet complete take (packed bytes + overhead each).
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);
/// How many routed messages are not yet complete.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// A routed message that did not complete at its first test: an orphan until it does (nobody waits
/// for a buffered send), holding its packed bytes and its space in the attached buffer.
struct Departing {
    request: MPI_Request,
    /// The packed message (MPICH reads it until the request completes).
    _memory: Vec<u8>,
    space: i64,
    /// The stream-table slot of its communicator's stream.
    slot: usize,
}

impl Orphan for Departing {
    fn stream(&self) -> Option<usize> {
        Some(self.slot)
    }

    fn poll(&mut self, _: MayPoll) -> bool {
        // Through PMPI: the tools library forgot the request when it was made (`send_routed`).
        let mut request = Request(self.request);
        let tested = request.test();
        self.request = request.raw();
        tested.is_err() || self.request == MPI_REQUEST_NULL
    }
}

impl Drop for Departing {
    fn drop(&mut self) {
        if self.request != MPI_REQUEST_NULL {
            // Failed: nobody will test it again.
            let _ = Request(self.request).free();
        }
        IN_FLIGHT.fetch_sub(self.space, Ordering::AcqRel);
        PENDING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// After `MPI_Buffer_attach(_c)`.
fn attached(rc: c_int, buffer: *mut c_void, size: i64) -> c_int {
    if rc == MPI_SUCCESS {
        let size = if buffer == MPI_BUFFER_AUTOMATIC { i64::MAX } else { size.max(0) };
        ATTACHED.store(size, Ordering::Release);
    }
    rc
}

/// `MPI_Buffer_attach`: records the buffer's size.
pub fn buffer_attach(buffer: AppArg<c_void>, size: c_int) -> c_int {
    attached(forward::MPI_Buffer_attach(buffer, size), buffer.ptr(), size as i64)
}

/// `MPI_Buffer_attach_c`: as `MPI_Buffer_attach`.
pub fn buffer_attach_c(buffer: AppArg<c_void>, size: MPI_Count) -> c_int {
    attached(forward::MPI_Buffer_attach_c(buffer, size), buffer.ptr(), size)
}

/// Before `MPI_Buffer_detach(_c)`: MPI's detach returns once every buffered message has left, ours
/// included. They complete through the progress helper; the detaching thread helps until they have.
fn drain() {
    let Some(rt) = runtime::active() else { return };
    while PENDING.load(Ordering::Acquire) != 0 {
        crate::helper::help(rt, false);
        if PENDING.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }
}

/// `MPI_Buffer_detach`: once every routed message has left.
pub fn buffer_detach(buffer_addr: AppArg<c_void>, size: AppArg<c_int>) -> c_int {
    drain();
    let rc = forward::MPI_Buffer_detach(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

/// `MPI_Buffer_detach_c`: as `MPI_Buffer_detach`.
pub fn buffer_detach_c(buffer_addr: AppArg<c_void>, size: AppArg<MPI_Count>) -> c_int {
    drain();
    let rc = forward::MPI_Buffer_detach_c(buffer_addr, size);
    if rc == MPI_SUCCESS {
        ATTACHED.store(0, Ordering::Release);
    }
    rc
}

/// Takes `space` in the attached buffer: `Some(true)` taken, `Some(false)` not now (the messages in
/// flight hold it), `None` never (the buffer went away or shrank meanwhile: MPICH's own call decides).
fn take_space(space: i64) -> Option<bool> {
    let limit = ATTACHED.load(Ordering::Acquire);
    if space > limit {
        return None;
    }
    if IN_FLIGHT.fetch_add(space, Ordering::AcqRel) + space > limit {
        IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
        return Some(false);
    }
    Some(true)
}

/// The routed buffered send of `count` elements of `datatype` at `buf` (see the module doc). `mpich`
/// makes MPICH's own call instead: for a message that can never fit, a send to `MPI_PROC_NULL`, or
/// arguments MPICH must judge. `buf`, `count`, `datatype`: the application's send buffer, read (packed)
/// within this call.
#[allow(clippy::too_many_arguments)]
pub(super) fn send_routed(
    buf: AppIn<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    let packed = match Comm(comm).pack_size(count, Datatype(datatype)) {
        Ok(packed) if dest != MPI_PROC_NULL => packed,
        _ => return mpich(),
    };
    let space = packed + BSEND_OVERHEAD;
    let (Some(slot), Some(rt)) = (native_stream_index_of(comm), runtime::active()) else { return mpich() };
    // No space now: the messages holding it complete through the helpers; this thread helps (never
    // inside the endpoint it is about to send on, so that its owner-free turn reaches it too).
    loop {
        match take_space(space) {
            None => return mpich(),
            Some(true) => break,
            Some(false) => {
                crate::helper::help(rt, false);
                std::thread::yield_now();
            }
        }
    }
    let mut memory: Vec<u8> = Vec::with_capacity(packed.max(0) as usize);
    let mut request = MPI_REQUEST_NULL;
    let rc = {
        // Inside the stream's endpoint, as any call on its communicator: the message takes its place
        // among the calling thread's messages (a buffered send and a later `MPI_Send` to the same peer
        // match in order).
        let _claim = rt.streams.slot(slot).claim();
        let mut rc = crate::native_fixes::rc(Comm(comm).pack_append(buf, count, Datatype(datatype), &mut memory));
        if rc == MPI_SUCCESS {
            // Through the next definition, so that the tools library counts the send.
            let bytes = memory.len() as MPI_Count;
            // SAFETY: the send reads the `bytes` packed into `memory`, which the orphan made of it keeps
            // (moving a Vec moves no heap memory) until the request completed (below).
            rc =
                unsafe { next!(MPI_Isend_c)(memory.as_ptr().cast(), bytes, MPI_PACKED, dest, tag, comm, &mut request) };
        }
        if rc == MPI_SUCCESS {
            // It is ours to complete from here on (the tools library must not keep an entry for it:
            // MPICH reuses the handle). One test, never a wait: a message that left at once (eager,
            // room in the queue) gives its space back now.
            crate::tools_link::tools_request_replaced(request, MPI_REQUEST_NULL);
            let mut r = Request(request);
            let _ = r.test();
            request = r.raw();
        }
        rc
    };
    if rc != MPI_SUCCESS || request == MPI_REQUEST_NULL {
        IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
        return rc;
    }
    PENDING.fetch_add(1, Ordering::AcqRel);
    orphans::adopt(Box::new(Departing { request, _memory: memory, space, slot }));
    MPI_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MPI_BUFFER_AUTOMATIC` never runs out; a failed attach records nothing; space is taken only
    /// while it fits.
    #[test]
    fn attach_records_the_size_and_bounds_the_space() {
        assert_eq!(attached(MPI_ERR_BUFFER, std::ptr::null_mut(), 4096), MPI_ERR_BUFFER);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 0);
        assert_eq!(take_space(1), None, "no buffer: never");
        attached(MPI_SUCCESS, MPI_BUFFER_AUTOMATIC, 0);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), i64::MAX);
        attached(MPI_SUCCESS, 0x1000 as *mut c_void, 4096);
        assert_eq!(ATTACHED.load(Ordering::Relaxed), 4096);
        assert_eq!(take_space(5000), None, "larger than the buffer: never");
        assert_eq!(take_space(3000), Some(true));
        assert_eq!(take_space(2000), Some(false), "held by the message in flight");
        IN_FLIGHT.fetch_sub(3000, Ordering::AcqRel);
        assert_eq!(take_space(2000), Some(true));
        IN_FLIGHT.fetch_sub(2000, Ordering::AcqRel);
        ATTACHED.store(0, Ordering::Relaxed);
    }
}

//! The routed buffered send itself (pack, `MPI_Isend_c`, one test, then an orphan until it completes)
//! and the attached buffer whose size bounds the routed messages' space.
use crate::forward;
use crate::native_fixes::native_streams::native_stream_index_of;
use crate::orphans::{self, MayPoll, MayReclaim, Orphan};
use crate::ownership::{Budget, Held, Take};
use crate::runtime;
use mpixstream_wrappers::app::{AppArg, AppIn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Datatype, OwnedRequest};
use mpixstream_wrappers::next;
use std::os::raw::{c_int, c_void};
use std::sync::LazyLock;

/// MPICH's `MPI_BSEND_OVERHEAD` (96 in the `mpi.h` of 4.0.2 and 5.0.2): the space each buffered
/// message takes in the attached buffer besides its packed bytes.
const BSEND_OVERHEAD: i64 = 96;
/// MPI 4.1's `MPI_BUFFER_AUTOMATIC` (MPICH: `(void *) -2`): a buffer that never runs out.
const MPI_BUFFER_AUTOMATIC: *mut c_void = -2isize as *mut c_void;

/// The attached buffer's space: its size (0: none; `i64::MAX`: automatic) bounds what the routed
/// messages not yet transmitted take (packed bytes + overhead each).
static SPACE: LazyLock<Budget> = LazyLock::new(Budget::new);

/// A routed message that did not complete at its first test: an orphan until it does (nobody waits
/// for a buffered send), holding its packed bytes and, until it is known transmitted, its space in the
/// attached buffer.
struct Departing {
    request: OwnedRequest,
    /// The packed message (MPICH reads it until the request completes).
    _memory: Vec<u8>,
    /// Its space, until the message is known transmitted.
    space: Option<Held>,
    /// The stream-table slot of its communicator's stream.
    slot: usize,
}

impl Departing {
    /// The message has left (or failed): its space comes back, once.
    fn transmitted(&mut self) {
        if let Some(space) = self.space.take() {
            space.give_back(&SPACE);
        }
    }
}

impl Orphan for Departing {
    fn stream(&self) -> Option<usize> {
        Some(self.slot)
    }

    fn poll(&mut self, _: MayPoll) -> bool {
        // Through PMPI: the tools library forgot the request when it was made (`send_routed`).
        let tested = self.request.test();
        tested.is_err() || self.request.is_null()
    }

    /// The endpoint's owner is inside it, maybe blocked there (`MPI_Recv` on the same communicator)
    /// while another thread waits for this space: `MPI_Request_get_status` reads the request's
    /// completion without entering the endpoint (MPICH reads its completion counter, and progresses
    /// only the implicit pool if it is not complete: docs/architecture.md, "What the protocol assumes
    /// of MPICH"), so the space comes back once the message left, as MPI has it. The request stays
    /// for a poll under the claim, which frees it.
    fn reclaim(&mut self, _: MayReclaim) {
        if self.space.is_some() && !matches!(self.request.status(), Ok(None)) {
            self.transmitted();
        }
    }
}

impl Drop for Departing {
    fn drop(&mut self) {
        if !self.request.is_null() {
            // Failed: nobody will test it again.
            let _ = self.request.take().free();
        }
        self.transmitted();
    }
}

/// After `MPI_Buffer_attach(_c)`.
fn attached(rc: c_int, buffer: *mut c_void, size: i64) -> c_int {
    if rc == MPI_SUCCESS {
        let size = if buffer == MPI_BUFFER_AUTOMATIC { i64::MAX } else { size.max(0) };
        SPACE.set_limit(size);
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
/// included (their space is back). The detaching thread helps until then, reclaiming the space of
/// messages whose endpoint another thread is inside (`Orphan::reclaim`).
fn drain() {
    let Some(rt) = runtime::active() else { return };
    while SPACE.used() != 0 {
        crate::helper::help_reclaiming(rt);
        if SPACE.used() != 0 {
            std::thread::yield_now();
        }
    }
}

/// `MPI_Buffer_detach`: once every routed message has left.
pub fn buffer_detach(buffer_addr: AppArg<c_void>, size: AppArg<c_int>) -> c_int {
    drain();
    let rc = forward::MPI_Buffer_detach(buffer_addr, size);
    if rc == MPI_SUCCESS {
        SPACE.set_limit(0);
    }
    rc
}

/// `MPI_Buffer_detach_c`: as `MPI_Buffer_detach`.
pub fn buffer_detach_c(buffer_addr: AppArg<c_void>, size: AppArg<MPI_Count>) -> c_int {
    drain();
    let rc = forward::MPI_Buffer_detach_c(buffer_addr, size);
    if rc == MPI_SUCCESS {
        SPACE.set_limit(0);
    }
    rc
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
    let (Some(slot), Some(rt)) = (native_stream_index_of(comm), runtime::active()) else { return mpich() };
    // No space now: the messages holding it complete through the helpers; this thread helps (never
    // inside the endpoint it is about to send on, so that its owner-free turn reaches it too), and
    // reclaims the space of those that left from endpoints another thread is inside (maybe blocked
    // there: nothing else would give it back).
    let space = loop {
        match SPACE.take(packed + BSEND_OVERHEAD) {
            Take::Never => return mpich(),
            Take::Taken(space) => break space,
            Take::NotNow => {
                crate::helper::help_reclaiming(rt);
                std::thread::yield_now();
            }
        }
    };
    let mut memory: Vec<u8> = Vec::with_capacity(packed.max(0) as usize);
    let mut request = OwnedRequest::null();
    let rc = {
        // Inside the stream's endpoint, as any call on its communicator: the message takes its place
        // among the calling thread's messages (a buffered send and a later `MPI_Send` to the same peer
        // match in order).
        let _claim = rt.streams.slot(slot).claim();
        let mut rc = crate::native_fixes::rc(Comm(comm).pack_append(buf, count, Datatype(datatype), &mut memory));
        if rc == MPI_SUCCESS {
            // Through the next definition, so that the tools library counts the send.
            let bytes = memory.len() as MPI_Count;
            let mut made = MPI_REQUEST_NULL;
            // SAFETY: the send reads the `bytes` packed into `memory`, which the orphan made of it keeps
            // (moving a Vec moves no heap memory) until the request completed (below). The request it
            // makes is ours alone (the program never sees it): owned from here.
            (rc, request) = unsafe {
                (
                    next!(MPI_Isend_c)(memory.as_ptr().cast(), bytes, MPI_PACKED, dest, tag, comm, &mut made),
                    OwnedRequest::from_raw(made),
                )
            };
        }
        if rc == MPI_SUCCESS {
            // It is ours to complete from here on (the tools library must not keep an entry for it:
            // MPICH reuses the handle). One test, never a wait: a message that left at once (eager,
            // room in the queue) gives its space back now.
            crate::tools_link::tools_request_replaced(request.raw(), MPI_REQUEST_NULL);
            crate::request_check::verify(rt, slot, request.raw());
            let _ = request.test();
        }
        rc
    };
    if rc != MPI_SUCCESS || request.is_null() {
        space.give_back(&SPACE);
        return rc;
    }
    orphans::adopt(Box::new(Departing { request, _memory: memory, space: Some(space), slot }));
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
        assert_eq!(SPACE.limit(), 0);
        assert_eq!(SPACE.take(1), Take::Never, "no buffer: never");
        attached(MPI_SUCCESS, MPI_BUFFER_AUTOMATIC, 0);
        assert_eq!(SPACE.limit(), i64::MAX);
        attached(MPI_SUCCESS, 0x1000 as *mut c_void, 4096);
        assert_eq!(SPACE.limit(), 4096);
        assert_eq!(SPACE.take(5000), Take::Never, "larger than the buffer: never");
        let Take::Taken(first) = SPACE.take(3000) else { panic!("3000 of 4096 free") };
        assert_eq!(SPACE.take(2000), Take::NotNow, "held by the message in flight");
        first.give_back(&SPACE);
        let Take::Taken(second) = SPACE.take(2000) else { panic!("given back") };
        second.give_back(&SPACE);
        assert_eq!(SPACE.used(), 0);
        SPACE.set_limit(0);
    }
}

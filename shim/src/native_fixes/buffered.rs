//! Buffered sends on native stream communicators (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Bsend_init` +
//! `MPI_Start`/`MPI_Startall`, and their large-count forms).
//!
//! Native MPICH's own buffered sends there never leave, or fail with `MPI_ERR_BUFFER`, because
//! nothing turns the stream's reserved VCI (docs/native-defects.md, "Global progress skips a stream's
//! reserved VCI").
//!
//! The route, on native stream communicators only: we buffer the message ourselves. The calling thread
//! (the communicator's one user under the policy) packs it into memory of ours and sends it with
//! `MPI_Isend_c` (`MPI_PACKED`) on the same communicator, so it keeps its place among that thread's
//! messages (a buffered send and a later `MPI_Send` to the same peer match in order). A small message
//! (up to `DEPART_MAX_BYTES`) is driven until it has left before the call returns (`MPI_Test` turns only
//! its own stream); a larger one may need the receiver to match it first, so its request goes to the
//! thread's own list (`Lane`, thread-local) and is completed in the thread's next buffered send
//! (`MPI_Testsome`), its `MPI_Buffer_detach`, its exit (the list is emptied before the thread goes) or
//! its `MPI_Finalize`. Only the thread that made a request ever tests it, so only the stream's owner
//! drives the stream's VCI (MPICH's global progress cannot do it for us: an async thing polled there
//! would have to turn the stream from inside MPICH's hook lock, which the stream's progress takes again).
//! The attached buffer's rules hold: `MPI_Buffer_attach` records its size; the space our
//! messages take (packed size + `MPI_BSEND_OVERHEAD` each) never exceeds it, a message waits for space
//! while earlier ones complete, and one that can never fit (or no buffer) goes to MPICH's own call,
//! which reports `MPI_ERR_BUFFER` through the communicator's handler. The memory is ours (kept for
//! reuse), so the attached buffer itself serves the other communicators' buffered sends, which pass
//! through. `MPI_Buffer_detach` waits for every routed message (the calling thread drives its own; the
//! others complete theirs) before MPICH's detach. `MPI_Ibsend` returns an already complete request
//! (a send to `MPI_PROC_NULL`), as MPICH 5 does for a buffered send.
//!
//! `MPI_Start` of a persistent buffered send made on such a communicator (recorded at `MPI_Bsend_init`)
//! is the same routed buffered send with the recorded arguments; MPICH's request stays inactive, and
//! `MPI_Wait`/`MPI_Test` on an inactive persistent request return at once with an empty status, as
//! they do for a started buffered send (complete when it starts).
//!
//! Not routed: MPI-4.1's per-communicator and per-session buffers (`MPI_Comm_attach_buffer`,
//! `MPI_Session_attach_buffer`): a routed message counts against the process buffer's size only, and
//! `MPI_Buffer_flush`/`MPI_Buffer_iflush`/`MPI_Comm_flush_buffer` wait for MPICH's own buffered
//! messages, not ours. A large message whose thread then waits elsewhere holds its space until the
//! thread's next buffered send, detach, exit or finalize (docs/policy.md, "Buffered sends").
//!
//! Cost on everything else: the buffered-send interposers are one lookup (`native_stream_of`) and a
//! call through `next!`; `MPI_Start`/`MPI_Startall`/`MPI_Request_free` one relaxed load while no
//! persistent buffered send is recorded (always, under `implicit`).
use crate::native_fixes::native_streams::native_stream_of;
use crate::runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// MPICH's `MPI_BSEND_OVERHEAD` (96 in the `mpi.h` of 4.0.2 and 5.0.2): the space each buffered
/// message takes in the attached buffer besides its packed bytes.
const BSEND_OVERHEAD: i64 = 96;
/// MPI 4.1's `MPI_BUFFER_AUTOMATIC` (MPICH: `(void *) -2`): a buffer that never runs out.
const MPI_BUFFER_AUTOMATIC: *mut c_void = -2isize as *mut c_void;

/// Size of the buffer attached with `MPI_Buffer_attach` (0: none; `i64::MAX`: automatic).
static ATTACHED: AtomicI64 = AtomicI64::new(0);
/// Space the routed messages not yet complete take (packed bytes + overhead each).
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);
/// How many routed messages are not yet complete, all threads together.
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// A message up to this size (packed) leaves without the receiver matching it (eager protocols: below
/// MPICH's shared-memory cell, 8 KiB, and its single-copy threshold, `MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`
/// = 8 KiB); a larger one may need the receiver to match it first, so we do not wait for it to leave
/// (two ranks exchanging buffered sends before their receives would wait for each other).
const DEPART_MAX_BYTES: i64 = 4096;

/// A thread's routed messages: their requests (for `MPI_Testsome`) and, at the same index, the memory
/// each was packed into; `spare` keeps completed messages' memory for reuse.
#[derive(Default)]
struct Lane {
    requests: Vec<MPI_Request>,
    held: Vec<(Vec<u8>, i64)>,
    spare: Vec<Vec<u8>>,
    indices: Vec<c_int>,
}

impl Lane {
    /// Tests this thread's routed messages (driving their streams: ours) and gives back the space and
    /// memory of the completed ones.
    unsafe fn reap(&mut self) {
        if self.requests.is_empty() {
            return;
        }
        self.indices.resize(self.requests.len(), 0);
        let mut done: c_int = 0;
        let rc = next!(MPI_Testsome)(
            self.requests.len() as c_int,
            self.requests.as_mut_ptr(),
            &mut done,
            self.indices.as_mut_ptr(),
            MPI_STATUSES_IGNORE,
        );
        if rc != MPI_SUCCESS || done <= 0 {
            return;
        }
        // Completed requests are MPI_REQUEST_NULL now.
        let mut i = 0;
        while i < self.requests.len() {
            if self.requests[i] == MPI_REQUEST_NULL {
                self.requests.swap_remove(i);
                let (memory, space) = self.held.swap_remove(i);
                self.spare.push(memory);
                IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
                PENDING.fetch_sub(1, Ordering::AcqRel);
            } else {
                i += 1;
            }
        }
    }

    /// Memory for `bytes` packed bytes: a spare one large enough, else a new one.
    fn memory(&mut self, bytes: usize) -> Vec<u8> {
        match self.spare.iter().position(|m| m.capacity() >= bytes) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(bytes),
        }
    }
}

impl Drop for Lane {
    /// The thread exits: nobody else may drive its streams, so its messages must leave now.
    fn drop(&mut self) {
        if runtime::active().is_none() {
            return;
        }
        while !self.requests.is_empty() {
            unsafe { self.reap() };
            std::thread::yield_now();
        }
    }
}

thread_local! {
    static LANE: RefCell<Lane> = RefCell::new(Lane::default());
}

/// Runs `f` on this thread's lane (nothing if it is in use, or the thread is exiting).
fn with_lane<R>(f: impl FnOnce(&mut Lane) -> R) -> Option<R> {
    LANE.try_with(|l| l.try_borrow_mut().ok().map(|mut l| f(&mut l))).ok().flatten()
}

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

/// Before `MPI_Buffer_detach(_c)`: waits for every routed message, reaping this thread's own.
fn drain() {
    while PENDING.load(Ordering::Acquire) != 0 {
        with_lane(|l| unsafe { l.reap() });
        std::thread::yield_now();
    }
}

/// At `MPI_Finalize`, before MPICH's: the calling thread's routed messages are delivered, as MPICH
/// delivers its own buffered messages there (the other threads' were delivered when they exited).
pub fn finalize() {
    with_lane(|l| {
        while !l.requests.is_empty() {
            unsafe { l.reap() };
            std::thread::yield_now();
        }
    });
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

/// The routed buffered send of `count` elements of `datatype` at `buf` (see the module doc). `mpich`
/// makes MPICH's own call instead: for a message that can never fit, a send to `MPI_PROC_NULL`, or
/// arguments MPICH must judge.
#[allow(clippy::too_many_arguments)]
unsafe fn send_routed(
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
    if space > ATTACHED.load(Ordering::Acquire) {
        return mpich();
    }
    let routed = with_lane(|lane| {
        // Wait for space: reserve it, or reap our own and let the other threads complete theirs.
        loop {
            lane.reap();
            let limit = ATTACHED.load(Ordering::Acquire);
            if space > limit {
                // Detached meanwhile (by another thread): MPICH's own call reports it.
                return None;
            }
            if IN_FLIGHT.fetch_add(space, Ordering::AcqRel) + space <= limit {
                break;
            }
            IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
            std::thread::yield_now();
        }
        let mut memory = lane.memory(packed as usize);
        let mut position: MPI_Count = 0;
        let mut rc = (p.PMPI_Pack_c)(buf, count, datatype, memory.as_mut_ptr().cast(), packed, &mut position, comm);
        let mut request = MPI_REQUEST_NULL;
        if rc == MPI_SUCCESS {
            rc = next!(MPI_Isend_c)(memory.as_ptr().cast(), position, MPI_PACKED, dest, tag, comm, &mut request);
        }
        if rc != MPI_SUCCESS {
            IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
            lane.spare.push(memory);
            return Some(rc);
        }
        // A small message leaves before the call returns: nobody else may drive this stream for it,
        // and the thread may next wait in a call that does not turn it (MPICH's global progress). Not
        // one to this process itself: MPICH completes a send to self when the receive is posted (no
        // VCI involved), which may be this thread's next call.
        let mut me = MPI_PROC_NULL;
        (p.PMPI_Comm_rank)(comm, &mut me);
        if packed <= DEPART_MAX_BYTES && dest != me {
            let mut done = 0;
            while done == 0 {
                if next!(MPI_Test)(&mut request, &mut done, MPI_STATUS_IGNORE) != MPI_SUCCESS {
                    break;
                }
            }
        }
        if request == MPI_REQUEST_NULL {
            IN_FLIGHT.fetch_sub(space, Ordering::AcqRel);
            lane.spare.push(memory);
            return Some(MPI_SUCCESS);
        }
        lane.requests.push(request);
        lane.held.push((memory, space));
        PENDING.fetch_add(1, Ordering::AcqRel);
        Some(MPI_SUCCESS)
    });
    // None: this thread's lane is busy (re-entered from MPICH's progress) or gone, or the buffer was
    // detached meanwhile: MPICH's own call.
    routed.flatten().unwrap_or_else(mpich)
}

pub unsafe fn bsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend", || unsafe {
        send_routed(buf, count.into(), datatype, dest, tag, comm, || {
            next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
        })
    })
}

pub unsafe fn bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend_c", || unsafe {
        send_routed(buf, count, datatype, dest, tag, comm, || next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm))
    })
}

/// A routed `MPI_Ibsend`: the message is buffered when the call returns, so its request is complete
/// at once (a send to `MPI_PROC_NULL`, as MPICH 5 returns a completed request for a buffered send).
unsafe fn ibsend_routed(
    comm: MPI_Comm,
    tag: c_int,
    request: *mut MPI_Request,
    send: impl FnOnce() -> c_int,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    if request.is_null() {
        return mpich();
    }
    let rc = send();
    if rc != MPI_SUCCESS {
        return rc;
    }
    (pmpi::pmpi().PMPI_Isend)(std::ptr::null(), 0, MPI_BYTE, MPI_PROC_NULL, tag, comm, request)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
    }
    let mpich = || next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
    ffi_guard("MPI_Ibsend", || unsafe {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count.into(), datatype, dest, tag, comm, || {
                    next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
    }
    let mpich = || next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
    ffi_guard("MPI_Ibsend_c", || unsafe {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count, datatype, dest, tag, comm, || {
                    next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

/// The arguments of a persistent buffered send made on a native stream communicator.
#[derive(Clone, Copy)]
struct Recorded {
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
}
// The pointer is the application's buffer, only passed back to MPICH.
unsafe impl Send for Recorded {}

static PERSISTENT: Mutex<Option<HashMap<MPI_Request, Recorded>>> = Mutex::new(None);
/// How many are recorded; 0 keeps `MPI_Start`/`MPI_Startall`/`MPI_Request_free` on their pass-through path.
static LIVE: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

fn recorded(request: MPI_Request) -> Option<Recorded> {
    let map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    map.as_ref()?.get(&request).copied()
}

#[allow(clippy::too_many_arguments)]
/// After `MPI_Bsend_init(_c)`'s constructor (`create` makes the call, and the completion calls'
/// own record, `persistent::persistent_created`): records the arguments if `comm` is a native stream
/// communicator.
pub unsafe fn persistent_bsend_created(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    create: &dyn Fn() -> c_int,
) -> c_int {
    let rc = create();
    if rc != MPI_SUCCESS || request.is_null() || *request == MPI_REQUEST_NULL || native_stream_of(comm).is_none() {
        return rc;
    }
    let args = Recorded { buf, count, datatype, dest, tag, comm };
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.get_or_insert_with(HashMap::new).insert(*request, args).is_none() {
        LIVE.fetch_add(1, Ordering::Release);
    }
    rc
}

/// Before `MPI_Request_free` of `request` succeeds: the handle's value (to forget it after), if any
/// persistent buffered send is recorded.
#[inline(always)]
pub unsafe fn freeing(request: *const MPI_Request) -> Option<MPI_Request> {
    if none_live() || request.is_null() {
        None
    } else {
        Some(*request)
    }
}

/// After `MPI_Request_free` of `handle` succeeded.
pub fn freed(handle: MPI_Request) {
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.as_mut().and_then(|m| m.remove(&handle)).is_some() {
        LIVE.fetch_sub(1, Ordering::Release);
    }
}

/// Starts one request: a recorded persistent buffered send as our routed buffered send (MPICH's
/// request stays inactive), anything else through the next definition.
unsafe fn start_one(request: *mut MPI_Request) -> c_int {
    let Some(r) = recorded(*request) else {
        return next!(MPI_Start)(request);
    };
    if native_stream_of(r.comm).is_none() {
        // The communicator was freed under its persistent request: MPICH's own start reports it.
        return next!(MPI_Start)(request);
    }
    send_routed(r.buf, r.count, r.datatype, r.dest, r.tag, r.comm, || {
        next!(MPI_Bsend_c)(r.buf, r.count, r.datatype, r.dest, r.tag, r.comm)
    })
}

pub unsafe fn start(request: *mut MPI_Request) -> c_int {
    if none_live() || request.is_null() {
        return next!(MPI_Start)(request);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    unsafe fn slow(request: *mut MPI_Request) -> c_int {
        ffi_guard("MPI_Start", || unsafe { start_one(request) })
    }
    slow(request)
}

pub unsafe fn startall(count: c_int, array: *mut MPI_Request) -> c_int {
    if none_live() || array.is_null() || count <= 0 {
        return next!(MPI_Startall)(count, array);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    unsafe fn slow(count: c_int, array: *mut MPI_Request) -> c_int {
        ffi_guard("MPI_Startall", || unsafe {
            let requests = std::slice::from_raw_parts(array, count as usize);
            if requests.iter().all(|r| recorded(*r).is_none()) {
                return next!(MPI_Startall)(count, array);
            }
            // MPI_Startall is MPI_Start on each request, in order (MPI 4.1 §3.9).
            for i in 0..count as usize {
                let rc = start_one(array.add(i));
                if rc != MPI_SUCCESS {
                    return rc;
                }
            }
            MPI_SUCCESS
        })
    }
    slow(count, array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native_fixes::native_streams::PANIC_FOR_TEST;

    /// A completed message's memory is reused for a message that fits it; a larger one gets new memory.
    #[test]
    fn memory_is_reused_when_large_enough() {
        let mut lane = Lane::default();
        lane.spare.push(Vec::with_capacity(100));
        let reused = lane.memory(50);
        assert!(reused.capacity() >= 100 && lane.spare.is_empty(), "the spare memory is taken");
        lane.spare.push(reused);
        let fresh = lane.memory(200);
        assert!(fresh.capacity() >= 200);
        assert_eq!(lane.spare.len(), 1, "the too-small spare stays");
    }

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

    /// A panic inside the buffered-send interposers comes back as `MPI_ERR_INTERN` (the exported
    /// symbols, as C calls them), never as an abort.
    #[test]
    fn a_panic_in_a_buffered_send_interposer_returns_mpi_err_intern() {
        PANIC_FOR_TEST.with(|p| p.set(true));
        let mut request = MPI_REQUEST_NULL;
        let one = 1;
        let p = &one as *const i32 as *const c_void;
        let bsend =
            unsafe { crate::interposed::MPI_Bsend(p, 1, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle) };
        let ibsend_c = unsafe {
            crate::interposed::MPI_Ibsend_c(
                p,
                1,
                MPI_INT as WideHandle,
                0,
                0,
                MPI_COMM_WORLD as WideHandle,
                &mut request,
            )
        };
        PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((bsend, ibsend_c), (MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

//! Persistent buffered sends made on a native stream communicator (`MPI_Bsend_init(_c)`): recorded, and
//! each `MPI_Start`/`MPI_Startall` of one is the routed buffered send with the recorded arguments.
use super::route::send_routed;
use crate::native_fixes::native_streams::native_stream_of;
use crate::native_fixes::persistent;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::next;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
/// request stays inactive), anything else through the next definition, inside the endpoint of the
/// stream it was made on, if any (`persistent::claimed`).
unsafe fn start_one(request: *mut MPI_Request) -> c_int {
    let Some(r) = recorded(*request) else {
        return persistent::claimed(*request, || unsafe { next!(MPI_Start)(request) });
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
    if (none_live() && persistent::none_recorded()) || request.is_null() {
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
    if (none_live() && persistent::none_recorded()) || array.is_null() || count <= 0 {
        return next!(MPI_Startall)(count, array);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    unsafe fn slow(count: c_int, array: *mut MPI_Request) -> c_int {
        ffi_guard("MPI_Startall", || unsafe {
            let requests = std::slice::from_raw_parts(array, count as usize);
            if requests.iter().all(|&r| recorded(r).is_none() && persistent::stream_of(r).is_none()) {
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

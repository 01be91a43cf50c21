//! Persistent buffered sends made on a native stream communicator (`MPI_Bsend_init(_c)`): recorded, and
//! each `MPI_Start`/`MPI_Startall` of one is the routed buffered send with the recorded arguments.
use super::route::send_routed;
use crate::forward;
use crate::native_fixes::native_streams::native_stream_of;
use crate::native_fixes::persistent;
use mpixstream_wrappers::app::{AppArg, AppArray, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The arguments of a persistent buffered send made on a native stream communicator (shared: a start
/// reads them outside the table's lock).
struct Recorded {
    buf: PendingBuf,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
}

static PERSISTENT: Mutex<Option<HashMap<MPI_Request, Arc<Recorded>>>> = Mutex::new(None);
/// How many are recorded; 0 keeps `MPI_Start`/`MPI_Startall`/`MPI_Request_free` on their pass-through path.
static LIVE: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

fn recorded(request: MPI_Request) -> Option<Arc<Recorded>> {
    let map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    map.as_ref()?.get(&request).cloned()
}

/// After `MPI_Bsend_init(_c)` (and the completion calls' own record, `persistent::persistent_created`)
/// made `request` (`None`: the call failed, or the application passed a null pointer): records the
/// arguments if `comm` is a native stream communicator (`buf`, `count`, `datatype`: the application's
/// buffer, which MPI requires valid for each start while the request exists: `start_one` packs from
/// there).
#[allow(clippy::too_many_arguments)]
pub fn persistent_bsend_created(
    buf: PendingBuf,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: Option<MPI_Request>,
) {
    let Some(request) = request.filter(|&r| r != MPI_REQUEST_NULL) else { return };
    if native_stream_of(comm).is_none() {
        return;
    }
    let args = Arc::new(Recorded { buf, dest, tag, comm });
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.get_or_insert_with(HashMap::new).insert(request, args).is_none() {
        LIVE.fetch_add(1, Ordering::Release);
    }
}

/// Before `MPI_Request_free` of `request` (`None`: a null pointer) succeeds: the handle (to forget it
/// after), if any persistent buffered send is recorded.
#[inline(always)]
pub fn freeing(request: Option<MPI_Request>) -> Option<MPI_Request> {
    if none_live() {
        None
    } else {
        request
    }
}

/// After `MPI_Request_free` of `handle` succeeded.
pub fn freed(handle: MPI_Request) {
    let mut map = PERSISTENT.lock().unwrap_or_else(|e| e.into_inner());
    if map.as_mut().and_then(|m| m.remove(&handle)).is_some() {
        LIVE.fetch_sub(1, Ordering::Release);
    }
}

/// Starts one request (`request`, the application's, not null): a recorded persistent buffered send as
/// our routed buffered send (MPICH's request stays inactive), anything else through the next definition,
/// inside the endpoint of the stream it was made on, if any (`persistent::claimed`).
fn start_one(request: AppArg<MPI_Request>) -> c_int {
    let handle = request.get().unwrap_or(MPI_REQUEST_NULL);
    let Some(r) = recorded(handle) else {
        return persistent::claimed(handle, || forward::MPI_Start(request));
    };
    if native_stream_of(r.comm).is_none() {
        // The communicator was freed under its persistent request: MPICH's own start reports it.
        return forward::MPI_Start(request);
    }
    // The buffer the application gave `MPI_Bsend_init` with this count and datatype: read (packed) within
    // this start.
    let (buf, count, datatype) = (r.buf.arg().as_in(), r.buf.count(), r.buf.datatype());
    send_routed(buf, count, datatype, r.dest, r.tag, r.comm, || {
        forward::MPI_Bsend_c(buf, count, datatype, r.dest, r.tag, r.comm)
    })
}

/// `MPI_Start`: a recorded persistent buffered send routed, any other request claimed (`start_one`).
pub fn start(request: AppArg<MPI_Request>) -> c_int {
    if (none_live() && persistent::none_recorded()) || request.is_empty() {
        return forward::MPI_Start(request);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    fn slow(request: AppArg<MPI_Request>) -> c_int {
        ffi_guard("MPI_Start", || start_one(request))
    }
    slow(request)
}

/// `MPI_Startall`: `MPI_Start` of each, where one of them is ours.
pub fn startall(count: c_int, requests: AppArray<MPI_Request>) -> c_int {
    if (none_live() && persistent::none_recorded()) || requests.is_empty() {
        return forward::MPI_Startall(count, requests);
    }
    // Out of line, so that the pass-through path above needs no stack frame.
    #[cold]
    #[inline(never)]
    fn slow(count: c_int, requests: AppArray<MPI_Request>) -> c_int {
        ffi_guard("MPI_Startall", || {
            if requests.iter().all(|r| recorded(r).is_none() && persistent::stream_of(r).is_none()) {
                return forward::MPI_Startall(count, requests);
            }
            // MPI_Startall is MPI_Start on each request, in order (MPI 4.1 §3.9).
            for request in (0..requests.len()).filter_map(|i| requests.element(i)) {
                let rc = start_one(request);
                if rc != MPI_SUCCESS {
                    return rc;
                }
            }
            MPI_SUCCESS
        })
    }
    slow(count, requests)
}

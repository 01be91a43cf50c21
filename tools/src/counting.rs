//! The counting interposers' bodies: what each communication interposer of the tools library does (the
//! `MPI_*` symbols are generated from the rows of `wrappers/mpi.prototypes` with a `tools:` role, which
//! name the hook and the parameters it receives). Every hook starts with one relaxed load
//! (`state::on()`) and goes straight to MPICH when nothing is switched on.
//!
//! Counting: sends when called (nonblocking ones when posted, as the UCX probe counts them); receives
//! on completion, with the size from the status (we pass our own status where the application passed
//! `MPI_STATUS(ES)_IGNORE`); collectives as calls; persistent requests in [`crate::persistent`].
//! Checking: see [`crate::check`].
use crate::entry;
use crate::request_table;
use crate::state::{self, next_seq, on, rec, report_on, CommRec, ReqInfo};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use mpixstream_wrappers::interpose::request_slice;
use std::os::raw::c_int;

/// Whether to follow a request in the table: on a checked communicator (its completion is checked),
/// a receive (counted at completion, from its status), or, for the profile, one whose handle does not
/// name its endpoint (`named` false: a nonblocking collective's, a persistent one's, or any on an MPI
/// whose handles say nothing: `state::requests_name_endpoints`).
#[inline]
fn wants_tracking(r: &CommRec, recv: bool, named: bool) -> bool {
    r.checked_stream.is_some() || (report_on() && (recv || !named))
}

/// Starts tracking `*request` (`named`: its handle names its endpoint). A builtin request (`handles::is_builtin`: shared and pre-completed) keys
/// nothing, and has nothing left to attribute or to check.
///
/// A request that is not tracked removes any entry its handle still has: another thread's operation
/// that had this handle may have completed inside MPICH a moment ago, its entry removed only when that
/// thread's call returns; left there, it would charge this request's completion to that other
/// communicator (and the check would abort a correct program). A tracked one overwrites it.
#[inline]
pub(crate) unsafe fn track(request: *mut MPI_Request, r: &'static CommRec, recv: bool, persistent: bool, named: bool) {
    if request.is_null() || *request == MPI_REQUEST_NULL || is_builtin(*request) {
        return;
    }
    if wants_tracking(r, recv, named) {
        request_table::requests().insert(*request, ReqInfo { rec: r, recv, persistent, seq: next_seq() });
    } else {
        request_table::requests().remove(*request);
    }
}

#[inline]
fn tracked(h: MPI_Request) -> Option<ReqInfo> {
    if h == MPI_REQUEST_NULL || is_builtin(h) {
        return None;
    }
    request_table::requests().get(h)
}

/// The VCI that MPICH's request for an operation on `r` names (the profile's word from MPICH itself).
#[inline]
unsafe fn noted(r: &CommRec, request: *mut MPI_Request) {
    if !request.is_null() && report_on() {
        r.note_request(*request);
    }
}

/// A tracked operation completed: forget it and count a receive.
#[inline]
unsafe fn finish(h: MPI_Request, info: ReqInfo, status: *const MPI_Status, rc: c_int) {
    request_table::requests().remove_own(h, info.seq);
    if info.recv
        && report_on()
        && (rc == MPI_SUCCESS || (status_is_real(status as *mut _) && (*status).MPI_ERROR == MPI_SUCCESS))
    {
        info.rec.count_recv(status);
    }
}

pub unsafe fn send(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && dest != MPI_PROC_NULL && report_on()) {
        r.count_send(count, datatype);
    }
    rc
}

pub unsafe fn isend(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        if dest != MPI_PROC_NULL && report_on() {
            r.count_send(count, datatype);
        }
        noted(r, request);
        track(request, r, false, false, state::requests_name_endpoints());
    }
    rc
}

pub unsafe fn recv(
    name: &'static str,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    counted_recv(name, rec(comm), status, call)
}

/// A blocking receive on the communicator `r` (`MPI_Recv`, `MPI_Mrecv`): checked, and counted from
/// its status (a local one when the caller ignores it and the report needs the count).
unsafe fn counted_recv(
    name: &'static str,
    r: Option<&'static CommRec>,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !report_on() { status } else { &mut local };
    let rc = call(st);
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        r.count_recv(st);
    }
    rc
}

pub unsafe fn irecv(
    name: &'static str,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    tracked_irecv(name, rec(comm), request, call)
}

/// A nonblocking receive on the communicator `r` (`MPI_Irecv`, `MPI_Imrecv`): checked, and its request
/// tracked so that its completion is counted.
unsafe fn tracked_irecv(
    name: &'static str,
    r: Option<&'static CommRec>,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        noted(r, request);
        track(request, r, true, false, true);
    }
    rc
}

pub unsafe fn sendrecv(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !report_on() { status } else { &mut local };
    let rc = call(st);
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        if dest != MPI_PROC_NULL {
            r.count_send(count, datatype);
        }
        r.count_recv(st);
    }
    rc
}

pub unsafe fn probe(name: &'static str, comm: MPI_Comm, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let _g = entry::enter(name, rec(comm));
    call()
}

unsafe fn remember_message(r: Option<&'static CommRec>, message: *mut MPI_Message) {
    if let Some(r) = r {
        if !message.is_null() && *message != MPI_MESSAGE_NULL && *message != MPI_MESSAGE_NO_PROC {
            state::messages().insert(*message, r);
        }
    }
}

pub unsafe fn mprobe(
    name: &'static str,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if rc == MPI_SUCCESS {
        remember_message(r, message);
    }
    rc
}

pub unsafe fn improbe(
    name: &'static str,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if rc == MPI_SUCCESS && !flag.is_null() && *flag != 0 {
        remember_message(r, message);
    }
    rc
}

unsafe fn take_message(message: *mut MPI_Message) -> Option<&'static CommRec> {
    if message.is_null() || *message == MPI_MESSAGE_NULL || *message == MPI_MESSAGE_NO_PROC {
        return None;
    }
    state::messages().remove(&*message).map(|(_, r)| r)
}

pub unsafe fn mrecv(
    name: &'static str,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    counted_recv(name, take_message(message), status, call)
}

pub unsafe fn imrecv(
    name: &'static str,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    tracked_irecv(name, take_message(message), request, call)
}

pub unsafe fn wait(
    name: &'static str,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() || request.is_null() {
        return call(status);
    }
    let h = *request;
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !info.recv { status } else { &mut local };
    let rc = call(st);
    if rc == MPI_SUCCESS && (*request == MPI_REQUEST_NULL || info.persistent) {
        finish(h, info, st, rc);
    }
    rc
}

pub unsafe fn test(
    name: &'static str,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() || request.is_null() {
        return call(status);
    }
    let h = *request;
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !info.recv { status } else { &mut local };
    let rc = call(st);
    if rc == MPI_SUCCESS && !flag.is_null() && *flag != 0 && (*request == MPI_REQUEST_NULL || info.persistent) {
        finish(h, info, st, rc);
    }
    rc
}

/// Tracked operations among the requests of one call (on the stack for the usual window sizes).
type Tracked = smallvec::SmallVec<[(usize, MPI_Request, ReqInfo); 16]>;

/// The tracked operations among `n` requests: (position, handle, info), into `into`.
unsafe fn tracked_among(n: c_int, requests: *mut MPI_Request, into: &mut Tracked) {
    if n <= 0 || requests.is_null() {
        return;
    }
    let handles = std::slice::from_raw_parts(requests, n as usize);
    into.extend(handles.iter().enumerate().filter_map(|(i, &h)| tracked(h).map(|info| (i, h, info))));
}

/// Statuses we pass where the application ignores them (on the stack for the usual window sizes).
type Statuses = smallvec::SmallVec<[MPI_Status; 16]>;

/// Our status array where the application ignores statuses but we need receive sizes.
fn statuses_for(
    n: c_int,
    statuses: *mut MPI_Status,
    infos: &[(usize, MPI_Request, ReqInfo)],
    local: &mut Statuses,
) -> *mut MPI_Status {
    if statuses != MPI_STATUSES_IGNORE || !report_on() || !infos.iter().any(|x| x.2.recv) {
        return statuses;
    }
    local.resize(n.max(0) as usize, MPI_Status::default());
    local.as_mut_ptr()
}

/// After a call completing several requests: the tracked ones now `MPI_REQUEST_NULL` are done, and
/// every started persistent one (the call completed them all); their status is at `status_of(position)`.
unsafe fn finish_completed(
    requests: *mut MPI_Request,
    infos: &[(usize, MPI_Request, ReqInfo)],
    rc: c_int,
    status_of: impl Fn(usize) -> *const MPI_Status,
) {
    for &(i, h, info) in infos {
        if *requests.add(i) == MPI_REQUEST_NULL || info.persistent {
            finish(h, info, status_of(i), rc);
        }
    }
}

unsafe fn status_at(base: *mut MPI_Status, i: usize) -> *const MPI_Status {
    if status_is_real(base) {
        base.add(i)
    } else {
        MPI_STATUS_IGNORE
    }
}

pub unsafe fn waitall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let mut infos = Tracked::new();
    tracked_among(n, requests, &mut infos);
    let _g = entry::enter_requests(name, request_slice(n, requests), &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    if rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS {
        finish_completed(requests, &infos, rc, |i| status_at(st, i));
    }
    rc
}

pub unsafe fn testall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let mut infos = Tracked::new();
    tracked_among(n, requests, &mut infos);
    let _g = entry::enter_requests(name, request_slice(n, requests), &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && !flag.is_null() && *flag != 0 {
        finish_completed(requests, &infos, rc, |i| status_at(st, i));
    }
    rc
}

unsafe fn any_common(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: Option<*mut c_int>,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut infos = Tracked::new();
    tracked_among(n, requests, &mut infos);
    let _g = entry::enter_requests(name, request_slice(n, requests), &infos);
    if infos.is_empty() {
        return call(status);
    }
    let mut local = MPI_Status::default();
    let need = report_on() && infos.iter().any(|x| x.2.recv) && !status_is_real(status);
    let st = if need { &mut local as *mut MPI_Status } else { status };
    let rc = call(st);
    let done = flag.is_none_or(|f| !f.is_null() && *f != 0);
    if rc == MPI_SUCCESS && done && !index.is_null() && *index != MPI_UNDEFINED {
        let k = *index as usize;
        if let Some(&(_, h, info)) = infos.iter().find(|x| x.0 == k) {
            finish(h, info, st, rc);
        }
    }
    rc
}

pub unsafe fn waitany(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    any_common(name, n, requests, index, None, status, call)
}

pub unsafe fn testany(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    any_common(name, n, requests, index, Some(flag), status, call)
}

unsafe fn some_common(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let mut infos = Tracked::new();
    tracked_among(n, requests, &mut infos);
    let _g = entry::enter_requests(name, request_slice(n, requests), &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && !outcount.is_null() && *outcount != MPI_UNDEFINED {
        // The j-th completed request is indices[j]; its status is the j-th status.
        for j in 0..(*outcount).max(0) as usize {
            let k = *indices.add(j) as usize;
            if let Some(&(_, h, info)) = infos.iter().find(|x| x.0 == k) {
                finish(h, info, status_at(st, j), rc);
            }
        }
    }
    rc
}

pub unsafe fn waitsome(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    some_common(name, n, requests, outcount, indices, statuses, call)
}

pub unsafe fn testsome(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    some_common(name, n, requests, outcount, indices, statuses, call)
}

pub unsafe fn request_free(_name: &'static str, request: *mut MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    if !on() || request.is_null() {
        return call();
    }
    let h = *request;
    let info = tracked(h);
    let rc = call();
    if let (Some(info), true) = (info, rc == MPI_SUCCESS) {
        // Its completion will never be seen: a freed receive is not counted.
        request_table::requests().remove_own(h, info.seq);
    }
    if rc == MPI_SUCCESS && h != MPI_REQUEST_NULL && !is_builtin(h) {
        // A persistent request's handle goes back to MPICH here.
        state::persistent().remove(&h);
    }
    rc
}

pub unsafe fn collective(name: &'static str, comm: MPI_Comm, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        r.counters.collectives.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    rc
}

pub unsafe fn icollective(
    name: &'static str,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        if report_on() {
            r.counters.collectives.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // A nonblocking collective's request comes from MPICH's pool 0, whatever its communicator's VCI.
        track(request, r, false, false, false);
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_requests_are_never_tracked() {
        // MPICH's shared pre-completed send request and the PROC_NULL receive (seen on 4.0.2 and 5.0.2):
        // even when one is in the table, it is never looked up.
        let rec: &'static CommRec = Box::leak(Box::new(CommRec::for_test(MPI_COMM_WORLD)));
        for h in [0x6c00_0001, 0x6c00_0002] {
            request_table::requests().insert(h, ReqInfo { rec, recv: true, persistent: false, seq: 1 });
            assert!(tracked(h).is_none());
        }
        // A direct request handle is a real one.
        let h = 0xac00_0003u32 as i32;
        request_table::requests().insert(h, ReqInfo { rec, recv: true, persistent: false, seq: 2 });
        assert_eq!(tracked(h).map(|i| i.seq), Some(2));
        assert!(tracked(MPI_REQUEST_NULL).is_none());
    }

    /// A panic inside a hook comes back from the exported interposer as `MPI_ERR_INTERN`, never as an
    /// abort: the generated interposers run under the panic guard.
    #[test]
    fn a_panic_in_a_hook_returns_mpi_err_intern() {
        // The interposers look up their next definition (MPICH's) before the hook runs, and a missing
        // one aborts: load an MPICH (never initialised; the hook panics before calling it).
        let mpich = [
            concat!(env!("CARGO_MANIFEST_DIR"), "/../.deps/mpich5/lib/libmpi.so.12"),
            "libmpich.so.12",
            "libmpi.so.12",
        ];
        let loaded = mpich.iter().any(|path| {
            let c = std::ffi::CString::new(*path).unwrap();
            !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
        });
        assert!(loaded, "no MPICH to load (scripts/install.sh installs one)");
        state::PANIC_FOR_TEST.with(|p| p.set(true));
        let mut request = MPI_REQUEST_NULL;
        let send =
            unsafe { crate::MPI_Send(std::ptr::null(), 0, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle) };
        let wait = unsafe { crate::MPI_Wait(&mut request, MPI_STATUS_IGNORE) };
        let barrier = unsafe { crate::MPI_Barrier(MPI_COMM_WORLD as WideHandle) };
        state::PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((send, wait, barrier), (MPI_ERR_INTERN, MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

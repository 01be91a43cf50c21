//! The counting interposers' bodies: what each communication interposer of the tools library does (the
//! `MPI_*` symbols are generated from the rows of `wrappers/mpi.prototypes` with a `tools:` role, which
//! name the hook and the parameters it receives). Every hook starts with one relaxed load
//! (`state::on()`) and goes straight to MPICH when nothing is switched on.
//!
//! Counting: sends when called (nonblocking ones when posted, as the UCX probe counts them); receives
//! on completion, with the size from the status (we pass our own status where the application passed
//! `MPI_STATUS(ES)_IGNORE`); collectives as calls; persistent requests in [`crate::persistent`].
//! Checking: see [`crate::check`].
//!
//! The hooks get the application's arguments as it passed them to MPI; those that take pointers are
//! `unsafe fn`s with one contract, *the application's arguments*: each pointer is null or valid as MPI
//! requires of that argument for the call (a request, flag, index or status, an array of `count` of
//! them), and MPICH has written the outputs once `call` returned. They read what they need as values
//! ([`arg`], [`status`], [`arg_at`]), never holding a reference across `call`, which writes them.
use crate::entry;
use crate::request_table;
use crate::state::{self, next_seq, on, rec, report_on, CommRec, ReqInfo};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use mpixstream_wrappers::interpose::request_slice;
use std::os::raw::c_int;

/// The value of the application's argument `p` (an `MPI_Request *`, `int *`…), `None` where it is null.
///
/// # Safety
/// `p` is null or valid for reading a `T` now (the application's arguments, module comment).
#[inline]
pub(crate) unsafe fn arg<T: Copy>(p: *const T) -> Option<T> {
    // SAFETY: non-null, so valid for reading (the contract).
    (!p.is_null()).then(|| unsafe { p.read() })
}

/// Element `i` of the application's array `p`, `None` where `p` is null.
///
/// # Safety
/// `p` is null or valid for reading at least `i + 1` elements now.
#[inline]
pub(crate) unsafe fn arg_at<T: Copy>(p: *const T, i: usize) -> Option<T> {
    // SAFETY: non-null, so `i` is within the array (the contract).
    (!p.is_null()).then(|| unsafe { p.add(i).read() })
}

/// The status at `st` (a copy), `None` where `st` is null or `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `st` is null, `MPI_STATUS_IGNORE`, or valid for reading a status now (the application's, or one of
/// ours).
#[inline]
unsafe fn status(st: *const MPI_Status) -> Option<MPI_Status> {
    // SAFETY: a real status pointer, so valid for reading (the contract).
    status_is_real(st as *mut MPI_Status).then(|| unsafe { st.read() })
}

/// Whether to follow a request in the table: on a checked communicator (its completion is checked),
/// a receive (counted at completion, from its status), or, for the profile, one whose handle does not
/// name its endpoint (`named` false: a nonblocking collective's, a persistent one's, or any on an MPI
/// whose handles say nothing: `state::requests_name_endpoints`).
#[inline]
fn wants_tracking(r: &CommRec, recv: bool, named: bool) -> bool {
    r.checked_stream.is_some() || (report_on() && (recv || !named))
}

/// Starts tracking request `h` (the value the call wrote; `named`: its handle names its endpoint). A
/// builtin request (`handles::is_builtin`: shared and pre-completed) keys nothing, and has nothing left
/// to attribute or to check.
///
/// A request that is not tracked removes any entry its handle still has: another thread's operation
/// that had this handle may have completed inside MPICH a moment ago, its entry removed only when that
/// thread's call returns; left there, it would charge this request's completion to that other
/// communicator (and the check would abort a correct program). A tracked one overwrites it.
#[inline]
pub(crate) fn track(h: Option<MPI_Request>, r: &'static CommRec, recv: bool, persistent: bool, named: bool) {
    let Some(h) = h.filter(|&h| h != MPI_REQUEST_NULL && !is_builtin(h)) else { return };
    if wants_tracking(r, recv, named) {
        request_table::requests().insert(h, ReqInfo { rec: r, recv, persistent, seq: next_seq() });
    } else {
        request_table::requests().remove(h);
    }
}

#[inline]
fn tracked(h: MPI_Request) -> Option<ReqInfo> {
    if h == MPI_REQUEST_NULL || is_builtin(h) {
        return None;
    }
    request_table::requests().get(h)
}

/// The VCI that MPICH's request `h` for an operation on `r` names (the profile's word from MPICH itself).
#[inline]
fn noted(r: &CommRec, h: Option<MPI_Request>) {
    if let (Some(h), true) = (h, report_on()) {
        r.note_request(h);
    }
}

/// A tracked operation completed: forget it and count a receive (`status` reads what the call wrote
/// in its status, `None` where ignored; only a receive's is read).
#[inline]
fn finish(h: MPI_Request, info: ReqInfo, rc: c_int, status: impl FnOnce() -> Option<MPI_Status>) {
    request_table::requests().remove_own(h, info.seq);
    if info.recv && report_on() {
        let status = status();
        if rc == MPI_SUCCESS || status.is_some_and(|s| s.MPI_ERROR == MPI_SUCCESS) {
            info.rec.count_recv(status.as_ref());
        }
    }
}

pub fn send(
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

/// # Safety
/// The application's arguments (module comment).
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
        // SAFETY: the application's `request`, written by the call (the contract).
        let h = unsafe { arg(request) };
        noted(r, h);
        track(h, r, false, false, state::requests_name_endpoints());
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn recv(
    name: &'static str,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    // SAFETY: the contract, passed on.
    unsafe { counted_recv(name, rec(comm), status, call) }
}

/// A blocking receive on the communicator `r` (`MPI_Recv`, `MPI_Mrecv`): checked, and counted from
/// its status (a local one when the caller ignores it and the report needs the count).
///
/// # Safety
/// The application's arguments (module comment).
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
        // SAFETY: `st` is the application's status (the contract) or `local`, filled in by the call.
        r.count_recv(unsafe { self::status(st) }.as_ref());
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn irecv(
    name: &'static str,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    // SAFETY: the contract, passed on.
    unsafe { tracked_irecv(name, rec(comm), request, call) }
}

/// A nonblocking receive on the communicator `r` (`MPI_Irecv`, `MPI_Imrecv`): checked, and its request
/// tracked so that its completion is counted.
///
/// # Safety
/// The application's arguments (module comment).
unsafe fn tracked_irecv(
    name: &'static str,
    r: Option<&'static CommRec>,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        // SAFETY: the application's `request`, written by the call (the contract).
        let h = unsafe { arg(request) };
        noted(r, h);
        track(h, r, true, false, true);
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
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
        // SAFETY: `st` is the application's status (the contract) or `local`, filled in by the call.
        r.count_recv(unsafe { self::status(st) }.as_ref());
    }
    rc
}

pub fn probe(name: &'static str, comm: MPI_Comm, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let _g = entry::enter(name, rec(comm));
    call()
}

/// Remembers matched message `message` (the value the call wrote) with its communicator's record.
fn remember_message(r: Option<&'static CommRec>, message: Option<MPI_Message>) {
    if let (Some(r), Some(m)) = (r, message) {
        if m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC {
            state::messages().insert(m, r);
        }
    }
}

/// # Safety
/// The application's arguments (module comment).
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
        // SAFETY: the application's `message`, written by the call (the contract).
        remember_message(r, unsafe { arg(message) });
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
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
    if rc == MPI_SUCCESS {
        // SAFETY: the application's `flag` and `message`, written by the call (the contract); the
        // message only where the flag says there is one.
        let m = unsafe { arg(flag).is_some_and(|f| f != 0).then(|| arg(message)).flatten() };
        remember_message(r, m);
    }
    rc
}

/// The record of the communicator matched message `message` came from (forgetting it).
fn take_message(message: Option<MPI_Message>) -> Option<&'static CommRec> {
    let m = message.filter(|&m| m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)?;
    state::messages().remove(&m).map(|(_, r)| r)
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn mrecv(
    name: &'static str,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    // SAFETY: the application's `message`, read before the call; the contract, passed on.
    unsafe { counted_recv(name, take_message(arg(message)), status, call) }
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn imrecv(
    name: &'static str,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    // SAFETY: the application's `message`, read before the call; the contract, passed on.
    unsafe { tracked_irecv(name, take_message(arg(message)), request, call) }
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn wait(
    name: &'static str,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    // SAFETY: the application's `request`, read before the call (the contract).
    let Some(h) = (unsafe { arg(request) }) else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !info.recv { status } else { &mut local };
    let rc = call(st);
    // SAFETY: the application's `request`, written by the call (the contract).
    if rc == MPI_SUCCESS && (unsafe { arg(request) } == Some(MPI_REQUEST_NULL) || info.persistent) {
        // SAFETY: `st` is the application's status (the contract) or `local`, filled in by the call.
        finish(h, info, rc, || unsafe { self::status(st) });
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn test(
    name: &'static str,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    // SAFETY: the application's `request`, read before the call (the contract).
    let Some(h) = (unsafe { arg(request) }) else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = MPI_Status::default();
    let st = if status_is_real(status) || !info.recv { status } else { &mut local };
    let rc = call(st);
    // SAFETY: the application's `flag` and `request`, written by the call (the contract).
    let done = rc == MPI_SUCCESS
        && unsafe { arg(flag).is_some_and(|f| f != 0) && (arg(request) == Some(MPI_REQUEST_NULL) || info.persistent) };
    if done {
        // SAFETY: `st` is the application's status (the contract) or `local`, filled in by the call.
        finish(h, info, rc, || unsafe { self::status(st) });
    }
    rc
}

/// Tracked operations among the requests of one call (on the stack for the usual window sizes).
type Tracked = smallvec::SmallVec<[(usize, MPI_Request, ReqInfo); 16]>;

/// The tracked operations among `handles`: (position, handle, info), into `into`.
fn tracked_among(handles: &[MPI_Request], into: &mut Tracked) {
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

/// The status at position `i` of the array `base` (`None`: ignored).
///
/// # Safety
/// `base` is null, `MPI_STATUSES_IGNORE`, or valid for reading at least `i + 1` statuses now.
unsafe fn status_at(base: *mut MPI_Status, i: usize) -> Option<MPI_Status> {
    // SAFETY: a real array of at least `i + 1` statuses (the contract).
    status_is_real(base).then(|| unsafe { base.add(i).read() })
}

/// After a call completing several requests: the tracked ones now `MPI_REQUEST_NULL` are done, and
/// every started persistent one (the call completed them all); their statuses are at `st`.
///
/// # Safety
/// The application's arguments (module comment): `requests` and `st` (its statuses or ours) hold the
/// call's `n` requests and statuses, as the call left them.
unsafe fn finish_completed(
    requests: *mut MPI_Request,
    infos: &[(usize, MPI_Request, ReqInfo)],
    rc: c_int,
    st: *mut MPI_Status,
) {
    for &(i, h, info) in infos {
        // SAFETY: `i` is a position among the call's requests (`tracked_among`), so within the array.
        if unsafe { arg_at(requests, i) } == Some(MPI_REQUEST_NULL) || info.persistent {
            // SAFETY: and within the statuses.
            finish(h, info, rc, || unsafe { status_at(st, i) });
        }
    }
}

/// # Safety
/// The application's arguments (module comment).
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
    // SAFETY: the application's `n` requests, read before the call (the contract); the slice is not used
    // once the call runs (it writes them).
    let all = unsafe { request_slice(n, requests) };
    tracked_among(all, &mut infos);
    let _g = entry::enter_requests(name, all, &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    if rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS {
        // SAFETY: the application's arrays, or `local` of `n` statuses, as the call left them.
        unsafe { finish_completed(requests, &infos, rc, st) };
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
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
    // SAFETY: the application's `n` requests, read before the call (the contract); the slice is not used
    // once the call runs (it writes them).
    let all = unsafe { request_slice(n, requests) };
    tracked_among(all, &mut infos);
    let _g = entry::enter_requests(name, all, &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    // SAFETY: the application's `flag`, written by the call (the contract).
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && unsafe { arg(flag) }.is_some_and(|f| f != 0) {
        // SAFETY: the application's arrays, or `local` of `n` statuses, as the call left them.
        unsafe { finish_completed(requests, &infos, rc, st) };
    }
    rc
}

/// `MPI_Waitany` (`flag` None) and `MPI_Testany`.
///
/// # Safety
/// The application's arguments (module comment).
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
    // SAFETY: the application's `n` requests, read before the call (the contract); the slice is not used
    // once the call runs (it writes them).
    let all = unsafe { request_slice(n, requests) };
    tracked_among(all, &mut infos);
    let _g = entry::enter_requests(name, all, &infos);
    if infos.is_empty() {
        return call(status);
    }
    let mut local = MPI_Status::default();
    let need = report_on() && infos.iter().any(|x| x.2.recv) && !status_is_real(status);
    let st = if need { &mut local as *mut MPI_Status } else { status };
    let rc = call(st);
    // SAFETY: the application's `flag` and `index`, written by the call (the contract).
    let done = || unsafe { flag.is_none_or(|f| arg(f).is_some_and(|f| f != 0)) };
    // SAFETY: as `done`.
    let completed = || unsafe { arg(index) }.filter(|&k| k != MPI_UNDEFINED);
    if let Some(k) = (rc == MPI_SUCCESS && done()).then(completed).flatten() {
        if let Some(&(_, h, info)) = infos.iter().find(|x| x.0 == k as usize) {
            // SAFETY: `st` is the application's status (the contract) or `local`, filled in by the call.
            finish(h, info, rc, || unsafe { self::status(st) });
        }
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn waitany(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: the contract, passed on.
    unsafe { any_common(name, n, requests, index, None, status, call) }
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn testany(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: the contract, passed on.
    unsafe { any_common(name, n, requests, index, Some(flag), status, call) }
}

/// `MPI_Waitsome` and `MPI_Testsome`.
///
/// # Safety
/// The application's arguments (module comment).
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
    // SAFETY: the application's `n` requests, read before the call (the contract); the slice is not used
    // once the call runs (it writes them).
    let all = unsafe { request_slice(n, requests) };
    tracked_among(all, &mut infos);
    let _g = entry::enter_requests(name, all, &infos);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let st = statuses_for(n, statuses, &infos, &mut local);
    let rc = call(st);
    // SAFETY: the application's `outcount`, written by the call (the contract).
    let done = (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS).then(|| unsafe { arg(outcount) }).flatten();
    if let Some(done) = done.filter(|&c| c != MPI_UNDEFINED) {
        // The j-th completed request is indices[j]; its status is the j-th status.
        for j in 0..done.max(0) as usize {
            // SAFETY: the call wrote `outcount` (at most `n`) indices at `indices` (the contract).
            let k = unsafe { arg_at(indices, j) };
            if let Some(&(_, h, info)) = k.and_then(|k| infos.iter().find(|x| x.0 == k as usize)) {
                // SAFETY: and as many statuses at `st` (the application's, or `local` of `n`).
                finish(h, info, rc, || unsafe { status_at(st, j) });
            }
        }
    }
    rc
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn waitsome(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: the contract, passed on.
    unsafe { some_common(name, n, requests, outcount, indices, statuses, call) }
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn testsome(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: the contract, passed on.
    unsafe { some_common(name, n, requests, outcount, indices, statuses, call) }
}

/// # Safety
/// The application's arguments (module comment).
pub unsafe fn request_free(_name: &'static str, request: *mut MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    // SAFETY: the application's `request`, read before the call (the contract).
    let Some(h) = (unsafe { arg(request) }) else {
        return call();
    };
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

pub fn collective(name: &'static str, comm: MPI_Comm, call: impl FnOnce() -> c_int) -> c_int {
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

/// # Safety
/// The application's arguments (module comment).
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
        // SAFETY: the application's `request`, written by the call (the contract).
        track(unsafe { arg(request) }, r, false, false, false);
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
            // SAFETY: a NUL-terminated path; loading MPICH runs only its own initialisers.
            !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
        });
        assert!(loaded, "no MPICH to load (scripts/install.sh installs one)");
        state::PANIC_FOR_TEST.with(|p| p.set(true));
        let mut request = MPI_REQUEST_NULL;
        // SAFETY: the C entry points with valid arguments (a null buffer of count 0, a live request);
        // the hook panics before MPICH is called.
        let send =
            unsafe { crate::MPI_Send(std::ptr::null(), 0, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle) };
        // SAFETY: as above.
        let wait = unsafe { crate::MPI_Wait(&mut request, MPI_STATUS_IGNORE) };
        // SAFETY: as above.
        let barrier = unsafe { crate::MPI_Barrier(MPI_COMM_WORLD as WideHandle) };
        state::PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((send, wait, barrier), (MPI_ERR_INTERN, MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

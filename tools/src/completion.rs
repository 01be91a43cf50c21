//! The completion hooks of the tools library's interposers (`MPI_Wait*`, `MPI_Test*`,
//! `MPI_Request_free`): each looks up the tracked operations among the call's requests, enters the call on
//! their endpoints, and once MPICH completed them, forgets them and counts the receives from their
//! statuses (ours where the application ignores them). The hooks that take pointers have `counting`'s
//! contract, *the application's arguments* (its module comment).
use crate::counting::{finish, status_of, tracked, Arg};
use crate::entry;
use crate::request_table;
use crate::state::{self, on, report_on, ReqInfo};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use std::os::raw::c_int;

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
    // SAFETY: the application's `request` and `status` (the contract), read before and after the call.
    let (req, app) = unsafe { (Arg::new(request, 1), Arg::statuses(status, 1)) };
    let Some(h) = req.get() else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = [MPI_Status::default()];
    let ours = !status_is_real(status) && info.recv;
    let rc = call(if ours { local.as_mut_ptr() } else { status });
    if rc == MPI_SUCCESS && (req.get() == Some(MPI_REQUEST_NULL) || info.persistent) {
        finish(h, info, rc, || status_of(ours, &local, app, 0));
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
    // SAFETY: the application's `request`, `flag` and `status` (the contract), read before and after
    // the call.
    let (req, flag, app) = unsafe { (Arg::new(request, 1), Arg::new(flag, 1), Arg::statuses(status, 1)) };
    let Some(h) = req.get() else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = [MPI_Status::default()];
    let ours = !status_is_real(status) && info.recv;
    let rc = call(if ours { local.as_mut_ptr() } else { status });
    if rc == MPI_SUCCESS
        && flag.get().is_some_and(|f| f != 0)
        && (req.get() == Some(MPI_REQUEST_NULL) || info.persistent)
    {
        finish(h, info, rc, || status_of(ours, &local, app, 0));
    }
    rc
}

/// Tracked operations among the requests of one call (on the stack for the usual window sizes).
type Tracked = smallvec::SmallVec<[(usize, MPI_Request, ReqInfo); 16]>;

/// The tracked operations among the call's requests (position, handle, info), and the call entered on
/// their endpoints.
fn enter_tracked(name: &'static str, requests: Arg<MPI_Request>) -> (Tracked, entry::Entered) {
    requests.with_slice(|all| {
        let infos: Tracked = all.iter().enumerate().filter_map(|(i, &h)| tracked(h).map(|info| (i, h, info))).collect();
        let g = entry::enter_requests(name, all, &infos);
        (infos, g)
    })
}

/// Statuses we pass where the application ignores them (on the stack for the usual window sizes).
type Statuses = smallvec::SmallVec<[MPI_Status; 16]>;

/// Whether we pass our own statuses (`local`, `n` of them): where the application ignores them but we
/// need receive sizes.
fn own_statuses(n: c_int, statuses: *mut MPI_Status, infos: &Tracked, local: &mut Statuses) -> bool {
    if statuses != MPI_STATUSES_IGNORE || !report_on() || !infos.iter().any(|x| x.2.recv) {
        return false;
    }
    local.resize(n.max(0) as usize, MPI_Status::default());
    true
}

/// After a call completing several requests: the tracked ones now `MPI_REQUEST_NULL` are done, and
/// every started persistent one (the call completed them all); their statuses are ours or `app`.
fn finish_completed(
    requests: Arg<MPI_Request>,
    infos: &Tracked,
    rc: c_int,
    (ours, local, app): (bool, &[MPI_Status], Arg<MPI_Status>),
) {
    for &(i, h, info) in infos {
        if requests.at(i) == Some(MPI_REQUEST_NULL) || info.persistent {
            finish(h, info, rc, || status_of(ours, local, app, i));
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
    // SAFETY: the application's `n` requests and statuses (the contract), read before and after the call.
    let (reqs, app) = unsafe { (Arg::new(requests, n), Arg::statuses(statuses, n)) };
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { local.as_mut_ptr() } else { statuses });
    if rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS {
        finish_completed(reqs, &infos, rc, (ours, &local, app));
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
    // SAFETY: the application's `n` requests and statuses, and `flag` (the contract), read before and
    // after the call.
    let (reqs, flag, app) = unsafe { (Arg::new(requests, n), Arg::new(flag, 1), Arg::statuses(statuses, n)) };
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { local.as_mut_ptr() } else { statuses });
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && flag.get().is_some_and(|f| f != 0) {
        finish_completed(reqs, &infos, rc, (ours, &local, app));
    }
    rc
}

/// `MPI_Waitany` (`flag` None) and `MPI_Testany`, their arguments as [`Arg`]s; `status` the
/// application's pointer.
fn any_common(
    name: &'static str,
    reqs: Arg<MPI_Request>,
    index: Arg<c_int>,
    flag: Option<Arg<c_int>>,
    (status, app): (*mut MPI_Status, Arg<MPI_Status>),
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(status);
    }
    let mut local = [MPI_Status::default()];
    let ours = report_on() && infos.iter().any(|x| x.2.recv) && !status_is_real(status);
    let rc = call(if ours { local.as_mut_ptr() } else { status });
    let done = flag.is_none_or(|f| f.get().is_some_and(|f| f != 0));
    if let Some(k) = (rc == MPI_SUCCESS && done).then(|| index.get()).flatten().filter(|&k| k != MPI_UNDEFINED) {
        if let Some(&(_, h, info)) = infos.iter().find(|x| x.0 == k as usize) {
            finish(h, info, rc, || status_of(ours, &local, app, 0));
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
    if !on() {
        return call(status);
    }
    // SAFETY: the application's `n` requests, `index` and `status` (the contract), read before and after
    // the call.
    let (reqs, index, app) = unsafe { (Arg::new(requests, n), Arg::new(index, 1), Arg::statuses(status, 1)) };
    any_common(name, reqs, index, None, (status, app), call)
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
    if !on() {
        return call(status);
    }
    // SAFETY: the application's `n` requests, `index`, `flag` and `status` (the contract), read before
    // and after the call.
    let (reqs, index, flag, app) =
        unsafe { (Arg::new(requests, n), Arg::new(index, 1), Arg::new(flag, 1), Arg::statuses(status, 1)) };
    any_common(name, reqs, index, Some(flag), (status, app), call)
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
    // SAFETY: the application's `n` requests, `outcount`, `n` indices and `n` statuses (the contract),
    // read before and after the call.
    let (reqs, outcount, indices, app) =
        unsafe { (Arg::new(requests, n), Arg::new(outcount, 1), Arg::new(indices, n), Arg::statuses(statuses, n)) };
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { local.as_mut_ptr() } else { statuses });
    let done = (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS).then(|| outcount.get()).flatten();
    if let Some(done) = done.filter(|&c| c != MPI_UNDEFINED) {
        // The j-th completed request is indices[j]; its status is the j-th status.
        for j in 0..done.max(0) as usize {
            let k = indices.at(j);
            if let Some(&(_, h, info)) = k.and_then(|k| infos.iter().find(|x| x.0 == k as usize)) {
                finish(h, info, rc, || status_of(ours, &local, app, j));
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
    // SAFETY: the application's `request` (the contract), read before the call.
    let Some(h) = unsafe { Arg::new(request, 1) }.get() else {
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

//! The completion hooks of the tools library's interposers (`MPI_Wait*`, `MPI_Test*`,
//! `MPI_Request_free`): each looks up the tracked operations among the call's requests, enters the call on
//! their endpoints, and once MPICH completed them, forgets them and counts the receives from their
//! statuses (ours where the application ignores them). The application's pointer arguments come wrapped
//! by the generated interposers (`mpixstream_wrappers::app`), read before and after `call`.
use crate::counting::{finish, status_of, tracked};
use crate::entry;
use crate::request_table;
use crate::state::{self, on, report_on, ReqInfo};
use mpixstream_wrappers::app::{AppArg, AppArray};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use std::os::raw::c_int;

pub fn wait(
    name: &'static str,
    request: AppArg<MPI_Request>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let (req, app) = (request, status);
    let Some(h) = req.get() else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = [MPI_Status::default()];
    let ours = status.is_empty() && info.recv;
    let rc = call(if ours { AppArg::local(&mut local[0]) } else { status });
    if rc == MPI_SUCCESS && (req.get() == Some(MPI_REQUEST_NULL) || info.persistent) {
        finish(h, info, rc, || status_of(ours, &local, app.as_array(), 0));
    }
    rc
}

pub fn test(
    name: &'static str,
    request: AppArg<MPI_Request>,
    flag: AppArg<c_int>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let (req, app) = (request, status);
    let Some(h) = req.get() else {
        return call(status);
    };
    let Some(info) = tracked(h) else {
        let _p = entry::enter_untracked(h);
        return call(status);
    };
    let _g = entry::enter(name, Some(info.rec));
    let mut local = [MPI_Status::default()];
    let ours = status.is_empty() && info.recv;
    let rc = call(if ours { AppArg::local(&mut local[0]) } else { status });
    if rc == MPI_SUCCESS
        && flag.get().is_some_and(|f| f != 0)
        && (req.get() == Some(MPI_REQUEST_NULL) || info.persistent)
    {
        finish(h, info, rc, || status_of(ours, &local, app.as_array(), 0));
    }
    rc
}

/// Tracked operations among the requests of one call (on the stack for the usual window sizes).
type Tracked = smallvec::SmallVec<[(usize, MPI_Request, ReqInfo); 16]>;

/// The tracked operations among the call's requests (position, handle, info), and the call entered on
/// their endpoints.
fn enter_tracked(name: &'static str, requests: AppArray<MPI_Request>) -> (Tracked, entry::Entered) {
    let infos: Tracked = requests.iter().enumerate().filter_map(|(i, h)| tracked(h).map(|info| (i, h, info))).collect();
    let g = entry::enter_requests(name, requests.iter(), &infos);
    (infos, g)
}

/// Statuses we pass where the application ignores them (on the stack for the usual window sizes).
type Statuses = smallvec::SmallVec<[MPI_Status; 16]>;

/// Whether we pass our own statuses (`local`, `n` of them): where the application ignores them but we
/// need receive sizes.
fn own_statuses(n: c_int, statuses: AppArray<MPI_Status>, infos: &Tracked, local: &mut Statuses) -> bool {
    if statuses.ptr() != MPI_STATUSES_IGNORE || !report_on() || !infos.iter().any(|x| x.2.recv) {
        return false;
    }
    local.resize(n.max(0) as usize, MPI_Status::default());
    true
}

/// After a call completing several requests: the tracked ones now `MPI_REQUEST_NULL` are done, and
/// every started persistent one (the call completed them all); their statuses are ours or `app`.
fn finish_completed(
    requests: AppArray<MPI_Request>,
    infos: &Tracked,
    rc: c_int,
    (ours, local, app): (bool, &[MPI_Status], AppArray<MPI_Status>),
) {
    for &(i, h, info) in infos {
        if requests.at(i) == Some(MPI_REQUEST_NULL) || info.persistent {
            finish(h, info, rc, || status_of(ours, local, app, i));
        }
    }
}

pub fn waitall(
    name: &'static str,
    n: c_int,
    requests: AppArray<MPI_Request>,
    statuses: AppArray<MPI_Status>,
    call: impl FnOnce(AppArray<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let (reqs, app) = (requests, statuses);
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { AppArray::local_slice(&mut local) } else { statuses });
    if rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS {
        finish_completed(reqs, &infos, rc, (ours, &local, app));
    }
    rc
}

pub fn testall(
    name: &'static str,
    n: c_int,
    requests: AppArray<MPI_Request>,
    flag: AppArg<c_int>,
    statuses: AppArray<MPI_Status>,
    call: impl FnOnce(AppArray<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let (reqs, app) = (requests, statuses);
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { AppArray::local_slice(&mut local) } else { statuses });
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && flag.get().is_some_and(|f| f != 0) {
        finish_completed(reqs, &infos, rc, (ours, &local, app));
    }
    rc
}

/// `MPI_Waitany` (`flag` None) and `MPI_Testany`.
fn any_common(
    name: &'static str,
    reqs: AppArray<MPI_Request>,
    index: AppArg<c_int>,
    flag: Option<AppArg<c_int>>,
    app: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(app);
    }
    let mut local = [MPI_Status::default()];
    let ours = report_on() && infos.iter().any(|x| x.2.recv) && app.is_empty();
    let rc = call(if ours { AppArg::local(&mut local[0]) } else { app });
    let done = flag.is_none_or(|f| f.get().is_some_and(|f| f != 0));
    if let Some(k) = (rc == MPI_SUCCESS && done).then(|| index.get()).flatten().filter(|&k| k != MPI_UNDEFINED) {
        if let Some(&(_, h, info)) = infos.iter().find(|x| x.0 == k as usize) {
            finish(h, info, rc, || status_of(ours, &local, app.as_array(), 0));
        }
    }
    rc
}

pub fn waitany(
    name: &'static str,
    _n: c_int,
    requests: AppArray<MPI_Request>,
    index: AppArg<c_int>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    any_common(name, requests, index, None, status, call)
}

pub fn testany(
    name: &'static str,
    _n: c_int,
    requests: AppArray<MPI_Request>,
    index: AppArg<c_int>,
    flag: AppArg<c_int>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    any_common(name, requests, index, Some(flag), status, call)
}

/// `MPI_Waitsome` and `MPI_Testsome`.
fn some_common(
    name: &'static str,
    n: c_int,
    requests: AppArray<MPI_Request>,
    outcount: AppArg<c_int>,
    indices: AppArray<c_int>,
    statuses: AppArray<MPI_Status>,
    call: impl FnOnce(AppArray<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let (reqs, app) = (requests, statuses);
    let (infos, _g) = enter_tracked(name, reqs);
    if infos.is_empty() {
        return call(statuses);
    }
    let mut local = Statuses::new();
    let ours = own_statuses(n, statuses, &infos, &mut local);
    let rc = call(if ours { AppArray::local_slice(&mut local) } else { statuses });
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

pub fn waitsome(
    name: &'static str,
    n: c_int,
    requests: AppArray<MPI_Request>,
    outcount: AppArg<c_int>,
    indices: AppArray<c_int>,
    statuses: AppArray<MPI_Status>,
    call: impl FnOnce(AppArray<MPI_Status>) -> c_int,
) -> c_int {
    some_common(name, n, requests, outcount, indices, statuses, call)
}

pub fn testsome(
    name: &'static str,
    n: c_int,
    requests: AppArray<MPI_Request>,
    outcount: AppArg<c_int>,
    indices: AppArray<c_int>,
    statuses: AppArray<MPI_Status>,
    call: impl FnOnce(AppArray<MPI_Status>) -> c_int,
) -> c_int {
    some_common(name, n, requests, outcount, indices, statuses, call)
}

pub fn request_free(_name: &'static str, request: AppArg<MPI_Request>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let Some(h) = request.get() else {
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

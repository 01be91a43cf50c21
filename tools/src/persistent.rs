//! Persistent requests in the tools library: each constructor's request is remembered with its
//! communicator's record, its kind and, for a send, its message (`state::persistent`, until
//! `MPI_Request_free`: `counting::request_free`), so that each `MPI_Start`/`MPI_Startall` counts a start
//! of its kind and a send's message, tracks the request as any nonblocking operation (a receive is
//! counted when it completes) and is checked on its communicator.
//!
//! The application's pointer arguments come wrapped by the generated interposers
//! (`mpixstream_wrappers::app`).
use crate::counting::track;
use crate::entry;
use crate::state::{self, on, rec, report_on, Persistent, StartKind};
use mpixstream_wrappers::app::{AppArg, AppArray};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use std::os::raw::c_int;

/// A persistent request's constructor (`MPI_Send_init`… `MPI_Psend_init`, the persistent collectives,
/// their `_c` forms): checked on its communicator; the request is remembered with its communicator's
/// record and what it starts (by the constructor's name), for `start` and `startall`.
pub fn persistent(
    name: &'static str,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    created(name, comm, request, None, call)
}

/// A persistent send's constructor (`MPI_Send_init`, `Bsend_init`, `Ssend_init`, `Rsend_init`, their
/// `_c` forms): as `persistent`, and its message is counted as sent at each start.
pub fn persistent_send(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    request: AppArg<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let send = (dest != MPI_PROC_NULL).then_some((count, datatype));
    created(name, comm, request, send, call)
}

fn created(
    name: &'static str,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
    send: Option<(MPI_Count, MPI_Datatype)>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        if let Some(h) = request.get().filter(|&h| h != MPI_REQUEST_NULL && !is_builtin(h)) {
            state::persistent().insert(h, Persistent { rec: r, kind: StartKind::of(name), send });
        }
    }
    rc
}

#[inline]
fn persistent_of(h: MPI_Request) -> Option<Persistent> {
    if h == MPI_REQUEST_NULL || is_builtin(h) {
        return None;
    }
    state::persistent().get(&h).map(|e| *e)
}

/// A persistent request started: one start of its kind on its communicator, a send's message counted
/// as sent (a receive's when it completes), and, on a checked
/// communicator, tracked as any nonblocking operation, so that the waits on it are checked too (its
/// entry outlives each completion, as the handle does, until `MPI_Request_free`). `h`: the request as
/// the call left it.
fn started(h: Option<MPI_Request>, p: Persistent) {
    if report_on() {
        p.rec.count_start(p.kind);
        if let Some((count, datatype)) = p.send {
            p.rec.count_send(count, datatype);
        }
    }
    // A persistent receive's message is counted when it completes, from its status, as a nonblocking
    // receive's is.
    // A persistent request's handle does not name its endpoint (MPICH makes it from pool 0).
    track(h, p.rec, p.kind == StartKind::Recv, true, false);
}

/// `MPI_Start`.
pub fn start(name: &'static str, request: AppArg<MPI_Request>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let Some(p) = request.get().and_then(persistent_of) else {
        return call();
    };
    let _g = entry::enter(name, Some(p.rec));
    let rc = call();
    if rc == MPI_SUCCESS {
        started(request.get(), p);
    }
    rc
}

/// `MPI_Startall` (`requests`: the application's `count`).
pub fn startall(
    name: &'static str,
    _count: c_int,
    requests: AppArray<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let found: smallvec::SmallVec<[(usize, Persistent); 16]> =
        requests.iter().enumerate().filter_map(|(i, h)| persistent_of(h).map(|p| (i, p))).collect();
    if found.is_empty() {
        return call();
    }
    let _g = entry::enter_many(name, found.iter().map(|x| x.1.rec));
    let rc = call();
    if rc == MPI_SUCCESS {
        for &(i, p) in &found {
            started(requests.at(i), p);
        }
    }
    rc
}

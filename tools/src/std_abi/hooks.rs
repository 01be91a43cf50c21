//! The counting hooks of the standard ABI's state (`super`): each call the generated interposers route
//! here is counted on its communicator's record, nonblocking operations tracked to their completion,
//! and the check entered where it covers the record.
//!
//! The hooks' pointer parameters are the program's arguments of the interposed call, wrapped by the
//! generated interposer (`mpixstream_wrappers::app`): request and message slots pointer-wide on this ABI,
//! statuses `mpi_abi.h`'s (`MPI_STATUS(ES)_IGNORE`: none to read); `call` makes the call itself, which
//! fills what it is given (our own status where the program passed none).
use super::*;
use mpixstream_wrappers::app::{AppArg, AppArray};

fn count_send(r: &CommRec, count: i64, datatype: H) {
    let size = match mpi() {
        Some(m) if count > 0 => m.type_size(datatype).unwrap_or(0),
        _ => 0,
    };
    let bytes = if size > 0 { (count as u64).saturating_mul(size as u64) } else { 0 };
    r.counters.sent_msgs.fetch_add(1, Ordering::Relaxed);
    r.counters.sent_bytes.fetch_add(bytes, Ordering::Relaxed);
}

/// Counts a received message from the status its completion filled.
fn count_recv(r: &CommRec, status: &Status) {
    if status.source == PROC_NULL {
        return;
    }
    let Some(m) = mpi() else { return };
    let n = match m.get_count(status, BYTE) {
        Ok(n) if n >= 0 => n,
        _ => return,
    };
    r.counters.recv_msgs.fetch_add(1, Ordering::Relaxed);
    r.counters.recv_bytes.fetch_add(n as u64, Ordering::Relaxed);
}

fn remember<V>(map: &Mutex<Option<HashMap<H, V>>>, h: H, v: V) {
    map.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(h, v);
}

fn take<V>(map: &Mutex<Option<HashMap<H, V>>>, h: H) -> Option<V> {
    map.lock().unwrap_or_else(|e| e.into_inner()).as_mut()?.remove(&h)
}

fn tracked(h: H) -> Option<(&'static CommRec, bool)> {
    if h == REQUEST_NULL || h == 0 {
        return None;
    }
    REQUESTS.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(&h).copied()
}

/// Tracks a nonblocking operation's request: a receive (to count it), or any operation on a checked
/// communicator (its completion is checked too). `request`: the handle the call returned.
fn track(request: Option<H>, r: &'static CommRec, recv: bool) {
    let Some(h) = request else { return };
    if !(recv || r.checked_stream.is_some()) {
        return;
    }
    if h != REQUEST_NULL && h != 0 {
        remember(&REQUESTS, h, (r, recv));
    }
}

/// The status a call fills: the program's, or `local` where it passed `MPI_STATUS_IGNORE`.
fn status_or<'a>(status: AppArg<'a, Status>, local: &'a mut Status) -> AppArg<'a, Status> {
    if status.is_empty() {
        AppArg::local(local)
    } else {
        status
    }
}

/// What the call wrote in the status it was given (`status_or`).
fn filled(status: AppArg<Status>, local: &Status) -> Status {
    status.get().unwrap_or(*local)
}

/// `MPI_Send` and the blocking sends.
pub fn send(name: &'static str, comm: H, count: i64, datatype: H, dest: c_int, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let rc = call();
    if let (Some(p), true) = (p, rc == SUCCESS && dest != PROC_NULL) {
        count_send(p.send, count, datatype);
    }
    rc
}

/// `MPI_Isend` and the nonblocking sends.
pub fn isend(
    name: &'static str,
    comm: H,
    count: i64,
    datatype: H,
    dest: c_int,
    request: AppArg<H>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let rc = call();
    if let (Some(p), true) = (p, rc == SUCCESS) {
        if dest != PROC_NULL {
            count_send(p.send, count, datatype);
        }
        track(request.get(), p.send, false);
    }
    rc
}

/// `MPI_Recv` and the blocking receives.
pub fn recv(name: &'static str, comm: H, status: AppArg<Status>, call: impl FnOnce(AppArg<Status>) -> c_int) -> c_int {
    if !on() {
        return call(status);
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let mut local = Status::default();
    let rc = call(status_or(status, &mut local));
    if let (Some(p), SUCCESS) = (p, rc) {
        count_recv(p.recv, &filled(status, &local));
    }
    rc
}

/// `MPI_Irecv` and the nonblocking receives.
pub fn irecv(name: &'static str, comm: H, request: AppArg<H>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        track(request.get(), p.recv, true);
    }
    rc
}

/// `MPI_Sendrecv` and `MPI_Sendrecv_replace`.
pub fn sendrecv(
    name: &'static str,
    comm: H,
    count: i64,
    datatype: H,
    dest: c_int,
    status: AppArg<Status>,
    call: impl FnOnce(AppArg<Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let mut local = Status::default();
    let rc = call(status_or(status, &mut local));
    if let (Some(p), SUCCESS) = (p, rc) {
        if dest != PROC_NULL {
            count_send(p.send, count, datatype);
        }
        count_recv(p.recv, &filled(status, &local));
    }
    rc
}

/// `MPI_Improbe`: a matched message is remembered with its record, for its `MPI_Mrecv`.
pub fn improbe(
    name: &'static str,
    comm: H,
    flag: AppArg<c_int>,
    message: AppArg<H>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        if flag.get().is_some_and(|f| f != 0) {
            if let Some(h) = message.get().filter(|&h| h != MESSAGE_NULL && h != MESSAGE_NO_PROC) {
                remember(&MESSAGES, h, p.recv);
            }
        }
    }
    rc
}

/// `MPI_Mrecv` and `MPI_Mrecv_c`: counted on the record its `MPI_Improbe` found.
pub fn mrecv(
    name: &'static str,
    message: AppArg<H>,
    status: AppArg<Status>,
    call: impl FnOnce(AppArg<Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut local = Status::default();
    let Some(h) = message.get() else { return call(status) };
    let r = take(&MESSAGES, h);
    let _g = crate::entry::enter(name, r);
    let rc = call(status_or(status, &mut local));
    if let (Some(r), SUCCESS) = (r, rc) {
        count_recv(r, &filled(status, &local));
    }
    rc
}

/// `MPI_Wait`: a tracked request's completion (a receive counted).
pub fn wait(
    name: &'static str,
    request: AppArg<H>,
    status: AppArg<Status>,
    call: impl FnOnce(AppArg<Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut local = Status::default();
    let Some(h) = request.get() else { return call(status) };
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let rc = call(status_or(status, &mut local));
    if rc == SUCCESS && request.get() == Some(REQUEST_NULL) && take(&REQUESTS, h).is_some() && recv {
        count_recv(r, &filled(status, &local));
    }
    rc
}

/// `MPI_Test`: a tracked request's completion (a receive counted).
pub fn test(
    name: &'static str,
    request: AppArg<H>,
    flag: AppArg<c_int>,
    status: AppArg<Status>,
    call: impl FnOnce(AppArg<Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut local = Status::default();
    let Some(h) = request.get() else { return call(status) };
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let rc = call(status_or(status, &mut local));
    if rc == SUCCESS
        && flag.get().is_some_and(|f| f != 0)
        && request.get() == Some(REQUEST_NULL)
        && take(&REQUESTS, h).is_some()
        && recv
    {
        count_recv(r, &filled(status, &local));
    }
    rc
}

/// The tracked receives among `handles`: (position, handle, record).
fn tracked_among(handles: impl Iterator<Item = H>) -> Vec<(usize, H, (&'static CommRec, bool))> {
    handles.enumerate().filter_map(|(i, h)| tracked(h).map(|r| (i, h, r))).collect()
}

/// `MPI_Waitall` and `MPI_Testall` (`flag`: the latter's): `n` requests, `n` statuses (or none to read).
fn completed_all(
    name: &'static str,
    n: c_int,
    requests: AppArray<H>,
    statuses: AppArray<Status>,
    flag: Option<AppArg<c_int>>,
    call: impl FnOnce(AppArray<Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let infos = tracked_among(requests.iter());
    if infos.is_empty() {
        let _p = crate::profile::enter([0]);
        return call(statuses);
    }
    let _g = crate::entry::enter_many(name, infos.iter().map(|x| x.2 .0));
    let mut local = Vec::new();
    let ours = statuses.is_empty();
    let rc = if ours {
        local.resize(n.max(0) as usize, Status::default());
        call(AppArray::local_slice(&mut local))
    } else {
        call(statuses)
    };
    let done = flag.is_none_or(|f| f.get().is_some_and(|f| f != 0));
    if done && (rc == SUCCESS || rc == ERR_IN_STATUS) {
        for (i, h, (r, recv)) in infos {
            let status = if ours { local.get(i).copied() } else { statuses.at(i) };
            let (Some(request), Some(status)) = (requests.at(i), status) else { continue };
            if request == REQUEST_NULL
                && (rc == SUCCESS || status.error == SUCCESS)
                && take(&REQUESTS, h).is_some()
                && recv
            {
                count_recv(r, &status);
            }
        }
    }
    rc
}

/// `MPI_Waitall`.
pub fn waitall(
    name: &'static str,
    n: c_int,
    requests: AppArray<H>,
    statuses: AppArray<Status>,
    call: impl FnOnce(AppArray<Status>) -> c_int,
) -> c_int {
    completed_all(name, n, requests, statuses, None, call)
}

/// `MPI_Testall`.
pub fn testall(
    name: &'static str,
    n: c_int,
    requests: AppArray<H>,
    flag: AppArg<c_int>,
    statuses: AppArray<Status>,
    call: impl FnOnce(AppArray<Status>) -> c_int,
) -> c_int {
    completed_all(name, n, requests, statuses, Some(flag), call)
}

/// The blocking collectives.
pub fn collective(name: &'static str, comm: H, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        p.send.counters.collectives.fetch_add(1, Ordering::Relaxed);
    }
    rc
}

/// The nonblocking collectives.
pub fn icollective(name: &'static str, comm: H, request: AppArg<H>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        p.send.counters.collectives.fetch_add(1, Ordering::Relaxed);
        track(request.get(), p.send, false);
    }
    rc
}

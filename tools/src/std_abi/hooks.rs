//! The counting hooks of the standard ABI's state (`super`): each call the generated interposers route
//! here is counted on its communicator's record, nonblocking operations tracked to their completion,
//! and the check entered where it covers the record.
use super::*;

fn count_send(r: &CommRec, count: i64, datatype: H) {
    let mut size = 0i64;
    let bytes = match mpi() {
        Some(m) if count > 0 && unsafe { (m.Type_size_c)(datatype, &mut size) } == SUCCESS && size > 0 => {
            (count as u64).saturating_mul(size as u64)
        }
        _ => 0,
    };
    r.counters.sent_msgs.fetch_add(1, Ordering::Relaxed);
    r.counters.sent_bytes.fetch_add(bytes, Ordering::Relaxed);
}

unsafe fn count_recv(r: &CommRec, status: *const Status) {
    if status.is_null() || (*status).source == PROC_NULL {
        return;
    }
    let Some(m) = mpi() else { return };
    let mut n = 0i64;
    if (m.Get_count_c)(status, BYTE, &mut n) != SUCCESS || n < 0 {
        return;
    }
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
/// communicator (its completion is checked too).
unsafe fn track(request: *mut MPI_Request, r: &'static CommRec, recv: bool) {
    if request.is_null() || !(recv || r.checked_stream.is_some()) {
        return;
    }
    let h = *(request as *mut H);
    if h != REQUEST_NULL && h != 0 {
        remember(&REQUESTS, h, (r, recv));
    }
}

pub unsafe fn send(
    name: &'static str,
    comm: H,
    count: i64,
    datatype: H,
    dest: c_int,
    call: impl FnOnce() -> c_int,
) -> c_int {
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

pub unsafe fn isend(
    name: &'static str,
    comm: H,
    count: i64,
    datatype: H,
    dest: c_int,
    request: *mut MPI_Request,
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
        track(request, p.send, false);
    }
    rc
}

pub unsafe fn recv(
    name: &'static str,
    comm: H,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let mut local = Status::default();
    let st = if status.is_null() { &mut local as *mut Status } else { status as *mut Status };
    let rc = call(st as *mut MPI_Status);
    if let (Some(p), SUCCESS) = (p, rc) {
        count_recv(p.recv, st);
    }
    rc
}

pub unsafe fn irecv(name: &'static str, comm: H, request: *mut MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        track(request, p.recv, true);
    }
    rc
}

pub unsafe fn sendrecv(
    name: &'static str,
    comm: H,
    count: i64,
    datatype: H,
    dest: c_int,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let mut local = Status::default();
    let st = if status.is_null() { &mut local as *mut Status } else { status as *mut Status };
    let rc = call(st as *mut MPI_Status);
    if let (Some(p), SUCCESS) = (p, rc) {
        if dest != PROC_NULL {
            count_send(p.send, count, datatype);
        }
        count_recv(p.recv, st);
    }
    rc
}

pub unsafe fn improbe(
    name: &'static str,
    comm: H,
    flag: *mut c_int,
    message: *mut MPI_Message,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        if !flag.is_null() && *flag != 0 && !message.is_null() {
            let h = *(message as *mut H);
            if h != MESSAGE_NULL && h != MESSAGE_NO_PROC {
                remember(&MESSAGES, h, p.recv);
            }
        }
    }
    rc
}

pub unsafe fn mrecv(
    name: &'static str,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() || message.is_null() {
        return call(status);
    }
    let r = take(&MESSAGES, *(message as *mut H));
    let _g = crate::entry::enter(name, r);
    let mut local = Status::default();
    let st = if status.is_null() { &mut local as *mut Status } else { status as *mut Status };
    let rc = call(st as *mut MPI_Status);
    if let (Some(r), SUCCESS) = (r, rc) {
        count_recv(r, st);
    }
    rc
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
    let h = *(request as *mut H);
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let mut local = Status::default();
    let st = if status.is_null() { &mut local as *mut Status } else { status as *mut Status };
    let rc = call(st as *mut MPI_Status);
    if rc == SUCCESS && *(request as *mut H) == REQUEST_NULL && take(&REQUESTS, h).is_some() && recv {
        count_recv(r, st);
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
    let h = *(request as *mut H);
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let mut local = Status::default();
    let st = if status.is_null() { &mut local as *mut Status } else { status as *mut Status };
    let rc = call(st as *mut MPI_Status);
    if rc == SUCCESS
        && !flag.is_null()
        && *flag != 0
        && *(request as *mut H) == REQUEST_NULL
        && take(&REQUESTS, h).is_some()
        && recv
    {
        count_recv(r, st);
    }
    rc
}

/// The tracked receives among `n` requests: (position, handle, record).
unsafe fn tracked_among(n: c_int, requests: *mut MPI_Request) -> Vec<(usize, H, (&'static CommRec, bool))> {
    if n <= 0 || requests.is_null() {
        return Vec::new();
    }
    let handles = std::slice::from_raw_parts(requests as *const H, n as usize);
    handles.iter().enumerate().filter_map(|(i, &h)| tracked(h).map(|r| (i, h, r))).collect()
}

unsafe fn completed_all(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
    flag: Option<*mut c_int>,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(statuses);
    }
    let infos = tracked_among(n, requests);
    if infos.is_empty() {
        let _p = crate::profile::enter([0]);
        return call(statuses);
    }
    let _g = crate::entry::enter_many(name, infos.iter().map(|x| x.2 .0));
    let mut local = Vec::new();
    let st: *mut Status = if statuses.is_null() {
        local.resize(n as usize, Status::default());
        local.as_mut_ptr()
    } else {
        statuses as *mut Status
    };
    let rc = call(st as *mut MPI_Status);
    let done = flag.is_none_or(|f| !f.is_null() && *f != 0);
    if done && (rc == SUCCESS || rc == ERR_IN_STATUS) {
        for (i, h, (r, recv)) in infos {
            let s = st.add(i);
            if *(requests as *mut H).add(i) == REQUEST_NULL
                && (rc == SUCCESS || (*s).error == SUCCESS)
                && take(&REQUESTS, h).is_some()
                && recv
            {
                count_recv(r, s);
            }
        }
    }
    rc
}

pub unsafe fn waitall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    completed_all(name, n, requests, statuses, None, call)
}

pub unsafe fn testall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    completed_all(name, n, requests, statuses, Some(flag), call)
}

pub unsafe fn collective(name: &'static str, comm: H, call: impl FnOnce() -> c_int) -> c_int {
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

pub unsafe fn icollective(
    name: &'static str,
    comm: H,
    request: *mut MPI_Request,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.send));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        p.send.counters.collectives.fetch_add(1, Ordering::Relaxed);
        track(request, p.send, false);
    }
    rc
}

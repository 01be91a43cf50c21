//! The counting hooks of the standard ABI's state (`super`): each call the generated interposers route
//! here is counted on its communicator's record, nonblocking operations tracked to their completion,
//! and the check entered where it covers the record.
//!
//! The hooks' pointer parameters are the program's arguments of the interposed call, passed on
//! unchanged: each hook's obligation (its `# Safety`) is MPI's for that call: `request`,
//! `message`, `flag` and `status` null (`MPI_STATUS_IGNORE`) or valid for the call, an array of `n`
//! requests (and of `n` statuses, or `MPI_STATUSES_IGNORE`), and `call` the call itself, which fills
//! what it is given (our own status where the program passed none).
use super::*;

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

/// One of the program's pointer arguments (a request, message or flag slot, a status), read through the
/// pointer when asked, before or after the call (no reference is held while the library writes it).
#[derive(Clone, Copy)]
struct Arg<T: Copy>(*const T);

impl<T: Copy> Arg<T> {
    /// # Safety
    /// `p` is null or readable (a `T`) for the rest of the hook: the program's argument, as the call it
    /// passed it to requires, or our own local status.
    unsafe fn new(p: *const T) -> Arg<T> {
        Arg(p)
    }

    /// The value now, `None` for a null pointer.
    fn get(self) -> Option<T> {
        // SAFETY: `new`'s promise; a copy is read, no reference kept.
        (!self.0.is_null()).then(|| unsafe { self.0.read() })
    }
}

/// A request or message slot: pointer-wide handles on this ABI (the prototypes' `MPI_Request *` and
/// `MPI_Message *` are MPICH's `int *`).
fn slot<T>(p: *mut T) -> *const H {
    p.cast::<H>().cast_const()
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

/// The status a call fills: the program's, or `local` where it passed `MPI_STATUS_IGNORE` (null).
fn status_or(status: *mut MPI_Status, local: &mut Status) -> *mut Status {
    if status.is_null() {
        local
    } else {
        status.cast()
    }
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
///
/// # Safety
/// `request`: the program's, as the call requires (module comment).
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
        // SAFETY: the program's request slot, which the call just filled (this function's contract).
        track(unsafe { Arg::new(slot(request)) }.get(), p.send, false);
    }
    rc
}

/// `MPI_Recv` and the blocking receives.
///
/// # Safety
/// `status`: the program's, as the call requires (module comment).
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
    let st = status_or(status, &mut local);
    let rc = call(st.cast());
    if let (Some(p), SUCCESS) = (p, rc) {
        // SAFETY: `st` is `local` or the program's status, which the call just filled (the contract).
        count_recv(p.recv, unsafe { &*st });
    }
    rc
}

/// `MPI_Irecv` and the nonblocking receives.
///
/// # Safety
/// `request`: the program's, as the call requires (module comment).
pub unsafe fn irecv(name: &'static str, comm: H, request: *mut MPI_Request, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let p = rec(comm);
    let _g = crate::entry::enter(name, p.map(|p| p.recv));
    let rc = call();
    if let (Some(p), SUCCESS) = (p, rc) {
        // SAFETY: the program's request slot, which the call just filled (this function's contract).
        track(unsafe { Arg::new(slot(request)) }.get(), p.recv, true);
    }
    rc
}

/// `MPI_Sendrecv` and `MPI_Sendrecv_replace`.
///
/// # Safety
/// `status`: the program's, as the call requires (module comment).
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
    let st = status_or(status, &mut local);
    let rc = call(st.cast());
    if let (Some(p), SUCCESS) = (p, rc) {
        if dest != PROC_NULL {
            count_send(p.send, count, datatype);
        }
        // SAFETY: `st` is `local` or the program's status, which the call just filled (the contract).
        count_recv(p.recv, unsafe { &*st });
    }
    rc
}

/// `MPI_Improbe`: a matched message is remembered with its record, for its `MPI_Mrecv`.
///
/// # Safety
/// `flag`, `message`: the program's, as the call requires (module comment).
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
        // SAFETY: the program's flag and message slots, which the call just filled (the contract).
        let (flag, message) = unsafe { (Arg::new(flag), Arg::new(slot(message))) };
        if flag.get().is_some_and(|f| f != 0) {
            if let Some(h) = message.get().filter(|&h| h != MESSAGE_NULL && h != MESSAGE_NO_PROC) {
                remember(&MESSAGES, h, p.recv);
            }
        }
    }
    rc
}

/// `MPI_Mrecv` and `MPI_Mrecv_c`: counted on the record its `MPI_Improbe` found.
///
/// # Safety
/// `message`, `status`: the program's, as the call requires (module comment).
pub unsafe fn mrecv(
    name: &'static str,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut local = Status::default();
    let st = status_or(status, &mut local);
    // SAFETY: the program's message slot and `st`, ours or the program's status (the contract).
    let (message, filled) = unsafe { (Arg::new(slot(message)), Arg::new(st)) };
    let Some(h) = message.get() else { return call(status) };
    let r = take(&MESSAGES, h);
    let _g = crate::entry::enter(name, r);
    let rc = call(st.cast());
    if let (Some(r), SUCCESS, Some(s)) = (r, rc, filled.get()) {
        count_recv(r, &s);
    }
    rc
}

/// `MPI_Wait`: a tracked request's completion (a receive counted).
///
/// # Safety
/// `request`, `status`: the program's, as the call requires (module comment).
pub unsafe fn wait(
    name: &'static str,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let mut local = Status::default();
    let st = status_or(status, &mut local);
    // SAFETY: the program's request slot and `st`, ours or the program's status (the contract).
    let (request, filled) = unsafe { (Arg::new(slot(request)), Arg::new(st)) };
    let Some(h) = request.get() else { return call(status) };
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let rc = call(st.cast());
    if rc == SUCCESS && request.get() == Some(REQUEST_NULL) && take(&REQUESTS, h).is_some() && recv {
        if let Some(s) = filled.get() {
            count_recv(r, &s);
        }
    }
    rc
}

/// `MPI_Test`: a tracked request's completion (a receive counted).
///
/// # Safety
/// `request`, `flag`, `status`: the program's, as the call requires (module comment).
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
    let mut local = Status::default();
    let st = status_or(status, &mut local);
    // SAFETY: the program's request and flag slots, and `st`, ours or the program's status (the contract).
    let (request, flag, filled) = unsafe { (Arg::new(slot(request)), Arg::new(flag), Arg::new(st)) };
    let Some(h) = request.get() else { return call(status) };
    let Some((r, recv)) = tracked(h) else {
        // The serial model: every request is on the one shared endpoint.
        let _p = crate::profile::enter([0]);
        return call(status);
    };
    let _g = crate::entry::enter(name, Some(r));
    let rc = call(st.cast());
    if rc == SUCCESS
        && flag.get().is_some_and(|f| f != 0)
        && request.get() == Some(REQUEST_NULL)
        && take(&REQUESTS, h).is_some()
        && recv
    {
        if let Some(s) = filled.get() {
            count_recv(r, &s);
        }
    }
    rc
}

/// The tracked receives among `handles`: (position, handle, record).
fn tracked_among(handles: &[H]) -> Vec<(usize, H, (&'static CommRec, bool))> {
    handles.iter().enumerate().filter_map(|(i, &h)| tracked(h).map(|r| (i, h, r))).collect()
}

/// `MPI_Waitall` and `MPI_Testall` (`flag`: the latter's).
///
/// # Safety
/// `requests`: `n` of the program's; `statuses`: `MPI_STATUSES_IGNORE` (null) or `n`; `flag`: the
/// program's: as the call requires (module comment).
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
    let requests = requests.cast::<H>();
    let infos = if n <= 0 || requests.is_null() {
        Vec::new()
    } else {
        // SAFETY: the program's `n` requests (the contract), read before the call (the slice is gone
        // before the call writes them).
        tracked_among(unsafe { std::slice::from_raw_parts(requests, n as usize) })
    };
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
        statuses.cast()
    };
    let rc = call(st.cast());
    // SAFETY: the program's flag, which the call just filled (the contract).
    let done = flag.is_none_or(|f| unsafe { f.as_ref() }.is_some_and(|&f| f != 0));
    if done && (rc == SUCCESS || rc == ERR_IN_STATUS) {
        for (i, h, (r, recv)) in infos {
            // SAFETY: `i < n`: the program's request `i` and status `i` (or ours), which the call just
            // updated (the contract); copies, no reference kept.
            let (request, status) = unsafe { (*requests.add(i), *st.add(i)) };
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
///
/// # Safety
/// As `completed_all`'s.
pub unsafe fn waitall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: this function's contract is `completed_all`'s.
    unsafe { completed_all(name, n, requests, statuses, None, call) }
}

/// `MPI_Testall`.
///
/// # Safety
/// As `completed_all`'s.
pub unsafe fn testall(
    name: &'static str,
    n: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    // SAFETY: this function's contract is `completed_all`'s.
    unsafe { completed_all(name, n, requests, statuses, Some(flag), call) }
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
///
/// # Safety
/// `request`: the program's, as the call requires (module comment).
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
        // SAFETY: the program's request slot, which the call just filled (this function's contract).
        track(unsafe { Arg::new(slot(request)) }.get(), p.send, false);
    }
    rc
}

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
//! The hooks get the application's arguments as it passed them to MPI, its pointers wrapped by the
//! generated interposer (`mpixstream_wrappers::app::AppArg`: a request, flag, index or status, an array of
//! `count` of them), and read them as values, before or after `call` (which writes them).
use crate::entry;
use crate::request_table;
use crate::state::{self, next_seq, on, rec, report_on, CommRec, ReqInfo};
use mpixstream_wrappers::app::{AppArg, AppArray};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use std::os::raw::c_int;

/// The status the call wrote at position `i`: ours (`local`) where we passed them, else the
/// application's (`None` where it ignores them).
#[inline]
pub(crate) fn status_of(ours: bool, local: &[MPI_Status], app: AppArray<MPI_Status>, i: usize) -> Option<MPI_Status> {
    if ours {
        local.get(i).copied()
    } else {
        app.at(i)
    }
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
pub(crate) fn tracked(h: MPI_Request) -> Option<ReqInfo> {
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

/// A tracked operation completed: forget it and count a receive (`status` gives what the call wrote in
/// its status, `None` where ignored; read for a receive only).
#[inline]
pub(crate) fn finish(h: MPI_Request, info: ReqInfo, rc: c_int, status: impl FnOnce() -> Option<MPI_Status>) {
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

pub fn isend(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    request: AppArg<MPI_Request>,
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
        let h = request.get();
        noted(r, h);
        track(h, r, false, false, state::requests_name_endpoints());
    }
    rc
}

pub fn recv(
    name: &'static str,
    comm: MPI_Comm,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    counted_recv(name, rec(comm), status, call)
}

/// A blocking receive on the communicator `r` (`MPI_Recv`, `MPI_Mrecv`): checked, and counted from
/// its status (a local one when the caller ignores it and the report needs the count); `status`: the
/// application's.
fn counted_recv(
    name: &'static str,
    r: Option<&'static CommRec>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let mut local = [MPI_Status::default()];
    let ours = status.is_empty() && report_on();
    let rc = call(if ours { AppArg::local(&mut local[0]) } else { status });
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        r.count_recv(status_of(ours, &local, status.as_array(), 0).as_ref());
    }
    rc
}

pub fn irecv(name: &'static str, comm: MPI_Comm, request: AppArg<MPI_Request>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    tracked_irecv(name, rec(comm), request, call)
}

/// A nonblocking receive on the communicator `r` (`MPI_Irecv`, `MPI_Imrecv`): checked, and its request
/// tracked so that its completion is counted.
fn tracked_irecv(
    name: &'static str,
    r: Option<&'static CommRec>,
    request: AppArg<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let rc = call();
    if let (Some(r), true) = (r, rc == MPI_SUCCESS) {
        let h = request.get();
        noted(r, h);
        track(h, r, true, false, true);
    }
    rc
}

pub fn sendrecv(
    name: &'static str,
    comm: MPI_Comm,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    let app = status;
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let mut local = [MPI_Status::default()];
    let ours = status.is_empty() && report_on();
    let rc = call(if ours { AppArg::local(&mut local[0]) } else { status });
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        if dest != MPI_PROC_NULL {
            r.count_send(count, datatype);
        }
        r.count_recv(status_of(ours, &local, app.as_array(), 0).as_ref());
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

pub fn mprobe(name: &'static str, comm: MPI_Comm, message: AppArg<MPI_Message>, call: impl FnOnce() -> c_int) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if rc == MPI_SUCCESS {
        remember_message(r, message.get());
    }
    rc
}

pub fn improbe(
    name: &'static str,
    comm: MPI_Comm,
    flag: AppArg<c_int>,
    message: AppArg<MPI_Message>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let rc = call();
    if rc == MPI_SUCCESS {
        // The message only where the flag says there is one.
        if flag.get().is_some_and(|f| f != 0) {
            remember_message(r, message.get());
        }
    }
    rc
}

/// The record of the communicator matched message `message` came from (forgetting it).
fn take_message(message: Option<MPI_Message>) -> Option<&'static CommRec> {
    let m = message.filter(|&m| m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)?;
    state::messages().remove(&m).map(|(_, r)| r)
}

pub fn mrecv(
    name: &'static str,
    message: AppArg<MPI_Message>,
    status: AppArg<MPI_Status>,
    call: impl FnOnce(AppArg<MPI_Status>) -> c_int,
) -> c_int {
    if !on() {
        return call(status);
    }
    // The message read before the call, the status after it.
    counted_recv(name, take_message(message.get()), status, call)
}

pub fn imrecv(
    name: &'static str,
    message: AppArg<MPI_Message>,
    request: AppArg<MPI_Request>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !on() {
        return call();
    }
    // The message read before the call, the request after it.
    tracked_irecv(name, take_message(message.get()), request, call)
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

pub fn icollective(
    name: &'static str,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
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
        track(request.get(), r, false, false, false);
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
        let (send, wait, barrier) = unsafe {
            (
                crate::MPI_Send(std::ptr::null(), 0, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle),
                crate::MPI_Wait(&mut request, MPI_STATUS_IGNORE),
                crate::MPI_Barrier(MPI_COMM_WORLD as WideHandle),
            )
        };
        state::PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((send, wait, barrier), (MPI_ERR_INTERN, MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

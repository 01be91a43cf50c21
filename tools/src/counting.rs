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
//! them), and MPICH has written the outputs once `call` returned. Each such hook wraps its pointers in
//! [`Arg`]s once, and reads them as values, before or after `call` (which writes them), never during it.
use crate::entry;
use crate::request_table;
use crate::state::{self, next_seq, on, rec, report_on, CommRec, ReqInfo};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_builtin;
use std::os::raw::c_int;

/// A pointer argument of the application's call (an `MPI_Request *`, `int *`, `MPI_Status *`, or an
/// array of `len` of them), read as values: all the hooks take from the application's memory.
#[derive(Clone, Copy)]
pub(crate) struct Arg<T> {
    p: *const T,
    len: usize,
}

impl<T: Copy> Arg<T> {
    /// The argument `p` of `len` elements (a negative count: none).
    ///
    /// # Safety
    /// `p` is null or valid for reading `len` elements whenever the result is read: the application's
    /// arguments (module comment), read by its hook only before and after `call`.
    #[inline]
    pub(crate) unsafe fn new(p: *const T, len: c_int) -> Arg<T> {
        Arg { p, len: len.max(0) as usize }
    }

    /// The first element (the one of a single argument), `None` where the pointer is null.
    #[inline]
    pub(crate) fn get(self) -> Option<T> {
        self.at(0)
    }

    /// Element `i`, `None` where the pointer is null or `i` past the end.
    #[inline]
    pub(crate) fn at(self, i: usize) -> Option<T> {
        if self.p.is_null() || i >= self.len {
            return None;
        }
        // SAFETY: non-null and `i < len`: valid for reading now (`new`'s contract).
        Some(unsafe { self.p.add(i).read() })
    }

    /// The elements as a slice, for `f` only (empty where the pointer is null).
    #[inline]
    pub(crate) fn with_slice<R>(self, f: impl FnOnce(&[T]) -> R) -> R {
        if self.p.is_null() || self.len == 0 {
            return f(&[]);
        }
        // SAFETY: `len` elements valid for reading (`new`'s contract), and nothing writes them while `f`
        // runs: the hooks call it outside `call`.
        f(unsafe { std::slice::from_raw_parts(self.p, self.len) })
    }
}

impl Arg<MPI_Status> {
    /// A status argument of `len` statuses: none to read where it is null or `MPI_STATUS(ES)_IGNORE`.
    ///
    /// # Safety
    /// As [`Arg::new`].
    #[inline]
    pub(crate) unsafe fn statuses(p: *mut MPI_Status, len: c_int) -> Arg<MPI_Status> {
        Arg { p: if status_is_real(p) { p } else { std::ptr::null() }, len: len.max(0) as usize }
    }
}

/// The status the call wrote at position `i`: ours (`local`) where we passed them, else the
/// application's (`None` where it ignores them).
#[inline]
pub(crate) fn status_of(ours: bool, local: &[MPI_Status], app: Arg<MPI_Status>, i: usize) -> Option<MPI_Status> {
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
        // SAFETY: the application's `request` (the contract), read after the call.
        let h = unsafe { Arg::new(request, 1) }.get();
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
    // SAFETY: the application's `status` (the contract), read after the call.
    counted_recv(name, rec(comm), status, unsafe { Arg::statuses(status, 1) }, call)
}

/// A blocking receive on the communicator `r` (`MPI_Recv`, `MPI_Mrecv`): checked, and counted from
/// its status (a local one when the caller ignores it and the report needs the count); `status` and
/// `app` are the application's status pointer and the same as an argument to read.
fn counted_recv(
    name: &'static str,
    r: Option<&'static CommRec>,
    status: *mut MPI_Status,
    app: Arg<MPI_Status>,
    call: impl FnOnce(*mut MPI_Status) -> c_int,
) -> c_int {
    let _g = entry::enter(name, r);
    let mut local = [MPI_Status::default()];
    let ours = !status_is_real(status) && report_on();
    let rc = call(if ours { local.as_mut_ptr() } else { status });
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        r.count_recv(status_of(ours, &local, app, 0).as_ref());
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
    // SAFETY: the application's `request` (the contract), read after the call.
    tracked_irecv(name, rec(comm), unsafe { Arg::new(request, 1) }, call)
}

/// A nonblocking receive on the communicator `r` (`MPI_Irecv`, `MPI_Imrecv`): checked, and its request
/// tracked so that its completion is counted.
fn tracked_irecv(
    name: &'static str,
    r: Option<&'static CommRec>,
    request: Arg<MPI_Request>,
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
    // SAFETY: the application's `status` (the contract), read after the call.
    let app = unsafe { Arg::statuses(status, 1) };
    let r = rec(comm);
    let _g = entry::enter(name, r);
    let mut local = [MPI_Status::default()];
    let ours = !status_is_real(status) && report_on();
    let rc = call(if ours { local.as_mut_ptr() } else { status });
    if let (Some(r), true) = (r, rc == MPI_SUCCESS && report_on()) {
        if dest != MPI_PROC_NULL {
            r.count_send(count, datatype);
        }
        r.count_recv(status_of(ours, &local, app, 0).as_ref());
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
        // SAFETY: the application's `message` (the contract), read after the call.
        remember_message(r, unsafe { Arg::new(message, 1) }.get());
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
        // SAFETY: the application's `flag` and `message` (the contract), read after the call.
        let (flag, message) = unsafe { (Arg::new(flag, 1), Arg::new(message, 1)) };
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
    // SAFETY: the application's `message` (read before the call) and `status` (after it): the contract.
    let (message, app) = unsafe { (Arg::new(message, 1), Arg::statuses(status, 1)) };
    counted_recv(name, take_message(message.get()), status, app, call)
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
    // SAFETY: the application's `message` (read before the call) and `request` (after it): the contract.
    let (message, request) = unsafe { (Arg::new(message, 1), Arg::new(request, 1)) };
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
        // SAFETY: the application's `request` (the contract), read after the call.
        track(unsafe { Arg::new(request, 1) }.get(), r, false, false, false);
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

    #[test]
    fn an_argument_reads_within_its_length_only() {
        let requests = [MPI_REQUEST_NULL, 0xac00_0003u32 as i32];
        // SAFETY: a live array of two requests, read while it lives.
        let (a, none) = unsafe { (Arg::new(requests.as_ptr(), 2), Arg::<c_int>::new(std::ptr::null(), 3)) };
        assert_eq!((a.get(), a.at(1), a.at(2)), (Some(MPI_REQUEST_NULL), Some(requests[1]), None));
        assert_eq!(a.with_slice(|s| s.len()), 2);
        assert_eq!((none.get(), none.with_slice(|s| s.len())), (None, 0));
        // SAFETY: MPI_STATUS_IGNORE is never read.
        let ignored = unsafe { Arg::statuses(MPI_STATUS_IGNORE, 1) };
        assert!(ignored.get().is_none());
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

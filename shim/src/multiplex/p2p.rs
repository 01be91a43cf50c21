//! The indexed point-to-point entry points (`MPIX_Stream_send/isend/recv/irecv` and their `_c`
//! forms).
//!
//! - A send is one MPICH send on the hidden communicator of its (source index, destination index,
//!   peer) (`endpoints::route`): a cached record, range checks and arithmetic; no allocation, no
//!   lock, no reference count, the request is MPICH's own.
//! - The direct path: a receive on an index that has its own reserved VCI, naming its source rank
//!   and source index, with nothing posted or unexpected in its index's engine, is one MPICH receive
//!   on the one hidden communicator that carries that pair, with the user's tag (`MPI_ANY_TAG` too):
//!   no engine turn, no generalized request, no allocation; the status and request are MPICH's.
//!   Nothing it could overtake exists: every earlier receive of the index is in MPICH's queue before
//!   it, and no message of the pair has been pulled out of MPICH.
//! - Any other receive goes through its index's matching engine.
//! - On dedicated endpoints (split backend), a send between two indices of this process is copied into
//!   the destination index's engine (`mailbox`), off the fast path (its send-table entry is 0).
//!
//! Every MPICH call that carries an indexed message (here and in `matching`: the sends, receives,
//! probes and the tests of the receives they start) goes through the next definition (`next!`), not
//! the `PMPI_*` table: when the tools library is preloaded behind us, its counters and its one-thread
//! check see each message on its hidden communicator, hence on the stream endpoint it used; without
//! it, the next definition is MPICH's `MPI_*` symbol, an alias of the same code as `PMPI_*`, reached
//! by one load of a slot as the table's entry is.
use super::endpoints::Route;
use super::errors::{forward, not_multiplex};
use super::matching::{lock, Outcome, RecvOp};
use super::{mailbox, registry, requests, Multiplex, MPIX_ANY_INDEX};
use crate::errors::{raise, Class};
use crate::forward;
use crate::runtime::mpix_entry;
use crate::runtime::Runtime;
use mpixstream_wrappers::app::{AppArg, AppIn, CallScope, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::datatype::{set_cancelled, set_elements};
use mpixstream_wrappers::mpi::{Datatype, MpiResult};
use mpixstream_wrappers::next;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// An MPI result as the code the application gets.
#[inline]
fn code(r: MpiResult) -> c_int {
    r.err().unwrap_or(MPI_SUCCESS)
}

/// Where a send goes: `None` for `MPI_PROC_NULL`, else (hidden communicator, hidden tag).
#[allow(clippy::too_many_arguments)]
#[inline]
fn send_route(
    rt: &Runtime,
    f: &str,
    comm: MPI_Comm,
    count: MPI_Count,
    request: Option<*mut MPI_Request>,
    dest: c_int,
    tag: c_int,
    si: c_int,
    di: c_int,
) -> Result<Option<(MPI_Comm, c_int)>, c_int> {
    let Some(mx) = registry::lookup(comm) else {
        return Err(not_multiplex(rt, comm, f));
    };
    if count < 0 {
        return Err(raise(comm, Class::Count, f, &format!("count {count} is negative")));
    }
    if request.is_some_and(|r| r.is_null()) {
        return Err(raise(comm, Class::Arg, f, "the request argument is a null pointer"));
    }
    let si = mx.local_index(si, "source_stream_index", f)?;
    if dest == MPI_PROC_NULL {
        return Ok(None);
    }
    mx.check_rank(dest, "dest", f)?;
    let di = mx.remote_index(dest, di, "dest_stream_index", f)?;
    mx.check_tag(tag, false, f)?;
    let route = mx.endpoints.route(mx.rank, si, dest, di);
    if route == Route::LOCAL {
        return Ok(Some((MPI_COMM_NULL, tag)));
    }
    let hidden_tag = if route.tag_in_tag { tag * mx.width + si as c_int } else { tag };
    Ok(Some((route.comm, hidden_tag)))
}

/// The send path when every argument is valid: the hidden communicator and tag on `mx` (the record
/// `registry::with_table` found), or `None` for anything else (`MPI_PROC_NULL`, a bad rank, index,
/// tag or count), which `send_route` then handles with its errors. The route is one load from the
/// communicator's send table (0 for an index out of range; arithmetic for a communicator too large for
/// a table). Unsigned compares fold each range check into one; `get` instead of indexing leaves no
/// panic path.
#[inline(always)]
fn fast_send_route(
    mx: &Multiplex,
    count: MPI_Count,
    dest: c_int,
    tag: c_int,
    si: c_int,
    di: c_int,
) -> Option<(MPI_Comm, c_int)> {
    if count < 0 || (tag as u32) > mx.max_tag as u32 {
        return None;
    }
    let route = if !mx.send_routes.is_empty() {
        // One load: 0 for an index out of range; a negative or too large rank or index is past the end.
        let s = mx.width as u32 as usize;
        if (si as u32 as usize) >= s || (di as u32 as usize) >= s {
            return None;
        }
        let word = *mx.send_routes.get((dest as u32 as usize * s + di as usize) * s + si as usize)?;
        if word == 0 {
            return None;
        }
        Route::unpack(word)
    } else {
        let peers = *mx.counts.get(dest as u32 as usize)?;
        if (si as u32) >= mx.streams.len() as u32 || (di as u32) >= peers as u32 {
            return None;
        }
        mx.endpoints.try_route(mx.rank, si as usize, dest, di as usize).filter(|r| *r != Route::LOCAL)?
    };
    Some((route.comm, if route.tag_in_tag { tag * mx.width + si } else { tag }))
}

/// The direct receive path when every argument is valid and it applies (see the module comment): the
/// one hidden communicator of `mx` that carries (`source`, source index `si`) -> (this process, index
/// `di`), or `None` for anything else (a wildcard source or index, `MPI_PROC_NULL`, a bad rank, index,
/// tag or count, an index without its own reserved VCI, an engine with receives posted or messages
/// unexpected, a pair on a pooled communicator), which `recv` then handles. As `fast_send_route`:
/// unsigned compares fold the range checks (a negative rank or index, `MPI_ANY_SOURCE`,
/// `MPI_PROC_NULL` and `MPIX_ANY_INDEX` among them, is past the end), no panic path.
#[inline(always)]
fn fast_recv_route(
    mx: &Multiplex,
    count: MPI_Count,
    source: c_int,
    tag: c_int,
    si: c_int,
    di: c_int,
) -> Option<MPI_Comm> {
    if count < 0 || (tag != MPI_ANY_TAG && (tag as u32) > mx.max_tag as u32) {
        return None;
    }
    let peers = *mx.counts.get(source as u32 as usize)?;
    if (si as u32) >= peers as u32 {
        return None;
    }
    let engine = mx.engines.get(di as u32 as usize)?;
    if !engine.on_reserved_vci || !engine.is_idle() {
        return None;
    }
    let route = mx.endpoints.try_route(source, si as usize, mx.rank, di as usize)?;
    if route.tag_in_tag {
        return None;
    }
    Some(route.comm)
}

/// Where a receive's result goes: the application's own status and request arguments.
enum RecvOut<'a> {
    /// The status, where the application gave a real one (not NULL, not `MPI_STATUS_IGNORE`).
    Blocking(Option<&'a mut MPI_Status>),
    Nonblocking(&'a mut MPI_Request),
}

/// A receive from `MPI_PROC_NULL`: at once, source `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, count 0 (set
/// here: MPICH 4.0.2's own `MPI_Irecv` from `MPI_PROC_NULL` reports source 0).
fn recv_proc_null(mx: &Arc<Multiplex>, d: usize, out: RecvOut) -> c_int {
    let mut empty = MPI_Status { MPI_SOURCE: MPI_PROC_NULL, MPI_TAG: MPI_ANY_TAG, ..Default::default() };
    let _ = set_elements(&mut empty, Datatype::BYTE, 0);
    let _ = set_cancelled(&mut empty, false);
    match out {
        RecvOut::Blocking(st) => {
            if let Some(st) = st {
                empty.MPI_ERROR = st.MPI_ERROR;
                *st = empty;
            }
            MPI_SUCCESS
        }
        RecvOut::Nonblocking(r) => {
            let done = Outcome { status: empty, error: MPI_SUCCESS, cancelled: false };
            let envelope = (MPI_PROC_NULL, MPI_ANY_TAG, MPIX_ANY_INDEX);
            let op = Arc::new(RecvOp::completed(mx.clone(), d, envelope, done));
            let req = match requests::start(&op) {
                Ok(req) => req,
                Err(rc) => return forward(mx.comm, rc),
            };
            *r = req.raw();
            forward(mx.comm, code(req.grequest_complete()))
        }
    }
}

/// A receive through the engine of index `di` (or from `MPI_PROC_NULL`), with every check and error.
/// `buf`: the application's receive buffer; `out`: `None` for a nonblocking receive whose request
/// argument is a null pointer (an error).
#[allow(clippy::too_many_arguments)]
fn recv(
    rt: &Runtime,
    f: &str,
    buf: PendingBuf,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    si: c_int,
    di: c_int,
    out: Option<RecvOut>,
) -> c_int {
    let Some(mx) = registry::lookup(comm) else {
        return not_multiplex(rt, comm, f);
    };
    let Some(out) = out else {
        return raise(comm, Class::Arg, f, "the request argument is a null pointer");
    };
    let d = match mx.local_index(di, "dest_stream_index", f) {
        Ok(d) => d,
        Err(rc) => return rc,
    };
    // A call on index `d`: inside its endpoint (the engine's turns below nest in this claim).
    let _claim = mx.claim_index(d as c_int, MPI_COMM_NULL, c"MPI_Recv");
    if buf.count() < 0 {
        return raise(comm, Class::Count, f, &format!("count {} is negative", buf.count()));
    }
    if source == MPI_PROC_NULL {
        return recv_proc_null(&mx, d, out);
    }
    let checked = (|| {
        if source != MPI_ANY_SOURCE {
            mx.check_rank(source, "source", f)?;
            if si != MPIX_ANY_INDEX {
                mx.remote_index(source, si, "source_stream_index", f)?;
            }
        } else if si != MPIX_ANY_INDEX && (si < 0 || si >= mx.width) {
            return Err(mx.bad_index(mx.rank, si, "source_stream_index", f));
        }
        mx.check_tag(tag, true, f)
    })();
    if let Err(rc) = checked {
        return rc;
    }
    // The direct path (`fast_recv_route`) was declined before this: the receive goes through the engine.
    let engine = &mx.engines[d];
    let (count, datatype) = (buf.count(), buf.datatype());
    let new_op = |buf: PendingBuf| RecvOp::new(mx.clone(), d, buf, (source, tag, si));
    // No receive posted before ours on this engine: the first matching message, already pulled or next
    // out of MPICH, is ours; take it without queueing anything.
    if let Some((mut msg, got, user_tag)) = engine.take_first(&mx, (source, tag, si)) {
        match out {
            RecvOut::Blocking(status) => {
                let mut st = MPI_Status::default();
                // Into the application's receive buffer, with the matched message and a local status.
                let rc =
                    forward::MPI_Mrecv_c(buf.arg(), count, datatype, AppArg::local(&mut msg), AppArg::local(&mut st));
                st.MPI_SOURCE = got.MPI_SOURCE;
                st.MPI_TAG = user_tag;
                if let Some(status) = status {
                    st.MPI_ERROR = status.MPI_ERROR;
                    *status = st;
                }
                return forward(comm, rc);
            }
            // MPICH's status of this message is the user's (a hidden communicator that carries the
            // user's tag; ranks are the communicator's): MPICH's own request, no generalized one.
            RecvOut::Nonblocking(request) if got.MPI_TAG == user_tag => {
                // Into the application's receive buffer and request argument, with the matched message.
                let started =
                    forward::MPI_Imrecv_c(buf.arg(), count, datatype, AppArg::local(&mut msg), AppArg::local(request));
                return forward(comm, started);
            }
            // The hidden tag carries the source index: a generalized request reports the user's tag.
            RecvOut::Nonblocking(request) => {
                let op = Arc::new(new_op(buf));
                match requests::start(&op) {
                    Ok(req) => *request = req.raw(),
                    Err(rc) => return forward(comm, rc),
                }
                let mut st = lock(&engine.state);
                engine.adopt(&mx, &mut st, op, msg, &got, user_tag);
                return MPI_SUCCESS;
            }
        }
    }
    let op = Arc::new(new_op(buf));
    match out {
        RecvOut::Nonblocking(request) => {
            match requests::start(&op) {
                Ok(req) => *request = req.raw(),
                Err(rc) => return forward(comm, rc),
            }
            let mut st = lock(&engine.state);
            engine.post(&mx, &mut st, op);
            MPI_SUCCESS
        }
        RecvOut::Blocking(status) => {
            {
                let mut st = lock(&engine.state);
                engine.post(&mx, &mut st, op.clone());
                if !op.is_done() {
                    engine.drive(&mx, &mut st, Some(&op));
                }
            }
            let mut idle = 0u32;
            while !op.is_done() {
                // Another thread may be driving this engine (and our receive with it).
                match engine.state.try_lock() {
                    Ok(mut st) => engine.drive(&mx, &mut st, Some(&op)),
                    Err(_) => std::thread::yield_now(),
                }
                idle = idle.wrapping_add(1);
                if idle.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            let o = op.outcome();
            if let Some(status) = status {
                let keep = status.MPI_ERROR;
                *status = o.status;
                status.MPI_ERROR = keep;
            }
            forward(comm, o.error)
        }
    }
}

/// The indexed point-to-point entry points, in their `int` and large-count (`_c`) forms from one
/// definition: `$send`/`$isend` forward to `$mpi_send`/`$mpi_isend` on the hidden communicator, and
/// `$recv`/`$irecv` to `$mpi_recv`/`$mpi_irecv` where the direct path applies (`fast_recv_route`),
/// each through the next definition (see the module comment).
macro_rules! indexed_p2p {
    ($send:ident, $isend:ident, $recv:ident, $irecv:ident, $cnt:ty, $n:path, $mpi_send:ident, $mpi_isend:ident, $mpi_recv:ident, $mpi_irecv:ident) => {
        /// # Safety
        /// C arguments as MPI requires them for a send: the buffer with `count` elements of `datatype`.
        #[no_mangle]
        pub unsafe extern "C" fn $send(
            buf: *const c_void,
            count: $cnt,
            datatype: WideHandle,
            dest: c_int,
            tag: c_int,
            comm: WideHandle,
            source_stream_index: c_int,
            dest_stream_index: c_int,
        ) -> c_int {
            // One panic guard, on the fast path too (a landing pad: no cost while nothing panics).
            // SAFETY: the application's buffer (the caller's contract) goes on unchanged, to the standard
            // ABI's implementation, to the next definition of the send or to the checked path.
            mpixstream_wrappers::guard::ffi_guard(stringify!($send), || unsafe {
                // Handles by value are register-wide: the standard ABI's pointers go to its own
                // implementation, MPICH's `int`s are narrowed and take the paths below.
                if mpixstream_wrappers::abi::standard() {
                    return crate::runtime::standard_entry(stringify!($send), || {
                        let scope = mpixstream_wrappers::app::CallScope::new();
                        crate::standard_abi::multiplex::send(
                            stringify!($send),
                            mpixstream_wrappers::app::AppIn::new(&scope, buf),
                            $n(count),
                            datatype,
                            dest,
                            tag,
                            comm,
                            source_stream_index,
                            dest_stream_index,
                        )
                    });
                }
                let (comm, datatype) = (comm as MPI_Comm, datatype as MPI_Datatype);
                let (si, di) = (source_stream_index, dest_stream_index);
                let fast = registry::with_table(comm, |mx| {
                    let (h, t) = fast_send_route(mx, count as MPI_Count, dest, tag, si, di)?;
                    let _claim = mx.claim_index(si, h, c"MPI_Send");
                    Some(forward(comm, next!($mpi_send)(buf, count, datatype, dest, t, h)))
                });
                if let Some(rc) = fast {
                    return rc;
                }
                // Everything else (errors, MPI_PROC_NULL, a call outside MPI) out of line: the fast path
                // keeps a small frame.
                /// # Safety
                /// The application's arguments of its send.
                #[cold]
                #[inline(never)]
                #[allow(clippy::too_many_arguments)]
                unsafe fn checked(
                    buf: *const c_void,
                    count: $cnt,
                    datatype: MPI_Datatype,
                    dest: c_int,
                    tag: c_int,
                    comm: MPI_Comm,
                    si: c_int,
                    di: c_int,
                ) -> c_int {
                    let f = stringify!($send);
                    // SAFETY: the caller's contract: the application's buffer, passed on unchanged.
                    mpix_entry(f, |rt| unsafe {
                        match send_route(rt, f, comm, count as MPI_Count, None, dest, tag, si, di) {
                            Err(rc) => rc,
                            Ok(None) => MPI_SUCCESS,
                            // Between two indices of this process on dedicated endpoints (`Route::LOCAL`):
                            // copied (`mailbox`).
                            Ok(Some((MPI_COMM_NULL, t))) => match registry::lookup(comm) {
                                Some(mx) => mailbox::send(
                                    &mx,
                                    AppIn::new(&CallScope::new(), buf),
                                    count as MPI_Count,
                                    datatype,
                                    t,
                                    si as usize,
                                    di as usize,
                                    None,
                                ),
                                None => MPI_ERR_COMM,
                            },
                            Ok(Some((h, t))) => {
                                let _claim = registry::lookup(comm).and_then(|mx| mx.claim_index(si, h, c"MPI_Send"));
                                forward(comm, next!($mpi_send)(buf, count, datatype, dest, t, h))
                            }
                        }
                    })
                }
                checked(buf, count, datatype, dest, tag, comm, si, di)
            })
        }

        /// # Safety
        /// C arguments as MPI requires them for a nonblocking send: the buffer with `count` elements of
        /// `datatype`, the request pointer.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $isend(
            buf: *const c_void,
            count: $cnt,
            datatype: WideHandle,
            dest: c_int,
            tag: c_int,
            comm: WideHandle,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            request: *mut MPI_Request,
        ) -> c_int {
            // One panic guard, on the fast path too (a landing pad: no cost while nothing panics).
            // SAFETY: the application's buffer and request (the caller's contract) go on unchanged, to
            // the standard ABI's implementation, to the next definition of the send or to the checked
            // path.
            mpixstream_wrappers::guard::ffi_guard(stringify!($isend), || unsafe {
                // Handles by value are register-wide: the standard ABI's pointers go to its own
                // implementation, MPICH's `int`s are narrowed and take the paths below.
                if mpixstream_wrappers::abi::standard() {
                    return crate::runtime::standard_entry(stringify!($isend), || {
                        let scope = mpixstream_wrappers::app::CallScope::new();
                        crate::standard_abi::multiplex::isend(
                            stringify!($isend),
                            mpixstream_wrappers::app::AppIn::new(&scope, buf),
                            $n(count),
                            datatype,
                            dest,
                            tag,
                            comm,
                            source_stream_index,
                            dest_stream_index,
                            mpixstream_wrappers::app::AppArg::new(&scope, request.cast()),
                        )
                    });
                }
                let (comm, datatype) = (comm as MPI_Comm, datatype as MPI_Datatype);
                let (si, di) = (source_stream_index, dest_stream_index);
                // One compiled entry on every target. MPICH's call keeps a frame of ours around it (nine
                // arguments here against its seven: no tail call), so an error it returns reaches the
                // user's handler on the multiplex communicator (`forward`), whatever handler that is. A
                // hand-written jump into MPICH saved about 4 ns a call on x86-64 only (docs/multiplex.md).
                if !request.is_null() {
                    let fast = registry::with_table(comm, |mx| {
                        let (h, t) = fast_send_route(mx, count as MPI_Count, dest, tag, si, di)?;
                        let _claim = mx.claim_index(si, h, c"MPI_Isend");
                        Some(forward(comm, next!($mpi_isend)(buf, count, datatype, dest, t, h, request)))
                    });
                    if let Some(rc) = fast {
                        return rc;
                    }
                }
                /// # Safety
                /// The application's arguments of its send.
                #[cold]
                #[inline(never)]
                #[allow(clippy::too_many_arguments)]
                unsafe fn checked(
                    buf: *const c_void,
                    count: $cnt,
                    datatype: MPI_Datatype,
                    dest: c_int,
                    tag: c_int,
                    comm: MPI_Comm,
                    si: c_int,
                    di: c_int,
                    request: *mut MPI_Request,
                ) -> c_int {
                    let f = stringify!($isend);
                    // SAFETY: the caller's contract: the application's buffer and request (checked for
                    // NULL by `send_route`), passed on unchanged.
                    mpix_entry(f, |rt| unsafe {
                        match send_route(rt, f, comm, count as MPI_Count, Some(request), dest, tag, si, di) {
                            Err(rc) => rc,
                            Ok(None) => {
                                forward(comm, next!($mpi_isend)(buf, count, datatype, MPI_PROC_NULL, 0, comm, request))
                            }
                            // Between two indices of this process on dedicated endpoints (`Route::LOCAL`):
                            // copied (`mailbox`).
                            Ok(Some((MPI_COMM_NULL, t))) => match registry::lookup(comm) {
                                Some(mx) => {
                                    let scope = CallScope::new();
                                    let (si, di) = (si as usize, di as usize);
                                    let (buf, request) = (AppIn::new(&scope, buf), Some(AppArg::new(&scope, request)));
                                    mailbox::send(&mx, buf, count as MPI_Count, datatype, t, si, di, request)
                                }
                                None => MPI_ERR_COMM,
                            },
                            Ok(Some((h, t))) => {
                                let _claim = registry::lookup(comm).and_then(|mx| mx.claim_index(si, h, c"MPI_Isend"));
                                forward(comm, next!($mpi_isend)(buf, count, datatype, dest, t, h, request))
                            }
                        }
                    })
                }
                checked(buf, count, datatype, dest, tag, comm, si, di, request)
            })
        }

        /// # Safety
        /// C arguments as MPI requires them for a receive: the buffer with `count` elements of
        /// `datatype`, the status pointer (NULL or `MPI_STATUS_IGNORE` allowed).
        #[no_mangle]
        pub unsafe extern "C" fn $recv(
            buf: *mut c_void,
            count: $cnt,
            datatype: WideHandle,
            source: c_int,
            tag: c_int,
            comm: WideHandle,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            status: *mut MPI_Status,
        ) -> c_int {
            // One panic guard, on the fast path too (a landing pad: no cost while nothing panics).
            // SAFETY: the application's buffer and status (the caller's contract) go on unchanged, to the
            // standard ABI's implementation, to the next definition of the receive or to `recv` (the
            // status as a reference where it is a real one, for the call).
            mpixstream_wrappers::guard::ffi_guard(stringify!($recv), || unsafe {
                // Handles by value are register-wide: the standard ABI's pointers go to its own
                // implementation, MPICH's `int`s are narrowed and take the paths below.
                if mpixstream_wrappers::abi::standard() {
                    return crate::runtime::standard_entry(stringify!($recv), || {
                        let scope = mpixstream_wrappers::app::CallScope::new();
                        crate::standard_abi::multiplex::recv(
                            stringify!($recv),
                            mpixstream_wrappers::app::AppArg::new(&scope, buf),
                            $n(count),
                            datatype,
                            source,
                            tag,
                            comm,
                            source_stream_index,
                            dest_stream_index,
                            mpixstream_wrappers::app::AppArg::new(&scope, status.cast()),
                        )
                    });
                }
                let (comm, datatype) = (comm as MPI_Comm, datatype as MPI_Datatype);
                let (si, di) = (source_stream_index, dest_stream_index);
                let fast = registry::with_table(comm, |mx| {
                    let h = fast_recv_route(mx, count as MPI_Count, source, tag, si, di)?;
                    let _claim = mx.claim_index(di, h, c"MPI_Recv");
                    Some(forward(comm, next!($mpi_recv)(buf, count, datatype, source, tag, h, status)))
                });
                if let Some(rc) = fast {
                    return rc;
                }
                let f = stringify!($recv);
                mpix_entry(f, |rt| {
                    let out = RecvOut::Blocking(status_is_real(status).then(|| &mut *status));
                    recv(
                        rt,
                        f,
                        PendingBuf::new(buf, count as MPI_Count, datatype),
                        source,
                        tag,
                        comm,
                        si,
                        di,
                        Some(out),
                    )
                })
            })
        }

        /// # Safety
        /// C arguments as MPI requires them for a nonblocking receive: the buffer with `count` elements
        /// of `datatype`, the request pointer.
        #[no_mangle]
        pub unsafe extern "C" fn $irecv(
            buf: *mut c_void,
            count: $cnt,
            datatype: WideHandle,
            source: c_int,
            tag: c_int,
            comm: WideHandle,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            request: *mut MPI_Request,
        ) -> c_int {
            // One panic guard, on the fast path too (a landing pad: no cost while nothing panics).
            // SAFETY: the application's buffer and request (the caller's contract) go on unchanged, to the
            // standard ABI's implementation, to the next definition of the receive or to `recv` (the
            // request as a reference where it is not NULL, for the call).
            mpixstream_wrappers::guard::ffi_guard(stringify!($irecv), || unsafe {
                // Handles by value are register-wide: the standard ABI's pointers go to its own
                // implementation, MPICH's `int`s are narrowed and take the paths below.
                if mpixstream_wrappers::abi::standard() {
                    return crate::runtime::standard_entry(stringify!($irecv), || {
                        let scope = mpixstream_wrappers::app::CallScope::new();
                        crate::standard_abi::multiplex::irecv(
                            stringify!($irecv),
                            mpixstream_wrappers::app::AppArg::new(&scope, buf),
                            $n(count),
                            datatype,
                            source,
                            tag,
                            comm,
                            source_stream_index,
                            dest_stream_index,
                            mpixstream_wrappers::app::AppArg::new(&scope, request.cast()),
                        )
                    });
                }
                let (comm, datatype) = (comm as MPI_Comm, datatype as MPI_Datatype);
                let (si, di) = (source_stream_index, dest_stream_index);
                if !request.is_null() {
                    let fast = registry::with_table(comm, |mx| {
                        let h = fast_recv_route(mx, count as MPI_Count, source, tag, si, di)?;
                        let _claim = mx.claim_index(di, h, c"MPI_Irecv");
                        Some(forward(comm, next!($mpi_irecv)(buf, count, datatype, source, tag, h, request)))
                    });
                    if let Some(rc) = fast {
                        return rc;
                    }
                }
                let f = stringify!($irecv);
                mpix_entry(f, |rt| {
                    let out = request.as_mut().map(RecvOut::Nonblocking);
                    recv(rt, f, PendingBuf::new(buf, count as MPI_Count, datatype), source, tag, comm, si, di, out)
                })
            })
        }
    };
}

indexed_p2p!(
    MPIX_Stream_send,
    MPIX_Stream_isend,
    MPIX_Stream_recv,
    MPIX_Stream_irecv,
    c_int,
    crate::standard_abi::multiplex::N::Int,
    MPI_Send,
    MPI_Isend,
    MPI_Recv,
    MPI_Irecv
);
indexed_p2p!(
    MPIX_Stream_send_c,
    MPIX_Stream_isend_c,
    MPIX_Stream_recv_c,
    MPIX_Stream_irecv_c,
    MPI_Count,
    crate::standard_abi::multiplex::N::Large,
    MPI_Send_c,
    MPI_Isend_c,
    MPI_Recv_c,
    MPI_Irecv_c
);

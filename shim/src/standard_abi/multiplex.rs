//! Multiplex stream communicators on the standard ABI (serial model) and their indexed point-to-point
//! calls (`MPIX_Stream_send/isend/recv/irecv` and the `_c` forms).
//!
//! Layout: one hidden dup of the user's communicator per (source index, destination index) pair,
//! `S * S` of them (`S` the largest count of any process, learned by an allgather at creation). A
//! message from index `i` to index `j` is an ordinary message of the library on pair `(i, j)`'s
//! communicator, with the user's own tag and ranks, so every receive that names its source index is the
//! library's own receive and request: its status (source, tag, count, error) is the user's as the
//! library reports it, `MPI_ANY_TAG` and `MPI_ANY_SOURCE` match as on any communicator, and MPI's order
//! per (sender, receiver, communicator) is the order per pair of indices. (MPICH's ABI runtime puts the
//! source index in the tag of one communicator per destination index and matches in its own engine,
//! whose generalized requests report the user's tag; this ABI's libraries give no hook to rewrite the
//! status of a library request, so the pairs carry the index instead.) `S * S` context ids, bounded by
//! `MAX_WIDTH`.
//!
//! `MPIX_ANY_INDEX` (ours) as the source index of a blocking receive probes the pairs of its destination
//! index in turn and receives the message it finds (`MPI_Improbe` + `MPI_Mrecv`); a nonblocking receive
//! cannot wait on several communicators with one library request and refuses it.
use super::errors::{forward, raise, Class};
use super::mpi::{self, Count, Status, H};
use super::streams::{self, Record};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// `MPIX_ANY_INDEX` (`mpix_stream_abi.h`).
pub const ANY_INDEX: c_int = -1;

/// The largest `S`: `S * S` hidden communicators (256 context ids at most per multiplex communicator).
pub const MAX_WIDTH: c_int = 16;

pub struct Multiplex {
    pub rank: c_int,
    pub size: c_int,
    /// This process's streams, by index (`None`: `MPIX_STREAM_NULL`).
    pub streams: Box<[Option<usize>]>,
    /// Every process's count.
    pub counts: Box<[c_int]>,
    pub width: c_int,
    /// Pair `(i, j)` at `i * width + j`.
    pub hidden: Box<[H]>,
    pub tag_ub: c_int,
}

/// A hidden communicator, as the tools library sees it (`mpixstream_std_multiplex_of`): the multiplex
/// communicator, the local index whose sends it carries and the one whose receives it carries (-1 where
/// this process has no such index), and those indices' streams (-1: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hidden {
    pub user: H,
    pub send_index: c_int,
    pub recv_index: c_int,
    pub send_stream: c_int,
    pub recv_stream: c_int,
}

static HIDDEN: Mutex<Option<HashMap<H, Hidden>>> = Mutex::new(None);

/// What `comm` is, where it is a hidden communicator of a live multiplex communicator.
pub fn hidden_of(comm: H) -> Option<Hidden> {
    HIDDEN.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(&comm).copied()
}

impl Multiplex {
    fn register(&self, user: H) {
        let mut g = HIDDEN.lock().unwrap_or_else(|e| e.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        let n = self.streams.len() as c_int;
        let local = |i: c_int| if i < n { i } else { -1 };
        let stream = |i: c_int| if i < 0 { -1 } else { self.streams[i as usize].map_or(-1, |s| s as c_int) };
        for si in 0..self.width {
            for di in 0..self.width {
                let (send_index, recv_index) = (local(si), local(di));
                let h = Hidden {
                    user,
                    send_index,
                    recv_index,
                    send_stream: stream(send_index),
                    recv_stream: stream(recv_index),
                };
                map.insert(self.pair(si, di), h);
            }
        }
    }

    /// At the destruction of the user's communicator (its record's delete callback): the streams are
    /// detached, the hidden communicators freed.
    pub fn release(self) {
        if let Some(map) = HIDDEN.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            for h in self.hidden.iter() {
                map.remove(h);
            }
        }
        for s in self.streams.iter().flatten() {
            streams::slot(*s).detach();
        }
        if let Ok(m) = mpi::mpi() {
            for mut c in self.hidden.into_vec() {
                unsafe { (m.Comm_free)(&mut c) };
            }
        }
    }

    fn pair(&self, si: c_int, di: c_int) -> H {
        self.hidden[(si * self.width + di) as usize]
    }

    fn bad_index(&self, comm: H, rank: c_int, idx: c_int, which: &str, f: &str) -> c_int {
        let n = self.counts[rank as usize];
        if idx == ANY_INDEX && which == "dest_stream_index" {
            return raise(
                comm,
                Class::Arg,
                f,
                "MPIX_ANY_INDEX is allowed only as the source_stream_index of a receive",
            );
        }
        let who = if rank == self.rank { "this process".to_string() } else { format!("rank {rank}") };
        raise(
            comm,
            Class::Arg,
            f,
            &format!(
                "{which} {idx} is out of range: {who} attached {n} stream(s) to this multiplex communicator \
                 (valid indices: 0 to count-1)"
            ),
        )
    }

    fn check_index(&self, comm: H, rank: c_int, idx: c_int, which: &str, f: &str) -> Result<(), c_int> {
        if idx >= 0 && idx < self.counts[rank as usize] {
            Ok(())
        } else {
            Err(self.bad_index(comm, rank, idx, which, f))
        }
    }

    fn check_rank(&self, comm: H, rank: c_int, which: &str, f: &str) -> Result<(), c_int> {
        if rank >= 0 && rank < self.size {
            Ok(())
        } else {
            Err(raise(
                comm,
                Class::Rank,
                f,
                &format!("{which} {rank} is not a rank of the communicator (size {})", self.size),
            ))
        }
    }

    fn check_tag(&self, comm: H, tag: c_int, any_ok: bool, f: &str) -> Result<(), c_int> {
        if (0..=self.tag_ub).contains(&tag) || (any_ok && tag == mpi::ANY_TAG) {
            Ok(())
        } else {
            Err(raise(
                comm,
                Class::Tag,
                f,
                &format!("tag {tag} is invalid: tags run from 0 to MPI_TAG_UB ({})", self.tag_ub),
            ))
        }
    }
}

impl streams::Layout for Multiplex {
    fn release(self: Box<Self>) {
        Multiplex::release(*self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The multiplex communicator behind a record's layout.
pub fn of(layout: &dyn streams::Layout) -> Option<&Multiplex> {
    layout.as_any().downcast_ref::<Multiplex>()
}

/// The multiplex record of `comm`, or the error of an indexed call on another communicator.
fn multiplex(comm: H, f: &str) -> Result<&'static Multiplex, c_int> {
    if comm == mpi::COMM_NULL {
        return Err(raise(mpi::COMM_WORLD, Class::Comm, f, "the communicator is MPI_COMM_NULL"));
    }
    let st = streams::state().map_err(|e| raise(comm, Class::Other, f, &e))?;
    let record = streams::record(st, comm);
    if let Some(mx) = record.and_then(|r| match r {
        Record::Multiplex(layout) => of(layout.as_ref()),
        _ => None,
    }) {
        return Ok(mx);
    }
    let what = if record.is_some() {
        "a single-stream communicator (MPIX_Stream_comm_create)"
    } else {
        "not a multiplex stream communicator"
    };
    Err(raise(
        comm,
        Class::Comm,
        f,
        &format!("communicator 0x{comm:x} is {what}; indexed send and receive need one from MPIX_Stream_comm_create_multiplex"),
    ))
}

/// The local arguments of a creation: the streams, or the error.
unsafe fn local_streams(
    count: c_int,
    array: *const H,
    newcomm: *mut H,
) -> Result<Box<[Option<usize>]>, (Class, String)> {
    if newcomm.is_null() {
        return Err((Class::Arg, "the newcomm argument is a null pointer".into()));
    }
    if count < 0 {
        return Err((Class::Count, format!("count {count} is negative")));
    }
    if count > MAX_WIDTH {
        return Err((
            Class::Other,
            format!("count {count} is more than {MAX_WIDTH}, the most stream indices of a multiplex communicator on the standard ABI"),
        ));
    }
    if count > 0 && array.is_null() {
        return Err((Class::Arg, format!("array_of_streams is a null pointer and count is {count}")));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let h = *array.add(i);
        if h == 0 {
            out.push(None);
            continue;
        }
        match streams::lookup(h) {
            Ok(s) => out.push(Some(s)),
            Err((class, e)) => return Err((class, format!("array_of_streams[{i}]: {e}"))),
        }
    }
    Ok(out.into_boxed_slice())
}

/// `MPIX_Stream_comm_create_multiplex`.
pub unsafe fn create(comm: H, count: c_int, array: *const H, newcomm: *mut H) -> c_int {
    const F: &str = "MPIX_Stream_comm_create_multiplex";
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(mpi::COMM_WORLD, Class::Other, F, e),
    };
    if comm == mpi::COMM_NULL {
        return raise(mpi::COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
    }
    let st = match streams::state() {
        Ok(st) => st,
        Err(e) => return raise(comm, Class::Other, F, &e),
    };
    let mut inter = 0;
    let rc = (m.Comm_test_inter)(comm, &mut inter);
    if rc != mpi::SUCCESS {
        return rc;
    }
    if inter != 0 {
        return raise(
            comm,
            Class::Comm,
            F,
            "the parent is an intercommunicator; multiplex communicators need an intracommunicator",
        );
    }
    let local = local_streams(count, array, newcomm);
    let (mut rank, mut size) = (0, 0);
    (m.Comm_rank)(comm, &mut rank);
    (m.Comm_size)(comm, &mut size);
    // Every process learns every count, and a negative count from a process whose arguments are wrong,
    // so that all fail together.
    let mine: c_int = if local.is_ok() { count } else { -1 };
    let mut counts = vec![0 as c_int; size as usize].into_boxed_slice();
    let rc = (m.Allgather)(
        &mine as *const c_int as *const c_void,
        1,
        mpi::INT,
        counts.as_mut_ptr() as *mut c_void,
        1,
        mpi::INT,
        comm,
    );
    if rc != mpi::SUCCESS {
        return rc;
    }
    let streams = match local {
        Err((class, msg)) => return raise(comm, class, F, &msg),
        Ok(s) => s,
    };
    if let Some(r) = counts.iter().position(|&c| c < 0) {
        return raise(
            comm,
            Class::Arg,
            F,
            &format!("rank {r} passed invalid arguments (see its error); no communicator was created"),
        );
    }
    let width = counts.iter().copied().max().unwrap_or(0);
    let mut ub: *mut c_int = std::ptr::null_mut();
    let mut flag = 0;
    (m.Comm_get_attr)(comm, mpi::TAG_UB, &mut ub as *mut *mut c_int as *mut c_void, &mut flag);
    let tag_ub = if flag != 0 && !ub.is_null() { *ub } else { 32767 };
    let mut user = mpi::COMM_NULL;
    let rc = (m.Comm_dup)(comm, &mut user);
    if rc != mpi::SUCCESS {
        return rc;
    }
    // The hidden communicators return their errors to our code, which raises them through the user's
    // communicator; where the user's handler ends the job, theirs does too (a request completing with an
    // error in the user's MPI_Wait meets theirs).
    let mut h = mpi::ERRORS_RETURN;
    (m.Comm_get_errhandler)(comm, &mut h);
    let hidden_handler = if h == mpi::ERRORS_ARE_FATAL || h == mpi::ERRORS_ABORT { h } else { mpi::ERRORS_RETURN };
    (m.Errhandler_free)(&mut h);
    let mut hidden = Vec::with_capacity((width * width) as usize);
    let mut rc = mpi::SUCCESS;
    for _ in 0..width * width {
        let mut c = mpi::COMM_NULL;
        rc = (m.Comm_dup)(comm, &mut c);
        if rc != mpi::SUCCESS {
            break;
        }
        (m.Comm_set_errhandler)(c, hidden_handler);
        hidden.push(c);
    }
    if rc != mpi::SUCCESS {
        for mut c in hidden {
            (m.Comm_free)(&mut c);
        }
        (m.Comm_free)(&mut user);
        return forward(comm, rc);
    }
    for s in streams.iter().flatten() {
        streams::slot(*s).attach();
    }
    let mx = Multiplex { rank, size, streams, counts, width, hidden: hidden.into_boxed_slice(), tag_ub };
    mx.register(user);
    super::policy::STATS.multiplex.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rc = streams::attach(st, user, Record::Multiplex(Box::new(mx)));
    if rc != mpi::SUCCESS {
        // The record was dropped without its delete callback: nothing else holds the hidden ones.
        (m.Comm_free)(&mut user);
        return forward(comm, rc);
    }
    *newcomm = user;
    mpi::SUCCESS
}

/// `MPIX_Comm_get_stream` on a multiplex communicator.
pub unsafe fn get_stream(comm: H, mx: &Multiplex, idx: c_int, stream: *mut H) -> c_int {
    let n = mx.streams.len();
    if idx < 0 || idx as usize >= n {
        return raise(
            comm,
            Class::Arg,
            "MPIX_Comm_get_stream",
            &format!("index {idx} is out of range: this process attached {n} stream(s) to the multiplex communicator"),
        );
    }
    *stream = mx.streams[idx as usize].map_or(0, streams::handle);
    mpi::SUCCESS
}

/// `MPIX_Comm_multiplex_tag_ub` (ours): the largest tag an indexed call accepts (the parent's
/// `MPI_TAG_UB`: the pairs' communicators carry the user's tag unchanged).
pub unsafe fn tag_ub(comm: H, out: *mut c_int) -> c_int {
    const F: &str = "MPIX_Comm_multiplex_tag_ub";
    let mx = match multiplex(comm, F) {
        Ok(mx) => mx,
        Err(rc) => return rc,
    };
    if out.is_null() {
        return raise(comm, Class::Arg, F, "the tag_ub argument is a null pointer");
    }
    *out = mx.tag_ub;
    mpi::SUCCESS
}

/// An element count in its two forms.
#[derive(Clone, Copy)]
pub enum N {
    Int(c_int),
    Large(Count),
}

impl N {
    fn get(self) -> Count {
        match self {
            N::Int(n) => n as Count,
            N::Large(n) => n,
        }
    }
}

/// Where a send goes: the communicator of its pair (any one for `MPI_PROC_NULL`).
#[allow(clippy::too_many_arguments)]
fn send_comm(
    f: &str,
    comm: H,
    count: N,
    request: Option<*mut H>,
    dest: c_int,
    tag: c_int,
    si: c_int,
    di: c_int,
) -> Result<H, c_int> {
    let mx = multiplex(comm, f)?;
    if count.get() < 0 {
        return Err(raise(comm, Class::Count, f, &format!("count {} is negative", count.get())));
    }
    if request.is_some_and(|r| r.is_null()) {
        return Err(raise(comm, Class::Arg, f, "the request argument is a null pointer"));
    }
    mx.check_index(comm, mx.rank, si, "source_stream_index", f)?;
    if dest == mpi::PROC_NULL {
        return Ok(mx.pair(si, si));
    }
    mx.check_rank(comm, dest, "dest", f)?;
    mx.check_index(comm, dest, di, "dest_stream_index", f)?;
    mx.check_tag(comm, tag, false, f)?;
    Ok(mx.pair(si, di))
}

/// `MPIX_Stream_send` and `MPIX_Stream_send_c`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn send(
    f: &str,
    buf: *const c_void,
    count: N,
    dt: H,
    dest: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    let h = match send_comm(f, comm, count, None, dest, tag, si, di) {
        Ok(h) => h,
        Err(rc) => return rc,
    };
    forward(
        comm,
        match count {
            N::Int(n) => (m.Send)(buf, n, dt, dest, tag, h),
            N::Large(n) => (m.Send_c)(buf, n, dt, dest, tag, h),
        },
    )
}

/// `MPIX_Stream_isend` and `MPIX_Stream_isend_c`: the library's own request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isend(
    f: &str,
    buf: *const c_void,
    count: N,
    dt: H,
    dest: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    request: *mut H,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    let h = match send_comm(f, comm, count, Some(request), dest, tag, si, di) {
        Ok(h) => h,
        Err(rc) => return rc,
    };
    forward(
        comm,
        match count {
            N::Int(n) => (m.Isend)(buf, n, dt, dest, tag, h, request),
            N::Large(n) => (m.Isend_c)(buf, n, dt, dest, tag, h, request),
        },
    )
}

/// The checks of a receive; the multiplex record and the destination index's checked value.
#[allow(clippy::too_many_arguments)]
fn recv_checks(
    f: &str,
    comm: H,
    count: N,
    source: c_int,
    tag: c_int,
    si: c_int,
    di: c_int,
) -> Result<&'static Multiplex, c_int> {
    let mx = multiplex(comm, f)?;
    mx.check_index(comm, mx.rank, di, "dest_stream_index", f)?;
    if count.get() < 0 {
        return Err(raise(comm, Class::Count, f, &format!("count {} is negative", count.get())));
    }
    if source == mpi::PROC_NULL {
        return Ok(mx);
    }
    if source != mpi::ANY_SOURCE {
        mx.check_rank(comm, source, "source", f)?;
        if si != ANY_INDEX {
            mx.check_index(comm, source, si, "source_stream_index", f)?;
        }
    } else if si != ANY_INDEX && !(0..mx.width).contains(&si) {
        return Err(raise(
            comm,
            Class::Arg,
            f,
            &format!("source_stream_index {si} is out of range: no process attached more than {} stream(s)", mx.width),
        ));
    }
    mx.check_tag(comm, tag, true, f)?;
    Ok(mx)
}

/// `MPIX_Stream_recv` and `MPIX_Stream_recv_c`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv(
    f: &str,
    buf: *mut c_void,
    count: N,
    dt: H,
    source: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    status: *mut Status,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    let mx = match recv_checks(f, comm, count, source, tag, si, di) {
        Ok(mx) => mx,
        Err(rc) => return rc,
    };
    let receive = |h: H| match count {
        N::Int(n) => (m.Recv)(buf, n, dt, source, tag, h, status),
        N::Large(n) => (m.Recv_c)(buf, n, dt, source, tag, h, status),
    };
    if source == mpi::PROC_NULL {
        return forward(comm, receive(mx.pair(0, di)));
    }
    if si != ANY_INDEX {
        return forward(comm, receive(mx.pair(si, di)));
    }
    // Any source index: the first message found on one of the destination index's pairs, the pairs
    // probed in turn from a rotating start (no pair starves another).
    let sources = if source == mpi::ANY_SOURCE { mx.width } else { mx.counts[source as usize] };
    if sources == 0 {
        return raise(comm, Class::Arg, f, &format!("MPIX_ANY_INDEX: rank {source} attached no stream"));
    }
    let mut turn = 0;
    loop {
        for k in 0..sources {
            let s = (turn + k) % sources;
            let (mut found, mut msg) = (0, mpi::MESSAGE_NULL);
            let mut st = Status::default();
            let rc = (m.Improbe)(source, tag, mx.pair(s, di), &mut found, &mut msg, &mut st);
            if rc != mpi::SUCCESS {
                return forward(comm, rc);
            }
            if found != 0 {
                let rc = match count {
                    N::Int(n) => (m.Mrecv)(buf, n, dt, &mut msg, status),
                    N::Large(n) => (m.Mrecv_c)(buf, n, dt, &mut msg, status),
                };
                return forward(comm, rc);
            }
        }
        turn = (turn + 1) % sources;
        std::thread::yield_now();
    }
}

/// `MPIX_Stream_irecv` and `MPIX_Stream_irecv_c`: the library's own request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn irecv(
    f: &str,
    buf: *mut c_void,
    count: N,
    dt: H,
    source: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    request: *mut H,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    if request.is_null() {
        return raise(comm, Class::Arg, f, "the request argument is a null pointer");
    }
    let mx = match recv_checks(f, comm, count, source, tag, si, di) {
        Ok(mx) => mx,
        Err(rc) => return rc,
    };
    let h = if source == mpi::PROC_NULL {
        mx.pair(0, di)
    } else if si == ANY_INDEX {
        return raise(
            comm,
            Class::Unsupported,
            f,
            "MPIX_ANY_INDEX in a nonblocking receive is not supported on the standard ABI (one library request \
             cannot wait on every source index's communicator); name the source index, or use MPIX_Stream_recv",
        );
    } else {
        mx.pair(si, di)
    };
    forward(
        comm,
        match count {
            N::Int(n) => (m.Irecv)(buf, n, dt, source, tag, h, request),
            N::Large(n) => (m.Irecv_c)(buf, n, dt, source, tag, h, request),
        },
    )
}

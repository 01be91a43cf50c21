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
//!
//! The indexed calls read the multiplex communicator's layout while its record is lent
//! (`streams::with_record`): what they need (the pair's communicator, or the destination index's pairs) is
//! taken out and the checks' errors carried out as values, then the calls and the error handlers run.
use super::errors::{forward, raise, Class};
pub use super::mpi::N;
use super::mpi::{self, Status, H};
use super::streams::{self, Record};
use mpixstream_wrappers::app::{AppArg, AppIn};
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
            for &c in self.hidden.iter() {
                let _ = m.comm_free(c);
            }
        }
    }

    fn pair(&self, si: c_int, di: c_int) -> H {
        self.hidden[(si * self.width + di) as usize]
    }

    /// Why index `idx` of `rank` (`which`: the argument's name) is invalid.
    fn bad_index(&self, rank: c_int, idx: c_int, which: &str) -> Bad {
        let n = self.counts[rank as usize];
        if idx == ANY_INDEX && which == "dest_stream_index" {
            return (Class::Arg, "MPIX_ANY_INDEX is allowed only as the source_stream_index of a receive".into());
        }
        let who = if rank == self.rank { "this process".to_string() } else { format!("rank {rank}") };
        (
            Class::Arg,
            format!(
                "{which} {idx} is out of range: {who} attached {n} stream(s) to this multiplex communicator \
                 (valid indices: 0 to count-1)"
            ),
        )
    }

    fn check_index(&self, rank: c_int, idx: c_int, which: &str) -> Result<(), Bad> {
        if idx >= 0 && idx < self.counts[rank as usize] {
            Ok(())
        } else {
            Err(self.bad_index(rank, idx, which))
        }
    }

    fn check_rank(&self, rank: c_int, which: &str) -> Result<(), Bad> {
        if rank >= 0 && rank < self.size {
            Ok(())
        } else {
            Err((Class::Rank, format!("{which} {rank} is not a rank of the communicator (size {})", self.size)))
        }
    }

    fn check_tag(&self, tag: c_int, any_ok: bool) -> Result<(), Bad> {
        if (0..=self.tag_ub).contains(&tag) || (any_ok && tag == mpi::ANY_TAG) {
            Ok(())
        } else {
            Err((Class::Tag, format!("tag {tag} is invalid: tags run from 0 to MPI_TAG_UB ({})", self.tag_ub)))
        }
    }

    /// The handle of local stream `idx` (`MPIX_Comm_get_stream`), or why there is none.
    pub fn stream_at(&self, idx: c_int) -> Result<H, String> {
        let n = self.streams.len();
        if idx < 0 || idx as usize >= n {
            return Err(format!(
                "index {idx} is out of range: this process attached {n} stream(s) to the multiplex communicator"
            ));
        }
        Ok(self.streams[idx as usize].map_or(0, streams::handle))
    }
}

/// An invalid argument: its class and message, raised once the record is no longer lent.
type Bad = (Class, String);

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

/// `body` on the multiplex layout of `comm`, lent for its time (it makes no MPI call: it takes out what
/// the call needs, or says what is wrong), its error raised after; or the error of an indexed call on
/// another communicator.
fn with_multiplex<T>(comm: H, f: &str, body: impl FnOnce(&Multiplex) -> Result<T, Bad>) -> Result<T, c_int> {
    if comm == mpi::COMM_NULL {
        return Err(raise(mpi::COMM_WORLD, Class::Comm, f, "the communicator is MPI_COMM_NULL"));
    }
    let st = streams::state().map_err(|e| raise(comm, Class::Other, f, &e))?;
    // `Err(whether comm has another record)` where it is no multiplex communicator.
    let seen = streams::with_record(st, comm, |record| match record {
        Some(Record::Multiplex(layout)) => of(layout.as_ref()).map(body).ok_or(true),
        Some(_) => Err(true),
        None => Err(false),
    });
    match seen {
        Ok(Ok(v)) => Ok(v),
        Ok(Err((class, msg))) => Err(raise(comm, class, f, &msg)),
        Err(has_record) => {
            let what = if has_record {
                "a single-stream communicator (MPIX_Stream_comm_create)"
            } else {
                "not a multiplex stream communicator"
            };
            Err(raise(
                comm,
                Class::Comm,
                f,
                &format!(
                    "communicator 0x{comm:x} is {what}; indexed send and receive need one from MPIX_Stream_comm_create_multiplex"
                ),
            ))
        }
    }
}

/// The local arguments of a creation: the streams, or the error.
fn local_streams(count: c_int, array: Option<&[H]>, has_newcomm: bool) -> Result<Box<[Option<usize>]>, Bad> {
    if !has_newcomm {
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
    let array = match array {
        Some(a) => a,
        None if count > 0 => {
            return Err((Class::Arg, format!("array_of_streams is a null pointer and count is {count}")));
        }
        None => &[],
    };
    let mut out = Vec::with_capacity(count as usize);
    for (i, &h) in array.iter().enumerate() {
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

/// `MPIX_Stream_comm_create_multiplex`: `array` the program's streams (`None`: a null pointer, or a count
/// out of range), `newcomm` its output argument (`None`: a null pointer).
pub fn create(comm: H, count: c_int, array: Option<&[H]>, newcomm: Option<&mut H>) -> c_int {
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
    match m.comm_test_inter(comm) {
        Err(rc) => return rc,
        Ok(true) => {
            return raise(
                comm,
                Class::Comm,
                F,
                "the parent is an intercommunicator; multiplex communicators need an intracommunicator",
            )
        }
        Ok(false) => {}
    }
    let local = local_streams(count, array, newcomm.is_some());
    let rank = m.comm_rank(comm).unwrap_or(0);
    let size = m.comm_size(comm).unwrap_or(0);
    // Every process learns every count, and a negative count from a process whose arguments are wrong,
    // so that all fail together.
    let mine: c_int = if local.is_ok() { count } else { -1 };
    let mut counts = vec![0 as c_int; size as usize].into_boxed_slice();
    if let Err(rc) = m.allgather_ints(&[mine], &mut counts, comm) {
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
    let tag_ub = m.tag_ub(comm).unwrap_or(32767);
    let user = match m.comm_dup(comm) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    // The hidden communicators return their errors to our code, which raises them through the user's
    // communicator; where the user's handler ends the job, theirs does too (a request completing with an
    // error in the user's MPI_Wait meets theirs).
    let h = m.comm_get_errhandler(comm).unwrap_or(mpi::ERRORS_RETURN);
    let hidden_handler = if h == mpi::ERRORS_ARE_FATAL || h == mpi::ERRORS_ABORT { h } else { mpi::ERRORS_RETURN };
    let _ = m.errhandler_free(h);
    let mut hidden = Vec::with_capacity((width * width) as usize);
    let mut failed = Ok(());
    for _ in 0..width * width {
        match m.comm_dup(comm) {
            Ok(c) => {
                let _ = m.comm_set_errhandler(c, hidden_handler);
                hidden.push(c);
            }
            Err(rc) => {
                failed = Err(rc);
                break;
            }
        }
    }
    if failed.is_err() {
        for c in hidden {
            let _ = m.comm_free(c);
        }
        let _ = m.comm_free(user);
        return forward(comm, failed);
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
        let _ = m.comm_free(user);
        return forward(comm, Err(rc));
    }
    // Agreed above: every member's `newcomm` is there.
    if let Some(out) = newcomm {
        *out = user;
    }
    mpi::SUCCESS
}

/// `MPIX_Comm_multiplex_tag_ub` (ours): the largest tag an indexed call accepts (the parent's
/// `MPI_TAG_UB`: the pairs' communicators carry the user's tag unchanged).
pub fn tag_ub(comm: H, out: AppArg<c_int>) -> c_int {
    const F: &str = "MPIX_Comm_multiplex_tag_ub";
    let tag_ub = match with_multiplex(comm, F, |mx| Ok(mx.tag_ub)) {
        Ok(t) => t,
        Err(rc) => return rc,
    };
    if !out.set(tag_ub) {
        return raise(comm, Class::Arg, F, "the tag_ub argument is a null pointer");
    }
    mpi::SUCCESS
}

impl Multiplex {
    /// The checks of a send; the communicator of its pair (any one for `MPI_PROC_NULL`).
    fn send_pair(&self, count: N, null_request: bool, dest: c_int, tag: c_int, si: c_int, di: c_int) -> Result<H, Bad> {
        if count.get() < 0 {
            return Err((Class::Count, format!("count {} is negative", count.get())));
        }
        if null_request {
            return Err((Class::Arg, "the request argument is a null pointer".into()));
        }
        self.check_index(self.rank, si, "source_stream_index")?;
        if dest == mpi::PROC_NULL {
            return Ok(self.pair(si, si));
        }
        self.check_rank(dest, "dest")?;
        self.check_index(dest, di, "dest_stream_index")?;
        self.check_tag(tag, false)?;
        Ok(self.pair(si, di))
    }

    /// The checks of a receive.
    fn recv_checks(&self, count: N, source: c_int, tag: c_int, si: c_int, di: c_int) -> Result<(), Bad> {
        self.check_index(self.rank, di, "dest_stream_index")?;
        if count.get() < 0 {
            return Err((Class::Count, format!("count {} is negative", count.get())));
        }
        if source == mpi::PROC_NULL {
            return Ok(());
        }
        if source != mpi::ANY_SOURCE {
            self.check_rank(source, "source")?;
            if si != ANY_INDEX {
                self.check_index(source, si, "source_stream_index")?;
            }
        } else if si != ANY_INDEX && !(0..self.width).contains(&si) {
            return Err((
                Class::Arg,
                format!(
                    "source_stream_index {si} is out of range: no process attached more than {} stream(s)",
                    self.width
                ),
            ));
        }
        self.check_tag(tag, true)
    }

    /// Where a blocking receive looks, once checked.
    fn recv_route(&self, count: N, source: c_int, tag: c_int, si: c_int, di: c_int) -> Result<Route, Bad> {
        self.recv_checks(count, source, tag, si, di)?;
        if source == mpi::PROC_NULL {
            return Ok(Route::One(self.pair(0, di)));
        }
        if si != ANY_INDEX {
            return Ok(Route::One(self.pair(si, di)));
        }
        let sources = if source == mpi::ANY_SOURCE { self.width } else { self.counts[source as usize] };
        if sources == 0 {
            return Err((Class::Arg, format!("MPIX_ANY_INDEX: rank {source} attached no stream")));
        }
        let mut pairs = [mpi::COMM_NULL; MAX_WIDTH as usize];
        for (s, p) in pairs.iter_mut().enumerate().take(sources as usize) {
            *p = self.pair(s as c_int, di);
        }
        Ok(Route::Any { pairs, sources })
    }
}

/// A blocking receive's communicators: its pair's, or (`MPIX_ANY_INDEX`) the first `sources` pairs of its
/// destination index, by source index.
enum Route {
    One(H),
    Any { pairs: [H; MAX_WIDTH as usize], sources: c_int },
}

/// `MPIX_Stream_send` and `MPIX_Stream_send_c` (`buf`: the program's send buffer).
#[allow(clippy::too_many_arguments)]
pub fn send(
    f: &str,
    buf: AppIn<c_void>,
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
    let h = match with_multiplex(comm, f, |mx| mx.send_pair(count, false, dest, tag, si, di)) {
        Ok(h) => h,
        Err(rc) => return rc,
    };
    forward(comm, m.send(buf, count, dt, dest, tag, h))
}

/// `MPIX_Stream_isend` and `MPIX_Stream_isend_c`: the library's own request (`buf`, `request`: the
/// program's; a null request refused).
#[allow(clippy::too_many_arguments)]
pub fn isend(
    f: &str,
    buf: AppIn<c_void>,
    count: N,
    dt: H,
    dest: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    request: AppArg<H>,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    let h = match with_multiplex(comm, f, |mx| mx.send_pair(count, request.is_empty(), dest, tag, si, di)) {
        Ok(h) => h,
        Err(rc) => return rc,
    };
    forward(comm, m.isend(buf, count, dt, dest, tag, h, request))
}

/// `MPIX_Stream_recv` and `MPIX_Stream_recv_c` (`buf`, `status`: the program's).
#[allow(clippy::too_many_arguments)]
pub fn recv(
    f: &str,
    buf: AppArg<c_void>,
    count: N,
    dt: H,
    source: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    status: AppArg<Status>,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    let (pairs, sources) = match with_multiplex(comm, f, |mx| mx.recv_route(count, source, tag, si, di)) {
        Ok(Route::One(h)) => return forward(comm, m.recv(buf, count, dt, source, tag, h, status)),
        Ok(Route::Any { pairs, sources }) => (pairs, sources),
        Err(rc) => return rc,
    };
    // Any source index: the first message found on one of the destination index's pairs, the pairs
    // probed in turn from a rotating start (no pair starves another).
    let mut turn = 0;
    loop {
        for k in 0..sources {
            let s = (turn + k) % sources;
            match m.improbe(source, tag, pairs[s as usize]) {
                Err(rc) => return forward(comm, Err(rc)),
                Ok(Some(msg)) => return forward(comm, m.mrecv(buf, count, dt, msg, status)),
                Ok(None) => {}
            }
        }
        turn = (turn + 1) % sources;
        std::thread::yield_now();
    }
}

/// `MPIX_Stream_irecv` and `MPIX_Stream_irecv_c`: the library's own request (`buf`, `request`: the
/// program's; a null request refused).
#[allow(clippy::too_many_arguments)]
pub fn irecv(
    f: &str,
    buf: AppArg<c_void>,
    count: N,
    dt: H,
    source: c_int,
    tag: c_int,
    comm: H,
    si: c_int,
    di: c_int,
    request: AppArg<H>,
) -> c_int {
    let m = match mpi::mpi() {
        Ok(m) => m,
        Err(e) => return raise(comm, Class::Other, f, e),
    };
    if request.is_empty() {
        return raise(comm, Class::Arg, f, "the request argument is a null pointer");
    }
    let pair = with_multiplex(comm, f, |mx| {
        mx.recv_checks(count, source, tag, si, di)?;
        Ok(if source == mpi::PROC_NULL {
            Some(mx.pair(0, di))
        } else if si == ANY_INDEX {
            None
        } else {
            Some(mx.pair(si, di))
        })
    });
    let h =
        match pair {
            Ok(Some(h)) => h,
            Ok(None) => return raise(
                comm,
                Class::Unsupported,
                f,
                "MPIX_ANY_INDEX in a nonblocking receive is not supported on the standard ABI (one library request \
                 cannot wait on every source index's communicator); name the source index, or use MPIX_Stream_recv",
            ),
            Err(rc) => return rc,
        };
    forward(comm, m.irecv(buf, count, dt, source, tag, h, request))
}

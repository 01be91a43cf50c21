//! Multiplex stream communicators (DESIGN.md §3 "Multiplex"), implemented entirely here on every
//! backend: native MPICH 5.0.2's `MPIX_Stream_comm_create_multiplex` aborts, and no native stream
//! communicator can choose the (source endpoint, destination endpoint) pair per message.
//!
//! How a multiplex communicator works:
//! - The user's handle is a plain `MPI_Comm_dup` of the parent: ordinary MPI calls on it behave as on
//!   the parent (same group, attributes, error handler, and endpoint: on the native backend a dup of a
//!   stream communicator keeps its stream).
//! - Indexed traffic (`MPIX_Stream_send`/`recv` and friends) runs on hidden communicators on MPICH's
//!   implicit (locked) endpoints, one per destination index `d`: `H_d`, `S` of them, `S` the largest
//!   stream count of any process (agreed by an allgather at creation). No thread ever drives another
//!   stream's explicit endpoint, so the rule of native streams holds whatever threads do.
//! - A message from source index `i` with user tag `t` to destination index `d` is an ordinary send on
//!   `H_d` with tag `t * S + i`: no extra work on the send path beyond one lookup of the communicator.
//! - Receives go through a matching engine per local destination index: `MPI_Improbe(ANY, ANY, H_d)`
//!   pulls messages in MPI order, each is matched against the posted receives in posting order, else
//!   kept (as its `MPI_Message`) in an unexpected queue that a later receive searches first, in order.
//!   So `MPI_ANY_SOURCE`, `MPI_ANY_TAG` and `MPIX_ANY_INDEX` all work, and two messages from one
//!   (process, source index) to one (process, destination index) that match a receive arrive in order.
//! - Nonblocking receives are MPICH extended generalized requests: `MPI_Wait*`/`MPI_Test*` call our
//!   poll function, which drives the engine. MPICH may call the poll function from any thread, so it
//!   only ever `try_lock`s the engine; the free and cancel functions run inside MPICH's critical
//!   section (4.0.2) and call no MPI function.
use crate::errors::{raise, Class};
use crate::runtime::Runtime;
use crate::streams::{LookupError, StreamTable};
use crate::{ffi_guard, mpix_entry};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Ours (native MPICH has none): the source index of a receive that accepts any source index.
pub const MPIX_ANY_INDEX: c_int = -1;

/// Messages one turn of an engine pulls out of MPICH at most.
const PROBE_BUDGET: usize = 64;

/// Matched messages up to this size are received with `MPI_Mrecv` right away (their data is in
/// MPICH's eager buffers); larger ones with `MPI_Imrecv`, completed by later turns of the engine.
const MRECV_MAX_BYTES: MPI_Count = 16 * 1024;

/// A multiplex stream communicator.
pub struct Multiplex {
    /// The user's communicator.
    pub comm: MPI_Comm,
    pub rank: c_int,
    /// Number of stream indices of every process of the communicator.
    pub counts: Box<[c_int]>,
    /// `S`: the largest count; the number of hidden communicators and the tag multiplier.
    pub width: c_int,
    /// `MPI_TAG_UB` of the parent.
    pub tag_ub: c_int,
    /// The largest user tag that fits: `(tag_ub - (S - 1)) / S`.
    pub max_tag: c_int,
    /// This process's streams by index (slots of the stream table); `None`: `MPIX_STREAM_NULL`.
    pub streams: Box<[Option<usize>]>,
    /// `H_0 .. H_{S-1}`.
    hidden: Box<[MPI_Comm]>,
    /// One matching engine per local index.
    engines: Box<[Engine]>,
    /// Receives posted and not complete, over all engines.
    pending: AtomicUsize,
    /// The user freed the communicator; the hidden ones go when `pending` reaches 0.
    freed: AtomicBool,
    released: AtomicBool,
}

struct Engine {
    hidden: MPI_Comm,
    /// Set by a cancel function: the next turn looks for cancelled receives.
    cancels: AtomicBool,
    /// Poll functions still to skip since a turn found MPICH empty. `MPI_Testall` over many of our
    /// requests calls the poll function of each: after an empty probe the next `IDLE_POLL_SKIPS` skip
    /// theirs instead of each paying an empty `MPI_Improbe` (a pass of MPICH's progress engine).
    idle_skips: AtomicU32,
    /// Turns run so far (written under `state`'s lock), and the count the progress thread saw last.
    turns: AtomicU64,
    watched: AtomicU64,
    state: Mutex<EngineState>,
}

/// See `Engine::idle_skips` (blocking receives always probe).
const IDLE_POLL_SKIPS: u32 = 8;

#[derive(Default)]
struct EngineState {
    posted: VecDeque<Arc<RecvOp>>,
    unexpected: VecDeque<Unexpected>,
    /// Matched, received with `MPI_Imrecv`, not complete yet.
    inflight: Vec<Inflight>,
}

struct Unexpected {
    msg: MPI_Message,
    status: MPI_Status,
    source: c_int,
    sidx: c_int,
    tag: c_int,
}

struct Inflight {
    op: Arc<RecvOp>,
    req: MPI_Request,
    source: c_int,
    tag: c_int,
}

/// One posted receive.
pub struct RecvOp {
    mx: Arc<Multiplex>,
    index: usize,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    sidx: c_int,
    /// The generalized request of a nonblocking receive (`MPI_REQUEST_NULL` for a blocking one); set
    /// before the receive is posted.
    greq: AtomicI32,
    cancel: AtomicBool,
    done: AtomicBool,
    /// Written once, by `finish`, before `done` is set; read only once `done` is seen.
    outcome: UnsafeCell<Outcome>,
}

// The buffer pointer belongs to the application, which keeps it valid until the receive completes.
unsafe impl Send for RecvOp {}
unsafe impl Sync for RecvOp {}

#[derive(Clone, Copy, Default)]
struct Outcome {
    /// The receive's status, with the user's tag.
    status: MPI_Status,
    error: c_int,
    cancelled: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a message (source, source index, tag) matches a receive's (source, tag, source index),
/// wildcards included.
#[inline]
fn envelope_matches(want: (c_int, c_int, c_int), source: c_int, sidx: c_int, tag: c_int) -> bool {
    (want.0 == MPI_ANY_SOURCE || want.0 == source)
        && (want.1 == MPI_ANY_TAG || want.1 == tag)
        && (want.2 == MPIX_ANY_INDEX || want.2 == sidx)
}

impl RecvOp {
    #[inline]
    fn matches(&self, source: c_int, sidx: c_int, tag: c_int) -> bool {
        envelope_matches((self.source, self.tag, self.sidx), source, sidx, tag)
    }

    #[inline]
    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The outcome of a finished receive.
    #[inline]
    fn outcome(&self) -> Outcome {
        debug_assert!(self.is_done());
        unsafe { *self.outcome.get() }
    }

    /// Records the outcome and signals completion (a nonblocking receive's request completes).
    unsafe fn finish(&self, outcome: Outcome) {
        *self.outcome.get() = outcome;
        self.done.store(true, Ordering::Release);
        self.mx.pending.fetch_sub(1, Ordering::AcqRel);
        let greq = self.greq.load(Ordering::Acquire);
        if greq != MPI_REQUEST_NULL {
            (pmpi().PMPI_Grequest_complete)(greq);
        }
    }
}

impl Multiplex {
    fn new(
        comm: MPI_Comm,
        rank: c_int,
        counts: Box<[c_int]>,
        tag_ub: c_int,
        streams: Box<[Option<usize>]>,
        hidden: Box<[MPI_Comm]>,
    ) -> Multiplex {
        let width = counts.iter().copied().max().unwrap_or(0).max(0);
        let max_tag = if width > 0 { (tag_ub - (width - 1)) / width } else { tag_ub };
        let engines = (0..streams.len())
            .map(|d| Engine {
                hidden: hidden[d],
                cancels: AtomicBool::new(false),
                idle_skips: AtomicU32::new(0),
                turns: AtomicU64::new(0),
                watched: AtomicU64::new(0),
                state: Default::default(),
            })
            .collect();
        Multiplex {
            comm,
            rank,
            counts,
            width,
            tag_ub,
            max_tag,
            streams,
            hidden,
            engines,
            pending: AtomicUsize::new(0),
            freed: AtomicBool::new(false),
            released: AtomicBool::new(false),
        }
    }

    #[inline]
    fn decode(&self, hidden_tag: c_int) -> (c_int, c_int) {
        (hidden_tag / self.width, hidden_tag % self.width)
    }

    fn size(&self) -> c_int {
        self.counts.len() as c_int
    }

    /// A local stream index, or the error.
    #[inline]
    fn local_index(&self, idx: c_int, which: &str, f: &str) -> Result<usize, c_int> {
        if idx >= 0 && (idx as usize) < self.streams.len() {
            Ok(idx as usize)
        } else {
            Err(self.bad_index(self.rank, idx, which, f))
        }
    }

    /// Checks that process `rank` has stream index `idx`.
    #[inline]
    fn remote_index(&self, rank: c_int, idx: c_int, which: &str, f: &str) -> Result<(), c_int> {
        if idx >= 0 && idx < self.counts[rank as usize] {
            Ok(())
        } else {
            Err(self.bad_index(rank, idx, which, f))
        }
    }

    #[cold]
    fn bad_index(&self, rank: c_int, idx: c_int, which: &str, f: &str) -> c_int {
        let n = self.counts[rank as usize];
        let who = if rank == self.rank { "this process".to_string() } else { format!("rank {rank}") };
        if idx == MPIX_ANY_INDEX && which == "dest_stream_index" {
            return raise(
                self.comm,
                Class::Arg,
                f,
                "MPIX_ANY_INDEX is allowed only as the source_stream_index of a receive",
            );
        }
        if rank == self.rank {
            let valid = if n > 0 { format!("valid indices: 0 to {}", n - 1) } else { "it has no indices".into() };
            raise(
                self.comm,
                Class::Arg,
                f,
                &format!("{which} {idx} is out of range: this process attached {n} stream(s) to this multiplex communicator ({valid})"),
            )
        } else if idx < 0 || idx >= self.width {
            raise(
                self.comm,
                Class::Arg,
                f,
                &format!(
                    "{which} {idx} is out of range: {who} attached {n} stream(s) to this multiplex communicator, \
                     and no process more than {} (valid indices: 0 to count-1)",
                    self.width
                ),
            )
        } else {
            raise(
                self.comm,
                Class::Stream,
                f,
                &format!("{which} {idx}: {who} has no stream attached at index {idx} (it attached {n} stream(s))"),
            )
        }
    }

    #[inline]
    fn check_rank(&self, rank: c_int, which: &str, f: &str) -> Result<(), c_int> {
        if rank >= 0 && rank < self.size() {
            Ok(())
        } else {
            Err(raise(
                self.comm,
                Class::Rank,
                f,
                &format!("{which} {rank} is not a rank of the communicator (size {})", self.size()),
            ))
        }
    }

    #[inline]
    fn check_tag(&self, tag: c_int, any_ok: bool, f: &str) -> Result<(), c_int> {
        if (tag >= 0 && tag <= self.max_tag) || (any_ok && tag == MPI_ANY_TAG) {
            Ok(())
        } else {
            Err(self.bad_tag(tag, f))
        }
    }

    #[cold]
    fn bad_tag(&self, tag: c_int, f: &str) -> c_int {
        raise(
            self.comm,
            Class::Tag,
            f,
            &format!(
                "tag {tag} is invalid on this multiplex communicator: its tags run from 0 to {} \
                 (MPI_TAG_UB {} divided by {} stream indices, as the source index travels in the tag)",
                self.max_tag,
                self.tag_ub,
                self.width.max(1)
            ),
        )
    }

    /// Frees the hidden communicators once the user has freed the communicator and no receive is
    /// pending (a normal context: never from MPICH's free or cancel callbacks).
    fn maybe_release(&self) {
        if !self.freed.load(Ordering::Acquire) || self.pending.load(Ordering::Acquire) != 0 {
            return;
        }
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        unsafe {
            let p = pmpi();
            for e in self.engines.iter() {
                let mut st = lock(&e.state);
                // Messages nobody received: take them out of MPICH so that nothing stays matched.
                for mut u in st.unexpected.drain(..) {
                    let bytes = status_bytes(&u.status);
                    let mut scratch = vec![0u8; bytes.max(1) as usize];
                    (p.PMPI_Mrecv_c)(
                        scratch.as_mut_ptr() as *mut c_void,
                        bytes,
                        MPI_BYTE,
                        &mut u.msg,
                        MPI_STATUS_IGNORE,
                    );
                }
            }
            for &h in self.hidden.iter() {
                let mut h = h;
                (p.PMPI_Comm_free)(&mut h);
            }
        }
    }
}

impl Engine {
    /// Adds a receive: takes the first matching unexpected message, else joins the posted queue.
    unsafe fn post(&self, mx: &Multiplex, st: &mut EngineState, op: Arc<RecvOp>) {
        mx.pending.fetch_add(1, Ordering::AcqRel);
        match st.unexpected.iter().position(|u| op.matches(u.source, u.sidx, u.tag)) {
            Some(i) => {
                let u = st.unexpected.remove(i).unwrap_or_else(|| unreachable!());
                start(st, op, u.msg, &u.status, u.tag);
            }
            None => st.posted.push_back(op),
        }
    }

    /// For a blocking receive (`want`: source, tag, source index), when no receive is posted on this
    /// engine: the first matching message, from the unexpected queue or pulled out of MPICH now
    /// (messages pulled that do not match join the unexpected queue). The caller receives it outside
    /// the engine's lock. None: post and wait.
    unsafe fn take_first(
        &self,
        mx: &Multiplex,
        want: (c_int, c_int, c_int),
    ) -> Option<(MPI_Message, MPI_Status, c_int)> {
        let mut st = lock(&self.state);
        if !st.posted.is_empty() || mx.released.load(Ordering::Acquire) {
            return None;
        }
        if let Some(i) = st.unexpected.iter().position(|u| envelope_matches(want, u.source, u.sidx, u.tag)) {
            let u = st.unexpected.remove(i)?;
            return Some((u.msg, u.status, u.tag));
        }
        self.turns.store(self.turns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let p = pmpi();
        for _ in 0..PROBE_BUDGET {
            let mut flag = 0;
            let mut msg = MPI_MESSAGE_NULL;
            let mut status = MPI_Status::default();
            let rc = (p.PMPI_Improbe)(MPI_ANY_SOURCE, MPI_ANY_TAG, self.hidden, &mut flag, &mut msg, &mut status);
            if rc != MPI_SUCCESS || flag == 0 {
                self.idle_skips.store(IDLE_POLL_SKIPS, Ordering::Relaxed);
                return None;
            }
            let (tag, sidx) = mx.decode(status.MPI_TAG);
            if envelope_matches(want, status.MPI_SOURCE, sidx, tag) {
                return Some((msg, status, tag));
            }
            st.unexpected.push_back(Unexpected { msg, status, source: status.MPI_SOURCE, sidx, tag });
        }
        None
    }

    /// One turn: cancellations, in-flight receives, then new messages (until `target` is done or
    /// MPICH has no more, at most `PROBE_BUDGET`).
    unsafe fn drive(&self, mx: &Multiplex, st: &mut EngineState, target: Option<&RecvOp>) {
        if mx.released.load(Ordering::Acquire) {
            return;
        }
        self.turns.store(self.turns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let p = pmpi();
        if self.cancels.swap(false, Ordering::AcqRel) {
            let mut i = 0;
            while i < st.posted.len() {
                if st.posted[i].cancel.load(Ordering::Acquire) {
                    if let Some(op) = st.posted.remove(i) {
                        op.finish(Outcome { cancelled: true, ..Default::default() });
                    }
                } else {
                    i += 1;
                }
            }
        }
        let mut i = 0;
        while i < st.inflight.len() {
            let mut flag = 0;
            let mut status = MPI_Status::default();
            let rc = (p.PMPI_Test)(&mut st.inflight[i].req, &mut flag, &mut status);
            if rc != MPI_SUCCESS || flag != 0 {
                let f = st.inflight.swap_remove(i);
                status.MPI_SOURCE = f.source;
                status.MPI_TAG = f.tag;
                f.op.finish(Outcome { status, error: rc, cancelled: false });
            } else {
                i += 1;
            }
        }
        let mut drained = false;
        for _ in 0..PROBE_BUDGET {
            if target.is_some_and(|t| t.is_done()) {
                break;
            }
            let mut flag = 0;
            let mut msg = MPI_MESSAGE_NULL;
            let mut status = MPI_Status::default();
            let rc = (p.PMPI_Improbe)(MPI_ANY_SOURCE, MPI_ANY_TAG, self.hidden, &mut flag, &mut msg, &mut status);
            if rc != MPI_SUCCESS || flag == 0 {
                drained = true;
                break;
            }
            let (tag, sidx) = mx.decode(status.MPI_TAG);
            let source = status.MPI_SOURCE;
            match st.posted.iter().position(|op| op.matches(source, sidx, tag)) {
                Some(i) => {
                    let op = st.posted.remove(i).unwrap_or_else(|| unreachable!());
                    start(st, op, msg, &status, tag);
                }
                None => st.unexpected.push_back(Unexpected { msg, status, source, sidx, tag }),
            }
        }
        self.idle_skips.store(if drained { IDLE_POLL_SKIPS } else { 0 }, Ordering::Relaxed);
    }

    /// Whether a poll function should skip its turn (see `idle_skips`); counts the skip.
    #[inline]
    fn skip_idle_poll(&self) -> bool {
        let n = self.idle_skips.load(Ordering::Relaxed);
        if n == 0 {
            return false;
        }
        self.idle_skips.store(n - 1, Ordering::Relaxed);
        true
    }
}

/// The byte count in an MPICH status (`MPIR_STATUS_GET_COUNT`: the low 32 bits in `count_lo`, the
/// high ones above the cancelled bit), without a call into MPICH.
#[inline]
fn status_bytes(status: &MPI_Status) -> MPI_Count {
    (status.count_lo as u32 as MPI_Count) | (((status.count_hi_and_cancelled as u32 >> 1) as MPI_Count) << 32)
}

/// Receives matched message `msg` into `op`'s buffer (engine lock held).
unsafe fn start(st: &mut EngineState, op: Arc<RecvOp>, mut msg: MPI_Message, status: &MPI_Status, tag: c_int) {
    let p = pmpi();
    if status_bytes(status) <= MRECV_MAX_BYTES {
        let mut got = MPI_Status::default();
        let rc = (p.PMPI_Mrecv_c)(op.buf, op.count, op.datatype, &mut msg, &mut got);
        got.MPI_SOURCE = status.MPI_SOURCE;
        got.MPI_TAG = tag;
        op.finish(Outcome { status: got, error: rc, cancelled: false });
    } else {
        let mut req = MPI_REQUEST_NULL;
        let rc = (p.PMPI_Imrecv_c)(op.buf, op.count, op.datatype, &mut msg, &mut req);
        if rc != MPI_SUCCESS {
            let mut got = *status;
            got.MPI_TAG = tag;
            op.finish(Outcome { status: got, error: rc, cancelled: false });
        } else {
            st.inflight.push(Inflight { op, req, source: status.MPI_SOURCE, tag });
        }
    }
}

// ---- generalized-request callbacks of nonblocking receives (extra_state: a counted reference to the RecvOp) ----

unsafe extern "C" fn greq_poll(extra: *mut c_void, _status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (poll)", || unsafe {
        let op = &*(extra as *const RecvOp);
        if op.is_done() {
            return MPI_SUCCESS;
        }
        let mx = &op.mx;
        let engine = &mx.engines[op.index];
        if !engine.cancels.load(Ordering::Relaxed) && engine.skip_idle_poll() {
            return MPI_SUCCESS;
        }
        // MPICH calls this from its wait and test loops, in any thread: never wait for the engine.
        if let Ok(mut st) = engine.state.try_lock() {
            engine.drive(mx, &mut st, Some(op));
        }
        mx.maybe_release();
        MPI_SUCCESS
    })
}

/// MPICH requires a wait function with a poll function; `MPI_Waitall` calls it in a loop until the
/// request completes (and must not see its status pointer written: it may be `MPI_STATUSES_IGNORE`
/// plus an offset). One turn of each engine involved.
unsafe extern "C" fn greq_wait(
    count: c_int,
    states: *mut *mut c_void,
    _timeout: f64,
    _status: *mut MPI_Status,
) -> c_int {
    ffi_guard("MPIX_Stream_irecv (wait)", || unsafe {
        let mut busy = false;
        for i in 0..count.max(0) as usize {
            let op = &*(*states.add(i) as *const RecvOp);
            if op.is_done() {
                continue;
            }
            let mx = &op.mx;
            let engine = &mx.engines[op.index];
            match engine.state.try_lock() {
                Ok(mut st) => engine.drive(mx, &mut st, Some(op)),
                Err(_) => busy = true,
            }
            mx.maybe_release();
        }
        if busy {
            // Another thread is driving the engine: let it run (MPICH calls us again at once).
            std::thread::yield_now();
        }
        MPI_SUCCESS
    })
}

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    ffi_guard("MPIX_Stream_irecv (query)", || unsafe {
        let op = &*(extra as *const RecvOp);
        let o = op.outcome();
        let p = pmpi();
        if o.cancelled {
            (p.PMPI_Status_set_elements_x)(status, MPI_BYTE, 0);
            (p.PMPI_Status_set_cancelled)(status, 1);
            (*status).MPI_SOURCE = MPI_ANY_SOURCE;
            (*status).MPI_TAG = MPI_ANY_TAG;
            return MPI_SUCCESS;
        }
        // The receive's own status (MPICH's layout: byte count, cancelled bit 0), with the user's tag:
        // what MPI_Status_set_elements_x(MPI_BYTE) and MPI_Status_set_cancelled(0) would write.
        (*status).count_lo = o.status.count_lo;
        (*status).count_hi_and_cancelled = o.status.count_hi_and_cancelled & !1;
        (*status).MPI_SOURCE = o.status.MPI_SOURCE;
        (*status).MPI_TAG = o.status.MPI_TAG;
        o.error
    })
}

/// Runs inside MPICH's critical section (4.0.2): no MPI calls here.
unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    ffi_guard("MPIX_Stream_irecv (free)", || unsafe {
        drop(Arc::from_raw(extra as *const RecvOp));
        MPI_SUCCESS
    })
}

/// Runs inside MPICH's critical section (4.0.2): only flags the receive; the engine's next turn (the
/// wait or test that follows) removes it if it is not matched yet, and completes it as cancelled.
unsafe extern "C" fn greq_cancel(extra: *mut c_void, complete: c_int) -> c_int {
    ffi_guard("MPIX_Stream_irecv (cancel)", || unsafe {
        let op = &*(extra as *const RecvOp);
        if complete == 0 && !op.is_done() {
            op.cancel.store(true, Ordering::Release);
            op.mx.engines[op.index].cancels.store(true, Ordering::Release);
        }
        MPI_SUCCESS
    })
}

// ---- the progress thread ----
//
// MPI's progress rule: a posted receive is matched while its process is in *any* MPI call. Our
// receives are matched by turns of their engine, which only calls on their index run (blocking
// receives, MPI_Wait*/MPI_Test* on their requests). A process that posts a receive and then waits in
// something else (a barrier, its own send to itself, a large send that needs the peer to take a
// rendezvous message) would wait forever. With MPI_THREAD_MULTIPLE a thread of ours runs a turn of
// every engine that has receives pending and that no one has turned for one period (PROGRESS_PERIOD);
// an engine in active use is never touched by it. Stopped at MPI_Finalize.

const PROGRESS_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// Live multiplex communicators (for the progress thread).
static REGISTRY: Mutex<Vec<std::sync::Weak<Multiplex>>> = Mutex::new(Vec::new());

struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<()>,
}

static PROGRESS: Mutex<Option<ProgressThread>> = Mutex::new(None);

fn register(rt: &Runtime, mx: &Arc<Multiplex>) {
    {
        let mut reg = lock(&REGISTRY);
        reg.retain(|w| w.strong_count() > 0);
        reg.push(Arc::downgrade(mx));
    }
    if !rt.thread_multiple() {
        return;
    }
    let mut guard = lock(&PROGRESS);
    if guard.is_some() {
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let spawned = std::thread::Builder::new().name("mpixstream-multiplex".into()).spawn(move || {
        while !flag.load(Ordering::Acquire) {
            std::thread::sleep(PROGRESS_PERIOD);
            let live: Vec<Arc<Multiplex>> = lock(&REGISTRY).iter().filter_map(|w| w.upgrade()).collect();
            for mx in live {
                if mx.released.load(Ordering::Acquire) || mx.pending.load(Ordering::Acquire) == 0 {
                    continue;
                }
                for e in mx.engines.iter() {
                    let turns = e.turns.load(Ordering::Relaxed);
                    if e.watched.swap(turns, Ordering::Relaxed) != turns {
                        continue; // someone turned it since our last look
                    }
                    if let Ok(mut st) = e.state.try_lock() {
                        if !st.posted.is_empty() || !st.inflight.is_empty() {
                            unsafe { e.drive(&mx, &mut st, None) };
                            e.watched.store(e.turns.load(Ordering::Relaxed), Ordering::Relaxed);
                        }
                    }
                }
                mx.maybe_release();
            }
        }
    });
    if let Ok(handle) = spawned {
        *guard = Some(ProgressThread { stop, handle });
    }
}

/// Stops the progress thread (before `PMPI_Finalize`).
pub fn shutdown() {
    if let Some(t) = lock(&PROGRESS).take() {
        t.stop.store(true, Ordering::Release);
        let _ = t.handle.join();
    }
    lock(&REGISTRY).clear();
}

// ---- creation, duplication, free ----

/// `H_0` split from `base` (a split never inherits a stream, so the hidden communicators are on the
/// implicit pool on every backend), `H_1..` dups of it; all with `MPI_ERRORS_RETURN` (errors reach the
/// user through the user's communicator).
unsafe fn make_hidden(base: MPI_Comm, rank: c_int, width: c_int) -> Result<Box<[MPI_Comm]>, c_int> {
    let p = pmpi();
    let mut out: Vec<MPI_Comm> = Vec::with_capacity(width.max(0) as usize);
    if width <= 0 {
        return Ok(out.into_boxed_slice());
    }
    let free_all = |v: &mut Vec<MPI_Comm>| {
        for h in v.iter_mut() {
            (p.PMPI_Comm_free)(h);
        }
    };
    let mut h0 = MPI_COMM_NULL;
    let rc = (p.PMPI_Comm_split)(base, 0, rank, &mut h0);
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    (p.PMPI_Comm_set_errhandler)(h0, MPI_ERRORS_RETURN);
    out.push(h0);
    for _ in 1..width {
        let mut h = MPI_COMM_NULL;
        let rc = (p.PMPI_Comm_dup)(h0, &mut h);
        if rc != MPI_SUCCESS {
            free_all(&mut out);
            return Err(rc);
        }
        (p.PMPI_Comm_set_errhandler)(h, MPI_ERRORS_RETURN);
        out.push(h);
    }
    Ok(out.into_boxed_slice())
}

/// Standard class number -> our class (for agreeing on an error at creation).
fn class_of(standard: c_int) -> Class {
    match standard {
        MPI_ERR_ARG => Class::Arg,
        MPI_ERR_COUNT => Class::Count,
        MPIX_ERR_STREAM => Class::Stream,
        MPI_ERR_COMM => Class::Comm,
        _ => Class::Other,
    }
}

/// The local arguments of `MPIX_Stream_comm_create_multiplex`: the stream slots, or the error.
unsafe fn local_streams(
    rt: &Runtime,
    count: c_int,
    array: *const MPIX_Stream,
    newcomm: *mut MPI_Comm,
) -> Result<Box<[Option<usize>]>, (Class, String)> {
    if newcomm.is_null() {
        return Err((Class::Arg, "the newcomm argument is a null pointer".into()));
    }
    if count < 0 {
        return Err((Class::Count, format!("count {count} is negative")));
    }
    if count > 0 && array.is_null() {
        return Err((Class::Arg, format!("array_of_streams is a null pointer and count is {count}")));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let h = *array.add(i);
        match rt.streams.lookup(h) {
            Ok((slot, _)) => out.push(Some(slot)),
            Err(LookupError::Null) => out.push(None),
            Err(e) => return Err((Class::Stream, format!("array_of_streams[{i}]: {}", e.describe(h)))),
        }
    }
    Ok(out.into_boxed_slice())
}

/// A blocking `MPI_Comm_dup`/`MPI_Comm_dup_with_info` of a multiplex communicator is multiplex too:
/// same streams, same indices, its own hidden communicators (collective, like the dup itself).
pub unsafe fn inherit(rt: &Runtime, parent: &Multiplex, newcomm: *mut MPI_Comm) -> c_int {
    let hidden = match make_hidden(*newcomm, parent.rank, parent.width) {
        Ok(h) => h,
        Err(rc) => {
            (pmpi().PMPI_Comm_free)(newcomm);
            return rc;
        }
    };
    let mx = Arc::new(Multiplex::new(
        *newcomm,
        parent.rank,
        parent.counts.clone(),
        parent.tag_ub,
        parent.streams.clone(),
        hidden,
    ));
    register(rt, &mx);
    rt.comms.attach_multiplex(&rt.streams, *newcomm, mx);
    MPI_SUCCESS
}

/// After `MPI_Comm_free` of a multiplex communicator: its streams are detached at once, its hidden
/// communicators freed as soon as no receive on it is pending.
pub fn comm_freed(rt: &Runtime, handle: MPI_Comm, mx: Arc<Multiplex>) {
    if rt.comms.detach_multiplex(&rt.streams, handle, &mx) {
        mx.freed.store(true, Ordering::Release);
        mx.maybe_release();
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPIX_Stream_comm_create_multiplex(
    comm: MPI_Comm,
    count: c_int,
    array_of_streams: *mut MPIX_Stream,
    newcomm: *mut MPI_Comm,
) -> c_int {
    mpix_entry("MPIX_Stream_comm_create_multiplex", |rt| unsafe {
        const F: &str = "MPIX_Stream_comm_create_multiplex";
        let p = pmpi();
        if comm == MPI_COMM_NULL {
            return raise(MPI_COMM_WORLD, Class::Comm, F, "the parent communicator is MPI_COMM_NULL");
        }
        let mut inter = 0;
        let rc = (p.PMPI_Comm_test_inter)(comm, &mut inter);
        if rc != MPI_SUCCESS {
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
        let local = local_streams(rt, count, array_of_streams, newcomm);
        // Every process learns every count (and whether anyone's arguments were wrong, so that all
        // fail together instead of some waiting in a collective the others skipped).
        let mine: c_int = match &local {
            Ok(s) => s.len() as c_int,
            Err((class, _)) => -1 - class.standard(),
        };
        let (mut rank, mut size) = (0, 0);
        (p.PMPI_Comm_rank)(comm, &mut rank);
        (p.PMPI_Comm_size)(comm, &mut size);
        let mut counts = vec![0 as c_int; size as usize].into_boxed_slice();
        let rc = (p.PMPI_Allgather)(
            &mine as *const c_int as *const c_void,
            1,
            MPI_INT,
            counts.as_mut_ptr() as *mut c_void,
            1,
            MPI_INT,
            comm,
        );
        if rc != MPI_SUCCESS {
            return rc;
        }
        let streams = match local {
            Err((class, msg)) => return raise(comm, class, F, &msg),
            Ok(s) => s,
        };
        if let Some(r) = counts.iter().position(|&c| c < 0) {
            return raise(
                comm,
                class_of(-1 - counts[r]),
                F,
                &format!("rank {r} passed invalid arguments (see its error); no communicator was created"),
            );
        }
        let mut ub: *mut c_int = std::ptr::null_mut();
        let mut flag = 0;
        (p.PMPI_Comm_get_attr)(comm, MPI_TAG_UB, &mut ub as *mut *mut c_int as *mut c_void, &mut flag);
        let tag_ub = if flag != 0 && !ub.is_null() { *ub } else { 32767 };
        let mut user = MPI_COMM_NULL;
        let rc = (p.PMPI_Comm_dup)(comm, &mut user);
        if rc != MPI_SUCCESS {
            return rc;
        }
        let width = counts.iter().copied().max().unwrap_or(0);
        let hidden = match make_hidden(comm, rank, width) {
            Ok(h) => h,
            Err(rc) => {
                (p.PMPI_Comm_free)(&mut user);
                return rc;
            }
        };
        let mx = Arc::new(Multiplex::new(user, rank, counts, tag_ub, streams, hidden));
        register(rt, &mx);
        rt.comms.attach_multiplex(&rt.streams, user, mx);
        *newcomm = user;
        MPI_SUCCESS
    })
}

/// `MPIX_Comm_get_stream` on a multiplex communicator.
pub unsafe fn get_stream(mx: &Multiplex, idx: c_int, stream: *mut MPIX_Stream) -> c_int {
    const F: &str = "MPIX_Comm_get_stream";
    let n = mx.streams.len();
    if idx < 0 || idx as usize >= n {
        return raise(
            mx.comm,
            Class::Arg,
            F,
            &format!("index {idx} is out of range: this process attached {n} stream(s) to the multiplex communicator"),
        );
    }
    *stream = mx.streams[idx as usize].map_or(MPIX_STREAM_NULL, StreamTable::handle);
    MPI_SUCCESS
}

// ---- indexed point-to-point ----

#[cold]
fn not_multiplex(rt: &Runtime, comm: MPI_Comm, f: &str) -> c_int {
    if comm == MPI_COMM_NULL {
        return raise(MPI_COMM_WORLD, Class::Comm, f, "the communicator is MPI_COMM_NULL");
    }
    let what = if rt.comms.get(comm).is_some() {
        "a single-stream communicator (MPIX_Stream_comm_create)"
    } else {
        "not a multiplex stream communicator"
    };
    raise(
        comm,
        Class::Comm,
        f,
        &format!(
            "communicator 0x{:08x} is {what}; indexed send and receive need one from MPIX_Stream_comm_create_multiplex",
            comm as u32
        ),
    )
}

/// An error of MPICH on a hidden communicator, reported through the user's communicator.
#[cold]
fn forward_error(comm: MPI_Comm, rc: c_int) -> c_int {
    unsafe { (pmpi().PMPI_Comm_call_errhandler)(comm, rc) };
    rc
}

#[inline]
fn forward(comm: MPI_Comm, rc: c_int) -> c_int {
    if rc == MPI_SUCCESS {
        rc
    } else {
        forward_error(comm, rc)
    }
}

enum Route {
    ProcNull,
    /// Hidden communicator and hidden tag.
    To(MPI_Comm, c_int, Arc<Multiplex>),
}

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
) -> Result<Route, c_int> {
    let Some(mx) = rt.comms.multiplex(comm) else {
        return Err(not_multiplex(rt, comm, f));
    };
    if count < 0 {
        return Err(raise(comm, Class::Count, f, &format!("count {count} is negative")));
    }
    if request.is_some_and(|r| r.is_null()) {
        return Err(raise(comm, Class::Arg, f, "the request argument is a null pointer"));
    }
    let si_ok = mx.local_index(si, "source_stream_index", f)?;
    if dest == MPI_PROC_NULL {
        return Ok(Route::ProcNull);
    }
    mx.check_rank(dest, "dest", f)?;
    mx.remote_index(dest, di, "dest_stream_index", f)?;
    mx.check_tag(tag, false, f)?;
    let hidden = mx.hidden[di as usize];
    Ok(Route::To(hidden, tag * mx.width + si_ok as c_int, mx))
}

enum RecvOut {
    Blocking(*mut MPI_Status),
    Nonblocking(*mut MPI_Request),
}

#[allow(clippy::too_many_arguments)]
unsafe fn recv(
    rt: &Runtime,
    f: &str,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    si: c_int,
    di: c_int,
    out: RecvOut,
) -> c_int {
    let p = pmpi();
    let Some(mx) = rt.comms.multiplex(comm) else {
        return not_multiplex(rt, comm, f);
    };
    if let RecvOut::Nonblocking(r) = out {
        if r.is_null() {
            return raise(comm, Class::Arg, f, "the request argument is a null pointer");
        }
    }
    let d = match mx.local_index(di, "dest_stream_index", f) {
        Ok(d) => d,
        Err(rc) => return rc,
    };
    if count < 0 {
        return raise(comm, Class::Count, f, &format!("count {count} is negative"));
    }
    if source == MPI_PROC_NULL {
        // As MPI: at once, source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0 (set here: MPICH 4.0.2's own
        // MPI_Irecv from MPI_PROC_NULL reports source 0).
        let mut empty = MPI_Status { MPI_SOURCE: MPI_PROC_NULL, MPI_TAG: MPI_ANY_TAG, ..Default::default() };
        (p.PMPI_Status_set_elements_x)(&mut empty, MPI_BYTE, 0);
        (p.PMPI_Status_set_cancelled)(&mut empty, 0);
        return match out {
            RecvOut::Blocking(st) => {
                if status_is_real(st) {
                    empty.MPI_ERROR = (*st).MPI_ERROR;
                    *st = empty;
                }
                MPI_SUCCESS
            }
            RecvOut::Nonblocking(r) => {
                let op = Arc::new(RecvOp {
                    mx: mx.clone(),
                    index: d,
                    buf,
                    count,
                    datatype,
                    source,
                    tag,
                    sidx: si,
                    greq: AtomicI32::new(MPI_REQUEST_NULL),
                    cancel: AtomicBool::new(false),
                    done: AtomicBool::new(true),
                    outcome: UnsafeCell::new(Outcome { status: empty, error: MPI_SUCCESS, cancelled: false }),
                });
                let extra = Arc::into_raw(op) as *mut c_void;
                let rc =
                    (p.PMPIX_Grequest_start)(greq_query, greq_free, greq_cancel, greq_poll, Some(greq_wait), extra, r);
                if rc != MPI_SUCCESS {
                    drop(Arc::from_raw(extra as *const RecvOp));
                    return forward(comm, rc);
                }
                forward(comm, (p.PMPI_Grequest_complete)(*r))
            }
        };
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
    let engine = &mx.engines[d];
    if let RecvOut::Blocking(status) = out {
        // Fast path: no receive posted before ours on this engine, so the first matching message,
        // already pulled or next out of MPICH, is ours: take it without queueing anything.
        if let Some((mut msg, got, user_tag)) = engine.take_first(&mx, (source, tag, si)) {
            let mut st = MPI_Status::default();
            let rc = (p.PMPI_Mrecv_c)(buf, count, datatype, &mut msg, &mut st);
            st.MPI_SOURCE = got.MPI_SOURCE;
            st.MPI_TAG = user_tag;
            if status_is_real(status) {
                st.MPI_ERROR = (*status).MPI_ERROR;
                *status = st;
            }
            return forward(comm, rc);
        }
    }
    let op = Arc::new(RecvOp {
        mx: mx.clone(),
        index: d,
        buf,
        count,
        datatype,
        source,
        tag,
        sidx: si,
        greq: AtomicI32::new(MPI_REQUEST_NULL),
        cancel: AtomicBool::new(false),
        done: AtomicBool::new(false),
        outcome: UnsafeCell::new(Outcome::default()),
    });
    match out {
        RecvOut::Nonblocking(request) => {
            let extra = Arc::into_raw(op.clone()) as *mut c_void;
            let rc = (p.PMPIX_Grequest_start)(
                greq_query,
                greq_free,
                greq_cancel,
                greq_poll,
                Some(greq_wait),
                extra,
                request,
            );
            if rc != MPI_SUCCESS {
                drop(Arc::from_raw(extra as *const RecvOp));
                return forward(comm, rc);
            }
            op.greq.store(*request, Ordering::Release);
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
                if idle % 64 == 0 {
                    std::thread::yield_now();
                }
            }
            let o = op.outcome();
            if status_is_real(status) {
                let keep = (*status).MPI_ERROR;
                *status = o.status;
                (*status).MPI_ERROR = keep;
            }
            forward(comm, o.error)
        }
    }
}

/// The indexed point-to-point entry points, in their `int` and large-count (`_c`) forms from one
/// definition: `$send`/`$isend` forward to `$pmpi_send`/`$pmpi_isend` on the hidden communicator.
macro_rules! indexed_p2p {
    ($send:ident, $isend:ident, $recv:ident, $irecv:ident, $cnt:ty, $pmpi_send:ident, $pmpi_isend:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $send(
            buf: *const c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            source_stream_index: c_int,
            dest_stream_index: c_int,
        ) -> c_int {
            let f = stringify!($send);
            mpix_entry(f, |rt| unsafe {
                let (si, di) = (source_stream_index, dest_stream_index);
                match send_route(rt, f, comm, count as MPI_Count, None, dest, tag, si, di) {
                    Err(rc) => rc,
                    Ok(Route::ProcNull) => MPI_SUCCESS,
                    Ok(Route::To(h, t, _mx)) => forward(comm, (pmpi().$pmpi_send)(buf, count, datatype, dest, t, h)),
                }
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $isend(
            buf: *const c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            request: *mut MPI_Request,
        ) -> c_int {
            let f = stringify!($isend);
            mpix_entry(f, |rt| unsafe {
                let (si, di) = (source_stream_index, dest_stream_index);
                match send_route(rt, f, comm, count as MPI_Count, Some(request), dest, tag, si, di) {
                    Err(rc) => rc,
                    Ok(Route::ProcNull) => {
                        forward(comm, (pmpi().$pmpi_isend)(buf, count, datatype, MPI_PROC_NULL, 0, comm, request))
                    }
                    Ok(Route::To(h, t, _mx)) => {
                        forward(comm, (pmpi().$pmpi_isend)(buf, count, datatype, dest, t, h, request))
                    }
                }
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $recv(
            buf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            source: c_int,
            tag: c_int,
            comm: MPI_Comm,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            status: *mut MPI_Status,
        ) -> c_int {
            let f = stringify!($recv);
            mpix_entry(f, |rt| unsafe {
                let (si, di) = (source_stream_index, dest_stream_index);
                recv(rt, f, buf, count as MPI_Count, datatype, source, tag, comm, si, di, RecvOut::Blocking(status))
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $irecv(
            buf: *mut c_void,
            count: $cnt,
            datatype: MPI_Datatype,
            source: c_int,
            tag: c_int,
            comm: MPI_Comm,
            source_stream_index: c_int,
            dest_stream_index: c_int,
            request: *mut MPI_Request,
        ) -> c_int {
            let f = stringify!($irecv);
            mpix_entry(f, |rt| unsafe {
                let (si, di) = (source_stream_index, dest_stream_index);
                let out = RecvOut::Nonblocking(request);
                recv(rt, f, buf, count as MPI_Count, datatype, source, tag, comm, si, di, out)
            })
        }
    };
}

indexed_p2p!(MPIX_Stream_send, MPIX_Stream_isend, MPIX_Stream_recv, MPIX_Stream_irecv, c_int, PMPI_Send, PMPI_Isend);
indexed_p2p!(
    MPIX_Stream_send_c,
    MPIX_Stream_isend_c,
    MPIX_Stream_recv_c,
    MPIX_Stream_irecv_c,
    MPI_Count,
    PMPI_Send_c,
    PMPI_Isend_c
);

#[cfg(test)]
mod tests {
    use super::*;

    fn mx(counts: &[c_int], local: usize, tag_ub: c_int) -> Multiplex {
        let width = counts.iter().copied().max().unwrap_or(0);
        Multiplex::new(
            MPI_COMM_WORLD,
            0,
            counts.into(),
            tag_ub,
            vec![None; local].into_boxed_slice(),
            vec![MPI_COMM_NULL; width as usize].into_boxed_slice(),
        )
    }

    #[test]
    fn status_byte_count_as_mpich_stores_it() {
        let mut st = MPI_Status::default();
        st.count_lo = -1; // 0xffff_ffff
        st.count_hi_and_cancelled = (3 << 1) | 1; // high part 3, cancelled
        assert_eq!(status_bytes(&st), (3i64 << 32) | 0xffff_ffff);
        st.count_lo = 24;
        st.count_hi_and_cancelled = 0;
        assert_eq!(status_bytes(&st), 24);
    }

    #[test]
    fn tags_round_trip_within_tag_ub() {
        let m = mx(&[3, 1, 0], 3, 268_435_455);
        assert_eq!(m.width, 3);
        assert_eq!(m.max_tag, (268_435_455 - 2) / 3);
        for &(tag, si) in &[(0, 0), (0, 2), (m.max_tag, 2), (12345, 1)] {
            let enc = tag * m.width + si;
            assert!(enc >= 0 && enc <= m.tag_ub);
            assert_eq!(m.decode(enc), (tag, si));
        }
        let solo = mx(&[1, 1], 1, 32767);
        assert_eq!(solo.max_tag, 32767);
        let none = mx(&[0, 0], 0, 32767);
        assert_eq!(none.width, 0);
        assert_eq!(none.engines.len(), 0);
    }
}

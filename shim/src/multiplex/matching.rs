//! The matching engine of one local index: the receives that could not go straight to MPICH (a
//! wildcard source or source index, or anything posted behind one), matched against messages pulled
//! out of MPICH with `MPI_Improbe` on the hidden communicators of the index (`Endpoints::sources`).
//!
//! A turn pulls messages in MPI order per hidden communicator (each carries whole (sender, source
//! index) pairs, so per-pair order is MPI's), decodes tag and source index, and gives each to the
//! first posted receive that matches, in posting order, else appends it to the unexpected queue, which
//! a new receive searches first, in order. So MPI's non-overtaking rule holds per (process, source
//! index) pair for every combination of wildcards.
//!
//! A matched message is received with `MPI_Imrecv`, never a blocking receive inside a turn (a turn may
//! run inside a generalized request's poll function, under the engine's lock); a blocking receive
//! that takes its own message receives it outside the lock.
//!
//! On dedicated endpoints (split backend) a message between two indices of this process never enters
//! MPI: the sender packs it into this engine (`deliver_local`), where it is matched as one pulled out of
//! MPICH, in the same queues, so the same order rules hold.
//!
//! The probes, receives and tests of those receives go through the next definition (`next!`), so
//! that the tools library counts and checks them (`p2p`'s module comment says why and what it costs).
use super::endpoints::Source;
use super::Multiplex;
use crate::forward;
use crate::streams::{Claim, StreamSlot};
use mpixstream_wrappers::app::{AppArg, PendingBuf};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::datatype::set_elements;
use mpixstream_wrappers::mpi::{status_bytes, Comm, Datatype, MessageCopy, Request, Stream};
use mpixstream_wrappers::next;
use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Messages one turn of an engine pulls out of MPICH at most.
const PROBE_BUDGET: usize = 64;

/// See `MatchingEngine::idle_skips` (blocking receives always probe).
const IDLE_POLL_SKIPS: u32 = 8;

/// Matched-probe handles the engines of this process hold at most in their unexpected queues (`HELD`
/// counts them); a message pulled past it is received at once into a copy of its bytes
/// (`Unexpected::pulled`). libfabric's tcp provider (ch4:ofi between hosts: MPICH's and Intel MPI's)
/// queues at most `FI_TCP_MAX_SAVED` (64 by default) messages with no buffer posted for them, a probed
/// one not received yet among them, and then stops reading the connection: held handles past that
/// stall every later message from that peer, those a posted receive waits for included
/// (docs/native-defects.md, "Unexpected messages over libfabric's tcp between hosts").
const HELD_MAX: usize = 16;
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Only a message of at least this many bytes keeps its handle (while fewer than `HELD_MAX` are held):
/// a smaller one is copied at once, which costs less than what a held one may stall. Intel MPI between
/// hosts stalls a connection with held handles far below the provider's bound: `multiplex_stress`,
/// whose 24-byte messages a receive on one index leaves unexpected by the thousand on the others, hung
/// there with 16 held (and completes with none, the progress thread taking them out: `gather`).
const HOLD_MIN_BYTES: MPI_Count = 64 * 1024;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct MatchingEngine {
    /// The hidden communicators this process receives on for this index.
    sources: Box<[Source]>,
    /// Whether those include a reserved (lock-free) VCI: then only the index's owner may turn it.
    pub on_reserved_vci: bool,
    /// The native stream of that VCI (`MPIX_STREAM_NULL` if none): MPICH's `MPI_Improbe` on a stream
    /// communicator does not drive the stream's VCI, so a turn drives it first.
    stream: MPIX_Stream,
    /// The stream whose reserved endpoint this index receives on (native backend, streams layout): a
    /// turn runs inside it (`StreamSlot::claim`).
    pub endpoint: Option<&'static StreamSlot>,
    /// Set by a cancel function: the next turn looks for cancelled receives.
    pub cancels: AtomicBool,
    /// Poll functions still to skip since a turn found MPICH empty. `MPI_Testall` over many of our
    /// requests calls the poll function of each: after an empty probe the next `IDLE_POLL_SKIPS` skip
    /// theirs instead of each paying empty `MPI_Improbe`s (passes of MPICH's progress engine).
    idle_skips: AtomicU32,
    /// Turns run so far (written under `state`'s lock), and the count the progress thread saw last.
    pub turns: AtomicU64,
    pub watched: AtomicU64,
    /// Posted plus unexpected entries (written under `state`'s lock): 0 lets a fully named receive
    /// go straight to MPICH (nothing it could overtake is queued here).
    queued: AtomicUsize,
    pub state: Mutex<EngineState>,
}

#[derive(Default)]
pub struct EngineState {
    pub posted: VecDeque<Arc<RecvOp>>,
    unexpected: VecDeque<Unexpected>,
    /// Matched, received with `MPI_Imrecv`, not complete yet.
    pub inflight: Vec<Inflight>,
    /// The hidden communicator the last message came from: the next turn probes it first.
    cursor: usize,
}

struct Unexpected {
    /// The matched-probe handle (counted in `HELD`), or `MPI_MESSAGE_NULL` for a local or copied message.
    msg: MPI_Message,
    status: MPI_Status,
    source: c_int,
    sidx: c_int,
    tag: c_int,
    /// A message from another index of this process (`deliver_local`): its packed data (`msg` is
    /// `MPI_MESSAGE_NULL`).
    local: Option<Box<[u8]>>,
    /// A message pulled past `HELD_MAX`: its bytes being received into a buffer of ours.
    copy: Option<MessageCopy>,
}

impl Unexpected {
    /// A message pulled out of MPICH that no posted receive takes: its handle held where it has at
    /// least `HOLD_MIN_BYTES` and fewer than `HELD_MAX` are held, else received now into a copy (a
    /// message received as bytes can be unpacked with the receive's datatype: MPI's rule for
    /// `MPI_PACKED`, MPICH's bytes being its packed form).
    fn pulled(mut msg: MPI_Message, status: MPI_Status, sidx: c_int, tag: c_int) -> Unexpected {
        let mut u = Unexpected { msg, status, source: status.MPI_SOURCE, sidx, tag, local: None, copy: None };
        let bytes = status_bytes(&status);
        if bytes >= HOLD_MIN_BYTES {
            if HELD.fetch_add(1, Ordering::AcqRel) < HELD_MAX {
                return u;
            }
            HELD.fetch_sub(1, Ordering::AcqRel);
        }
        match MessageCopy::start(&mut msg, bytes.max(0) as usize) {
            Ok(copy) => {
                u.msg = MPI_MESSAGE_NULL;
                u.copy = Some(copy);
            }
            // Where MPICH refuses the receive, the handle stays held, counted.
            Err(_) => {
                HELD.fetch_add(1, Ordering::AcqRel);
            }
        }
        u
    }

    /// The held handle, taken out of the count (the caller receives it).
    fn take_handle(&self) -> MPI_Message {
        HELD.fetch_sub(1, Ordering::AcqRel);
        self.msg
    }

    /// Not a held handle: a local message or a copy.
    fn is_ours(&self) -> bool {
        self.local.is_some() || self.copy.is_some()
    }
}

pub struct Inflight {
    op: Arc<RecvOp>,
    /// MPICH's receive into the application's buffer, or `MPI_REQUEST_NULL` for a copy (`copy`).
    req: MPI_Request,
    source: c_int,
    tag: c_int,
    /// A message received into a copy of ours, unpacked into the receive's buffer once in.
    copy: Option<MessageCopy>,
}

/// One posted receive. Its buffer is the application's, with its count and datatype, valid (writable)
/// until the receive completes (`PendingBuf`), on which the receives started into it rely.
pub struct RecvOp {
    pub mx: Arc<Multiplex>,
    pub index: usize,
    pub buf: PendingBuf,
    pub source: c_int,
    pub tag: c_int,
    pub sidx: c_int,
    /// The generalized request of a nonblocking receive (`MPI_REQUEST_NULL` for a blocking one); set
    /// before the receive is posted.
    pub greq: AtomicI32,
    pub cancel: AtomicBool,
    /// Set once, by `finish` (or at the start, for a receive complete at once): the receive is done.
    outcome: OnceLock<Outcome>,
}

#[derive(Clone, Copy, Default)]
pub struct Outcome {
    /// The receive's status, with the user's tag.
    pub status: MPI_Status,
    pub error: c_int,
    pub cancelled: bool,
}

/// Whether a message (source, source index, tag) matches a receive's (source, tag, source index),
/// wildcards included.
#[inline]
pub fn envelope_matches(want: (c_int, c_int, c_int), source: c_int, sidx: c_int, tag: c_int) -> bool {
    (want.0 == MPI_ANY_SOURCE || want.0 == source)
        && (want.1 == MPI_ANY_TAG || want.1 == tag)
        && (want.2 == super::MPIX_ANY_INDEX || want.2 == sidx)
}

impl RecvOp {
    /// A receive into `buf`, the application's receive buffer.
    pub fn new(mx: Arc<Multiplex>, index: usize, buf: PendingBuf, envelope: (c_int, c_int, c_int)) -> RecvOp {
        RecvOp {
            mx,
            index,
            buf,
            source: envelope.0,
            tag: envelope.1,
            sidx: envelope.2,
            greq: AtomicI32::new(MPI_REQUEST_NULL),
            cancel: AtomicBool::new(false),
            outcome: OnceLock::new(),
        }
    }

    /// A receive complete already with `outcome`, which receives nothing (no buffer).
    pub fn completed(mx: Arc<Multiplex>, index: usize, envelope: (c_int, c_int, c_int), outcome: Outcome) -> RecvOp {
        // No buffer: the receive is complete before anything could write one.
        let op = RecvOp::new(mx, index, PendingBuf::none(), envelope);
        let _ = op.outcome.set(outcome);
        op
    }

    #[inline]
    fn matches(&self, source: c_int, sidx: c_int, tag: c_int) -> bool {
        envelope_matches((self.source, self.tag, self.sidx), source, sidx, tag)
    }

    #[inline]
    pub fn is_done(&self) -> bool {
        self.outcome.get().is_some()
    }

    /// The outcome of a finished receive.
    #[inline]
    pub fn outcome(&self) -> Outcome {
        debug_assert!(self.is_done());
        self.outcome.get().copied().unwrap_or_default()
    }

    /// Records the outcome and signals completion (a nonblocking receive's request completes). Called
    /// only by whoever took the receive out of its engine's queues (posted, in flight) under the
    /// engine's lock, or by the one that matched it at once: once per receive.
    fn finish(&self, outcome: Outcome) {
        let _ = self.outcome.set(outcome);
        self.mx.pending.fetch_sub(1, Ordering::AcqRel);
        let greq = self.greq.load(Ordering::Acquire);
        if greq != MPI_REQUEST_NULL {
            let _ = Request(greq).grequest_complete();
        }
    }
}

impl MatchingEngine {
    /// `stream`: the native stream of this index's reserved VCI, or `MPIX_STREAM_NULL`; `owned`: only
    /// the index's owner may turn it (a reserved VCI, or the split backend's dedicated endpoints, which
    /// need no extra progress call).
    pub fn new(sources: Box<[Source]>, endpoint: Option<&'static StreamSlot>, owned: bool) -> MatchingEngine {
        let stream = endpoint.map_or(MPIX_STREAM_NULL, |s| s.native());
        MatchingEngine {
            sources,
            on_reserved_vci: owned || stream != MPIX_STREAM_NULL,
            stream,
            endpoint,
            cancels: AtomicBool::new(false),
            idle_skips: AtomicU32::new(0),
            turns: AtomicU64::new(0),
            watched: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            state: Default::default(),
        }
    }

    /// Nothing is posted or unexpected here (a read without the lock; see `queued`).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }

    #[inline]
    fn sync_queued(&self, st: &EngineState) {
        self.queued.store(st.posted.len() + st.unexpected.len(), Ordering::Release);
    }

    /// Inside the index's endpoint for a turn of this engine, where it has one (`Some(None)`: on MPICH's
    /// implicit pool, no claim); `None` while another thread is inside it: a turn never waits for the
    /// thread inside (that thread is in a call on the index, which turns the engine itself).
    #[inline]
    fn enter(&self) -> Option<Option<Claim<'static>>> {
        match self.endpoint {
            Some(slot) => slot.try_claim().map(Some),
            None => Some(None),
        }
    }

    /// One pass of progress on this index's reserved VCI (MPICH's global progress skips it).
    #[inline]
    fn progress_stream(&self) {
        if self.stream != MPIX_STREAM_NULL {
            let _ = Stream(self.stream).progress();
        }
    }

    /// The next message MPICH holds on this index's hidden communicators, from `*next` on: (message,
    /// status, source index, user tag). `sweep`: try every communicator in turn; otherwise only
    /// `*next`, and on a miss move `*next` on to the following one (see `drive`).
    fn pull(&self, mx: &Multiplex, next: &mut usize, sweep: bool) -> Option<(MPI_Message, MPI_Status, c_int, c_int)> {
        let n = self.sources.len();
        for k in 0..if sweep { n } else { 1 } {
            let src = self.sources[(*next + k) % n];
            let mut flag = 0;
            let mut msg = MPI_MESSAGE_NULL;
            let mut status = MPI_Status::default();
            let (found, message, got) = (AppArg::local(&mut flag), AppArg::local(&mut msg), AppArg::local(&mut status));
            let rc = forward::MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, src.comm, found, message, got);
            if rc == MPI_SUCCESS && flag != 0 {
                // Stay on this communicator: its next message is likely there too.
                *next = (*next + k) % n;
                let (tag, sidx) = src.index.decode(status.MPI_SOURCE, status.MPI_TAG, mx.width);
                return Some((msg, status, sidx, tag));
            }
        }
        if !sweep {
            *next = (*next + 1) % n;
        }
        None
    }

    /// Adds a receive: takes the first matching unexpected message, else joins the posted queue.
    pub fn post(&self, mx: &Multiplex, st: &mut EngineState, op: Arc<RecvOp>) {
        mx.pending.fetch_add(1, Ordering::AcqRel);
        match st.unexpected.iter().position(|u| op.matches(u.source, u.sidx, u.tag)) {
            Some(i) => {
                let mut u = st.unexpected.remove(i).unwrap_or_else(|| unreachable!());
                match (u.local.take(), u.copy.take()) {
                    (Some(data), _) => op.finish(unpack(&op, u.source, u.tag, &data)),
                    (None, Some(copy)) => receive_copy(st, op, copy, u.source, u.tag),
                    (None, None) => start(st, op, u.take_handle(), &u.status, u.tag),
                }
            }
            None => st.posted.push_back(op),
        }
        self.sync_queued(st);
    }

    /// A message from local index `sidx` of this process, packed (`mailbox`): to the first posted
    /// receive that matches, else to the unexpected queue.
    pub fn deliver_local(&self, mx: &Multiplex, sidx: c_int, tag: c_int, data: Box<[u8]>) {
        let mut st = lock(&self.state);
        if mx.released.load(Ordering::Acquire) {
            return;
        }
        let source = mx.rank;
        match st.posted.iter().position(|op| op.matches(source, sidx, tag)) {
            Some(i) => {
                let op = st.posted.remove(i).unwrap_or_else(|| unreachable!());
                op.finish(unpack(&op, source, tag, &data));
            }
            None => st.unexpected.push_back(Unexpected {
                msg: MPI_MESSAGE_NULL,
                status: MPI_Status::default(),
                source,
                sidx,
                tag,
                local: Some(data),
                copy: None,
            }),
        }
        self.sync_queued(&st);
    }

    /// Receives `msg`, which `take_first` gave to `op` (a nonblocking receive whose generalized request
    /// exists): counted as pending and started as a matched receive.
    pub fn adopt(
        &self,
        mx: &Multiplex,
        st: &mut EngineState,
        op: Arc<RecvOp>,
        msg: MPI_Message,
        status: &MPI_Status,
        tag: c_int,
    ) {
        mx.pending.fetch_add(1, Ordering::AcqRel);
        start(st, op, msg, status, tag);
    }

    /// For a receive (`want`: source, tag, source index), when no receive is posted on this
    /// engine: the first matching message, from the unexpected queue or pulled out of MPICH now
    /// (messages pulled that do not match join the unexpected queue). The caller receives it outside
    /// the engine's lock. None: post and wait.
    pub fn take_first(&self, mx: &Multiplex, want: (c_int, c_int, c_int)) -> Option<(MPI_Message, MPI_Status, c_int)> {
        let mut st = lock(&self.state);
        if !st.posted.is_empty() || mx.released.load(Ordering::Acquire) {
            return None;
        }
        if let Some(i) = st.unexpected.iter().position(|u| envelope_matches(want, u.source, u.sidx, u.tag)) {
            if st.unexpected[i].is_ours() {
                // Not an MPI message: the caller posts, and `post` unpacks it (at once, or once in).
                return None;
            }
            let u = st.unexpected.remove(i)?;
            self.sync_queued(&st);
            return Some((u.take_handle(), u.status, u.tag));
        }
        self.turns.store(self.turns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.progress_stream();
        let mut next = st.cursor;
        let mut found = None;
        for _ in 0..PROBE_BUDGET {
            let Some((msg, status, sidx, tag)) = self.pull(mx, &mut next, true) else {
                self.idle_skips.store(IDLE_POLL_SKIPS, Ordering::Relaxed);
                break;
            };
            if envelope_matches(want, status.MPI_SOURCE, sidx, tag) {
                found = Some((msg, status, tag));
                break;
            }
            st.unexpected.push_back(Unexpected::pulled(msg, status, sidx, tag));
        }
        st.cursor = next;
        self.sync_queued(&st);
        found
    }

    /// One turn: cancellations, in-flight receives, then new messages (until `target` is done or
    /// MPICH has no more, at most `PROBE_BUDGET`). Messages are pulled only while a receive is posted.
    pub fn drive(&self, mx: &Multiplex, st: &mut EngineState, target: Option<&RecvOp>) {
        if mx.released.load(Ordering::Acquire) {
            return;
        }
        let Some(_claim) = self.enter() else { return };
        self.turns.store(self.turns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
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
            if let Some(copy) = st.inflight[i].copy.as_mut() {
                if copy.test() {
                    let f = st.inflight.swap_remove(i);
                    if let Some(copy) = f.copy {
                        finish_copy(f.op, copy, f.source, f.tag);
                    }
                } else {
                    i += 1;
                }
                continue;
            }
            let mut flag = 0;
            let mut status = MPI_Status::default();
            let rc = forward::MPI_Test(
                AppArg::local(&mut st.inflight[i].req),
                AppArg::local(&mut flag),
                AppArg::local(&mut status),
            );
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
        let mut next = st.cursor;
        if !st.posted.is_empty() {
            self.progress_stream();
        }
        // Until a message turns up, every communicator is probed; after one, only the one it came
        // from, and the turn ends at its first miss: the next turn starts at the communicator after
        // it. A turn that found messages does not pay a sweep of empty probes (each an MPICH call that
        // takes the VCI's lock) to learn that MPICH is empty; only a turn that finds nothing does,
        // and then the next poll functions skip theirs (`idle_skips`).
        let mut found_any = false;
        for _ in 0..PROBE_BUDGET {
            if st.posted.is_empty() || target.is_some_and(|t| t.is_done()) {
                break;
            }
            let Some((msg, status, sidx, tag)) = self.pull(mx, &mut next, !found_any) else {
                drained = !found_any;
                break;
            };
            found_any = true;
            let source = status.MPI_SOURCE;
            match st.posted.iter().position(|op| op.matches(source, sidx, tag)) {
                Some(i) => {
                    let op = st.posted.remove(i).unwrap_or_else(|| unreachable!());
                    start(st, op, msg, &status, tag);
                }
                None => st.unexpected.push_back(Unexpected::pulled(msg, status, sidx, tag)),
            }
        }
        st.cursor = next;
        self.sync_queued(st);
        self.idle_skips.store(if drained { IDLE_POLL_SKIPS } else { 0 }, Ordering::Relaxed);
    }

    /// A turn of an engine with nothing posted (the progress thread's, while some other receive of the
    /// communicator is pending): the messages MPICH holds for this index go to the unexpected queue,
    /// where a later receive finds them first, in order. Left in MPICH they may stall every other
    /// index: libfabric's tcp provider (ch4:ofi between hosts, MPICH's and Intel MPI's) stops reading a
    /// connection once `FI_TCP_MAX_SAVED` messages wait there unreceived, and the messages a receive on
    /// another index waits for come behind them (docs/native-defects.md, "Unexpected messages over
    /// libfabric's tcp between hosts": a program that receives index by index hangs there without
    /// the library). An empty turn is one `MPI_Improbe` per hidden communicator of the index.
    pub fn gather(&self, mx: &Multiplex, st: &mut EngineState) {
        if mx.released.load(Ordering::Acquire) {
            return;
        }
        let Some(_claim) = self.enter() else { return };
        let mut next = st.cursor;
        let mut found_any = false;
        for _ in 0..PROBE_BUDGET {
            let Some((msg, status, sidx, tag)) = self.pull(mx, &mut next, !found_any) else { break };
            found_any = true;
            st.unexpected.push_back(Unexpected::pulled(msg, status, sidx, tag));
        }
        st.cursor = next;
        self.sync_queued(st);
    }

    /// Whether a poll function should skip its turn (see `idle_skips`); counts the skip.
    #[inline]
    pub fn skip_idle_poll(&self) -> bool {
        let n = self.idle_skips.load(Ordering::Relaxed);
        if n == 0 {
            return false;
        }
        self.idle_skips.store(n - 1, Ordering::Relaxed);
        true
    }

    /// Takes the messages nobody received out of MPICH (the communicator is being released), inside
    /// the index's endpoint; `false` (nothing done) while another thread is inside it.
    pub fn drain_unexpected(&self) -> bool {
        let Some(_claim) = self.enter() else { return false };
        let mut st = lock(&self.state);
        // A copy still coming in is waited for as it is dropped (`MessageCopy`).
        for u in st.unexpected.drain(..).filter(|u| !u.is_ours()) {
            let mut msg = u.take_handle();
            let bytes = status_bytes(&u.status);
            let mut scratch = vec![0u8; bytes.max(1) as usize];
            // SAFETY: the next definition of MPI_Mrecv_c (its C prototype): `scratch` holds the message's
            // `bytes` bytes (at least one), the message and the ignored status are MPI's own.
            unsafe {
                next!(MPI_Mrecv_c)(scratch.as_mut_ptr() as *mut c_void, bytes, MPI_BYTE, &mut msg, MPI_STATUS_IGNORE)
            };
        }
        self.sync_queued(&st);
        true
    }
}

/// The outcome of receive `op` taking a local message (`data`, packed by `mailbox::send` from `source`
/// with user tag `tag`): unpacked into the receive's buffer; `MPI_ERR_TRUNCATE`, nothing written, where
/// it does not fit.
fn unpack(op: &RecvOp, source: c_int, tag: c_int, data: &[u8]) -> Outcome {
    let comm = Comm(op.mx.comm);
    let mut status = MPI_Status { MPI_SOURCE: source, MPI_TAG: tag, ..Default::default() };
    let (room, mut error) = match comm.pack_size(op.buf.count(), Datatype(op.buf.datatype())) {
        Ok(room) => (room, MPI_SUCCESS),
        Err(rc) => (0, rc),
    };
    let mut got: MPI_Count = 0;
    if error == MPI_SUCCESS && data.len() as MPI_Count > room {
        error = MPI_ERR_TRUNCATE;
    } else if error == MPI_SUCCESS && !data.is_empty() {
        // `op`'s buffer is the application's, writable until the receive completes, which `finish`
        // signals after this.
        let unpacked = comm.unpack(data, &mut got, &op.buf);
        error = unpacked.err().unwrap_or(MPI_SUCCESS);
    }
    let _ = set_elements(&mut status, Datatype::BYTE, got);
    Outcome { status, error, cancelled: false }
}

/// Gives receive `op` a message coming into a copy (engine lock held): unpacked now if in, else once in
/// (a later turn, `drive`).
fn receive_copy(st: &mut EngineState, op: Arc<RecvOp>, mut copy: MessageCopy, source: c_int, tag: c_int) {
    if copy.test() {
        finish_copy(op, copy, source, tag);
    } else {
        st.inflight.push(Inflight { op, req: MPI_REQUEST_NULL, source, tag, copy: Some(copy) });
    }
}

/// Finishes receive `op` with its copied message (complete): unpacked into its buffer.
fn finish_copy(op: Arc<RecvOp>, copy: MessageCopy, source: c_int, tag: c_int) {
    let outcome = match copy.finish() {
        Ok(data) => unpack(&op, source, tag, &data),
        Err(rc) => Outcome {
            status: MPI_Status { MPI_SOURCE: source, MPI_TAG: tag, ..Default::default() },
            error: rc,
            cancelled: false,
        },
    };
    op.finish(outcome);
}

/// Starts receiving matched message `msg` into `op`'s buffer (engine lock held): `MPI_Imrecv`, done
/// at once if MPICH completes it at once (eager data), else by a later turn.
fn start(st: &mut EngineState, op: Arc<RecvOp>, mut msg: MPI_Message, status: &MPI_Status, tag: c_int) {
    let mut req = MPI_REQUEST_NULL;
    // `op`'s buffer is the application's, writable until the receive completes, which is no earlier than
    // this request's completion (`drive` finishes the receive then).
    let (buf, count, datatype) = (op.buf.arg(), op.buf.count(), op.buf.datatype());
    let rc = forward::MPI_Imrecv_c(buf, count, datatype, AppArg::local(&mut msg), AppArg::local(&mut req));
    if rc != MPI_SUCCESS {
        let mut got = *status;
        got.MPI_TAG = tag;
        op.finish(Outcome { status: got, error: rc, cancelled: false });
        return;
    }
    let mut flag = 0;
    let mut got = MPI_Status::default();
    let rc = forward::MPI_Test(AppArg::local(&mut req), AppArg::local(&mut flag), AppArg::local(&mut got));
    if rc != MPI_SUCCESS || flag != 0 {
        got.MPI_SOURCE = status.MPI_SOURCE;
        got.MPI_TAG = tag;
        op.finish(Outcome { status: got, error: rc, cancelled: false });
    } else {
        st.inflight.push(Inflight { op, req, source: status.MPI_SOURCE, tag, copy: None });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_byte_count_as_mpich_stores_it() {
        // count_lo 0xffff_ffff; high part 3, cancelled.
        let mut st = MPI_Status { count_lo: -1, count_hi_and_cancelled: (3 << 1) | 1, ..Default::default() };
        assert_eq!(status_bytes(&st), (3i64 << 32) | 0xffff_ffff);
        st.count_lo = 24;
        st.count_hi_and_cancelled = 0;
        assert_eq!(status_bytes(&st), 24);
    }

    #[test]
    fn wildcards_match() {
        assert!(envelope_matches((MPI_ANY_SOURCE, MPI_ANY_TAG, -1), 3, 2, 9));
        assert!(envelope_matches((3, 9, 2), 3, 2, 9));
        assert!(!envelope_matches((3, 9, 1), 3, 2, 9));
        assert!(!envelope_matches((2, MPI_ANY_TAG, -1), 3, 2, 9));
    }
}

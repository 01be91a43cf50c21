//! Which hidden communicator carries an indexed message, and on which endpoints.
//!
//! Two layouts, chosen once per multiplex communicator (the same on every process: it depends only on
//! the backend, the number of processes `N` and the largest count `S`, all known after the creation's
//! allgather):
//!
//! - **Streams** (native backend, within `MAX_HIDDEN_COMMS`): the streams' own reserved VCIs. A native
//!   stream communicator records, for each rank, the VCI of the stream that rank attached, so a hidden
//!   stream communicator in which this rank attaches stream `i` and the peer attaches stream `j`
//!   carries `(i -> j)` from VCI `i` to the peer's VCI `j`. The set:
//!   - `D_i` for each index `i`: every rank attaches its stream `i` (messages `i -> i`);
//!   - `C_{i,j,b}` for `i != j` and each bit `b < B = ceil(log2 N)` of the rank: ranks whose bit `b`
//!     is 0 attach stream `i`, ranks whose bit is 1 attach stream `j`. A message `A(i) -> B(j)`,
//!     `A != B`, `i != j`, uses the lowest bit `b` where `A` and `B` differ: `C_{i,j,b}` if `A`'s bit
//!     is 0, else `C_{j,i,b}`. Each (sender, source index, receiver, destination index) thus goes
//!     through exactly one communicator (MPI's order per pair holds), and the source index follows
//!     from (communicator, sender rank): the tag carries the user's tag unchanged.
//!   - `P_j` for each destination index `j`, on the implicit pool (a split never inherits a stream):
//!     messages a process sends to itself between two different indices (no communicator can attach
//!     two streams of one rank); tag `tag * S + source index`.
//!
//!   A process that lacks index `i` (smaller count) or whose entry `i` is `MPIX_STREAM_NULL` attaches
//!   `MPIX_STREAM_NULL` where it would attach stream `i`. Those communicators never carry a message
//!   with an end on a conventional index: such a message takes `P_j` (tag `tag * S + source index`),
//!   both ends on the implicit pool. (MPICH 5.0.2 loses messages between one rank's implicit VCI and
//!   a peer's reserved one, shared-memory path.) So a conventional index is on the implicit pool, and
//!   every other pair keeps its streams' endpoints.
//!   Every communicator in which this process attached stream `j` is on VCI `j`, so a receive on `j`
//!   (any source, any source index, any tag) only ever touches VCI `j` (and `P_j`, implicit).
//!   Cost: `2S + S(S-1)B` communicators, i.e. context ids (MPICH has about 2000 per process), each a
//!   collective at creation (an allgather of VCIs and a context-id agreement) and an MPICH
//!   communicator object with an `N`-entry VCI table; an engine turn of an index probes
//!   `2 + (S-1)B` of them.
//!   Bounded per communicator (`MAX_HIDDEN_COMMS`) and per process (`MAX_HIDDEN_COMMS_PER_PROCESS`,
//!   over all live multiplex communicators).
//! - **Pooled** (serial backend, or beyond a bound): `P_0 .. P_{S-1}` only, one per destination
//!   index, on MPICH's implicit pool, tag `tag * S + source index`: `S` context ids.
//! - **Streams on dedicated endpoints** (split backend: Intel MPI's thread-split endpoints). Intel MPI
//!   carries a message between the same endpoint number on both ends, and forbids two threads on one
//!   endpoint, so no stream's own endpoint can carry `(i -> j)`. The same `D_i` and `C_{i,j,b}`, each
//!   on an endpoint of its own, agreed by every member (`make_dedicated`): on each process every such
//!   endpoint is attached to exactly one local index, so only that index's thread ever drives it. No
//!   `P_j`: a message between two indices of one process never enters MPI (no endpoint could carry it
//!   without two threads on it); it is copied into the destination index's matching engine
//!   (`mailbox`), route `Route::LOCAL`. Every index needs a stream (`MPIX_STREAM_NULL` is refused:
//!   several threads may use a conventional index at once). Cost: `S + S(S-1)B` endpoints of the pool.
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Errhandler, MpiResult, OwnedComm, OwnedRequest, SharedComm};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// At most this many hidden communicators per multiplex communicator (about an eighth of MPICH's
/// context ids); a communicator that would need more uses the pooled layout.
pub const MAX_HIDDEN_COMMS: usize = 256;

/// At most this many hidden communicators of the streams layout alive in one process, over all its
/// multiplex communicators (half of MPICH's 2048 context ids, leaving the rest to the program); a new
/// multiplex communicator that would pass it uses the pooled layout.
pub const MAX_HIDDEN_COMMS_PER_PROCESS: usize = 1024;

/// This process's multiplex communicators per layout (the report's `multiplex` counters) and its
/// live hidden communicators of the streams layout (the process-wide bound).
pub struct Stats {
    pub live_hidden: AtomicUsize,
    pub on_streams: AtomicU64,
    pub pooled: AtomicU64,
}
pub static STATS: Stats =
    Stats { live_hidden: AtomicUsize::new(0), on_streams: AtomicU64::new(0), pooled: AtomicU64::new(0) };

/// Whether `cost` more hidden communicators would pass this process's bound.
pub fn over_process_bound(cost: usize) -> bool {
    passes_process_bound(STATS.live_hidden.load(Ordering::Relaxed), cost)
}

/// Whether `cost` more hidden communicators on a process with `live` alive pass the bound.
pub fn passes_process_bound(live: usize, cost: usize) -> bool {
    live + cost > MAX_HIDDEN_COMMS_PER_PROCESS
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Streams,
    Pooled,
}

/// How a message found on a hidden communicator tells its source index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceIndex {
    /// In the tag: `tag * S + index` (the `P_j`).
    InTag,
    /// Always this index (`D_i`).
    Fixed(c_int),
    /// `C_{i,j,b}`: `i` from senders whose bit `b` is 0, `j` from the others.
    ByRankBit { zero: c_int, one: c_int, bit: u32 },
}

impl SourceIndex {
    /// (user tag, source index) of a message from `source` with hidden tag `tag`, `width` = `S`.
    #[inline]
    pub fn decode(self, source: c_int, tag: c_int, width: c_int) -> (c_int, c_int) {
        match self {
            SourceIndex::InTag => (tag / width, tag % width),
            SourceIndex::Fixed(i) => (tag, i),
            SourceIndex::ByRankBit { zero, one, bit } => (tag, if (source >> bit) & 1 == 0 { zero } else { one }),
        }
    }
}

/// A hidden communicator a receive on some local index takes messages from.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub comm: MPI_Comm,
    pub index: SourceIndex,
}

/// The route of one message: hidden communicator and whether the tag carries the source index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub comm: MPI_Comm,
    pub tag_in_tag: bool,
}

impl Route {
    /// A message between two indices of one process on dedicated endpoints: copied into the
    /// destination index's engine (`mailbox`), never an MPI message. Not in the send table (0 there).
    pub const LOCAL: Route = Route { comm: MPI_COMM_NULL, tag_in_tag: true };

    /// One word of the send table: the handle in the low half, `tag_in_tag` in bit 32. Never 0 (MPICH's
    /// communicator handles are not), so 0 marks an invalid (rank, index) pair.
    fn packed(self) -> u64 {
        self.comm as u32 as u64 | (self.tag_in_tag as u64) << 32
    }

    #[inline(always)]
    pub fn unpack(word: u64) -> Route {
        Route { comm: word as u32 as MPI_Comm, tag_in_tag: word >> 32 != 0 }
    }
}

/// At most this many entries (8 bytes each) in a multiplex communicator's send table; a larger one
/// (`N S^2` beyond it) routes each send by arithmetic instead.
pub const MAX_SEND_TABLE: usize = 1 << 14;

pub struct Endpoints {
    pub layout: Layout,
    rank: c_int,
    width: usize,
    bits: usize,
    /// `P_j`, by destination index.
    pooled: Box<[MPI_Comm]>,
    /// Streams layout: `pair[(i * S + j) * B' + b]` is `C_{i,j,b}`, and `pair[(i * S + i) * B']` is
    /// `D_i` (`B' = max(B, 1)`); empty in the pooled layout.
    pair: Box<[MPI_Comm]>,
    /// Streams layout where some process attached `MPIX_STREAM_NULL`: per rank, bit `i` set where
    /// index `i` has a stream. A message with an end on a conventional index takes `P_j` (both ends on
    /// the implicit pool). `None`: every index of every process has a stream.
    real: Option<Box<[u64]>>,
    /// Dedicated endpoints (split backend): the endpoint behind each hidden communicator, given back
    /// when they are freed; self messages between two indices take `Route::LOCAL`. Empty otherwise.
    dedicated: Box<[MPIX_Stream]>,
    /// The local index that drives each of `dedicated` (the same positions).
    dedicated_index: Box<[usize]>,
    mailbox: bool,
    /// The hidden communicators themselves (`pooled` and `pair` are their views, read on every call),
    /// owned here and taken once by `free`.
    owned: Box<[SharedComm]>,
}

/// Collective over a base communicator: a dup of it on an endpoint of its own, agreed by every member,
/// with that endpoint (the split backend's hidden communicators); an error on every member where none
/// is free on all.
pub type MakeDedicated<'a> = &'a dyn Fn(MPI_Comm) -> Result<(OwnedComm, MPIX_Stream), c_int>;

/// Gives the split backend's dedicated endpoints back (only that backend makes them).
fn give_back(endpoints: &[MPIX_Stream]) {
    for &h in endpoints {
        let _ = crate::backend::Backend::Split.free_stream(h);
    }
}

/// `ceil(log2 n)`: the rank bits that tell any two ranks of `n` apart.
pub fn rank_bits(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// Hidden communicators the streams layout needs for `n` processes and `s` indices.
pub fn streams_layout_cost(n: usize, s: usize) -> usize {
    2 * s + s * s.saturating_sub(1) * rank_bits(n)
}

/// Endpoints the streams layout on dedicated endpoints takes for `n` processes and `s` indices (no
/// `P_j`).
pub fn dedicated_cost(n: usize, s: usize) -> usize {
    s + s * s.saturating_sub(1) * rank_bits(n)
}

/// The layout of a new multiplex communicator.
pub fn choose_layout(native: bool, n: usize, s: usize) -> Layout {
    if native && s > 0 && streams_layout_cost(n, s) <= MAX_HIDDEN_COMMS {
        Layout::Streams
    } else {
        Layout::Pooled
    }
}

/// For the streams layout, in creation order: `(i, j, b)` of each communicator (`i == j`: `D_i`).
fn pair_slots(width: usize, bits: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let b1 = bits.max(1);
    (0..width).flat_map(move |i| {
        // `C_{i,j,b}` only for the rank bits there are (none in a communicator of one process).
        (0..width)
            .flat_map(move |j| (0..b1).filter(move |&b| if i == j { b == 0 } else { b < bits }).map(move |b| (i, j, b)))
    })
}

impl Endpoints {
    fn b1(&self) -> usize {
        self.bits.max(1)
    }

    /// Collective over `base` (an implicit-pool communicator with the user's group and ranks): the
    /// hidden communicators of `layout`. `attach(i)` is this process's native stream at index `i`
    /// (`MPIX_STREAM_NULL` where it has none); `stream_comm` makes a stream communicator (the backend's
    /// `MPIX_Stream_comm_create`). `dedicated`: the streams layout on dedicated endpoints instead
    /// (`attach` and `stream_comm` unused).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        layout: Layout,
        base: MPI_Comm,
        rank: c_int,
        size: usize,
        width: usize,
        attach: &dyn Fn(usize) -> MPIX_Stream,
        stream_comm: &dyn Fn(MPI_Comm, MPIX_Stream) -> MpiResult<OwnedComm>,
        dedicated: Option<MakeDedicated>,
    ) -> Result<Endpoints, c_int> {
        let bits = if layout == Layout::Streams { rank_bits(size) } else { 0 };
        let mut ep = Endpoints {
            layout,
            rank,
            width,
            bits,
            pooled: Box::new([]),
            pair: Box::new([]),
            real: None,
            dedicated: Box::new([]),
            dedicated_index: Box::new([]),
            mailbox: dedicated.is_some(),
            owned: Box::new([]),
        };
        let mut pooled = Vec::with_capacity(width);
        let mut made: Vec<OwnedComm> = Vec::new();
        let mut taken: Vec<MPIX_Stream> = Vec::new();
        let mut taken_index: Vec<usize> = Vec::new();
        let fail = |made: &mut Vec<OwnedComm>, taken: &mut Vec<MPIX_Stream>, rc: c_int| {
            for c in made.drain(..) {
                let _ = c.free();
            }
            give_back(taken);
            Err(rc)
        };
        for _ in 0..if dedicated.is_some() { 0 } else { width } {
            let c = match Comm(base).dup() {
                Ok(c) => c,
                Err(rc) => return fail(&mut made, &mut taken, rc),
            };
            let _ = c.set_errhandler(Errhandler::ERRORS_RETURN);
            pooled.push(c.raw());
            made.push(c);
        }
        if layout == Layout::Streams {
            let b1 = bits.max(1);
            let mut pair = vec![MPI_COMM_NULL; width * width * b1];
            for (i, j, b) in pair_slots(width, bits) {
                let mine = if i == j || (rank >> b) & 1 == 0 { i } else { j };
                let made_one = match dedicated {
                    Some(make) => make(base).map(|(comm, endpoint)| {
                        taken.push(endpoint);
                        taken_index.push(mine);
                        comm
                    }),
                    None => stream_comm(base, attach(mine)),
                };
                let c = match made_one {
                    Ok(c) => c,
                    Err(rc) => return fail(&mut made, &mut taken, rc),
                };
                let _ = c.set_errhandler(Errhandler::ERRORS_RETURN);
                pair[(i * width + j) * b1 + b] = c.raw();
                made.push(c);
            }
            ep.pair = pair.into_boxed_slice();
        }
        ep.pooled = pooled.into_boxed_slice();
        ep.dedicated = taken.into_boxed_slice();
        ep.dedicated_index = taken_index.into_boxed_slice();
        ep.owned = made.into_iter().map(SharedComm::new).collect();
        STATS.live_hidden.fetch_add(ep.counted_hidden(), Ordering::Relaxed);
        Ok(ep)
    }

    /// A copy of this set whose every hidden communicator is MPICH's nonblocking dup of this one's, and
    /// the requests to complete before it is used (a multiplex communicator's `MPI_Comm_idup`, `idup.rs`).
    /// MPICH's idup keeps a stream communicator's stream, so each copy is on the endpoints of its
    /// original: the same routes, with other handles. The copy keeps the layout, whatever the
    /// process's bound says now (choosing again would take a blocking agreement).
    pub fn idup(&self) -> Result<(Endpoints, Vec<OwnedRequest>), c_int> {
        let mut requests = Vec::with_capacity(self.count());
        let mut owned = Vec::with_capacity(self.count());
        let mut dup = |c: MPI_Comm| -> Result<MPI_Comm, c_int> {
            if c == MPI_COMM_NULL {
                return Ok(c);
            }
            let (child, request) = Comm(c).idup()?;
            requests.push(request);
            let raw = child.raw();
            owned.push(SharedComm::new(child));
            Ok(raw)
        };
        let pooled = self.pooled.iter().map(|&c| dup(c)).collect::<Result<Box<[_]>, _>>()?;
        let pair = self.pair.iter().map(|&c| dup(c)).collect::<Result<Box<[_]>, _>>()?;
        let ep = Endpoints {
            layout: self.layout,
            rank: self.rank,
            width: self.width,
            bits: self.bits,
            pooled,
            pair,
            real: self.real.clone(),
            // Never on dedicated endpoints: the split backend refuses a multiplex idup before it starts.
            dedicated: Box::new([]),
            dedicated_index: Box::new([]),
            mailbox: self.mailbox,
            owned: owned.into_boxed_slice(),
        };
        STATS.live_hidden.fetch_add(ep.counted_hidden(), Ordering::Relaxed);
        Ok((ep, requests))
    }

    /// What this set counts against the process's bound: all its communicators in the streams layout
    /// (`streams_layout_cost`), none in the pooled one.
    fn counted_hidden(&self) -> usize {
        if self.layout != Layout::Streams {
            return 0;
        }
        self.count()
    }

    /// The communicator of a message from `(from, si)` to `(to, di)` (indices already checked).
    #[inline]
    pub fn route(&self, from: c_int, si: usize, to: c_int, di: usize) -> Route {
        // Callers pass checked indices, for which `try_route` always finds the communicator.
        self.try_route(from, si, to, di).expect("a hidden communicator for checked indices")
    }

    /// The hidden communicator of (local index `si` -> rank `to`, index `di`), without a panic path (the
    /// send fast path runs outside `ffi_guard`); `None` only for indices out of range.
    #[inline(always)]
    pub fn try_route(&self, from: c_int, si: usize, to: c_int, di: usize) -> Option<Route> {
        if self.mailbox && from == to && si != di {
            return (si < self.width && di < self.width).then_some(Route::LOCAL);
        }
        if self.layout == Layout::Pooled
            || (from == to && si != di)
            || (self.real.is_some() && !(self.has_stream(from, si) && self.has_stream(to, di)))
        {
            return Some(Route { comm: *self.pooled.get(di)?, tag_in_tag: true });
        }
        let b1 = self.b1();
        let slot = if si == di {
            (si * self.width + si) * b1
        } else {
            let b = (from ^ to).trailing_zeros() as usize;
            if (from >> b) & 1 == 0 {
                (si * self.width + di) * b1 + b
            } else {
                (di * self.width + si) * b1 + b
            }
        };
        Some(Route { comm: *self.pair.get(slot)?, tag_in_tag: false })
    }

    /// This process's sends, precomputed: entry `(dest * S + di) * S + si` is the packed route of a
    /// message from local index `si` to process `dest`'s index `di`, 0 where `si` is not a local index
    /// or `di` not one of `dest`'s (`counts`: every process's count, `local`: this process's). Empty
    /// beyond `MAX_SEND_TABLE` entries.
    pub fn send_table(&self, counts: &[c_int], local: usize) -> Box<[u64]> {
        let s = self.width;
        if counts.len().saturating_mul(s * s) > MAX_SEND_TABLE {
            return Box::new([]);
        }
        let mut t = vec![0u64; counts.len() * s * s];
        for (dest, &n) in counts.iter().enumerate() {
            for di in 0..(n.max(0) as usize).min(s) {
                for si in 0..local.min(s) {
                    if let Some(r) = self.try_route(self.rank, si, dest as c_int, di).filter(|r| *r != Route::LOCAL) {
                        t[(dest * s + di) * s + si] = r.packed();
                    }
                }
            }
        }
        t.into_boxed_slice()
    }

    /// Records which indices of which processes have a stream (`real[rank]`, bit `i`), where some
    /// process attached `MPIX_STREAM_NULL` (the same on every process: an allgather's result).
    pub fn set_conventional(&mut self, real: Box<[u64]>) {
        if self.layout == Layout::Streams {
            self.real = Some(real);
        }
    }

    /// Whether index `i` of process `rank` has a stream (streams layout with conventional indices).
    #[inline(always)]
    fn has_stream(&self, rank: c_int, i: usize) -> bool {
        match &self.real {
            None => true,
            Some(m) => m.get(rank as usize).is_some_and(|&bits| i < 64 && (bits >> i) & 1 == 1),
        }
    }

    /// The hidden communicators on which this process receives for its local index `j`: those of
    /// `candidates` that some (process, index) of `counts` routes a message to (`j`) through. The
    /// others can never hold one, and each costs a turn of the engine an `MPI_Improbe` (on `P_j`, a
    /// pass of MPICH's progress engine on the implicit pool): a process with one index on a
    /// communicator without conventional indices never probes `P_j`.
    pub fn sources(&self, j: usize, counts: &[c_int]) -> Vec<Source> {
        let reaches = |comm: MPI_Comm| {
            counts.iter().enumerate().any(|(r, &n)| {
                (0..(n.max(0) as usize).min(self.width))
                    .any(|i| self.try_route(r as c_int, i, self.rank, j).is_some_and(|x| x.comm == comm))
            })
        };
        self.candidates(j).into_iter().filter(|x| reaches(x.comm)).collect()
    }

    /// Every hidden communicator where this process attached its index `j` (a pair one), and `P_j`
    /// (none on dedicated endpoints).
    fn candidates(&self, j: usize) -> Vec<Source> {
        let mut out: Vec<Source> =
            self.pooled.get(j).map(|&comm| Source { comm, index: SourceIndex::InTag }).into_iter().collect();
        if self.layout == Layout::Streams && self.has_stream(self.rank, j) {
            let (s, b1) = (self.width, self.b1());
            out.push(Source { comm: self.pair[(j * s + j) * b1], index: SourceIndex::Fixed(j as c_int) });
            for b in 0..self.bits {
                for i in (0..s).filter(|&i| i != j) {
                    // This process attached j in C_{i,j,b} if its bit b is 1, in C_{j,i,b} if 0.
                    let (zero, one) = if (self.rank >> b) & 1 == 1 { (i, j) } else { (j, i) };
                    out.push(Source {
                        comm: self.pair[(zero * s + one) * b1 + b],
                        index: SourceIndex::ByRankBit { zero: zero as c_int, one: one as c_int, bit: b as u32 },
                    });
                }
            }
        }
        out
    }

    /// `P_0`: a plain communicator of the user's group and ranks on MPICH's implicit pool (none where
    /// no process has an index).
    pub fn plain(&self) -> Option<MPI_Comm> {
        self.pooled.first().copied()
    }

    /// How many hidden communicators this holds.
    pub fn count(&self) -> usize {
        self.hidden().count()
    }

    /// Every hidden communicator.
    fn hidden(&self) -> impl Iterator<Item = MPI_Comm> + '_ {
        self.pooled.iter().chain(self.pair.iter()).copied().filter(|&c| c != MPI_COMM_NULL)
    }

    /// Gives every hidden communicator error handler `h`.
    pub fn set_errhandler(&self, h: Errhandler) {
        for c in self.hidden() {
            let _ = Comm(c).set_errhandler(h);
        }
    }

    /// Frees the hidden communicators (once; the caller makes sure of it), and gives their dedicated
    /// endpoints back.
    pub fn free(&self) {
        STATS.live_hidden.fetch_sub(self.counted_hidden(), Ordering::Relaxed);
        // First out of the helper thread's reach (`Backend::set_endpoint_owner`): no turn of it runs
        // once this returns, so none runs beside the frees.
        for &h in self.dedicated.iter() {
            crate::backend::Backend::Split.set_endpoint_owner(h, None);
        }
        // Each taken once: a second call frees nothing.
        for c in self.owned.iter().filter_map(SharedComm::take) {
            let _ = c.free();
        }
        give_back(&self.dedicated);
    }

    /// Each dedicated endpoint with the local index that drives it (split backend; none elsewhere).
    pub fn dedicated_owners(&self) -> impl Iterator<Item = (MPIX_Stream, usize)> + '_ {
        self.dedicated.iter().copied().zip(self.dedicated_index.iter().copied())
    }

    /// Whether the hidden communicators are on dedicated endpoints (the split backend).
    pub fn on_dedicated(&self) -> bool {
        self.mailbox
    }

    #[cfg(test)]
    pub fn fake(layout: Layout, rank: c_int, size: usize, width: usize) -> Endpoints {
        // Distinct fake handles: pooled 1000 + j, pair (i, j, b) encoded, so routes can be compared.
        let bits = if layout == Layout::Streams { rank_bits(size) } else { 0 };
        let b1 = bits.max(1);
        let pooled = (0..width).map(|j| 1000 + j as MPI_Comm).collect();
        let mut pair = vec![MPI_COMM_NULL; if layout == Layout::Streams { width * width * b1 } else { 0 }];
        if layout == Layout::Streams {
            for (i, j, b) in pair_slots(width, bits) {
                pair[(i * width + j) * b1 + b] = (10_000 + (i * 100 + j) * 10 + b) as MPI_Comm;
            }
        }
        Endpoints {
            layout,
            rank,
            width,
            bits,
            pooled,
            pair: pair.into_boxed_slice(),
            real: None,
            dedicated: Box::new([]),
            dedicated_index: Box::new([]),
            mailbox: false,
            owned: Box::new([]),
        }
    }

    /// `fake`'s streams layout on dedicated endpoints: no `P_j`, self messages between indices local.
    #[cfg(test)]
    pub fn fake_dedicated(rank: c_int, size: usize, width: usize) -> Endpoints {
        let mut e = Endpoints::fake(Layout::Streams, rank, size, width);
        e.pooled = Box::new([]);
        e.mailbox = true;
        e
    }

    /// The index rank `rank` attaches in the streams layout's communicator at `pair[pos]`: `D_i`'s
    /// `i`; in `C_{i,j,b}`, `i` where the rank's bit `b` is 0, else `j`.
    fn attached_at(&self, rank: c_int, pos: usize) -> usize {
        let b1 = self.b1();
        let (ij, b) = (pos / b1, pos % b1);
        let (i, j) = (ij / self.width, ij % self.width);
        if i == j || (rank >> b) & 1 == 0 {
            i
        } else {
            j
        }
    }

    /// Every hidden communicator with the index whose stream this process attached in it (`None` for
    /// the `P_j`, on MPICH's implicit pool, which carry any index): what the tools library reports
    /// a hidden communicator's traffic under (`query`). Never on a message path.
    pub fn attached_indices(&self) -> impl Iterator<Item = (MPI_Comm, Option<usize>)> + '_ {
        let pair = self.pair.iter().enumerate().map(|(pos, &c)| (c, Some(self.attached_at(self.rank, pos))));
        self.pooled.iter().map(|&c| (c, None)).chain(pair).filter(|&(c, _)| c != MPI_COMM_NULL)
    }

    /// The index rank `rank` attached in hidden communicator `comm` (test helper: which stream).
    #[cfg(test)]
    fn attached(&self, rank: c_int, comm: MPI_Comm) -> Option<usize> {
        let pos = self.pair.iter().position(|&c| c == comm)?;
        Some(self.attached_at(rank, pos))
    }
}

#[cfg(test)]
mod tests;

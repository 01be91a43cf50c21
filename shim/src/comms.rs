//! One record per communicator the library decides something about: its local stream, who attached
//! it, the plain base of a policy communicator and where its nonblocking and persistent collectives
//! run. Everything in a record is settled when the communicator is made (what every member must agree
//! on, agreed there: `policy::agree`) and never changes after; the record lives exactly as long as the
//! communicator, because it is attached to it as an MPI attribute whose delete callback MPICH runs on
//! every destruction path (`MPI_Comm_free`, `MPI_Comm_disconnect`) before the handle can be reused
//! (`records::deleted`, which removes it here).
//!
//! This table is a cache of those attributes by handle, for the interposers, which ask
//! [`CommTable::lookup`] on every call once a record exists: a direct-mapped cache indexed by handle
//! bits answers them without hashing or locking (`MPI_Comm_get_attr` is a list walk under MPICH's lock).
use crate::streams::StreamTable;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{OwnedComm, SharedComm};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Who attached the stream (`User` or `Policy`; the type is shared with the tools library, which
/// learns it through `query::mpixstream_comm_origin`).
pub use mpixstream_wrappers::tools::StreamOrigin as Origin;

/// A policy communicator's plain base (`policy_base.rs`): the same group and ranks on MPICH's implicit
/// pool. A view: the record owns the communicator ([`OwnedBase`]).
#[derive(Clone, Copy, Debug)]
pub struct Base {
    pub comm: MPI_Comm,
    /// The base carries a copy of the communicator's topology: neighbourhood collectives can run there.
    pub topology: bool,
}

/// A base, owned: by its maker until a record holds it, then by the record, freed once with it
/// (`take` when the record is deleted).
#[derive(Debug)]
pub struct OwnedBase {
    comm: SharedComm,
    topology: bool,
}

impl OwnedBase {
    pub fn new(comm: OwnedComm, topology: bool) -> OwnedBase {
        OwnedBase { comm: SharedComm::new(comm), topology }
    }

    /// The base as the interposers use it (`MPI_COMM_NULL` once taken).
    #[inline]
    pub fn view(&self) -> Base {
        Base { comm: self.comm.view().raw(), topology: self.topology }
    }

    /// The communicator, to free (once: `None` after).
    pub fn take(&self) -> Option<OwnedComm> {
        self.comm.take()
    }

    /// Frees the communicator (a base nobody will use).
    pub fn free(self) {
        if let Some(c) = self.take() {
            let _ = c.free();
        }
    }
}

/// Where a communicator's nonblocking and persistent collectives run, the same on every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// On the communicator itself (an application's stream communicator; no base; or a base that some
    /// member could not serve).
    Comm,
    /// On the base, all but the neighbourhood collectives (the base has no topology).
    BaseButNeighbourhood,
    /// On the base, all of them.
    Base,
}

impl Route {
    /// The communicator a collective of the record's communicator `comm` runs on.
    pub fn comm_for(self, comm: MPI_Comm, base: Option<Base>, neighbourhood: bool) -> MPI_Comm {
        match (self, base) {
            (Route::Base, Some(b)) => b.comm,
            (Route::BaseButNeighbourhood, Some(b)) if !neighbourhood => b.comm,
            _ => comm,
        }
    }

    fn code(self) -> u64 {
        self as u64
    }

    fn from_code(code: u64) -> Route {
        match code {
            2 => Route::Base,
            1 => Route::BaseButNeighbourhood,
            _ => Route::Comm,
        }
    }
}

#[derive(Debug)]
pub struct CommRecord {
    /// This process's local stream (index in the stream table); `None` where it attached none (its
    /// pool was exhausted, MPICH refused one): the communicator is still the members' one record.
    pub stream: Option<usize>,
    pub origin: Origin,
    pub base: Option<OwnedBase>,
    pub collectives: Route,
}

impl CommRecord {
    /// The base's view.
    #[inline]
    pub fn base(&self) -> Option<Base> {
        self.base.as_ref().map(OwnedBase::view)
    }

    /// A communicator that carries stream `stream` and runs everything on it.
    pub fn on_stream(stream: usize, origin: Origin) -> CommRecord {
        CommRecord { stream: Some(stream), origin, base: None, collectives: Route::Comm }
    }
}

/// What the interposers need of a record on every call (cached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cached {
    pub stream: Option<usize>,
    pub collectives: Route,
}

/// Entries of the direct-mapped cache (a power of two).
const CACHE_SLOTS: usize = 4096;
/// The cache's epoch bits (see `cache`).
const EPOCH_MASK: u32 = 0x3f_ffff;

pub struct CommTable {
    map: DashMap<MPI_Comm, Arc<CommRecord>>,
    /// How many records `map` holds: lets an interposer skip the lookup entirely (one relaxed load)
    /// while none exists.
    records: AtomicUsize,
    /// `lookup`'s cache: slot `hash(handle)` holds `handle << 32 | epoch << 10 | route << 8 | (stream + 1
    /// or 0)`. An entry counts only while its epoch is the current one; every change of `map` bumps the
    /// epoch after the change (release), and a filler reads the epoch (acquire) before it reads `map`,
    /// so an entry never outlives the state it was read from. (22-bit epochs: an entry would have to sit
    /// unread through 4 million communicator creations and frees to be misread.)
    cache: Box<[AtomicU64; CACHE_SLOTS]>,
    epoch: AtomicU32,
}

impl Default for CommTable {
    fn default() -> Self {
        CommTable {
            map: DashMap::new(),
            records: AtomicUsize::new(0),
            // A fixed size, so that the slot's index needs no bounds check on every call.
            cache: (0..CACHE_SLOTS)
                .map(|_| AtomicU64::new(0))
                .collect::<Box<[AtomicU64]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("CACHE_SLOTS entries")),
            epoch: AtomicU32::new(1),
        }
    }
}

impl CommTable {
    pub fn get(&self, comm: MPI_Comm) -> Option<Arc<CommRecord>> {
        self.map.get(&comm).map(|e| e.clone())
    }

    /// The base of `comm`'s record, if it has one (a policy communicator on the native backend).
    pub fn base(&self, comm: MPI_Comm) -> Option<Base> {
        self.map.get(&comm)?.base()
    }

    /// What the interposers need of `comm`'s record, on every call: one relaxed load while no record
    /// exists, else one cache slot indexed by handle bits (the map only on a miss).
    #[inline]
    pub fn lookup(&self, comm: MPI_Comm) -> Option<Cached> {
        if !self.any_record() {
            return None;
        }
        let h = comm as u32;
        let slot = &self.cache[(h ^ (h >> 12)) as usize & (CACHE_SLOTS - 1)];
        let epoch = self.epoch.load(Ordering::Acquire) & EPOCH_MASK;
        let entry = slot.load(Ordering::Relaxed);
        // Handle and epoch (bits 10 and up) in one comparison.
        if (entry ^ ((h as u64) << 32 | (epoch as u64) << 10)) >> 10 == 0 {
            return match entry & 0x3ff {
                0 => None,
                code => Some(Cached {
                    stream: ((code & 0xff) as u8).checked_sub(1).map(usize::from),
                    collectives: Route::from_code((code >> 8) & 0x3),
                }),
            };
        }
        self.lookup_slow(comm, slot, epoch)
    }

    /// The stream `comm` carries (`lookup`'s).
    #[inline]
    pub fn stream_of(&self, comm: MPI_Comm) -> Option<usize> {
        self.lookup(comm)?.stream
    }

    #[cold]
    fn lookup_slow(&self, comm: MPI_Comm, slot: &AtomicU64, epoch: u32) -> Option<Cached> {
        let cached = self.map.get(&comm).map(|r| Cached { stream: r.stream, collectives: r.collectives });
        // 0: no record; else route and stream + 1 (0: none), never 0 together (Route::Comm with no
        // stream is cached as 0x300, a code no route has).
        let code = match cached {
            None => Some(0),
            Some(Cached { stream: None, collectives: Route::Comm }) => Some(0x300),
            // A stream index too large for the slot's 8 bits is not cached: the map each time.
            Some(c) => c
                .stream
                .map_or(Some(0), |s| u64::try_from(s + 1).ok().filter(|&v| v <= 0xff))
                .map(|s| c.collectives.code() << 8 | s),
        };
        if let Some(code) = code {
            slot.store((comm as u32 as u64) << 32 | (epoch as u64) << 10 | code, Ordering::Relaxed);
        }
        cached
    }

    /// After every change of `map`: entries cached before it no longer count.
    fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// Records `record` as `comm`'s (and counts the attachment on its stream). Only `records::attach`
    /// calls this, after MPICH took the attribute whose delete callback removes it.
    pub fn insert(&self, streams: &StreamTable, comm: MPI_Comm, record: Arc<CommRecord>) {
        if let Some(s) = record.stream {
            streams.slot(s).comms.fetch_add(1, Ordering::AcqRel);
            if record.origin == Origin::Policy {
                // Its sends are noted, so that a cancel of one can be kept from MPICH (native_fixes::cancel).
                streams.prepare_send_marks(s);
            }
        }
        if let Some(old) = self.map.insert(comm, record) {
            // Cannot happen while every record leaves through its delete callback; kept consistent.
            if let Some(s) = old.stream {
                streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel);
            }
        } else {
            self.records.fetch_add(1, Ordering::Release);
        }
        self.changed();
    }

    /// Whether any communicator has a record (cheap gate for the pass-through interposers).
    #[inline]
    pub fn any_record(&self) -> bool {
        self.records.load(Ordering::Relaxed) != 0
    }

    /// Forgets `comm`'s record if it is `record`; its stream's attachment count is decremented.
    /// Returns `None` if it was not, else whether this was the last communicator attached to the
    /// record's stream (decided by the decrement itself: of two records of one stream freed at once,
    /// exactly one is the last).
    pub fn remove(&self, streams: &StreamTable, comm: MPI_Comm, record: &CommRecord) -> Option<bool> {
        self.map.remove_if(&comm, |_, r| std::ptr::eq(Arc::as_ptr(r), record))?;
        self.changed();
        self.records.fetch_sub(1, Ordering::Release);
        Some(match record.stream {
            Some(s) => streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel) == 1,
            None => false,
        })
    }

    pub fn entries(&self) -> Vec<(MPI_Comm, Arc<CommRecord>)> {
        self.map.iter().map(|e| (*e.key(), e.value().clone())).collect()
    }

    /// The communicator whose record has `base` as its base (a linear search: the tools library asks
    /// once per communicator, at its first use there).
    pub fn owner_of_base(&self, base: MPI_Comm) -> Option<MPI_Comm> {
        self.map.iter().find(|e| e.value().base().is_some_and(|b| b.comm == base)).map(|e| *e.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_follows_insert_and_remove() {
        let streams = StreamTable::new(4, crate::streams::RequestPools::NONE);
        let a = streams.allocate().unwrap();
        let t = CommTable::default();
        let (c1, c2) = (0x8400_0001u32 as MPI_Comm, 0xc400_0001u32 as MPI_Comm);
        assert_eq!(t.stream_of(c1), None);
        let r1 = Arc::new(CommRecord::on_stream(a, Origin::User));
        t.insert(&streams, c1, r1.clone());
        assert_eq!(t.stream_of(c1), Some(a));
        assert_eq!(t.stream_of(c1), Some(a), "from the cache");
        // c2 shares c1's cache slot (h ^ h >> 12): the slot is refilled, never misread.
        assert_eq!(t.stream_of(c2), None);
        assert_eq!(t.stream_of(c1), Some(a));
        assert_eq!(t.remove(&streams, c1, &CommRecord::on_stream(a, Origin::User)), None, "another record");
        assert_eq!(t.remove(&streams, c1, &r1), Some(true), "the stream's last communicator");
        assert_eq!(t.stream_of(c1), None, "a cached entry does not outlive the removal");
        assert_eq!(streams.slot(a).comms.load(Ordering::Relaxed), 0);
        let base = 0x8400_0009u32 as MPI_Comm;
        // SAFETY: a handle value only, never freed (the record is dropped with its base unfreed: a leak).
        let owned = OwnedBase::new(unsafe { OwnedComm::from_raw(base) }, false);
        let r2 = Arc::new(CommRecord {
            stream: None,
            origin: Origin::Policy,
            base: Some(owned),
            collectives: Route::BaseButNeighbourhood,
        });
        t.insert(&streams, c2, r2);
        for _ in 0..2 {
            let c = t.lookup(c2).unwrap();
            assert_eq!((c.stream, c.collectives), (None, Route::BaseButNeighbourhood));
        }
        assert_eq!(t.owner_of_base(base), Some(c2));
        assert_eq!(t.lookup(c1), None);
    }

    #[test]
    fn a_record_without_stream_on_its_communicator_is_cached_as_a_record() {
        let streams = StreamTable::new(1, crate::streams::RequestPools::NONE);
        let t = CommTable::default();
        let c = 0x8400_0002u32 as MPI_Comm;
        let r = Arc::new(CommRecord { stream: None, origin: Origin::Policy, base: None, collectives: Route::Comm });
        t.insert(&streams, c, r);
        for _ in 0..2 {
            assert_eq!(t.lookup(c), Some(Cached { stream: None, collectives: Route::Comm }));
        }
    }

    #[test]
    fn routes_pick_the_base_only_where_it_serves() {
        let (c, b) = (1 as MPI_Comm, 2 as MPI_Comm);
        let plain = Some(Base { comm: b, topology: false });
        assert_eq!(Route::Base.comm_for(c, plain, true), b);
        assert_eq!(Route::BaseButNeighbourhood.comm_for(c, plain, false), b);
        assert_eq!(Route::BaseButNeighbourhood.comm_for(c, plain, true), c);
        assert_eq!(Route::Comm.comm_for(c, plain, false), c);
        assert_eq!(Route::Base.comm_for(c, None, false), c);
    }
}

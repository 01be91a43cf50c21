//! Which communicators carry a stream: keyed by communicator handle (off the hot path: ordinary calls
//! on a stream communicator go straight to MPICH and never look here). The interposers that route
//! around native defects ask [`CommTable::stream_of`] on every call once a stream communicator exists:
//! a direct-mapped cache indexed by handle bits answers them without hashing or locking.
use crate::streams::StreamTable;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Who attached the stream (`User` or `Policy`; the type is shared with the tools library, which
/// learns it through `query::mpixstream_comm_origin`).
pub use mpixstream_wrappers::tools::StreamOrigin as Origin;

#[derive(Clone, Debug)]
pub struct CommEntry {
    /// Index of the local stream in the stream table.
    pub stream: usize,
    pub origin: Origin,
}

/// Entries of the direct-mapped cache (a power of two).
const CACHE_SLOTS: usize = 4096;

pub struct CommTable {
    map: DashMap<MPI_Comm, CommEntry>,
    /// How many entries `map` holds: lets an interposer skip the lookup entirely (one relaxed load)
    /// while no stream communicator exists.
    stream_comms: AtomicUsize,
    /// `stream_of`'s cache: slot `hash(handle)` holds `handle << 32 | epoch << 8 | (stream + 1 or 0)`.
    /// An entry counts only while its epoch is the current one; every change of `map` bumps the epoch
    /// after the change (release), and a filler reads the epoch (acquire) before it reads `map`, so an
    /// entry never outlives the state it was read from. (24-bit epochs: an entry would have to sit
    /// unread through 16 million communicator creations and frees to be misread.)
    cache: Box<[AtomicU64]>,
    epoch: AtomicU32,
}

impl Default for CommTable {
    fn default() -> Self {
        CommTable {
            map: DashMap::new(),
            stream_comms: AtomicUsize::new(0),
            cache: (0..CACHE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            epoch: AtomicU32::new(1),
        }
    }
}

impl CommTable {
    pub fn get(&self, comm: MPI_Comm) -> Option<CommEntry> {
        self.map.get(&comm).map(|e| e.clone())
    }

    /// The stream `comm` carries, for the interposers on every call: one relaxed load while no stream
    /// communicator exists, else one cache slot indexed by handle bits (the map only on a miss).
    #[inline]
    pub fn stream_of(&self, comm: MPI_Comm) -> Option<usize> {
        if !self.any_stream_comm() {
            return None;
        }
        let h = comm as u32;
        let slot = &self.cache[(h ^ (h >> 12)) as usize & (CACHE_SLOTS - 1)];
        let epoch = self.epoch.load(Ordering::Acquire) & 0xff_ffff;
        let entry = slot.load(Ordering::Relaxed);
        if (entry >> 32) as u32 == h && ((entry >> 8) as u32 & 0xff_ffff) == epoch {
            return (entry as u8).checked_sub(1).map(usize::from);
        }
        self.stream_of_slow(comm, slot, epoch)
    }

    #[cold]
    fn stream_of_slow(&self, comm: MPI_Comm, slot: &AtomicU64, epoch: u32) -> Option<usize> {
        let stream = self.map.get(&comm).map(|e| e.stream);
        let code = stream.map_or(0, |s| s as u64 + 1);
        if code <= 0xff {
            slot.store((comm as u32 as u64) << 32 | (epoch as u64) << 8 | code, Ordering::Relaxed);
        }
        stream
    }

    /// After every change of `map`: entries cached before it no longer count.
    fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// Records that `comm` carries stream `index` (and counts the attachment on the stream).
    pub fn attach(&self, streams: &StreamTable, comm: MPI_Comm, entry: CommEntry) {
        streams.slot(entry.stream).comms.fetch_add(1, Ordering::AcqRel);
        if let Some(old) = self.map.insert(comm, entry) {
            // A handle MPICH reused without our seeing the free (freed behind our back, e.g. by
            // MPI_Comm_disconnect): drop the stale attachment.
            streams.slot(old.stream).comms.fetch_sub(1, Ordering::AcqRel);
        } else {
            self.stream_comms.fetch_add(1, Ordering::Release);
        }
        self.changed();
    }

    /// Whether any communicator carries a stream (cheap gate for the pass-through interposers).
    #[inline]
    pub fn any_stream_comm(&self) -> bool {
        self.stream_comms.load(Ordering::Relaxed) != 0
    }

    /// Forgets `comm`; returns its entry, whose stream's attachment count has been decremented.
    pub fn detach(&self, streams: &StreamTable, comm: MPI_Comm) -> Option<CommEntry> {
        let (_, entry) = self.map.remove(&comm)?;
        self.changed();
        self.stream_comms.fetch_sub(1, Ordering::Release);
        streams.slot(entry.stream).comms.fetch_sub(1, Ordering::AcqRel);
        Some(entry)
    }

    pub fn entries(&self) -> Vec<(MPI_Comm, CommEntry)> {
        self.map.iter().map(|e| (*e.key(), e.value().clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_of_follows_attach_and_detach() {
        let streams = StreamTable::new(4);
        let a = streams.allocate().unwrap();
        let t = CommTable::default();
        let (c1, c2) = (0x8400_0001u32 as MPI_Comm, 0xc400_0001u32 as MPI_Comm);
        assert_eq!(t.stream_of(c1), None);
        t.attach(&streams, c1, CommEntry { stream: a, origin: Origin::User });
        assert_eq!(t.stream_of(c1), Some(a));
        assert_eq!(t.stream_of(c1), Some(a), "from the cache");
        // c2 shares c1's cache slot (h ^ h >> 12): the slot is refilled, never misread.
        assert_eq!(t.stream_of(c2), None);
        assert_eq!(t.stream_of(c1), Some(a));
        t.detach(&streams, c1);
        assert_eq!(t.stream_of(c1), None, "a cached entry does not outlive the detach");
        t.attach(&streams, c2, CommEntry { stream: a, origin: Origin::Policy });
        assert_eq!(t.stream_of(c2), Some(a));
        assert_eq!(t.stream_of(c1), None);
    }
}

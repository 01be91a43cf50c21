//! Which communicators carry a stream: keyed by communicator handle (off the hot path: ordinary calls
//! on a stream communicator go straight to MPICH and never look here).
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Who attached the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `MPIX_Stream_comm_create` or a dup of such a communicator: the application owns the stream.
    User,
    /// The explicit policy: the stream was created for this communicator and is freed with it.
    Policy,
}

#[derive(Clone, Debug)]
pub struct CommEntry {
    /// Index of the local stream in the stream table.
    pub stream: usize,
    pub origin: Origin,
}

#[derive(Default)]
pub struct CommTable {
    map: DashMap<MPI_Comm, CommEntry>,
    /// How many entries `map` holds: lets an interposer skip the lookup entirely (one relaxed load)
    /// while no stream communicator exists.
    stream_comms: AtomicUsize,
}

impl CommTable {
    pub fn get(&self, comm: MPI_Comm) -> Option<CommEntry> {
        self.map.get(&comm).map(|e| e.clone())
    }

    /// Records that `comm` carries stream `index` (and counts the attachment on the stream).
    pub fn attach(&self, rt: &crate::runtime::Runtime, comm: MPI_Comm, entry: CommEntry) {
        rt.streams.slot(entry.stream).comms.fetch_add(1, Ordering::AcqRel);
        if let Some(old) = self.map.insert(comm, entry) {
            // A handle MPICH reused without our seeing the free (freed behind our back, e.g. by
            // MPI_Comm_disconnect): drop the stale attachment.
            rt.streams.slot(old.stream).comms.fetch_sub(1, Ordering::AcqRel);
        } else {
            self.stream_comms.fetch_add(1, Ordering::Release);
        }
    }

    /// Whether any communicator carries a stream (cheap gate for the pass-through interposers).
    #[inline]
    pub fn any_stream_comm(&self) -> bool {
        self.stream_comms.load(Ordering::Relaxed) != 0
    }

    /// Forgets `comm`; returns its entry, whose stream's attachment count has been decremented.
    pub fn detach(&self, rt: &crate::runtime::Runtime, comm: MPI_Comm) -> Option<CommEntry> {
        let (_, entry) = self.map.remove(&comm)?;
        self.stream_comms.fetch_sub(1, Ordering::Release);
        rt.streams.slot(entry.stream).comms.fetch_sub(1, Ordering::AcqRel);
        Some(entry)
    }

    pub fn entries(&self) -> Vec<(MPI_Comm, CommEntry)> {
        self.map.iter().map(|e| (*e.key(), e.value().clone())).collect()
    }
}

//! Which communicators carry a stream: keyed by communicator handle (off the hot path: ordinary calls
//! on a stream communicator go straight to MPICH and never look here).
use crate::multiplex::Multiplex;
use crate::streams::StreamTable;
use dashmap::DashMap;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
    /// Multiplex stream communicators (`crate::multiplex`), kept apart from `map`: their ordinary
    /// traffic is the parent's, so to everything that reads `map` they are conventional communicators.
    multiplex: DashMap<MPI_Comm, Arc<Multiplex>>,
    /// How many entries `map` holds: lets an interposer skip the lookup entirely (one relaxed load)
    /// while no stream communicator exists.
    stream_comms: AtomicUsize,
}

impl CommTable {
    pub fn get(&self, comm: MPI_Comm) -> Option<CommEntry> {
        self.map.get(&comm).map(|e| e.clone())
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
    }

    /// Whether any communicator carries a stream (cheap gate for the pass-through interposers).
    #[inline]
    pub fn any_stream_comm(&self) -> bool {
        self.stream_comms.load(Ordering::Relaxed) != 0
    }

    /// Forgets `comm`; returns its entry, whose stream's attachment count has been decremented.
    pub fn detach(&self, streams: &StreamTable, comm: MPI_Comm) -> Option<CommEntry> {
        let (_, entry) = self.map.remove(&comm)?;
        self.stream_comms.fetch_sub(1, Ordering::Release);
        streams.slot(entry.stream).comms.fetch_sub(1, Ordering::AcqRel);
        Some(entry)
    }

    /// The multiplex communicator behind `comm` (one hash lookup and a reference count: the
    /// `MPIX_Stream_send`/`recv` path).
    #[inline]
    pub fn multiplex(&self, comm: MPI_Comm) -> Option<Arc<Multiplex>> {
        self.multiplex.get(&comm).map(|e| e.value().clone())
    }

    /// Records the multiplex communicator `comm`; counts an attachment on each of its local streams.
    pub fn attach_multiplex(&self, streams: &StreamTable, comm: MPI_Comm, m: Arc<Multiplex>) {
        for &s in m.streams.iter().flatten() {
            streams.slot(s).comms.fetch_add(1, Ordering::AcqRel);
        }
        if let Some(old) = self.multiplex.insert(comm, m) {
            // A reused handle whose free we did not see: drop the stale attachments.
            for &s in old.streams.iter().flatten() {
                streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Forgets the multiplex communicator `comm` if it is still `m` (the handle may have been reused);
    /// releases the attachments of its streams.
    pub fn detach_multiplex(&self, streams: &StreamTable, comm: MPI_Comm, m: &Arc<Multiplex>) -> bool {
        let Some((_, old)) = self.multiplex.remove_if(&comm, |_, v| Arc::ptr_eq(v, m)) else {
            return false;
        };
        for &s in old.streams.iter().flatten() {
            streams.slot(s).comms.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }

    pub fn entries(&self) -> Vec<(MPI_Comm, CommEntry)> {
        self.map.iter().map(|e| (*e.key(), e.value().clone())).collect()
    }
}

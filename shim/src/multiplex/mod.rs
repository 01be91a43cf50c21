//! Multiplex stream communicators (`docs/multiplex.md`), implemented entirely here on every backend:
//! native MPICH 5.0.2's `MPIX_Stream_comm_create_multiplex` aborts, and no single native stream
//! communicator can choose the (source endpoint, destination endpoint) pair per message.
//!
//! How a multiplex communicator works:
//! - The user's handle is a plain `MPI_Comm_dup` of the parent: ordinary MPI calls on it behave as on
//!   the parent (same group, attributes, error handler and endpoint).
//! - Indexed traffic runs on hidden communicators (`endpoints`): on the native backend each message
//!   from index `i` to index `j` leaves on stream `i`'s reserved VCI and arrives on the peer's stream
//!   `j`'s reserved VCI; on the split backend on thread-split endpoints of which each process's index
//!   `i` drives its own set, a message between two indices of one process copied (`mailbox`); on the
//!   serial backend (and beyond a bound on their number) one hidden
//!   communicator per destination index on MPICH's implicit pool, the source index in the tag.
//! - A receive naming its source, source index and tag, with nothing queued on its index, is one MPICH
//!   receive on the one hidden communicator that carries that pair (`p2p`, the direct path). Other
//!   receives go through a matching engine per local index (`matching`): `MPI_Improbe` on the hidden
//!   communicators that senders reach the index through, matched in posting order, else kept in an
//!   unexpected queue, so
//!   `MPI_ANY_SOURCE`, `MPI_ANY_TAG` and `MPIX_ANY_INDEX` keep MPI's order per pair.
//! - Nonblocking engine receives are MPICH extended generalized requests (`requests`); a background
//!   thread (`progress`) turns engines nobody turns, only those on MPICH's implicit (locked) pool.
//! - `registry` maps a user handle to its record without a reference count on the hot path;
//!   `lifecycle` creates, duplicates and frees; `errors` holds the error texts.
//!
//! Submodules: `endpoints` (which hidden communicator), `matching`, `mailbox` (messages between two
//! indices of one process on dedicated endpoints), `requests`, `progress`,
//! `registry`, `offer` (what each process brings to a creation, gathered at once), `creation` (hidden
//! communicators and record), `lifecycle`, `idup` (the nonblocking
//! dup), `p2p` (the entry points), `errors`.
mod creation;
pub mod endpoints;
mod errors;
mod idup;
pub mod lifecycle;
mod mailbox;
mod matching;
mod offer;
mod p2p;
pub mod progress;
pub mod registry;
mod requests;

use endpoints::{Endpoints, Layout};
use matching::MatchingEngine;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use mpixstream_wrappers::ffi::*;

pub use lifecycle::{comm_constructed, comm_freed, errhandler_set, get_stream};

/// Ours (native MPICH has none): the source index of a receive that accepts any source index.
pub const MPIX_ANY_INDEX: c_int = -1;

/// A multiplex stream communicator's record: reference-counted, reclaimed once the communicator is
/// destroyed and nothing pending holds it (`registry`); the hot paths borrow it for the call on the
/// communicator that looked it up (`registry::with_table`).
pub struct Multiplex {
    /// The user's communicator.
    pub comm: MPI_Comm,
    pub rank: c_int,
    /// Number of stream indices of every process of the communicator.
    pub counts: Box<[c_int]>,
    /// `S`: the largest count; the tag multiplier on pooled hidden communicators.
    pub width: c_int,
    /// `MPI_TAG_UB` of the parent.
    pub tag_ub: c_int,
    /// The largest user tag that fits: `(tag_ub - (S - 1)) / S` (`MPIX_Comm_multiplex_tag_ub`).
    pub max_tag: c_int,
    /// This process's streams by index (slots of the stream table); `None`: `MPIX_STREAM_NULL`.
    pub streams: Box<[Option<usize>]>,
    /// The hidden communicators.
    endpoints: Endpoints,
    /// This process's send routes by (destination, destination index, source index)
    /// (`Endpoints::send_table`); empty for a large communicator.
    send_routes: Box<[u64]>,
    /// One matching engine per local index.
    engines: Box<[MatchingEngine]>,
    /// Engine receives posted and not complete, over all engines.
    pending: AtomicUsize,
    /// The user freed the communicator; the hidden ones go when `pending` reaches 0.
    freed: AtomicBool,
    /// Their release is deferred (`crate::deferred`), once.
    release_scheduled: AtomicBool,
    released: AtomicBool,
}

impl Multiplex {
    fn new(
        comm: MPI_Comm,
        rank: c_int,
        counts: Box<[c_int]>,
        tag_ub: c_int,
        streams: Box<[Option<usize>]>,
        endpoints: Endpoints,
        reserved: &dyn Fn(usize) -> Option<&'static crate::streams::StreamSlot>,
    ) -> Multiplex {
        let width = counts.iter().copied().max().unwrap_or(0).max(0);
        let max_tag = if width > 0 { (tag_ub - (width - 1)) / width } else { tag_ub };
        let engines = (0..streams.len())
            .map(|j| {
                let sources = endpoints.sources(j, &counts).into_boxed_slice();
                match endpoints.layout {
                    Layout::Streams if endpoints.on_dedicated() => MatchingEngine::new(sources, None, true),
                    Layout::Streams => MatchingEngine::new(sources, reserved(j), false),
                    Layout::Pooled => MatchingEngine::new(sources, None, false),
                }
            })
            .collect();
        let send_routes = endpoints.send_table(&counts, streams.len());
        Multiplex {
            comm,
            rank,
            send_routes,
            counts,
            width,
            tag_ub,
            max_tag,
            streams,
            endpoints,
            engines,
            pending: AtomicUsize::new(0),
            freed: AtomicBool::new(false),
            release_scheduled: AtomicBool::new(false),
            released: AtomicBool::new(false),
        }
    }

    fn size(&self) -> c_int {
        self.counts.len() as c_int
    }

    /// The claim of local index `i`'s reserved endpoint, where its traffic runs on one (a call on the
    /// index is inside it, as any call on a stream communicator). `call` on hidden communicator
    /// `hidden`: what the tools library's check is told if another thread is inside the endpoint
    /// (`tools_link::tools_contended`; `MPI_COMM_NULL`: nothing).
    #[inline(always)]
    pub fn claim_index(
        &self,
        i: c_int,
        hidden: MPI_Comm,
        call: &'static std::ffi::CStr,
    ) -> Option<crate::streams::Claim<'static>> {
        let slot = self.engines.get(i as u32 as usize)?.endpoint?;
        Some(slot.claim_reporting(|| {
            if hidden != MPI_COMM_NULL {
                crate::tools_link::tools_contended(hidden, call)
            }
        }))
    }

    /// Whether the indexed traffic of this communicator runs on the streams' own endpoints.
    pub fn on_streams(&self) -> bool {
        self.endpoints.layout == Layout::Streams
    }
}

/// Stops the multiplex progress thread and joins the idup threads, then forgets every multiplex
/// communicator (before `PMPI_Finalize`).
pub fn shutdown() {
    progress::stop();
    idup::join_all();
    registry::clear();
}

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
            Endpoints::fake(Layout::Pooled, 0, counts.len(), width as usize),
            &|_| None,
        )
    }

    #[test]
    fn tags_round_trip_within_tag_ub() {
        let m = mx(&[3, 1, 0], 3, 268_435_455);
        assert_eq!(m.width, 3);
        assert_eq!(m.max_tag, (268_435_455 - 2) / 3);
        for &(tag, si) in &[(0, 0), (0, 2), (m.max_tag, 2), (12345, 1)] {
            let enc = tag * m.width + si;
            assert!(enc >= 0 && enc <= m.tag_ub);
            assert_eq!(endpoints::SourceIndex::InTag.decode(0, enc, m.width), (tag, si));
        }
        let solo = mx(&[1, 1], 1, 32767);
        assert_eq!(solo.max_tag, 32767);
        let none = mx(&[0, 0], 0, 32767);
        assert_eq!(none.width, 0);
        assert_eq!(none.engines.len(), 0);
    }
}

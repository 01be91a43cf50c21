//! What a request handle tells without a lookup: the pool (VCI) MPICH made it from and its index there
//! ([`RequestPools`]), and, on the explicit policy's streams, whether it is a send ([`SendMarks`]), so
//! that `MPI_Cancel` can keep a send away from native MPICH's cancel, which crashes on a stream
//! communicator (docs/native-defects.md, "MPI_Cancel of a send on a stream communicator"; the route:
//! `native_fixes::cancel`).
//!
//! Send marks: one bit per request handle of a reserved VCI's pool. A pool's bit field is made when
//! the policy gives a communicator a stream on that VCI (a communicator's creation, never a
//! communication call), zeroed: 2^19 bits (64 KiB) on MPICH 4.3 and 5.0. Every request the
//! application can cancel on a policy communicator is made by a call that writes its bit
//! (`MPI_Isend`, `Issend`, `Irsend` set it; `MPI_Irecv`, and the probes whose message `MPI_Imrecv`
//! turns into the receive, clear it: MPICH reuses a freed handle for the next request of the same
//! pool), all inside the stream's claim, so one thread at a time writes a pool's bits, and a plain
//! load and store do (no read-modify-write on the send path).
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// How MPICH writes into a request handle the pool the request came from, which is the VCI the
/// operation runs on (`MPIR_Request_create_from_pool`: a send from its sender's VCI, a receive from its
/// receiver's): so a request names its endpoint with no lookup. The one decoder is
/// `mpixstream_wrappers::handles::request_pool` (the tools library's too), with the layout of the MPICH
/// loaded; `crate::request_check` verifies it on the requests the library makes on its streams. Here
/// also the bits below the pool, which index a request within its pool (the send marks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPools(handles::RequestPools);

impl RequestPools {
    /// A build with one VCI (no reserved endpoints): every request is on VCI 0.
    pub const NONE: RequestPools = RequestPools(handles::RequestPools::None);

    /// The layout of MPICH `version` (`None`, or a build before 4.1: [`NONE`](Self::NONE)).
    pub fn of_mpich(version: Option<(u32, u32, u32)>) -> RequestPools {
        RequestPools(
            version
                .map_or(handles::RequestPools::None, |(major, minor, _)| handles::RequestPools::of_mpich(major, minor)),
        )
    }

    /// How many bits below the pool name a request within its pool (0: the handles carry no pool).
    pub fn index_bits(self) -> u32 {
        match self.0 {
            handles::RequestPools::None => 0,
            handles::RequestPools::Bits20 => 20,
            handles::RequestPools::Flagged => 19,
        }
    }

    /// Request `handle`'s block and index within its pool (the bits below the pool).
    #[inline(always)]
    pub fn index(self, handle: MPI_Request) -> usize {
        (handle as u32 & ((1u32 << self.index_bits()) - 1)) as usize
    }

    /// The pool (VCI) of request `handle`; 0 (no stream of ours) for handles that are not requests.
    #[inline(always)]
    pub fn pool(self, handle: MPI_Request) -> usize {
        handles::request_pool(handle, self.0).unwrap_or(0) as usize
    }
}

/// MPICH's largest number of VCIs (`MPIR_MAX_VCIS`: the request pools).
pub const MAX_VCIS: usize = 64;

/// Which requests of the policy's streams' pools are sends (module comment).
pub struct SendMarks {
    pools: RequestPools,
    /// The bits above a request's index within its pool (kind, object, flag, pool), and their value
    /// for a request of pool 0 (`note_on`: a request of the caller's pool in one comparison).
    above_index: u32,
    pool_base: u32,
    /// By VCI: one bit per request of that pool, set while the request is a send (made only for the
    /// VCIs of the policy's streams).
    by_vci: [OnceLock<Box<[AtomicU64]>>; MAX_VCIS],
}

impl SendMarks {
    pub fn new(pools: RequestPools) -> SendMarks {
        let bits = pools.index_bits();
        let above_index = if bits == 0 { 0 } else { !((1u32 << bits) - 1) };
        // An indirect request handle (MPICH 4.1-5.0: kind 0b11, object 0b1011); MPICH 4.3 and later also
        // flag a pooled request (bit 25).
        let flag = if pools == RequestPools(handles::RequestPools::Flagged) { 0x0200_0000 } else { 0 };
        SendMarks {
            pools,
            above_index,
            pool_base: 0xec00_0000 | flag,
            by_vci: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Makes VCI `vci`'s bit field if it has none yet (when a policy communicator gets a stream there).
    /// Nothing where MPICH writes no pool into request handles.
    pub fn prepare(&self, vci: usize) {
        let bits = self.pools.index_bits();
        if bits == 0 || vci == 0 || vci >= MAX_VCIS {
            return;
        }
        self.by_vci[vci].get_or_init(|| (0..(1usize << bits).div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
    }

    /// The word and bit of `request` in its pool's field, where that pool has one.
    #[inline(always)]
    fn place(&self, request: MPI_Request) -> Option<(&AtomicU64, u64)> {
        let field = self.by_vci[self.pools.pool(request)].get()?;
        let index = self.pools.index(request);
        Some((field.get(index / 64)?, 1u64 << (index % 64)))
    }

    /// Notes that `request` (just made, on its pool's stream, inside that stream's claim) is a send
    /// or not. Nothing for a request of a pool without a field (the implicit pool, completed requests
    /// MPICH makes from its built-in handles).
    #[inline(always)]
    pub fn note(&self, request: MPI_Request, send: bool) {
        if let Some((word, bit)) = self.place(request) {
            // Only the thread inside the stream's claim writes this pool's bits: load and store.
            let w = word.load(Ordering::Relaxed);
            let v = if send { w | bit } else { w & !bit };
            if v != w {
                word.store(v, Ordering::Relaxed);
            }
        }
    }

    /// [`note`](Self::note) of a request just made on VCI `vci`'s stream: the common case, a request
    /// from that VCI's pool, found with one comparison of the bits above its index instead of
    /// decoding its pool (the claim path's cost: benches/claim_cost.sh); anything else (a completed
    /// request from MPICH's built-in handles) through `note`.
    #[inline(always)]
    pub fn note_on(&self, vci: usize, request: MPI_Request, send: bool) {
        let h = request as u32;
        let expected = self.pool_base | ((vci as u32) << self.pools.index_bits());
        let field = if h & self.above_index == expected && self.above_index != 0 {
            self.by_vci.get(vci).and_then(|f| f.get())
        } else {
            None
        };
        let Some(field) = field else { return self.note(request, send) };
        let index = (h & !self.above_index) as usize;
        if let Some(word) = field.get(index / 64) {
            let bit = 1u64 << (index % 64);
            // Only the thread inside the stream's claim writes this pool's bits: load and store.
            let w = word.load(Ordering::Relaxed);
            let v = if send { w | bit } else { w & !bit };
            if v != w {
                word.store(v, Ordering::Relaxed);
            }
        }
    }

    /// Whether `request` was last noted as a send (asked inside the claim of its pool's stream).
    pub fn is_send(&self, request: MPI_Request) -> bool {
        self.place(request).is_some_and(|(word, bit)| word.load(Ordering::Relaxed) & bit != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle's bit follows the last request made under it; pools without a field, direct and
    /// built-in handles note nothing.
    #[test]
    fn a_reused_handle_takes_its_new_kind() {
        let v50 = |p: u32, block: u32, index: u32| {
            (0xec00_0000u32 | 0x0200_0000 | p << 19 | block << 12 | index) as MPI_Request
        };
        let marks = SendMarks::new(RequestPools::of_mpich(Some((5, 0, 2))));
        marks.prepare(2);
        let (a, b) = (v50(2, 0, 5), v50(2, 127, 1023));
        marks.note(a, true);
        marks.note(b, true);
        assert!(marks.is_send(a) && marks.is_send(b));
        assert!(!marks.is_send(v50(2, 0, 6)), "a neighbour's bit stays clear");
        assert!(!marks.is_send(v50(3, 0, 5)), "the same index in another pool is another request");
        marks.note(a, false);
        assert!(!marks.is_send(a), "the handle reused by a receive");
        assert!(marks.is_send(b));
        // A pool without a field (not a policy stream's): nothing noted.
        marks.note(v50(3, 0, 5), true);
        assert!(!marks.is_send(v50(3, 0, 5)));
        // Built-in and direct handles are pool 0, which never has a field.
        marks.prepare(0);
        marks.note(0x6c00_0000u32 as MPI_Request, true);
        assert!(!marks.is_send(0x6c00_0000u32 as MPI_Request));
        assert!(!marks.is_send(MPI_REQUEST_NULL));
        // note_on: the caller's pool in one comparison, the same bits as note; another pool's request
        // (or a built-in one) through note.
        let c = v50(2, 3, 7);
        marks.note_on(2, c, true);
        assert!(marks.is_send(c));
        marks.note_on(2, c, false);
        assert!(!marks.is_send(c));
        marks.note_on(3, c, true);
        assert!(marks.is_send(c), "a request of pool 2 noted while on VCI 3's stream: its own pool's bit");
        marks.note_on(2, 0x6c00_0000u32 as MPI_Request, true);
        assert!(!marks.is_send(0x6c00_0000u32 as MPI_Request));
        let v42 = |p: u32, index: u32| (0xec00_0000u32 | p << 20 | index) as MPI_Request;
        let bits20 = SendMarks::new(RequestPools::of_mpich(Some((4, 2, 0))));
        bits20.prepare(3);
        bits20.note_on(3, v42(3, 77), true);
        assert!(bits20.is_send(v42(3, 77)) && !bits20.is_send(v42(3, 78)));
        // No pools in the handles (MPICH 4.0): nothing is ever made.
        let none = SendMarks::new(RequestPools::NONE);
        none.prepare(1);
        none.note(v50(1, 0, 5), true);
        assert!(!none.is_send(v50(1, 0, 5)));
    }
}

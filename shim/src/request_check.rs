//! The request decoder (`streams::RequestPools`: MPICH's layout of the pool bits, by version) checked
//! against the MPICH loaded, on the first request the library itself makes on one of its streams (a
//! routed buffered send's `MPI_Isend_c`, a routed send-receive's `MPI_Irecv_c`): that request must decode
//! to that stream. A layout that does not (a later MPICH that moved the bits) would make the completion
//! calls claim the wrong endpoints; from then on the explicit policy gives no more streams
//! (`helper::serves_policy_streams`) and says so once on stderr.
//!
//! Cost: one relaxed load per request made there after the first check.
use crate::runtime::Runtime;
use crate::streams::StreamTable;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::{self, Kind, Object};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a request was checked.
static CHECKED: AtomicBool = AtomicBool::new(false);
/// Set when a request did not decode to its stream.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Whether `request`, just made on stream-table slot `slot`'s communicator, decodes to that slot (the
/// first real request only; later calls return at once).
pub fn verify(rt: &Runtime, slot: usize, request: MPI_Request) {
    if CHECKED.load(Ordering::Relaxed) {
        return;
    }
    // A request MPICH completed at once may be a predefined one, from no pool.
    if handles::kind(request) != Kind::Indirect || handles::object_bits(request) != Object::Request as u32 {
        return;
    }
    if !decodes_to(&rt.streams, slot, request) {
        BROKEN.store(true, Ordering::Release);
        mpixstream_wrappers::say!(
            "mpixstream: request 0x{:08x} made on stream {slot}'s endpoint does not decode to it with the layout \
             of MPICH {:?}: the explicit policy leaves every new communicator implicit",
            request as u32,
            rt.mpich_version,
        );
    }
    CHECKED.store(true, Ordering::Release);
}

fn decodes_to(streams: &StreamTable, slot: usize, request: MPI_Request) -> bool {
    streams.of_request(request) == Some(slot)
}

/// Whether request handles decode to their streams (true until a check found otherwise).
#[inline]
pub fn decodes() -> bool {
    !BROKEN.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::RequestPools;

    /// A request of MPICH 5.0's layout decodes to its stream with 5.0's layout, and not with 4.1's (the
    /// mismatch the check reports: a later MPICH that moved the bits).
    #[test]
    fn a_request_decodes_to_its_stream_only_with_its_mpichs_layout() {
        // An indirect request handle (kind 3, object 0xb) of pool 2 in 4.3's layout (flag bit 25).
        let request = (0xec00_0000u32 | 0x0200_0000 | 2 << 19 | 1 << 12 | 5) as MPI_Request;
        for (version, decodes) in [((5, 0, 2), true), ((4, 1, 3), false)] {
            let t = StreamTable::new(2, RequestPools::of_mpich(Some(version)));
            let a = t.allocate().unwrap();
            t.set_native(a, 0x7c00_0001, Some(2));
            assert_eq!(decodes_to(&t, a, request), decodes, "MPICH {version:?}");
            t.release(a);
        }
    }
}

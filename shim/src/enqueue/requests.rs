//! Request handles of `MPIX_Isend_enqueue`/`MPIX_Irecv_enqueue`, and the fixed table behind them.
//!
//! A handle is `0x2c000000 | stream << 20 | generation << 12 | slot`: MPICH's request object type
//! with the "invalid" handle kind (bits 30-31 = 0), so MPICH rejects it as an invalid request instead
//! of misreading it; the stream slot finds the engine, the table slot finds the request with one
//! index (no lookup), and the generation tells a live request from a stale handle of the slot's
//! previous user.
use super::ops::StatusDst;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::{self, Object, KIND_AND_OBJECT_MASK};

/// `0x2c000000`: MPICH's request object type with the "invalid" kind (`MPI_REQUEST_NULL`'s shape).
const BASE: u32 = handles::null(Object::Request) as u32;

/// Slots per stream (slot 0 is never used, so no counter is 0 and no handle is `MPI_REQUEST_NULL`).
pub const SLOTS: usize = 4096;
const SLOT_BITS: u32 = 12;

pub fn request_handle(stream: usize, n: u32) -> MPI_Request {
    (BASE | ((stream as u32 & 0x3f) << 20) | (n & 0xf_ffff)) as MPI_Request
}

/// The stream slot of a request handle of ours, or None.
pub fn request_stream(h: MPI_Request) -> Option<usize> {
    let u = h as u32;
    if u & KIND_AND_OBJECT_MASK != BASE || u & 0xf_ffff == 0 {
        return None;
    }
    Some(((u >> 20) & 0x3f) as usize)
}

/// (table slot, generation) of a handle of ours.
fn slot_of(h: MPI_Request) -> (usize, u8) {
    let n = h as u32 & 0xf_ffff;
    ((n & ((1 << SLOT_BITS) - 1)) as usize, (n >> SLOT_BITS) as u8)
}

/// What a request carries between `MPIX_I*_enqueue` and its wait.
pub struct Request<T> {
    pub seq: u32,
    pub done: bool,
    pub waited: bool,
    pub status: MPI_Status,
    /// Where `MPIX_Wait*_enqueue` wants the status.
    pub dst: StatusDst,
    /// What the queue kind keeps with it (CUDA: copies back to the device owed after the wait).
    pub extra: Option<T>,
}

struct Slot<T> {
    generation: u8,
    req: Option<Request<T>>,
}

/// The live requests of one stream: a fixed vector of slots and a free list, both allocated once.
pub struct RequestTable<T> {
    stream: usize,
    slots: Vec<Slot<T>>,
    free: Vec<u16>,
}

impl<T> RequestTable<T> {
    pub fn new(stream: usize) -> RequestTable<T> {
        RequestTable {
            stream,
            slots: (0..SLOTS).map(|_| Slot { generation: 0, req: None }).collect(),
            // Popped from the end: slot 1 first.
            free: (1..SLOTS as u16).rev().collect(),
        }
    }

    /// Stores `req` under a fresh handle; None when every slot is taken.
    pub fn insert(&mut self, req: Request<T>) -> Option<MPI_Request> {
        let i = self.free.pop()? as usize;
        let s = &mut self.slots[i];
        s.generation = s.generation.wrapping_add(1);
        s.req = Some(req);
        Some(request_handle(self.stream, (s.generation as u32) << SLOT_BITS | i as u32))
    }

    pub fn get_mut(&mut self, h: MPI_Request) -> Option<&mut Request<T>> {
        if request_stream(h) != Some(self.stream) {
            return None;
        }
        let (i, g) = slot_of(h);
        let s = self.slots.get_mut(i)?;
        if s.generation != g {
            return None;
        }
        s.req.as_mut()
    }

    pub fn remove(&mut self, h: MPI_Request) -> Option<Request<T>> {
        self.get_mut(h)?;
        let (i, _) = slot_of(h);
        let r = self.slots[i].req.take();
        self.free.push(i as u16);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(seq: u32) -> Request<()> {
        Request {
            seq,
            done: false,
            waited: false,
            status: super::super::ops::empty_status(),
            dst: StatusDst::NOWHERE,
            extra: None,
        }
    }

    #[test]
    fn request_handles_round_trip_and_differ_from_mpich() {
        for idx in [0usize, 1, 63] {
            for n in [1u32, 2, 0xf_ffff] {
                let h = request_handle(idx, n);
                assert_ne!(h, MPI_REQUEST_NULL);
                assert_eq!(request_stream(h), Some(idx));
                // MPICH's handle kind (bits 30-31) is "invalid": MPI_Wait rejects it cleanly.
                assert_eq!(handles::kind(h), handles::Kind::Invalid);
            }
        }
        assert_eq!(request_stream(MPI_REQUEST_NULL), None);
        // A real MPICH request (direct kind).
        assert_eq!(request_stream(0xac00_0001u32 as i32), None);
    }

    #[test]
    fn table_reuses_slots_and_rejects_stale_handles() {
        let mut t = RequestTable::new(5);
        let a = t.insert(req(1)).unwrap();
        assert_eq!(request_stream(a), Some(5));
        assert_eq!(t.get_mut(a).unwrap().seq, 1);
        assert_eq!(t.remove(a).unwrap().seq, 1);
        assert!(t.get_mut(a).is_none() && t.remove(a).is_none());
        // The slot comes back with a new generation: the old handle stays dead.
        let b = t.insert(req(2)).unwrap();
        assert_ne!(a, b);
        assert!(t.get_mut(a).is_none());
        assert_eq!(t.get_mut(b).unwrap().seq, 2);
        // Another stream's handle is not found.
        assert!(t.get_mut(request_handle(6, b as u32 & 0xf_ffff)).is_none());
        // SLOTS - 1 live requests at most, then a clean refusal.
        let mut n = 1;
        while t.insert(req(9)).is_some() {
            n += 1;
        }
        assert_eq!(n, SLOTS - 1);
    }
}

//! Incomplete operations per communicator of one queue-backed stream (`MPI_Comm_free` refuses while
//! any), counted without a lock on the completing side: the thread that runs the operations only
//! decrements the counter whose index the operation carries.
//!
//! A stream has few communicators, so a short fixed table of (communicator, count) slots. Slots are
//! assigned only by the enqueuing side, which the engine serialises (its order lock), so a slot's
//! communicator changes only while its count is zero, when no operation refers to it. More
//! communicators with work at once than slots: the rest share one locked list (`OVERFLOW`).
use mpixstream_wrappers::ffi::MPI_Comm;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;

const SLOTS: usize = 32;
/// The slot index of an operation counted in the overflow list.
pub const OVERFLOW: u16 = SLOTS as u16;

struct Slot {
    comm: AtomicI32,
    ops: AtomicU32,
}

pub struct CommCounts {
    slots: [Slot; SLOTS],
    overflow: Mutex<Vec<(MPI_Comm, u32)>>,
}

impl Default for CommCounts {
    fn default() -> CommCounts {
        CommCounts::new()
    }
}

impl CommCounts {
    pub fn new() -> CommCounts {
        CommCounts {
            slots: std::array::from_fn(|_| Slot { comm: AtomicI32::new(0), ops: AtomicU32::new(0) }),
            overflow: Mutex::new(Vec::new()),
        }
    }

    /// Counts one more operation on `comm`; returns the index `done` takes. The caller serialises
    /// calls to `add` (and `remove_added`) of one table.
    pub fn add(&self, comm: MPI_Comm) -> u16 {
        let mut free = None;
        for (i, s) in self.slots.iter().enumerate() {
            let busy = s.ops.load(Ordering::Acquire) > 0;
            if s.comm.load(Ordering::Relaxed) == comm && (busy || free.is_none()) {
                // The slot already counting `comm` (or, idle, the first candidate anyway).
                if busy {
                    s.ops.fetch_add(1, Ordering::AcqRel);
                    return i as u16;
                }
                free = Some(i);
            } else if !busy && free.is_none() {
                free = Some(i);
            }
        }
        match free {
            Some(i) => {
                let s = &self.slots[i];
                s.comm.store(comm, Ordering::Relaxed);
                s.ops.fetch_add(1, Ordering::AcqRel);
                i as u16
            }
            None => {
                let mut o = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
                match o.iter_mut().find(|(c, _)| *c == comm) {
                    Some((_, n)) => *n += 1,
                    None => o.push((comm, 1)),
                }
                OVERFLOW
            }
        }
    }

    /// One operation on `comm`, counted at index `slot`, is complete (or was never queued).
    pub fn done(&self, comm: MPI_Comm, slot: u16) {
        if slot < OVERFLOW {
            self.slots[slot as usize].ops.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let mut o = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = o.iter().position(|(c, _)| *c == comm) {
            o[i].1 -= 1;
            if o[i].1 == 0 {
                o.swap_remove(i);
            }
        }
    }

    /// Incomplete operations on `comm`.
    pub fn get(&self, comm: MPI_Comm) -> u32 {
        let mut in_slots = 0;
        for s in &self.slots {
            if s.comm.load(Ordering::Relaxed) != comm {
                continue;
            }
            let n = s.ops.load(Ordering::Acquire);
            // Read again after the count: a slot handed to another communicator meanwhile stored
            // its new communicator before counting (so a count seen here of the new one is seen
            // with the new communicator).
            if s.comm.load(Ordering::Relaxed) == comm {
                in_slots += n;
            }
        }
        let o = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
        in_slots + o.iter().find(|(c, _)| *c == comm).map_or(0, |(_, n)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_communicator_and_reuses_idle_slots() {
        let t = CommCounts::new();
        let a = t.add(5);
        let b = t.add(6);
        assert_ne!(a, b);
        assert_eq!(t.add(5), a, "a busy slot keeps counting its communicator");
        assert_eq!((t.get(5), t.get(6), t.get(7)), (2, 1, 0));
        t.done(5, a);
        t.done(5, a);
        assert_eq!(t.get(5), 0);
        // The idle slot goes to the next communicator; 6 keeps its own.
        let c = t.add(7);
        assert_eq!(c, a);
        assert_eq!((t.get(5), t.get(6), t.get(7)), (0, 1, 1));
    }

    #[test]
    fn more_communicators_than_slots_overflow_into_the_list() {
        let t = CommCounts::new();
        let slots: Vec<u16> = (0..SLOTS as i32).map(|c| t.add(100 + c)).collect();
        assert!(slots.iter().all(|&s| s < OVERFLOW));
        assert_eq!(t.add(1), OVERFLOW);
        assert_eq!(t.add(1), OVERFLOW);
        assert_eq!(t.get(1), 2);
        t.done(1, OVERFLOW);
        assert_eq!(t.get(1), 1);
        t.done(1, OVERFLOW);
        assert_eq!(t.get(1), 0);
        t.done(100, slots[0]);
        assert_eq!(t.add(1), slots[0], "a slot freed again is used before the list");
    }
}

//! The requests the tools library follows until they complete (a receive, for its size; any request on a
//! checked communicator; for the profile, one whose handle does not name its endpoint), keyed by MPICH's
//! request handle. Each handle has one slot, found by a multiplicative hash of the handle (no probing):
//! a slot is written under its own version number (odd while a writer holds it) and read without any
//! write (the version read before and after the fields must agree), so a lookup is a few loads and an
//! insert or removal one compare-and-swap. A handle whose slot holds another live request goes to a
//! sharded map beside the slots, consulted only while it holds something.
//!
//! MPICH hands a freed request handle out again at once: inserting a handle replaces whatever entry it
//! still has, and a completion removes an entry only if it is its own (`seq`).
use crate::handle_map::HandleMap;
use crate::state::{CommRec, ReqInfo};
use mpixstream_wrappers::ffi::MPI_Request;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

const BITS: u32 = 14;
const SLOTS: usize = 1 << BITS;
/// The key of an empty slot (a handle's key has bit 32 set).
const EMPTY: u64 = 0;
const RECV: u64 = 1;
const PERSISTENT: u64 = 2;

#[repr(align(64))]
#[derive(Default)]
struct Slot {
    version: AtomicU64,
    key: AtomicU64,
    rec: RecCell,
    flags: AtomicU64,
    seq: AtomicU64,
}

/// A record reference in an atomic word: only a `&'static CommRec` goes in (null until the first),
/// so what comes out is one.
#[derive(Default)]
struct RecCell(AtomicPtr<CommRec>);

impl RecCell {
    #[inline]
    fn store(&self, rec: &'static CommRec) {
        self.0.store(rec as *const CommRec as *mut CommRec, Ordering::Relaxed);
    }

    #[inline]
    fn load(&self) -> Option<&'static CommRec> {
        let p = self.0.load(Ordering::Relaxed);
        // SAFETY: `p` is null or was stored by `store` from a `&'static CommRec` (the only writer), a
        // record alive for the rest of the process; shared references to it are what `ReqInfo` holds.
        unsafe { p.as_ref() }
    }
}

fn key(h: MPI_Request) -> u64 {
    (h as u32 as u64) | 1 << 32
}

fn index(h: MPI_Request) -> usize {
    ((h as u32).wrapping_mul(0x9E37_79B1) >> (32 - BITS)) as usize
}

static REQUESTS: OnceLock<RequestTable> = OnceLock::new();

/// The process's table.
pub fn requests() -> &'static RequestTable {
    REQUESTS.get_or_init(RequestTable::default)
}

pub struct RequestTable {
    slots: Box<[Slot]>,
    overflow: HandleMap<ReqInfo>,
    /// Entries in `overflow` (read before touching it).
    in_overflow: AtomicUsize,
}

impl Default for RequestTable {
    fn default() -> Self {
        RequestTable {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            overflow: HandleMap::default(),
            in_overflow: AtomicUsize::new(0),
        }
    }
}

impl Slot {
    /// Runs `f` as the slot's one writer.
    #[inline]
    fn write<R>(&self, f: impl FnOnce(&Slot) -> R) -> R {
        let mut v = self.version.load(Ordering::Relaxed);
        loop {
            if v & 1 == 0 {
                match self.version.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(x) => v = x,
                }
            } else {
                std::hint::spin_loop();
                v = self.version.load(Ordering::Relaxed);
            }
        }
        fence(Ordering::Release);
        let r = f(self);
        self.version.store(v + 2, Ordering::Release);
        r
    }

    /// (key, entry) as one consistent snapshot; None for an empty slot.
    #[inline]
    fn read(&self) -> Option<(u64, ReqInfo)> {
        loop {
            let v = self.version.load(Ordering::Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let k = self.key.load(Ordering::Relaxed);
            let rec = self.rec.load();
            let flags = self.flags.load(Ordering::Relaxed);
            let seq = self.seq.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == v {
                // A key is only ever stored with its entry's fields, under the version: a key with no
                // record is an empty slot.
                let rec = rec.filter(|_| k != EMPTY)?;
                return Some((k, ReqInfo { rec, recv: flags & RECV != 0, persistent: flags & PERSISTENT != 0, seq }));
            }
        }
    }

    #[inline]
    fn set(&self, k: u64, info: ReqInfo) {
        self.key.store(k, Ordering::Relaxed);
        self.rec.store(info.rec);
        let flags = if info.recv { RECV } else { 0 } | if info.persistent { PERSISTENT } else { 0 };
        self.flags.store(flags, Ordering::Relaxed);
        self.seq.store(info.seq, Ordering::Relaxed);
    }
}

impl RequestTable {
    fn slot(&self, h: MPI_Request) -> &Slot {
        &self.slots[index(h)]
    }

    fn overflow_used(&self) -> bool {
        self.in_overflow.load(Ordering::Acquire) > 0
    }

    /// Follows `h` (replacing any entry it still has).
    pub fn insert(&self, h: MPI_Request, info: ReqInfo) {
        let k = key(h);
        let placed = self.slot(h).write(|s| {
            let cur = s.key.load(Ordering::Relaxed);
            let free = cur == EMPTY || cur == k;
            if free {
                s.set(k, info);
            }
            free
        });
        if placed {
            if self.overflow_used() && self.overflow.remove(&h).is_some() {
                self.in_overflow.fetch_sub(1, Ordering::AcqRel);
            }
        } else if self.overflow.insert(h, info).is_none() {
            self.in_overflow.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The entry of `h`, if it has one.
    #[inline]
    pub fn get(&self, h: MPI_Request) -> Option<ReqInfo> {
        if let Some((k, info)) = self.slot(h).read() {
            if k == key(h) {
                return Some(info);
            }
        }
        if self.overflow_used() {
            return self.overflow.get(&h).map(|e| *e);
        }
        None
    }

    /// Removes the entry of `h` if `keep` says so; returns it.
    fn remove_where(&self, h: MPI_Request, keep: impl Fn(&ReqInfo) -> bool) -> Option<ReqInfo> {
        let k = key(h);
        let slot = self.slot(h);
        // Nothing to write where the slot holds another handle (the common case for a new request).
        if slot.key.load(Ordering::Acquire) == k {
            let removed = slot.write(|s| {
                let info = s.snapshot().filter(|_| s.key.load(Ordering::Relaxed) == k)?;
                (!keep(&info)).then(|| {
                    s.key.store(EMPTY, Ordering::Relaxed);
                    info
                })
            });
            if removed.is_some() {
                return removed;
            }
        }
        if self.overflow_used() {
            if let Some((_, info)) = self.overflow.remove_if(&h, |_, v| !keep(v)) {
                self.in_overflow.fetch_sub(1, Ordering::AcqRel);
                return Some(info);
            }
        }
        None
    }

    /// Forgets `h` whatever its entry (a new request that is not followed: no stale entry may stay).
    #[inline]
    pub fn remove(&self, h: MPI_Request) -> Option<ReqInfo> {
        self.remove_where(h, |_| false)
    }

    /// Forgets `h` if its entry is the operation `seq`.
    #[inline]
    pub fn remove_own(&self, h: MPI_Request, seq: u64) {
        self.remove_where(h, |v| v.seq != seq);
    }
}

impl Slot {
    /// The fields as an entry, read by the slot's writer (`None` before the slot's first entry).
    fn snapshot(&self) -> Option<ReqInfo> {
        let rec = self.rec.load()?;
        let flags = self.flags.load(Ordering::Relaxed);
        Some(ReqInfo {
            rec,
            recv: flags & RECV != 0,
            persistent: flags & PERSISTENT != 0,
            seq: self.seq.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::CommRec;
    use mpixstream_wrappers::ffi::MPI_COMM_WORLD;

    fn info(seq: u64) -> ReqInfo {
        let rec: &'static CommRec = Box::leak(Box::new(CommRec::for_test(MPI_COMM_WORLD)));
        ReqInfo { rec, recv: seq.is_multiple_of(2), persistent: false, seq }
    }

    #[test]
    fn entries_come_back_and_a_completion_removes_only_its_own() {
        let t = RequestTable::default();
        let h = 0xac00_0003u32 as i32;
        t.insert(h, info(2));
        assert_eq!(t.get(h).map(|i| (i.seq, i.recv)), Some((2, true)));
        // MPICH handed h out again: the new entry replaces the stale one, whose completion then finds
        // nothing of its own to remove.
        t.insert(h, info(3));
        t.remove_own(h, 2);
        assert_eq!(t.get(h).map(|i| i.seq), Some(3));
        t.remove_own(h, 3);
        assert!(t.get(h).is_none());
        // A new request nobody follows clears its handle's entry.
        t.insert(h, info(4));
        assert_eq!(t.remove(h).map(|i| i.seq), Some(4));
        assert!(t.get(h).is_none());
    }

    #[test]
    fn handles_sharing_a_slot_both_stay() {
        let t = RequestTable::default();
        let a = 0xac00_0001u32 as i32;
        // Another handle with the same slot.
        let b = (1..u32::MAX).map(|i| (0xec00_0000u32 | i) as i32).find(|&b| index(b) == index(a) && b != a).unwrap();
        t.insert(a, info(10));
        t.insert(b, info(11));
        assert_eq!(t.in_overflow.load(Ordering::Relaxed), 1);
        assert_eq!((t.get(a).map(|i| i.seq), t.get(b).map(|i| i.seq)), (Some(10), Some(11)));
        t.remove_own(a, 10);
        assert_eq!(t.get(b).map(|i| i.seq), Some(11));
        // b's slot is free now: inserting it again moves it there and drops its overflow entry.
        t.insert(b, info(13));
        assert_eq!(t.in_overflow.load(Ordering::Relaxed), 0);
        assert_eq!(t.get(b).map(|i| i.seq), Some(13));
    }

    #[test]
    fn threads_insert_look_up_and_remove_at_once() {
        let t: &'static RequestTable = Box::leak(Box::default());
        let hs: Vec<_> = (0..4u32)
            .map(|k| {
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        let h = (0xec00_0000u32 | (k << 16) | (i % 512)) as i32;
                        let seq = ((k as u64) << 32) | i as u64;
                        t.insert(h, info(seq));
                        assert_eq!(t.get(h).map(|x| x.seq), Some(seq));
                        t.remove_own(h, seq);
                        assert!(t.get(h).is_none());
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(t.in_overflow.load(Ordering::Relaxed), 0);
    }
}

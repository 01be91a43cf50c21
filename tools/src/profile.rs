//! The contention profile (part of the report): per endpoint, which threads were inside MPI calls on
//! it, for how long, and for how long two or more threads were inside it at once; per thread, its
//! calls, its time inside MPI and how many of its calls found another thread already inside the same
//! endpoint; and the last calls of each thread, for the timeline.
//!
//! An endpoint is a slot: slots below [`NAMED`] are the endpoints of those numbers (MPICH's VCIs,
//! Intel MPI's thread-split endpoints); the others stand for endpoints whose number is unknown, one per
//! communicator ([`unnamed`]).
//!
//! Cost per call: two timestamps (`clock`), a compare-and-swap on the endpoint's state when the call
//! enters and one when it leaves, plain stores into the calling thread's own counters and timeline. No
//! lock, no allocation, no lookup: the slot is an index. An endpoint's state packs the number of
//! threads inside with the time of its last change, so each change adds the time since the last one to
//! the overlap (two or more inside) exactly, whatever the interleaving. The busy time (one or more
//! inside) is the threads' time inside less the excess counted while two or more were inside (the
//! integral of threads inside beyond one), so a thread alone on its endpoint adds nothing else.
use crate::clock;
use crate::thread::thread_id;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

pub type Slot = u16;
pub const SLOTS: usize = 256;
/// Slots `0..NAMED` are numbered endpoints; the rest are unnamed ones.
pub const NAMED: usize = 128;
/// Calls kept per thread for the timeline (the last ones).
pub const TIMELINE: usize = 4096;

const OCC_BITS: u32 = 10;
const OCC_MASK: u64 = (1 << OCC_BITS) - 1;
const TIME_MASK: u64 = (1 << (64 - OCC_BITS)) - 1;

/// One endpoint: threads inside and the time of the last change, packed; the time two or more were
/// inside, and the excess (the integral of threads inside beyond the first).
#[repr(align(64))]
pub struct Endpoint {
    state: AtomicU64,
    overlap: AtomicU64,
    excess: AtomicU64,
    /// Entries that found another thread inside: a call that sees it move while inside met another.
    meetings: AtomicU64,
}

impl Endpoint {
    const fn new() -> Endpoint {
        Endpoint {
            state: AtomicU64::new(0),
            overlap: AtomicU64::new(0),
            excess: AtomicU64::new(0),
            meetings: AtomicU64::new(0),
        }
    }

    /// One thread enters (`up`) or leaves at `now` (ticks since the clock's origin); returns how many
    /// were inside before.
    #[inline]
    fn change(&self, now: u64, up: bool) -> u64 {
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            let (inside, last) = (old & OCC_MASK, old >> OCC_BITS);
            // Timestamps of two threads may arrive out of order: time never runs back here.
            let at = (now & TIME_MASK).max(last);
            let next = if up { (inside + 1).min(OCC_MASK) } else { inside.saturating_sub(1) };
            match self.state.compare_exchange_weak(old, (at << OCC_BITS) | next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let span = at - last;
                    if inside >= 2 && span > 0 {
                        self.overlap.fetch_add(span, Ordering::Relaxed);
                        self.excess.fetch_add((inside - 1) * span, Ordering::Relaxed);
                    }
                    return inside;
                }
                Err(x) => old = x,
            }
        }
    }

    /// (busy ticks, overlap ticks), given the threads' time inside it (`inside_ticks`, summed).
    pub fn times(&self, inside_ticks: u64) -> (u64, u64) {
        let overlap = self.overlap.load(Ordering::Relaxed);
        (inside_ticks.saturating_sub(self.excess.load(Ordering::Relaxed)).max(overlap), overlap)
    }
}

static ENDPOINTS: [Endpoint; SLOTS] = [const { Endpoint::new() }; SLOTS];
static NEXT_UNNAMED: AtomicU16 = AtomicU16::new(NAMED as u16);
static ON: AtomicBool = AtomicBool::new(false);
static RAN: AtomicBool = AtomicBool::new(false);

pub fn endpoint(slot: Slot) -> &'static Endpoint {
    &ENDPOINTS[slot as usize]
}

/// The slot of numbered endpoint `n` (an unnamed one past the numbered slots).
pub fn named(n: u32) -> Slot {
    if (n as usize) < NAMED {
        n as Slot
    } else {
        unnamed()
    }
}

/// A slot for an endpoint whose number is unknown; the last one is shared once they run out.
pub fn unnamed() -> Slot {
    next_unnamed(&NEXT_UNNAMED)
}

/// The next unnamed slot of `counter` (which starts at `NAMED`).
fn next_unnamed(counter: &AtomicU16) -> Slot {
    // Saturating at SLOTS: a wrapping count would hand out named slots after 65,536 communicators.
    let s = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| (s < SLOTS as u16).then(|| s + 1));
    s.unwrap_or_else(|full| full).min((SLOTS - 1) as u16)
}

/// Slots handed out so far (the report's range).
pub fn used() -> usize {
    (NEXT_UNNAMED.load(Ordering::Relaxed) as usize).min(SLOTS)
}

/// One thread's calls on one endpoint. Written by the thread alone (plain loads and stores), read by
/// the report.
#[derive(Default)]
pub struct Usage {
    pub calls: AtomicU64,
    pub ticks: AtomicU64,
    /// Calls that found another thread inside the endpoint when they entered.
    pub contended: AtomicU64,
    /// Calls that met another thread inside the endpoint: found one there, or one came in while inside
    /// (the guided policy's evidence, the same for both threads of a meeting).
    pub met: AtomicU64,
}

/// One call of the timeline (ticks since the clock's origin).
#[derive(Clone, Copy, Default)]
pub struct Event {
    pub start: u64,
    pub end: u64,
    pub slot: Slot,
    pub contended: bool,
}

/// A thread that made a profiled call: its usage per endpoint and its last calls.
pub struct ThreadProfile {
    pub tid: u32,
    /// Order of first profiled call on this rank (the report's thread number).
    pub index: u32,
    pub usage: [Usage; SLOTS],
    events: Box<[Cell<Event>]>,
    recorded: AtomicU64,
    /// Inside a profiled call already (a call made from inside another is not counted twice).
    inside: Cell<bool>,
    /// The thread set this thread last joined (a communicator's; most calls are on the same one).
    joined: Cell<*const ThreadSet>,
}

// SAFETY: the cells are written by the owning thread only (through `ME`, its own thread-local); the
// report reads them after every application thread has left MPI (at MPI_Finalize).
unsafe impl Sync for ThreadProfile {}

impl ThreadProfile {
    /// The last calls recorded, oldest first, and how many earlier ones were dropped.
    pub fn timeline(&self) -> (Vec<Event>, u64) {
        let n = self.recorded.load(Ordering::Acquire);
        let kept = (n as usize).min(TIMELINE);
        let first = n as usize - kept;
        ((first..n as usize).map(|i| self.events[i % TIMELINE].get()).collect(), first as u64)
    }

    #[inline]
    fn record(&self, e: Event) {
        let n = self.recorded.load(Ordering::Relaxed);
        self.events[n as usize % TIMELINE].set(e);
        self.recorded.store(n + 1, Ordering::Release);
    }
}

static THREADS: Mutex<Vec<&'static ThreadProfile>> = Mutex::new(Vec::new());

thread_local! {
    /// The calling thread is one of the lean library's own (a progress or engine thread: it says so when
    /// it starts, `mark_library_thread`): its calls are not the program's and are never profiled.
    static LIBRARY: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread is the lean library's: none of its calls is profiled, and it never counts as one
/// of the program's threads.
pub fn mark_library_thread() {
    LIBRARY.with(|l| l.set(true));
}
static THREAD_COUNT: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The calling thread's profile, a leaked box (never freed: the report reads it at the end).
    static ME: Cell<Option<&'static ThreadProfile>> = const { Cell::new(None) };
}

#[inline]
fn me() -> &'static ThreadProfile {
    ME.with(|m| m.get()).unwrap_or_else(register)
}

#[cold]
fn register() -> &'static ThreadProfile {
    let t: &'static ThreadProfile = Box::leak(Box::new(ThreadProfile {
        tid: thread_id(),
        index: THREAD_COUNT.fetch_add(1, Ordering::Relaxed),
        usage: std::array::from_fn(|_| Usage::default()),
        events: (0..TIMELINE).map(|_| Cell::new(Event::default())).collect(),
        recorded: AtomicU64::new(0),
        inside: Cell::new(false),
        joined: Cell::new(std::ptr::null()),
    }));
    THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    ME.with(|m| m.set(Some(t)));
    t
}

/// Every thread that made a profiled call, in order of its first.
pub fn threads() -> Vec<&'static ThreadProfile> {
    let mut v = THREADS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    v.sort_by_key(|t| t.index);
    v
}

/// The calling thread's number in the report (registering it).
pub fn my_index() -> u32 {
    me().index
}

pub fn start() {
    RAN.store(true, Ordering::Relaxed);
    ON.store(true, Ordering::Release);
}

/// Whether the profile ran in this process (the report then has its section).
pub fn ran() -> bool {
    RAN.load(Ordering::Relaxed)
}

pub fn stop() {
    ON.store(false, Ordering::Release);
}

#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// At most this many endpoints per call are profiled (a wait on requests of more endpoints counts on
/// the first ones).
const PER_CALL: usize = 4;

/// A call inside the endpoints it entered; leaves them when dropped.
pub struct Inside {
    me: Option<&'static ThreadProfile>,
    start: u64,
    n: u8,
    /// Each endpoint entered: whether another thread was inside, and its meetings count at the entry.
    slots: [(Slot, bool, u64); PER_CALL],
}

impl Inside {
    /// Nothing entered (the profile is off, or the call is inside another).
    #[inline]
    pub fn none() -> Inside {
        Inside { me: None, start: 0, n: 0, slots: [(0, false, 0); PER_CALL] }
    }
}

/// Enters the endpoints `slots` (each once) for one call of the calling thread.
#[inline]
pub fn enter(slots: impl IntoIterator<Item = Slot>) -> Inside {
    enter_as(slots, None)
}

/// Enters endpoint `slot` for a call on a communicator whose threads are `set` (the thread joins it).
#[inline]
pub fn enter_comm(slot: Slot, set: &ThreadSet) -> Inside {
    enter_as([slot], Some(set))
}

#[inline]
fn enter_as(slots: impl IntoIterator<Item = Slot>, set: Option<&ThreadSet>) -> Inside {
    if !on() || LIBRARY.with(Cell::get) {
        return Inside::none();
    }
    let me = me();
    if me.inside.get() {
        return Inside::none();
    }
    if let Some(set) = set {
        if !std::ptr::eq(me.joined.get(), set) {
            set.add(me.index);
            me.joined.set(set);
        }
    }
    me.inside.set(true);
    let start = clock::now().wrapping_sub(clock::origin());
    let mut inside = Inside { me: Some(me), start, n: 0, slots: [(0, false, 0); PER_CALL] };
    for s in slots {
        let n = inside.n as usize;
        if n < PER_CALL && inside.slots[..n].iter().all(|x| x.0 != s) {
            let e = &ENDPOINTS[s as usize];
            // Read before entering: any thread that enters after this one and finds it inside counts.
            let meetings = e.meetings.load(Ordering::Relaxed);
            let others = e.change(start, true);
            if others > 0 {
                e.meetings.fetch_add(1, Ordering::Relaxed);
            }
            inside.slots[n] = (s, others > 0, meetings);
            inside.n += 1;
        }
    }
    inside
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        let Some(me) = self.me else { return };
        let end = clock::now().wrapping_sub(clock::origin()).max(self.start);
        for &(s, contended, meetings) in &self.slots[..self.n as usize] {
            let e = &ENDPOINTS[s as usize];
            // Met: found another inside, or another entry found others inside meanwhile (this one's own
            // entry moved the count by one where it was contended).
            let met = contended || e.meetings.load(Ordering::Relaxed) > meetings;
            e.change(end, false);
            let u = &me.usage[s as usize];
            // Written by this thread alone: no read-modify-write needed.
            u.calls.store(u.calls.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            u.ticks.store(u.ticks.load(Ordering::Relaxed) + (end - self.start), Ordering::Relaxed);
            if contended {
                u.contended.store(u.contended.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            if met {
                u.met.store(u.met.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            me.record(Event { start: self.start, end, slot: s, contended });
        }
        me.inside.set(false);
    }
}

/// The threads of one communicator: a few slots of thread numbers, and whether more came.
#[derive(Default)]
pub struct ThreadSet {
    slots: [AtomicU32; 8],
    more: AtomicBool,
}

impl ThreadSet {
    /// Adds thread number `index` (kept as `index + 1`; 0 is a free slot).
    #[inline]
    fn add(&self, index: u32) {
        let me = index + 1;
        for s in &self.slots {
            match s.load(Ordering::Relaxed) {
                x if x == me => return,
                0 => match s.compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return,
                    Err(x) if x == me => return,
                    Err(_) => continue,
                },
                _ => continue,
            }
        }
        self.more.store(true, Ordering::Relaxed);
    }

    /// The thread numbers, and whether some did not fit.
    pub fn list(&self) -> (Vec<u32>, bool) {
        let mut v: Vec<u32> =
            self.slots.iter().map(|s| s.load(Ordering::Relaxed)).filter(|&x| x != 0).map(|x| x - 1).collect();
        v.sort_unstable();
        (v, self.more.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_the_time_two_were_inside() {
        let e = Endpoint::new();
        // A inside 0..25, B inside 10..30 (45 ticks inside together): busy 30, overlap 15.
        assert_eq!(e.change(0, true), 0);
        assert_eq!(e.change(10, true), 1);
        assert_eq!(e.change(25, false), 2);
        assert_eq!(e.change(30, false), 1);
        assert_eq!(e.times(45), (30, 15));
        // In turns (two more calls of 10): nothing overlaps.
        e.change(40, true);
        e.change(50, false);
        e.change(50, true);
        e.change(60, false);
        assert_eq!(e.times(65), (50, 15));
        // A timestamp older than the last change counts from the last change (never backwards): calls
        // 100..120 and 90(->100)..130, overlap 20.
        e.change(100, true);
        e.change(90, true);
        e.change(120, false);
        e.change(130, false);
        assert_eq!(e.times(65 + 20 + 30), (80, 35));
        // Three inside at once for 10: overlap 10, busy 10 (30 ticks inside together).
        let e = Endpoint::new();
        for _ in 0..3 {
            e.change(0, true);
        }
        for _ in 0..3 {
            e.change(10, false);
        }
        assert_eq!(e.times(30), (10, 10));
    }

    #[test]
    fn threads_enter_and_leave_together() {
        start();
        clock::start();
        let slot = unnamed();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    b.wait();
                    let g = enter([slot]);
                    b.wait();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    drop(g);
                    me().usage[slot as usize].contended.load(Ordering::Relaxed)
                })
            })
            .collect();
        let contended: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        let inside: u64 = threads().iter().map(|t| t.usage[slot as usize].ticks.load(Ordering::Relaxed)).sum();
        let (busy, overlap) = endpoint(slot).times(inside);
        // Both were inside for about 5 ms together: one of the two found the other there, and both met.
        assert_eq!(contended, 1);
        let met: u64 = threads().iter().map(|t| t.usage[slot as usize].met.load(Ordering::Relaxed)).sum();
        assert_eq!(met, 2);
        assert!(overlap > 0 && overlap <= busy, "busy {busy} overlap {overlap}");
        let set = ThreadSet::default();
        drop(enter_comm(slot, &set));
        drop(enter_comm(slot, &set));
        assert_eq!(set.list().0.len(), 1);
    }

    #[test]
    fn a_library_thread_is_never_profiled() {
        start();
        clock::start();
        let slot = unnamed();
        let set = ThreadSet::default();
        let tid = std::thread::spawn(move || {
            mark_library_thread();
            let g = enter_comm(slot, &set);
            assert!(g.me.is_none(), "a library thread's call enters nothing");
            drop(g);
            assert_eq!(set.list().0.len(), 0, "nor joins the communicator's threads");
            thread_id()
        })
        .join()
        .unwrap();
        assert!(threads().iter().all(|t| t.tid != tid), "nor is it one of the profile's threads");
    }

    #[test]
    fn unnamed_slots_saturate_and_never_wrap_onto_named_ones() {
        let counter = AtomicU16::new(NAMED as u16);
        let first = next_unnamed(&counter);
        assert_eq!(first as usize, NAMED);
        // Past 65,536 requests a wrapping u16 would have come back to 0 (a named slot).
        for _ in 0..(u16::MAX as usize + 10) {
            let s = next_unnamed(&counter);
            assert!((NAMED..SLOTS).contains(&(s as usize)), "slot {s}");
        }
        assert_eq!(next_unnamed(&counter) as usize, SLOTS - 1);
        assert_eq!(counter.load(Ordering::Relaxed) as usize, SLOTS);
    }
}

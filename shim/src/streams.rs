//! The stream table: a stream handle is `0xbc000000 | index` (the look of native MPICH's direct handles)
//! and indexes a fixed vector of slots, sized by the pool at `MPI_Init`, so hot paths find a stream
//! with one bounds check and no lookup.
use crate::ownership::Endpoint;
pub use crate::ownership::{Claim, Presence};
use crate::thread::BackgroundThread;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

pub use crate::request_handles::RequestPools;
use crate::request_handles::{SendMarks, MAX_VCIS};
use mpixstream_wrappers::handles::{self, Kind, Object};

pub struct StreamSlot {
    in_use: AtomicBool,
    /// The native MPICH stream behind this one (native backend), else `MPIX_STREAM_NULL`.
    native: AtomicI32,
    /// Communicators that have this stream attached; the stream cannot be freed while non-zero.
    pub comms: AtomicU32,
    /// Operations registered on this stream and not yet complete (enqueue engine).
    pub pending: AtomicU32,
    /// Set when the explicit policy created the stream for one communicator (freed with it).
    pub policy_owned: AtomicBool,
    /// Set on a policy stream of a program that names `MPI_Cancel`: its nonblocking point-to-point
    /// calls note whether each request they make is a send (`native_fixes::cancel`).
    pub notes_sends: AtomicBool,
    /// MPICH's VCI of its reserved endpoint (native backend), else -1.
    vci: AtomicI32,
    /// `MPIX_Start_progress_thread`'s thread on this stream.
    pub progress: Mutex<Option<BackgroundThread>>,
    /// The thread of ours registered as the stream's driver (a [`Driver`], 0 for none): what
    /// `MPIX_Stream_progress` and `MPIX_Start_progress_thread` refuse with a clear error.
    driver: AtomicU8,
    /// The endpoint's ownership (`ownership::Endpoint`): the token of the one thread inside it now. A
    /// native stream's reserved VCI has no lock in MPICH, so every path that may enter it (the
    /// application's calls on its communicators and waits on its requests, our routes, progress
    /// threads, engines, the progress helper) claims it first (docs/architecture.md, "Ownership"); its
    /// claim count tells the progress helper whether the owner entered it since its previous look, is
    /// blocked inside it, or is away ([`Presence`]); its holds, which orphans still need it.
    endpoint: Endpoint,
}

/// Who is registered as a stream's driver besides the application's own calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Driver {
    /// `MPIX_Start_progress_thread`'s thread, until `MPIX_Stop_progress_thread`.
    ProgressThread = 2,
    /// The enqueue engine of a queue-backed stream, for the stream's life.
    Engine = 3,
}

impl Driver {
    fn from_u8(v: u8) -> Option<Driver> {
        match v {
            2 => Some(Driver::ProgressThread),
            3 => Some(Driver::Engine),
            _ => None,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Driver::ProgressThread => "its progress thread (MPIX_Start_progress_thread)",
            Driver::Engine => "its enqueue engine thread",
        }
    }
}

/// The calling thread's token: its thread pointer, unique among live threads and never 0, valid while
/// the thread exits (`os::thread_pointer`).
#[inline(always)]
pub fn thread_token() -> usize {
    mpixstream_wrappers::os::thread_pointer()
}

/// The claims of several endpoints at once (a completion call on requests of several streams), as a
/// bit set of slots, taken in ascending order so that two threads claiming overlapping sets never wait
/// for each other in a cycle; released (those taken here, not nested ones) when dropped. No allocation.
#[must_use]
pub struct ClaimSet<'a> {
    table: &'a StreamTable,
    outermost: u64,
}

impl Drop for ClaimSet<'_> {
    fn drop(&mut self) {
        let mut bits = self.outermost;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            self.table.slots[i].endpoint.leave();
            bits &= bits - 1;
        }
    }
}

impl StreamSlot {
    fn new() -> StreamSlot {
        StreamSlot {
            in_use: AtomicBool::new(false),
            native: AtomicI32::new(MPIX_STREAM_NULL),
            comms: AtomicU32::new(0),
            pending: AtomicU32::new(0),
            policy_owned: AtomicBool::new(false),
            notes_sends: AtomicBool::new(false),
            vci: AtomicI32::new(-1),
            progress: Mutex::new(None),
            driver: AtomicU8::new(0),
            endpoint: Endpoint::new(),
        }
    }

    #[inline]
    pub fn native(&self) -> MPIX_Stream {
        self.native.load(Ordering::Acquire)
    }

    /// Takes the endpoint for the calling thread, waiting while another thread is inside it. Whoever
    /// is inside leaves soon: the progress helper holds an endpoint for one progress turn, and the only
    /// other holder is a call on the stream's own communicators, which the stream model gives one
    /// thread at a time.
    #[inline]
    pub fn claim(&self) -> Claim<'_> {
        self.endpoint.claim(thread_token())
    }

    /// [`claim`](Self::claim), calling `contended` once if another thread is inside the endpoint (the
    /// tools library's check then decides whether that is a violation).
    #[inline]
    pub fn claim_reporting(&self, contended: impl FnOnce()) -> Claim<'_> {
        self.endpoint.claim_reporting(thread_token(), contended)
    }

    /// Takes the endpoint now or never: `None` while another thread is inside it. The calling thread
    /// may already own it further up its stack (a route of ours inside the owner's own call): then the
    /// claim nests. Callers run outside MPICH (never from a callback MPICH runs inside an endpoint's
    /// progress), so nesting never re-enters an endpoint's progress.
    #[inline]
    pub fn try_claim(&self) -> Option<Claim<'_>> {
        self.endpoint.try_claim(thread_token())
    }

    /// The endpoint's ownership (the orphans' turns claim it through this).
    #[inline]
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// What the progress helper sees of the endpoint's use since its previous look (`seen`: the claim
    /// count then, updated here).
    pub fn presence(&self, seen: &mut u32) -> Presence {
        self.endpoint.presence(seen)
    }

    /// The claim count now (the progress helper's look after its own turn).
    pub fn claim_count(&self) -> u32 {
        self.endpoint.claim_count()
    }

    /// Whether the stream has a reserved endpoint of its own (native backend).
    #[inline]
    pub fn has_endpoint(&self) -> bool {
        self.vci.load(Ordering::Acquire) >= 0
    }

    /// MPICH's VCI of the stream's reserved endpoint, if it has one.
    #[inline(always)]
    pub fn vci(&self) -> Option<usize> {
        usize::try_from(self.vci.load(Ordering::Relaxed)).ok()
    }

    /// Whether some thread is inside the endpoint right now (a snapshot, for reports and tests).
    pub fn owned(&self) -> bool {
        self.endpoint.owned()
    }

    /// Registers a thread of ours as the stream's driver until [`release_driver`](Self::release_driver);
    /// `Err` names the one registered already.
    pub fn take_driver(&self, who: Driver) -> Result<(), Driver> {
        self.driver
            .compare_exchange(0, who as u8, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|current| Driver::from_u8(current).unwrap_or(who))
    }

    pub fn release_driver(&self, who: Driver) {
        let _ = self.driver.compare_exchange(who as u8, 0, Ordering::Release, Ordering::Relaxed);
    }

    /// The thread of ours registered as the stream's driver, if any.
    pub fn driver(&self) -> Option<Driver> {
        Driver::from_u8(self.driver.load(Ordering::Acquire))
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum LookupError {
    Null,
    /// Not a stream handle of ours at all.
    Invalid,
    /// A handle of ours whose stream has been freed.
    Freed,
}

impl LookupError {
    pub fn describe(&self, handle: MPIX_Stream) -> String {
        match self {
            LookupError::Null => "the stream is MPIX_STREAM_NULL".to_string(),
            LookupError::Invalid => format!("0x{:08x} is not a valid stream handle", handle as u32),
            LookupError::Freed => format!("stream 0x{:08x} has been freed", handle as u32),
        }
    }
}

pub struct StreamTable {
    slots: Box<[StreamSlot]>,
    /// Serialises create and free (never taken on a communication path).
    alloc: Mutex<()>,
    pools: RequestPools,
    /// By VCI: the slot + 1 of the stream whose endpoint it is (0: none of ours).
    by_vci: [AtomicU8; MAX_VCIS],
    /// Which requests of the policy's streams are sends (`MPI_Cancel`'s route).
    pub send_marks: SendMarks,
    /// Whether the program can cancel at all (it names `MPI_Cancel`: `program_scan::names_cancel`);
    /// else nothing is noted. True until the scan says otherwise.
    program_cancels: AtomicBool,
}

/// How many streams have a reserved endpoint now (the process has one stream table): while 0, nothing
/// needs a claim, and the completion interposers pass straight through after one relaxed load.
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// Whether any stream has a reserved endpoint (one relaxed load).
#[inline(always)]
pub fn any_reserved() -> bool {
    RESERVED.load(Ordering::Relaxed) != 0
}

impl StreamTable {
    pub fn new(capacity: usize, pools: RequestPools) -> StreamTable {
        StreamTable {
            slots: (0..capacity).map(|_| StreamSlot::new()).collect(),
            alloc: Mutex::new(()),
            pools,
            by_vci: std::array::from_fn(|_| AtomicU8::new(0)),
            send_marks: SendMarks::new(pools),
            program_cancels: AtomicBool::new(true),
        }
    }

    /// Records that stream `index` is native stream `native`, on MPICH's VCI `vci` where it has a
    /// reserved endpoint of its own (the native backend).
    pub fn set_native(&self, index: usize, native: MPIX_Stream, vci: Option<u32>) {
        let slot = &self.slots[index];
        slot.native.store(native, Ordering::Release);
        if let Some(v) = vci.map(|v| v as usize).filter(|&v| v < MAX_VCIS && index < u8::MAX as usize) {
            if slot.vci.swap(v as i32, Ordering::AcqRel) < 0 {
                RESERVED.fetch_add(1, Ordering::AcqRel);
            }
            self.by_vci[v].store(index as u8 + 1, Ordering::Release);
        }
    }

    /// Makes the send marks of stream `index`'s reserved endpoint, if it has one (a policy
    /// communicator got the stream: `comms::CommTable::insert`).
    pub fn prepare_send_marks(&self, index: usize) {
        if !self.program_cancels.load(Ordering::Acquire) {
            return;
        }
        let slot = &self.slots[index];
        if let Ok(vci) = usize::try_from(slot.vci.load(Ordering::Acquire)) {
            self.send_marks.prepare(vci);
            slot.notes_sends.store(true, Ordering::Release);
        }
    }

    /// What the program scan found at `MPI_Init`: whether the program names `MPI_Cancel` (a program
    /// that cannot cancel has nothing noted: the send marks' load and store leave its calls).
    pub fn set_program_cancels(&self, cancels: bool) {
        self.program_cancels.store(cancels, Ordering::Release);
    }

    /// Whether any stream has a reserved endpoint (one relaxed load: the completion calls' fast path).
    #[inline(always)]
    pub fn any_reserved(&self) -> bool {
        any_reserved()
    }

    /// Claims the endpoints of the slots in the bit set `slots` (slot `i` is bit `i`; the native
    /// backend's slots are below 64, as MPICH has at most 64 VCIs).
    pub fn claim_set(&self, slots: u64) -> ClaimSet<'_> {
        let mut outermost = 0;
        let mut bits = slots;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            if self.slots[i].claim().keep() {
                outermost |= 1 << i;
            }
            bits &= bits - 1;
        }
        ClaimSet { table: self, outermost }
    }

    /// The stream whose reserved endpoint request `handle` runs on, if any.
    #[inline(always)]
    pub fn of_request(&self, handle: MPI_Request) -> Option<usize> {
        (self.by_vci[self.pools.pool(handle)].load(Ordering::Acquire) as usize).checked_sub(1)
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Stream `index`'s handle: MPICH's direct stream handle of that index (`0xbc000000 | index`).
    pub fn handle(index: usize) -> MPIX_Stream {
        handles::make(Kind::Direct, Object::Stream, index as u32)
    }

    /// The slot of a live stream.
    #[inline]
    pub fn lookup(&self, handle: MPIX_Stream) -> Result<(usize, &StreamSlot), LookupError> {
        if handle == MPIX_STREAM_NULL {
            return Err(LookupError::Null);
        }
        let index = handles::direct_index(handle, Object::Stream).ok_or(LookupError::Invalid)? as usize;
        let slot = self.slots.get(index).ok_or(LookupError::Invalid)?;
        if !slot.in_use.load(Ordering::Acquire) {
            return Err(LookupError::Freed);
        }
        Ok((index, slot))
    }

    pub fn slot(&self, index: usize) -> &StreamSlot {
        &self.slots[index]
    }

    /// Takes a free slot, or None when the pool is exhausted.
    pub fn allocate(&self) -> Option<usize> {
        let _g = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        // A slot some orphan still polls under its claim is not handed to another stream (the orphan
        // would then enter the old endpoint under the new stream's claim).
        let index = self.slots.iter().position(|s| !s.in_use.load(Ordering::Acquire) && s.endpoint.reusable())?;
        let slot = &self.slots[index];
        slot.native.store(MPIX_STREAM_NULL, Ordering::Release);
        slot.comms.store(0, Ordering::Release);
        slot.pending.store(0, Ordering::Release);
        slot.policy_owned.store(false, Ordering::Release);
        slot.notes_sends.store(false, Ordering::Release);
        slot.driver.store(0, Ordering::Release);
        slot.in_use.store(true, Ordering::Release);
        Some(index)
    }

    pub fn release(&self, index: usize) {
        let _g = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &self.slots[index];
        let vci = slot.vci.swap(-1, Ordering::AcqRel);
        if vci >= 0 {
            let _ = self.by_vci[vci as usize].compare_exchange(index as u8 + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
            RESERVED.fetch_sub(1, Ordering::AcqRel);
        }
        slot.native.store(MPIX_STREAM_NULL, Ordering::Release);
        slot.in_use.store(false, Ordering::Release);
    }

    pub fn in_use(&self) -> usize {
        self.slots.iter().filter(|s| s.in_use.load(Ordering::Acquire)).count()
    }

    pub fn live(&self) -> impl Iterator<Item = (usize, &StreamSlot)> {
        self.slots.iter().enumerate().filter(|(_, s)| s.in_use.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_exhaust() {
        let t = StreamTable::new(2, RequestPools::NONE);
        let a = t.allocate().unwrap();
        let b = t.allocate().unwrap();
        assert_ne!(a, b);
        assert!(t.allocate().is_none());
        let ha = StreamTable::handle(a);
        assert_eq!(ha as u32 & 0xfc00_0000, 0xbc00_0000);
        assert_eq!(t.lookup(ha).unwrap().0, a);
        t.release(a);
        assert_eq!(t.lookup(ha).err().unwrap(), LookupError::Freed);
        assert_eq!(t.lookup(MPIX_STREAM_NULL).err().unwrap(), LookupError::Null);
        assert_eq!(t.lookup(0x1234).err().unwrap(), LookupError::Invalid);
        assert_eq!(t.lookup(StreamTable::handle(7)).err().unwrap(), LookupError::Invalid);
        assert_eq!(t.in_use(), 1);
    }

    #[test]
    fn a_driver_is_registered_once() {
        let t = StreamTable::new(1, RequestPools::NONE);
        let slot = t.slot(t.allocate().unwrap());
        slot.take_driver(Driver::ProgressThread).unwrap();
        assert_eq!(slot.take_driver(Driver::Engine), Err(Driver::ProgressThread));
        slot.release_driver(Driver::Engine); // not the registered one: no effect
        assert_eq!(slot.driver(), Some(Driver::ProgressThread));
        slot.release_driver(Driver::ProgressThread);
        assert_eq!(slot.driver(), None);
    }

    /// One thread inside an endpoint at a time: a claim excludes every other thread's claim and
    /// try-claim, nests for its own thread, and a try-claim fails while its own thread is inside.
    #[test]
    fn one_owner_at_a_time() {
        let t = std::sync::Arc::new(StreamTable::new(1, RequestPools::NONE));
        let i = t.allocate().unwrap();
        {
            let _outer = t.slot(i).claim();
            assert!(t.slot(i).owned());
            {
                let _nested = t.slot(i).claim();
            }
            assert!(t.slot(i).owned(), "a nested claim releases nothing");
            drop(t.slot(i).try_claim().expect("its own thread's try-claim nests"));
            assert!(t.slot(i).owned(), "a nested try-claim releases nothing");
            let t2 = t.clone();
            let other = std::thread::spawn(move || t2.slot(i).try_claim().is_none()).join().unwrap();
            assert!(other, "another thread's try-claim fails while the endpoint is owned");
        }
        assert!(!t.slot(i).owned());
        // Two threads incrementing a non-atomic counter under the claim lose no update.
        struct Shared(std::cell::UnsafeCell<u64>);
        // SAFETY: the test touches the cell only under the endpoint's claim, whose exclusion it checks.
        unsafe impl Sync for Shared {}
        let counter = std::sync::Arc::new(Shared(std::cell::UnsafeCell::new(0)));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (t, c) = (t.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let _claim = t.slot(i).claim();
                        // SAFETY: under the claim, no other thread touches the counter.
                        unsafe { *c.0.get() += 1 };
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
        // SAFETY: every worker has been joined.
        assert_eq!(unsafe { *counter.0.get() }, 80_000);
    }

    /// A claim set takes each endpoint once and releases only what it took.
    #[test]
    fn a_claim_set_releases_what_it_took() {
        let t = StreamTable::new(3, RequestPools::NONE);
        let (a, b, c) = (t.allocate().unwrap(), t.allocate().unwrap(), t.allocate().unwrap());
        let outer = t.slot(b).claim();
        {
            let _set = t.claim_set(1 << a | 1 << b);
            assert!(t.slot(a).owned() && t.slot(b).owned() && !t.slot(c).owned());
        }
        assert!(!t.slot(a).owned(), "taken by the set: released");
        assert!(t.slot(b).owned(), "nested in the outer claim: kept");
        drop(outer);
        assert!(!t.slot(b).owned());
    }

    /// A request names its endpoint by the pool bits MPICH writes into its handle.
    #[test]
    fn requests_name_their_endpoint() {
        // An indirect request handle (kind 3, object 0xb) of pool `p`, block 1, index 5.
        let v43 = |p: u32| (0xec00_0000u32 | 0x0200_0000 | p << 19 | 1 << 12 | 5) as MPI_Request;
        let v41 = |p: u32| (0xec00_0000u32 | p << 20 | 1 << 12 | 5) as MPI_Request;
        let new = RequestPools::of_mpich(Some((5, 0, 2)));
        assert_eq!(RequestPools::of_mpich(Some((4, 3, 2))), new);
        let old = RequestPools::of_mpich(Some((4, 1, 3)));
        assert_eq!(RequestPools::of_mpich(Some((4, 2, 3))), old);
        assert_eq!(RequestPools::of_mpich(Some((4, 0, 2))), RequestPools::NONE);
        for p in [0, 1, 7, 63] {
            assert_eq!(new.pool(v43(p)), p as usize);
            assert_eq!(old.pool(v41(p)), p as usize);
        }
        // Pool 0 on 4.3 has no flag; direct and built-in handles are pool 0.
        assert_eq!(new.pool((0xec00_0000u32 | 1 << 12 | 5) as MPI_Request), 0);
        assert_eq!(new.pool((0xac00_0003u32) as MPI_Request), 0);
        assert_eq!(old.pool(MPI_REQUEST_NULL), 0);
        assert_eq!(new.pool(MPI_REQUEST_NULL), 0);
        assert_eq!(RequestPools::NONE.pool(v43(5)), 0);

        let t = StreamTable::new(4, new);
        let a = t.allocate().unwrap();
        let b = t.allocate().unwrap();
        assert!(!t.any_reserved());
        t.set_native(a, 0x7c00_0001, Some(1));
        t.set_native(b, 0x7c00_0002, Some(2));
        assert!(t.any_reserved());
        assert_eq!((t.of_request(v43(1)), t.of_request(v43(2))), (Some(a), Some(b)));
        assert_eq!(t.of_request(v43(0)), None);
        assert_eq!(t.of_request(v43(3)), None);
        t.release(a);
        assert_eq!(t.of_request(v43(1)), None, "a freed stream's endpoint names nobody");
        t.release(b);
        assert!(!t.any_reserved());
    }
}

//! The flag words through which a CUDA stream and its driver thread talk: the stream only *writes*
//! "operation k is ready" and *waits for* "operation k is done"; the driver thread only reads the
//! first and writes the second. Nothing else crosses between them. (A host queue needs none: its
//! worker runs the operations itself.)
//!
//! Layout, 32-bit words (in pinned, device-mapped memory for a CUDA queue, so that
//! `cuStreamWriteValue32`/`cuStreamWaitValue32` reach them):
//! - word 0: `ready`, the sequence number of the last operation the queue reached (operations become
//!   ready in queue order, so one monotonic word says it for all of them);
//! - words 1..=RING: `done[k % RING]` = k once operation k is complete (operations complete out of
//!   order, so each has its own word; a word is reused by k + RING only after k completed, so the
//!   values in a word only grow);
//! - word RING + 1: `position`, the CUDA queue's marker of how far the stream has run (staging
//!   buffers are recycled behind it).
//!
//! Every comparison is cyclic (`(a - b) as i32 >= 0`), like `CU_STREAM_WAIT_VALUE_GEQ`, so sequence
//! numbers may wrap.
use mpixstream_wrappers::cuda::{DeviceWord, PinnedWords};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Operations that may be outstanding on one stream; the next one waits for a free word.
pub const RING: u32 = 4096;
/// Number of words in a flag block.
pub const WORDS: usize = RING as usize + 2;
pub const READY_WORD: usize = 0;
pub const POSITION_WORD: usize = RING as usize + 1;

/// `a` has reached `b`, cyclically.
#[inline]
pub fn reached(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

#[inline]
pub fn done_word(seq: u32) -> usize {
    1 + (seq % RING) as usize
}

/// The initial contents of a flag block: nothing ready, every done word one lap behind its first
/// user (so that it reads "free" for it and "not done" for it).
pub fn initial_word(i: usize) -> u32 {
    match i {
        READY_WORD | POSITION_WORD => 0,
        _ => {
            let slot = (i - 1) as u32;
            let first = if slot == 0 { RING } else { slot };
            first.wrapping_sub(RING)
        }
    }
}

/// Where the words live.
pub enum FlagMem {
    Heap(Box<[AtomicU32]>),
    /// Pinned, device-mapped host memory of a CUDA queue.
    Pinned(PinnedWords),
}

impl FlagMem {
    #[inline]
    fn words(&self) -> &[AtomicU32] {
        match self {
            FlagMem::Heap(w) => w,
            FlagMem::Pinned(p) => p.words(),
        }
    }
}

pub struct Flags {
    mem: FlagMem,
    /// Threads blocked in `wait_until` (a host function of the fallback mode, an application thread
    /// waiting for a free word).
    waiters: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
    /// The driver thread, unparked when an operation becomes ready or is submitted.
    engine: OnceLock<std::thread::Thread>,
}

impl Flags {
    pub fn on_heap() -> Flags {
        Flags::new(FlagMem::Heap((0..WORDS).map(|i| AtomicU32::new(initial_word(i))).collect()))
    }

    /// The words of `mem` (`WORDS` of them, initialised with `initial_word`).
    pub fn new(mem: FlagMem) -> Flags {
        assert_eq!(mem.words().len(), WORDS, "a flag block holds {WORDS} words");
        Flags { mem, waiters: AtomicU32::new(0), lock: Mutex::new(()), cv: Condvar::new(), engine: OnceLock::new() }
    }

    #[inline]
    pub fn word(&self, i: usize) -> &AtomicU32 {
        &self.mem.words()[i]
    }

    /// Word `i`'s device address, for a CUDA queue's block.
    pub fn device_word(&self, i: usize) -> Option<DeviceWord> {
        match &self.mem {
            FlagMem::Heap(_) => None,
            FlagMem::Pinned(p) => Some(p.device_word(i)),
        }
    }

    pub fn set_engine(&self, t: std::thread::Thread) {
        let _ = self.engine.set(t);
    }

    #[inline]
    pub fn wake_engine(&self) {
        if let Some(t) = self.engine.get() {
            t.unpark();
        }
    }

    #[inline]
    pub fn is_ready(&self, seq: u32) -> bool {
        reached(self.word(READY_WORD).load(Ordering::Acquire), seq)
    }

    #[inline]
    pub fn is_done(&self, seq: u32) -> bool {
        reached(self.word(done_word(seq)).load(Ordering::Acquire), seq)
    }

    /// Whether operation `seq` may take its done word (its predecessor in the word completed).
    #[inline]
    pub fn slot_free(&self, seq: u32) -> bool {
        reached(self.word(done_word(seq)).load(Ordering::Acquire), seq.wrapping_sub(RING))
    }

    /// "Operation `seq` is ready", from a host function of the CUDA fallback mode (with stream memory
    /// operations the GPU writes the word itself).
    pub fn signal_ready(&self, seq: u32) {
        self.word(READY_WORD).store(seq, Ordering::Release);
        self.wake_engine();
    }

    /// The driver thread's "operation `seq` is done".
    pub fn mark_done(&self, seq: u32) {
        self.word(done_word(seq)).store(seq, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    /// Blocks until `cond` holds (re-checked after every `mark_done`) or `give_up` is set. Spins for
    /// `spin` turns, then yields the core for up to `yield_for`, before sleeping: a wake-up through
    /// the condition variable costs a context switch, but spinning starves oversubscribed cores.
    pub fn wait_until(
        &self,
        cond: impl Fn(&Flags) -> bool,
        give_up: &AtomicBool,
        spin: u32,
        yield_for: Duration,
    ) -> bool {
        for _ in 0..spin {
            if cond(self) {
                return true;
            }
            std::hint::spin_loop();
        }
        if !yield_for.is_zero() {
            let start = std::time::Instant::now();
            while start.elapsed() < yield_for {
                if cond(self) {
                    return true;
                }
                std::thread::yield_now();
            }
        }
        if cond(self) {
            return true;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let ok = loop {
            if cond(self) {
                break true;
            }
            if give_up.load(Ordering::Acquire) {
                break false;
            }
            g = self.cv.wait_timeout(g, Duration::from_millis(50)).unwrap_or_else(|e| e.into_inner()).0;
        };
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    /// Wakes every thread in `wait_until` (so that it sees a `give_up` flag).
    pub fn wake_all(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_state_and_reuse() {
        let f = Flags::on_heap();
        for seq in [1u32, 2, RING - 1, RING, RING + 1] {
            assert!(!f.is_ready(seq));
        }
        for seq in 1..=RING {
            assert!(f.slot_free(seq), "seq {seq}");
            assert!(!f.is_done(seq), "seq {seq}");
        }
        // seq RING+1 shares word with 1: not free until 1 is done.
        assert!(!f.slot_free(RING + 1));
        f.mark_done(1);
        assert!(f.is_done(1));
        assert!(f.slot_free(RING + 1));
        assert!(!f.is_done(RING + 1));
        f.signal_ready(5);
        assert!(f.is_ready(1) && f.is_ready(5) && !f.is_ready(6));
    }

    #[test]
    fn wraps_cyclically() {
        assert!(reached(3, u32::MAX - 2));
        assert!(!reached(u32::MAX - 2, 3));
        let f = Flags::on_heap();
        let seq = u32::MAX - 1;
        f.word(done_word(seq)).store(seq.wrapping_sub(RING), Ordering::SeqCst);
        assert!(f.slot_free(seq) && !f.is_done(seq));
        f.mark_done(seq);
        assert!(f.is_done(seq));
        assert!(f.slot_free(seq.wrapping_add(RING)));
    }

    #[test]
    fn waiter_is_woken() {
        let f = std::sync::Arc::new(Flags::on_heap());
        let stop = AtomicBool::new(false);
        let g = f.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            g.mark_done(7);
        });
        assert!(f.wait_until(|f| f.is_done(7), &stop, 10, Duration::from_micros(10)));
        t.join().unwrap();
        stop.store(true, Ordering::Release);
        assert!(!f.wait_until(|f| f.is_done(8), &stop, 10, Duration::ZERO));
    }
}

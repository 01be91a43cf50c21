//! The stream table: a stream handle is `0xbc000000 | index` (the look of native MPICH's direct handles)
//! and indexes a fixed vector of slots, sized by the pool at `MPI_Init`, so hot paths find a stream
//! with one bounds check and no lookup.
use crate::thread::BackgroundThread;
use mpixstream_wrappers::ffi::*;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, Ordering};
use std::sync::Mutex;

use mpixstream_wrappers::handles::{self, Kind, Object};

pub struct StreamSlot {
    in_use: AtomicBool,
    /// The native MPICH stream behind this one (native backend), else `MPIX_STREAM_NULL`.
    pub native: AtomicI32,
    /// Communicators that have this stream attached; the stream cannot be freed while non-zero.
    pub comms: AtomicU32,
    /// Operations registered on this stream and not yet complete (enqueue engine).
    pub pending: AtomicU32,
    /// Set when the explicit policy created the stream for one communicator (freed with it).
    pub policy_owned: AtomicBool,
    /// The explicit policy's async thing is on this stream (`policy::progress_rule`): every progress
    /// turn of its endpoint runs the thing's poll on the driving thread, which also tests that thread's
    /// routed buffered messages (`native_fixes::buffered`).
    pub progress_rule_thing: AtomicBool,
    /// `MPIX_Start_progress_thread`'s thread on this stream.
    pub progress: Mutex<Option<BackgroundThread>>,
    /// Who drives the stream's endpoint now (a [`Driver`], 0 for nobody). A native stream's reserved VCI
    /// has no lock in MPICH, so two threads driving it at once would corrupt it silently: every driver
    /// of ours takes this first (docs/architecture.md, "Threads and endpoints").
    driver: AtomicU8,
}

/// Who drives a stream's endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Driver {
    /// A thread inside one of our calls (`MPIX_Stream_progress`, a native-fix interposer), for the
    /// duration of that call.
    Call = 1,
    /// `MPIX_Start_progress_thread`'s thread, until `MPIX_Stop_progress_thread`.
    ProgressThread = 2,
    /// The enqueue engine of a queue-backed stream, for the stream's life.
    Engine = 3,
}

impl Driver {
    fn from_u8(v: u8) -> Option<Driver> {
        match v {
            1 => Some(Driver::Call),
            2 => Some(Driver::ProgressThread),
            3 => Some(Driver::Engine),
            _ => None,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Driver::Call => "another thread's call (MPIX_Stream_progress or an operation on the stream's communicator)",
            Driver::ProgressThread => "its progress thread (MPIX_Start_progress_thread)",
            Driver::Engine => "its enqueue engine thread",
        }
    }
}

/// A [`Driver::Call`] claim, released when dropped.
pub struct CallClaim<'a>(&'a StreamSlot);

impl Drop for CallClaim<'_> {
    fn drop(&mut self) {
        self.0.driver.store(0, Ordering::Release);
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
            progress_rule_thing: AtomicBool::new(false),
            progress: Mutex::new(None),
            driver: AtomicU8::new(0),
        }
    }

    #[inline]
    pub fn native(&self) -> MPIX_Stream {
        self.native.load(Ordering::Acquire)
    }

    /// Claims the endpoint for the duration of one call; `Err` names who drives it now.
    #[inline]
    pub fn drive_for_call(&self) -> Result<CallClaim<'_>, Driver> {
        match self.driver.compare_exchange(0, Driver::Call as u8, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => Ok(CallClaim(self)),
            Err(current) => Err(Driver::from_u8(current).unwrap_or(Driver::Call)),
        }
    }

    /// Claims the endpoint for a thread of ours until [`release_driver`](Self::release_driver).
    pub fn take_driver(&self, who: Driver) -> Result<(), Driver> {
        self.driver
            .compare_exchange(0, who as u8, Ordering::Acquire, Ordering::Acquire)
            .map(|_| ())
            .map_err(|current| Driver::from_u8(current).unwrap_or(Driver::Call))
    }

    pub fn release_driver(&self, who: Driver) {
        let _ = self.driver.compare_exchange(who as u8, 0, Ordering::Release, Ordering::Relaxed);
    }

    /// Who drives the endpoint now.
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
}

impl StreamTable {
    pub fn new(capacity: usize) -> StreamTable {
        StreamTable { slots: (0..capacity).map(|_| StreamSlot::new()).collect(), alloc: Mutex::new(()) }
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
        let index = self.slots.iter().position(|s| !s.in_use.load(Ordering::Acquire))?;
        let slot = &self.slots[index];
        slot.native.store(MPIX_STREAM_NULL, Ordering::Release);
        slot.comms.store(0, Ordering::Release);
        slot.pending.store(0, Ordering::Release);
        slot.policy_owned.store(false, Ordering::Release);
        slot.progress_rule_thing.store(false, Ordering::Release);
        slot.driver.store(0, Ordering::Release);
        slot.in_use.store(true, Ordering::Release);
        Some(index)
    }

    pub fn release(&self, index: usize) {
        let _g = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        self.slots[index].in_use.store(false, Ordering::Release);
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
        let t = StreamTable::new(2);
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
    fn one_driver_at_a_time() {
        let t = StreamTable::new(1);
        let slot = t.slot(t.allocate().unwrap());
        {
            let _claim = slot.drive_for_call().unwrap();
            assert_eq!(slot.drive_for_call().err(), Some(Driver::Call));
            assert_eq!(slot.take_driver(Driver::ProgressThread), Err(Driver::Call));
        }
        slot.take_driver(Driver::ProgressThread).unwrap();
        assert_eq!(slot.drive_for_call().err(), Some(Driver::ProgressThread));
        slot.release_driver(Driver::Engine); // not the holder: no effect
        assert_eq!(slot.driver(), Some(Driver::ProgressThread));
        slot.release_driver(Driver::ProgressThread);
        assert!(slot.drive_for_call().is_ok());
    }
}

//! The engines of queue-backed streams, indexed by stream slot (the stream table's index: one bounds
//! check, no lookup). A lookup is one atomic load: no lock, no reference count on the enqueue path.
//!
//! Lifetime: an engine detached from its slot (`MPIX_Stream_free`, `MPI_Finalize`) stays allocated
//! until the slot gets its next engine, so a reference taken before the detach never dangles while
//! the stream could still be used correctly; only a program that enqueues on a stream it already
//! freed, and has since created another stream in the same slot, could still hold one, and that
//! program is erroneous.
use super::engine::QueueEngine;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

pub const MAX_STREAMS: usize = 64;

/// The engine of each slot, or null.
static CURRENT: [AtomicPtr<QueueEngine>; MAX_STREAMS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_STREAMS];

/// The owners: each slot's current engine, and the one detached last (kept alive, above).
struct Owned {
    current: Option<Box<QueueEngine>>,
    detached: Option<Box<QueueEngine>>,
}

static OWNED: Mutex<[Owned; MAX_STREAMS]> =
    Mutex::new([const { Owned { current: None, detached: None } }; MAX_STREAMS]);

/// The engine of stream slot `index`, if the stream is queue-backed.
#[inline]
pub fn engine(index: usize) -> Option<&'static QueueEngine> {
    // SAFETY: a non-null pointer is a boxed engine that stays allocated (module doc).
    unsafe { CURRENT.get(index)?.load(Ordering::Acquire).as_ref() }
}

/// Whether our engine drives stream slot `index` (then nobody else may).
pub fn drives(index: usize) -> bool {
    engine(index).is_some()
}

pub fn all() -> Vec<&'static QueueEngine> {
    (0..MAX_STREAMS).filter_map(engine).collect()
}

/// Gives slot `index` its engine (`Some`), or detaches the slot's engine (`None`).
pub fn set(index: usize, engine: Option<QueueEngine>) {
    if index >= MAX_STREAMS {
        return;
    }
    let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    let slot = &mut owned[index];
    match engine {
        Some(e) => {
            let boxed = Box::new(e);
            CURRENT[index].store(&*boxed as *const QueueEngine as *mut QueueEngine, Ordering::Release);
            // The engine detached before this one can go: its stream was freed before this one was
            // created.
            slot.detached = slot.current.replace(boxed);
        }
        None => {
            CURRENT[index].store(std::ptr::null_mut(), Ordering::Release);
            if let Some(old) = slot.current.take() {
                slot.detached = Some(old);
            }
        }
    }
}

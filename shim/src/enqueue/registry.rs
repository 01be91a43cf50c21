//! The engines of queue-backed streams, indexed by stream slot (the stream table's index: one bounds
//! check, no lookup). A lookup takes no lock: it counts itself among the slot's readers (one
//! uncontended atomic add, and a subtract when done) and loads the engine pointer.
//!
//! Lifetime: a lookup gives an [`EngineRef`], a guard. An engine replaced or detached
//! (`MPIX_Stream_create` of the slot's next stream, `MPIX_Stream_free`, `MPI_Finalize`) is unpublished
//! and retired. It is freed at a later change of the slot, and only when the slot has no reader then:
//! a reader counted itself before it loaded the pointer, so a count seen at zero after the engine was
//! unpublished means nobody holds it and nobody can find it again. (Not at once: dropping a host
//! queue joins its worker, which a finalize that gave up may have left in an application callback.)
use super::engine::QueueEngine;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

pub const MAX_STREAMS: usize = 64;

struct Slot {
    /// The engine, or null.
    current: AtomicPtr<QueueEngine>,
    /// Live `EngineRef`s of this slot (of its current engine or of one retired since).
    readers: AtomicU32,
}

static SLOTS: [Slot; MAX_STREAMS] =
    [const { Slot { current: AtomicPtr::new(std::ptr::null_mut()), readers: AtomicU32::new(0) } }; MAX_STREAMS];

/// The owners: each slot's current engine, and those unpublished while a reader was counted.
struct Owned {
    current: Option<Box<QueueEngine>>,
    /// Boxed: readers hold their addresses, which must not move with the vector.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<QueueEngine>>,
}

static OWNED: Mutex<[Owned; MAX_STREAMS]> =
    Mutex::new([const { Owned { current: None, retired: Vec::new() } }; MAX_STREAMS]);

/// A slot's engine, kept allocated while the guard lives (module doc).
pub struct EngineRef {
    slot: &'static Slot,
    engine: NonNull<QueueEngine>,
}

impl std::ops::Deref for EngineRef {
    type Target = QueueEngine;

    #[inline]
    fn deref(&self) -> &QueueEngine {
        // SAFETY: `engine` was loaded from `slot.current` after this guard counted itself in
        // `slot.readers`, and an engine is freed only once unpublished and then seen with no reader
        // (`set`); the count is released in `drop`, after every borrow of `self` ended.
        unsafe { self.engine.as_ref() }
    }
}

impl Drop for EngineRef {
    #[inline]
    fn drop(&mut self) {
        self.slot.readers.fetch_sub(1, Ordering::Release);
    }
}

/// The engine of stream slot `index`, if the stream is queue-backed.
#[inline]
pub fn engine(index: usize) -> Option<EngineRef> {
    let slot = SLOTS.get(index)?;
    // Counted before the load (both SeqCst, as `set`'s swap and check): see the module doc.
    slot.readers.fetch_add(1, Ordering::SeqCst);
    match NonNull::new(slot.current.load(Ordering::SeqCst)) {
        Some(engine) => Some(EngineRef { slot, engine }),
        None => {
            slot.readers.fetch_sub(1, Ordering::Release);
            None
        }
    }
}

/// Whether our engine drives stream slot `index` (then nobody else may).
pub fn drives(index: usize) -> bool {
    engine(index).is_some()
}

pub fn all() -> Vec<EngineRef> {
    (0..MAX_STREAMS).filter_map(engine).collect()
}

/// Gives slot `index` its engine (`Some`), or detaches the slot's engine (`None`).
pub fn set(index: usize, engine: Option<QueueEngine>) {
    if index >= MAX_STREAMS {
        return;
    }
    let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    let owner = &mut owned[index];
    let slot = &SLOTS[index];
    let new = engine.map(Box::new);
    let ptr = new.as_deref().map_or(std::ptr::null_mut(), |e| e as *const QueueEngine as *mut QueueEngine);
    slot.current.swap(ptr, Ordering::SeqCst);
    // Those retired before were unpublished before: with no reader now, no one holds one or can find
    // it again.
    if slot.readers.load(Ordering::SeqCst) == 0 {
        owner.retired.clear();
    }
    if let Some(old) = std::mem::replace(&mut owner.current, new) {
        owner.retired.push(old);
    }
}

//! The engines of queue-backed streams, indexed by stream slot (the stream table's index: one bounds
//! check, no lookup).
use super::engine::QueueEngine;
use std::sync::{Arc, OnceLock, RwLock};

pub const MAX_STREAMS: usize = 64;

type Slot = RwLock<Option<Arc<QueueEngine>>>;

fn slots() -> &'static [Slot] {
    static ENGINES: OnceLock<Box<[Slot]>> = OnceLock::new();
    ENGINES.get_or_init(|| (0..MAX_STREAMS).map(|_| RwLock::new(None)).collect())
}

/// The engine of stream slot `index`, if the stream is queue-backed.
#[inline]
pub fn engine(index: usize) -> Option<Arc<QueueEngine>> {
    slots().get(index)?.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether our engine drives stream slot `index` (then nobody else may).
pub fn drives(index: usize) -> bool {
    slots().get(index).is_some_and(|e| e.read().unwrap_or_else(|e| e.into_inner()).is_some())
}

pub fn all() -> Vec<Arc<QueueEngine>> {
    slots().iter().filter_map(|e| e.read().unwrap_or_else(|e| e.into_inner()).clone()).collect()
}

pub fn set(index: usize, engine: Option<Arc<QueueEngine>>) {
    if let Some(slot) = slots().get(index) {
        *slot.write().unwrap_or_else(|e| e.into_inner()) = engine;
    }
}

//! `MPIX_Start_progress_thread`: a background thread that drives one stream's progress until stopped,
//! each turn inside the stream's endpoint (`StreamSlot::claim`: the application's calls on the stream's
//! communicators and the thread's turns never overlap). The same code serves every backend (the
//! backend decides what "progress on this stream" means).
use crate::runtime::Runtime;
use crate::streams::StreamSlot;
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;

/// Starts the thread for stream `slot` (`None`: MPICH's global progress, on the implicit pool, which
/// needs no claim).
pub fn start(rt: &'static Runtime, slot: Option<&'static StreamSlot>) -> std::io::Result<BackgroundThread> {
    BackgroundThread::spawn("mpixstream-progress", move |_| {
        match slot {
            Some(s) => {
                let _claim = s.claim();
                rt.progress(s.native());
            }
            None => {
                rt.progress(MPIX_STREAM_NULL);
            }
        }
        // Leave the core to the application's threads between turns (2-core machines).
        std::thread::yield_now();
        Turn::Again
    })
}

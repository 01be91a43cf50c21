//! `MPIX_Start_progress_thread`: a thread that drives one stream's progress until stopped. The same code
//! serves both backends (the backend decides what "progress on this stream" means).
use crate::runtime;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl ProgressThread {
    /// Starts the thread for the stream in slot `index` (MPIX_STREAM_NULL: `None`, global progress).
    pub fn start(index: Option<usize>) -> std::io::Result<ProgressThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new().name("mpixstream-progress".into()).spawn(move || {
            while !flag.load(Ordering::Acquire) {
                let Some(rt) = runtime::active() else { break };
                let native = match index {
                    Some(i) => rt.streams.slot(i).native(),
                    None => mpixstream_wrappers::ffi::MPIX_STREAM_NULL,
                };
                rt.backend.progress(rt, native);
                // Leave the core to the application's threads between turns (2-core machines).
                std::thread::yield_now();
            }
        })?;
        Ok(ProgressThread { stop, handle })
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.handle.join();
    }
}

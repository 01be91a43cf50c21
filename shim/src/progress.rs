//! `MPIX_Start_progress_thread`: a background thread that drives one stream's progress until stopped.
//! The same code serves both backends (the backend decides what "progress on this stream" means).
use crate::backend::Backend;
use crate::thread::{BackgroundThread, Turn};
use mpixstream_wrappers::ffi::*;

/// Starts the thread for native stream `native` (`MPIX_STREAM_NULL`: MPICH's global progress, turned on
/// `quiet_comm`).
pub fn start(backend: Backend, native: MPIX_Stream, quiet_comm: MPI_Comm) -> std::io::Result<BackgroundThread> {
    BackgroundThread::spawn("mpixstream-progress", move |_| {
        backend.progress(native, quiet_comm);
        // Leave the core to the application's threads between turns (2-core machines).
        std::thread::yield_now();
        Turn::Again
    })
}

//! The CUDA queue (`type=cudaStream_t`): the application's CUDA stream, driven through the CUDA
//! driver API (`mpixstream_wrappers::cuda`, with `libcuda` loaded at run time).
//!
//! The stream never runs MPI: for operation k it gets `cuStreamWriteValue32(ready, k)` where the
//! operation may start, and `cuStreamWaitValue32(done[k] >= k)` where the stream must wait for it
//! (both on pinned, device-mapped host memory). Our driver thread makes the MPI calls. Where stream
//! memory operations are unavailable, the same two steps run as host functions (`cuLaunchHostFunc`)
//! that only touch the flag words (the wait blocks CUDA's callback thread, never inside MPI).
//!
//! Device buffers are staged through pinned host memory ([`super::cuda_staging`]);
//! `MPIXSTREAM_GPU_AWARE=1` passes device pointers through.
//!
//! The flag block is never freed while the stream may still write or wait on it: it lives with the
//! queue's `Flags`, which finalize leaks where operations were abandoned (`lifecycle`).
//!
//! A stream the application destroyed (or a handle that is not a stream of the context) is *lost* at
//! the first call the driver refuses: the enqueue fails with that error, and no call of ours passes
//! the handle to the driver again (the work already queued on it still runs, as the driver
//! documents, but once it is done the handle is freed memory inside the driver: an NVIDIA H200's
//! process died of a segmentation fault at a later call with it). A stream being captured into a CUDA
//! graph is refused at the enqueue: an operation's sequence number is fixed when it is queued, so a
//! graph could replay it only wrongly.
use super::flags::{self, FlagMem, Flags, POSITION_WORD, READY_WORD, WORDS};
use mpixstream_wrappers::cuda::{
    capture_error, error_name, refuses_handle, Capture, Context, Current, PinnedBuf, PinnedWords, Status, Stream,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use mpixstream_wrappers::cuda::probe;

/// A pinned staging buffer of the queue's pool (filled and recycled by [`super::cuda_staging`]).
pub(super) struct StageBuf {
    pub(super) host: PinnedBuf,
    pub(super) busy: bool,
    /// The operation using it: reusable once it is done...
    pub(super) seq: u32,
    /// ...and, for an output, once the stream passed the position after its copy back (None: that
    /// copy is not queued yet, an unwaited nonblocking receive).
    pub(super) output: bool,
    pub(super) pos: Option<u32>,
}

pub(super) struct Staging {
    pub(super) pool: Vec<StageBuf>,
    pub(super) next_pos: u32,
}

/// How the stream signals and waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// `MPIXSTREAM_CUDA_SYNC=auto` (default): stream memory operations where the device supports them.
    Auto,
    Memops,
    HostFn,
}

/// What the host functions of the fallback mode need.
struct Shared {
    flags: Arc<Flags>,
    give_up: AtomicBool,
    spin: u32,
    yield_for: std::time::Duration,
}

pub struct CudaQueue {
    pub(super) stream: Stream,
    pub(super) ctx: Context,
    memops: bool,
    shared: Arc<Shared>,
    pub(super) gpu_aware: bool,
    pub(super) state: Mutex<Staging>,
    /// Set at the first call the driver refused the stream's handle: why (the module doc).
    lost: OnceLock<String>,
}

impl CudaQueue {
    /// Attaches the application's stream `handle` (a `cudaStream_t`/`CUstream`). Returns the queue and
    /// its flag words (pinned).
    pub fn create(
        handle: u64,
        mode: SyncMode,
        gpu_aware: bool,
        spin: u32,
        yield_for: std::time::Duration,
    ) -> Result<(CudaQueue, Arc<Flags>), String> {
        probe()?;
        // SAFETY: the driver is loaded (`probe`); `handle` is the application's stream of the
        // `MPIX_Stream_create` being served, which it keeps until `MPIX_Stream_free` (docs/enqueue.md), and
        // which the driver checks at each use.
        let stream = unsafe { Stream::from_handle(handle) };
        let ctx = stream.context().map_err(|r| {
            format!(
                "cuStreamGetCtx failed: {}: value 0x{handle:x} is not a CUDA stream of this process \
                 (or, for the default stream, no CUDA context is current on this thread)",
                error_name(r)
            )
        })?;
        let current = ctx.make_current()?;
        let block = PinnedWords::alloc(ctx, &current, WORDS, flags::initial_word)?;
        let position = block.device_word(POSITION_WORD);
        let flags = Arc::new(Flags::new(FlagMem::Pinned(block)));
        let memops = match mode {
            SyncMode::HostFn => false,
            SyncMode::Auto | SyncMode::Memops => {
                // A harmless write of the position word's initial value tells whether the device takes
                // stream memory operations on host memory.
                // SAFETY: the block lives with `flags`, past every use the stream makes of it (module doc).
                let r = unsafe { stream.write_value32(&current, position, 0) };
                if r != Status::CUDA_SUCCESS && mode == SyncMode::Memops {
                    return Err(format!(
                        "MPIXSTREAM_CUDA_SYNC=memops, but cuStreamWriteValue32 fails on this device ({})",
                        error_name(r)
                    ));
                }
                r == Status::CUDA_SUCCESS
            }
        };
        drop(current);
        let shared = Arc::new(Shared { flags: flags.clone(), give_up: AtomicBool::new(false), spin, yield_for });
        let q = CudaQueue {
            stream,
            ctx,
            memops,
            shared,
            gpu_aware,
            state: Mutex::new(Staging { pool: Vec::new(), next_pos: 1 }),
            lost: OnceLock::new(),
        };
        Ok((q, flags))
    }

    pub fn describe(&self) -> String {
        format!(
            "CUDA stream {:p} ({}, {})",
            self.stream.handle(),
            if self.memops { "stream memory operations" } else { "host functions" },
            if self.gpu_aware { "device buffers passed to MPI" } else { "device buffers staged through pinned memory" }
        )
    }

    pub(super) fn flags(&self) -> &Flags {
        &self.shared.flags
    }

    /// Makes the stream's context current on this thread for the guard's life; refused once the
    /// stream is lost (nothing may pass its handle to the driver then).
    pub(super) fn current(&self) -> Result<Current<'_>, String> {
        if let Some(why) = self.lost.get() {
            return Err(why.clone());
        }
        self.ctx.make_current()
    }

    /// Whether the driver refused the stream's handle (the module doc).
    pub fn lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// The driver's answer `r` to `what` on the stream, as a result; a refused handle loses the stream.
    pub(super) fn answer(&self, r: Status, what: &str) -> Result<(), String> {
        if r == Status::CUDA_SUCCESS {
            return Ok(());
        }
        if refuses_handle(r) {
            let why = format!(
                "the CUDA stream {:p} was destroyed, or is not a stream of this process: {what} answers {}; a \
                 stream must stay alive until MPIX_Stream_free, and no further call of mpixstream uses its handle",
                self.stream.handle(),
                error_name(r)
            );
            return Err(self.lost.get_or_init(|| why).clone());
        }
        Err(format!("{what} failed: {}", error_name(r)))
    }

    /// Whether an operation may be enqueued now: not on a lost stream, nor on one being captured into
    /// a CUDA graph (the module doc). Called first by every enqueue on the queue.
    pub fn admit(&self) -> Result<(), String> {
        let current = self.current()?;
        match self.stream.capture(&current) {
            Ok(Capture::None) => Ok(()),
            Ok(status) => Err(format!(
                "the CUDA stream {:p} is being captured into a CUDA graph (cuStreamIsCapturing: {status:?}): an \
                 enqueued operation is bound to one sequence number when it is queued, so a launch of the graph \
                 could not run it again; enqueue before or after the capture",
                self.stream.handle()
            )),
            Err(r) => self.answer(r, "cuStreamIsCapturing"),
        }
    }

    /// The stream writes `value` into flag word `word` when it gets there (the context is current).
    pub(super) fn write_word(&self, current: &Current, word: usize, value: u32) -> Result<(), String> {
        assert!(word < WORDS, "flag word {word} is outside the block");
        match self.flags().device_word(word).filter(|_| self.memops) {
            Some(at) => {
                // SAFETY: the block lives with the flags, past every use the stream makes of it (module doc).
                self.answer(unsafe { self.stream.write_value32(current, at, value) }, "cuStreamWriteValue32")
            }
            None => {
                let shared = self.shared.clone();
                let r = self.stream.launch_host_fn(
                    current,
                    Box::new(move || {
                        // The fallback's "ready k" (or position) write, on the driver's callback thread.
                        if word == READY_WORD {
                            shared.flags.signal_ready(value);
                        } else {
                            shared.flags.word(word).store(value, Ordering::Release);
                        }
                    }),
                );
                self.answer(r, "cuLaunchHostFunc")
            }
        }
    }

    pub fn signal_ready(&self, seq: u32) -> Result<(), String> {
        let current = self.current()?;
        self.write_word(&current, READY_WORD, seq)
    }

    pub fn wait_done(&self, seq: u32) -> Result<(), String> {
        let current = self.current()?;
        match self.flags().device_word(flags::done_word(seq)).filter(|_| self.memops) {
            Some(at) => {
                // SAFETY: as in `write_word`: a done word of the block, which outlives the stream's use.
                self.answer(unsafe { self.stream.wait_value32(&current, at, seq) }, "cuStreamWaitValue32")
            }
            None => {
                let shared = self.shared.clone();
                let r = self.stream.launch_host_fn(
                    &current,
                    Box::new(move || {
                        // The fallback's "wait for done k": it blocks the stream, never inside MPI.
                        let s = &shared;
                        s.flags.wait_until(|f| f.is_done(seq), &s.give_up, s.spin, s.yield_for);
                    }),
                );
                self.answer(r, "cuLaunchHostFunc")
            }
        }
    }

    /// Whether the stream can still run what is queued on it (asked by the queue's watchdog while
    /// operations wait for the stream): an error other than "not ready" from `cuStreamQuery` is a
    /// context failure (a GPU fault is sticky: nothing queued will run). A destroyed stream's handle is
    /// refused, but the work queued on it still runs (the driver's documented behaviour): the stream is
    /// lost, not failed, and never asked again. A capturing stream is not queried (a query would
    /// invalidate the application's capture).
    pub fn health(&self) -> Result<(), String> {
        if self.lost() {
            return Ok(());
        }
        let current = self.current()?;
        let r = match self.stream.capture(&current) {
            Ok(Capture::None) => self.stream.query(&current),
            Ok(_) => return Ok(()),
            Err(r) => r,
        };
        match r {
            Status::CUDA_SUCCESS | Status::CUDA_ERROR_NOT_READY => Ok(()),
            r if capture_error(r) => Ok(()),
            r if refuses_handle(r) => {
                let _ = self.answer(r, "cuStreamQuery");
                Ok(())
            }
            r => Err(format!("the CUDA stream failed: cuStreamQuery returns {}", error_name(r))),
        }
    }

    /// Whether the stream has run everything queued on it (the application's work too). A lost stream
    /// cannot be asked: idle for the drain, but its memory is never freed (`release`).
    pub fn idle(&self) -> bool {
        let Ok(current) = self.current() else {
            return true;
        };
        match self.stream.capture(&current) {
            Ok(Capture::None) => {}
            // A capture in progress is not queried (that would invalidate it): not idle.
            Ok(_) => return false,
            // A refused handle (now lost) or a failed context: nothing more to wait for.
            Err(r) => return self.answer(r, "cuStreamIsCapturing").is_err(),
        }
        match self.stream.query(&current) {
            Status::CUDA_ERROR_NOT_READY => false,
            r if refuses_handle(r) => self.answer(r, "cuStreamQuery").is_err(),
            // Done, or a failed context (it runs nothing more).
            _ => true,
        }
    }

    /// `cuStreamSynchronize`; refused, without a call, on a lost stream.
    pub fn synchronize(&self) -> Result<(), String> {
        let current = self.current()?;
        let r = self.stream.synchronize_status(&current);
        self.answer(r, "cuStreamSynchronize")
    }

    /// Makes fallback host functions stop waiting (finalize after abandoning operations).
    pub fn give_up(&self) {
        self.shared.give_up.store(true, Ordering::Release);
        self.shared.flags.wake_all();
    }

    /// Frees the staging buffers; only when the stream no longer uses them (after `synchronize`). A
    /// lost stream was never synchronised and may still run our waits and copies: its staging buffers
    /// and flag words are left allocated (the flags' count is raised for good).
    pub fn release(&self) {
        if self.lost() {
            std::mem::forget(self.shared.flags.clone());
            return;
        }
        let Ok(current) = self.current() else {
            return;
        };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for b in st.pool.drain(..) {
            b.host.free(&current);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a CUDA driver the probe fails with the cause, and nothing panics (cudarc is never
    /// reached). With one, it succeeds or names what is missing.
    /// Whether libcuda loads here.
    fn libcuda_present() -> bool {
        mpixstream_wrappers::cuda::library_present()
    }

    #[test]
    fn probe_never_panics_and_names_the_cause() {
        let present = libcuda_present();
        match probe() {
            Ok(()) => assert!(present),
            Err(e) if !present => assert!(e.contains("libcuda.so.1 cannot be loaded"), "{e}"),
            Err(e) => assert!(e.contains("CUDA") || e.contains("cu"), "{e}"),
        }
        // Asking again gives the same answer (checked once).
        assert_eq!(probe().is_ok(), probe().is_ok());
    }

    #[test]
    fn create_without_cuda_is_an_error() {
        if libcuda_present() {
            return;
        }
        let e = CudaQueue::create(0x1234, SyncMode::Auto, false, 0, std::time::Duration::ZERO).err().unwrap();
        assert!(e.contains("cannot be loaded"), "{e}");
    }
}

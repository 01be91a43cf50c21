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
use super::flags::{self, FlagMem, Flags, POSITION_WORD, READY_WORD, WORDS};
use mpixstream_wrappers::cuda::{check, error_name, Context, Current, PinnedBuf, PinnedWords, Status, Stream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

    /// Makes the stream's context current on this thread for the guard's life.
    pub(super) fn current(&self) -> Result<Current<'_>, String> {
        self.ctx.make_current()
    }

    /// The stream writes `value` into flag word `word` when it gets there (the context is current).
    pub(super) fn write_word(&self, current: &Current, word: usize, value: u32) -> Result<(), String> {
        assert!(word < WORDS, "flag word {word} is outside the block");
        match self.flags().device_word(word).filter(|_| self.memops) {
            Some(at) => {
                // SAFETY: the block lives with the flags, past every use the stream makes of it (module doc).
                check(unsafe { self.stream.write_value32(current, at, value) }, "cuStreamWriteValue32")
            }
            None => {
                let shared = self.shared.clone();
                self.stream.launch_host_fn(
                    current,
                    Box::new(move || {
                        // The fallback's "ready k" (or position) write, on the driver's callback thread.
                        if word == READY_WORD {
                            shared.flags.signal_ready(value);
                        } else {
                            shared.flags.word(word).store(value, Ordering::Release);
                        }
                    }),
                )
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
                check(unsafe { self.stream.wait_value32(&current, at, seq) }, "cuStreamWaitValue32")
            }
            None => {
                let shared = self.shared.clone();
                self.stream.launch_host_fn(
                    &current,
                    Box::new(move || {
                        // The fallback's "wait for done k": it blocks the stream, never inside MPI.
                        let s = &shared;
                        s.flags.wait_until(|f| f.is_done(seq), &s.give_up, s.spin, s.yield_for);
                    }),
                )
            }
        }
    }

    /// Whether the stream can still run what is queued on it: an error other than "not ready" from
    /// `cuStreamQuery` is a context failure (a GPU fault is sticky: nothing queued will run). A
    /// destroyed stream's handle is refused, but the work queued on it still runs (the driver's
    /// documented behaviour), so that is not a failure.
    pub fn health(&self) -> Result<(), String> {
        let current = self.current()?;
        match self.stream.query(&current) {
            Status::CUDA_SUCCESS | Status::CUDA_ERROR_NOT_READY | Status::CUDA_ERROR_INVALID_HANDLE => Ok(()),
            r => Err(format!("the CUDA stream failed: cuStreamQuery returns {}", error_name(r))),
        }
    }

    /// Whether the stream has run everything queued on it (the application's work too).
    pub fn idle(&self) -> bool {
        match self.current() {
            // A failed context runs nothing more; a destroyed stream may still (not idle).
            Ok(current) => {
                !matches!(self.stream.query(&current), Status::CUDA_ERROR_NOT_READY | Status::CUDA_ERROR_INVALID_HANDLE)
            }
            Err(_) => true,
        }
    }

    pub fn synchronize(&self) -> Result<(), String> {
        let current = self.current()?;
        self.stream.synchronize(&current)
    }

    /// Makes fallback host functions stop waiting (finalize after abandoning operations).
    pub fn give_up(&self) {
        self.shared.give_up.store(true, Ordering::Release);
        self.shared.flags.wake_all();
    }

    /// Frees the staging buffers; only when the stream no longer uses them (after `synchronize`).
    pub fn release(&self) {
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

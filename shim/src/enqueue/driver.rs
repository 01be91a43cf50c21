//! Running operations: the one thread that drives a queue-backed stream (a host queue's worker, or a
//! CUDA queue's driver thread) starts each operation as its nonblocking MPI form, keeps any number in
//! flight, and completes them with `MPI_Test`. It never blocks inside MPI, so `MPI_Finalize` can
//! always stop it.
use super::flags::Flags;
use super::ledger::Ledger;
use super::ops::{empty_status, Op};
use crate::runtime::Runtime;
use crate::streams::StreamSlot;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::OwnedRequest;
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Driver {
    rt: &'static Runtime,
    /// The stream's slot: every call of ours into its endpoint holds its claim (`StreamSlot::claim`), so
    /// that the application's own calls on the stream's communicators never overlap ours.
    slot: &'static StreamSlot,
    /// The native MPICH stream behind ours (native backend: its progress is driven explicitly,
    /// nonblocking collectives on a native stream communicator do not progress with `MPI_Test`
    /// alone), else `MPIX_STREAM_NULL`.
    native: MPIX_Stream,
    ledger: Arc<Ledger>,
    /// CUDA queues: the done words the stream waits for, written at each completion.
    flags: Option<Arc<Flags>>,
    inflight: Vec<(Op, OwnedRequest)>,
}

impl Driver {
    pub fn new(rt: &'static Runtime, index: usize, ledger: Arc<Ledger>, flags: Option<Arc<Flags>>) -> Driver {
        let slot = rt.streams.slot(index);
        Driver { rt, slot, native: slot.native(), ledger, flags, inflight: Vec::with_capacity(64) }
    }

    pub fn idle(&self) -> bool {
        self.inflight.is_empty()
    }

    /// Whether operation `seq` is started and not complete.
    #[inline]
    pub fn holds(&self, seq: u32) -> bool {
        self.inflight.iter().any(|(op, _)| op.seq == seq)
    }

    /// Starts `op` (a failure to start completes it with the error at once).
    pub fn start(&mut self, op: Op) {
        let started = {
            let _claim = self.slot.claim();
            op.start()
        };
        match started {
            Ok(req) => self.inflight.push((op, req)),
            Err(code) => self.finish(op, empty_status(), Some(code)),
        }
    }

    /// Completes `op` without starting it (finalize gave up on the stream): status `MPI_ERR_PENDING`.
    pub fn skip(&mut self, op: Op) {
        let mut status = empty_status();
        status.MPI_ERROR = MPI_ERR_PENDING;
        self.finish(op, status, None);
    }

    /// Completes `op`, never started, as failed (`MPI_ERR_OTHER`) because its queue can no longer
    /// reach it; the reason is reported by the stream's next call.
    pub fn fail(&mut self, op: Op, reason: &str) {
        self.ledger.record_error(format!(
            "{} on communicator 0x{:08x} (enqueued {}, stream 0x{:08x}) never started: {reason}",
            op.func,
            op.comm as u32,
            op.kind().name(),
            self.ledger.stream as u32
        ));
        let mut status = empty_status();
        status.MPI_ERROR = MPI_ERR_OTHER;
        self.finish(op, status, None);
    }

    fn finish(&mut self, op: Op, status: MPI_Status, err: Option<i32>) {
        self.ledger.complete(&op, status, err);
        // Last: this releases a CUDA stream waiting for the operation.
        if let Some(f) = &self.flags {
            f.mark_done(op.seq);
        }
    }

    /// Tests every operation in flight once; true if any completed.
    pub fn poll(&mut self) -> bool {
        if self.inflight.is_empty() {
            return false;
        }
        let _claim = self.slot.claim();
        if self.native != MPIX_STREAM_NULL {
            self.rt.progress(self.native);
        }
        let mut progressed = false;
        let mut i = 0;
        while i < self.inflight.len() {
            let (op, req) = &mut self.inflight[i];
            if let Some((status, err)) = test(op, req) {
                let (op, _) = self.inflight.swap_remove(i);
                self.finish(op, status, err);
                progressed = true;
            } else {
                i += 1;
            }
        }
        progressed
    }

    /// Starts `op` and tests it for up to `window`, for an operation run on the enqueuing thread
    /// while nothing else is in flight: its outcome, or its request if it is not complete by then
    /// (the caller registers it and hands it to `adopt`). A failure to start is an outcome.
    pub fn start_and_poll(&mut self, op: &Op, window: Duration) -> Result<(MPI_Status, Option<c_int>), OwnedRequest> {
        debug_assert!(self.inflight.is_empty());
        let started = {
            let _claim = self.slot.claim();
            op.start()
        };
        let mut req = match started {
            Ok(req) => req,
            Err(code) => return Ok((empty_status(), Some(code))),
        };
        let mut since = None;
        for polls in 0u32.. {
            {
                let _claim = self.slot.claim();
                if self.native != MPIX_STREAM_NULL {
                    self.rt.progress(self.native);
                }
                // No pause between polls: each is a call into MPICH, and a pause would only delay
                // noticing the peer's message.
                if let Some(outcome) = test(op, &mut req) {
                    return Ok(outcome);
                }
            }
            // The clock only after the common case (complete within a few polls), then now and then.
            if polls % 32 == 31 {
                let start = *since.get_or_insert_with(Instant::now);
                if start.elapsed() >= window {
                    break;
                }
            }
        }
        Err(req)
    }

    /// Keeps `op`, started by `start_and_poll` as `req` and registered since, in flight.
    pub fn adopt(&mut self, op: Op, req: OwnedRequest) {
        self.inflight.push((op, req));
    }

    /// Finalize gave up on the stream: cancels the receives in flight and gives every operation
    /// 100 ms to finish. Operations that did not are kept (never marked done: MPICH may still use
    /// their buffers, so the queue must not run past them); returns their descriptions.
    pub fn abandon(&mut self) -> Vec<String> {
        let _claim = self.slot.claim();
        for (op, req) in &self.inflight {
            if op.kind().is_recv() {
                // Its outcome shows in the test below.
                let _ = req.cancel();
            }
        }
        let deadline = Instant::now() + Duration::from_millis(100);
        while !self.inflight.is_empty() && Instant::now() < deadline {
            let mut i = 0;
            while i < self.inflight.len() {
                let mut status = empty_status();
                // Complete, or failed: either way MPICH is done with it.
                if !matches!(self.inflight[i].1.test_into(&mut status), Ok(false)) {
                    let (op, _) = self.inflight.swap_remove(i);
                    status.MPI_ERROR = MPI_ERR_PENDING;
                    self.finish(op, status, None);
                } else {
                    i += 1;
                }
            }
            std::thread::yield_now();
        }
        self.inflight
            .iter()
            .map(|(op, _)| {
                format!(
                    "operation {} ({} of {} on communicator 0x{:08x}) is still in MPICH's hands, which may use its \
                     buffer: the queue is left stopped before it",
                    op.seq,
                    op.kind().name(),
                    op.func,
                    op.comm as u32
                )
            })
            .collect()
    }
}

/// Tests `op`'s request once: its status and error once complete.
/// The status starts empty: MPICH fills in only what the request kind defines (a send: the cancelled bit).
#[inline]
fn test(op: &Op, req: &mut OwnedRequest) -> Option<(MPI_Status, Option<c_int>)> {
    let mut status = empty_status();
    let err = match req.test_into(&mut status) {
        Ok(false) => return None,
        Err(rc) => Some(rc),
        Ok(true) if status.MPI_ERROR != MPI_SUCCESS && op.kind().is_recv() => Some(status.MPI_ERROR),
        Ok(true) => None,
    };
    // Nonblocking collectives and sends leave MPI_ERROR undefined: clear it.
    if err.is_none() {
        status.MPI_ERROR = MPI_SUCCESS;
    }
    Some((status, err))
}

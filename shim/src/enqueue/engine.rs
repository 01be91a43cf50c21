//! A queue-backed stream's engine: what `MPIX_*_enqueue` does on the application's thread. It
//! registers the operation (ledger), then hands it to the queue: a host queue gets the operation
//! itself (its worker starts it on reaching it); a CUDA queue gets "ready k" and "wait for done[k]"
//! on the GPU stream while the operation goes to the driver thread that watches those words.
use super::cuda::CudaQueue;
use super::cuda_thread::CudaDriverThread;
use super::flags::Flags;
use super::host::{HostQueue, Item, UserFn};
use super::ledger::Ledger;
use super::ops::{Kind, Op, StatusDst};
use crate::errors::{raise, Class};
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub enum Queue {
    Host(HostQueue),
    Cuda { queue: Arc<CudaQueue>, thread: CudaDriverThread, flags: Arc<Flags> },
}

impl Queue {
    pub fn describe(&self) -> String {
        match self {
            Queue::Host(_) => "host queue".into(),
            Queue::Cuda { queue, .. } => queue.describe(),
        }
    }

    /// Whether the queue has run everything queued on it.
    pub fn idle(&self) -> bool {
        match self {
            Queue::Host(q) => q.outstanding() == 0,
            Queue::Cuda { queue, .. } => queue.idle(),
        }
    }
}

pub struct QueueEngine {
    /// The stream's slot.
    pub index: usize,
    pub handle: MPIX_Stream,
    pub queue: Queue,
    pub ledger: Arc<Ledger>,
    /// Serialises enqueuing: sequence numbers and queue order are assigned together. Holds the next
    /// sequence number.
    enq: Mutex<u32>,
    spin: u32,
    yield_for: Duration,
}

impl QueueEngine {
    pub fn new(
        index: usize,
        handle: MPIX_Stream,
        queue: Queue,
        ledger: Arc<Ledger>,
        spin: u32,
        yield_for: Duration,
    ) -> QueueEngine {
        QueueEngine { index, handle, queue, ledger, enq: Mutex::new(1), spin, yield_for }
    }

    /// A pending failure, reported once, as an error of the call `func` on `comm`.
    pub fn report_error(&self, comm: MPI_Comm, func: &str) -> Result<(), c_int> {
        match self.ledger.take_error() {
            None => Ok(()),
            Some(e) => Err(raise(comm, Class::Other, func, &format!("an earlier enqueued operation failed: {e}"))),
        }
    }

    /// Queues operation `kind` on `comm`: blocking (`request` None; its status, if any, to `status`) or
    /// nonblocking (a request of ours is stored in `request`, the application's argument).
    pub fn submit(
        &self,
        func: &'static str,
        comm: MPI_Comm,
        mut kind: Kind,
        status: StatusDst,
        request: Option<AppArg<MPI_Request>>,
    ) -> Result<(), (Class, String)> {
        let nonblocking = request.is_some();
        let mut next = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        let seq = *next;
        // Staged: device buffers replaced by pinned copies, which stay allocated until the operation is done.
        let op = |kind, request, comm_slot| Op::new(seq, comm, kind, request, comm_slot, status, func);
        match &self.queue {
            Queue::Host(q) => {
                if !nonblocking {
                    let op = op(kind, None, 0);
                    *next = seq.wrapping_add(1);
                    if let Err(mut op) = q.try_run_now(op, &self.ledger) {
                        op.comm_slot = self.ledger.register_blocking(comm, seq);
                        q.push(Item::Start { op, blocking: true });
                    }
                    return Ok(());
                }
                let reg = self.ledger.register(comm, seq, true).map_err(|e| (Class::Other, e))?;
                let handle = reg.request;
                *next = seq.wrapping_add(1);
                q.push(Item::Start { op: op(kind, handle, reg.comm_slot), blocking: false });
                drop(next);
                if let (Some(dst), Some(h)) = (request, handle) {
                    dst.set(h);
                }
                Ok(())
            }
            Queue::Cuda { queue, thread, flags } => {
                // Not on a stream the driver refused, nor on one being captured into a graph.
                queue.admit().map_err(|e| (Class::Other, e))?;
                if !flags.slot_free(seq) {
                    // RING operations outstanding: wait for the oldest (the queue keeps running meanwhile).
                    let never = AtomicBool::new(false);
                    flags.wait_until(|f| f.slot_free(seq), &never, self.spin, self.yield_for);
                }
                let reg = self.ledger.register(comm, seq, nonblocking).map_err(|e| (Class::Other, e))?;
                let handle = reg.request;
                // Nothing reaches the stream unless the ready signal does: a failure before that
                // leaves no trace (the sequence number is not consumed).
                let staged = match queue.stage(&mut kind, comm, seq).and_then(|s| queue.signal_ready(seq).map(|_| s)) {
                    Ok(s) => s,
                    Err(e) => {
                        self.ledger.unregister(comm, reg);
                        return Err((Class::Other, e));
                    }
                };
                *next = seq.wrapping_add(1);
                thread.submit(op(kind, handle, reg.comm_slot));
                let queued = match handle {
                    None => queue.wait_done(seq).and_then(|_| queue.copy_back(staged)),
                    Some(h) => {
                        self.ledger.set_staged(h, staged);
                        Ok(())
                    }
                };
                drop(next);
                if let (Some(dst), Some(h)) = (request, handle) {
                    dst.set(h);
                }
                // The operation is registered; the driver runs it when (if) the stream gets there.
                queued.map_err(|e| (Class::Other, e))
            }
        }
    }

    /// Queues the waits for `requests` (all of this engine, checked by the caller). Statuses go to
    /// `statuses[i]` (null: ignored) when the operation completes.
    pub fn wait_requests(&self, requests: &[MPI_Request], statuses: &[StatusDst]) -> Result<(), (Class, String)> {
        let _order = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        let mut result = match &self.queue {
            Queue::Cuda { queue, .. } => queue.admit().map_err(|e| (Class::Other, e)),
            Queue::Host(_) => Ok(()),
        };
        for (i, &h) in requests.iter().enumerate() {
            let dst = statuses.get(i).copied().unwrap_or(StatusDst::NOWHERE);
            // None: a duplicate in the array.
            let Some((seq, staged)) = self.ledger.wait(h, dst) else {
                continue;
            };
            if result.is_err() {
                continue;
            }
            result = match &self.queue {
                Queue::Host(q) => {
                    q.push(Item::WaitFor(seq));
                    Ok(())
                }
                Queue::Cuda { queue, .. } => queue
                    .wait_done(seq)
                    .and_then(|_| queue.copy_back(staged.unwrap_or_default()))
                    .map_err(|e| (Class::Other, e)),
            };
        }
        result
    }

    /// Queues the application's callback (host queues), in order with the operations.
    pub fn launch(&self, f: UserFn, arg: *mut c_void) {
        let _order = self.enq.lock().unwrap_or_else(|e| e.into_inner());
        if let Queue::Host(q) = &self.queue {
            q.push(Item::User(f, arg as usize));
        }
    }

    /// Whether `h` is a live, unwaited request of this engine.
    pub fn owns_request(&self, h: MPI_Request) -> bool {
        self.ledger.owns_request(h)
    }
}

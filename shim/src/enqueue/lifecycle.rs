//! Creating and tearing down a stream's engine: `MPIX_Stream_create` (attach), `MPIX_Stream_free`
//! (detach), `MPI_Comm_free`'s check, and `MPI_Finalize`'s drain, which never hangs on enqueued work.
use super::config::config;
use super::cuda::CudaQueue;
use super::cuda_thread::CudaDriverThread;
use super::driver::Driver;
use super::engine::{Queue, QueueEngine};
use super::host::HostQueue;
use super::ledger::Ledger;
use super::registry::{self, engine, MAX_STREAMS};
use super::spec::QueueSpec;
use crate::errors::Class;
use crate::runtime::Runtime;
use crate::streams::StreamTable;
use mpixstream_wrappers::ffi::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Makes stream slot `index` queue-backed (from `MPIX_Stream_create`).
pub fn attach_queue(rt: &'static Runtime, index: usize, spec: QueueSpec) -> Result<(), String> {
    if index >= MAX_STREAMS {
        return Err(format!("stream slot {index} is beyond the enqueue engine's {MAX_STREAMS}"));
    }
    let cfg = config();
    let handle = StreamTable::handle(index);
    let slot = rt.streams.slot(index);
    let ledger = Arc::new(Ledger::new(index, handle, &slot.pending));
    let queue = match spec {
        QueueSpec::Host => {
            let driver = Driver::new(rt, index, ledger.clone(), None);
            let q = HostQueue::start(driver, cfg.spin, cfg.yield_for, format!("mpixstream-hostq-{index}"))
                .map_err(|e| format!("cannot start the host queue's thread: {e}"))?;
            Queue::Host(q)
        }
        QueueSpec::Cuda(h) => {
            let (queue, flags) = CudaQueue::create(h, cfg.cuda_sync, cfg.gpu_aware, cfg.spin, cfg.yield_for)?;
            let queue = Arc::new(queue);
            let watched = queue.clone();
            let driver = Driver::new(rt, index, ledger.clone(), Some(flags.clone()));
            let thread = CudaDriverThread::start(
                driver,
                flags.clone(),
                Box::new(move || watched.health()),
                cfg.spin,
                cfg.yield_for,
                format!("mpixstream-cudaq-{index}"),
            )
            .map_err(|e| format!("cannot start the CUDA queue's driver thread: {e}"))?;
            Queue::Cuda { queue, thread, flags }
        }
    };
    let eng = QueueEngine::new(index, handle, queue, ledger, cfg.spin, cfg.yield_for);
    registry::set(index, Some(eng));
    Ok(())
}

/// Tears down stream slot `index`'s engine (from `MPIX_Stream_free`, after it checked that no
/// operation is pending). Refuses while the queue still has items to run.
pub fn detach_queue(index: usize) -> Result<(), (Class, String)> {
    let Some(eng) = engine(index) else {
        return Ok(());
    };
    if let Queue::Host(q) = &eng.queue {
        let n = q.outstanding();
        if n > 0 {
            return Err((
                Class::Pending,
                format!(
                    "stream 0x{:08x}'s host queue still has {n} item(s) to run; call MPIX_Host_queue_synchronize first",
                    eng.handle as u32
                ),
            ));
        }
    }
    if let Some(e) = eng.ledger.take_error() {
        mpixstream_wrappers::say!(
            "mpixstream: MPIX_Stream_free: an enqueued operation on stream 0x{:08x} failed: {e}",
            eng.handle as u32
        );
    }
    registry::set(index, None);
    match &eng.queue {
        Queue::Host(q) => {
            q.shutdown(false, Duration::from_secs(1));
        }
        Queue::Cuda { queue, thread, .. } => {
            // Every operation is complete, so every wait of ours on the stream is satisfied.
            if let Err(e) = queue.synchronize() {
                mpixstream_wrappers::say!("mpixstream: MPIX_Stream_free: {e}");
            }
            thread.stop();
            queue.release();
        }
    }
    Ok(())
}

/// `MPI_Comm_free`'s check: a communicator with enqueued operations not complete cannot be freed
/// (our thread has yet to use it). The error is (class, message) for `errors::raise`.
pub fn check_comm_free(rt: &Runtime, comm: MPI_Comm) -> Result<(), (Class, String)> {
    let Some(stream) = rt.comms.stream_of(comm) else {
        return Ok(());
    };
    let Some(eng) = engine(stream) else {
        return Ok(());
    };
    let n = eng.ledger.comm_ops(comm);
    if n > 0 {
        return Err((
            Class::Pending,
            format!(
                "communicator 0x{:08x} has {n} enqueued operation(s) not complete on stream 0x{:08x}; \
                 synchronize the stream's queue first",
                comm as u32, eng.handle as u32
            ),
        ));
    }
    Ok(())
}

/// `MPI_Finalize`'s drain: waits up to `MPIXSTREAM_FINALIZE_TIMEOUT` for every engine's operations and
/// queue; then reports what did not finish and abandons it (receives cancelled, operations never
/// started skipped, the queues' waits released, except past an operation MPICH still holds, which is
/// reported), and stops every engine. Never blocks longer than the timeout plus a short grace.
/// Returns false if work was abandoned.
pub fn finalize() -> bool {
    let engines = registry::all();
    if engines.is_empty() {
        return true;
    }
    let timeout = config().finalize_timeout;
    let deadline = Instant::now() + timeout;
    let mut clean = true;
    let mut abandoned = vec![false; engines.len()];
    let mut leave_memory = vec![false; engines.len()];
    for (i, eng) in engines.iter().enumerate() {
        let host = matches!(eng.queue, Queue::Host(_));
        while (eng.ledger.incomplete() > 0 || !eng.queue.idle()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        let n = eng.ledger.incomplete();
        // A CUDA stream still running the application's own work is not ours to report; but its
        // staging buffers and flag words may still be used by it, so they are left allocated.
        let queue_busy = !eng.queue.idle();
        leave_memory[i] = !host && queue_busy;
        if n > 0 || (host && queue_busy) {
            clean = false;
            abandoned[i] = true;
            mpixstream_wrappers::say!(
                "mpixstream: MPI_Finalize: stream 0x{:08x} ({}): {n} enqueued operation(s) did not complete{} \
                 within {:.1} s (MPIXSTREAM_FINALIZE_TIMEOUT); abandoning them (receives are cancelled)",
                eng.handle as u32,
                eng.queue.describe(),
                if queue_busy { " and its queue did not drain" } else { "" },
                timeout.as_secs_f64()
            );
            if let Queue::Cuda { thread, .. } = &eng.queue {
                thread.abandon();
            }
        }
        if let Some(e) = eng.ledger.take_error() {
            mpixstream_wrappers::say!(
                "mpixstream: MPI_Finalize: an enqueued operation on stream 0x{:08x} failed: {e}",
                eng.handle as u32
            );
        }
    }
    for (i, eng) in engines.iter().enumerate() {
        match &eng.queue {
            Queue::Host(q) => {
                if !q.shutdown(abandoned[i], Duration::from_secs(1)) {
                    mpixstream_wrappers::say!(
                        "mpixstream: MPI_Finalize: stream 0x{:08x}'s host queue is stuck in an application callback; leaving it",
                        eng.handle as u32
                    );
                }
            }
            Queue::Cuda { queue, thread, flags } => {
                thread.stop();
                if abandoned[i] || leave_memory[i] {
                    // The GPU may still wait for or write a flag word: never free them under it.
                    std::mem::forget(flags.clone());
                    if !thread.stuck() {
                        // Host-function waits give up; never past an operation MPICH still holds.
                        queue.give_up();
                    }
                    // The stream may still run copies from staging buffers: leave them allocated.
                } else {
                    queue.release();
                }
            }
        }
        registry::set(eng.index, None);
    }
    clean
}

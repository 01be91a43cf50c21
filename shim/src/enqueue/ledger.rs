//! The bookkeeping of one queue-backed stream's operations, shared by the application threads that
//! enqueue and the one thread that runs them: live requests, incomplete operations per communicator
//! (`MPI_Comm_free` refuses while any), the stream's pending count (`MPIX_Stream_free` refuses while
//! any), and the first failure not yet reported. A blocking operation takes no lock (counters only);
//! a nonblocking one takes one short lock on each side (its request).
use super::comm_counts::CommCounts;
use super::cuda_staging::Staged;
use super::ops::{Op, StatusDst};
use super::requests::{Request, RequestTable};
use mpixstream_wrappers::ffi::*;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

struct State {
    reqs: RequestTable<Staged>,
    error: Option<String>,
}

pub struct Ledger {
    /// The stream's handle (for messages).
    pub stream: MPIX_Stream,
    /// The stream slot's count of operations and requests not finished.
    pending: &'static AtomicU32,
    /// Operations registered and not complete.
    incomplete: AtomicU32,
    /// Whether `state.error` holds a failure (checked without the lock by every enqueue call).
    has_error: AtomicBool,
    /// Incomplete operations per communicator.
    comm_ops: CommCounts,
    state: Mutex<State>,
}

/// What `register` gives an operation: its request handle (nonblocking) and the index of its
/// communicator's counter (the operation carries it to `complete`).
#[derive(Clone, Copy)]
pub struct Registered {
    pub request: Option<MPI_Request>,
    pub comm_slot: u16,
}

impl Ledger {
    pub fn new(index: usize, stream: MPIX_Stream, pending: &'static AtomicU32) -> Ledger {
        Ledger {
            stream,
            pending,
            incomplete: AtomicU32::new(0),
            has_error: AtomicBool::new(false),
            comm_ops: CommCounts::new(),
            state: Mutex::new(State { reqs: RequestTable::new(index), error: None }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers operation `seq` on `comm`; a nonblocking one gets a request handle. Calls of one
    /// ledger are serialised by the caller (the engine's order lock), as `CommCounts::add` needs.
    pub fn register(&self, comm: MPI_Comm, seq: u32, nonblocking: bool) -> Result<Registered, String> {
        let request = if nonblocking {
            let req = Request {
                seq,
                done: false,
                waited: false,
                status: super::ops::empty_status(),
                dst: StatusDst::NOWHERE,
                extra: None,
            };
            Some(self.lock().reqs.insert(req).ok_or_else(|| {
                format!(
                    "{} requests of MPIX_Isend_enqueue/MPIX_Irecv_enqueue are not waited for on this stream \
                     (the most it holds)",
                    super::requests::SLOTS - 1
                )
            })?)
        } else {
            None
        };
        let comm_slot = self.comm_ops.add(comm);
        self.pending.fetch_add(if nonblocking { 2 } else { 1 }, Ordering::AcqRel);
        self.incomplete.fetch_add(1, Ordering::AcqRel);
        Ok(Registered { request, comm_slot })
    }

    /// `register` for a blocking operation, which cannot fail (it takes no request slot): the index
    /// of its communicator's counter.
    pub fn register_blocking(&self, comm: MPI_Comm, seq: u32) -> u16 {
        match self.register(comm, seq, false) {
            Ok(reg) => reg.comm_slot,
            Err(_) => unreachable!("a blocking operation takes no request slot"),
        }
    }

    /// Undoes `register` for an operation that was never handed to its queue.
    pub fn unregister(&self, comm: MPI_Comm, reg: Registered) {
        if let Some(h) = reg.request {
            self.lock().reqs.remove(h);
        }
        self.comm_ops.done(comm, reg.comm_slot);
        self.pending.fetch_sub(if reg.request.is_some() { 2 } else { 1 }, Ordering::AcqRel);
        self.incomplete.fetch_sub(1, Ordering::AcqRel);
    }

    /// Keeps the copies back to the device that request `h` owes after its wait.
    pub fn set_staged(&self, h: MPI_Request, staged: Staged) {
        if let Some(r) = self.lock().reqs.get_mut(h) {
            r.extra = Some(staged);
        }
    }

    /// Whether `h` is a live, unwaited request of this stream.
    pub fn owns_request(&self, h: MPI_Request) -> bool {
        self.lock().reqs.get_mut(h).is_some_and(|r| !r.waited)
    }

    /// The wait of request `h`, status to `dst`: its operation's sequence number and staged copies,
    /// or None if `h` is not live and unwaited (a duplicate in a waitall).
    pub fn wait(&self, h: MPI_Request, dst: StatusDst) -> Option<(u32, Option<Staged>)> {
        let mut st = self.lock();
        let r = st.reqs.get_mut(h).filter(|r| !r.waited)?;
        let seq = r.seq;
        let staged = r.extra.take();
        if r.done {
            dst.write(r.status);
            st.reqs.remove(h);
        } else {
            r.waited = true;
            r.dst = dst;
        }
        drop(st);
        self.pending.fetch_sub(1, Ordering::AcqRel);
        Some((seq, staged))
    }

    /// Incomplete operations on `comm`.
    pub fn comm_ops(&self, comm: MPI_Comm) -> u32 {
        self.comm_ops.get(comm)
    }

    pub fn incomplete(&self) -> u32 {
        self.incomplete.load(Ordering::Acquire)
    }

    /// Completes `op` with `status`; `err`: the MPI error it failed with (recorded for the next call).
    pub fn complete(&self, op: &Op, status: MPI_Status, err: Option<c_int>) {
        let status = self.settle(op, status, err);
        match op.request {
            Some(h) => {
                let mut st = self.lock();
                if let Some(r) = st.reqs.get_mut(h) {
                    if r.waited {
                        r.dst.write(status);
                        st.reqs.remove(h);
                    } else {
                        r.done = true;
                        r.status = status;
                    }
                }
            }
            None => op.status.write(status),
        }
        self.comm_ops.done(op.comm, op.comm_slot);
        self.pending.fetch_sub(1, Ordering::AcqRel);
        self.incomplete.fetch_sub(1, Ordering::AcqRel);
    }

    /// Completes blocking operation `op`, never registered: it completed on the enqueuing thread
    /// before its enqueue call returned, so no count ever had to show it.
    pub fn complete_unregistered(&self, op: &Op, status: MPI_Status, err: Option<c_int>) {
        debug_assert!(op.request.is_none());
        op.status.write(self.settle(op, status, err));
    }

    /// `status` with `err` in it; a failure is recorded for the stream's next call.
    fn settle(&self, op: &Op, mut status: MPI_Status, err: Option<c_int>) -> MPI_Status {
        if let Some(code) = err {
            status.MPI_ERROR = code;
            self.record_error(format!(
                "{} on communicator 0x{:08x} (enqueued {}, stream 0x{:08x}): {}",
                op.func,
                op.comm as u32,
                op.kind().name(),
                self.stream as u32,
                crate::errors::error_string(code)
            ));
        }
        status
    }

    pub fn take_error(&self) -> Option<String> {
        if !self.has_error.load(Ordering::Acquire) {
            return None;
        }
        let mut st = self.lock();
        self.has_error.store(false, Ordering::Release);
        st.error.take()
    }

    pub fn record_error(&self, msg: String) {
        mpixstream_wrappers::say!("mpixstream: {msg}");
        let mut st = self.lock();
        if st.error.is_none() {
            st.error = Some(msg);
            self.has_error.store(true, Ordering::Release);
        }
    }
}

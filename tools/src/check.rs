//! `MPIXSTREAM_CHECK`: the explicit policy asserts that each communicator is used by one thread at a
//! time; on the native backend its stream is a reserved VCI that MPICH does not lock, so two threads on
//! it corrupt MPICH's state silently. We check it: each stream has an owner slot, set (compare-and-swap
//! from 0 to the calling thread's id) when a call on one of its communicators enters and cleared when
//! it leaves. A second thread finding the slot taken is a violation: we print the first one (the
//! communicator, both threads, both calls) and abort the job with `MPI_Abort` before the second thread
//! reaches MPICH.
//!
//! Below the interposers (`counting`), above the records (`state`): what it needs from the setup (the
//! pool's size, this rank) it is given by [`init`].
use crate::state::CommRec;
use crate::thread::thread_id;
use mpixstream_wrappers::mpi::Comm;
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Who is inside a call on one stream right now.
#[derive(Default)]
pub struct Owner {
    /// The owning thread's id (0: free).
    thread: AtomicU32,
    /// Odd while the owner writes `call_*` (a seqlock: a reader takes the pair only from one call).
    version: AtomicU32,
    /// The owner's call (a `&'static str`'s address and length, 0 once it left), for the violation
    /// message.
    call_ptr: AtomicUsize,
    call_len: AtomicUsize,
    comm: AtomicI32,
}

impl Owner {
    /// Sets the call, as the slot's owner (the only writer: it holds `thread`).
    #[inline]
    fn set_call(&self, call: &'static str) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.call_ptr.store(call.as_ptr() as usize, Ordering::Relaxed);
        self.call_len.store(call.len(), Ordering::Relaxed);
        self.version.store(v.wrapping_add(2), Ordering::Release);
    }

    /// The owner's call, where one is set: the address and length written together by one `set_call`.
    fn call(&self) -> Option<&'static str> {
        let v = self.version.load(Ordering::Acquire);
        let (p, n) = (self.call_ptr.load(Ordering::Relaxed), self.call_len.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if v & 1 == 1 || self.version.load(Ordering::Relaxed) != v || p == 0 || n == 0 {
            return None;
        }
        // SAFETY: the version was even and unchanged around the loads, so (p, n) are the address and
        // length one `set_call` stored from one `&'static str` (it writes both between two version
        // changes): `n` bytes readable for the rest of the process.
        std::str::from_utf8(unsafe { std::slice::from_raw_parts(p as *const u8, n) }).ok()
    }
}

/// Owner slots, one per stream of the pool (set once, at `MPI_Init`).
static OWNERS: OnceLock<Box<[Owner]>> = OnceLock::new();
/// This rank in `MPI_COMM_WORLD`, for the violation message (-1: unknown).
static RANK: AtomicI32 = AtomicI32::new(-1);

/// Prepares the owner slots of a pool of `pool` streams, on rank `rank`.
pub fn init(pool: usize, rank: i32) {
    RANK.store(rank, Ordering::Relaxed);
    let _ = OWNERS.set((0..pool).map(|_| Owner::default()).collect());
}

/// Holds the owner slots a call took; releases them when the call returns.
pub struct Guard {
    held: [Option<&'static Owner>; 4],
    more: Vec<&'static Owner>,
}

impl Guard {
    const NONE: Guard = Guard { held: [None; 4], more: Vec::new() };

    fn push(&mut self, o: &'static Owner) {
        match self.held.iter_mut().find(|h| h.is_none()) {
            Some(slot) => *slot = Some(o),
            None => self.more.push(o),
        }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        for o in self.held.iter().flatten().chain(self.more.iter()) {
            o.set_call("");
            o.thread.store(0, Ordering::Release);
        }
    }
}

#[inline]
fn owner_of(rec: &CommRec) -> Option<&'static Owner> {
    let i = rec.checked_stream? as usize;
    OWNERS.get()?.get(i)
}

/// Enters a call on `rec`'s communicator.
#[inline]
pub fn enter(call: &'static str, rec: Option<&'static CommRec>) -> Guard {
    let mut g = Guard::NONE;
    if let Some(r) = rec {
        take(&mut g, call, r);
    }
    g
}

/// Enters a call that drives several operations (`MPI_Waitall`…): takes each distinct stream's slot.
pub fn enter_many(call: &'static str, recs: impl Iterator<Item = &'static CommRec>) -> Guard {
    let mut g = Guard::NONE;
    for r in recs {
        take(&mut g, call, r);
    }
    g
}

#[inline]
fn take(g: &mut Guard, call: &'static str, rec: &'static CommRec) {
    let Some(owner) = owner_of(rec) else { return };
    let me = thread_id();
    match owner.thread.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => {
            owner.comm.store(rec.handle, Ordering::Relaxed);
            owner.set_call(call);
            g.push(owner);
        }
        // Ours already (a call that takes several requests of one stream, or re-entry): nothing to do.
        Err(cur) if cur == me => {}
        Err(other) => violation(call, rec, owner, other),
    }
}

/// The lean library found the endpoint of a call on `rec`'s communicator owned by another thread: a
/// violation if another thread is inside a checked call on that stream now (else the owner is a thread
/// of the library's, for one progress turn, and the call simply waits for it).
pub fn contended(call: &'static str, rec: &'static CommRec) {
    let Some(owner) = owner_of(rec) else { return };
    let other = owner.thread.load(Ordering::Acquire);
    if other != 0 && other != thread_id() {
        violation(call, rec, owner, other);
    }
}

static REPORTED: AtomicBool = AtomicBool::new(false);

#[cold]
#[inline(never)]
fn violation(call: &'static str, rec: &CommRec, owner: &Owner, other: u32) -> ! {
    if REPORTED.swap(true, Ordering::AcqRel) {
        // Someone is already aborting the job: never enter MPICH on this stream meanwhile.
        loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The other thread stores its call name just after taking the slot: give it a moment.
    let mut other_call = None;
    for _ in 0..1000 {
        other_call = owner.call();
        if other_call.is_some() {
            break;
        }
        std::hint::spin_loop();
    }
    let other_comm = owner.comm.load(Ordering::Relaxed);
    let rank = RANK.load(Ordering::Relaxed);
    let stream = rec.stream.map_or("-".to_string(), |s| s.to_string());
    let vci = rec.vci.map_or("unknown".to_string(), |v| v.to_string());
    let same = if other_comm == rec.handle {
        "the same communicator".to_string()
    } else {
        format!("communicator 0x{:08x}, which shares the stream", other_comm as u32)
    };
    // On the MPI standard ABI the handle is a pointer (`wide`).
    let handle = if rec.wide != 0 { rec.wide as u64 } else { rec.handle as u32 as u64 };
    // A multiplex communicator's index on its stream's endpoint has the same rule (docs/multiplex.md).
    let (what, rule) = match rec.multiplex.and_then(|m| m.index) {
        Some(index) => (
            format!(
                "index {index} of multiplex communicator 0x{:08x} (id {}, stream {stream}, VCI {vci})",
                handle, rec.id
            ),
            "An index of a multiplex communicator is used by one thread at a time, as its stream is",
        ),
        None => (
            format!(
                "communicator 0x{:08x} (id {}, stream {stream}, {} stream, VCI {vci})",
                handle,
                rec.id,
                rec.origin.name()
            ),
            "The explicit endpoint policy needs each communicator used by one thread at a time",
        ),
    };
    let msg = format!(
        "mpixstream check: [rank {rank}] {what} used by two threads at once: \
         thread {} entered {call} while thread {other} was in {} on {same}. \
         {rule} ({why}); aborting.\n",
        thread_id(),
        other_call.unwrap_or("an MPI call"),
        why = if mpixstream_wrappers::abi::standard() {
            "on the standard ABI's serial model the library still locks it, but a native stream would be an endpoint MPI does not lock"
        } else {
            "its stream is an endpoint MPICH does not lock"
        },
    );
    // One write(2): the job is about to be torn down (this rank's abort, or another rank's), and a
    // message written in pieces was seen cut off after its first piece.
    mpixstream_wrappers::say::whole(&msg);
    // Hydra's proxy forwards a rank's stderr from its event loop, and tears the job down at once on an
    // abort: without a pause the message was lost in 4 of 20 runs of tests/c/check_bad.c (nothing in
    // the output at all). The violating call never reaches MPICH: the job ends 0.3 s later.
    std::thread::sleep(std::time::Duration::from_millis(300));
    if mpixstream_wrappers::abi::standard() {
        // The standard ABI's MPI_Abort, on its own MPI_COMM_WORLD (a pointer-wide handle).
        if let Ok(m) = mpixstream_wrappers::std_mpi::mpi() {
            m.abort(mpixstream_wrappers::std_mpi::COMM_WORLD, 3);
        }
    } else {
        let _ = Comm::WORLD.abort(3);
    }
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owners_call_is_one_whole_name() {
        let o: &'static Owner = Box::leak(Box::default());
        assert_eq!(o.call(), None);
        o.set_call("MPI_Send");
        assert_eq!(o.call(), Some("MPI_Send"));
        o.set_call("");
        assert_eq!(o.call(), None);
        // A writer switching between names of different lengths: a reader sees one of them whole.
        let writer = std::thread::spawn(move || {
            for i in 0..100_000 {
                o.set_call(if i % 2 == 0 { "MPI_Waitall" } else { "MPI_Irecv_c_long_name_for_the_test" });
            }
        });
        while !writer.is_finished() {
            if let Some(c) = o.call() {
                assert!(c == "MPI_Waitall" || c == "MPI_Irecv_c_long_name_for_the_test", "{c}");
            }
        }
        writer.join().unwrap();
    }
}

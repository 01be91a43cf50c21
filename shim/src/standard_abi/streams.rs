//! Streams and the records of stream and multiplex communicators on the standard ABI (the serial model:
//! the library this ABI reaches has no streams, so a stream is a local object and every stream's traffic
//! shares the library's endpoints).
//!
//! - A stream is a slot of a bounded pool (`MPIXSTREAM_STREAMS`, as on MPICH's ABI, so a program that
//!   runs out there runs out here); its handle is the slot's address: pointer-wide like every handle of
//!   this ABI, never a valid handle of the library, and told from garbage by its range.
//! - A communicator's record (its stream, or its multiplex layout) is an MPI attribute under one keyval
//!   of ours: the library runs its delete callback on every destruction path of the communicator, so the
//!   record goes with it, and its copy callback on `MPI_Comm_dup`, so a dup of a stream communicator
//!   keeps the stream (as native MPICH's does).
use super::errors::Class;
use super::mpi::{self, H};
use mpixstream_wrappers::mpi::kept;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;

/// The most streams a pool can have (MPICH's limit on VCIs: `MPIXSTREAM_STREAMS` is below it).
const MAX_STREAMS: usize = mpixstream_wrappers::settings::MAX_VCIS as usize;

pub struct Slot {
    live: AtomicBool,
    /// The communicators that carry this stream (records of stream and multiplex communicators).
    comms: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot { live: AtomicBool::new(false), comms: AtomicUsize::new(0) };
static SLOTS: [Slot; MAX_STREAMS] = [FREE; MAX_STREAMS];
/// The pool's size: `MPIXSTREAM_STREAMS` (set at `MPI_Init*`).
static CAPACITY: AtomicUsize = AtomicUsize::new(mpixstream_wrappers::settings::DEFAULT_STREAMS as usize);

pub fn set_capacity(n: u32) {
    CAPACITY.store((n as usize).clamp(1, MAX_STREAMS), Ordering::Relaxed);
}

pub fn capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
}

/// The handle of stream `i`.
pub fn handle(i: usize) -> H {
    &SLOTS[i] as *const Slot as H
}

pub fn slot(i: usize) -> &'static Slot {
    &SLOTS[i]
}

/// A free stream, taken; `None` when the pool is exhausted.
pub fn allocate() -> Option<usize> {
    (0..capacity()).find(|&i| SLOTS[i].live.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok())
}

/// The streams taken (the application's and the policy's).
pub fn in_use() -> usize {
    (0..capacity()).filter(|&i| SLOTS[i].live.load(Ordering::Relaxed)).count()
}

pub fn release(i: usize) {
    SLOTS[i].live.store(false, Ordering::Release);
}

/// The stream of a non-null handle, or why it names none (class and text).
pub fn lookup(h: H) -> Result<usize, (Class, String)> {
    let base = SLOTS.as_ptr() as H;
    let size = std::mem::size_of::<Slot>();
    let i = h.wrapping_sub(base) / size;
    if h < base || i >= capacity() || !(h - base).is_multiple_of(size) {
        return Err((Class::Stream, format!("0x{h:x} is not a stream handle")));
    }
    if !SLOTS[i].live.load(Ordering::Acquire) {
        return Err((Class::Stream, format!("stream 0x{h:x} has been freed (or was never created)")));
    }
    Ok(i)
}

impl Slot {
    pub fn attached(&self) -> usize {
        self.comms.load(Ordering::Acquire)
    }
    pub fn attach(&self) {
        self.comms.fetch_add(1, Ordering::AcqRel);
    }
    pub fn detach(&self) {
        self.comms.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a communicator of ours carries.
pub enum Record {
    /// `MPIX_Stream_comm_create` (or a dup of one): its stream.
    Stream(usize),
    /// `MPIX_Stream_comm_create_multiplex`: its layout (`multiplex::Multiplex`, which sits above this
    /// module: seen here only as what its record's deletion releases).
    Multiplex(Box<dyn Layout>),
    /// A communicator of the application given a stream of its own by the explicit policy (`policy`).
    Policy(usize),
}

/// A multiplex communicator's layout, as its record holds it.
pub trait Layout: Send + Sync {
    /// At the communicator's destruction: its streams detached, its hidden communicators freed.
    fn release(self: Box<Self>);
    /// The layout itself, for `multiplex` to read back.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Policy streams given back with their communicators (the report's `policy_stats.retired`).
pub static POLICY_RETIRED: AtomicU64 = AtomicU64::new(0);

/// The state made at the first MPIX call: the records' keyval, and the private communicator on which
/// `MPIX_Stream_progress` drives the library's progress.
pub struct State {
    pub keyval: c_int,
    pub progress_comm: H,
}

static STATE: OnceLock<Result<State, String>> = OnceLock::new();

/// The keyval's copy callback (`MPI_Comm_dup` and the like): a stream communicator's dup carries the
/// stream too.
unsafe extern "C" fn copy_record(
    _comm: H,
    _keyval: c_int,
    _extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    mpixstream_wrappers::guard::guard_with("copy_record", mpi::ERR_OTHER, || {
        // SAFETY: `value_in` is the parent's attribute word of our keyval (`kept::give` in `attach`), held
        // by the library for the time of this callback, whose delete callback does not run meanwhile.
        let copy = unsafe {
            kept::lend::<Record, _>(value_in, |record| match &**record {
                Record::Stream(i) => Some(*i),
                // A dup of a multiplex communicator is a plain communicator here (its indexed calls are refused
                // as on any other): new hidden communicators would be collectives inside the library's dup.
                // A dup of a policy communicator gets its own stream from the policy, or none.
                Record::Multiplex(_) | Record::Policy(_) => None,
            })
        };
        let out = copy.map(|i| {
            SLOTS[i].attach();
            kept::give(&Arc::new(Record::Stream(i)))
        });
        // SAFETY: the library passes `value_out` (room for the new attribute word, a `void *`) and `flag`
        // (an `int`), both writable for the time of this callback (MPI's copy-callback contract).
        unsafe {
            match out {
                Some(given) => {
                    *(value_out as *mut *mut c_void) = given.word().0;
                    given.taken();
                    *flag = 1;
                }
                None => *flag = 0,
            }
        }
        mpi::SUCCESS
    })
}

/// The keyval's delete callback (every destruction of the communicator, `MPI_Comm_delete_attr`, and the
/// replacement of the attribute): the record goes, and what it holds.
unsafe extern "C" fn delete_record(_comm: H, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::guard_with("delete_record", mpi::ERR_OTHER, || {
        // SAFETY: `value` is our attribute word (`kept::give` in `attach` or `copy_record`); the library
        // runs this callback once per stored word, after which it no longer holds it: ours again.
        let record = unsafe { kept::take_back::<Record>(value) };
        // Each word is a record of its own (a copy makes a new one): this is its one reference.
        let Ok(record) = Arc::try_unwrap(record) else { return mpi::SUCCESS };
        match record {
            Record::Stream(i) => SLOTS[i].detach(),
            Record::Multiplex(mx) => mx.release(),
            // A policy communicator is gone: its stream goes back to the pool.
            Record::Policy(i) => {
                SLOTS[i].detach();
                release(i);
                POLICY_RETIRED.fetch_add(1, Ordering::Relaxed);
            }
        }
        mpi::SUCCESS
    })
}

/// The state, made on first use (local calls only: a keyval and a dup of `MPI_COMM_SELF`).
pub fn state() -> Result<&'static State, String> {
    STATE
        .get_or_init(|| {
            let m = mpi::mpi()?;
            let keyval = m
                .comm_create_keyval(Some(copy_record), Some(delete_record))
                .map_err(|rc| format!("MPI_Comm_create_keyval failed ({rc})"))?;
            let progress_comm =
                m.comm_dup(mpi::COMM_SELF).map_err(|rc| format!("MPI_Comm_dup(MPI_COMM_SELF) failed ({rc})"))?;
            Ok(State { keyval, progress_comm })
        })
        .as_ref()
        .map_err(|e| e.clone())
}

/// Attaches `record` to `comm` (where `comm` already has one, from the parent copied by the dup, the
/// library deletes that one first).
pub fn attach(st: &State, comm: H, record: Record) -> c_int {
    let Ok(m) = mpi::mpi() else { return mpi::ERR_OTHER };
    let value = kept::give(&Arc::new(record));
    let r = m.comm_set_attr(comm, st.keyval, value.word());
    match r {
        // The library refused the word and holds no copy: the record is ours again.
        Err(_) => drop(value.refused()),
        Ok(()) => value.taken(),
    }
    mpi::code(r)
}

/// `f` on the record of `comm` (`None`: it has none). The record is lent for the time of `f` only, which
/// must make no MPI call (an error handler could free the communicator, and its record with it): take
/// out what is needed, act after.
pub fn with_record<R>(st: &State, comm: H, f: impl FnOnce(Option<&Record>) -> R) -> R {
    let value = mpi::mpi().ok().and_then(|m| m.comm_get_attr(comm, st.keyval).ok().flatten());
    match value {
        // SAFETY: the word of our keyval on `comm` (`kept::give` in `attach`), which the library holds
        // while `comm` lives; `comm` is the program's communicator of the call being served (MPI forbids
        // freeing it meanwhile), and `f` makes no MPI call (this function's contract).
        Some(v) if !v.0.is_null() => unsafe { kept::lend::<Record, _>(v.0, |r| f(Some(r))) },
        _ => f(None),
    }
}

/// Whether `comm` carries a record of ours.
pub fn has_record(st: &State, comm: H) -> bool {
    with_record(st, comm, |r| r.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_handle_is_told_from_a_freed_one_and_from_garbage() {
        set_capacity(2);
        let a = allocate().expect("a stream");
        let b = allocate().expect("a second stream");
        assert!(allocate().is_none(), "a pool of 2 is exhausted");
        assert_eq!(lookup(handle(a)).ok(), Some(a));
        assert!(handle(a) > u32::MAX as usize || cfg!(target_pointer_width = "32"), "pointer-wide");
        release(b);
        let (class, e) = lookup(handle(b)).unwrap_err();
        assert!(class == Class::Stream && e.contains("has been freed"), "{e}");
        for garbage in [handle(a) + 1, handle(0) + capacity() * std::mem::size_of::<Slot>(), 0x101, 1] {
            let (_, e) = lookup(garbage).unwrap_err();
            assert!(e.contains("is not a stream handle"), "{garbage:x}: {e}");
        }
        release(a);
    }
}

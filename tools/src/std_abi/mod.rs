//! The report on the MPI standard ABI (`mpicc -mpi-abi`: handles are pointers, `mpi_abi.h`'s constants):
//! a state of its own, keyed by the pointer handles, so that MPICH's ABI path (`state`, `counting`,
//! keyed by MPICH's `int` handles) is untouched. The generated interposers call the hooks here (same
//! names and parameters as `counting`'s, handles pointer-wide) for the rows listed in
//! `prototype_codegen::STD_TOOLS_HOOKS` (point-to-point, matched probes and receives, the completions of
//! `MPI_Wait`/`Test`/`Waitall`/`Testall`, collectives); every other call passes through uncounted.
//!
//! The records are `state::CommRec`s (the report reads them as on MPICH's ABI), one per communicator
//! seen, with its stream from the lean library (`mpixstream_std_comm_stream`); a hidden communicator of
//! a multiplex communicator (`mpixstream_std_multiplex_of`) counts its sends under the multiplex
//! communicator's record of the local source index and its receives under the destination index's.
//! No VCI is known on this ABI. The check (`MPIXSTREAM_CHECK`): the hooks enter `check` on the records
//! whose stream it covers (mode 1: the explicit policy's; 2: every stream), with every nonblocking
//! operation on such a communicator tracked to its completion, as on MPICH's ABI.
//!
//! The calls into the library go through the typed methods of this ABI's table
//! (`mpixstream_wrappers::std_mpi`). A handle of this ABI is a pointer the library follows, so the
//! handles passed are only this ABI's predefined constants and the program's own, from the call being
//! counted (MPI requires them valid: the program's call passes them to the library just the same).
use crate::profile::ThreadSet;
use crate::state::{CommRec, Counters, MultiplexPart, VciSource};
use mpixstream_wrappers::mpi::Opaque;
use mpixstream_wrappers::std_mpi::{self, Mpi};
use mpixstream_wrappers::tools::StreamOrigin as Origin;
use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, RwLock};

mod hooks;
pub use hooks::*;

type H = usize;

pub use mpixstream_wrappers::abi::Status;

use std_mpi::{
    BYTE, COMM_NULL, COMM_SELF, COMM_WORLD, ERR_IN_STATUS, MESSAGE_NO_PROC, MESSAGE_NULL, PROC_NULL, REQUEST_NULL,
    SUCCESS,
};

/// The standard ABI's table (`mpixstream_wrappers::std_mpi`), where the program's library serves it.
fn mpi() -> Option<&'static Mpi> {
    std_mpi::mpi().ok()
}

/// The records a communicator's traffic goes to: sends and receives (the same record but on a hidden
/// communicator of a multiplex communicator).
#[derive(Clone, Copy)]
struct Pair {
    send: &'static CommRec,
    recv: &'static CommRec,
}

struct Registry {
    live: HashMap<H, Pair>,
    all: Vec<&'static CommRec>,
    multiplex: HashMap<(H, Option<u32>), &'static CommRec>,
}

static ON: AtomicBool = AtomicBool::new(false);
/// `MPIXSTREAM_CHECK`: 0 off, 1 policy communicators, 2 every communicator with a stream (`check`).
static CHECK: AtomicU8 = AtomicU8::new(0);
static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);
static EPOCH: AtomicU64 = AtomicU64::new(1);
static KEYVAL: AtomicI32 = AtomicI32::new(0);
/// Operations in flight that we count (receives) or check (any, on a checked communicator): request
/// handle to (record, whether a receive).
static REQUESTS: Mutex<Option<HashMap<H, (&'static CommRec, bool)>>> = Mutex::new(None);
/// Matched messages (`MPI_Improbe`) not yet received.
static MESSAGES: Mutex<Option<HashMap<H, &'static CommRec>>> = Mutex::new(None);

thread_local! {
    /// The last communicator this thread counted on, the epoch it was looked up in, and its records.
    static CACHE: Cell<(H, u64, Option<Pair>)> = const { Cell::new((0, 0, None)) };
}

#[inline]
fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// At `MPI_Init` (the lean library's call), when the report or the check is asked for (`check`: its
/// mode): the records are prepared.
pub fn init(check: u8) -> bool {
    CHECK.store(check, Ordering::Relaxed);
    let Some(m) = mpi() else {
        mpixstream_wrappers::say_once!("mpixstream-tools: cannot find the standard ABI's MPI functions; no report");
        return false;
    };
    if let Ok(kv) = m.comm_create_keyval(None, Some(comm_deleted)) {
        KEYVAL.store(kv, Ordering::Release);
    }
    *REGISTRY.write().unwrap_or_else(|e| e.into_inner()) =
        Some(Registry { live: HashMap::new(), all: Vec::new(), multiplex: HashMap::new() });
    ON.store(true, Ordering::Release);
    true
}

pub fn stop() {
    ON.store(false, Ordering::Release);
}

pub fn all_records() -> Vec<&'static CommRec> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner()).as_ref().map_or_else(Vec::new, |r| r.all.clone())
}

/// The keyval's delete callback: the communicator is gone; its records are retired (kept for the report).
unsafe extern "C" fn comm_deleted(comm: H, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::guard_with("comm_deleted", SUCCESS, || {
        let r = value as *const CommRec;
        if let Some(reg) = REGISTRY.write().unwrap_or_else(|e| e.into_inner()).as_mut() {
            if let Some(p) = reg.live.get(&comm) {
                if std::ptr::eq(p.send, r) || std::ptr::eq(p.recv, r) {
                    reg.live.remove(&comm);
                }
            }
            reg.multiplex.retain(|_, &mut x| !std::ptr::eq(x, r));
        }
        // SAFETY: the word `rec_slow` stored under our keyval: a record of `new_rec`, leaked (`&'static`,
        // never freed), so live whatever the library does with the communicator.
        if let Some(r) = unsafe { r.as_ref() } {
            r.freed.store(true, Ordering::Release);
        }
        EPOCH.fetch_add(1, Ordering::AcqRel);
        SUCCESS
    })
}

#[inline]
fn rec(comm: H) -> Option<Pair> {
    let epoch = EPOCH.load(Ordering::Acquire);
    if let (h, e, Some(p)) = CACHE.with(|c| c.get()) {
        if h == comm && e == epoch {
            return Some(p);
        }
    }
    let p = rec_slow(comm)?;
    CACHE.with(|c| c.set((comm, epoch, Some(p))));
    Some(p)
}

fn comm_name(m: &Mpi, comm: H) -> String {
    match comm {
        COMM_WORLD => return "MPI_COMM_WORLD".into(),
        COMM_SELF => return "MPI_COMM_SELF".into(),
        _ => {}
    }
    m.comm_get_name(comm).unwrap_or_default()
}

fn new_rec(
    reg: &mut Registry,
    handle: H,
    name: String,
    size: c_int,
    stream: Option<u32>,
    origin: Origin,
    part: Option<MultiplexPart>,
) -> &'static CommRec {
    let r: &'static CommRec = Box::leak(Box::new(CommRec {
        id: reg.all.len() as u32,
        handle: handle as i32,
        wide: handle,
        name,
        size,
        stream,
        origin,
        vci: None,
        vci_source: VciSource::Unknown,
        seen: AtomicU64::new(0),
        made: None,
        identity: None,
        // The serial model: every communicator and stream on the MPI library's shared endpoint.
        endpoint: AtomicU16::new(0),
        threads: ThreadSet::default(),
        checked_stream: match CHECK.load(Ordering::Relaxed) {
            1 if origin == Origin::Policy => stream,
            2 => stream,
            _ => None,
        },
        multiplex: part,
        freed: AtomicBool::new(false),
        counters: Counters::default(),
    }));
    reg.all.push(r);
    r
}

#[cold]
fn rec_slow(comm: H) -> Option<Pair> {
    if comm == 0 || comm == COMM_NULL {
        return None;
    }
    if let Some(reg) = REGISTRY.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if let Some(p) = reg.live.get(&comm) {
            return Some(*p);
        }
    }
    let m = mpi()?;
    let q = mpixstream_wrappers::lean_query::get();
    let size = m.comm_size(comm).ok()?;
    let multiplex = q.std_multiplex_of(comm);
    let hidden = multiplex.is_some();
    let (user, ix) = multiplex.unwrap_or((0, [-1; 4]));
    let (stream, origin_code) = if hidden { (-1, 0) } else { q.std_comm_stream(comm) };
    let handle = if hidden { user } else { comm };
    let name = comm_name(m, handle);
    let opt = |v: c_int| (v >= 0).then_some(v as u32);
    let mut guard = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let reg = guard.as_mut()?;
    if let Some(p) = reg.live.get(&comm) {
        return Some(*p);
    }
    let pair = if hidden {
        let mut part = |index: c_int, stream: c_int| -> &'static CommRec {
            let key = (user, opt(index));
            if let Some(r) = reg.multiplex.get(&key) {
                return r;
            }
            let r = new_rec(
                reg,
                user,
                name.clone(),
                size,
                opt(stream),
                Origin::Multiplex,
                Some(MultiplexPart { index: opt(index) }),
            );
            reg.multiplex.insert(key, r);
            r
        };
        // An index this process does not have carries nothing here: the other one's record serves.
        match (ix[0] >= 0, ix[1] >= 0) {
            (true, true) => {
                let send = part(ix[0], ix[2]);
                Pair { send, recv: part(ix[1], ix[3]) }
            }
            (true, false) => {
                let r = part(ix[0], ix[2]);
                Pair { send: r, recv: r }
            }
            (false, true) => {
                let r = part(ix[1], ix[3]);
                Pair { send: r, recv: r }
            }
            (false, false) => {
                let r = part(-1, -1);
                Pair { send: r, recv: r }
            }
        }
    } else {
        let r = new_rec(reg, comm, name, size, opt(stream), Origin::from_code(origin_code), None);
        Pair { send: r, recv: r }
    };
    reg.live.insert(comm, pair);
    drop(guard);
    if comm != COMM_WORLD && comm != COMM_SELF {
        let kv = KEYVAL.load(Ordering::Acquire);
        if kv != 0 {
            // The hidden communicators' own value: either of its records (both are the multiplex
            // communicator's, retired with it).
            let _ = m.comm_set_attr(comm, kv, Opaque(pair.recv as *const CommRec as *mut c_void));
        }
    }
    Some(pair)
}

/// Rank and size in the standard ABI's `MPI_COMM_WORLD`.
pub fn world() -> (c_int, c_int) {
    let (mut rank, mut size) = (0, 1);
    if let Some(m) = mpi() {
        // A failed call leaves the default, as it always did.
        rank = m.comm_rank(COMM_WORLD).unwrap_or(rank);
        size = m.comm_size(COMM_WORLD).unwrap_or(size);
    }
    (rank, size)
}

/// Every rank's bytes to rank 0 of the standard ABI's `MPI_COMM_WORLD` (`report::gather_slices` with
/// this ABI's `MPI_Gather`/`MPI_Gatherv`).
pub fn gather(bytes: &[u8], rank: c_int, size: c_int) -> Option<Vec<Vec<u8>>> {
    let m = mpi()?;
    crate::report::gather_slices(
        bytes,
        rank,
        size,
        |mine, all| m.gather_ints(mine, all, 0, COMM_WORLD).is_ok(),
        |mine, all, lens, displs| m.gatherv_bytes(mine, all, lens, displs, 0, COMM_WORLD).is_ok(),
    )
}

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
use crate::profile::ThreadSet;
use crate::shim::Origin;
use crate::state::{CommRec, Counters, MultiplexPart, VciSource};
use mpixstream_wrappers::abi;
use mpixstream_wrappers::ffi::{MPI_Message, MPI_Request, MPI_Status};
use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

mod hooks;
pub use hooks::*;

type H = usize;

/// `mpi_abi.h`'s `MPI_Status`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Status {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    internal: [c_int; 5],
}

const SUCCESS: c_int = 0;
const ERR_IN_STATUS: c_int = 19;
const PROC_NULL: c_int = -3;
const COMM_NULL: H = 0x100;
const COMM_WORLD: H = 0x101;
const COMM_SELF: H = 0x102;
const REQUEST_NULL: H = 0x180;
const MESSAGE_NULL: H = 0x128;
const MESSAGE_NO_PROC: H = 0x129;
const BYTE: H = 0x247;
const INT: H = 0x209;

type DeleteFn = unsafe extern "C" fn(H, c_int, *mut c_void, *mut c_void) -> c_int;

macro_rules! table {
    ($($name:ident: fn($($arg:ty),*);)*) => {
        #[allow(non_snake_case)]
        pub struct Mpi {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> c_int,)*
        }

        fn load() -> Option<Mpi> {
            Some(Mpi {
                $($name: {
                    let f = abi::lookup(
                        std::ffi::CStr::from_bytes_with_nul(concat!("PMPI_", stringify!($name), "\0").as_bytes()).ok()?,
                    );
                    if f.is_null() {
                        return None;
                    }
                    // SAFETY: the symbol of that name, whose prototype in mpi_abi.h is this field's.
                    unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> c_int>(f) }
                },)*
            })
        }
    };
}

table! {
    Comm_rank: fn(H, *mut c_int);
    Comm_size: fn(H, *mut c_int);
    Comm_get_name: fn(H, *mut c_char, *mut c_int);
    Comm_create_keyval: fn(*mut c_void, Option<DeleteFn>, *mut c_int, *mut c_void);
    Comm_set_attr: fn(H, c_int, *mut c_void);
    Type_size_c: fn(H, *mut i64);
    Get_count_c: fn(*const Status, H, *mut i64);
    Gather: fn(*const c_void, c_int, H, *mut c_void, c_int, H, c_int, H);
    Gatherv: fn(*const c_void, c_int, H, *mut c_void, *const c_int, *const c_int, H, c_int, H);
}

static MPI: OnceLock<Option<Mpi>> = OnceLock::new();

fn mpi() -> Option<&'static Mpi> {
    MPI.get_or_init(load).as_ref()
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
    static CACHE: Cell<(H, u64, *const CommRec, *const CommRec)> =
        const { Cell::new((0, 0, std::ptr::null(), std::ptr::null())) };
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
        eprintln!("mpixstream-tools: cannot find the standard ABI's MPI functions; no report");
        return false;
    };
    let mut kv = 0;
    if unsafe { (m.Comm_create_keyval)(std::ptr::null_mut(), Some(comm_deleted), &mut kv, std::ptr::null_mut()) }
        == SUCCESS
    {
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

unsafe extern "C" fn comm_deleted(comm: H, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    let r = value as *const CommRec;
    if let Some(reg) = REGISTRY.write().unwrap_or_else(|e| e.into_inner()).as_mut() {
        if let Some(p) = reg.live.get(&comm) {
            if std::ptr::eq(p.send, r) || std::ptr::eq(p.recv, r) {
                reg.live.remove(&comm);
            }
        }
        reg.multiplex.retain(|_, &mut x| !std::ptr::eq(x, r));
    }
    if !r.is_null() {
        (*r).freed.store(true, Ordering::Release);
    }
    EPOCH.fetch_add(1, Ordering::AcqRel);
    SUCCESS
}

#[inline]
fn rec(comm: H) -> Option<Pair> {
    let epoch = EPOCH.load(Ordering::Acquire);
    let (h, e, s, r) = CACHE.with(|c| c.get());
    if h == comm && e == epoch && !s.is_null() {
        return Some(unsafe { Pair { send: &*s, recv: &*r } });
    }
    let p = rec_slow(comm)?;
    CACHE.with(|c| c.set((comm, epoch, p.send as *const CommRec, p.recv as *const CommRec)));
    Some(p)
}

type StdCommStream = unsafe extern "C" fn(usize, *mut c_int) -> c_int;
type StdMultiplexOf = unsafe extern "C" fn(usize, *mut usize, *mut [c_int; 4]) -> c_int;

struct Query {
    comm_stream: Option<StdCommStream>,
    multiplex_of: Option<StdMultiplexOf>,
}

fn query() -> &'static Query {
    static Q: OnceLock<Query> = OnceLock::new();
    Q.get_or_init(|| unsafe {
        let sym = |n: &std::ffi::CStr| libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr());
        let a = sym(c"mpixstream_std_comm_stream");
        let b = sym(c"mpixstream_std_multiplex_of");
        Query {
            comm_stream: (!a.is_null()).then(|| std::mem::transmute::<*mut c_void, StdCommStream>(a)),
            multiplex_of: (!b.is_null()).then(|| std::mem::transmute::<*mut c_void, StdMultiplexOf>(b)),
        }
    })
}

fn comm_name(m: &Mpi, comm: H) -> String {
    match comm {
        COMM_WORLD => return "MPI_COMM_WORLD".into(),
        COMM_SELF => return "MPI_COMM_SELF".into(),
        _ => {}
    }
    let mut buf = [0 as c_char; 257];
    let mut len = 0;
    if unsafe { (m.Comm_get_name)(comm, buf.as_mut_ptr(), &mut len) } != SUCCESS {
        return String::new();
    }
    let bytes: Vec<u8> = buf[..(len.clamp(0, 256) as usize)].iter().map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
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
    let q = query();
    let mut size = 0;
    if unsafe { (m.Comm_size)(comm, &mut size) } != SUCCESS {
        return None;
    }
    let (mut user, mut ix) = (0usize, [-1 as c_int; 4]);
    let hidden = q.multiplex_of.is_some_and(|f| unsafe { f(comm, &mut user, &mut ix) } == 1);
    let mut origin_code = 0;
    let stream = if hidden { -1 } else { q.comm_stream.map_or(-1, |f| unsafe { f(comm, &mut origin_code) }) };
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
            unsafe { (m.Comm_set_attr)(comm, kv, pair.recv as *const CommRec as *mut c_void) };
        }
    }
    Some(pair)
}

/// Rank and size in the standard ABI's `MPI_COMM_WORLD`.
pub fn world() -> (c_int, c_int) {
    let (mut rank, mut size) = (0, 1);
    if let Some(m) = mpi() {
        unsafe {
            (m.Comm_rank)(COMM_WORLD, &mut rank);
            (m.Comm_size)(COMM_WORLD, &mut size);
        }
    }
    (rank, size)
}

/// Every rank's bytes to rank 0 of the standard ABI's `MPI_COMM_WORLD` (`report::gather_parts` with
/// this ABI's `PMPI_Gather`/`PMPI_Gatherv`).
pub unsafe fn gather(bytes: &[u8], rank: c_int, size: c_int) -> Option<Vec<Vec<u8>>> {
    let m = mpi()?;
    crate::report::gather_parts(
        bytes,
        rank,
        size,
        |mine, all| unsafe {
            (m.Gather)(mine as *const c_void, 1, INT, all as *mut c_void, 1, INT, 0, COMM_WORLD) == SUCCESS
        },
        |mine, len, all, lens, displs| unsafe {
            (m.Gatherv)(mine, len, BYTE, all, lens, displs, BYTE, 0, COMM_WORLD) == SUCCESS
        },
    )
}

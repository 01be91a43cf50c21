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
//! The calls into the library go through the typed methods of this ABI's own table ([`Mpi`], one
//! argument for them all in `call!`). A handle of this ABI is a pointer the library follows, so the
//! handles passed are only this ABI's predefined constants and the program's own, from the call being
//! counted (MPI requires them valid: the program's call passes them to the library just the same).
use crate::profile::ThreadSet;
use crate::shim::Origin;
use crate::state::{CommRec, Counters, MultiplexPart, VciSource};
use mpixstream_wrappers::abi;
use mpixstream_wrappers::ffi::{MPI_Message, MPI_Request, MPI_Status};
use mpixstream_wrappers::mpi::{MpiResult, Opaque};
use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

mod hooks;
pub use hooks::*;

type H = usize;

pub use mpixstream_wrappers::abi::Status;

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
        /// The resolved functions; called only through the typed methods below.
        #[allow(non_snake_case)]
        pub struct Mpi {
            $($name: unsafe extern "C" fn($($arg),*) -> c_int,)*
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

/// `rc` as a result.
fn check(rc: c_int) -> MpiResult {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Calls the table's `name` with `args` and gives its return code. Used only in [`Mpi`]'s methods.
macro_rules! call {
    ($m:ident . $name:ident ( $($arg:expr),* $(,)? )) => {{
        let f = $m.$name;
        // SAFETY: `f` is the program's library's `PMPI_<name>`, looked up by that name in `load`, with the
        // prototype of `mpi_abi.h` (MPI-5's standard ABI). The methods below pass values, handles that are
        // predefined constants or the program's for the call being counted (the module comment: valid, as
        // MPI requires), pointers to live Rust values of the prototype's C types valid for the whole call,
        // and, in the methods with a `# Safety` section only, buffers under its obligations. The library keeps
        // none of these pointers past the call; the attribute word and the callback it stores by value.
        unsafe { f($($arg),*) }
    }};
}

impl Mpi {
    fn comm_rank(&self, comm: H) -> MpiResult<c_int> {
        let mut r = 0;
        check(call!(self.Comm_rank(comm, &mut r)))?;
        Ok(r)
    }

    fn comm_size(&self, comm: H) -> MpiResult<c_int> {
        let mut n = 0;
        check(call!(self.Comm_size(comm, &mut n)))?;
        Ok(n)
    }

    /// The communicator's name as the library keeps it.
    fn comm_get_name(&self, comm: H) -> MpiResult<String> {
        let mut buf = [0 as c_char; 257];
        let mut len = 0;
        check(call!(self.Comm_get_name(comm, buf.as_mut_ptr(), &mut len)))?;
        let bytes: Vec<u8> = buf[..(len.clamp(0, 256) as usize)].iter().map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `MPI_Comm_create_keyval` with no copy callback (`MPI_COMM_NULL_COPY_FN`, the null pointer on this
    /// ABI) and `delete`.
    fn comm_create_keyval(&self, delete: Option<DeleteFn>) -> MpiResult<c_int> {
        let mut kv = 0;
        check(call!(self.Comm_create_keyval(std::ptr::null_mut(), delete, &mut kv, std::ptr::null_mut())))?;
        Ok(kv)
    }

    /// Sets attribute `keyval` of `comm` to `value`, a word the library stores and hands back to the
    /// keyval's delete callback.
    fn comm_set_attr(&self, comm: H, keyval: c_int, value: Opaque) -> MpiResult {
        check(call!(self.Comm_set_attr(comm, keyval, value.0)))
    }

    /// `MPI_Type_size_c`.
    fn type_size(&self, datatype: H) -> MpiResult<i64> {
        let mut size = 0i64;
        check(call!(self.Type_size_c(datatype, &mut size)))?;
        Ok(size)
    }

    /// `MPI_Get_count_c` of a status the library filled.
    fn get_count(&self, status: &Status, datatype: H) -> MpiResult<i64> {
        let mut n = 0i64;
        check(call!(self.Get_count_c(status, datatype, &mut n)))?;
        Ok(n)
    }

    /// `MPI_Gather` of one `int` per process to `root` of `comm`.
    ///
    /// # Safety
    /// `mine` is readable (one `int`); `all`, at `root`, writable for one `int` per process of `comm`.
    unsafe fn gather_int(&self, mine: *const c_int, all: *mut c_int, root: c_int, comm: H) -> MpiResult {
        check(call!(self.Gather(mine.cast(), 1, INT, all.cast(), 1, INT, root, comm)))
    }

    /// `MPI_Gatherv` of bytes to `root` of `comm`.
    ///
    /// # Safety
    /// `mine` is readable for `len` bytes; at `root`, `lens` and `displs` readable for one `int` per
    /// process of `comm`, and `all` writable for every part they place.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gatherv_bytes(
        &self,
        mine: *const c_void,
        len: c_int,
        all: *mut c_void,
        lens: *const c_int,
        displs: *const c_int,
        root: c_int,
        comm: H,
    ) -> MpiResult {
        check(call!(self.Gatherv(mine, len, BYTE, all, lens, displs, BYTE, root, comm)))
    }
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
        eprintln!("mpixstream-tools: cannot find the standard ABI's MPI functions; no report");
        return false;
    };
    if let Ok(kv) = m.comm_create_keyval(Some(comm_deleted)) {
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

type StdCommStream = unsafe extern "C" fn(usize, *mut c_int) -> c_int;
type StdMultiplexOf = unsafe extern "C" fn(usize, *mut usize, *mut [c_int; 4]) -> c_int;

struct Query {
    comm_stream: Option<StdCommStream>,
    multiplex_of: Option<StdMultiplexOf>,
}

impl Query {
    /// The lean library's query functions, where it is loaded.
    fn get() -> &'static Query {
        static Q: OnceLock<Query> = OnceLock::new();
        Q.get_or_init(|| {
            // SAFETY: `dlsym` of terminated names in the global scope; a symbol found is the lean library's
            // function of that name (shim/src/query.rs), whose signature is the type's.
            unsafe {
                let sym = |n: &std::ffi::CStr| libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr());
                let a = sym(c"mpixstream_std_comm_stream");
                let b = sym(c"mpixstream_std_multiplex_of");
                Query {
                    comm_stream: (!a.is_null()).then(|| std::mem::transmute::<*mut c_void, StdCommStream>(a)),
                    multiplex_of: (!b.is_null()).then(|| std::mem::transmute::<*mut c_void, StdMultiplexOf>(b)),
                }
            }
        })
    }

    /// Where `comm` is a hidden communicator of a multiplex communicator: that communicator, and the
    /// local send and receive indices and their streams (-1: none).
    fn multiplex_of(&self, comm: H) -> Option<(H, [c_int; 4])> {
        let f = self.multiplex_of?;
        let (mut user, mut ix) = (0usize, [-1 as c_int; 4]);
        // SAFETY: the lean library's `mpixstream_std_multiplex_of`, given a handle and two live out values
        // of its parameter types.
        (unsafe { f(comm, &mut user, &mut ix) } == 1).then_some((user, ix))
    }

    /// The stream `comm` carries (-1: none) and who attached it (a `StreamOrigin` code).
    fn comm_stream(&self, comm: H) -> (c_int, c_int) {
        let Some(f) = self.comm_stream else { return (-1, 0) };
        let mut origin = 0;
        // SAFETY: the lean library's `mpixstream_std_comm_stream`, given a handle and a live `int`.
        let stream = unsafe { f(comm, &mut origin) };
        (stream, origin)
    }
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
    let q = Query::get();
    let size = m.comm_size(comm).ok()?;
    let multiplex = q.multiplex_of(comm);
    let hidden = multiplex.is_some();
    let (user, ix) = multiplex.unwrap_or((0, [-1; 4]));
    let (stream, origin_code) = if hidden { (-1, 0) } else { q.comm_stream(comm) };
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

/// Every rank's bytes to rank 0 of the standard ABI's `MPI_COMM_WORLD` (`report::gather_parts` with
/// this ABI's `PMPI_Gather`/`PMPI_Gatherv`).
///
/// # Safety
/// None: its body is safe. It keeps the marker only while its caller (`mpixstream_tools_finalize` in
/// lib.rs, converted separately) wraps it in a closure, which clippy would otherwise find redundant; make
/// it safe with that call site.
pub unsafe fn gather(bytes: &[u8], rank: c_int, size: c_int) -> Option<Vec<Vec<u8>>> {
    let m = mpi()?;
    crate::report::gather_parts(
        bytes,
        rank,
        size,
        // SAFETY: `gather_parts` passes its own buffers: `mine` one `int`, `all` one per process of
        // `MPI_COMM_WORLD` at rank 0 (`size`, the world's size).
        |mine, all| unsafe { m.gather_int(mine, all, 0, COMM_WORLD) }.is_ok(),
        // SAFETY: `gather_parts` passes its own buffers: `mine` of `len` bytes, and at rank 0 the lengths
        // and displacements of every process's part in `all`, which holds them all.
        |mine, len, all, lens, displs| unsafe { m.gatherv_bytes(mine, len, all, lens, displs, 0, COMM_WORLD) }.is_ok(),
    )
}

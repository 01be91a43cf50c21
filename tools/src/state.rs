//! The tools library's state: what is switched on, one record per communicator seen (counters and its
//! stream mapping; one per index for a multiplex communicator's indexed traffic), and the requests,
//! matched messages and persistent requests whose completion or starts we must attribute.
//!
//! The bottom of the tools library (above only the query API of `shim` and `thread`): it calls nothing
//! above it; `lib.rs` starts and stops it, and writes the report from what it holds.
use crate::handle_map::HandleMap;
use crate::profile::{self, Slot, ThreadSet};
use crate::round_robin::{self, Made};
use crate::thread::thread_id;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::{self, RequestPools};
use mpixstream_wrappers::lean_query;
use mpixstream_wrappers::mpi::{self, comm, Comm, Datatype, Opaque};
use mpixstream_wrappers::pmpi;
use mpixstream_wrappers::settings::{Check, Config, Report};
use mpixstream_wrappers::tools::Description;
use mpixstream_wrappers::tools::StreamOrigin as Origin;
use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::{OnceLock, RwLock};

/// Any of counting or checking is on (the interposers' first test).
static ON: AtomicBool = AtomicBool::new(false);
static REPORT: AtomicBool = AtomicBool::new(false);
/// 0 off; 1 communicators whose stream the explicit policy attached; 2 every communicator with a stream.
static CHECK: AtomicU8 = AtomicU8::new(0);

#[inline]
pub fn on() -> bool {
    #[cfg(test)]
    if PANIC_FOR_TEST.with(|p| p.get()) {
        panic!("provoked by a unit test");
    }
    ON.load(Ordering::Relaxed)
}

// Unit tests only (nothing in a release build): every hook starts with `on`, which then panics,
// proving that the generated interposers run under the panic guard.
#[cfg(test)]
thread_local! {
    pub static PANIC_FOR_TEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
#[inline]
pub fn report_on() -> bool {
    REPORT.load(Ordering::Relaxed)
}
#[inline]
pub fn check_mode() -> u8 {
    CHECK.load(Ordering::Relaxed)
}

/// Traffic of one communicator, as seen from this rank.
#[derive(Default)]
pub struct Counters {
    pub sent_msgs: AtomicU64,
    pub sent_bytes: AtomicU64,
    pub recv_msgs: AtomicU64,
    pub recv_bytes: AtomicU64,
    pub collectives: AtomicU64,
    /// Starts of persistent requests made on the communicator, by `StartKind`.
    pub starts: [AtomicU64; StartKind::ALL.len()],
}

/// What a persistent request starts, told by the name of the call that made it: the report counts
/// `MPI_Start`/`MPI_Startall` per kind (their messages are MPICH's, as a collective's are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind {
    /// `MPI_Send_init`, `Ssend_init`, `Rsend_init`, `Bsend_init` (and `_c`).
    Send = 0,
    /// `MPI_Recv_init` (and `_c`).
    Recv = 1,
    /// `MPI_Psend_init`, `MPI_Precv_init`.
    Partitioned = 2,
    /// The persistent collectives (`MPI_Barrier_init`, `MPI_Allreduce_init`, `MPI_Neighbor_*_init`…).
    Collective = 3,
}

impl StartKind {
    pub const ALL: [StartKind; 4] = [StartKind::Send, StartKind::Recv, StartKind::Partitioned, StartKind::Collective];

    /// The kind of the requests `constructor` (`"MPI_Send_init"`…) makes.
    pub fn of(constructor: &str) -> StartKind {
        let n = constructor.to_ascii_lowercase();
        let n = n.trim_end_matches("_c");
        match n {
            "mpi_psend_init" | "mpi_precv_init" => StartKind::Partitioned,
            _ if n.ends_with("send_init") => StartKind::Send,
            _ if n.ends_with("recv_init") => StartKind::Recv,
            _ => StartKind::Collective,
        }
    }

    /// The report's key.
    pub fn name(self) -> &'static str {
        match self {
            StartKind::Send => "send",
            StartKind::Recv => "recv",
            StartKind::Partitioned => "partitioned",
            StartKind::Collective => "collective",
        }
    }
}

/// Set on a record of a multiplex communicator's indexed traffic: the local index whose stream
/// carried it (`None`: the hidden communicators on MPICH's implicit pool, which carry any index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MultiplexPart {
    pub index: Option<u32>,
}

/// One communicator as first seen by a communication call. Records are never freed (the report lists
/// freed communicators too), so a reference to one stays valid; each is on its own cache line, so threads
/// that each use their own communicator never share one.
#[repr(align(64))]
pub struct CommRec {
    /// Creation order on this rank (the report's `id`).
    pub id: u32,
    pub handle: MPI_Comm,
    /// On the MPI standard ABI, the handle (a pointer; `handle` is then its low bits); 0 on MPICH's.
    pub wide: usize,
    pub name: String,
    pub size: c_int,
    pub stream: Option<u32>,
    pub origin: Origin,
    /// Where we know it: the VCI its traffic runs on (and how we know it).
    pub vci: Option<u32>,
    pub vci_source: VciSource,
    /// The VCIs MPICH made its requests from (bit per VCI; `handles::request_pool`): MPICH's own word.
    pub seen: AtomicU64,
    /// How MPICH's round robin numbered it, where the model knows (`round_robin`).
    pub made: Option<Made>,
    /// Its identity from run to run (`comm_identity`: root, constructors, numbers of the calls), where
    /// the lean library keeps one: the guided policy's key.
    pub identity: Option<String>,
    /// The profile's endpoint slot for its calls: its VCI's, or an unnamed one; moved to the VCI its
    /// requests name where that differs.
    pub endpoint: AtomicU16,
    /// The threads that called on it (the profile).
    pub threads: ThreadSet,
    /// The stream whose one-thread check covers calls on it: its own, or, for the plain base of a
    /// policy communicator (which carries that communicator's nonblocking collectives), the policy
    /// communicator's; None where the check does not apply.
    pub checked_stream: Option<u32>,
    /// A multiplex communicator's indexed traffic through one endpoint: then `handle` and `name` are
    /// the multiplex communicator's, and every hidden communicator that carries that traffic on this
    /// rank shares this one record.
    pub multiplex: Option<MultiplexPart>,
    pub freed: AtomicBool,
    pub counters: Counters,
}

/// How a record's `vci` was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VciSource {
    /// Its stream's (the lean library's mapping).
    Stream,
    /// The only endpoint there is (MPICH's implicit pool of one VCI).
    OnlyOne,
    /// MPICH's round robin over its implicit pool, as `round_robin` counts it.
    RoundRobin,
    /// Not known.
    Unknown,
}

impl VciSource {
    pub fn name(self) -> &'static str {
        match self {
            VciSource::Stream => "stream",
            VciSource::OnlyOne => "one_vci",
            VciSource::RoundRobin => "round_robin",
            VciSource::Unknown => "unknown",
        }
    }
}

impl CommRec {
    /// The profile's endpoint slot of a call on this communicator.
    #[inline]
    pub fn slot(&self) -> Slot {
        self.endpoint.load(Ordering::Relaxed)
    }

    /// A nonblocking operation on it made request `h`: where the handle names a VCI, remember it, and
    /// count the calls of a communicator without a stream on that endpoint from now on.
    #[inline]
    pub fn note_request(&self, h: MPI_Request) {
        let Some(v) = handles::request_pool(h, request_pools()) else { return };
        let bit = 1u64.checked_shl(v).unwrap_or(0);
        if bit == 0 || self.seen.load(Ordering::Relaxed) & bit != 0 {
            return;
        }
        self.seen.fetch_or(bit, Ordering::Relaxed);
        if self.stream.is_none() {
            self.endpoint.store(profile::named(v), Ordering::Relaxed);
        }
    }

    /// The VCIs seen in its requests.
    pub fn seen_vcis(&self) -> Vec<u32> {
        let bits = self.seen.load(Ordering::Relaxed);
        (0..64).filter(|v| bits & (1 << v) != 0).collect()
    }

    #[inline]
    pub fn count_send(&self, count: MPI_Count, datatype: MPI_Datatype) {
        self.counters.sent_msgs.fetch_add(1, Ordering::Relaxed);
        self.counters.sent_bytes.fetch_add(bytes_of(count, datatype), Ordering::Relaxed);
    }

    #[inline]
    pub fn count_start(&self, kind: StartKind) {
        self.counters.starts[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a completed receive from its status (`None`: ignored; skips `MPI_PROC_NULL` and failed
    /// receives).
    #[inline]
    pub fn count_recv(&self, status: Option<&MPI_Status>) {
        let Some(status) = status.filter(|s| s.MPI_SOURCE != MPI_PROC_NULL) else { return };
        let Ok(n) = mpi::datatype::get_count(status, Datatype::BYTE) else { return };
        if n < 0 {
            return;
        }
        self.counters.recv_msgs.fetch_add(1, Ordering::Relaxed);
        self.counters.recv_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
impl CommRec {
    /// A record as `rec` would make it, without asking MPI.
    pub fn for_test(handle: MPI_Comm) -> CommRec {
        CommRec {
            id: 0,
            handle,
            wide: 0,
            name: String::new(),
            size: 1,
            stream: None,
            origin: Origin::None,
            vci: None,
            vci_source: VciSource::Unknown,
            seen: AtomicU64::new(0),
            made: None,
            identity: None,
            endpoint: AtomicU16::new(0),
            threads: ThreadSet::default(),
            checked_stream: None,
            multiplex: None,
            freed: AtomicBool::new(false),
            counters: Counters::default(),
        }
    }
}

#[inline]
fn bytes_of(count: MPI_Count, datatype: MPI_Datatype) -> u64 {
    if count <= 0 {
        return 0;
    }
    match Datatype(datatype).size() {
        Ok(size) if size >= 0 => (count as u64).saturating_mul(size as u64),
        _ => 0,
    }
}

/// What the lean library told us at `MPI_Init`.
pub struct Setup {
    pub description: Option<Description>,
    pub report_path: Option<String>,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

pub fn setup() -> Option<&'static Setup> {
    SETUP.get()
}

struct Registry {
    live: HashMap<MPI_Comm, &'static CommRec>,
    all: Vec<&'static CommRec>,
    /// The records of multiplex traffic, by (multiplex communicator, index): `live` maps each hidden
    /// communicator to one of these.
    multiplex: HashMap<(MPI_Comm, Option<u32>), &'static CommRec>,
}

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);
/// Bumped whenever a communicator is freed, so per-thread caches never return a record for a handle
/// MPICH has since reused.
static EPOCH: AtomicU64 = AtomicU64::new(1);
static KEYVAL: AtomicI32 = AtomicI32::new(0);

thread_local! {
    /// The calling thread's last lookup: (handle, epoch, record). The record is a leaked box, so the
    /// `'static` reference is what it is.
    static CACHE: Cell<(MPI_Comm, u64, Option<&'static CommRec>)> = const { Cell::new((0, 0, None)) };
}

/// The record of `comm`, created at its first use; None for a handle that is not a communicator (the
/// call then goes to MPICH untouched, which reports the error as it would have).
#[inline]
pub fn rec(comm: MPI_Comm) -> Option<&'static CommRec> {
    let epoch = EPOCH.load(Ordering::Acquire);
    let (h, e, cached) = CACHE.with(|c| c.get());
    if let (true, Some(r)) = (h == comm && e == epoch, cached) {
        return Some(r);
    }
    let r = rec_slow(comm)?;
    CACHE.with(|c| c.set((comm, epoch, Some(r))));
    Some(r)
}

#[cold]
fn rec_slow(comm: MPI_Comm) -> Option<&'static CommRec> {
    if !handles::is_comm(comm) {
        return None;
    }
    if let Some(reg) = REGISTRY.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if let Some(r) = reg.live.get(&comm) {
            return Some(r);
        }
    }
    // First use: learn what we can outside the lock (MPI calls), then insert.
    let s = lean_query::get();
    // A hidden communicator of a multiplex communicator (the lean library's indexed traffic): recorded
    // under that communicator and the index whose stream it carries here.
    let part = s.multiplex_of(comm);
    let (stream, origin) = s.comm_stream(comm);
    let origin = if part.is_some() { Origin::Multiplex } else { origin };
    // On the split backend a multiplex index's traffic runs on endpoints of its own, one per hidden
    // communicator, not on its stream's: no single endpoint to show.
    let d = setup().and_then(|st| st.description);
    let split = d.is_some_and(|d| d.backend == 2);
    let made = round_robin::of(comm);
    let identity = s.comm_identity(comm);
    let (vci, vci_source) = match stream {
        Some(_) if part.is_some() && split => (None, VciSource::Unknown),
        Some(i) => (s.stream_vci(i), VciSource::Stream),
        // Without a stream, a communicator is on MPICH's implicit pool: VCI 0 when the pool has one VCI,
        // else where MPICH's round robin puts it (counted under the implicit policy only: the explicit
        // one makes communicators of its own that the count does not see).
        None => match d.map(|d| (implicit_vcis().unwrap_or(d.implicit_vcis), d.policy)) {
            Some((1, _)) => (Some(0), VciSource::OnlyOne),
            Some((n, p)) if n > 1 && (p == 0 || comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF) => {
                (made.map(|m| round_robin::vci(m, n as u32)), VciSource::RoundRobin)
            }
            _ => (None, VciSource::Unknown),
        },
    };
    let vci_source = if vci.is_none() { VciSource::Unknown } else { vci_source };
    let checked_stream = match check_mode() {
        1 if origin == Origin::Policy => stream,
        1 | 2 if stream.is_none() => s.base_owner_stream(comm),
        2 => stream,
        _ => None,
    };
    let size = Comm(comm).size().unwrap_or(0);
    let handle = part.map_or(comm, |(user, _)| user);
    let name = comm_name(handle);
    let predefined = comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF;
    let mut guard = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let reg = guard.as_mut()?;
    if let Some(r) = reg.live.get(&comm) {
        return Some(r);
    }
    let shared = part.and_then(|key| reg.multiplex.get(&key).copied());
    let r: &'static CommRec = match shared {
        Some(r) => r,
        None => {
            let r: &'static CommRec = Box::leak(Box::new(CommRec {
                id: reg.all.len() as u32,
                handle,
                wide: 0,
                name,
                size,
                stream,
                origin,
                vci,
                vci_source,
                seen: AtomicU64::new(0),
                made,
                identity,
                endpoint: AtomicU16::new(vci.map_or_else(profile::unnamed, profile::named)),
                threads: ThreadSet::default(),
                checked_stream,
                multiplex: part.map(|(_, index)| MultiplexPart { index }),
                freed: AtomicBool::new(false),
                counters: Counters::default(),
            }));
            reg.all.push(r);
            if let Some(key) = part {
                reg.multiplex.insert(key, r);
            }
            r
        }
    };
    reg.live.insert(comm, r);
    drop(guard);
    if !predefined {
        // Learn of its MPI_Comm_free (the lean library owns that symbol): an attribute whose delete
        // callback MPICH runs when the communicator goes.
        let keyval = KEYVAL.load(Ordering::Acquire);
        if keyval != 0 {
            // The record's address, which MPICH hands back to `comm_deleted` (it never follows it).
            let _ = Comm(comm).set_attr(keyval, Opaque(r as *const CommRec as *mut c_void));
        }
    }
    Some(r)
}

fn comm_name(comm: MPI_Comm) -> String {
    if comm == MPI_COMM_WORLD {
        return "MPI_COMM_WORLD".into();
    }
    if comm == MPI_COMM_SELF {
        return "MPI_COMM_SELF".into();
    }
    Comm(comm).name().unwrap_or_default()
}

/// MPICH calls this when a communicator we saw is freed.
///
/// # Safety
/// `value` is null or the attribute `rec_slow` set on `comm` (MPICH passes it back unchanged; the copy
/// function is NULL, so no other communicator carries it): the address of a record.
unsafe extern "C" fn comm_deleted(comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    mpixstream_wrappers::guard::ffi_guard("comm_deleted", || {
        let r = value as *const CommRec;
        round_robin::freed(comm);
        if let Some(reg) = REGISTRY.write().unwrap_or_else(|e| e.into_inner()).as_mut() {
            if reg.live.get(&comm).is_some_and(|&x| std::ptr::eq(x, r)) {
                reg.live.remove(&comm);
            }
            // A multiplex communicator's hidden ones go together: a later one with the same handle gets
            // records of its own.
            reg.multiplex.retain(|_, &mut x| !std::ptr::eq(x, r));
        }
        // SAFETY: by the contract, a non-null `r` is the address of a record, a leaked box (records are
        // never freed), so it points to a live `CommRec` and a shared reference to it is sound.
        if let Some(rec) = unsafe { r.as_ref() } {
            rec.freed.store(true, Ordering::Release);
        }
        EPOCH.fetch_add(1, Ordering::AcqRel);
        MPI_SUCCESS
    })
}

/// How request handles name their VCI on the MPI library loaded (`RequestPools` as a `u8`), and
/// whether the process has a single endpoint (every request is on it).
static POOLS: AtomicU8 = AtomicU8::new(0);
static ONE_ENDPOINT: AtomicBool = AtomicBool::new(false);
/// MPICH's implicit pool as MPICH runs it (`MPIR_CVAR_CH4_NUM_VCIS`, read back); 0: unknown.
static IMPLICIT_VCIS: AtomicI32 = AtomicI32::new(0);

/// MPICH's implicit VCIs in force: read back from MPICH, else what the lean library said.
pub fn implicit_vcis() -> Option<i32> {
    let n = IMPLICIT_VCIS.load(Ordering::Relaxed);
    if n > 0 {
        Some(n)
    } else {
        setup().and_then(|s| s.description).map(|d| d.implicit_vcis)
    }
}

#[inline]
fn request_pools() -> RequestPools {
    match POOLS.load(Ordering::Relaxed) {
        1 => RequestPools::Bits20,
        2 => RequestPools::Flagged,
        _ => RequestPools::None,
    }
}

/// Whether a point-to-point request's handle tells its endpoint (`request_slot`); where it does not,
/// the profile follows such requests in the table as it does receives.
#[inline]
pub fn requests_name_endpoints() -> bool {
    ONE_ENDPOINT.load(Ordering::Relaxed) || request_pools() != RequestPools::None
}

/// The profile's slot of a request we do not follow: the VCI its handle names, or the one endpoint.
#[inline]
pub fn request_slot(h: MPI_Request) -> Option<Slot> {
    if h == MPI_REQUEST_NULL || handles::is_builtin(h) {
        return None;
    }
    if ONE_ENDPOINT.load(Ordering::Relaxed) {
        return Some(0);
    }
    handles::request_pool(h, request_pools()).map(profile::named)
}

/// (major, minor) of the MPICH the lean library describes ("MPICH 5.0.2, netmod …").
pub fn mpich_version(d: &Description) -> Option<(u32, u32)> {
    let text = crate::text::cstr(&d.library);
    let mut parts = text.strip_prefix("MPICH ")?.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A nonblocking operation whose completion we attribute (receives, for their size) or check (any
/// operation on a checked communicator).
#[derive(Clone, Copy)]
pub struct ReqInfo {
    pub rec: &'static CommRec,
    pub recv: bool,
    /// A started persistent request: complete when its call says so, its handle stays (it does not
    /// become `MPI_REQUEST_NULL`).
    pub persistent: bool,
    /// Unique per tracked operation: a completion removes only its own entry, even if MPICH has already
    /// handed the same request handle to another thread's new operation.
    pub seq: u64,
}

/// A persistent request: the record of the communicator it was made on, and what it starts.
#[derive(Clone, Copy)]
pub struct Persistent {
    pub rec: &'static CommRec,
    pub kind: StartKind,
    /// A persistent send's message (count, datatype), counted as sent at each start; `None` for the
    /// other kinds and for a send to `MPI_PROC_NULL`.
    pub send: Option<(MPI_Count, MPI_Datatype)>,
}

static MESSAGES: OnceLock<HandleMap<&'static CommRec>> = OnceLock::new();
static PERSISTENT: OnceLock<HandleMap<Persistent>> = OnceLock::new();

pub fn messages() -> &'static HandleMap<&'static CommRec> {
    MESSAGES.get_or_init(HandleMap::default)
}
/// Persistent requests from their constructor to their `MPI_Request_free`.
pub fn persistent() -> &'static HandleMap<Persistent> {
    PERSISTENT.get_or_init(HandleMap::default)
}

thread_local! {
    static SEQ: Cell<u64> = const { Cell::new(0) };
}

pub fn next_seq() -> u64 {
    let n = SEQ.with(|s| {
        let v = s.get() + 1;
        s.set(v);
        v
    });
    ((thread_id() as u64) << 32) ^ n
}

/// Reads the settings and, when counting or checking is asked for, resolves the MPI entry points and
/// prepares the records; returns the setup then. Nothing is counted until [`start`].
pub fn init() -> Option<&'static Setup> {
    // The one strict parser of both libraries (the lean library has already stopped MPI_Init on a
    // malformed value; this reads the same values).
    let settings = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            mpixstream_wrappers::say_once!("mpixstream-tools: {e}; counters and checks are off");
            return None;
        }
    };
    let report = match settings.report {
        Report::Off => None,
        Report::On => Some(format!("mpixstream-report.{}.json", std::process::id())),
        Report::To(path) => Some(path),
    };
    let check = match settings.check {
        Check::Off => 0,
        Check::Policy => 1,
        Check::All => 2,
    };
    if report.is_none() && check == 0 {
        return None;
    }
    let Ok(_) = pmpi::load() else {
        mpixstream_wrappers::say_once!("mpixstream-tools: cannot find the MPI library; counters and checks are off");
        return None;
    };
    let description = lean_query::get().describe();
    if description.is_none() {
        mpixstream_wrappers::say_once!(
            "mpixstream-tools: libmpixstream.so is not active in this process; no stream mapping"
        );
    }
    // Copy function NULL (MPI_COMM_NULL_COPY_FN): a duplicate does not inherit our record.
    if let Ok(kv) = comm::create_keyval((None, Some(comm_deleted)), Opaque(std::ptr::null_mut())) {
        KEYVAL.store(kv, Ordering::Release);
    }
    let report_path = report;
    if let Some(d) = description.as_ref() {
        let version = mpich_version(d);
        let pools = version.map_or(RequestPools::None, |(major, minor)| RequestPools::of_mpich(major, minor));
        // The lean library writes MPICH's implicit pool only where it reserves streams: read it back.
        let n = version
            .and_then(|_| mpixstream_wrappers::mpi::tool_interface::read_int(c"MPIR_CVAR_CH4_NUM_VCIS"))
            .filter(|&n| n >= 1)
            .unwrap_or(d.implicit_vcis);
        IMPLICIT_VCIS.store(n, Ordering::Relaxed);
        POOLS.store(
            match pools {
                RequestPools::None => 0,
                RequestPools::Bits20 => 1,
                RequestPools::Flagged => 2,
            },
            Ordering::Relaxed,
        );
        ONE_ENDPOINT.store(d.backend == 0 && n == 1, Ordering::Relaxed);
        if report_path.is_some() {
            round_robin::start(n > 1 && pools != RequestPools::None && d.policy == 0);
        }
    }
    let setup = SETUP.get_or_init(|| Setup { description, report_path });
    *REGISTRY.write().unwrap_or_else(|e| e.into_inner()) =
        Some(Registry { live: HashMap::new(), all: Vec::new(), multiplex: HashMap::new() });
    REPORT.store(setup.report_path.is_some(), Ordering::Relaxed);
    CHECK.store(check, Ordering::Relaxed);
    Some(setup)
}

/// Switches counting and checking on (after [`init`] and what depends on it).
pub fn start() {
    ON.store(true, Ordering::Release);
}

/// Switches them off (at `MPI_Finalize`, after the report).
pub fn stop() {
    ON.store(false, Ordering::Release);
}

/// Every record, in creation order.
pub fn all_records() -> Vec<&'static CommRec> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner()).as_ref().map_or_else(Vec::new, |r| r.all.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_record_for_what_is_not_a_communicator() {
        // Decided by the handle's shape, before any MPI call (none is possible here).
        assert!(rec(MPI_COMM_NULL).is_none());
        assert!(rec(MPI_REQUEST_NULL).is_none());
        assert!(rec(12345).is_none());
    }

    #[test]
    fn start_kinds_follow_the_constructor() {
        for (name, kind) in [
            ("MPI_Send_init", StartKind::Send),
            ("MPI_Ssend_init_c", StartKind::Send),
            ("MPI_Rsend_init", StartKind::Send),
            ("MPI_Bsend_init_c", StartKind::Send),
            ("MPI_Recv_init", StartKind::Recv),
            ("MPI_Recv_init_c", StartKind::Recv),
            ("MPI_Psend_init", StartKind::Partitioned),
            ("MPI_Precv_init", StartKind::Partitioned),
            ("MPI_Barrier_init", StartKind::Collective),
            ("MPI_Allreduce_init_c", StartKind::Collective),
            ("MPI_Neighbor_alltoallw_init", StartKind::Collective),
            ("MPI_Reduce_scatter_block_init", StartKind::Collective),
        ] {
            assert_eq!(StartKind::of(name), kind, "{name}");
        }
    }
}

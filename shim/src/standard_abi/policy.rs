//! The explicit policy on the standard ABI (serial model) and what the tools library asks of it.
//!
//! Every stream shares the library's endpoints here, so the policy is bookkeeping: each communicator the
//! application makes with a blocking intracommunicator constructor (`MPI_Comm_dup`, `_with_info`,
//! `split`, `split_type`, `create`, `create_group`) gets a stream of its own from the pool, in a record
//! of origin `Policy` (`streams::Record::Policy`): `MPIX_Comm_get_stream` returns it, the report shows
//! it, and the stream goes back to the pool with the communicator (its record's delete callback).
//! Where messages go does not change. A communicator that already carries the application's stream (a
//! dup of a stream communicator: the library copied its record) keeps it; a nonblocking constructor or an
//! intercommunicator is left without one, and so is every communicator once the pool is exhausted, as on
//! MPICH's ABI. The communicators the MPIX implementation makes itself are `PMPI_*` calls, never seen here.
use super::mpi::{self, H};
use super::streams::{self, Record};
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::tools::Description;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

static EXPLICIT: AtomicBool = AtomicBool::new(false);

/// The policy's counters (the report's `policy_stats`).
pub struct Stats {
    pub attached: AtomicU64,
    pub exhausted: AtomicU64,
    pub nonblocking: AtomicU64,
    pub intercomm: AtomicU64,
    pub multiplex: AtomicU64,
}

pub static STATS: Stats = Stats {
    attached: AtomicU64::new(0),
    exhausted: AtomicU64::new(0),
    nonblocking: AtomicU64::new(0),
    intercomm: AtomicU64::new(0),
    multiplex: AtomicU64::new(0),
};

/// What `MPI_Init*` learned, for the tools library's `mpixstream_describe`.
pub struct Setup {
    pub explicit: bool,
    pub rank: c_int,
    pub size: c_int,
    /// The standard ABI's thread level, as MPICH's constant (0 to 3).
    pub thread_level: c_int,
    pub library: String,
    pub reason: String,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

/// At `MPI_Init*` (after the library's).
pub fn init(setup: Setup) {
    EXPLICIT.store(setup.explicit, Ordering::Relaxed);
    let _ = SETUP.set(setup);
}

/// The standard ABI's `MPI_THREAD_*` (0, 1024, 2048, 4096) as MPICH's (0 to 3).
pub fn thread_level_as_mpich(level: c_int) -> c_int {
    match level {
        0 => 0,
        1024 => 1,
        2048 => 2,
        4096 => 3,
        _ => -1,
    }
}

/// A communicator constructor of the application on the standard ABI: `create` makes it (the library's
/// call, arguments unchanged); under the explicit policy a blocking intracommunicator gets a stream.
/// `newcomm`: the program's output argument of the constructor, where `create` writes the new handle.
pub fn comm_constructed(kind: CommCtor, _parent: H, newcomm: AppArg<H>, create: impl FnOnce() -> c_int) -> c_int {
    let rc = create();
    if rc != mpi::SUCCESS || !EXPLICIT.load(Ordering::Relaxed) {
        return rc;
    }
    let Some(comm) = newcomm.get() else { return rc };
    if comm == mpi::COMM_NULL {
        return rc;
    }
    if !kind.is_blocking() {
        STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
        return rc;
    }
    let (Ok(m), Ok(st)) = (mpi::mpi(), streams::state()) else { return rc };
    if m.comm_test_inter(comm) != Ok(false) {
        STATS.intercomm.fetch_add(1, Ordering::Relaxed);
        return rc;
    }
    // A dup of a stream communicator keeps the application's stream (its record, copied by the dup).
    if streams::has_record(st, comm) {
        return rc;
    }
    let Some(i) = streams::allocate() else {
        STATS.exhausted.fetch_add(1, Ordering::Relaxed);
        return rc;
    };
    streams::slot(i).attach();
    if streams::attach(st, comm, Record::Policy(i)) != mpi::SUCCESS {
        streams::slot(i).detach();
        streams::release(i);
        STATS.exhausted.fetch_add(1, Ordering::Relaxed);
    } else {
        STATS.attached.fetch_add(1, Ordering::Relaxed);
    }
    rc
}

fn copy_str(dst: &mut [c_char], src: &str) {
    let n = src.len().min(dst.len() - 1);
    for (d, &b) in dst.iter_mut().zip(src.as_bytes()[..n].iter()) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// `mpixstream_describe` on the standard ABI: the serial model (backend 0), no VCIs known (-1).
pub fn describe(d: &mut Description) -> c_int {
    let Some(s) = SETUP.get() else { return -1 };
    d.backend = 0;
    d.policy = s.explicit as c_int;
    d.pool = streams::capacity() as c_int;
    d.implicit_vcis = -1;
    d.thread_level = s.thread_level;
    d.rank = s.rank;
    d.nranks = s.size;
    d.streams_in_use = streams::in_use() as c_int;
    d.policy_attached = STATS.attached.load(Ordering::Relaxed);
    d.policy_exhausted = STATS.exhausted.load(Ordering::Relaxed);
    d.policy_nonblocking = STATS.nonblocking.load(Ordering::Relaxed);
    d.policy_intercomm = STATS.intercomm.load(Ordering::Relaxed);
    d.policy_unserved = 0;
    d.policy_retired = streams::POLICY_RETIRED.load(Ordering::Relaxed);
    d.policy_twins = 0;
    d.multiplex_on_streams = 0;
    d.multiplex_pooled = STATS.multiplex.load(Ordering::Relaxed);
    copy_str(&mut d.library, &s.library);
    copy_str(&mut d.backend_reason, &s.reason);
    0
}

/// The stream `comm` carries and who attached it (`StreamOrigin` codes: 1 the application, 2 the
/// policy), or `None`. A hidden communicator of a multiplex communicator is `multiplex::hidden_of`'s.
pub fn comm_stream(comm: H) -> Option<(usize, c_int)> {
    let st = streams::state().ok()?;
    streams::with_record(st, comm, |r| match r? {
        Record::Stream(i) => Some((*i, 1)),
        Record::Policy(i) => Some((*i, 2)),
        Record::Multiplex(_) => None,
    })
}

//! Objects made on a stream communicator's plain twin: windows (`MPI_Win_create`, `_allocate`,
//! `_allocate_shared`, `_create_dynamic` and the `_c` forms), files (`MPI_File_open`) and distributed
//! graphs (`MPI_Dist_graph_create`).
//!
//! Native MPICH serves these objects through waits that turn only its implicit pool: a window's fence,
//! lock and flush progress skip the reserved VCI of a native stream communicator's stream (MPICH's
//! `rma/` tests hang under the explicit policy without this), and so does the graph exchange of
//! `MPI_Dist_graph_create`. So where any process has the communicator as a native stream communicator,
//! every process makes the object on a plain twin instead: a split of the same group and ranks (MPICH
//! gives a split no stream) with the communicator's error handler, freed right after (the object keeps
//! its own duplicate). The object's traffic then runs on MPICH's implicit pool, as on a communicator
//! without a stream; the report counts such objects (`policy_stats.twins`) and docs/policy.md says so.
//!
//! An explicit-policy communicator's twin is its base, which every process keeps (`policy_base.rs`).
//! For another stream communicator (the application's own, whose record every member has, with a
//! stream or `MPIX_STREAM_NULL`: the choice is the same on every member without asking) the twin is a
//! split made for the object. On the serial backend, and for communicators without a record and
//! invalid handles (MPICH reports the error as it would), the call goes straight on.
use crate::backend::Backend;
use crate::comms::Origin;
use crate::native_fixes::native_streams::{native_stream_of, panic_for_test};
use crate::runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::next;
use mpixstream_wrappers::pmpi;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Objects made on a plain twin so far (the report's `policy_stats.twins`).
pub static TWINS: AtomicU64 = AtomicU64::new(0);

/// Runs `make` on `comm`, or on its plain twin where `comm` is a stream communicator (its record, the
/// same on every member, says so; collective over `comm` on the native backend, as the constructors it
/// serves are).
unsafe fn on_plain_twin(comm: MPI_Comm, make: impl FnOnce(MPI_Comm) -> c_int) -> c_int {
    panic_for_test();
    let Some(rt) = runtime::active().filter(|rt| rt.backend == Backend::Native) else { return make(comm) };
    let record = match rt.comms.get(comm) {
        Some(r) if matches!(r.origin, Origin::User | Origin::Policy) => r,
        _ => return make(comm),
    };
    // A policy communicator: its base, which every process keeps.
    if let Some(base) = record.base {
        let rc = make(base.comm);
        if rc == MPI_SUCCESS {
            TWINS.fetch_add(1, Ordering::Relaxed);
        }
        return rc;
    }
    let mut twin = {
        // A split of `comm`: inside its stream's endpoint, where this member has one.
        let _claim = native_stream_of(comm).map(|s| s.claim());
        match plain_split(comm) {
            Ok(twin) => twin,
            Err(rc) => return rc,
        }
    };
    let rc = make(twin);
    (pmpi::pmpi().PMPI_Comm_free)(&mut twin);
    if rc == MPI_SUCCESS {
        TWINS.fetch_add(1, Ordering::Relaxed);
    }
    rc
}

pub unsafe fn win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_create)(base, size, disp_unit, info, c, win))
}

pub unsafe fn win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_create_c)(base, size, disp_unit, info, c, win))
}

pub unsafe fn win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_allocate)(size, disp_unit, info, c, baseptr, win))
}

pub unsafe fn win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_allocate_c)(size, disp_unit, info, c, baseptr, win))
}

pub unsafe fn win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_allocate_shared)(size, disp_unit, info, c, baseptr, win))
}

pub unsafe fn win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_allocate_shared_c)(size, disp_unit, info, c, baseptr, win))
}

pub unsafe fn win_create_dynamic(info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_Win_create_dynamic)(info, c, win))
}

pub unsafe fn file_open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    on_plain_twin(comm, |c| next!(MPI_File_open)(c, filename, amode, info, fh))
}

/// `MPI_Dist_graph_create`: the topology communicator is made from the plain twin, so it is on the
/// implicit pool, as topology communicators are under the policy (docs/policy.md). It hung on a
/// native stream communicator (mpi4py's `testDistgraphcomm` under the explicit policy).
#[allow(clippy::too_many_arguments)]
pub unsafe fn dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights: *const c_int,
    info: MPI_Info,
    reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    on_plain_twin(comm_old, |c| {
        next!(MPI_Dist_graph_create)(c, n, sources, degrees, destinations, weights, info, reorder, comm_dist_graph)
    })
}

/// A plain communicator with `comm`'s group and ranks (a split: MPICH gives it no stream and no
/// attributes) and `comm`'s error handler. Collective over `comm`. The plain twin made here for an
/// application's stream communicator, and the base of a policy communicator (`policy::base`).
pub unsafe fn plain_split(comm: MPI_Comm) -> Result<MPI_Comm, c_int> {
    let p = pmpi::pmpi();
    let (mut rank, mut split) = (0, MPI_COMM_NULL);
    (p.PMPI_Comm_rank)(comm, &mut rank);
    let rc = (p.PMPI_Comm_split)(comm, 0, rank, &mut split);
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    give_errhandler(comm, split);
    Ok(split)
}

/// Gives `to` the error handler `from` has now.
pub(crate) unsafe fn give_errhandler(from: MPI_Comm, to: MPI_Comm) {
    let p = pmpi::pmpi();
    let mut handler: MPI_Errhandler = std::mem::zeroed();
    if (p.PMPI_Comm_get_errhandler)(from, &mut handler) == MPI_SUCCESS {
        (p.PMPI_Comm_set_errhandler)(to, handler);
        (p.PMPI_Errhandler_free)(&mut handler);
    }
}

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
use crate::forward;
use crate::native_fixes::native_streams::{native_stream_of, panic_for_test};
use crate::runtime;
use mpixstream_wrappers::app::{AppArg, AppIn, AppInArray};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, OwnedComm};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Objects made on a plain twin so far (the report's `policy_stats.twins`).
pub static TWINS: AtomicU64 = AtomicU64::new(0);

/// Runs `make` on `comm`, or on its plain twin where `comm` is a stream communicator (its record, the
/// same on every member, says so; collective over `comm` on the native backend, as the constructors it
/// serves are).
fn on_plain_twin(comm: MPI_Comm, make: impl FnOnce(MPI_Comm) -> c_int) -> c_int {
    panic_for_test();
    let Some(rt) = runtime::active().filter(|rt| rt.backend == Backend::Native) else { return make(comm) };
    let record = match rt.comms.get(comm) {
        Some(r) if matches!(r.origin, Origin::User | Origin::Policy) => r,
        _ => return make(comm),
    };
    // A policy communicator: its base, which every process keeps.
    if let Some(base) = record.base() {
        let rc = make(base.comm);
        if rc == MPI_SUCCESS {
            TWINS.fetch_add(1, Ordering::Relaxed);
        }
        return rc;
    }
    let twin = {
        // A split of `comm`: inside its stream's endpoint, where this member has one.
        let _claim = native_stream_of(comm).map(|s| s.claim());
        match plain_split(comm) {
            Ok(twin) => twin,
            Err(rc) => return rc,
        }
    };
    let rc = make(twin.raw());
    let _ = twin.free();
    if rc == MPI_SUCCESS {
        TWINS.fetch_add(1, Ordering::Relaxed);
    }
    rc
}

/// The constructors: each an interposer's body taking the application's arguments, which go on
/// unchanged to the next definition of the same call, on `$comm` or its twin (a communicator with the
/// same group and ranks).
macro_rules! twin_constructor {
    ($(#[$doc:meta])* $name:ident => $call:ident($($arg:ident: $ty:ty),* $(,)?) on $comm:ident) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name($($arg: $ty),*) -> c_int {
            on_plain_twin($comm, |$comm| forward::$call($($arg),*))
        }
    };
}

twin_constructor!(win_create => MPI_Win_create(
    base: AppArg<c_void>, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_create_c => MPI_Win_create_c(
    base: AppArg<c_void>, size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_allocate => MPI_Win_allocate(
    size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: AppArg<c_void>, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_allocate_c => MPI_Win_allocate_c(
    size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, baseptr: AppArg<c_void>, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_allocate_shared => MPI_Win_allocate_shared(
    size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: AppArg<c_void>, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_allocate_shared_c => MPI_Win_allocate_shared_c(
    size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, baseptr: AppArg<c_void>, win: AppArg<MPI_Win>,
) on comm);
twin_constructor!(win_create_dynamic => MPI_Win_create_dynamic(info: MPI_Info, comm: MPI_Comm, win: AppArg<MPI_Win>) on comm);
twin_constructor!(file_open => MPI_File_open(
    comm: MPI_Comm, filename: AppIn<c_char>, amode: c_int, info: MPI_Info, fh: AppArg<MPI_File>,
) on comm);
twin_constructor!(
    /// `MPI_Dist_graph_create`: the topology communicator is made from the plain twin, so it is on the
    /// implicit pool, as topology communicators are under the policy (docs/policy.md). It hung on a
    /// native stream communicator (mpi4py's `testDistgraphcomm` under the explicit policy).
    dist_graph_create => MPI_Dist_graph_create(
        comm_old: MPI_Comm,
        n: c_int,
        sources: AppInArray<c_int>,
        degrees: AppInArray<c_int>,
        destinations: AppInArray<c_int>,
        weights: AppInArray<c_int>,
        info: MPI_Info,
        reorder: c_int,
        comm_dist_graph: AppArg<MPI_Comm>,
    ) on comm_old
);

/// A plain communicator with `comm`'s group and ranks (a split: MPICH gives it no stream and no
/// attributes) and `comm`'s error handler. Collective over `comm`. The plain twin made here for an
/// application's stream communicator, and the base of a policy communicator (`policy::base`).
pub fn plain_split(comm: MPI_Comm) -> Result<OwnedComm, c_int> {
    let comm = Comm(comm);
    // A bad communicator fails the rank query and the split alike: the split reports it.
    let rank = comm.rank().unwrap_or(0);
    let split = comm.split(0, rank)?;
    give_errhandler(comm.raw(), split.raw());
    Ok(split)
}

/// Gives `to` the error handler `from` has now.
pub(crate) fn give_errhandler(from: MPI_Comm, to: MPI_Comm) {
    if let Ok(handler) = Comm(from).errhandler() {
        let _ = Comm(to).set_errhandler(*handler);
        let _ = handler.free();
    }
}

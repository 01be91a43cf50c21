//! MPICH's own endpoint for a communicator without a stream, where its implicit pool has several VCIs
//! (`MPIR_CVAR_CH4_NUM_VCIS` = n > 1, MPICH >= 4.1): round robin over communicators. Each process
//! counts the intracommunicators derived from `MPI_COMM_WORLD` that it commits (MPICH's `vci_seq`,
//! internal ones included); a new communicator takes the count of its rank 0, broadcast over it, as its
//! `seq` and runs on VCI `seq % n`. `MPI_COMM_WORLD` has seq 0; `MPI_COMM_SELF`, what is made from it,
//! and intercommunicators run on VCI 0. Commits per call, read in MPICH 5.0's source and measured on
//! 5.0.2 (request pools, `tests/scripts/profile_round_robin.sh` with the UCX probe): one per dup, idup,
//! split, create, create_group, topology constructor and window (its internal dup); two per
//! `MPI_Comm_split_type` (`MPI_COMM_TYPE_SHARED`: a temporary split, then the node split).
//!
//! Fed by the lean library (`mpixstream_tools_comm_created`, after each constructor it interposes) and by
//! the tools library's own interposers of the window and topology constructors ([`comm_made`],
//! [`comm_made_inside`]). Not seen, so not counted: the lean library's own communicators (the explicit
//! policy's, a multiplex communicator's hidden ones, MPIX stream communicators), files, spawn,
//! intercommunicator merges and `MPI_Cart_sub` (a split inside MPICH, not interposed here). Where the count is off, the requests disagree: the report shows the VCI
//! that MPICH's requests came from beside the model's.
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::handles::is_comm;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::Comm;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// How a communicator was made, as far as the model knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Made {
    /// MPICH's `seq` (its rank 0's count), 0 for what MPICH never numbers.
    pub seq: u32,
    /// Whether MPICH numbers it (derived from `MPI_COMM_WORLD`, an intracommunicator).
    pub numbered: bool,
    /// An intercommunicator (the explicit policy leaves those implicit).
    pub inter: bool,
    /// The call that made it.
    pub call: &'static str,
}

struct Model {
    by_comm: HashMap<MPI_Comm, Made>,
    /// Every commit counted on this process, in order: (its count, the call that made it).
    log: Vec<(u32, &'static str)>,
}

static COUNT: AtomicU32 = AtomicU32::new(0);
static MODEL: Mutex<Option<Model>> = Mutex::new(None);
/// Broadcast rank 0's count over each new communicator (only where the VCI depends on it: MPICH >= 4.1
/// with several implicit VCIs), as MPICH itself does.
static AGREE: AtomicBool = AtomicBool::new(false);

/// Starts the model (at `MPI_Init`, when the report is asked for; until then every call here does
/// nothing); `agree`: the count decides a VCI here, so rank 0's is broadcast.
pub fn start(agree: bool) {
    *MODEL.lock().unwrap_or_else(|e| e.into_inner()) = Some(Model { by_comm: HashMap::new(), log: Vec::new() });
    AGREE.store(agree, Ordering::Relaxed);
}

fn numbered(model: &Model, parent: MPI_Comm) -> bool {
    match parent {
        MPI_COMM_WORLD => true,
        MPI_COMM_SELF => false,
        // A parent the model never saw made: assume what most are (derived from MPI_COMM_WORLD).
        p => model.by_comm.get(&p).is_none_or(|m| m.numbered),
    }
}

fn is_inter(comm: MPI_Comm) -> bool {
    Comm(comm).is_inter().unwrap_or(false)
}

/// `commits` commits made `newcomm` from `parent` with `call` (`MPI_COMM_NULL`: this process got no
/// communicator, and MPICH committed none here); `agree_now`: its members can broadcast on it now (a
/// blocking constructor).
pub fn made(call: &'static str, commits: u32, parent: MPI_Comm, newcomm: MPI_Comm, agree_now: bool) {
    if newcomm == MPI_COMM_NULL || !is_comm(newcomm) {
        return;
    }
    let (counted, mut seq) = {
        let mut guard = MODEL.lock().unwrap_or_else(|e| e.into_inner());
        let Some(model) = guard.as_mut() else { return };
        let inter = is_inter(newcomm);
        if !numbered(model, parent) || inter {
            model.by_comm.insert(newcomm, Made { seq: 0, numbered: false, inter, call });
            return;
        }
        let mut last = 0;
        for _ in 0..commits {
            last = COUNT.fetch_add(1, Ordering::Relaxed) + 1;
            model.log.push((last, call));
        }
        (true, last as c_int)
    };
    if counted && agree_now && AGREE.load(Ordering::Relaxed) {
        // Outside the lock: a collective over the new communicator, as MPICH's own (never counted).
        let _ = Comm(newcomm).bcast(std::slice::from_mut(&mut seq), 0);
    }
    if let Some(model) = MODEL.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        model.by_comm.insert(newcomm, Made { seq: seq as u32, numbered: true, inter: false, call });
    }
}

/// What the model knows of `comm`: `MPI_COMM_WORLD` and `MPI_COMM_SELF`, or what [`made`] recorded.
pub fn of(comm: MPI_Comm) -> Option<Made> {
    match comm {
        MPI_COMM_WORLD => Some(Made { seq: 0, numbered: true, inter: false, call: "MPI_Init" }),
        MPI_COMM_SELF => Some(Made { seq: 0, numbered: false, inter: false, call: "MPI_Init" }),
        c => MODEL.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.by_comm.get(&c).copied(),
    }
}

/// The VCI MPICH gives `made` with `n` implicit VCIs.
pub fn vci(made: Made, n: u32) -> u32 {
    if made.numbered && n > 1 {
        made.seq % n
    } else {
        0
    }
}

/// The calls counted on this process after count `a` and before count `b`: what moved the round robin
/// between two communicators.
pub fn between(a: u32, b: u32) -> Vec<(u32, &'static str)> {
    let guard = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref().map_or_else(Vec::new, |m| m.log.iter().filter(|(s, _)| *s > a && *s < b).copied().collect())
}

/// Forgets a freed communicator (MPICH reuses its handle).
pub fn freed(comm: MPI_Comm) {
    if let Some(model) = MODEL.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        model.by_comm.remove(&comm);
    }
}

/// Commits per constructor the lean library interposes.
pub fn commits_of(ctor: CommCtor) -> u32 {
    match ctor {
        CommCtor::SplitType => 2,
        _ => 1,
    }
}

/// The tools interposer of a topology constructor (`MPI_Cart_create`, `MPI_Graph_create`,
/// `MPI_Dist_graph_create(_adjacent)`): one commit, its result (`newcomm`: the application's output
/// argument, read once the call returned).
pub fn comm_made(
    name: &'static str,
    parent: MPI_Comm,
    newcomm: mpixstream_wrappers::app::AppArg<MPI_Comm>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let rc = call();
    if let Some(made_comm) = newcomm.get().filter(|_| rc == MPI_SUCCESS) {
        made(name, 1, parent, made_comm, true);
    }
    rc
}

/// The tools interposer of a window constructor: MPICH commits an internal dup of `comm` for it.
pub fn comm_made_inside(name: &'static str, comm: MPI_Comm, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    if rc == MPI_SUCCESS {
        let mut guard = MODEL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(model) = guard.as_mut() {
            if numbered(model, comm) {
                let n = COUNT.fetch_add(1, Ordering::Relaxed) + 1;
                model.log.push((n, name));
            }
        }
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcis_follow_the_count() {
        // MPICH 5.0.2 with MPIR_CVAR_CH4_NUM_VCIS=4 (tests/scripts/profile_round_robin.sh): a dup (seq 1),
        // a window (2), a dup (3), a split_type (4, 5), a dup (6), a split (7).
        let m = |seq| Made { seq, numbered: true, inter: false, call: "" };
        assert_eq!([1, 3, 5, 6, 7].map(|s| vci(m(s), 4)), [1, 3, 1, 2, 3]);
        assert_eq!([1, 3, 5, 6, 7].map(|s| vci(m(s), 2)), [1, 1, 1, 0, 1]);
        assert_eq!(vci(Made { seq: 9, numbered: false, inter: false, call: "" }, 4), 0);
        assert_eq!(vci(m(7), 1), 0);
        assert_eq!(commits_of(CommCtor::SplitType), 2);
        assert_eq!(commits_of(CommCtor::Idup), 1);
    }
}

//! Native backend: our streams are MPICH's own streams from the reserved VCI pool.
use super::pool_size::Node;
use crate::config::Config;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::stream::streams_supported;
use mpixstream_wrappers::mpi::{Comm, Info, MpiResult, OwnedComm, OwnedStream, Stream};
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

const RESERVE: &str = "MPIR_CVAR_CH4_RESERVE_VCIS";
pub const IMPLICIT: &str = "MPIR_CVAR_CH4_NUM_VCIS";

/// MPICH control variables to write before `PMPI_Init*`: (name, value).
pub type ControlVariables = Vec<(&'static str, u32)>;

/// The reserved pool the user set on MPICH's own variable, if any.
pub fn user_reserve() -> Option<u32> {
    std::env::var(RESERVE).ok().and_then(|v| v.trim().parse::<u32>().ok())
}

/// The implicit VCIs the user set on MPICH's own variable, if any.
pub fn user_implicit() -> Option<u32> {
    std::env::var(IMPLICIT).ok().and_then(|v| v.trim().parse::<u32>().ok())
}

/// MPICH's pool sizes to write before `PMPI_Init*`, from ours. A value the user set directly on MPICH's
/// variable (in the environment, which MPICH reads itself) wins when `MPIXSTREAM_STREAMS` is unset, and
/// is the pool we report; with neither, the default fits the node (`pool_size`). A pool that MPICH
/// cannot set up is refused here, before MPICH fails in `MPI_Init`. Returns (pool in force, variables
/// to write).
pub fn configure_pools(config: &Config, node: &Node, mpich_major: u32) -> Result<(u32, ControlVariables), String> {
    let mut writes = Vec::new();
    let implicit = match config.implicit_vcis {
        Some(n) => {
            writes.push((IMPLICIT, n));
            n
        }
        None => user_implicit().filter(|&n| n >= 1).unwrap_or(1),
    };
    let (pool, variable) = match user_reserve() {
        Some(n) if !config.streams_set => (n, RESERVE),
        _ => {
            // Under `guided`, no more than the profile's selection can use (`guided_profile::streams_wanted`).
            let n = if config.streams_set {
                config.streams
            } else {
                let selected = crate::policy::guided_profile::streams_wanted().unwrap_or(u32::MAX);
                node.default_reserve(implicit).min(selected).max(1)
            };
            writes.push((RESERVE, n));
            (n, "MPIXSTREAM_STREAMS")
        }
    };
    node.refuse(mpich_major, implicit, pool, variable)?;
    let _ = IMPLICIT_IN_FORCE.set(implicit);
    Ok((pool, writes))
}

static IMPLICIT_IN_FORCE: OnceLock<u32> = OnceLock::new();

/// Writes MPICH's control variables through the MPI tool interface, between `MPI_T_init_thread` and
/// `PMPI_Init*` (`mpi::tool_interface::write_ints`: the session stays open until
/// [`finish_control_variables`]).
pub fn write_control_variables(writes: &[(&'static str, u32)]) -> Result<(), String> {
    mpixstream_wrappers::mpi::tool_interface::write_ints(writes)
}

/// Balances [`write_control_variables`]'s `MPI_T_init_thread`, if it ran.
pub fn finish_control_variables() {
    mpixstream_wrappers::mpi::tool_interface::finish_writes();
}

/// Our model of MPICH's reserved-VCI allocation, for the report: `MPID_Allocate_vci` (ch4_vci.c) gives
/// a new native stream the lowest free VCI from `NUM_VCIS` up, and the UCX probe confirms it (worker
/// `NUM_VCIS + i`). Every native stream of the process is created and freed here, under this lock, so the
/// model stays in step: position = reserved index, value = the native stream holding it, owned here
/// (`free_stream` retires it rather than freeing it: RETIRED says why; MPICH's finalize frees it).
static RESERVED: Mutex<Vec<Option<OwnedStream>>> = Mutex::new(Vec::new());

/// The VCI a native stream of ours runs on (`NUM_VCIS` + reserved index), if it is one of ours.
pub fn vci_of(native: MPIX_Stream) -> Option<u32> {
    if native == MPIX_STREAM_NULL {
        return None;
    }
    let reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let pos = reserved.iter().position(|s| s.as_ref().is_some_and(|s| s.raw() == native))?;
    Some(implicit_vcis_in_force() + pos as u32)
}

/// MPICH's implicit pool size in force (what we wrote, or what the user set on MPICH's variable).
pub fn implicit_vcis_in_force() -> u32 {
    IMPLICIT_IN_FORCE.get().copied().unwrap_or(1)
}

/// Native streams the application freed, kept (not freed in MPICH) and turned by the helper thread
/// ([`turn_retired`]) until a new stream takes one ([`create_stream`]). A send MPICH completed may
/// still sit in its VCI's queue (libfabric's tcp provider writes it to the socket in a later
/// progress turn); MPICH's global progress never turns a reserved VCI, so once the stream is freed
/// nothing would deliver it: across hosts over ch4:ofi a multiplex receiver waited forever for the
/// last messages of senders that had freed their streams (`tests/c/multiplex_n_to_1.c`).
static RETIRED: Mutex<Vec<MPIX_Stream>> = Mutex::new(Vec::new());

/// One progress turn of every retired native stream (the helper thread's; `try_lock`: a stream being
/// taken by a new owner is skipped this time). Only this turns them: nobody owns a retired stream.
pub fn turn_retired() {
    // Every poll loop of ours helps (`helper::help`): while nothing is retired, one relaxed load, no lock.
    if RETIRED_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    if let Ok(retired) = RETIRED.try_lock() {
        for &s in retired.iter() {
            let _ = Stream(s).progress();
        }
    }
}

pub fn create_stream() -> Result<MPIX_Stream, String> {
    if !streams_supported() {
        return Err("native MPIX_Stream_create is missing".into());
    }
    // A retired stream first: its VCI is still MPICH's reserved one, and its new owner turns it now.
    let mut retired = lock_retired();
    let taken = retired.pop();
    RETIRED_COUNT.store(retired.len(), Ordering::Relaxed);
    drop(retired);
    if let Some(s) = taken {
        return Ok(s);
    }
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    // Never the application's info: a GPU "type" would make native MPICH lock every reserved VCI;
    // queues are ours (the enqueue engine), the endpoint is MPICH's.
    let created = Stream::create(Info::NULL).map(|s| {
        let raw = s.raw();
        match reserved.iter().position(Option::is_none) {
            Some(pos) => reserved[pos] = Some(s),
            None => reserved.push(Some(s)),
        }
        raw
    });
    drop(reserved);
    match created {
        Ok(s) => Ok(s),
        Err(rc) => {
            Err(format!("MPICH refused a reserved endpoint (error {rc}); its pool ({RESERVE}) is smaller than ours"))
        }
    }
}

pub fn free_stream(native: MPIX_Stream) -> Result<(), String> {
    if pmpi().PMPIX_Stream_free.is_none() {
        return Err("native MPIX_Stream_free is missing".into());
    }
    let reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    if !reserved.iter().any(|s| s.as_ref().is_some_and(|s| s.raw() == native)) {
        return Err(format!("0x{:08x} is no native stream of ours", native as u32));
    }
    drop(reserved);
    // Retired, not freed (RETIRED says why); it keeps its place in RESERVED, hence its VCI, and stays
    // owned there until MPICH's finalize frees every stream.
    let mut retired = lock_retired();
    if !retired.contains(&native) {
        retired.insert(0, native);
    }
    RETIRED_COUNT.store(retired.len(), Ordering::Relaxed);
    Ok(())
}

/// How many streams RETIRED holds (written under its lock): what [`turn_retired`] reads first.
static RETIRED_COUNT: AtomicUsize = AtomicUsize::new(0);

fn lock_retired() -> std::sync::MutexGuard<'static, Vec<MPIX_Stream>> {
    RETIRED.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn stream_comm_create(parent: Comm, native: Stream) -> MpiResult<OwnedComm> {
    if pmpi().PMPIX_Stream_comm_create.is_none() {
        return Err(MPI_ERR_INTERN);
    }
    parent.stream_comm_create(native)
}

pub fn progress(native: MPIX_Stream) -> c_int {
    if pmpi().PMPIX_Stream_progress.is_none() {
        return MPI_ERR_INTERN;
    }
    Stream(native).progress().err().unwrap_or(MPI_SUCCESS)
}

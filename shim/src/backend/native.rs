//! Native backend: our streams are MPICH's own streams from the reserved VCI pool.
use super::pool_size::Node;
use crate::config::Config;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

const RESERVE: &str = "MPIR_CVAR_CH4_RESERVE_VCIS";
const IMPLICIT: &str = "MPIR_CVAR_CH4_NUM_VCIS";

/// The reserved pool the user set on MPICH's own variable, if any.
pub fn user_reserve() -> Option<u32> {
    std::env::var(RESERVE).ok().and_then(|v| v.trim().parse::<u32>().ok())
}

/// MPICH's pool sizes to write before `PMPI_Init*`, from ours. A value the user set directly on MPICH's
/// variable (in the environment, which MPICH reads itself) wins when `MPIXSTREAM_STREAMS` is unset, and
/// is the pool we report; with neither, the default fits the node (`pool_size`). A pool that MPICH
/// cannot set up is refused here, before MPICH fails in `MPI_Init`. Returns (pool in force, variables
/// to write).
pub fn configure_pools(
    config: &Config,
    node: &Node,
    mpich_major: u32,
) -> Result<(u32, Vec<(&'static str, u32)>), String> {
    let mut writes = Vec::new();
    let implicit = match config.implicit_vcis {
        Some(n) => {
            writes.push((IMPLICIT, n));
            n
        }
        None => {
            std::env::var(IMPLICIT).ok().and_then(|v| v.trim().parse::<u32>().ok()).filter(|&n| n >= 1).unwrap_or(1)
        }
    };
    let (pool, variable) = match user_reserve() {
        Some(n) if !config.streams_set => (n, RESERVE),
        _ => {
            let n = if config.streams_set { config.streams } else { node.default_reserve(implicit) };
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
/// `PMPI_Init*` (MPICH reads its control variables once, at the first of the two). Not `setenv`:
/// changing the environment of a process whose other threads may read it at the same time is a data
/// race in C. The tool-interface session stays open until [`finish_control_variables`] (closing it
/// before `PMPI_Init*` makes MPICH forget the values).
pub unsafe fn write_control_variables(writes: &[(&'static str, u32)]) -> Result<(), String> {
    if writes.is_empty() {
        return Ok(());
    }
    type InitThread = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
    type GetIndex = unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int;
    type HandleAlloc = unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, *mut c_int) -> c_int;
    type Write = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
    type HandleFree = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
    let sym = |name: &CStr| {
        let p = mpixstream_wrappers::pmpi::lookup(name);
        if p.is_null() {
            Err(format!("the MPI library has no {}", name.to_string_lossy()))
        } else {
            Ok(p)
        }
    };
    let init: InitThread = std::mem::transmute(sym(c"PMPI_T_init_thread")?);
    let get_index: GetIndex = std::mem::transmute(sym(c"PMPI_T_cvar_get_index")?);
    let alloc: HandleAlloc = std::mem::transmute(sym(c"PMPI_T_cvar_handle_alloc")?);
    let write: Write = std::mem::transmute(sym(c"PMPI_T_cvar_write")?);
    let free: HandleFree = std::mem::transmute(sym(c"PMPI_T_cvar_handle_free")?);
    let mut provided = 0;
    if init(MPI_THREAD_SINGLE, &mut provided) != MPI_SUCCESS {
        return Err("MPI_T_init_thread failed".into());
    }
    TOOL_SESSION.store(true, std::sync::atomic::Ordering::Release);
    for &(name, value) in writes {
        let cname = std::ffi::CString::new(name).unwrap_or_default();
        let (mut index, mut count) = (0, 0);
        let mut handle: *mut c_void = std::ptr::null_mut();
        if get_index(cname.as_ptr(), &mut index) != MPI_SUCCESS {
            return Err(format!("MPICH has no control variable {name}"));
        }
        if alloc(index, std::ptr::null_mut(), &mut handle, &mut count) != MPI_SUCCESS {
            return Err(format!("cannot open MPICH's control variable {name}"));
        }
        let v = value as c_int;
        let rc = write(handle, &v as *const c_int as *const c_void);
        free(&mut handle);
        if rc != MPI_SUCCESS {
            return Err(format!("cannot set MPICH's control variable {name}={value} (error {rc})"));
        }
    }
    Ok(())
}

/// Whether [`write_control_variables`] opened a tool-interface session.
static TOOL_SESSION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Balances [`write_control_variables`]'s `MPI_T_init_thread`, if it ran.
pub unsafe fn finish_control_variables() {
    if !TOOL_SESSION.swap(false, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let p = mpixstream_wrappers::pmpi::lookup(c"PMPI_T_finalize");
    if !p.is_null() {
        let f: unsafe extern "C" fn() -> c_int = std::mem::transmute(p);
        f();
    }
}

/// Our model of MPICH's reserved-VCI allocation, for the report: `MPID_Allocate_vci` (ch4_vci.c) gives
/// a new native stream the lowest free VCI from `NUM_VCIS` up, and the UCX probe confirms it (worker
/// `NUM_VCIS + i`). Every native stream of the process is created and freed here, under this lock, so the
/// model stays in step: position = reserved index, value = the native stream holding it.
static RESERVED: Mutex<Vec<MPIX_Stream>> = Mutex::new(Vec::new());

/// The VCI a native stream of ours runs on (`NUM_VCIS` + reserved index), if it is one of ours.
pub fn vci_of(native: MPIX_Stream) -> Option<u32> {
    if native == MPIX_STREAM_NULL {
        return None;
    }
    let reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let pos = reserved.iter().position(|&s| s == native)?;
    Some(implicit_vcis_in_force() + pos as u32)
}

/// MPICH's implicit pool size in force (what we wrote, or what the user set on MPICH's variable).
pub fn implicit_vcis_in_force() -> u32 {
    IMPLICIT_IN_FORCE.get().copied().unwrap_or(1)
}

pub fn create_stream() -> Result<MPIX_Stream, String> {
    let create = pmpi().PMPIX_Stream_create.ok_or("native MPIX_Stream_create is missing")?;
    let mut s = MPIX_STREAM_NULL;
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    // Never the application's info: a GPU "type" would make native MPICH lock every reserved VCI;
    // queues are ours (the enqueue engine), the endpoint is MPICH's.
    let rc = unsafe { create(MPI_INFO_NULL, &mut s) };
    if rc == MPI_SUCCESS {
        match reserved.iter().position(|&h| h == MPIX_STREAM_NULL) {
            Some(pos) => reserved[pos] = s,
            None => reserved.push(s),
        }
    }
    drop(reserved);
    if rc != MPI_SUCCESS {
        return Err(format!(
            "MPICH refused a reserved endpoint (error {rc}); its pool ({RESERVE}) is smaller than ours"
        ));
    }
    Ok(s)
}

pub fn free_stream(native: MPIX_Stream) -> Result<(), String> {
    let free = pmpi().PMPIX_Stream_free.ok_or("native MPIX_Stream_free is missing")?;
    let mut s = native;
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let rc = unsafe { free(&mut s) };
    if rc != MPI_SUCCESS {
        return Err(format!("native MPIX_Stream_free failed (error {rc})"));
    }
    if let Some(pos) = reserved.iter().position(|&h| h == native) {
        reserved[pos] = MPIX_STREAM_NULL;
    }
    Ok(())
}

pub fn stream_comm_create(parent: MPI_Comm, native: MPIX_Stream, newcomm: *mut MPI_Comm) -> c_int {
    match pmpi().PMPIX_Stream_comm_create {
        Some(f) => unsafe { f(parent, native, newcomm) },
        None => MPI_ERR_INTERN,
    }
}

pub fn progress(native: MPIX_Stream) -> c_int {
    match pmpi().PMPIX_Stream_progress {
        Some(f) => unsafe { f(native) },
        None => MPI_ERR_INTERN,
    }
}

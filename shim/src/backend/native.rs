//! Native backend: our streams are MPICH's own streams from the reserved VCI pool.
use crate::config::Config;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::c_int;
use std::sync::Mutex;

const RESERVE: &str = "MPIR_CVAR_CH4_RESERVE_VCIS";
const IMPLICIT: &str = "MPIR_CVAR_CH4_NUM_VCIS";

/// Sets MPICH's pool sizes from ours before `PMPI_Init*` (MPICH reads them during init). A value the
/// user set directly on MPICH's variable wins, and is the pool we report.
pub fn configure_pools(config: &Config) -> u32 {
    let user_reserve = std::env::var(RESERVE).ok().and_then(|v| v.trim().parse::<u32>().ok());
    let pool = match user_reserve {
        Some(n) if !config.streams_set => n,
        _ => {
            std::env::set_var(RESERVE, config.streams.to_string());
            config.streams
        }
    };
    if let Some(n) = config.implicit_vcis {
        std::env::set_var(IMPLICIT, n.to_string());
    }
    pool
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

/// MPICH's implicit pool size as read at `MPI_Init` (we set the variable before it, or the user did).
pub fn implicit_vcis_in_force() -> u32 {
    std::env::var(IMPLICIT).ok().and_then(|v| v.trim().parse::<u32>().ok()).filter(|&n| n >= 1).unwrap_or(1)
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

//! Native backend: our streams are MPICH's own streams from the reserved VCI pool.
use crate::config::Config;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::c_int;

const RESERVE: &str = "MPIR_CVAR_CH4_RESERVE_VCIS";
const IMPLICIT: &str = "MPIR_CVAR_CH4_NUM_VCIS";

/// Sets MPICH's pool sizes from ours before `PMPI_Init*` (MPICH reads them during init). A value the
/// user set directly on MPICH's variable wins, and is the pool we report.
pub fn configure_pools(config: &Config) -> u32 {
    let user_reserve = std::env::var(RESERVE).ok().and_then(|v| v.trim().parse::<u32>().ok());
    let pool = match user_reserve {
        Some(n) if std::env::var_os("MPIXSTREAM_STREAMS").is_none() => n,
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

pub fn create_stream() -> Result<MPIX_Stream, String> {
    let create = pmpi().PMPIX_Stream_create.ok_or("native MPIX_Stream_create is missing")?;
    let mut s = MPIX_STREAM_NULL;
    // Never the application's info: a GPU "type" would make native MPICH lock every reserved VCI;
    // queues are ours (the enqueue engine), the endpoint is MPICH's.
    let rc = unsafe { create(MPI_INFO_NULL, &mut s) };
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
    let rc = unsafe { free(&mut s) };
    if rc != MPI_SUCCESS {
        return Err(format!("native MPIX_Stream_free failed (error {rc})"));
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

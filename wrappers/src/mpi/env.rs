//! The MPI environment: initialisation, finalisation, thread level, library version.
use super::{call, check, MpiResult};
use crate::app::AppArg;
use crate::ffi::*;
use std::os::raw::{c_char, c_int};

/// `MPI_Init` with the application's own arguments.
pub fn init(argc: AppArg<c_int>, argv: AppArg<*mut *mut c_char>) -> MpiResult {
    check(call!(PMPI_Init(argc.ptr(), argv.ptr())))
}

/// `MPI_Init_thread` with the application's own arguments: the level provided.
pub fn init_thread(argc: AppArg<c_int>, argv: AppArg<*mut *mut c_char>, required: c_int) -> MpiResult<c_int> {
    let mut provided = MPI_THREAD_SINGLE;
    check(call!(PMPI_Init_thread(argc.ptr(), argv.ptr(), required, &mut provided)))?;
    Ok(provided)
}

pub fn finalize() -> MpiResult {
    check(call!(PMPI_Finalize()))
}

/// `MPI_Query_thread`: the thread level MPI provides.
pub fn query_thread() -> MpiResult<c_int> {
    let mut level = MPI_THREAD_SINGLE;
    check(call!(PMPI_Query_thread(&mut level)))?;
    Ok(level)
}

/// `MPI_Get_library_version`.
pub fn library_version() -> MpiResult<String> {
    let mut buf = vec![0u8; MPI_MAX_LIBRARY_VERSION_STRING];
    let mut len = 0;
    check(call!(PMPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len)))?;
    let len = (len.max(0) as usize).min(buf.len());
    let end = buf[..len].iter().position(|&b| b == 0).unwrap_or(len);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

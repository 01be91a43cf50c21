//! Error classes, codes and strings.
use super::{call, check, MpiResult};
use crate::ffi::*;
use std::ffi::CStr;
use std::os::raw::c_int;

/// `MPI_Error_class` of `code` (`MPI_ERR_OTHER` where MPICH does not know it).
pub fn error_class(code: c_int) -> c_int {
    let mut class = MPI_ERR_OTHER;
    if call!(PMPI_Error_class(code, &mut class)) != MPI_SUCCESS {
        return MPI_ERR_OTHER;
    }
    class
}

/// `MPI_Error_string` of `code`.
pub fn error_string(code: c_int) -> String {
    let mut buf = [0u8; MPI_MAX_ERROR_STRING];
    let mut len = 0;
    if call!(PMPI_Error_string(code, buf.as_mut_ptr().cast(), &mut len)) != MPI_SUCCESS {
        return format!("MPI error {code}");
    }
    let len = (len.max(0) as usize).min(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// `MPI_Add_error_class`: a new error class.
pub fn add_error_class() -> MpiResult<c_int> {
    let mut class = 0;
    check(call!(PMPI_Add_error_class(&mut class)))?;
    Ok(class)
}

/// `MPI_Add_error_code`: a new code in `class`.
pub fn add_error_code(class: c_int) -> MpiResult<c_int> {
    let mut code = 0;
    check(call!(PMPI_Add_error_code(class, &mut code)))?;
    Ok(code)
}

/// `MPI_Add_error_string`: `text` for `code` (MPICH copies it).
pub fn add_error_string(code: c_int, text: &CStr) -> MpiResult {
    check(call!(PMPI_Add_error_string(code, text.as_ptr())))
}

//! Reading `MPI_Info` values (used by `MPIX_Stream_create`, `MPIX_Info_get_hex` and the enqueue engine's
//! queue kinds).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
use mpixstream_wrappers::mpi::Info;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// The value of `key` in `info`, `None` where it is not set (`Err`: MPICH's error code).
///
/// # Safety
/// `key` points to a NUL-terminated string (the application's key, as MPI requires, or one of ours).
pub(crate) unsafe fn info_get_string(
    info: mpixstream_wrappers::ffi::MPI_Info,
    key: *const c_char,
) -> Result<Option<String>, c_int> {
    // SAFETY: the caller's obligation: `key` is a NUL-terminated string, alive for this call.
    let key = unsafe { CStr::from_ptr(key) };
    info_value(Info(info), key)
}

/// The value of `key` in `info`, `None` where it is not set.
pub(crate) fn info_value(info: Info, key: &CStr) -> Result<Option<String>, c_int> {
    info.get(key)
}

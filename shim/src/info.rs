//! Reading `MPI_Info` values (used by `MPIX_Stream_create` and `MPIX_Info_get_hex`).
use mpixstream_wrappers::mpi::Info;
use std::ffi::CStr;
use std::os::raw::c_int;

/// The value of `key` in `info`, `None` where it is not set (`Err`: MPICH's error code).
pub(crate) fn info_value(info: Info, key: &CStr) -> Result<Option<String>, c_int> {
    info.get(key)
}

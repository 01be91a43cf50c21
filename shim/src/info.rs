//! Reading MPI info objects.
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::pmpi::pmpi;
use std::os::raw::{c_char, c_int};

pub(crate) unsafe fn info_get_string(info: MPI_Info, key: *const c_char) -> Result<Option<String>, c_int> {
    let p = pmpi();
    let (mut len, mut flag) = (0, 0);
    let rc = (p.PMPI_Info_get_valuelen)(info, key, &mut len, &mut flag);
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    if flag == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; len as usize + 1];
    let rc = (p.PMPI_Info_get)(info, key, len + 1, buf.as_mut_ptr() as *mut c_char, &mut flag);
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    buf.truncate(len as usize);
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

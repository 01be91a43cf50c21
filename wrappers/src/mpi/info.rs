//! Info objects (hints).
use super::{call, check, Info, MpiResult, OwnedInfo};
use crate::ffi::*;
use std::ffi::CStr;

impl Info {
    /// `MPI_Info_create`: a new, empty info object (free it).
    pub fn create() -> MpiResult<OwnedInfo> {
        let mut info = MPI_INFO_NULL;
        check(call!(PMPI_Info_create(&mut info)))?;
        Ok(OwnedInfo::made(info))
    }

    pub fn set(self, key: &CStr, value: &CStr) -> MpiResult {
        check(call!(PMPI_Info_set(self.0, key.as_ptr(), value.as_ptr())))
    }

    /// The value of `key`, `None` where it is not set.
    pub fn get(self, key: &CStr) -> MpiResult<Option<String>> {
        let (mut len, mut flag) = (0, 0);
        check(call!(PMPI_Info_get_valuelen(self.0, key.as_ptr(), &mut len, &mut flag)))?;
        if flag == 0 {
            return Ok(None);
        }
        let len = (len.max(0) as usize).min(MPI_MAX_INFO_VAL);
        let mut buf = vec![0u8; len + 1];
        // MPI_Info_get writes at most `valuelen` characters and a terminating NUL: `len + 1` bytes.
        check(call!(PMPI_Info_get(
            self.0,
            key.as_ptr(),
            len as std::os::raw::c_int,
            buf.as_mut_ptr().cast(),
            &mut flag
        )))?;
        if flag == 0 {
            return Ok(None);
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(len);
        Ok(Some(String::from_utf8_lossy(&buf[..end]).into_owned()))
    }
}

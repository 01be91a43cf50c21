//! The loaded MPICH's own MPIX streams (>= 4.1; elsewhere every call is `MPI_ERR_UNSUPPORTED_OPERATION`).
use super::{call_optional, check, Info, MpiResult, OwnedStream, Stream};
use crate::ffi::*;

impl Stream {
    /// `MPIX_Stream_create` with these hints.
    pub fn create(info: Info) -> MpiResult<OwnedStream> {
        let mut stream = MPIX_STREAM_NULL;
        check(call_optional!(PMPIX_Stream_create(info.0, &mut stream)))?;
        Ok(OwnedStream::made(stream))
    }

    /// `MPIX_Stream_progress`: one turn of this stream's endpoint (`Stream::NULL`: the implicit pool's).
    pub fn progress(self) -> MpiResult {
        check(call_optional!(PMPIX_Stream_progress(self.0)))
    }
}

/// Whether the loaded MPICH has MPIX streams.
pub fn streams_supported() -> bool {
    crate::pmpi::pmpi().PMPIX_Stream_create.is_some()
}

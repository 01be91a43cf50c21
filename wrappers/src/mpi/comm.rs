//! Communicators: their making and freeing, queries, attributes, error handlers and hints, and the
//! blocking collectives mpixstream runs on its own data (slices).
use super::{
    call, call_optional, check, Comm, Datatype, Element, Errhandler, Info, MpiResult, Op, Opaque, OwnedComm,
    OwnedErrhandler, OwnedInfo, OwnedRequest, Stream,
};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

/// A keyval's copy and delete callbacks (MPICH calls them with its own valid arguments).
pub type KeyvalFns = (Option<MPI_Comm_copy_attr_function>, Option<MPI_Comm_delete_attr_function>);

impl Comm {
    pub fn size(self) -> MpiResult<c_int> {
        let mut n = 0;
        check(call!(PMPI_Comm_size(self.0, &mut n)))?;
        Ok(n)
    }

    pub fn rank(self) -> MpiResult<c_int> {
        let mut r = 0;
        check(call!(PMPI_Comm_rank(self.0, &mut r)))?;
        Ok(r)
    }

    /// Whether this is an intercommunicator.
    pub fn is_inter(self) -> MpiResult<bool> {
        let mut flag = 0;
        check(call!(PMPI_Comm_test_inter(self.0, &mut flag)))?;
        Ok(flag != 0)
    }

    pub fn dup(self) -> MpiResult<OwnedComm> {
        let mut new = MPI_COMM_NULL;
        check(call!(PMPI_Comm_dup(self.0, &mut new)))?;
        Ok(OwnedComm::made(new))
    }

    /// `MPI_Comm_create` over this communicator's own group: the same group and ranks as a dup, one
    /// context id agreement as a dup, but none of what a dup copies (attributes, whose copy callbacks
    /// would run; topology, info, error handler).
    pub fn create_from_own_group(self) -> MpiResult<OwnedComm> {
        let mut group = MPI_GROUP_NULL;
        check(call!(PMPI_Comm_group(self.0, &mut group)))?;
        let mut new = MPI_COMM_NULL;
        let rc = call!(PMPI_Comm_create(self.0, group, &mut new));
        let _ = call!(PMPI_Group_free(&mut group));
        check(rc)?;
        Ok(OwnedComm::made(new))
    }

    /// `MPI_Comm_split`; `Comm::NULL` for a process whose color is `MPI_UNDEFINED`.
    pub fn split(self, color: c_int, key: c_int) -> MpiResult<OwnedComm> {
        let mut new = MPI_COMM_NULL;
        check(call!(PMPI_Comm_split(self.0, color, key, &mut new)))?;
        Ok(OwnedComm::made(new))
    }

    /// `MPI_Comm_idup`: the new communicator (usable once the request completes) and the request.
    pub fn idup(self) -> MpiResult<(OwnedComm, OwnedRequest)> {
        let (mut new, mut req) = (MPI_COMM_NULL, MPI_REQUEST_NULL);
        check(call!(PMPI_Comm_idup(self.0, &mut new, &mut req)))?;
        Ok((OwnedComm::made(new), OwnedRequest::made(req)))
    }

    pub fn idup_with_info(self, info: Info) -> MpiResult<(OwnedComm, OwnedRequest)> {
        let (mut new, mut req) = (MPI_COMM_NULL, MPI_REQUEST_NULL);
        check(call!(PMPI_Comm_idup_with_info(self.0, info.0, &mut new, &mut req)))?;
        Ok((OwnedComm::made(new), OwnedRequest::made(req)))
    }

    /// `MPIX_Stream_comm_create` of the loaded MPICH (>= 4.1).
    pub fn stream_comm_create(self, stream: Stream) -> MpiResult<OwnedComm> {
        let mut new = MPI_COMM_NULL;
        check(call_optional!(PMPIX_Stream_comm_create(self.0, stream.0, &mut new)))?;
        Ok(OwnedComm::made(new))
    }

    pub fn set_errhandler(self, handler: Errhandler) -> MpiResult {
        check(call!(PMPI_Comm_set_errhandler(self.0, handler.0)))
    }

    /// The communicator's error handler (a new reference, ours to free).
    pub fn errhandler(self) -> MpiResult<OwnedErrhandler> {
        let mut h = MPI_ERRORS_ARE_FATAL;
        check(call!(PMPI_Comm_get_errhandler(self.0, &mut h)))?;
        Ok(OwnedErrhandler::made(h))
    }

    /// Raises `code` through the communicator's error handler; gives the handler's return (a handler
    /// that returns: `code`).
    pub fn call_errhandler(self, code: c_int) -> c_int {
        call!(PMPI_Comm_call_errhandler(self.0, code))
    }

    pub fn set_info(self, info: Info) -> MpiResult {
        check(call!(PMPI_Comm_set_info(self.0, info.0)))
    }

    /// The hints in use (a new info object, ours to free).
    pub fn info(self) -> MpiResult<OwnedInfo> {
        let mut info = MPI_INFO_NULL;
        check(call!(PMPI_Comm_get_info(self.0, &mut info)))?;
        Ok(OwnedInfo::made(info))
    }

    /// The communicator's name as MPICH keeps it.
    pub fn name(self) -> MpiResult<String> {
        let mut buf = [0u8; 128]; // MPI_MAX_OBJECT_NAME
        let mut len = 0;
        check(call!(PMPI_Comm_get_name(self.0, buf.as_mut_ptr().cast(), &mut len)))?;
        let len = (len.max(0) as usize).min(buf.len());
        Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
    }

    /// Sets attribute `keyval` to `value`, an opaque word MPICH stores and hands back to the keyval's
    /// callbacks (never dereferenced by MPICH).
    pub fn set_attr(self, keyval: c_int, value: Opaque) -> MpiResult {
        check(call!(PMPI_Comm_set_attr(self.0, keyval, value.0)))
    }

    /// Attribute `keyval`'s value, `None` where it is not set.
    pub fn attr(self, keyval: c_int) -> MpiResult<Option<Opaque>> {
        let mut value: *mut c_void = std::ptr::null_mut();
        let mut flag = 0;
        // MPI_Comm_get_attr's `attribute_val` is a `void *` through which MPICH writes the stored word.
        check(call!(PMPI_Comm_get_attr(self.0, keyval, (&mut value as *mut *mut c_void).cast(), &mut flag)))?;
        Ok((flag != 0).then_some(Opaque(value)))
    }

    /// `MPI_TAG_UB` of this communicator (the predefined attribute), `None` where MPICH gives none.
    pub fn tag_ub(self) -> MpiResult<Option<c_int>> {
        let Some(value) = self.attr(MPI_TAG_UB)? else {
            return Ok(None);
        };
        let p = value.0 as *const c_int;
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: the value of the predefined attribute MPI_TAG_UB is a pointer to MPICH's own `int`,
        // valid while the communicator lives (as long as this call, at least).
        Ok(Some(unsafe { *p }))
    }

    /// `MPI_Abort`: does not return on MPICH.
    pub fn abort(self, code: c_int) -> c_int {
        call!(PMPI_Abort(self.0, code))
    }

    /// `MPI_Pack_size_c` of `count` elements of `datatype`.
    pub fn pack_size(self, count: MPI_Count, datatype: Datatype) -> MpiResult<MPI_Count> {
        let mut size = 0;
        check(call!(PMPI_Pack_size_c(count, datatype.0, self.0, &mut size)))?;
        Ok(size)
    }

    /// `MPI_Iprobe`: the status of a matching message, `None` where there is none yet.
    pub fn iprobe(self, source: c_int, tag: c_int) -> MpiResult<Option<MPI_Status>> {
        let mut flag = 0;
        let mut status = MPI_Status::default();
        check(call!(PMPI_Iprobe(source, tag, self.0, &mut flag, &mut status)))?;
        Ok((flag != 0).then_some(status))
    }

    /// `MPI_Allreduce` of `send` into `recv` (equal lengths).
    pub fn allreduce<T: Element>(self, send: &[T], recv: &mut [T], op: Op) -> MpiResult {
        assert_eq!(send.len(), recv.len(), "allreduce: send and receive lengths differ");
        check(call!(PMPI_Allreduce(
            send.as_ptr().cast(),
            recv.as_mut_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            op.0,
            self.0
        )))
    }

    /// `MPI_Allgather` of `send` from every process into `recv` (`send.len()` × size elements).
    pub fn allgather<T: Element>(self, send: &[T], recv: &mut [T]) -> MpiResult {
        let size = self.size()? as usize;
        assert_eq!(send.len() * size, recv.len(), "allgather: receive length is not send length × size");
        check(call!(PMPI_Allgather(
            send.as_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            recv.as_mut_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            self.0
        )))
    }

    /// `MPI_Gather` of `send` at `root`, into `recv` there (`send.len()` × size elements; ignored
    /// elsewhere, where it may be empty).
    pub fn gather<T: Element>(self, send: &[T], recv: &mut [T], root: c_int) -> MpiResult {
        if self.rank()? == root {
            let size = self.size()? as usize;
            assert_eq!(send.len() * size, recv.len(), "gather: receive length is not send length × size");
        }
        check(call!(PMPI_Gather(
            send.as_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            recv.as_mut_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            root,
            self.0
        )))
    }

    /// `MPI_Gatherv` of `send` at `root`, process i's part at `displs[i]` in `recv` with `counts[i]`
    /// elements (at the root; elsewhere all three may be empty).
    pub fn gatherv<T: Element>(
        self,
        send: &[T],
        recv: &mut [T],
        counts: &[c_int],
        displs: &[c_int],
        root: c_int,
    ) -> MpiResult {
        if self.rank()? == root {
            let size = self.size()? as usize;
            assert!(
                counts.len() == size && displs.len() == size,
                "gatherv: counts and displacements are not one per process"
            );
            let fits =
                counts.iter().zip(displs).all(|(&c, &d)| c >= 0 && d >= 0 && (c as usize + d as usize) <= recv.len());
            assert!(fits, "gatherv: a part falls outside the receive buffer");
        }
        check(call!(PMPI_Gatherv(
            send.as_ptr().cast(),
            count(send.len()),
            T::DATATYPE.0,
            recv.as_mut_ptr().cast(),
            counts.as_ptr(),
            displs.as_ptr(),
            T::DATATYPE.0,
            root,
            self.0
        )))
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub fn bcast<T: Element>(self, buf: &mut [T], root: c_int) -> MpiResult {
        check(call!(PMPI_Bcast_c(buf.as_mut_ptr().cast(), buf.len() as MPI_Count, T::DATATYPE.0, root, self.0)))
    }

    /// `MPI_Ibarrier`.
    pub fn ibarrier(self) -> MpiResult<OwnedRequest> {
        let mut req = MPI_REQUEST_NULL;
        check(call!(PMPI_Ibarrier(self.0, &mut req)))?;
        Ok(OwnedRequest::made(req))
    }
}

/// A slice length as MPI's `int` count; our own buffers are far below `c_int::MAX` elements.
fn count(len: usize) -> c_int {
    c_int::try_from(len).expect("mpixstream's own buffers hold fewer than 2^31 elements")
}

/// `MPI_Comm_create_keyval`.
pub fn create_keyval(fns: KeyvalFns, extra: Opaque) -> MpiResult<c_int> {
    let mut keyval = 0;
    check(call!(PMPI_Comm_create_keyval(fns.0, fns.1, &mut keyval, extra.0)))?;
    Ok(keyval)
}

/// `MPI_Comm_free_keyval`.
pub fn free_keyval(keyval: c_int) -> MpiResult {
    let mut k = keyval;
    check(call!(PMPI_Comm_free_keyval(&mut k)))
}

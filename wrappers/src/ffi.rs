//! MPICH's C ABI: handle types and the constants we need, as in MPICH's `mpi.h`
//! (checked identical in Debian's 4.0.2 and PyPI's 5.0.2).
use std::os::raw::{c_char, c_int, c_void};

pub type MPI_Comm = c_int;
pub type MPI_Info = c_int;
pub type MPI_Datatype = c_int;
pub type MPI_Request = c_int;
pub type MPI_Message = c_int;
pub type MPI_Group = c_int;
pub type MPI_Op = c_int;
pub type MPI_Errhandler = c_int;
pub type MPI_Win = c_int;
/// ROMIO's file handle: a pointer to its `struct ADIOI_FileD`.
pub type MPI_File = *mut c_void;
pub type MPI_Count = i64;
pub type MPI_Aint = isize;
pub type MPIX_Stream = c_int;
/// A handle passed by value to an exported interposer, declared as wide as a register: an MPICH handle
/// (`int`) in its low 32 bits (its caller left the upper ones undefined; the interposer narrows it with
/// `as`), or, for a program on the MPI standard ABI, a pointer, forwarded whole (`crate::abi`).
pub type WideHandle = usize;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MPI_Status {
    pub count_lo: c_int,
    pub count_hi_and_cancelled: c_int,
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
}

pub type MPI_Grequest_query_function = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
pub type MPI_Grequest_free_function = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type MPI_Grequest_cancel_function = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
pub type MPIX_Grequest_poll_function = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
/// MPICH >= 4.3's async things (`MPIX_Async_start`): an opaque pointer, and the poll function's type.
pub type MPIX_Async_thing = *mut c_void;
pub type MPIX_Async_poll_function = unsafe extern "C" fn(MPIX_Async_thing) -> c_int;
pub const MPIX_ASYNC_NOPROGRESS: c_int = 0;
pub const MPIX_ASYNC_DONE: c_int = 1;
pub type MPIX_Grequest_wait_function = unsafe extern "C" fn(c_int, *mut *mut c_void, f64, *mut MPI_Status) -> c_int;
pub type MPI_Comm_copy_attr_function =
    unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
pub type MPI_Comm_delete_attr_function = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_OP: c_int = 9;
pub const MPI_ERR_ARG: c_int = 12;
pub const MPI_ERR_TRUNCATE: c_int = 14;
pub const MPI_ERR_OTHER: c_int = 15;
pub const MPI_ERR_INTERN: c_int = 16;
pub const MPI_ERR_IN_STATUS: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_REQUEST: c_int = 19;
pub const MPI_ERR_INFO_KEY: c_int = 29;
pub const MPI_ERR_INFO_VALUE: c_int = 30;
pub const MPI_ERR_NO_MEM: c_int = 34;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 44;
/// `MPICH_ERR_FIRST_MPIX + 6`: native MPICH >= 4.1's class for an invalid stream.
pub const MPIX_ERR_STREAM: c_int = 106;

pub const MPI_COMM_NULL: MPI_Comm = 0x0400_0000;
pub const MPI_COMM_WORLD: MPI_Comm = 0x4400_0000;
pub const MPI_COMM_SELF: MPI_Comm = 0x4400_0001;
pub const MPI_GROUP_NULL: MPI_Group = 0x0800_0000;
pub const MPI_DATATYPE_NULL: MPI_Datatype = 0x0c00_0000;
pub const MPI_REQUEST_NULL: MPI_Request = 0x2c00_0000;
pub const MPI_MESSAGE_NULL: MPI_Message = 0x2c00_0000;
pub const MPI_MESSAGE_NO_PROC: MPI_Message = 0x6c00_0000;
pub const MPI_INFO_NULL: MPI_Info = 0x1c00_0000;
pub const MPI_BYTE: MPI_Datatype = 0x4c00_010d;
pub const MPI_PACKED: MPI_Datatype = 0x4c00_010f;
pub const MPI_INT: MPI_Datatype = 0x4c00_0405;
pub const MPI_UINT64_T: MPI_Datatype = 0x4c00_083e;
pub const MPI_SUM: MPI_Op = 0x5800_0003;
pub const MPI_MAX: MPI_Op = 0x5800_0001;
pub const MPI_MIN: MPI_Op = 0x5800_0002;
pub const MPI_BAND: MPI_Op = 0x5800_0006;
pub const MPI_ERRORS_ARE_FATAL: MPI_Errhandler = 0x5400_0000;
pub const MPI_ERRORS_RETURN: MPI_Errhandler = 0x5400_0001;
/// MPI 4.0 (MPICH >= 4.1); MPICH 4.0.2 has no such handler, so no communicator there carries it.
pub const MPI_ERRORS_ABORT: MPI_Errhandler = 0x5400_0003;
pub const MPI_TAG_UB: c_int = 0x6440_0001;
pub const MPIX_STREAM_NULL: MPIX_Stream = 0x3c00_0000;

pub const MPI_PROC_NULL: c_int = -1;
pub const MPI_ANY_SOURCE: c_int = -2;
pub const MPI_ANY_TAG: c_int = -1;
pub const MPI_UNDEFINED: c_int = -32766;
/// `MPI_Topo_test`'s answers (MPICH's `MPIR_Topo_type`).
pub const MPI_GRAPH: c_int = 1;
pub const MPI_CART: c_int = 2;
pub const MPI_DIST_GRAPH: c_int = 3;
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1;
pub const MPI_THREAD_SERIALIZED: c_int = 2;
pub const MPI_THREAD_MULTIPLE: c_int = 3;

pub const MPI_MAX_INFO_KEY: usize = 255;
pub const MPI_MAX_INFO_VAL: usize = 1024;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;

// MPICH's sentinel values: the address 1, never dereferenced.
#[allow(clippy::manual_dangling_ptr)]
pub const MPI_STATUS_IGNORE: *mut MPI_Status = 1 as *mut MPI_Status;
#[allow(clippy::manual_dangling_ptr)]
pub const MPI_STATUSES_IGNORE: *mut MPI_Status = 1 as *mut MPI_Status;

/// Whether `status` is a real status pointer (not NULL, not `MPI_STATUS_IGNORE`).
#[inline]
pub fn status_is_real(status: *mut MPI_Status) -> bool {
    !status.is_null() && status != MPI_STATUS_IGNORE
}

/// A C string literal as `*const c_char`.
#[macro_export]
macro_rules! cstr {
    ($s:expr) => {
        concat!($s, "\0").as_ptr() as *const std::os::raw::c_char
    };
}

pub type CStrPtr = *const c_char;

/// A handle from its bits (MPICH's handles are `int`s whose top bit is often set).
#[inline]
pub const fn c_handle(bits: u32) -> c_int {
    bits as c_int
}

//! The MPI standard ABI as the MPIX implementation on it calls it: the constants of `mpi_abi.h` it needs,
//! its status layout, and a table of the `PMPI_*` functions it uses, typed with the ABI's pointer
//! handles ([`H`]) and looked up once in the program's MPI library (`abi::lookup`). MPICH's `ffi` and
//! `pmpi` tables are of no use here: their handles are `int`s and their constants MPICH's.
//!
//! `PMPI_*`, not the next `MPI_*`: the hidden communicators and the agreement collectives are ours, and a
//! profiling layer of the program's should not count them. The exception: the point-to-point calls that
//! carry the application's indexed messages on a multiplex communicator's hidden communicators (marked
//! `as "MPI_"`) go through the next `MPI_*` definition, so that the tools library counts them (and
//! attributes them to the multiplex communicator and its index: `multiplex::hidden_of`).
use mpixstream_wrappers::abi;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// A handle of the standard ABI (`MPI_Comm`, `MPI_Datatype`, ...: a pointer), as the program passes it.
pub type H = usize;
pub type Count = i64;

/// `mpi_abi.h`'s `MPI_Status`: three public fields, then five of the library's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Status {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub internal: [c_int; 5],
}

// Handles (`mpi_abi.h`, identical in MPICH 5.0.2's and Intel MPI 2021's).
pub const COMM_NULL: H = 0x100;
pub const COMM_WORLD: H = abi::MPI_COMM_WORLD;
pub const COMM_SELF: H = 0x102;
pub const INFO_NULL: H = 0x130;
pub const ERRORS_ARE_FATAL: H = 0x141;
pub const ERRORS_ABORT: H = 0x142;
pub const ERRORS_RETURN: H = 0x143;
pub const MESSAGE_NULL: H = 0x128;
pub const INT: H = 0x209;
pub const MIN: H = 0x22;
pub const MAX: H = 0x23;

// Classes.
pub const SUCCESS: c_int = 0;
pub const ERR_COUNT: c_int = 2;
pub const ERR_TAG: c_int = 4;
pub const ERR_COMM: c_int = 5;
pub const ERR_RANK: c_int = 6;
pub const ERR_ARG: c_int = 13;
pub const ERR_OTHER: c_int = 16;
pub const ERR_PENDING: c_int = 18;
pub const ERR_UNSUPPORTED_OPERATION: c_int = abi::MPI_ERR_UNSUPPORTED_OPERATION;

// Other constants.
pub const ANY_SOURCE: c_int = -1;
pub const ANY_TAG: c_int = -2;
pub const PROC_NULL: c_int = -3;
pub const TAG_UB: c_int = 501;
pub const MAX_ERROR_STRING: usize = 512;
/// `MPI_STATUS_IGNORE` is the null pointer on this ABI.
pub const STATUS_IGNORE: *mut Status = std::ptr::null_mut();

pub type CopyFn = unsafe extern "C" fn(H, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
pub type DeleteFn = unsafe extern "C" fn(H, c_int, *mut c_void, *mut c_void) -> c_int;

/// The table: one field per function, named as the function, looked up as `PMPI_<name>`, or as
/// `<prefix><name>` where the row says `as "<prefix>"`.
macro_rules! table {
    (@prefix) => { "PMPI_" };
    (@prefix $p:literal) => { $p };
    ($($name:ident: fn($($arg:ty),*) $(as $prefix:literal)?;)*) => {
        #[allow(non_snake_case)]
        pub struct Mpi {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> c_int,)*
        }

        fn load() -> Result<Mpi, String> {
            Ok(Mpi {
                $($name: {
                    let name = concat!(table!(@prefix $($prefix)?), stringify!($name), "\0");
                    let name = std::ffi::CStr::from_bytes_with_nul(name.as_bytes()).map_err(|e| e.to_string())?;
                    let f = abi::lookup(name);
                    if f.is_null() {
                        return Err(format!("the MPI library has no {}", name.to_string_lossy()));
                    }
                    // SAFETY: the symbol of that name, whose prototype in mpi_abi.h is this field's.
                    unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> c_int>(f) }
                },)*
            })
        }
    };
}

table! {
    Initialized: fn(*mut c_int);
    Finalized: fn(*mut c_int);
    Query_thread: fn(*mut c_int);
    Comm_dup: fn(H, *mut H);
    Comm_free: fn(*mut H);
    Comm_rank: fn(H, *mut c_int);
    Comm_size: fn(H, *mut c_int);
    Comm_test_inter: fn(H, *mut c_int);
    Comm_create_keyval: fn(Option<CopyFn>, Option<DeleteFn>, *mut c_int, *mut c_void);
    Comm_set_attr: fn(H, c_int, *mut c_void);
    Comm_get_attr: fn(H, c_int, *mut c_void, *mut c_int);
    Comm_delete_attr: fn(H, c_int);
    Comm_call_errhandler: fn(H, c_int);
    Comm_get_errhandler: fn(H, *mut H);
    Comm_set_errhandler: fn(H, H);
    Errhandler_free: fn(*mut H);
    Add_error_code: fn(c_int, *mut c_int);
    Add_error_string: fn(c_int, *const c_char);
    Info_get_string: fn(H, *const c_char, *mut c_int, *mut c_char, *mut c_int);
    Allreduce: fn(*const c_void, *mut c_void, c_int, H, H, H);
    Allgather: fn(*const c_void, c_int, H, *mut c_void, c_int, H, H);
    Iprobe: fn(c_int, c_int, H, *mut c_int, *mut Status);
    Improbe: fn(c_int, c_int, H, *mut c_int, *mut H, *mut Status) as "MPI_";
    Mrecv: fn(*mut c_void, c_int, H, *mut H, *mut Status) as "MPI_";
    Mrecv_c: fn(*mut c_void, Count, H, *mut H, *mut Status) as "MPI_";
    Send: fn(*const c_void, c_int, H, c_int, c_int, H) as "MPI_";
    Send_c: fn(*const c_void, Count, H, c_int, c_int, H) as "MPI_";
    Isend: fn(*const c_void, c_int, H, c_int, c_int, H, *mut H) as "MPI_";
    Isend_c: fn(*const c_void, Count, H, c_int, c_int, H, *mut H) as "MPI_";
    Recv: fn(*mut c_void, c_int, H, c_int, c_int, H, *mut Status) as "MPI_";
    Recv_c: fn(*mut c_void, Count, H, c_int, c_int, H, *mut Status) as "MPI_";
    Irecv: fn(*mut c_void, c_int, H, c_int, c_int, H, *mut H) as "MPI_";
    Irecv_c: fn(*mut c_void, Count, H, c_int, c_int, H, *mut H) as "MPI_";
}

static MPI: OnceLock<Result<Mpi, String>> = OnceLock::new();

/// The table, or why the program's library cannot serve it (a function missing: not an MPI-4 library).
pub fn mpi() -> Result<&'static Mpi, &'static str> {
    MPI.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

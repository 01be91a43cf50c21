//! The `PMPI_*` (and native `PMPIX_*`) entry points, resolved once at `MPI_Init*` from the MPICH that is
//! actually loaded. Written as one table: each row names a function and its argument types; the macro
//! generates the struct of function pointers and its resolver.
//!
//! Why run-time resolution: Debian ships `libmpich.so.12`, PyPI ships `libmpi.so.12`; linking to either
//! would tie the build to one of them. `dlsym(RTLD_NEXT)` finds the MPICH behind us in the preload order;
//! where the application loaded MPICH privately (Python's default `RTLD_LOCAL`), we look for it among the
//! loaded objects instead.
use crate::ffi::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

macro_rules! pmpi_table {
    (
        required { $( $name:ident ( $($arg:ty),* ); )* }
        optional { $( $oname:ident ( $($oarg:ty),* ); )* }
    ) => {
        /// Function pointers into the loaded MPICH.
        pub struct Pmpi {
            $( pub $name: unsafe extern "C" fn($($arg),*) -> c_int, )*
            $( pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> c_int>, )*
        }

        impl Pmpi {
            /// Resolves every row; a missing required symbol is an error naming it.
            pub unsafe fn resolve(find: &dyn Fn(&CStr) -> *mut c_void) -> Result<Pmpi, String> {
                Ok(Pmpi {
                    $( $name: {
                        let p = find(CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()));
                        if p.is_null() {
                            return Err(format!("the loaded MPI library has no {}", stringify!($name)));
                        }
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> c_int>(p)
                    }, )*
                    $( $oname: {
                        let p = find(CStr::from_bytes_with_nul_unchecked(concat!(stringify!($oname), "\0").as_bytes()));
                        if p.is_null() { None } else {
                            Some(std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($oarg),*) -> c_int>(p))
                        }
                    }, )*
                })
            }
        }
    };
}

pmpi_table! {
    required {
        PMPI_Init(*mut c_int, *mut *mut *mut c_char);
        PMPI_Init_thread(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int);
        PMPI_Finalize();
        PMPI_Initialized(*mut c_int);
        PMPI_Finalized(*mut c_int);
        PMPI_Query_thread(*mut c_int);
        PMPI_Abort(MPI_Comm, c_int);
        PMPI_Get_library_version(*mut c_char, *mut c_int);
        PMPI_Comm_rank(MPI_Comm, *mut c_int);
        PMPI_Comm_size(MPI_Comm, *mut c_int);
        PMPI_Comm_test_inter(MPI_Comm, *mut c_int);
        PMPI_Comm_get_attr(MPI_Comm, c_int, *mut c_void, *mut c_int);
        PMPI_Comm_dup(MPI_Comm, *mut MPI_Comm);
        PMPI_Comm_dup_with_info(MPI_Comm, MPI_Info, *mut MPI_Comm);
        PMPI_Comm_idup(MPI_Comm, *mut MPI_Comm, *mut MPI_Request);
        PMPI_Comm_idup_with_info(MPI_Comm, MPI_Info, *mut MPI_Comm, *mut MPI_Request);
        PMPI_Comm_split(MPI_Comm, c_int, c_int, *mut MPI_Comm);
        PMPI_Comm_split_type(MPI_Comm, c_int, c_int, MPI_Info, *mut MPI_Comm);
        PMPI_Comm_create(MPI_Comm, MPI_Group, *mut MPI_Comm);
        PMPI_Comm_create_group(MPI_Comm, MPI_Group, c_int, *mut MPI_Comm);
        PMPI_Comm_free(*mut MPI_Comm);
        PMPI_Comm_call_errhandler(MPI_Comm, c_int);
        PMPI_Comm_set_errhandler(MPI_Comm, MPI_Errhandler);
        PMPI_Add_error_class(*mut c_int);
        PMPI_Add_error_code(c_int, *mut c_int);
        PMPI_Add_error_string(c_int, *const c_char);
        PMPI_Error_class(c_int, *mut c_int);
        PMPI_Error_string(c_int, *mut c_char, *mut c_int);
        PMPI_Info_set(MPI_Info, *const c_char, *const c_char);
        PMPI_Info_get_valuelen(MPI_Info, *const c_char, *mut c_int, *mut c_int);
        PMPI_Info_get(MPI_Info, *const c_char, c_int, *mut c_char, *mut c_int);
        PMPI_Type_size_c(MPI_Datatype, *mut MPI_Count);
        PMPI_Send(*const c_void, c_int, MPI_Datatype, c_int, c_int, MPI_Comm);
        PMPI_Send_c(*const c_void, MPI_Count, MPI_Datatype, c_int, c_int, MPI_Comm);
        PMPI_Isend(*const c_void, c_int, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Isend_c(*const c_void, MPI_Count, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Recv(*mut c_void, c_int, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Status);
        PMPI_Recv_c(*mut c_void, MPI_Count, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Status);
        PMPI_Irecv(*mut c_void, c_int, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Irecv_c(*mut c_void, MPI_Count, MPI_Datatype, c_int, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Iprobe(c_int, c_int, MPI_Comm, *mut c_int, *mut MPI_Status);
        PMPI_Improbe(c_int, c_int, MPI_Comm, *mut c_int, *mut MPI_Message, *mut MPI_Status);
        PMPI_Mrecv_c(*mut c_void, MPI_Count, MPI_Datatype, *mut MPI_Message, *mut MPI_Status);
        PMPI_Imrecv_c(*mut c_void, MPI_Count, MPI_Datatype, *mut MPI_Message, *mut MPI_Request);
        PMPI_Sendrecv(*const c_void, c_int, MPI_Datatype, c_int, c_int, *mut c_void, c_int, MPI_Datatype, c_int, c_int,
                      MPI_Comm, *mut MPI_Status);
        PMPI_Cancel(*mut MPI_Request);
        PMPI_Probe(c_int, c_int, MPI_Comm, *mut MPI_Status);
        PMPI_Mprobe(c_int, c_int, MPI_Comm, *mut MPI_Message, *mut MPI_Status);
        PMPI_Wait(*mut MPI_Request, *mut MPI_Status);
        PMPI_Waitall(c_int, *mut MPI_Request, *mut MPI_Status);
        PMPI_Test(*mut MPI_Request, *mut c_int, *mut MPI_Status);
        PMPI_Request_free(*mut MPI_Request);
        PMPI_Get_count_c(*const MPI_Status, MPI_Datatype, *mut MPI_Count);
        PMPI_Status_set_elements_x(*mut MPI_Status, MPI_Datatype, MPI_Count);
        PMPI_Status_set_cancelled(*mut MPI_Status, c_int);
        PMPI_Grequest_complete(MPI_Request);
        PMPIX_Grequest_start(MPI_Grequest_query_function, MPI_Grequest_free_function,
                             MPI_Grequest_cancel_function, MPIX_Grequest_poll_function,
                             Option<MPIX_Grequest_wait_function>, *mut c_void, *mut MPI_Request);
        PMPI_Barrier(MPI_Comm);
        PMPI_Bcast_c(*mut c_void, MPI_Count, MPI_Datatype, c_int, MPI_Comm);
        PMPI_Allgather(*const c_void, c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, MPI_Comm);
        PMPI_Allgather_c(*const c_void, MPI_Count, MPI_Datatype, *mut c_void, MPI_Count, MPI_Datatype, MPI_Comm);
        PMPI_Alltoall_c(*const c_void, MPI_Count, MPI_Datatype, *mut c_void, MPI_Count, MPI_Datatype, MPI_Comm);
        PMPI_Allreduce(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, MPI_Comm);
        PMPI_Allreduce_c(*const c_void, *mut c_void, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm);
        PMPI_Reduce_c(*const c_void, *mut c_void, MPI_Count, MPI_Datatype, MPI_Op, c_int, MPI_Comm);
        // The enqueue engine (shim/src/enqueue): every enqueued operation runs as its nonblocking form.
        PMPI_Ibarrier(MPI_Comm, *mut MPI_Request);
        PMPI_Ibcast(*mut c_void, c_int, MPI_Datatype, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Ireduce(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Iallreduce(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, MPI_Comm, *mut MPI_Request);
        PMPI_Igather(*const c_void, c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, c_int, MPI_Comm,
                     *mut MPI_Request);
        PMPI_Igatherv(*const c_void, c_int, MPI_Datatype, *mut c_void, *const c_int, *const c_int, MPI_Datatype, c_int,
                      MPI_Comm, *mut MPI_Request);
        PMPI_Iscatter(*const c_void, c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, c_int, MPI_Comm,
                      *mut MPI_Request);
        PMPI_Iscatterv(*const c_void, *const c_int, *const c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, c_int,
                       MPI_Comm, *mut MPI_Request);
        PMPI_Iallgather(*const c_void, c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, MPI_Comm, *mut MPI_Request);
        PMPI_Iallgatherv(*const c_void, c_int, MPI_Datatype, *mut c_void, *const c_int, *const c_int, MPI_Datatype,
                         MPI_Comm, *mut MPI_Request);
        PMPI_Ialltoall(*const c_void, c_int, MPI_Datatype, *mut c_void, c_int, MPI_Datatype, MPI_Comm, *mut MPI_Request);
        PMPI_Ialltoallv(*const c_void, *const c_int, *const c_int, MPI_Datatype, *mut c_void, *const c_int, *const c_int,
                        MPI_Datatype, MPI_Comm, *mut MPI_Request);
        PMPI_Ireduce_scatter_block(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, MPI_Comm, *mut MPI_Request);
        PMPI_Iscan(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, MPI_Comm, *mut MPI_Request);
        PMPI_Iexscan(*const c_void, *mut c_void, c_int, MPI_Datatype, MPI_Op, MPI_Comm, *mut MPI_Request);
        PMPI_Ibcast_c(*mut c_void, MPI_Count, MPI_Datatype, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Ireduce_c(*const c_void, *mut c_void, MPI_Count, MPI_Datatype, MPI_Op, c_int, MPI_Comm, *mut MPI_Request);
        PMPI_Iallreduce_c(*const c_void, *mut c_void, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm, *mut MPI_Request);
        PMPI_Iallgather_c(*const c_void, MPI_Count, MPI_Datatype, *mut c_void, MPI_Count, MPI_Datatype, MPI_Comm, *mut MPI_Request);
        PMPI_Ialltoall_c(*const c_void, MPI_Count, MPI_Datatype, *mut c_void, MPI_Count, MPI_Datatype, MPI_Comm, *mut MPI_Request);
        PMPI_Type_get_extent_c(MPI_Datatype, *mut MPI_Count, *mut MPI_Count);
        PMPI_Type_get_true_extent_c(MPI_Datatype, *mut MPI_Count, *mut MPI_Count);
    }
    optional {
        // Native MPIX streams: MPICH >= 4.1 only.
        PMPIX_Stream_create(MPI_Info, *mut MPIX_Stream);
        PMPIX_Stream_free(*mut MPIX_Stream);
        PMPIX_Stream_comm_create(MPI_Comm, MPIX_Stream, *mut MPI_Comm);
        PMPIX_Stream_progress(MPIX_Stream);
        PMPIX_Start_progress_thread(MPIX_Stream);
        PMPIX_Stop_progress_thread(MPIX_Stream);
    }
}

static PMPI: OnceLock<Pmpi> = OnceLock::new();

/// The resolved table. Callers reach it only after [`load`] succeeded (the `MPI_Init*` interposer
/// does that first), so the fast path is one atomic load.
#[inline]
pub fn pmpi() -> &'static Pmpi {
    match PMPI.get() {
        Some(p) => p,
        None => unresolved(),
    }
}

#[cold]
fn unresolved() -> ! {
    // Only reachable by a bug of ours (an entry point that skipped the initialisation check).
    eprintln!("mpixstream: internal error: MPI entry points used before MPI_Init resolved them");
    std::process::abort()
}

/// Whether the table is resolved (MPI_Init* has run through our interposer).
pub fn loaded() -> bool {
    PMPI.get().is_some()
}

/// Resolves the table from the loaded MPICH; idempotent.
pub fn load() -> Result<&'static Pmpi, String> {
    if let Some(p) = PMPI.get() {
        return Ok(p);
    }
    let find = find_symbol_source()?;
    let table = unsafe { Pmpi::resolve(&|name| find(name))? };
    Ok(PMPI.get_or_init(|| table))
}

/// Looks up one symbol of the loaded MPICH, without resolving the table (used before `MPI_Init` to tell
/// which MPICH is underneath).
pub fn lookup(name: &CStr) -> *mut c_void {
    match find_symbol_source() {
        Ok(find) => find(name),
        Err(_) => std::ptr::null_mut(),
    }
}

type Finder = Box<dyn Fn(&CStr) -> *mut c_void>;

fn find_symbol_source() -> Result<Finder, String> {
    let probe = crate::cstr!("PMPI_Init");
    // Common case: MPICH is a dependency of the executable, behind us in the global scope.
    if !unsafe { libc::dlsym(libc::RTLD_NEXT, probe) }.is_null() {
        return Ok(Box::new(|name: &CStr| unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }));
    }
    // MPICH loaded with RTLD_LOCAL (for example by Python): find it among the loaded objects.
    for soname in ["libmpi.so.12", "libmpich.so.12", "libmpi.so", "libmpich.so"] {
        let cname = std::ffi::CString::new(soname).unwrap_or_default();
        let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !handle.is_null() && !unsafe { libc::dlsym(handle, probe) }.is_null() {
            let handle = handle as usize;
            return Ok(Box::new(move |name: &CStr| unsafe { libc::dlsym(handle as *mut c_void, name.as_ptr()) }));
        }
    }
    Err("no MPI library is loaded in this process (PMPI_Init not found)".to_string())
}

/// The next definition of `name` after the calling library in the preload chain (the tools library's
/// counters when it is loaded, else MPICH's); `fallback` (the `PMPI_` entry) when there is none. For
/// interposers that must not hide a call from the libraries behind them.
pub unsafe fn next_definition<F: Copy>(name: &CStr, fallback: F) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    let addr = libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize;
    if addr == 0 {
        fallback
    } else {
        std::mem::transmute_copy::<usize, F>(&addr)
    }
}

/// [`next_definition`], looked up once and kept in `cache`.
pub unsafe fn next_or<F: Copy>(cache: &'static OnceLock<usize>, name: &CStr, fallback: F) -> F {
    let f = *cache.get_or_init(|| std::mem::transmute_copy::<F, usize>(&next_definition(name, fallback)));
    std::mem::transmute_copy::<usize, F>(&f)
}

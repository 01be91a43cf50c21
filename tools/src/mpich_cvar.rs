//! Reads one of MPICH's integer control variables through the MPI tool interface, after `MPI_Init`:
//! the value MPICH runs with, whoever set it (the lean library, `MPIR_CVAR_*` in the environment, or
//! MPICH's default). The profile needs `MPIR_CVAR_CH4_NUM_VCIS` as MPICH has it: the lean library
//! writes it only where it reserves streams.
use mpixstream_wrappers::ffi::{MPI_SUCCESS, MPI_THREAD_SINGLE};
use mpixstream_wrappers::pmpi::lookup;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

/// The value of `name`, or None where the MPI library has no tool interface or no such variable.
pub fn read_int(name: &CStr) -> Option<c_int> {
    type InitThread = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
    type GetIndex = unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int;
    type HandleAlloc = unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, *mut c_int) -> c_int;
    type Read = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
    type HandleFree = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
    type Finalize = unsafe extern "C" fn() -> c_int;
    let sym = |n: &CStr| Some(lookup(n)).filter(|p| !p.is_null());
    // SAFETY: each pointer is the loaded MPI library's entry point of that name, and each type above is
    // that function's prototype in MPI's `mpi.h` (the MPI_T interface, MPI 3.0 on).
    let (init, get_index, alloc, read, free, finalize) = unsafe {
        (
            std::mem::transmute::<*mut c_void, InitThread>(sym(c"PMPI_T_init_thread")?),
            std::mem::transmute::<*mut c_void, GetIndex>(sym(c"PMPI_T_cvar_get_index")?),
            std::mem::transmute::<*mut c_void, HandleAlloc>(sym(c"PMPI_T_cvar_handle_alloc")?),
            std::mem::transmute::<*mut c_void, Read>(sym(c"PMPI_T_cvar_read")?),
            std::mem::transmute::<*mut c_void, HandleFree>(sym(c"PMPI_T_cvar_handle_free")?),
            std::mem::transmute::<*mut c_void, Finalize>(sym(c"PMPI_T_finalize")?),
        )
    };
    // SAFETY: the MPI_T calls in the order the standard requires (init, use, free, finalize), with
    // pointers to live locals of the prototypes' types; `value` is a `c_int`, the type of an integer
    // control variable with `count` 1 (checked before the read), and `handle` is the one `alloc` made.
    unsafe {
        let mut provided = 0;
        if init(MPI_THREAD_SINGLE, &mut provided) != MPI_SUCCESS {
            return None;
        }
        let (mut index, mut count, mut value) = (0, 0, 0 as c_int);
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut ok = get_index(name.as_ptr(), &mut index) == MPI_SUCCESS
            && alloc(index, std::ptr::null_mut(), &mut handle, &mut count) == MPI_SUCCESS;
        if ok {
            ok = count == 1 && read(handle, &mut value as *mut c_int as *mut c_void) == MPI_SUCCESS;
            free(&mut handle);
        }
        finalize();
        ok.then_some(value)
    }
}

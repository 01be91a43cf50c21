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
    unsafe {
        let init: InitThread = std::mem::transmute(sym(c"PMPI_T_init_thread")?);
        let get_index: GetIndex = std::mem::transmute(sym(c"PMPI_T_cvar_get_index")?);
        let alloc: HandleAlloc = std::mem::transmute(sym(c"PMPI_T_cvar_handle_alloc")?);
        let read: Read = std::mem::transmute(sym(c"PMPI_T_cvar_read")?);
        let free: HandleFree = std::mem::transmute(sym(c"PMPI_T_cvar_handle_free")?);
        let finalize: Finalize = std::mem::transmute(sym(c"PMPI_T_finalize")?);
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

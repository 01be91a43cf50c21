//! MPICH's control variables through the MPI tool interface (`MPI_T`, MPI 4.1 §15.3): written by the
//! lean library before `PMPI_Init*` (MPICH reads them once, at the first of `MPI_T_init_thread` and
//! `MPI_Init*`), read by the tools library after it. The tool-interface entry points are looked up by
//! name in the loaded MPI library (`pmpi::lookup`), typed here once, and called with our locals only.
use crate::ffi::{MPI_SUCCESS, MPI_THREAD_SINGLE};
use crate::pmpi::lookup;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

type InitThread = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
type GetIndex = unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int;
type HandleAlloc = unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, *mut c_int) -> c_int;
type Read = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Write = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
type HandleFree = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
type Finalize = unsafe extern "C" fn() -> c_int;

/// The tool interface's entry points we call.
struct Interface {
    init: InitThread,
    get_index: GetIndex,
    alloc: HandleAlloc,
    read: Read,
    write: Write,
    free: HandleFree,
    finalize: Finalize,
}

impl Interface {
    /// The loaded MPI library's, or the name of the first one it lacks.
    fn load() -> Result<Interface, String> {
        fn find(name: &CStr) -> Result<*mut c_void, String> {
            let p = lookup(name);
            if p.is_null() {
                Err(format!("the MPI library has no {}", name.to_string_lossy()))
            } else {
                Ok(p)
            }
        }
        let init = find(c"PMPI_T_init_thread")?;
        let get_index = find(c"PMPI_T_cvar_get_index")?;
        let alloc = find(c"PMPI_T_cvar_handle_alloc")?;
        let read = find(c"PMPI_T_cvar_read")?;
        let write = find(c"PMPI_T_cvar_write")?;
        let free = find(c"PMPI_T_cvar_handle_free")?;
        let finalize = find(c"PMPI_T_finalize")?;
        // SAFETY: each is the non-null address of the loaded MPI library's tool-interface function of that
        // name, whose prototype in `mpi.h` (fixed by the standard) is the type it is given here.
        unsafe {
            use std::mem::transmute;
            Ok(Interface {
                init: transmute::<*mut c_void, InitThread>(init),
                get_index: transmute::<*mut c_void, GetIndex>(get_index),
                alloc: transmute::<*mut c_void, HandleAlloc>(alloc),
                read: transmute::<*mut c_void, Read>(read),
                write: transmute::<*mut c_void, Write>(write),
                free: transmute::<*mut c_void, HandleFree>(free),
                finalize: transmute::<*mut c_void, Finalize>(finalize),
            })
        }
    }

    fn init(&self) -> bool {
        let mut provided = 0;
        // SAFETY: `MPI_T_init_thread` with a level and a live `int`.
        unsafe { (self.init)(MPI_THREAD_SINGLE, &mut provided) == MPI_SUCCESS }
    }

    fn finalize(&self) {
        // SAFETY: `MPI_T_finalize` takes nothing; called once per `init` that succeeded.
        unsafe { (self.finalize)() };
    }

    /// `f` with a handle to the integer control variable `name` (its count 1), freed after.
    fn with_int_handle<R>(&self, name: &CStr, f: impl FnOnce(*mut c_void) -> Result<R, String>) -> Result<R, String> {
        let (mut index, mut count) = (0, 0);
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: a NUL-terminated name and live locals for the outputs.
        if unsafe { (self.get_index)(name.as_ptr(), &mut index) } != MPI_SUCCESS {
            return Err(format!("MPICH has no control variable {}", name.to_string_lossy()));
        }
        // SAFETY: an index MPI gave, no object to bind (a variable of no object), live locals.
        if unsafe { (self.alloc)(index, std::ptr::null_mut(), &mut handle, &mut count) } != MPI_SUCCESS {
            return Err(format!("cannot open MPICH's control variable {}", name.to_string_lossy()));
        }
        let result = if count == 1 { f(handle) } else { Err(format!("{} is not one integer", name.to_string_lossy())) };
        // SAFETY: the handle `alloc` made, freed once.
        unsafe { (self.free)(&mut handle) };
        result
    }
}

/// Whether [`write_ints`] opened a tool-interface session.
static SESSION: AtomicBool = AtomicBool::new(false);

/// Writes integer control variables, before `PMPI_Init*`. Not `setenv`: changing the environment of a
/// process whose other threads may read it at the same time is a data race in C. The session stays open
/// until [`finish_writes`] (closing it before `PMPI_Init*` makes MPICH forget the values).
pub fn write_ints(writes: &[(&str, u32)]) -> Result<(), String> {
    if writes.is_empty() {
        return Ok(());
    }
    let t = Interface::load()?;
    if !t.init() {
        return Err("MPI_T_init_thread failed".into());
    }
    SESSION.store(true, Ordering::Release);
    for &(name, value) in writes {
        let cname = CString::new(name).unwrap_or_default();
        t.with_int_handle(&cname, |handle| {
            let v = value as c_int;
            // SAFETY: the handle of an integer variable of count 1, and a live `int` to read the value from.
            let rc = unsafe { (t.write)(handle, &v as *const c_int as *const c_void) };
            if rc == MPI_SUCCESS {
                Ok(())
            } else {
                Err(format!("cannot set MPICH's control variable {name}={value} (error {rc})"))
            }
        })?;
    }
    Ok(())
}

/// Balances [`write_ints`]'s `MPI_T_init_thread`, if it ran.
pub fn finish_writes() {
    if SESSION.swap(false, Ordering::AcqRel) {
        if let Ok(t) = Interface::load() {
            t.finalize();
        }
    }
}

/// The value MPICH runs with of the integer control variable `name` (after `MPI_Init`), or None where the
/// MPI library has no tool interface or no such variable.
///
/// The tool interface's session this opens stays open for the process's life (one per process,
/// [`READ_SESSION`]): MPICH 4.0.3 segfaults in every later `MPI_Comm_dup` once the last session closes
/// while MPI is initialised, without mpixstream too (`tests/mpich_builds/tool_session_dup.c`;
/// docs/native-defects.md).
pub fn read_int(name: &CStr) -> Option<c_int> {
    let t = Interface::load().ok()?;
    if !READ_SESSION.load(Ordering::Acquire) {
        if !t.init() {
            return None;
        }
        READ_SESSION.store(true, Ordering::Release);
    }
    t.with_int_handle(name, |handle| {
        let mut value: c_int = 0;
        // SAFETY: the handle of an integer variable of count 1, and a live `int` for the value.
        let rc = unsafe { (t.read)(handle, &mut value as *mut c_int as *mut c_void) };
        if rc == MPI_SUCCESS {
            Ok(value)
        } else {
            Err(String::new())
        }
    })
    .ok()
}

/// Whether [`read_int`] has opened its session (kept open: see there).
static READ_SESSION: AtomicBool = AtomicBool::new(false);

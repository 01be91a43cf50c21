//! Which ABI the program's MPI library speaks: MPICH's own (handles are `int`s, `crate::ffi`), or the
//! MPI-5 standard ABI (`mpi_abi.h`, `libmpi_abi.so.1`, what MPICH 5's `mpicc -mpi-abi` links): handles
//! are pointers and the constants differ. With the standard ABI both libraries run the program
//! untouched: every generated interposer forwards its call, arguments unchanged, to the next
//! definition (`next_wide!`), the lean library's `MPI_Init*` does nothing of its own but its banner,
//! and the MPIX entry points take the standard ABI's handles to the lean library's own implementation
//! of the MPIX stream API on that ABI (serial model; `standard_abi` in the lean library).
//!
//! Decided once, at the first interposed call (`MPI_Init*` in practice; the constructors do nothing),
//! and kept in a static whose fast path is one relaxed load: the library the calls reach answers
//! `MPI_Abi_get_version` (MPI-5, callable before `MPI_Init`: `1.0` on the standard ABI, `-1.-1` on
//! MPICH 5's own `libmpi.so.12`) where it defines it, else its file name tells (`libmpi_abi.so*`).
//!
//! Widths: an interposer declares a handle passed by value as [`crate::ffi::WideHandle`] (a register),
//! forwards it whole on the standard ABI and narrows it to MPICH's `int` otherwise; everything else in
//! the listed prototypes is as wide in both ABIs (`MPI_Aint` is `intptr_t`, `MPI_Count` and
//! `MPI_Offset` are 64-bit, pointers are pointers; `prototype_codegen` refuses any other by-value MPI
//! type).
use crate::fn_types;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

/// The standard ABI's `MPI_COMM_WORLD` (`mpi_abi.h`: `((MPI_Comm)0x00000101)`), register-wide.
pub const MPI_COMM_WORLD: crate::ffi::WideHandle = 0x101;
/// The standard ABI's `MPI_ERR_UNSUPPORTED_OPERATION` (MPICH's is 44).
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 55;

/// `mpi_abi.h`'s `MPI_Status`, what a standard-ABI program's status argument points to: three public
/// fields, then five of the library's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Status {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub internal: [c_int; 5],
}

const UNKNOWN: u8 = 0;
const MPICH: u8 = 1;
const STANDARD: u8 = 2;

static ABI: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether the program's MPI library speaks the standard ABI. The fast path (MPICH's ABI, decided) is
/// one relaxed load and a compare: the answer, once stored, never changes.
#[inline(always)]
pub fn standard() -> bool {
    let abi = ABI.load(Ordering::Relaxed);
    if abi == MPICH {
        return false;
    }
    abi == STANDARD || decide()
}

#[cold]
#[inline(never)]
fn decide() -> bool {
    // Two threads may both get here: they store the same answer.
    let standard = speaks_standard_abi();
    ABI.store(if standard { STANDARD } else { MPICH }, Ordering::Relaxed);
    standard
}

fn speaks_standard_abi() -> bool {
    if !lookup(c"MPI_Abi_get_version").is_null() {
        return abi_version().is_some_and(|(major, _)| major >= 1);
    }
    library_path().is_some_and(|p| names_standard_abi(&p))
}

/// What `MPI_Abi_get_version` answers (`-1.-1` on MPICH 5's own ABI), where the library has it and it
/// succeeds.
pub fn abi_version() -> Option<(c_int, c_int)> {
    let version = lookup(c"MPI_Abi_get_version");
    if version.is_null() {
        return None;
    }
    // SAFETY: the symbol of that name, whose prototype is the row's (two `int *`).
    let f = unsafe { std::mem::transmute::<*mut c_void, fn_types::MPI_Abi_get_version>(version) };
    let (mut major, mut minor) = (-1, -1);
    // SAFETY: `f` takes two `int *`; both point to live locals for the call.
    (unsafe { f(&mut major, &mut minor) } == 0).then_some((major, minor))
}

/// Whether a library file is a standard-ABI MPI library by its name (`libmpi_abi.so`, `.so.1`, ...).
pub fn names_standard_abi(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|file| file.starts_with("libmpi_abi.so"))
}

/// The sonames under which an MPI library loaded privately (`RTLD_LOCAL`, as Python does) is looked
/// for: the standard ABI's, or MPICH's (PyPI's `libmpi.so.12`, Debian's `libmpich.so.12`).
pub fn sonames() -> &'static [&'static CStr] {
    if standard() {
        &[c"libmpi_abi.so.1", c"libmpi_abi.so"]
    } else {
        &[c"libmpi.so.12", c"libmpich.so.12", c"libmpi.so", c"libmpich.so"]
    }
}

/// `name` in the MPI library the program's calls reach: the definition after this library in the
/// global scope, else in an MPI library loaded privately (either ABI's sonames). Null if none.
pub fn lookup(name: &CStr) -> *mut c_void {
    let next = crate::dl::next_symbol(name);
    if !next.is_null() {
        return next;
    }
    for soname in
        [c"libmpi_abi.so.1", c"libmpi.so.12", c"libmpich.so.12", c"libmpi_abi.so", c"libmpi.so", c"libmpich.so"]
    {
        if let Some(object) = crate::dl::loaded(soname) {
            let f = object.symbol(name);
            if !f.is_null() {
                return f;
            }
        }
    }
    std::ptr::null_mut()
}

/// The file of the MPI library the program's calls reach (the one defining `PMPI_Init`).
pub fn library_path() -> Option<String> {
    let init = lookup(c"PMPI_Init");
    (!init.is_null()).then(|| crate::mpich_build::library_path_of(init as usize)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_abi_libraries_are_told_by_their_file_name() {
        assert!(names_standard_abi("/opt/mpich/lib/libmpi_abi.so.1"));
        assert!(names_standard_abi("libmpi_abi.so"));
        assert!(!names_standard_abi("/usr/lib/x86_64-linux-gnu/libmpich.so.12"));
        assert!(!names_standard_abi("/opt/mpich/lib/libmpi.so.12.5.0"));
        assert!(!names_standard_abi("/opt/libmpi_abi.so.1/libmpi.so.12"));
    }

    #[test]
    fn without_an_mpi_library_the_answer_is_mpichs_and_kept() {
        // No MPI in a unit test: nothing defines MPI_Abi_get_version or PMPI_Init.
        assert!(!standard());
        assert_eq!(ABI.load(Ordering::Relaxed), MPICH);
        assert!(lookup(c"PMPI_Init").is_null());
    }
}

//! The `PMPI_*` (and native `PMPIX_*`) entry points, resolved once at `MPI_Init*` from the MPICH that is
//! actually loaded. The struct [`Pmpi`] and its resolver are generated from the rows of
//! `wrappers/mpi.prototypes` with the role `pmpi` (`pmpi?`: optional, an `Option`).
//!
//! Why run-time resolution: Debian ships `libmpich.so.12`, PyPI ships `libmpi.so.12`; linking to either
//! would tie the build to one of them. `dlsym(RTLD_NEXT)` finds the MPICH behind us in the preload order;
//! where the application loaded MPICH privately (Python's default `RTLD_LOCAL`), we look for it among the
//! loaded objects instead.
use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::OnceLock;

include!(concat!(env!("OUT_DIR"), "/pmpi_table.rs"));

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
    crate::say!("mpixstream: internal error: MPI entry points used before MPI_Init resolved them");
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
    // SAFETY: `find` answers, for a name, null or that symbol of the MPI library the program's calls
    // reach (`find_symbol_source`), which `resolve` requires.
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
    let probe = c"PMPI_Init";
    // Common case: MPICH is a dependency of the executable, behind us in the global scope.
    if !crate::dl::next_symbol(probe).is_null() {
        return Ok(Box::new(crate::dl::next_symbol));
    }
    // MPICH loaded with RTLD_LOCAL (for example by Python): find it among the loaded objects.
    // (The standard ABI's sonames where the program speaks it: then only `lookup` gets here, for `next!`.)
    for soname in crate::abi::sonames() {
        if let Some(object) = crate::dl::loaded(soname).filter(|o| !o.symbol(probe).is_null()) {
            return Ok(Box::new(move |name: &CStr| object.symbol(name)));
        }
    }
    Err("no MPI library is loaded in this process (PMPI_Init not found)".to_string())
}

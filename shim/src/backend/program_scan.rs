//! Whether the program can create a stream at all: does any object loaded at `MPI_Init` (the program
//! and its libraries, MPICH and mpixstream aside) name `MPIX_Stream_create` in its dynamic string
//! table? A program that never names it cannot make a stream (every stream starts there), so under the
//! `implicit` policy the reserved pool, whose shared memory MPICH sets up at `MPI_Init` whether it is used
//! or not, is not asked for (docs/policy.md, "Reserved pool").
//!
//! The string table holds the names of both the symbols an object defines and those it imports; we skip
//! the objects that define it (MPICH's library and ours), so a hit is an import. What the scan cannot
//! see: a library `dlopen`ed after `MPI_Init`, or a symbol fetched with `dlsym` — such a program still
//! works, on the serial backend (every stream on MPICH's implicit endpoint), and the banner says so.
use std::ffi::CStr;

/// Does a loaded object other than MPICH's (the one holding `mpi_code`), ours and the tools library's
/// (which forwards every MPI call, so names them all) import `name`?
pub fn program_imports(name: &CStr, mpi_code: usize) -> bool {
    let ours = program_imports as fn(&CStr, usize) -> bool as usize;
    mpixstream_wrappers::dl::named_elsewhere(name, &[mpi_code, ours], b"libmpixstream")
}

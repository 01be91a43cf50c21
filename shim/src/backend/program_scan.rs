//! What the program can ask of the library, read before `MPI_Init` from the names the loaded objects
//! import (their dynamic string tables; the program and its libraries, MPICH's library and ours aside):
//! - whether it names `MPIX_Stream_create`: every stream starts there, so a program that never names it
//!   cannot make one, and the reserved pool, whose shared memory MPICH sets up at `MPI_Init` whether it
//!   is used or not, is not asked for on its behalf (docs/policy.md, "Reserved pool");
//! - whether it names a blocking communicator constructor: the explicit policy moves only communicators
//!   such a constructor makes, so a program that names none has nothing the policy could move
//!   (`policy::demand`);
//! - whether it names `MPI_Cancel`: the explicit policy notes which requests of its streams are sends
//!   only for a program that can cancel one (`native_fixes::cancel`).
//!
//! The string table holds the names of both the symbols an object defines and those it imports; we skip
//! the objects that define them (MPICH's library and ours), so a hit is an import. What the scan cannot
//! see: a library `dlopen`ed after `MPI_Init`, or a symbol fetched with `dlsym` — such a program still
//! works, on the serial backend (every stream on MPICH's implicit endpoint), and the banner says so.
use std::ffi::CStr;

/// Does a loaded object other than MPICH's (the one holding `mpi_code`), ours and the tools library's
/// (which forwards every MPI call, so names them all) import `MPIX_Stream_create`?
pub fn names_streams(mpi_code: usize) -> bool {
    imports_any(&[c"MPIX_Stream_create"], mpi_code)
}

/// Does such an object import `MPI_Cancel`? A program that cannot cancel needs no note of which of its
/// requests are sends (`native_fixes::cancel`).
pub fn names_cancel(mpi_code: usize) -> bool {
    imports_any(&[c"MPI_Cancel"], mpi_code)
}

/// Does such an object import a blocking communicator constructor (the ones the explicit policy gives
/// streams: `CommCtor::is_blocking`)?
pub fn names_blocking_constructor(mpi_code: usize) -> bool {
    imports_any(&BLOCKING_CONSTRUCTORS, mpi_code)
}

/// The names of the blocking constructors (`CommCtor::name` of each `CommCtor::is_blocking`; a test
/// holds the two lists equal).
const BLOCKING_CONSTRUCTORS: [&CStr; 6] = [
    c"MPI_Comm_dup",
    c"MPI_Comm_dup_with_info",
    c"MPI_Comm_split",
    c"MPI_Comm_split_type",
    c"MPI_Comm_create",
    c"MPI_Comm_create_group",
];

fn imports_any(names: &[&CStr], mpi_code: usize) -> bool {
    let ours = imports_any as fn(&[&CStr], usize) -> bool as usize;
    mpixstream_wrappers::dl::named_elsewhere(names, &[mpi_code, ours], b"libmpixstream")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpixstream_wrappers::interpose::CommCtor;

    /// The constructor list is the policy's: every blocking constructor, nothing else.
    #[test]
    fn constructor_names_are_the_blocking_constructors() {
        let blocking: Vec<&str> = CommCtor::ALL.iter().filter(|k| k.is_blocking()).map(|k| k.name()).collect();
        let scanned: Vec<&str> = BLOCKING_CONSTRUCTORS.iter().map(|n| n.to_str().unwrap()).collect();
        assert_eq!(scanned, blocking);
    }
}

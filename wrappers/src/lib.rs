//! The MPI side of mpixstream, shared by every library we build:
//! - [`ffi`]: the MPICH ABI (handles are `int`, constants as in MPICH's `mpi.h`; identical in 4.0 and 5.x),
//! - [`pmpi`]: the `PMPI_*` entry points we call, resolved at run time from whichever MPICH is loaded,
//!   so that one build of the library serves Debian's `libmpich.so.12` and PyPI's `libmpi.so.12`,
//! - [`interpose`]: the tables from which the `MPI_*` interposers are generated,
//! - [`mpich_build`]: the name of the loaded MPICH build (version, netmod, library path).
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]

pub mod ffi;
pub mod interpose;
pub mod mpich_build;
pub mod pmpi;
pub mod tools;

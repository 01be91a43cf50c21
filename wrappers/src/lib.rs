//! The MPI side of mpixstream, shared by every library we build:
//! - [`abi`]: which ABI the program's MPI library speaks (MPICH's, or the MPI-5 standard ABI, which we
//!   pass through untouched);
//! - [`ffi`]: the MPICH ABI (handles are `int`, constants as in MPICH's `mpi.h`; identical in 4.0 and 5.x),
//!   and [`handles`]: MPICH's handle layout (kind, object type, index);
//! - `mpi.prototypes` (in this crate's folder): the one list of the MPI functions we touch, in C as in
//!   `mpi.h`, with each row's roles; `build.rs` generates from it [`fn_types`], the table in [`pmpi`]
//!   and the interposer macros of [`interpose`] and [`tools`];
//! - [`pmpi`]: the `PMPI_*` entry points we call, resolved at run time from whichever MPICH is loaded,
//!   so that one build of the library serves Debian's `libmpich.so.12` and PyPI's `libmpi.so.12`;
//! - [`next`]: `next!(MPI_X)`, the next definition of a listed function in the preload chain, looked up
//!   once;
//! - [`interpose`]: the lean library's interposers; [`tools`]: what the lean library and the tools
//!   library share, and the tools library's interposers;
//! - [`mpich_build`]: the name of the loaded MPICH build (version, netmod, library path);
//! - [`guard`]: the panic guard of every C entry point;
//! - [`say`]: the one place the libraries print (whole lines; a message of the job on rank 0 only);
//! - [`settings`]: every `MPIXSTREAM_*` variable, one table and one strict parser, read by both
//!   libraries;
//! - [`app`]: the application's pointer arguments, as an interposer hands them on;
//! - [`comm_identity`]: a communicator's identity from run to run (the guided policy's key);
//! - [`std_mpi`]: the MPI standard ABI's table and the typed functions over it;
//! - [`ucx`]: UCX's worker calls, seen on their way (the route around MPICH's `MPI_Init` hang over
//!   ch4:ucx between hosts);
//! - [`os`], [`dl`]: the operating system and the dynamic linker; `cuda` (feature `cuda`, the lean
//!   library's): the CUDA driver.
#![allow(non_camel_case_types, non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod abi;
pub mod app;
pub mod comm_identity;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod dl;
pub mod ffi;
pub mod fn_types;
pub mod guard;
pub mod handles;
pub mod interpose;
pub mod lean_query;
pub mod mpi;
pub mod mpich_build;
pub mod next;
pub mod os;
pub mod pmpi;
pub mod say;
pub mod settings;
pub mod std_mpi;
pub mod tools;
pub mod ucx;

#[cfg(test)]
mod prototype_codegen;
#[cfg(test)]
mod prototype_list;

//! The C function-pointer type of every function of `wrappers/mpi.prototypes`, named after it
//! (`fn_types::MPI_Sendrecv`), generated from its row: nothing here is typed by hand.
#![allow(non_camel_case_types)]

include!(concat!(env!("OUT_DIR"), "/fn_types.rs"));

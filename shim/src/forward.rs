//! The calls our routes forward, as safe functions (`forward::MPI_Irecv(...)`): each makes the call
//! through the next definition in the preload chain, its pointers the application's arguments or our
//! locals (`mpixstream_wrappers::app`). Generated from wrappers/mpi.prototypes; instantiated here because
//! the next definition's slot is a static of the crate that names it.
mpixstream_wrappers::forwarders!();

//! The enqueue engine: MPI operations queued on a stream's execution queue (user documentation and
//! design: docs/enqueue.md).
//!
//! A stream created with info `type=cudaStream_t` (a CUDA stream) or `type=mpixstream_host_queue`
//! (a serial CPU work queue) is *queue-backed*. `MPIX_*_enqueue` on a communicator of such a stream
//! puts the operation on its queue; exactly one thread of ours then drives the stream's endpoint:
//! - a host queue's own worker thread ([`host`]) starts each operation when it reaches it and, for
//!   the blocking forms (and `MPIX_Wait*_enqueue`), holds the queue until it completed: no hand-off
//!   between threads at all;
//! - a CUDA stream never runs MPI: it writes "operation k is ready" into a flag word and waits for
//!   "k is done" ([`flags`], [`cuda`]); a driver thread of ours ([`cuda_thread`]) watches the words,
//!   starts each operation once ready and writes its done word when it completed.
//!
//! Either way operations start as their nonblocking MPI forms and complete with `MPI_Test`
//! ([`driver`]), so the driving thread never blocks inside MPI and `MPI_Finalize` can always stop it
//! ([`lifecycle`]). `MPIX_Isend_enqueue`/`MPIX_Irecv_enqueue` return request handles of ours
//! ([`requests`]), valid only for `MPIX_Wait_enqueue`/`MPIX_Waitall_enqueue`.
//!
//! Layering: this module uses runtime, streams, comms, errors, backend, info and hex; none of them
//! uses it (mpix.rs and interposed.rs call in through the functions re-exported here).

pub mod api;
pub mod comm_counts;
pub mod config;
pub mod cuda;
pub mod cuda_staging;
pub mod cuda_thread;
pub mod driver;
pub mod engine;
pub mod flags;
pub mod host;
pub mod ledger;
pub mod lifecycle;
pub mod ops;
pub mod registry;
pub mod requests;
pub mod spec;

pub use config::{config, EnqConfig};
pub use lifecycle::{attach_queue, check_comm_free, detach_queue, finalize};
pub use registry::drives;
pub use spec::{parse_info, QueueSpec, CUDA_TYPE, HIP_TYPE, HOST_QUEUE_TYPE};

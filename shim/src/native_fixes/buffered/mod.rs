//! Buffered sends on native stream communicators (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Bsend_init` +
//! `MPI_Start`/`MPI_Startall`, and their large-count forms).
//!
//! Native MPICH's own buffered sends there never leave, or fail with `MPI_ERR_BUFFER`, because
//! nothing turns the stream's reserved VCI (docs/native-defects.md, "Global progress skips a stream's
//! reserved VCI").
//!
//! The route, on native stream communicators only: we buffer the message ourselves. The calling thread
//! packs it into memory of ours and sends it with `MPI_Isend_c` (`MPI_PACKED`) on the same
//! communicator, inside the stream's endpoint (claimed, as for any call there), so it keeps its place
//! among that thread's messages (a buffered send and a later `MPI_Send` to the same peer match in
//! order), tests it once and returns: the call is local (MPI 4.1 §3.4), it never waits for the receiver.
//! A message not yet complete becomes an orphan (`crate::orphans`): nobody waits for it, and the
//! progress helper (`crate::helper`) tests it until it completes, whatever its thread does meanwhile:
//! blocks elsewhere (`MPI_Barrier` on `MPI_COMM_WORLD`), computes, or exits. Until it is known
//! transmitted it holds its space in the attached buffer; a thread waiting for space (another
//! `MPI_Bsend`, `MPI_Buffer_detach`) takes it back itself from a message whose endpoint another thread
//! is inside, maybe blocked there for good (`Orphan::reclaim`: `MPI_Request_get_status`, no claim;
//! `tests/c/bsend_blocked_owner.c`, docs/architecture.md, "The protocol, model-checked").
//!
//! Space: `MPI_Buffer_attach` records the buffer's size; the space our messages take (packed size +
//! `MPI_BSEND_OVERHEAD` each) never exceeds it. A message larger than the buffer even when empty (or
//! with no buffer) goes to MPICH's own call, which reports `MPI_ERR_BUFFER` through the communicator's
//! handler. One that fits the empty buffer but finds no space waits for it, helping meanwhile (the
//! messages holding the space complete through the helper). MPI would allow `MPI_ERR_BUFFER` there
//! instead; we wait, as MPICH's own `MPI_Bsend` does. The memory is ours, so the attached buffer itself
//! serves the other communicators' buffered sends, which pass through. `MPI_Ibsend` returns an already
//! complete request (a send to `MPI_PROC_NULL`), as MPICH 5 does for a buffered send.
//! `MPI_Buffer_detach` keeps MPI's rule: it returns once every routed message is complete, helping
//! until then; so does `MPI_Finalize`.
//!
//! `MPI_Start` of a persistent buffered send made on such a communicator (recorded at `MPI_Bsend_init`)
//! is the same routed buffered send with the recorded arguments; MPICH's request stays inactive, and
//! `MPI_Wait`/`MPI_Test` on an inactive persistent request return at once with an empty status, as
//! they do for a started buffered send (complete when it starts).
//!
//! Not routed: MPI-4.1's per-communicator and per-session buffers (`MPI_Comm_attach_buffer`,
//! `MPI_Session_attach_buffer`): a routed message counts against the process buffer's size only, and
//! `MPI_Buffer_flush`/`MPI_Buffer_iflush`/`MPI_Comm_flush_buffer` wait for MPICH's own buffered
//! messages, not ours.
//!
//! Cost on everything else: the buffered-send interposers are one lookup (`native_stream_of`) and a
//! call through `next!`; `MPI_Start`/`MPI_Startall`/`MPI_Request_free` one relaxed load while no
//! persistent request is recorded (always, under `implicit`).
//!
//! The interposers' bodies take the application's arguments as its call gave them, wrapped
//! (`mpixstream_wrappers::app`), and pass them on unchanged to the next definition of the same call
//! (`crate::forward`) or to the route.
mod persistent_bsend;
mod route;

pub use persistent_bsend::{freed, freeing, persistent_bsend_created, start, startall};
pub use route::{buffer_attach, buffer_attach_c, buffer_detach, buffer_detach_c};

use crate::forward;
use crate::native_fixes::native_streams::native_stream_of;
use mpixstream_wrappers::app::{AppArg, AppIn};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::mpi::Comm;
use route::send_routed;
use std::os::raw::{c_int, c_void};

/// `MPI_Bsend`: on a native stream communicator, the routed buffered send.
pub fn bsend(
    buf: AppIn<c_void>,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return forward::MPI_Bsend(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend", || {
        send_routed(buf, count.into(), datatype, dest, tag, comm, || {
            forward::MPI_Bsend(buf, count, datatype, dest, tag, comm)
        })
    })
}

/// `MPI_Bsend_c`: as `MPI_Bsend`.
pub fn bsend_c(
    buf: AppIn<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if native_stream_of(comm).is_none() {
        return forward::MPI_Bsend_c(buf, count, datatype, dest, tag, comm);
    }
    ffi_guard("MPI_Bsend_c", || {
        send_routed(buf, count, datatype, dest, tag, comm, || {
            forward::MPI_Bsend_c(buf, count, datatype, dest, tag, comm)
        })
    })
}

/// A routed `MPI_Ibsend`: the message is buffered when the call returns, so its request is complete
/// at once (a send to `MPI_PROC_NULL`, as MPICH 5 returns a completed request for a buffered send).
/// `request`: the application's (a null pointer goes to `mpich`, MPICH's own call, which reports it).
fn ibsend_routed(
    comm: MPI_Comm,
    tag: c_int,
    request: AppArg<MPI_Request>,
    send: impl FnOnce() -> c_int,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    if request.is_empty() {
        return mpich();
    }
    let rc = send();
    if rc != MPI_SUCCESS {
        return rc;
    }
    crate::native_fixes::claimed(comm, c"MPI_Ibsend", || match Comm(comm).completed_request(tag) {
        Ok(done) => {
            request.set(done.raw());
            MPI_SUCCESS
        }
        Err(rc) => rc,
    })
}

/// `MPI_Ibsend`: on a native stream communicator, the routed buffered send, its request complete.
#[allow(clippy::too_many_arguments)]
pub fn ibsend(
    buf: AppIn<c_void>,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    let mpich = || forward::MPI_Ibsend(buf, count, datatype, dest, tag, comm, request);
    if native_stream_of(comm).is_none() {
        return mpich();
    }
    ffi_guard("MPI_Ibsend", || {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count.into(), datatype, dest, tag, comm, || {
                    forward::MPI_Bsend(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

/// `MPI_Ibsend_c`: as `MPI_Ibsend`.
#[allow(clippy::too_many_arguments)]
pub fn ibsend_c(
    buf: AppIn<c_void>,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: AppArg<MPI_Request>,
) -> c_int {
    let mpich = || forward::MPI_Ibsend_c(buf, count, datatype, dest, tag, comm, request);
    if native_stream_of(comm).is_none() {
        return mpich();
    }
    ffi_guard("MPI_Ibsend_c", || {
        ibsend_routed(
            comm,
            tag,
            request,
            || {
                send_routed(buf, count, datatype, dest, tag, comm, || {
                    forward::MPI_Bsend_c(buf, count, datatype, dest, tag, comm)
                })
            },
            mpich,
        )
    })
}

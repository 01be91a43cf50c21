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
//! blocks elsewhere (`MPI_Barrier` on `MPI_COMM_WORLD`), computes, or exits. Until then it holds its
//! space in the attached buffer.
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
//! The interposers' bodies take the application's arguments as its call gave them (the contract of each
//! is MPI's for that call) and pass them on unchanged to the next definition of the same call or to
//! the route, whose own contract is the same buffer rule.
mod persistent_bsend;
mod route;

pub use persistent_bsend::{freed, freeing, persistent_bsend_created, start, startall};
pub use route::{buffer_attach, buffer_attach_c, buffer_detach, buffer_detach_c};

use crate::native_fixes::native_streams::native_stream_of;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::mpi::{Comm, Datatype};
use mpixstream_wrappers::next;
use route::send_routed;
use std::os::raw::{c_int, c_void};

/// # Safety
/// The arguments of the application's `MPI_Bsend`, valid as MPI requires.
pub unsafe fn bsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged (module doc), within this call.
    unsafe {
        if native_stream_of(comm).is_none() {
            return next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm);
        }
        ffi_guard("MPI_Bsend", || {
            send_routed(buf, count.into(), datatype, dest, tag, comm, || {
                next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
            })
        })
    }
}

/// # Safety
/// The arguments of the application's `MPI_Bsend_c`, valid as MPI requires.
pub unsafe fn bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: as in `bsend`.
    unsafe {
        if native_stream_of(comm).is_none() {
            return next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm);
        }
        ffi_guard("MPI_Bsend_c", || {
            send_routed(buf, count, datatype, dest, tag, comm, || {
                next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm)
            })
        })
    }
}

/// A routed `MPI_Ibsend`: the message is buffered when the call returns, so its request is complete
/// at once (a send to `MPI_PROC_NULL`, as MPICH 5 returns a completed request for a buffered send).
/// `request`: the application's (`None`: a null pointer, which `mpich`'s own call reports).
fn ibsend_routed(
    comm: MPI_Comm,
    tag: c_int,
    request: Option<&mut MPI_Request>,
    send: impl FnOnce() -> c_int,
    mpich: impl FnOnce() -> c_int,
) -> c_int {
    let Some(request) = request else { return mpich() };
    let rc = send();
    if rc != MPI_SUCCESS {
        return rc;
    }
    crate::native_fixes::claimed(comm, c"MPI_Ibsend", || {
        // SAFETY: no buffer: zero elements, to `MPI_PROC_NULL`.
        match unsafe { Comm(comm).isend(std::ptr::null(), 0, Datatype::BYTE, MPI_PROC_NULL, tag) } {
            Ok(done) => {
                *request = done.raw();
                MPI_SUCCESS
            }
            Err(rc) => rc,
        }
    })
}

/// # Safety
/// The arguments of the application's `MPI_Ibsend`, valid as MPI requires.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged (module doc), within this call; `request` is
    // null or valid for a write.
    unsafe {
        if native_stream_of(comm).is_none() {
            return next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
        }
        let mpich = || next!(MPI_Ibsend)(buf, count, datatype, dest, tag, comm, request);
        ffi_guard("MPI_Ibsend", || {
            ibsend_routed(
                comm,
                tag,
                request.as_mut(),
                || {
                    send_routed(buf, count.into(), datatype, dest, tag, comm, || {
                        next!(MPI_Bsend)(buf, count, datatype, dest, tag, comm)
                    })
                },
                mpich,
            )
        })
    }
}

/// # Safety
/// The arguments of the application's `MPI_Ibsend_c`, valid as MPI requires.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: as in `ibsend`.
    unsafe {
        if native_stream_of(comm).is_none() {
            return next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
        }
        let mpich = || next!(MPI_Ibsend_c)(buf, count, datatype, dest, tag, comm, request);
        ffi_guard("MPI_Ibsend_c", || {
            ibsend_routed(
                comm,
                tag,
                request.as_mut(),
                || {
                    send_routed(buf, count, datatype, dest, tag, comm, || {
                        next!(MPI_Bsend_c)(buf, count, datatype, dest, tag, comm)
                    })
                },
                mpich,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native_fixes::native_streams::PANIC_FOR_TEST;

    /// A panic inside the buffered-send interposers comes back as `MPI_ERR_INTERN` (the exported
    /// symbols, as C calls them), never as an abort.
    #[test]
    fn a_panic_in_a_buffered_send_interposer_returns_mpi_err_intern() {
        PANIC_FOR_TEST.with(|p| p.set(true));
        let mut request = MPI_REQUEST_NULL;
        let one = 1;
        let p = &one as *const i32 as *const c_void;
        // SAFETY: valid arguments (a live one-element buffer, a live request); each call panics at its
        // first check (`PANIC_FOR_TEST`), before any MPI.
        let (bsend, ibsend_c) = unsafe {
            (
                crate::interposed::MPI_Bsend(p, 1, MPI_INT as WideHandle, 0, 0, MPI_COMM_WORLD as WideHandle),
                crate::interposed::MPI_Ibsend_c(
                    p,
                    1,
                    MPI_INT as WideHandle,
                    0,
                    0,
                    MPI_COMM_WORLD as WideHandle,
                    &mut request,
                ),
            )
        };
        PANIC_FOR_TEST.with(|p| p.set(false));
        assert_eq!((bsend, ibsend_c), (MPI_ERR_INTERN, MPI_ERR_INTERN));
    }
}

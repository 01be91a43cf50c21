//! Argument checks of the indexed calls and their error texts (`docs/multiplex.md`, "Errors"). The
//! checks are inline (the hot path); the texts are built only when an error is raised.
use super::{Multiplex, MPIX_ANY_INDEX};
use crate::errors::{raise, Class};
use crate::runtime::Runtime;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::mpi::{Comm, Errhandler};
use std::os::raw::c_int;

impl Multiplex {
    /// A local stream index, or the error.
    #[inline]
    pub(super) fn local_index(&self, idx: c_int, which: &str, f: &str) -> Result<usize, c_int> {
        if idx >= 0 && (idx as usize) < self.streams.len() {
            Ok(idx as usize)
        } else {
            Err(self.bad_index(self.rank, idx, which, f))
        }
    }

    /// Checks that process `rank` has stream index `idx`.
    #[inline]
    pub(super) fn remote_index(&self, rank: c_int, idx: c_int, which: &str, f: &str) -> Result<usize, c_int> {
        if idx >= 0 && idx < self.counts[rank as usize] {
            Ok(idx as usize)
        } else {
            Err(self.bad_index(rank, idx, which, f))
        }
    }

    #[cold]
    pub(super) fn bad_index(&self, rank: c_int, idx: c_int, which: &str, f: &str) -> c_int {
        let n = self.counts[rank as usize];
        let who = if rank == self.rank { "this process".to_string() } else { format!("rank {rank}") };
        if idx == MPIX_ANY_INDEX && which == "dest_stream_index" {
            return raise(
                self.comm,
                Class::Arg,
                f,
                "MPIX_ANY_INDEX is allowed only as the source_stream_index of a receive",
            );
        }
        if rank == self.rank {
            let valid = if n > 0 { format!("valid indices: 0 to {}", n - 1) } else { "it has no indices".into() };
            raise(
                self.comm,
                Class::Arg,
                f,
                &format!("{which} {idx} is out of range: this process attached {n} stream(s) to this multiplex communicator ({valid})"),
            )
        } else if idx < 0 || idx >= self.width {
            raise(
                self.comm,
                Class::Arg,
                f,
                &format!(
                    "{which} {idx} is out of range: {who} attached {n} stream(s) to this multiplex communicator, \
                     and no process more than {} (valid indices: 0 to count-1)",
                    self.width
                ),
            )
        } else {
            raise(
                self.comm,
                Class::Stream,
                f,
                &format!("{which} {idx}: {who} has no stream attached at index {idx} (it attached {n} stream(s))"),
            )
        }
    }

    #[inline]
    pub(super) fn check_rank(&self, rank: c_int, which: &str, f: &str) -> Result<(), c_int> {
        if rank >= 0 && rank < self.size() {
            Ok(())
        } else {
            Err(raise(
                self.comm,
                Class::Rank,
                f,
                &format!("{which} {rank} is not a rank of the communicator (size {})", self.size()),
            ))
        }
    }

    #[inline]
    pub(super) fn check_tag(&self, tag: c_int, any_ok: bool, f: &str) -> Result<(), c_int> {
        if (tag >= 0 && tag <= self.max_tag) || (any_ok && tag == MPI_ANY_TAG) {
            Ok(())
        } else {
            Err(self.bad_tag(tag, f))
        }
    }

    #[cold]
    fn bad_tag(&self, tag: c_int, f: &str) -> c_int {
        raise(
            self.comm,
            Class::Tag,
            f,
            &format!(
                "tag {tag} is invalid on this multiplex communicator: its tags run from 0 to {} \
                 (MPI_TAG_UB {} divided by {} stream indices, as the source index travels in the tag; \
                 MPIX_Comm_multiplex_tag_ub returns the bound)",
                self.max_tag,
                self.tag_ub,
                self.width.max(1)
            ),
        )
    }
}

/// An indexed call on a communicator that is not multiplex.
#[cold]
pub(super) fn not_multiplex(rt: &Runtime, comm: MPI_Comm, f: &str) -> c_int {
    if comm == MPI_COMM_NULL {
        return raise(MPI_COMM_WORLD, Class::Comm, f, "the communicator is MPI_COMM_NULL");
    }
    let what = if rt.comms.stream_of(comm).is_some() {
        "a single-stream communicator (MPIX_Stream_comm_create)"
    } else {
        "not a multiplex stream communicator"
    };
    raise(
        comm,
        Class::Comm,
        f,
        &format!(
            "communicator 0x{:08x} is {what}; indexed send and receive need one from MPIX_Stream_comm_create_multiplex",
            comm as u32
        ),
    )
}

/// The error handler of the hidden communicators of user communicator `user`: MPICH raises the errors
/// of their calls, and of their requests completing in the user's `MPI_Wait`, through it. The user's
/// own where it is `MPI_ERRORS_ARE_FATAL` or `MPI_ERRORS_ABORT`, so that such an error ends the job
/// as on a native communicator, wherever MPICH meets it; else `MPI_ERRORS_RETURN`, and our entry
/// points call the user's handler on what they return ([`forward`]). A handler of the user's own is
/// not copied: MPICH returns `MPI_SUCCESS` after one, which would hide the error from our code.
fn hidden_errhandler(user: MPI_Comm) -> Errhandler {
    let Ok(h) = Comm(user).errhandler() else {
        return Errhandler::ERRORS_RETURN;
    };
    // Predefined handlers: their views outlive the reference freed here.
    let mirrored = if h.raw() == MPI_ERRORS_ARE_FATAL || h.raw() == MPI_ERRORS_ABORT {
        Errhandler(h.raw())
    } else {
        Errhandler::ERRORS_RETURN
    };
    let _ = h.free();
    mirrored
}

impl Multiplex {
    /// Gives the hidden communicators the handler `hidden_errhandler` derives from the user's
    /// communicator's current one; at creation and after every `MPI_Comm_set_errhandler` of the
    /// communicator.
    pub(super) fn follow_user_errhandler(&self) {
        self.endpoints.set_errhandler(hidden_errhandler(self.comm));
    }
}

/// An error of MPICH on a hidden communicator, reported through the user's communicator.
#[cold]
fn forward_error(comm: MPI_Comm, rc: c_int) -> c_int {
    Comm(comm).call_errhandler(rc);
    rc
}

#[inline]
pub(super) fn forward(comm: MPI_Comm, rc: c_int) -> c_int {
    if rc == MPI_SUCCESS {
        rc
    } else {
        forward_error(comm, rc)
    }
}

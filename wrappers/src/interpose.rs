//! The `MPI_*` interposers of the lean library: the macro `interposers!(hooks, fixes)`, generated from
//! the rows of `wrappers/mpi.prototypes` with a `lean:` role (the list's header says what each role
//! calls).
//!
//! The library interposes only what it must: the initialisation and finalisation calls, the
//! communicator constructors and `MPI_Comm_free` (bookkeeping and the endpoint policy),
//! `MPI_Error_class` (so that our error codes report standard classes on every MPICH), and
//! `MPI_Sendrecv`, `MPI_Isendrecv(_replace)`, the probes, the nonblocking collectives, the
//! persistent-request constructors, the completion calls, `MPI_Start*`, the buffered sends and
//! `MPI_Buffer_attach`/`detach` (around native MPICH defects; one relaxed load while nothing of theirs
//! exists). Everything else, `MPI_Send` on a stream communicator
//! included, goes straight to MPICH; the counting interposers are the tools library's.
//!
//! A row becomes an exported `#[no_mangle]` function that forwards to a hook of the crate that
//! instantiates the macro, so the symbols are defined in that library only, and the policy lives there.

/// What a persistent request's constructor makes (`lean:persistent` rows, told apart by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistentKind {
    /// `MPI_Send_init`, `Ssend_init`, `Rsend_init` and their `_c` forms.
    PointToPointSend,
    /// `MPI_Recv_init` and its `_c` form.
    PointToPointRecv,
    /// `MPI_Psend_init`, `MPI_Precv_init`.
    Partitioned,
    /// The MPI-4 persistent collectives (`MPI_Allreduce_init`...) but the neighbourhood ones.
    Collective,
    /// `MPI_Neighbor_*_init`: they need their communicator's topology.
    NeighbourhoodCollective,
}

/// Which constructor made a communicator: decides stream inheritance (dup-like ones inherit their
/// parent's stream, as native MPICH does) and whether the explicit policy can attach a stream
/// (not to a nonblocking constructor, whose result is not ready when the call returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommCtor {
    Dup,
    DupWithInfo,
    Idup,
    IdupWithInfo,
    Split,
    SplitType,
    Create,
    CreateGroup,
}

impl CommCtor {
    /// Every constructor, in declaration order: a constructor's position here is its code in the C call
    /// that tells the tools library of a new communicator (`tools::COMM_CREATED_SYMBOL`).
    pub const ALL: [CommCtor; 8] = [
        CommCtor::Dup,
        CommCtor::DupWithInfo,
        CommCtor::Idup,
        CommCtor::IdupWithInfo,
        CommCtor::Split,
        CommCtor::SplitType,
        CommCtor::Create,
        CommCtor::CreateGroup,
    ];

    /// Dup-like constructors keep the parent's stream (native MPICH's rule; `split` does not).
    pub fn inherits_stream(self) -> bool {
        matches!(self, CommCtor::Dup | CommCtor::DupWithInfo | CommCtor::Idup | CommCtor::IdupWithInfo)
    }
    /// Whether the new communicator is complete when the call returns.
    pub fn is_blocking(self) -> bool {
        !matches!(self, CommCtor::Idup | CommCtor::IdupWithInfo)
    }
    pub fn name(self) -> &'static str {
        match self {
            CommCtor::Dup => "MPI_Comm_dup",
            CommCtor::DupWithInfo => "MPI_Comm_dup_with_info",
            CommCtor::Idup => "MPI_Comm_idup",
            CommCtor::IdupWithInfo => "MPI_Comm_idup_with_info",
            CommCtor::Split => "MPI_Comm_split",
            CommCtor::SplitType => "MPI_Comm_split_type",
            CommCtor::Create => "MPI_Comm_create",
            CommCtor::CreateGroup => "MPI_Comm_create_group",
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/lean_interposers.rs"));
include!(concat!(env!("OUT_DIR"), "/forwarders.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constructors_code_is_its_position() {
        // The C call to the tools library passes `kind as c_int`-like positions: they must agree.
        for (i, k) in CommCtor::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "{}", k.name());
        }
    }
}

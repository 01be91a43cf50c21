//! What every member of a communicator constructor does, decided by one function ([`plan`]) from facts
//! all members share.
//!
//! A constructor is a collective: every member of the parent must run the same MPI calls in the same
//! order, or the job hangs. So the plan may depend only on what every member knows alike: the backend
//! and the policy (the same settings on every rank), the constructor, whether the parent is an
//! intercommunicator, and the parent's class, which every member records alike ([`Parent`]: the
//! application's stream communicators and the policy's get a record on every member, whether that
//! member attached a stream or not). What only one member knows (its own stream, whether its pool is
//! exhausted) changes what it records, never which collectives it runs. (A dup of a stream
//! communicator that only some ranks attached a stream to hung: the ranks with a record took MPICH's
//! dup, the others the policy's split, create and agreement.)
use crate::backend::Backend;
use crate::config::Policy;
use mpixstream_wrappers::interpose::CommCtor;

/// The parent's class, recorded alike by every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parent {
    /// No record of ours (or one that decides nothing: a multiplex child without a stream).
    Plain,
    /// The application's stream communicator (`MPIX_Stream_comm_create`), whatever stream each member
    /// attached, `MPIX_STREAM_NULL` included.
    AppStream,
    /// An explicit-policy communicator; `base_idup`: every member's plain base can serve its idups
    /// (native backend: a base with the parent's topology, if it has one).
    Policy { base_idup: bool },
    /// A multiplex communicator.
    Multiplex,
}

/// The facts every member shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub backend: Backend,
    pub policy: Policy,
    pub kind: CommCtor,
    pub parent: Parent,
    pub intercomm: bool,
}

/// What the members do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// MPICH's constructor alone; the new communicator gets no record.
    Plain,
    /// MPICH's constructor alone, counted as left implicit: a nonblocking constructor under the
    /// explicit policy (attaching a stream is a blocking collective, which an idup must not become).
    PlainNonblocking,
    /// MPICH's constructor; the child gets the parent's record (its stream on each member, or none),
    /// as native MPICH gives a dup of a stream communicator the parent's streams.
    Inherit,
    /// The policy's dup on the native backend: the stream communicator made from the parent directly.
    PolicyDup,
    /// MPICH's constructor, then the policy's stream on the result; `endpoint_first`: on the split
    /// backend, the endpoint agreed over the parent before the constructor.
    PolicyAttach { endpoint_first: bool },
    /// The policy's idup of one of its communicators, from its plain base (native backend).
    IdupOfBase,
    /// A dup of a multiplex communicator, multiplex too.
    MultiplexDup,
    /// Refused on every member with `MPI_ERR_UNSUPPORTED_OPERATION`: a nonblocking dup of a multiplex
    /// communicator on the split backend (its endpoints are agreed with blocking collectives).
    RefuseNonblockingMultiplexDup,
}

/// The one decision (a table, tested exhaustively below).
pub fn plan(f: Facts) -> Plan {
    let dup_like = f.kind.inherits_stream();
    let blocking = f.kind.is_blocking();
    match f.parent {
        Parent::Multiplex if dup_like && !blocking && f.backend == Backend::Split => {
            Plan::RefuseNonblockingMultiplexDup
        }
        Parent::Multiplex if dup_like => Plan::MultiplexDup,
        Parent::AppStream if dup_like => Plan::Inherit,
        Parent::Policy { base_idup } if !blocking => {
            if base_idup && f.backend == Backend::Native && f.policy == Policy::Explicit {
                Plan::IdupOfBase
            } else {
                // MPICH's idup gives the child the parent's stream: recorded as shared.
                Plan::Inherit
            }
        }
        _ => plain_parent(f),
    }
}

/// The plan for a parent whose class decides nothing here.
fn plain_parent(f: Facts) -> Plan {
    if f.policy != Policy::Explicit {
        return Plan::Plain;
    }
    if !f.kind.is_blocking() {
        return Plan::PlainNonblocking;
    }
    match f.backend {
        Backend::Native if matches!(f.kind, CommCtor::Dup | CommCtor::DupWithInfo) && !f.intercomm => Plan::PolicyDup,
        // An intercommunicator result is left implicit by the attach itself (counted there).
        Backend::Native | Backend::Serial => Plan::PolicyAttach { endpoint_first: false },
        // Intel MPI: the endpoint must be on the communicator before its first collective, so it is
        // agreed over the parent, which only the constructors every member of the parent calls allow
        // (not `MPI_Comm_create_group`, whose communicators stay on endpoint 0).
        Backend::Split => Plan::PolicyAttach { endpoint_first: f.kind != CommCtor::CreateGroup && !f.intercomm },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [CommCtor; 8] = [
        CommCtor::Dup,
        CommCtor::DupWithInfo,
        CommCtor::Idup,
        CommCtor::IdupWithInfo,
        CommCtor::Split,
        CommCtor::SplitType,
        CommCtor::Create,
        CommCtor::CreateGroup,
    ];

    fn all_facts() -> impl Iterator<Item = Facts> {
        let parents = [
            Parent::Plain,
            Parent::AppStream,
            Parent::Policy { base_idup: false },
            Parent::Policy { base_idup: true },
            Parent::Multiplex,
        ];
        let mut out = Vec::new();
        for backend in [Backend::Native, Backend::Serial, Backend::Split] {
            for policy in [Policy::Implicit, Policy::Explicit] {
                for kind in KINDS {
                    for parent in parents {
                        for intercomm in [false, true] {
                            out.push(Facts { backend, policy, kind, parent, intercomm });
                        }
                    }
                }
            }
        }
        out.into_iter()
    }

    /// The rows the issue names, and the properties every row keeps.
    #[test]
    fn the_plan_follows_the_table() {
        let f = |backend, policy, kind, parent| Facts { backend, policy, kind, parent, intercomm: false };
        use Backend::{Native, Serial};
        use CommCtor::{CreateGroup, Dup, DupWithInfo, Idup, IdupWithInfo};
        use Policy::{Explicit, Implicit};
        let split_backend = Backend::Split;
        let split = CommCtor::Split;
        // A dup of the application's stream communicator: MPICH's dup on every member, under every
        // policy, whatever stream each member attached (the hang this table fixes).
        for b in [Native, Serial, split_backend] {
            for p in [Implicit, Explicit] {
                for k in [Dup, DupWithInfo, Idup, IdupWithInfo] {
                    assert_eq!(plan(f(b, p, k, Parent::AppStream)), Plan::Inherit, "{b:?} {p:?} {k:?}");
                }
                // Not dup-like: the parent's streams are not inherited; the policy decides.
                assert_eq!(plan(f(b, p, split, Parent::AppStream)), plan(f(b, p, split, Parent::Plain)));
            }
        }
        assert_eq!(plan(f(Native, Explicit, Dup, Parent::Plain)), Plan::PolicyDup);
        assert_eq!(plan(f(Native, Explicit, Dup, Parent::Policy { base_idup: true })), Plan::PolicyDup);
        assert_eq!(plan(f(Native, Explicit, split, Parent::Plain)), Plan::PolicyAttach { endpoint_first: false });
        assert_eq!(plan(f(Serial, Explicit, Dup, Parent::Plain)), Plan::PolicyAttach { endpoint_first: false });
        assert_eq!(plan(f(split_backend, Explicit, Dup, Parent::Plain)), Plan::PolicyAttach { endpoint_first: true });
        assert_eq!(
            plan(f(split_backend, Explicit, CreateGroup, Parent::Plain)),
            Plan::PolicyAttach { endpoint_first: false }
        );
        assert_eq!(plan(f(Native, Explicit, Idup, Parent::Plain)), Plan::PlainNonblocking);
        assert_eq!(plan(f(Native, Explicit, Idup, Parent::Policy { base_idup: true })), Plan::IdupOfBase);
        assert_eq!(plan(f(Native, Explicit, Idup, Parent::Policy { base_idup: false })), Plan::Inherit);
        assert_eq!(plan(f(Serial, Explicit, Idup, Parent::Policy { base_idup: true })), Plan::Inherit);
        assert_eq!(plan(f(Native, Explicit, Dup, Parent::Multiplex)), Plan::MultiplexDup);
        assert_eq!(plan(f(Native, Implicit, Idup, Parent::Multiplex)), Plan::MultiplexDup);
        assert_eq!(plan(f(split_backend, Explicit, Idup, Parent::Multiplex)), Plan::RefuseNonblockingMultiplexDup);
        assert_eq!(plan(f(Native, Explicit, split, Parent::Multiplex)), Plan::PolicyAttach { endpoint_first: false });
        let inter = Facts { intercomm: true, ..f(Native, Explicit, Dup, Parent::Plain) };
        assert_eq!(plan(inter), Plan::PolicyAttach { endpoint_first: false });
        let inter = Facts { intercomm: true, ..f(split_backend, Explicit, Dup, Parent::Plain) };
        assert_eq!(plan(inter), Plan::PolicyAttach { endpoint_first: false });

        for facts in all_facts() {
            let p = plan(facts);
            // Under `implicit` nothing of the policy's runs.
            if facts.policy == Policy::Implicit {
                assert!(
                    matches!(p, Plan::Plain | Plan::Inherit | Plan::MultiplexDup | Plan::RefuseNonblockingMultiplexDup),
                    "{facts:?} -> {p:?}"
                );
            }
            // A nonblocking constructor never runs the policy's blocking collectives.
            if !facts.kind.is_blocking() {
                assert!(!matches!(p, Plan::PolicyDup | Plan::PolicyAttach { .. }), "{facts:?} -> {p:?}");
            }
            // The policy's own dup and idup are native only.
            if matches!(p, Plan::PolicyDup | Plan::IdupOfBase) {
                assert_eq!(facts.backend, Backend::Native, "{facts:?}");
            }
            if let Plan::PolicyAttach { endpoint_first: true } = p {
                assert_eq!(facts.backend, split_backend);
            }
        }
    }
}

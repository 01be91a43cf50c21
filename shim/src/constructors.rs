//! The communicator constructors' interposer body: what every member of a constructor does (refuse, the
//! policy's own dup, MPICH's constructor and then a stream, the parent's stream, a multiplex child...),
//! planned from facts the members share (`ctor_plan`) so that they all take the same path.
use crate::comms::{CommRecord, Origin};
use crate::config::Policy;
use crate::ctor_plan::{self, Parent, Plan};
use crate::policy;
use crate::runtime::{self, Runtime};
use mpixstream_wrappers::app::AppArg;
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::guard::ffi_guard;
use mpixstream_wrappers::interpose::CommCtor;
use mpixstream_wrappers::mpi::Comm;
use mpixstream_wrappers::pmpi::{self, pmpi, Pmpi};
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

/// What [`comm_constructed`] does for a plan (`ctor_plan::Plan`, decided from the facts every member
/// shares): one row per plan, so that the constructor's body is one `match` carrying it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Refused on every member with `MPI_ERR_UNSUPPORTED_OPERATION`, raised on the parent.
    Refuse,
    /// The policy's own blocking dup instead of MPICH's (`policy::dup_directly`).
    PolicyDup,
    /// The policy's idup from the parent's plain base (`policy::base::idup`), counted as left implicit.
    IdupOfBase,
    /// MPICH's constructor, the split backend's endpoint agreed over the parent first where
    /// `agree_first`; then, on a member that got a communicator, `then`.
    Create { agree_first: bool, then: Then },
}

/// What follows MPICH's constructor on a member that got a communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// Nothing: a plain communicator, no record.
    Nothing,
    /// Counted as left implicit (a nonblocking constructor under the explicit policy).
    CountNonblocking,
    /// The parent's record, on the child ([`inherit`]).
    Inherit,
    /// A multiplex dup of a multiplex parent (`multiplex::comm_constructed`).
    Multiplex,
    /// The policy's stream (`policy::attach_stream`), with the endpoint agreed first, if any.
    AttachStream,
}

/// What every member does for a constructor with these shared facts: `ctor_plan`'s plan, as an action.
fn decide(facts: ctor_plan::Facts) -> Action {
    action(ctor_plan::plan(facts))
}

/// The decision table (tested below).
fn action(plan: Plan) -> Action {
    let create = |then| Action::Create { agree_first: false, then };
    match plan {
        Plan::RefuseNonblockingMultiplexDup => Action::Refuse,
        Plan::PolicyDup => Action::PolicyDup,
        Plan::IdupOfBase => Action::IdupOfBase,
        Plan::PolicyAttach { endpoint_first } => {
            Action::Create { agree_first: endpoint_first, then: Then::AttachStream }
        }
        Plan::Plain => create(Then::Nothing),
        Plan::PlainNonblocking => create(Then::CountNonblocking),
        Plan::Inherit => create(Then::Inherit),
        Plan::MultiplexDup => create(Then::Multiplex),
    }
}

/// A communicator constructor: what every member does is planned from facts they all share
/// (`ctor_plan`), turned into an [`Action`], then done: MPICH's constructor (`create`), the child's
/// inherited record, the explicit policy's stream, or a multiplex dup. `info`: the info argument of
/// `MPI_Comm_dup_with_info`; `request`: the request of `MPI_Comm_idup*`; `newcomm` and `request`: the
/// application's arguments, which `create`, the application's call of MPICH's constructor, writes. The
/// constructor runs collectives over `parent`: inside its stream's endpoint, where it has one.
pub fn comm_constructed(
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: AppArg<MPI_Comm>,
    info: Option<MPI_Info>,
    request: Option<AppArg<MPI_Request>>,
    create: &dyn Fn(&Pmpi) -> c_int,
) -> c_int {
    ffi_guard(kind.name(), || {
        let Some(rt) = runtime::active() else {
            return match pmpi::load() {
                Ok(p) => create(p),
                Err(_) => MPI_ERR_OTHER,
            };
        };
        // The child's identity from run to run, where identities are kept (the guided policy's key).
        let pending = if policy::identity::on(rt) { policy::identity::begin(rt, kind, parent) } else { None };
        let action = decide(facts(rt, kind, parent, pending));
        let _claim = crate::native_fixes::native_streams::native_stream_of(parent).map(|s| s.claim());
        let rc = carry_out(rt, action, kind, parent, newcomm, info, request, create);
        if let Some(p) = pending.filter(|_| rc == MPI_SUCCESS) {
            if let Some(child) = newcomm.get() {
                policy::identity::made(p, kind, child);
            }
        }
        rc
    })
}

/// What [`comm_constructed`] does once the action is decided: one arm per action.
#[allow(clippy::too_many_arguments)]
fn carry_out(
    rt: &'static Runtime,
    action: Action,
    kind: CommCtor,
    parent: MPI_Comm,
    newcomm: AppArg<MPI_Comm>,
    info: Option<MPI_Info>,
    request: Option<AppArg<MPI_Request>>,
    create: &dyn Fn(&Pmpi) -> c_int,
) -> c_int {
    match action {
        Action::Refuse => crate::errors::raise(
            parent,
            crate::errors::Class::Unsupported,
            kind.name(),
            "a nonblocking dup of a multiplex communicator is not supported on the split backend (its hidden \
                 communicators' thread-split endpoints are agreed with blocking collectives); use MPI_Comm_dup",
        ),
        // The policy's blocking dup on the native backend: the stream communicator made from `parent`
        // directly, so that MPICH copies the attributes once, into the communicator the application
        // gets.
        Action::PolicyDup => match newcomm.get() {
            Some(mut out) => {
                let rc = policy::dup_directly(rt, parent, &mut out, info);
                newcomm.set(out);
                rc
            }
            // MPICH's own dup reports the null argument.
            None => create(pmpi()),
        },
        // The policy's idup of one of its communicators: the child is not on the parent's stream.
        Action::IdupOfBase => {
            let rc = crate::policy::base::idup(rt, kind, parent, newcomm, info, request, create);
            if rc == MPI_SUCCESS {
                policy::STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
            }
            rc
        }
        Action::Create { agree_first, then } => {
            // The split backend's endpoint for the new communicator, agreed over `parent` first.
            let agreed = agree_first.then(|| policy::endpoint_before(rt, parent));
            let rc = create(pmpi());
            // What MPICH's constructor has just written where it succeeded.
            let made = if rc == MPI_SUCCESS { newcomm.get() } else { None };
            if let Some(made) = made {
                // The tools library (if loaded) counts what MPICH made, as its round robin over its
                // implicit VCIs does (`MPI_COMM_NULL`: this process got none).
                crate::tools_link::tools_comm_created(kind, parent, made);
            }
            let Some(mut child) = made.filter(|&c| c != MPI_COMM_NULL) else {
                policy::give_back(rt, agreed);
                return rc;
            };
            match then {
                Then::Nothing => rc,
                Then::CountNonblocking => {
                    policy::STATS.nonblocking.fetch_add(1, Ordering::Relaxed);
                    rc
                }
                Then::Inherit => inherit(rt, parent, child, rc),
                Then::AttachStream => {
                    let rc = policy::attach_stream(rt, &mut child, agreed);
                    newcomm.set(child);
                    rc
                }
                Then::Multiplex => crate::multiplex::comm_constructed(rt, kind, parent, newcomm, request).unwrap_or(rc),
            }
        }
    }
}

/// The facts of a constructor of `parent` that every member shares (`ctor_plan`); `pending`: the
/// child's identity, where kept (the guided policy decides by it: `guided::policy_for`).
fn facts(
    rt: &Runtime,
    kind: CommCtor,
    parent: MPI_Comm,
    pending: Option<policy::identity::Pending>,
) -> ctor_plan::Facts {
    let class = if crate::multiplex::registry::lookup(parent).is_some() {
        Parent::Multiplex
    } else {
        match rt.comms.get(parent) {
            Some(r) if r.origin == Origin::User => Parent::AppStream,
            Some(r) if r.origin == Origin::Policy => Parent::Policy {
                base_idup: r.base().is_some_and(|b| b.topology || !crate::policy::base::has_topology(parent)),
            },
            _ => Parent::Plain,
        }
    };
    let policy = policy::guided::policy_for(rt.config.policy, class, kind, pending.map(|p| p.selected()));
    // Only the policy's plans look at it (one query of MPICH's, the same on every member; a failed one
    // counts as an intracommunicator).
    let inter = policy == Policy::Explicit && parent != MPI_COMM_NULL && Comm(parent).is_inter().unwrap_or(false);
    ctor_plan::Facts { backend: rt.backend, policy, kind, parent: class, intercomm: inter }
}

/// `child` carries the record of `parent` on this member: its stream, or none (every member records
/// the child alike, so that a constructor of the child is planned alike: `ctor_plan`). No base: its
/// collectives run on itself.
fn inherit(rt: &Runtime, parent: MPI_Comm, child: MPI_Comm, rc: c_int) -> c_int {
    match rt.comms.get(parent) {
        Some(p) => rt.attach_record(
            child,
            CommRecord { stream: p.stream, origin: p.origin, base: None, collectives: crate::comms::Route::Comm },
        ),
        None => rc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;

    const PLANS: [Plan; 9] = [
        Plan::Plain,
        Plan::PlainNonblocking,
        Plan::Inherit,
        Plan::PolicyDup,
        Plan::PolicyAttach { endpoint_first: false },
        Plan::PolicyAttach { endpoint_first: true },
        Plan::IdupOfBase,
        Plan::MultiplexDup,
        Plan::RefuseNonblockingMultiplexDup,
    ];

    /// Every plan's row, and the properties the constructors rely on.
    #[test]
    fn each_plan_has_its_action() {
        let create = |then| Action::Create { agree_first: false, then };
        assert_eq!(action(Plan::Plain), create(Then::Nothing));
        assert_eq!(action(Plan::PlainNonblocking), create(Then::CountNonblocking));
        assert_eq!(action(Plan::Inherit), create(Then::Inherit));
        assert_eq!(action(Plan::MultiplexDup), create(Then::Multiplex));
        assert_eq!(action(Plan::PolicyDup), Action::PolicyDup);
        assert_eq!(action(Plan::IdupOfBase), Action::IdupOfBase);
        assert_eq!(action(Plan::RefuseNonblockingMultiplexDup), Action::Refuse);
        for endpoint_first in [false, true] {
            assert_eq!(
                action(Plan::PolicyAttach { endpoint_first }),
                Action::Create { agree_first: endpoint_first, then: Then::AttachStream }
            );
        }
        for plan in PLANS {
            let a = action(plan);
            // Only the policy's attach agrees an endpoint first, and only it attaches a stream.
            if let Action::Create { agree_first, then } = a {
                assert!(!agree_first || then == Then::AttachStream, "{plan:?} -> {a:?}");
                assert_eq!(then == Then::AttachStream, matches!(plan, Plan::PolicyAttach { .. }), "{plan:?}");
            }
            // MPICH's constructor runs for every plan but the policy's own dup and idup and the refusal.
            assert_eq!(
                matches!(a, Action::Create { .. }),
                !matches!(plan, Plan::PolicyDup | Plan::IdupOfBase | Plan::RefuseNonblockingMultiplexDup),
                "{plan:?}"
            );
        }
    }

    /// The table composed with `ctor_plan::plan`: what each kind of parent gets under the explicit
    /// policy on the native backend.
    #[test]
    fn facts_to_actions() {
        let f = |kind, parent| ctor_plan::Facts {
            backend: Backend::Native,
            policy: Policy::Explicit,
            kind,
            parent,
            intercomm: false,
        };
        assert_eq!(decide(f(CommCtor::Dup, Parent::Plain)), Action::PolicyDup);
        assert_eq!(
            decide(f(CommCtor::Split, Parent::Plain)),
            Action::Create { agree_first: false, then: Then::AttachStream }
        );
        assert_eq!(
            decide(f(CommCtor::Dup, Parent::AppStream)),
            Action::Create { agree_first: false, then: Then::Inherit }
        );
        assert_eq!(decide(f(CommCtor::Idup, Parent::Policy { base_idup: true })), Action::IdupOfBase);
        assert_eq!(
            decide(f(CommCtor::Idup, Parent::Plain)),
            Action::Create { agree_first: false, then: Then::CountNonblocking }
        );
        // The split backend: the endpoint agreed over the parent first; a multiplex idup refused.
        let split = |kind, parent| ctor_plan::Facts { backend: Backend::Split, ..f(kind, parent) };
        assert_eq!(
            decide(split(CommCtor::Dup, Parent::Plain)),
            Action::Create { agree_first: true, then: Then::AttachStream }
        );
        assert_eq!(decide(split(CommCtor::Idup, Parent::Multiplex)), Action::Refuse);
        // Under `implicit`: MPICH's constructor, nothing after it.
        let implicit = ctor_plan::Facts { policy: Policy::Implicit, ..f(CommCtor::Dup, Parent::Plain) };
        assert_eq!(decide(implicit), Action::Create { agree_first: false, then: Then::Nothing });
    }
}

//! The guided policy (`MPIXSTREAM_POLICY=guided`, `MPIXSTREAM_PROFILE=profile.json`): the explicit
//! policy, for the communicators on which the contention profile saw threads meet only.
//!
//! `mpixrun --profile` writes, in `profile.json`'s `guided` section, every communicator's identity
//! (`mpixstream_wrappers::comm_identity`: root, constructor and number of the call on its parent) that
//! each rank made, and the union over the ranks of those the profile's verdict says the explicit
//! policy would separate (threads met inside their shared endpoint, each on a communicator of its own).
//! Loaded once, at `MPI_Init`, into a tree of identities ([`Profile`]); each communicator then carries
//! its node in that tree (`identity.rs`), so a constructor finds its child's node by a binary search
//! among its parent's children, and whether it is selected by reading that node: no hash, no text.
//!
//! Every rank reads the same file and computes the same identity (`identity.rs`), so every member of
//! a constructor's parent decides alike, as `ctor_plan` requires. Where the program differs from the
//! profile: another rank count leaves every communicator implicit; a constructor the profile never saw
//! leaves its communicator (and what derives from it) implicit. Both are said once on rank 0's stderr
//! and counted in the report.
use super::guided_profile::{profile, Profile};
use crate::config::Policy;
use crate::ctor_plan::Parent;
use crate::runtime::Runtime;
use mpixstream_wrappers::comm_identity::{self, Step};
use mpixstream_wrappers::interpose::CommCtor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// The job's rank count equals the profile's (decided once: [`follows`]).
static SAME_RANKS: OnceLock<bool> = OnceLock::new();

/// What the guided policy did, for the report.
pub struct GuidedStats {
    /// Constructors whose communicator the profile selected.
    pub selected: AtomicU64,
    /// Constructors the profile never saw (another input): left implicit.
    pub unseen: AtomicU64,
    /// Communicators without an identity (`MPI_Comm_create_group`, or made from one the library did not
    /// see made): left implicit.
    pub unidentified: AtomicU64,
}

pub static STATS: GuidedStats =
    GuidedStats { selected: AtomicU64::new(0), unseen: AtomicU64::new(0), unidentified: AtomicU64::new(0) };

/// The profile, where the guided policy is in force (not where the program is inert: `demand`).
pub fn in_force(rt: &Runtime) -> Option<&'static Profile> {
    profile().filter(|_| rt.config.policy == Policy::Guided)
}

/// Whether the profile guides this job: the same rank count as the profile's. Said once, on rank 0,
/// where it is not.
fn follows(rt: &Runtime, p: &Profile) -> bool {
    *SAME_RANKS.get_or_init(|| {
        let same = p.nranks == rt.size as u32;
        if !same && rt.rank == 0 {
            mpixstream_wrappers::say!(
                "mpixstream: guided policy: the profile {} was made with {} ranks, this job has {}: its communicators \
                 need not be the profile's, so every communicator stays implicit (make a profile with {} ranks: \
                 mpixrun --profile -n {} ...)",
                p.path,
                p.nranks,
                rt.size,
                rt.size,
                rt.size
            );
        }
        same
    })
}

/// The profile's node of the communicator a constructor makes from a parent of node `parent` (`None`:
/// the parent's identity was not in the profile) by `step`; `None` where the profile did not see it
/// (counted, said once).
pub fn child(rt: &Runtime, parent: Option<u32>, step: Step, parent_path: impl FnOnce() -> String) -> Option<u32> {
    let p = profile()?;
    if !follows(rt, p) {
        return None;
    }
    let found = parent.and_then(|n| p.child(n, step).ok());
    if found.is_none() {
        STATS.unseen.fetch_add(1, Ordering::Relaxed);
        if parent.is_some() {
            // The first constructor where the program leaves the profile's path (its descendants follow).
            say_unseen(rt, &comm_identity::format_step(&parent_path(), step), p);
        }
    }
    found
}

/// Whether the profile selected node `node` (a communicator this job made as the profile saw it).
#[inline]
pub fn selected(node: Option<u32>) -> bool {
    let Some(n) = node else { return false };
    profile().is_some_and(|p| p.is_selected(n))
}

/// The policy a constructor is planned under (`ctor_plan`), from facts every member of the parent shares:
/// under `guided`, `explicit` for a communicator the profile selected, and for a dup or idup of a
/// communicator the policy gave a stream (made as the explicit policy makes them: a dup of a stream
/// communicator would share its stream, an idup is made from its plain base); `implicit` for the rest.
/// The other policies as they are. `selected`: whether the profile selected the child (`None`: the
/// child has no identity). Counts what it decided.
pub fn policy_for(policy: Policy, parent: Parent, kind: CommCtor, selected: Option<bool>) -> Policy {
    if policy != Policy::Guided {
        return policy;
    }
    match selected {
        Some(true) => STATS.selected.fetch_add(1, Ordering::Relaxed),
        Some(false) => 0,
        None => STATS.unidentified.fetch_add(1, Ordering::Relaxed),
    };
    if selected == Some(true) || (matches!(parent, Parent::Policy { .. }) && kind.inherits_stream()) {
        Policy::Explicit
    } else {
        Policy::Implicit
    }
}

fn say_unseen(rt: &Runtime, identity: &str, p: &Profile) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if rt.rank == 0 && !SAID.swap(true, Ordering::Relaxed) {
        mpixstream_wrappers::say!(
            "mpixstream: guided policy: this program made {identity}, which the profile {} never saw (another input \
             or another version of the program?): it stays implicit, as will every communicator the profile did \
             not see (the report counts them)",
            p.path
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `guided`: the selected communicators, and the dups and idups of a policy communicator, are
    /// planned as under `explicit`; everything else as under `implicit`; other policies untouched.
    #[test]
    fn the_plan_follows_the_selection() {
        use CommCtor::{Dup, Idup, Split};
        let policy = Parent::Policy { base_idup: true };
        assert_eq!(policy_for(Policy::Guided, Parent::Plain, Dup, Some(true)), Policy::Explicit);
        assert_eq!(policy_for(Policy::Guided, Parent::Plain, Dup, Some(false)), Policy::Implicit);
        assert_eq!(policy_for(Policy::Guided, Parent::Plain, Split, None), Policy::Implicit);
        assert_eq!(policy_for(Policy::Guided, policy, Dup, Some(false)), Policy::Explicit);
        assert_eq!(policy_for(Policy::Guided, policy, Idup, None), Policy::Explicit);
        assert_eq!(policy_for(Policy::Guided, policy, Split, Some(false)), Policy::Implicit);
        assert_eq!(policy_for(Policy::Guided, Parent::AppStream, Dup, Some(false)), Policy::Implicit);
        for p in [Policy::Implicit, Policy::Explicit] {
            assert_eq!(policy_for(p, Parent::Plain, Dup, Some(true)), p);
            assert_eq!(policy_for(p, policy, Split, None), p);
        }
    }
}

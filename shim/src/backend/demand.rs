//! What a program can gain from the library, decided once at `MPI_Init*`, before MPICH starts, from what
//! is known then: the thread level it asks for, what its loaded objects name (`program_scan`) and the
//! settings. A program that cannot gain runs as if the library were not there (`Inert`): at its own
//! thread level, with no reserved pool and no progress helper thread, every policy behaving as
//! `implicit` (docs/policy.md, "When the policy is inert").
//!
//! Why each rule holds:
//! - Below `MPI_THREAD_MULTIPLE` no two threads are ever inside MPI at once, so there is no contention
//!   for an endpoint to remove; raising the level to `MULTIPLE` (which MPICH 5 makes pay on every call:
//!   an 8-byte `MPI_Allreduce` 0.30 µs → 1.75 µs) and reserving a pool would be all cost. A program that
//!   names `MPIX_Stream_create` is the exception: it uses the stream API itself, and gets what the API
//!   needs (the native backend's pool, and `MPI_THREAD_MULTIPLE` for the progress helper thread that
//!   keeps MPI's progress rule on the streams' endpoints).
//! - `MPIXSTREAM_THREAD_MULTIPLE=1` is the user's own request for `MULTIPLE` (the enqueue engine's
//!   threads): never inert.
//! - Under `explicit`, a program that names no blocking communicator constructor and no stream call has
//!   nothing the policy could move: the pool it would reserve could never be used.
//! - Under `explicit` on MPICH 4.1 and 4.2 (native backend), the policy gives no streams at all (no
//!   progress helper on the implicit pool there, `backend::policy_unserved`): a program that names no
//!   stream call, with no pool size asked, would pay for a pool and a helper thread nobody uses (the
//!   4.1.3 `policy_idup` row across hosts: 176 s with them, docs/cluster.md).
use crate::config::{Config, Policy};
use mpixstream_wrappers::ffi::*;
use std::os::raw::c_int;

/// Why the library leaves a program alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inert {
    /// The program asked for this thread level (below `MPI_THREAD_MULTIPLE`) and names no stream call.
    Level(c_int),
    /// Under `explicit`: no loaded object names a blocking communicator constructor or a stream call.
    NoConstructor,
    /// Under `explicit`: a process started by `MPI_Comm_spawn` that names no stream call.
    Spawned,
    /// Under `explicit`: MPICH 4.1 or 4.2, where the policy gives no streams, and a program that names no
    /// stream call and asks for no pool size.
    Unserved,
}

impl Inert {
    /// The reason, for the banner and the report.
    pub fn describe(self) -> String {
        match self {
            Inert::Level(level) => format!(
                "the program asked for {} and names no MPIX stream call: no two threads are ever inside MPI \
                 at once, so there is nothing to separate (no reserved pool, no helper thread, its own level)",
                level_name(level)
            ),
            Inert::NoConstructor => "no loaded object names a communicator constructor or an MPIX stream call: \
                                     the policy has nothing to move (no reserved pool)"
                .to_string(),
            Inert::Spawned => "a process started by MPI_Comm_spawn that names no MPIX stream call: the policy does \
                               not cover spawned processes (no reserved pool)"
                .to_string(),
            Inert::Unserved => "MPICH 4.1 and 4.2 have no progress helper on the implicit pool, so the policy gives \
                                no streams there, and the program names no MPIX stream call and sets no \
                                MPIXSTREAM_STREAMS (no reserved pool, no helper thread)"
                .to_string(),
        }
    }
}

pub fn level_name(level: c_int) -> &'static str {
    ["MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"]
        .get(level as usize)
        .copied()
        .unwrap_or("an unknown thread level")
}

/// What the program can use. `required`: the level of `MPI_Init_thread` (`None`: `MPI_Init`, which is
/// `MPI_THREAD_SINGLE`); `spawned`: the process was started by `MPI_Comm_spawn` ([`spawned`]);
/// `unserved`: the policy can give no stream on this MPICH and no pool size was asked
/// (`backend::policy_unserved`); the scans run only where the answer depends on them.
pub fn decide(
    config: &Config,
    required: Option<c_int>,
    spawned: bool,
    names_streams: impl FnOnce() -> bool,
    unserved: impl FnOnce() -> bool,
    names_constructor: impl FnOnce() -> bool,
) -> Option<Inert> {
    if config.enqueue.thread_multiple {
        return None;
    }
    let level = required.unwrap_or(MPI_THREAD_SINGLE);
    if level < MPI_THREAD_MULTIPLE {
        return (!names_streams()).then_some(Inert::Level(level));
    }
    if config.policy == Policy::Implicit || names_streams() {
        return None;
    }
    if spawned {
        return Some(Inert::Spawned);
    }
    if unserved() {
        return Some(Inert::Unserved);
    }
    (!names_constructor()).then_some(Inert::NoConstructor)
}

/// Whether this process was started by `MPI_Comm_spawn`: Hydra, MPICH's launcher, tells a spawned
/// process's PMI client so with `PMI_SPAWNED=1` (measured on PyPI MPICH 4.3.2 and 5.0.2).
pub fn spawned(env: impl Fn(&str) -> Option<String>) -> bool {
    env("PMI_SPAWNED").is_some_and(|v| v.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(policy: Policy, thread_multiple: bool) -> Config {
        let mut c = Config::from_lookup(|_| None).unwrap();
        c.policy = policy;
        c.enqueue.thread_multiple = thread_multiple;
        c
    }

    #[test]
    fn below_multiple_without_stream_calls_is_inert_under_every_policy() {
        for policy in [Policy::Implicit, Policy::Explicit] {
            let c = config(policy, false);
            assert_eq!(decide(&c, None, false, || false, || false, || true), Some(Inert::Level(MPI_THREAD_SINGLE)));
            for level in [MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED] {
                assert_eq!(decide(&c, Some(level), false, || false, || false, || true), Some(Inert::Level(level)));
                // A program that names the stream API gets what the API needs.
                assert_eq!(decide(&c, Some(level), false, || true, || false, || true), None);
            }
        }
    }

    #[test]
    fn multiple_is_inert_only_where_the_policy_has_nothing_to_move() {
        let explicit = config(Policy::Explicit, false);
        let m = Some(MPI_THREAD_MULTIPLE);
        assert_eq!(decide(&explicit, m, false, || false, || false, || false), Some(Inert::NoConstructor));
        assert_eq!(decide(&explicit, m, false, || false, || false, || true), None);
        assert_eq!(decide(&explicit, m, false, || true, || false, || false), None);
        // Under implicit nothing is moved anyway: the pool follows the stream calls (pool_size::wanted).
        assert_eq!(decide(&config(Policy::Implicit, false), m, false, || false, || false, || false), None);
    }

    #[test]
    fn a_spawned_process_is_inert_under_explicit_unless_it_names_streams() {
        let m = Some(MPI_THREAD_MULTIPLE);
        let explicit = config(Policy::Explicit, false);
        assert_eq!(decide(&explicit, m, true, || false, || false, || true), Some(Inert::Spawned));
        assert_eq!(decide(&explicit, m, true, || true, || false, || true), None);
        assert_eq!(decide(&config(Policy::Implicit, false), m, true, || false, || false, || true), None);
        let env = |v: &'static str| move |k: &str| (k == "PMI_SPAWNED").then(|| v.to_string());
        assert!(spawned(env("1")));
        assert!(!spawned(env("0")));
        assert!(!spawned(|_| None));
    }

    #[test]
    fn an_unserved_policy_is_inert_unless_the_program_names_streams() {
        let m = Some(MPI_THREAD_MULTIPLE);
        let explicit = config(Policy::Explicit, false);
        assert_eq!(decide(&explicit, m, false, || false, || true, || true), Some(Inert::Unserved));
        // The stream API's own users keep the pool; implicit has nothing to serve anyway.
        assert_eq!(decide(&explicit, m, false, || true, || true, || true), None);
        assert_eq!(decide(&config(Policy::Implicit, false), m, false, || false, || true, || true), None);
        // The constructor scan is not needed once the policy is known to give nothing.
        decide(&explicit, m, false, || false, || true, || panic!("constructor scan"));
    }

    #[test]
    fn the_users_own_request_for_multiple_is_never_inert() {
        let c = config(Policy::Explicit, true);
        assert_eq!(decide(&c, None, true, || false, || false, || false), None);
    }

    #[test]
    fn scans_run_only_when_needed() {
        let c = config(Policy::Explicit, false);
        // Below MULTIPLE the constructor scan is never needed.
        decide(&c, None, false, || false, || false, || panic!("constructor scan below MULTIPLE"));
        // Under implicit at MULTIPLE neither scan is.
        decide(
            &config(Policy::Implicit, false),
            Some(MPI_THREAD_MULTIPLE),
            true,
            || panic!("scan"),
            || panic!("unserved"),
            || panic!("scan"),
        );
    }
}

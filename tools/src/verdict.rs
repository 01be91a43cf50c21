//! The profile's verdict, per rank: which threads were inside one endpoint at once, how much of their
//! time in MPI overlapped there, and what the explicit policy would change: an endpoint of its own for
//! each communicator one thread uses, nothing for a communicator several threads share (then one
//! communicator per thread is the change to make). Under the explicit policy: whether anything still
//! shares an endpoint, and what. Plain data in, text out: no MPI here.

/// What the explicit policy does with a communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Explicit {
    /// It would get a stream of its own (a blocking constructor of the application's).
    OwnStream,
    /// It has one already (the explicit policy's, or the application's MPIX stream).
    HasStream,
    /// It keeps MPICH's endpoint, for this reason.
    StaysImplicit(&'static str),
    /// Not known (we did not see how it was made).
    Unknown,
}

/// One thread's use of one endpoint.
#[derive(Clone, Debug)]
pub struct Use {
    pub thread: u32,
    pub calls: u64,
    pub ns: f64,
    pub contended: u64,
    /// Calls that met another thread inside (found one, or one came in).
    pub met: u64,
}

#[derive(Clone, Debug)]
pub struct EndpointRow {
    pub label: String,
    pub users: Vec<Use>,
    pub busy_ns: f64,
    pub overlap_ns: f64,
    /// The communicators whose calls are counted on it.
    pub comms: Vec<usize>,
    /// Why they share it, where known (MPICH's round robin), shown under its line.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct CommRow {
    pub label: String,
    pub threads: Vec<u32>,
    /// More threads than the record keeps.
    pub more: bool,
    pub explicit: Explicit,
}

/// What the MPI library can give the explicit policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoints {
    /// MPICH with native streams (>= 4.1): a reserved VCI per stream.
    Native,
    /// MPICH 4.0: one endpoint for everything.
    OneOnly,
    /// Intel MPI: its thread-split endpoints, with `MPIXSTREAM_BACKEND=split`.
    IntelSplit,
    Unknown,
}

/// What the verdict depends on besides the rows.
#[derive(Clone, Copy, Debug)]
pub struct Facts {
    /// The backend in force: `native`, `serial` or `split`.
    pub backend: &'static str,
    /// `implicit` or `explicit`.
    pub policy: &'static str,
    pub mpi: Endpoints,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `none` (no endpoint used by two threads), `in_turns` (shared, never at once), `explicit_helps`,
    /// `explicit_cannot_help`, `partly` (both kinds of overlap), `still_shared` (under the explicit
    /// policy, threads still met inside an endpoint), `separate` (under the explicit policy, none did),
    /// `one_endpoint` (separable communicators, but an MPICH with one endpoint: nothing can separate them).
    pub outcome: &'static str,
    pub lines: Vec<String>,
    /// The communicators (indices into the rows) the explicit policy would separate where threads met:
    /// what the guided policy gives a stream (`shim/src/policy/guided.rs`).
    pub separable: Vec<usize>,
}

fn threads(ts: &[u32]) -> String {
    ts.iter().map(|t| format!("T{t}")).collect::<Vec<_>>().join(", ")
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// The verdict over one rank's endpoints and communicators.
pub fn verdict(f: Facts, endpoints: &[EndpointRow], comms: &[CommRow]) -> Verdict {
    let explicit_policy = f.policy == "explicit";
    let mut lines = Vec::new();
    let (mut helps, mut cannot, mut met, mut shared_any) = (false, false, false, false);
    let mut separable_all: Vec<usize> = Vec::new();
    for e in endpoints {
        let users: Vec<u32> = e.users.iter().filter(|u| u.calls > 0).map(|u| u.thread).collect();
        if users.len() < 2 {
            continue;
        }
        shared_any = true;
        let calls: u64 = e.users.iter().map(|u| u.calls).sum();
        let contended: u64 = e.users.iter().map(|u| u.contended).sum();
        if e.overlap_ns <= 0.0 {
            lines.push(format!(
                "{}: threads {} took turns, never inside at once ({} busy, {calls} calls)",
                e.label,
                threads(&users),
                ms(e.busy_ns)
            ));
            continue;
        }
        met = true;
        // The threads that met another inside; a thread that only used it alone (the main thread's
        // barrier before the others start, say) is named apart, so the verdict is about the meeting.
        let met_users: Vec<u32> = e.users.iter().filter(|u| u.met > 0 || u.contended > 0).map(|u| u.thread).collect();
        let alone_users: Vec<u32> = users.iter().copied().filter(|t| !met_users.contains(t)).collect();
        lines.push(format!(
            "{}: threads {} inside it at once for {} of {} busy ({:.1} %); {contended} of {calls} calls found another thread inside{}",
            e.label,
            threads(&met_users),
            ms(e.overlap_ns),
            ms(e.busy_ns),
            100.0 * e.overlap_ns / e.busy_ns.max(1.0),
            if alone_users.is_empty() {
                String::new()
            } else {
                format!(" (also used by {}, never with another inside)", threads(&alone_users))
            }
        ));
        lines.extend(e.notes.iter().map(|n| format!("  {n}")));
        // The communicators of the threads that met (one used only by a thread that never met another,
        // such as MPI_COMM_WORLD for a barrier and a reduce from the main thread, is not the matter).
        let on_it: Vec<&CommRow> = e
            .comms
            .iter()
            .filter_map(|&i| comms.get(i))
            .filter(|c| c.threads.iter().any(|t| met_users.contains(t)) || (c.more && !c.threads.is_empty()))
            .collect();
        for c in on_it.iter().filter(|c| c.threads.len() >= 2 || c.more) {
            cannot = true;
            lines.push(format!(
                "  {} is used by threads {}{}: explicit endpoints cannot separate them (a communicator has one endpoint); \
                 one communicator per thread (MPI_Comm_dup for each) is the change to make",
                c.label,
                threads(&c.threads),
                if c.more { " and more" } else { "" }
            ));
        }
        let alone: Vec<&&CommRow> = on_it.iter().filter(|c| c.threads.len() == 1 && !c.more).collect();
        let separable: Vec<&&&CommRow> = alone.iter().filter(|c| c.explicit == Explicit::OwnStream).collect();
        // For the guided policy: those of threads that met another inside this endpoint.
        let met_threads: Vec<u32> = e.users.iter().filter(|u| u.met > 0).map(|u| u.thread).collect();
        let separable_here: Vec<usize> = e
            .comms
            .iter()
            .copied()
            .filter(|&i| {
                comms.get(i).is_some_and(|c| {
                    c.threads.len() == 1
                        && !c.more
                        && c.explicit == Explicit::OwnStream
                        && met_threads.contains(&c.threads[0])
                })
            })
            .collect();
        let mut sep_threads: Vec<u32> = separable.iter().map(|c| c.threads[0]).collect();
        sep_threads.sort_unstable();
        sep_threads.dedup();
        // Only the communicators of threads that met another inside this endpoint matter here.
        let met_here: Vec<u32> = e.users.iter().filter(|u| u.contended > 0).map(|u| u.thread).collect();
        for c in alone.iter().filter(|c| met_here.contains(&c.threads[0])) {
            match c.explicit {
                Explicit::StaysImplicit(why) => lines.push(format!(
                    "  {} (thread {}) stays on MPICH's endpoint under the explicit policy: {why}",
                    c.label,
                    threads(&c.threads)
                )),
                Explicit::Unknown if !explicit_policy => lines.push(format!(
                    "  {} (thread {}): not seen made, so whether the explicit policy covers it is unknown",
                    c.label,
                    threads(&c.threads)
                )),
                _ => {}
            }
        }
        if explicit_policy {
            let what: Vec<String> = on_it.iter().map(|c| format!("{} ({})", c.label, threads(&c.threads))).collect();
            lines.push(format!(
                "  still shared under the explicit policy{}: {}",
                if f.backend == "serial" { " (serial backend: every stream is on MPICH's one endpoint)" } else { "" },
                what.join(", ")
            ));
            continue;
        }
        // Explicit endpoints separate threads whose communicators each get their own: at least two
        // such threads here, or one beside others whose communicators keep this endpoint.
        if !sep_threads.is_empty() && (sep_threads.len() >= 2 || users.len() > sep_threads.len()) {
            helps = true;
            separable_all.extend(separable_here);
            let names: Vec<String> = separable.iter().map(|c| format!("{} (T{})", c.label, c.threads[0])).collect();
            let names = names.join(", ");
            lines.push(match f.mpi {
                Endpoints::OneOnly => format!(
                    "  the explicit policy gives {names} a stream each, but this MPICH has one endpoint (MPICH 4.0, serial \
                     backend): nothing can separate them here; on an MPICH with native streams (>= 4.1) each would get an \
                     endpoint of its own"
                ),
                Endpoints::IntelSplit => format!(
                    "  the explicit policy on Intel MPI's thread-split endpoints (MPIXSTREAM_POLICY=explicit \
                     MPIXSTREAM_BACKEND=split) would give {names} an endpoint each: their overlap here would go"
                ),
                _ => format!(
                    "  the explicit policy (MPIXSTREAM_POLICY=explicit) would give {names} an endpoint each: their overlap \
                     here would go"
                ),
            });
        } else if on_it.iter().all(|c| c.threads.len() < 2 && !c.more) {
            cannot = true;
        }
    }
    // On an MPICH with one endpoint the explicit policy's streams share it: it cannot help there.
    let one_endpoint = helps && f.mpi == Endpoints::OneOnly;
    let outcome = match (explicit_policy, met, shared_any, helps, cannot) {
        (false, true, _, true, _) if one_endpoint => "one_endpoint",
        (true, true, _, _, _) => "still_shared",
        (true, false, _, _, _) => "separate",
        (false, false, false, _, _) => "none",
        (false, false, true, _, _) => "in_turns",
        (false, true, _, true, false) => "explicit_helps",
        (false, true, _, true, true) => "partly",
        (false, true, _, false, _) => "explicit_cannot_help",
    };
    let head = match outcome {
        "none" => "no endpoint was used by two threads: explicit endpoints have nothing to separate".to_string(),
        "in_turns" => "threads shared endpoints but were never inside one at once: explicit endpoints would not remove contention".to_string(),
        "explicit_helps" => "explicit endpoints would help: threads met inside a shared endpoint, on communicators the explicit policy would separate".to_string(),
        "partly" => "explicit endpoints would help in part: some threads met on communicators the explicit policy would separate, others share a communicator".to_string(),
        "one_endpoint" => "explicit endpoints cannot help on this MPICH: threads met on communicators the explicit policy would separate, but MPICH 4.0 has one endpoint (serial backend); an MPICH with native streams (>= 4.1) gives each an endpoint of its own".to_string(),
        "explicit_cannot_help" => "explicit endpoints cannot help: the threads that met inside an endpoint share a communicator (or one the policy leaves implicit)".to_string(),
        "separate" => "no two threads were inside one endpoint at once: every thread that overlapped before now has an endpoint of its own (or none shared one)".to_string(),
        _ => "threads still met inside an endpoint under the explicit policy".to_string(),
    };
    lines.insert(0, head);
    separable_all.sort_unstable();
    separable_all.dedup();
    Verdict { outcome, lines, separable: separable_all }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(users: &[u32], overlap: f64, comms: &[usize]) -> EndpointRow {
        EndpointRow {
            label: "VCI 0".into(),
            users: users.iter().map(|&t| Use { thread: t, calls: 10, ns: 1e6, contended: 3, met: 3 }).collect(),
            busy_ns: 2e6,
            overlap_ns: overlap,
            comms: comms.to_vec(),
            notes: Vec::new(),
        }
    }

    fn comm(label: &str, threads: &[u32], explicit: Explicit) -> CommRow {
        CommRow { label: label.into(), threads: threads.to_vec(), more: false, explicit }
    }

    const IMPLICIT: Facts = Facts { backend: "native", policy: "implicit", mpi: Endpoints::Native };

    #[test]
    fn per_thread_communicators_on_one_endpoint_are_separable() {
        let comms = [comm("dup a", &[1], Explicit::OwnStream), comm("dup b", &[2], Explicit::OwnStream)];
        let v = verdict(IMPLICIT, &[ep(&[1, 2], 5e5, &[0, 1])], &comms);
        assert_eq!(v.outcome, "explicit_helps");
        assert!(v.lines.iter().any(|l| l.contains("dup a (T1), dup b (T2) an endpoint each")), "{v:?}");
        assert_eq!(v.separable, [0, 1]);
        // On the serial backend the same program is told that this MPICH cannot separate them.
        let deb = Facts { backend: "serial", policy: "implicit", mpi: Endpoints::OneOnly };
        let v = verdict(deb, &[ep(&[1, 2], 5e5, &[0, 1])], &comms);
        assert!(v.lines.iter().any(|l| l.contains("this MPICH has one endpoint")), "{v:?}");
        // Its headline says so too: no "would help" above a detail saying nothing can separate them.
        assert_eq!(v.outcome, "one_endpoint");
        assert!(v.lines[0].starts_with("explicit endpoints cannot help on this MPICH"), "{v:?}");
        assert!(!v.lines[0].contains("would help:"), "{v:?}");
    }

    #[test]
    fn threads_sharing_a_communicator_cannot_be_separated() {
        let comms = [comm("MPI_COMM_WORLD", &[0, 1, 2], Explicit::StaysImplicit("MPI_COMM_WORLD"))];
        let v = verdict(IMPLICIT, &[ep(&[0, 1, 2], 5e5, &[0])], &comms);
        assert_eq!(v.outcome, "explicit_cannot_help");
        assert!(v.lines.iter().any(|l| l.contains("one communicator per thread")), "{v:?}");
        assert!(v.separable.is_empty());
    }

    #[test]
    fn turns_are_not_contention_and_explicit_names_what_still_shares() {
        let comms = [comm("dup a", &[1], Explicit::OwnStream), comm("dup b", &[2], Explicit::OwnStream)];
        let turns = verdict(IMPLICIT, &[ep(&[1, 2], 0.0, &[0, 1])], &comms);
        assert_eq!((turns.outcome, turns.separable.len()), ("in_turns", 0));
        assert_eq!(verdict(IMPLICIT, &[ep(&[1], 0.0, &[0])], &comms).outcome, "none");
        let ex = Facts { backend: "native", policy: "explicit", mpi: Endpoints::Native };
        assert_eq!(verdict(ex, &[ep(&[1], 0.0, &[0]), ep(&[2], 0.0, &[1])], &comms).outcome, "separate");
        let world = [comm("MPI_COMM_WORLD", &[1, 2], Explicit::StaysImplicit("MPI_COMM_WORLD"))];
        let v = verdict(ex, &[ep(&[1, 2], 1e5, &[0])], &world);
        assert_eq!(v.outcome, "still_shared");
        assert!(v.lines.iter().any(|l| l.contains("still shared under the explicit policy: MPI_COMM_WORLD")), "{v:?}");
    }

    /// The guided policy's selection: only the communicators of threads that met another inside.
    #[test]
    fn only_threads_that_met_are_separable() {
        let comms = [
            comm("dup a", &[1], Explicit::OwnStream),
            comm("dup b", &[2], Explicit::OwnStream),
            comm("split c", &[0], Explicit::OwnStream),
        ];
        let mut e = ep(&[0, 1, 2], 5e5, &[0, 1, 2]);
        e.users[0].met = 0;
        e.users[0].contended = 0;
        let v = verdict(IMPLICIT, &[e], &comms);
        assert_eq!((v.outcome, v.separable.as_slice()), ("explicit_helps", &[0, 1][..]));
    }

    /// MPI_COMM_WORLD used by the main thread alone (a barrier, a reduce) beside two threads on dups that
    /// met: the verdict is about the dups, and names neither MPI_COMM_WORLD nor the main thread as met.
    #[test]
    fn a_communicator_of_a_thread_that_never_met_is_not_named() {
        let comms = [
            comm("comm 0 (MPI_COMM_WORLD)", &[0], Explicit::StaysImplicit("MPI_COMM_WORLD")),
            comm("dup a", &[1], Explicit::OwnStream),
            comm("dup b", &[2], Explicit::OwnStream),
        ];
        let mut e = ep(&[0, 1, 2], 5e5, &[0, 1, 2]);
        e.users[0].met = 0;
        e.users[0].contended = 0;
        let v = verdict(IMPLICIT, &[e.clone()], &comms);
        assert_eq!((v.outcome, v.separable.as_slice()), ("explicit_helps", &[1, 2][..]));
        assert!(v.lines.iter().all(|l| !l.contains("MPI_COMM_WORLD")), "{v:?}");
        assert!(
            v.lines[1].contains("threads T1, T2 inside it at once") && v.lines[1].contains("also used by T0"),
            "{v:?}"
        );
        let ex = Facts { backend: "native", policy: "explicit", mpi: Endpoints::Native };
        let v = verdict(ex, &[e], &comms);
        assert!(
            v.lines.iter().any(|l| l.contains("still shared under the explicit policy: dup a (T1), dup b (T2)")),
            "{v:?}"
        );
    }

    #[test]
    fn mixed_endpoints_help_in_part() {
        let comms = [
            comm("dup a", &[1], Explicit::OwnStream),
            comm("dup b", &[2], Explicit::OwnStream),
            comm("MPI_COMM_WORLD", &[3, 4], Explicit::StaysImplicit("MPI_COMM_WORLD")),
        ];
        let eps = [ep(&[1, 2], 1e5, &[0, 1]), ep(&[3, 4], 1e5, &[2])];
        let v = verdict(IMPLICIT, &eps, &comms);
        assert_eq!((v.outcome, v.separable.as_slice()), ("partly", &[0, 1][..]));
    }
}

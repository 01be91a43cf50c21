//! The report's profile section, per rank: the endpoints with the threads that were inside MPI on them
//! (calls, time, time two or more were inside at once, calls that found another thread there), the
//! threads, the verdict ([`verdict`]), and the last calls of each thread (the timeline); and, per
//! communicator, what the explicit policy would do with it.
//!
//! Given the records and what the lean library said: reads the profile's counters, nothing else.
use crate::clock;
use crate::json::{self, opt};
use crate::profile::{self, Slot};
use crate::state::CommRec;
use crate::text::truncate;
use crate::verdict::{self, CommRow, EndpointRow, Endpoints, Explicit, Facts, Use};
use mpixstream_wrappers::ffi::{MPI_COMM_SELF, MPI_COMM_WORLD};
use mpixstream_wrappers::tools::Description;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// What the explicit policy would do with `r` (the policy in force: `explicit_policy`).
pub fn explicit_of(r: &CommRec, explicit_policy: bool) -> Explicit {
    if r.stream.is_some() {
        return Explicit::HasStream;
    }
    if r.multiplex.is_some() {
        return Explicit::StaysImplicit("a multiplex communicator's traffic on MPICH's implicit pool");
    }
    if r.handle == MPI_COMM_WORLD || r.handle == MPI_COMM_SELF {
        return Explicit::StaysImplicit(
            "the explicit policy leaves MPI_COMM_WORLD and MPI_COMM_SELF on MPICH's endpoint",
        );
    }
    match r.made {
        Some(m) if m.inter => Explicit::StaysImplicit("an intercommunicator"),
        Some(m) if m.call.starts_with("MPI_Comm_idup") => {
            Explicit::StaysImplicit("made by a nonblocking constructor (MPI_Comm_idup)")
        }
        Some(m) if m.call.contains("graph") || m.call.contains("Cart") => {
            Explicit::StaysImplicit("a topology constructor's result")
        }
        Some(_) if explicit_policy => Explicit::StaysImplicit(
            "left without a stream (pool exhausted, or MPICH 4.1/4.2: the report's policy counters say which)",
        ),
        Some(_) => Explicit::OwnStream,
        None if explicit_policy => Explicit::StaysImplicit(
            "not a communicator the policy covers (the base of a policy communicator, or the library's own)",
        ),
        None => Explicit::Unknown,
    }
}

fn explicit_json(e: Explicit) -> String {
    let (what, why) = match e {
        Explicit::OwnStream => ("own_stream", None),
        Explicit::HasStream => ("has_stream", None),
        Explicit::StaysImplicit(why) => ("stays_implicit", Some(why)),
        Explicit::Unknown => ("unknown", None),
    };
    format!("\"explicit\":\"{what}\",\"explicit_why\":{}", why.map_or("null".to_string(), json::string))
}

/// The profile fields of one communicator's JSON object (after its traffic): how its VCI is known,
/// the VCIs its requests came from, MPICH's numbering, its threads, and the explicit policy's plan.
pub fn comm_fields(r: &CommRec, explicit_policy: bool) -> String {
    let (threads, more) = r.threads.list();
    let seen: Vec<String> = r.seen_vcis().iter().map(|v| v.to_string()).collect();
    let ts: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
    format!(
        "\"vci_source\":\"{}\",\"vci_seen\":[{}],\"seq\":{},\"made_by\":{},\"identity\":{},\"threads\":[{}],\"more_threads\":{more},{}",
        r.vci_source.name(),
        seen.join(","),
        opt(r.made.filter(|m| m.numbered).map(|m| m.seq)),
        r.made.map_or("null".to_string(), |m| json::string(m.call)),
        r.identity.as_deref().map_or("null".to_string(), json::string),
        ts.join(","),
        explicit_json(explicit_of(r, explicit_policy))
    )
}

/// The endpoint's name: its number (`VCI n`, or on Intel MPI's split backend `endpoint n`), else the
/// communicators counted on it.
fn slot_label(slot: Slot, backend: &str, on_it: &[&str]) -> String {
    if (slot as usize) < profile::NAMED {
        let word = if backend == "split" { "endpoint" } else { "VCI" };
        format!("{word} {slot}")
    } else {
        format!("VCI ? ({})", on_it.join(", "))
    }
}

/// Why communicators share VCI `slot` where MPICH's round robin put them there: their numbers and what
/// MPICH counted between them (a communicator made in between moves every later one by a VCI).
fn round_robin_note(slot: Slot, comms: &[usize], records: &[&CommRec]) -> Vec<String> {
    let n = crate::state::implicit_vcis().unwrap_or(1);
    if n <= 1 || slot as usize >= profile::NAMED {
        return Vec::new();
    }
    let mut numbered: Vec<(u32, u32)> = comms
        .iter()
        .filter_map(|&i| {
            let r = records[i];
            let m = r.made.filter(|m| m.numbered && m.seq > 0 && r.stream.is_none())?;
            (!r.threads.list().0.is_empty()).then_some((m.seq, r.id))
        })
        .collect();
    numbered.sort_unstable();
    if numbered.len() < 2 {
        return Vec::new();
    }
    let who: Vec<String> = numbered.iter().map(|(seq, id)| format!("comm {id} (seq {seq})")).collect();
    let (first, last) = (numbered[0].0, numbered[numbered.len() - 1].0);
    let between: Vec<String> = crate::round_robin::between(first, last)
        .iter()
        .filter(|(seq, _)| !numbered.iter().any(|x| x.0 == *seq))
        .map(|(seq, call)| format!("{call} (seq {seq})"))
        .collect();
    vec![format!(
        "MPICH's round robin over its {n} implicit VCIs (seq mod {n}) put {} on VCI {slot}{}",
        who.join(", "),
        if between.is_empty() { String::new() } else { format!("; counted in between: {}", between.join(", ")) }
    )]
}

/// What the MPI library described by `d` can give the explicit policy.
fn endpoints_of(d: Option<&Description>) -> Endpoints {
    let Some(d) = d else { return Endpoints::Unknown };
    match crate::state::mpich_version(d) {
        Some((major, minor)) if (major, minor) >= (4, 1) => Endpoints::Native,
        Some(_) => Endpoints::OneOnly,
        None if crate::text::cstr(&d.library).starts_with("Intel") => Endpoints::IntelSplit,
        None => Endpoints::Unknown,
    }
}

/// The host this rank runs on (the kernel's host name): ranks with the same one share its cores.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The cores online on this host (`/sys/devices/system/cpu/online`, a list such as `0-3,6`), whatever
/// this rank's affinity: what the threads of all its ranks share.
fn cores_online() -> Option<u32> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    cpu_list_len(list.trim())
}

/// The number of CPUs in a kernel CPU list (`0-3,6` is 5).
fn cpu_list_len(list: &str) -> Option<u32> {
    let mut n = 0;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<u32>().ok()?.checked_sub(a.parse::<u32>().ok()?)? + 1,
            None => part.parse::<u32>().map(|_| 1).ok()?,
        };
    }
    (n > 0).then_some(n)
}

/// A thread counts as busy in MPI when it was inside MPI calls for at least this share of the MPI section
/// (scripts/contention.py's BUSY_SHARE: the two must read alike).
const BUSY_SHARE: f64 = 0.10;

/// This rank's load for the job's word on cores: `host<TAB>cores online<TAB>threads busy in MPI`.
pub fn load_line() -> String {
    let (ns, span) = (clock::ns_per_tick(), clock::span_ns() as f64);
    let busy = profile::threads()
        .iter()
        .filter(|t| {
            let ticks: u64 = t.usage.iter().map(|u| u.ticks.load(Ordering::Relaxed)).sum();
            span > 0.0 && ticks as f64 * ns >= BUSY_SHARE * span
        })
        .count();
    format!("{}\t{}\t{busy}", host(), cores_online().unwrap_or(0))
}

/// The job's word on cores, from every rank's [`load_line`]: a line per host where the threads busy in
/// MPI outnumber its cores online (then they contend for cores, whatever the endpoints).
pub fn cores_lines(loads: &[(usize, String)]) -> Vec<String> {
    let mut hosts: Vec<(String, u32, u32, Vec<usize>)> = Vec::new();
    for (rank, line) in loads {
        let mut f = line.trim().split('\t');
        let (Some(host), Some(cores), Some(busy)) = (f.next(), f.next(), f.next()) else { continue };
        let (Ok(cores), Ok(busy)) = (cores.parse::<u32>(), busy.parse::<u32>()) else { continue };
        match hosts.iter_mut().find(|h| h.0 == host) {
            Some(h) => {
                h.2 += busy;
                h.3.push(*rank);
            }
            None => hosts.push((host.to_string(), cores, busy, vec![*rank])),
        }
    }
    hosts
        .iter()
        .filter(|h| h.1 > 0 && h.2 > h.1)
        .map(|(host, cores, busy, ranks)| {
            format!(
                "threads outnumber cores on {host}: {busy} threads busy in MPI (inside MPI for {:.0} % of the MPI section or more; ranks {}) on {cores} cores online: the contention is for cores, and what explicit endpoints would separate does not get faster while its threads wait for a core (on 2 cores a VCI per thread measured 0.6-1.06x the speed of one shared VCI: docs/performance.md)",
                100.0 * BUSY_SHARE,
                ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")
            )
        })
        .collect()
}

/// This rank's profile: (the JSON object, the table lines, the verdict lines).
pub fn rank_profile(
    rank: i32,
    d: Option<&Description>,
    (backend, policy): (&'static str, &'static str),
    records: &[&CommRec],
    labels: &[String],
) -> (String, String, Vec<String>) {
    let ns = clock::ns_per_tick();
    let threads = profile::threads();
    let mut endpoints = Vec::new();
    let mut slots = Vec::new();
    for s in 0..profile::used() as Slot {
        let users: Vec<Use> = threads
            .iter()
            .filter_map(|t| {
                let u = &t.usage[s as usize];
                let calls = u.calls.load(Ordering::Relaxed);
                (calls > 0).then(|| Use {
                    thread: t.index,
                    calls,
                    ns: u.ticks.load(Ordering::Relaxed) as f64 * ns,
                    contended: u.contended.load(Ordering::Relaxed),
                    met: u.met.load(Ordering::Relaxed),
                })
            })
            .collect();
        if users.is_empty() {
            continue;
        }
        let comms: Vec<usize> = (0..records.len()).filter(|&i| records[i].slot() == s).collect();
        let names: Vec<&str> = comms.iter().map(|&i| labels[i].as_str()).collect();
        let inside: u64 = threads.iter().map(|t| t.usage[s as usize].ticks.load(Ordering::Relaxed)).sum();
        let (busy, overlap) = profile::endpoint(s).times(inside);
        let notes = round_robin_note(s, &comms, records);
        endpoints.push(EndpointRow {
            label: slot_label(s, backend, &names),
            users,
            busy_ns: busy as f64 * ns,
            overlap_ns: overlap as f64 * ns,
            comms,
            notes,
        });
        slots.push(s);
    }
    let explicit_policy = policy == "explicit";
    let comms: Vec<CommRow> = records
        .iter()
        .zip(labels)
        .map(|(r, label)| {
            let (threads, more) = r.threads.list();
            let label = match r.made {
                Some(m) if r.handle != MPI_COMM_WORLD && r.handle != MPI_COMM_SELF => {
                    format!("comm {} ({label}, {})", r.id, m.call)
                }
                _ => format!("comm {} ({label})", r.id),
            };
            CommRow { label, threads, more, explicit: explicit_of(r, explicit_policy) }
        })
        .collect();
    let v = verdict::verdict(Facts { backend, policy, mpi: endpoints_of(d) }, &endpoints, &comms);

    let mut j = String::new();
    let _ = write!(
        j,
        "{{\"clock\":\"{}\",\"span_ns\":{},\"host\":{},\"cores_online\":{},\"threads\":[",
        clock::source(),
        clock::span_ns(),
        json::string(&host()),
        opt(cores_online())
    );
    for (k, t) in threads.iter().enumerate() {
        let sum = |f: &dyn Fn(&profile::Usage) -> u64| -> u64 { t.usage.iter().map(f).sum() };
        let _ = write!(
            j,
            "{}{{\"thread\":{},\"tid\":{},\"calls\":{},\"in_mpi_ns\":{:.0},\"contended_calls\":{}}}",
            if k > 0 { "," } else { "" },
            t.index,
            t.tid,
            sum(&|u| u.calls.load(Ordering::Relaxed)),
            sum(&|u| u.ticks.load(Ordering::Relaxed)) as f64 * ns,
            sum(&|u| u.contended.load(Ordering::Relaxed))
        );
    }
    j.push_str("],\"endpoints\":[");
    let mut t = String::new();
    for (k, (e, &s)) in endpoints.iter().zip(&slots).enumerate() {
        let calls: u64 = e.users.iter().map(|u| u.calls).sum();
        let in_mpi: f64 = e.users.iter().map(|u| u.ns).sum();
        let contended: u64 = e.users.iter().map(|u| u.contended).sum();
        let ids: Vec<String> = e.comms.iter().map(|&i| records[i].id.to_string()).collect();
        let users: Vec<String> = e.users.iter().map(|u| u.thread.to_string()).collect();
        let per: Vec<String> = e
            .users
            .iter()
            .map(|u| {
                format!(
                    "{{\"thread\":{},\"calls\":{},\"in_mpi_ns\":{:.0},\"contended_calls\":{},\"met_calls\":{}}}",
                    u.thread, u.calls, u.ns, u.contended, u.met
                )
            })
            .collect();
        let _ = write!(
            j,
            "{}{{\"endpoint\":{},\"vci\":{},\"comms\":[{}],\"threads\":[{}],\"calls\":{calls},\"in_mpi_ns\":{in_mpi:.0},\"busy_ns\":{:.0},\"overlap_ns\":{:.0},\"contended_calls\":{contended},\"per_thread\":[{}]}}",
            if k > 0 { "," } else { "" },
            json::string(&e.label),
            opt(((s as usize) < profile::NAMED).then_some(s)),
            ids.join(","),
            users.join(","),
            e.busy_ns,
            e.overlap_ns,
            per.join(",")
        );
        let _ = writeln!(
            t,
            "{:>5}  {:<12}  {:<12}  {:<10}  {:>10}  {:>10.3}  {:>10.3}  {:>10.3}  {:>5.1}%  {:>10}",
            rank,
            truncate(&e.label, 12),
            truncate(&ids.join(","), 12),
            truncate(&e.users.iter().map(|u| format!("T{}", u.thread)).collect::<Vec<_>>().join(","), 10),
            calls,
            in_mpi / 1e6,
            e.busy_ns / 1e6,
            e.overlap_ns / 1e6,
            100.0 * e.overlap_ns / e.busy_ns.max(1.0),
            contended
        );
    }
    let lines: Vec<String> = v.lines.iter().map(|l| json::string(l)).collect();
    let separable: Vec<String> = v.separable.iter().map(|&i| records[i].id.to_string()).collect();
    let _ = write!(
        j,
        "],\"verdict\":{{\"outcome\":\"{}\",\"lines\":[{}],\"separable\":[{}]}},",
        v.outcome,
        lines.join(","),
        separable.join(",")
    );
    // Every identity this rank made (used or not), for the guided policy: what the profile saw.
    let made: Vec<String> =
        mpixstream_wrappers::lean_query::get().identities().iter().map(|s| json::string(s)).collect();
    let _ = write!(j, "\"identities\":[{}],", made.join(","));
    j.push_str(&timeline_json(&threads, &slots, ns));
    j.push('}');
    (j, t, v.lines)
}

/// `"timeline":{...}`: each thread's last calls, `[thread, endpoint (index into endpoints), start ns,
/// end ns, contended]`, times from the profile's start (`origin_ns`, `CLOCK_MONOTONIC`, shared by the
/// ranks of one host).
fn timeline_json(threads: &[&'static profile::ThreadProfile], slots: &[Slot], ns: f64) -> String {
    let mut j = format!(
        "\"timeline\":{{\"origin_ns\":{},\"kept_per_thread\":{},\"dropped\":",
        clock::origin_ns(),
        profile::TIMELINE
    );
    let mut dropped = 0;
    let mut events = String::new();
    for t in threads {
        let (evs, d) = t.timeline();
        dropped += d;
        for e in evs {
            let Some(k) = slots.iter().position(|&s| s == e.slot) else { continue };
            let _ = write!(
                events,
                "{}[{},{k},{:.0},{:.0},{}]",
                if events.is_empty() { "" } else { "," },
                t.index,
                e.start as f64 * ns,
                e.end as f64 * ns,
                e.contended as u8
            );
        }
    }
    let _ = write!(j, "{dropped},\"events\":[{events}]}}");
    j
}

/// The table's header line.
pub fn header() -> String {
    format!(
        "{:>5}  {:<12}  {:<12}  {:<10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}  {:>10}",
        "rank", "endpoint", "comm ids", "threads", "calls", "in MPI ms", "busy ms", "overlap ms", "share", "contended"
    )
}

#[cfg(test)]
mod tests {
    use super::cpu_list_len;

    #[test]
    fn threads_that_outnumber_a_hosts_cores_are_named_per_host() {
        let loads = [(0, "a\t2\t2".to_string()), (1, "a\t2\t2".to_string()), (2, "b\t4\t3".to_string())];
        let lines = super::cores_lines(&loads);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("threads outnumber cores on a: 4 threads busy in MPI"), "{lines:?}");
        assert!(lines[0].contains("ranks 0,1) on 2 cores online"), "{lines:?}");
        // As many busy threads as cores, or an unknown count of cores: nothing to say.
        assert!(super::cores_lines(&[(0, "a\t2\t2".to_string()), (1, "c\t0\t9".to_string())]).is_empty());
    }

    #[test]
    fn cpu_lists_count_their_cpus() {
        assert_eq!(cpu_list_len("0-1"), Some(2));
        assert_eq!(cpu_list_len("0-3,6,8-9"), Some(7));
        assert_eq!(cpu_list_len("0"), Some(1));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
    }
}

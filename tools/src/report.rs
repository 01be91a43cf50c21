//! The report at `MPI_Finalize` (`MPIXSTREAM_REPORT`): every rank describes its communicators and
//! endpoints; rank 0 gathers them, prints a table on stderr and writes one JSON file for the job
//! (`docs/report.schema.json`).
//!
//! Given everything it reports as parameters (the setup, the records, the check mode): it reads no
//! state of its own.
use crate::json::{self, opt, traffic};
use crate::profile;
use crate::profile_report;
use crate::state::{CommRec, MultiplexPart, Setup, StartKind};
use crate::text::{cstr, truncate};
use mpixstream_wrappers::ffi::*;
use mpixstream_wrappers::lean_query;
use mpixstream_wrappers::mpi::Comm;
use mpixstream_wrappers::tools::Description;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

pub const FORMAT: &str = "mpixstream-report";
pub const VERSION: u32 = 1;

fn backend_name(d: Option<&Description>) -> &'static str {
    match d.map(|d| d.backend) {
        Some(0) => "serial",
        Some(1) => "native",
        Some(2) => "split",
        _ => "unknown",
    }
}

fn policy_name(d: Option<&Description>) -> &'static str {
    match d.map(|d| d.policy) {
        Some(0) => "implicit",
        Some(1) => "explicit",
        Some(2) => "guided",
        _ => "unknown",
    }
}

fn thread_level_name(level: c_int) -> &'static str {
    match level {
        MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
        MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        MPI_THREAD_MULTIPLE => "MPI_THREAD_MULTIPLE",
        _ => "unknown",
    }
}

fn check_name(mode: u8) -> &'static str {
    match mode {
        1 => "policy",
        2 => "all",
        _ => "off",
    }
}

#[derive(Default)]
struct Sums {
    comms: Vec<u32>,
    sent: (u64, u64),
    recv: (u64, u64),
    collectives: u64,
    starts: Starts,
}

/// Persistent requests' starts, by `StartKind`.
type Starts = [u64; StartKind::ALL.len()];

/// `{"send":N,"recv":N,"partitioned":N,"collective":N}`.
fn starts_json(s: &Starts) -> String {
    let fields: Vec<String> = StartKind::ALL.iter().map(|k| format!("\"{}\":{}", k.name(), s[*k as usize])).collect();
    format!("{{{}}}", fields.join(","))
}

struct Snapshot {
    id: u32,
    /// The handle as printed (MPICH's `int`, or the standard ABI's pointer).
    handle: u64,
    name: String,
    size: c_int,
    stream: Option<u32>,
    origin: &'static str,
    vci: Option<u32>,
    freed: bool,
    multiplex: Option<MultiplexPart>,
    sent: (u64, u64),
    recv: (u64, u64),
    collectives: u64,
    starts: Starts,
    /// The profile's fields of the communicator's JSON object (`profile_report::comm_fields`).
    profile: String,
}

fn snapshot(r: &CommRec, explicit_policy: bool) -> Snapshot {
    let c = &r.counters;
    // MPICH's own word where its requests named one VCI for a communicator without a stream.
    let seen = r.seen_vcis();
    let vci = match (r.stream, seen.as_slice()) {
        (None, [v]) => Some(*v),
        _ => r.vci,
    };
    Snapshot {
        id: r.id,
        handle: if r.wide != 0 { r.wide as u64 } else { r.handle as u32 as u64 },
        name: r.name.clone(),
        size: r.size,
        stream: r.stream,
        origin: r.origin.name(),
        vci,
        freed: r.freed.load(Ordering::Acquire),
        multiplex: r.multiplex,
        sent: (c.sent_msgs.load(Ordering::Relaxed), c.sent_bytes.load(Ordering::Relaxed)),
        recv: (c.recv_msgs.load(Ordering::Relaxed), c.recv_bytes.load(Ordering::Relaxed)),
        collectives: c.collectives.load(Ordering::Relaxed),
        starts: std::array::from_fn(|k| c.starts[k].load(Ordering::Relaxed)),
        profile: format!("\"vci_model\":{},{}", opt(r.vci), profile_report::comm_fields(r, explicit_policy)),
    }
}

/// A communicator's name in the tables: its name, else its handle; a multiplex communicator's
/// indexed traffic, one row per index: `NAME [index I]` (or `[pool]`; its handle's own row, if any, is
/// its ordinary traffic).
fn label_of(c: &Snapshot) -> String {
    let label = if c.name.is_empty() { format!("0x{:08x}", c.handle) } else { c.name.clone() };
    match c.multiplex {
        Some(m) => {
            format!("{} [{}]", truncate(&label, 10), m.index.map_or("pool".to_string(), |i| format!("index {i}")))
        }
        None => label,
    }
}

/// This rank's profile, where it ran: (JSON object, table lines, verdict lines).
type ProfilePart = (String, String, Vec<String>);

/// This rank's part: (JSON object, table lines: the communicators, the endpoints, the profile and its
/// verdict, separated by form feeds).
fn rank_part(
    rank: c_int,
    d: Option<&Description>,
    comms: &[Snapshot],
    labels: &[String],
    profile: Option<ProfilePart>,
) -> (String, String) {
    let mut j = String::new();
    let _ = write!(j, "{{\"rank\":{rank}");
    match d {
        Some(d) => {
            // The guided policy's counters, under it only.
            let guided = if d.guided_nranks > 0 {
                format!(
                    ",\"guided\":{{\"selected\":{},\"unseen\":{},\"unidentified\":{}}}",
                    d.guided_selected, d.guided_unseen, d.guided_unidentified
                )
            } else {
                String::new()
            };
            let _ = write!(
                j,
                ",\"streams_in_use\":{},\"policy_stats\":{{\"attached\":{},\"exhausted\":{},\"nonblocking\":{},\"intercomm\":{},\"unserved\":{},\"retired\":{},\"twins\":{}{guided}}},\"multiplex\":{{\"on_streams\":{},\"pooled\":{}}}",
                d.streams_in_use,
                d.policy_attached,
                d.policy_exhausted,
                d.policy_nonblocking,
                d.policy_intercomm,
                d.policy_unserved,
                d.policy_retired,
                d.policy_twins,
                d.multiplex_on_streams,
                d.multiplex_pooled
            );
        }
        None => j.push_str(",\"streams_in_use\":null,\"policy_stats\":null,\"multiplex\":null"),
    }
    j.push_str(",\"comms\":[");
    let mut t = String::new();
    for (k, c) in comms.iter().enumerate() {
        if k > 0 {
            j.push(',');
        }
        let multiplex = c.multiplex.map_or("null".to_string(), |m| format!("{{\"index\":{}}}", opt(m.index)));
        let _ = write!(
            j,
            "{{\"id\":{},\"handle\":\"0x{:08x}\",\"name\":{},\"size\":{},\"stream\":{},\"origin\":\"{}\",\"vci\":{},\"freed\":{},\"multiplex\":{multiplex},\"sent\":{},\"received\":{},\"collectives\":{},\"starts\":{},{}}}",
            c.id,
            c.handle,
            json::string(&c.name),
            c.size,
            opt(c.stream),
            c.origin,
            opt(c.vci),
            c.freed,
            traffic(c.sent.0, c.sent.1),
            traffic(c.recv.0, c.recv.1),
            c.collectives,
            starts_json(&c.starts),
            c.profile
        );
        let label = &labels[k];
        let _ = writeln!(
            t,
            "{:>5}  {:>3} {:<20} {:>5}  {:>6}  {:<9}  {:>4}  {:>10}  {:>12}  {:>10}  {:>12}  {:>6}  {:>6}{}",
            rank,
            c.id,
            truncate(label, 20),
            c.size,
            opt_dash(c.stream),
            c.origin,
            opt_dash(c.vci),
            c.sent.0,
            c.sent.1,
            c.recv.0,
            c.recv.1,
            c.collectives,
            c.starts.iter().sum::<u64>(),
            if c.freed { "  (freed)" } else { "" }
        );
    }
    j.push_str("],\"endpoints\":[");
    // Per stream/endpoint: communicators that share a stream share its endpoint.
    let mut eps: BTreeMap<(Option<u32>, Option<u32>), Sums> = BTreeMap::new();
    for c in comms {
        let e = eps.entry((c.stream, c.vci)).or_default();
        e.comms.push(c.id);
        e.sent.0 += c.sent.0;
        e.sent.1 += c.sent.1;
        e.recv.0 += c.recv.0;
        e.recv.1 += c.recv.1;
        e.collectives += c.collectives;
        for (sum, n) in e.starts.iter_mut().zip(c.starts) {
            *sum += n;
        }
    }
    let mut e_lines = String::new();
    for (k, ((stream, vci), s)) in eps.iter().enumerate() {
        if k > 0 {
            j.push(',');
        }
        let label = stream.map_or("implicit".to_string(), |s| format!("stream {s}"));
        let ids: Vec<String> = s.comms.iter().map(|i| i.to_string()).collect();
        let _ = write!(
            j,
            "{{\"endpoint\":{},\"stream\":{},\"vci\":{},\"comms\":[{}],\"sent\":{},\"received\":{},\"collectives\":{},\"starts\":{}}}",
            json::string(&label),
            opt(*stream),
            opt(*vci),
            ids.join(","),
            traffic(s.sent.0, s.sent.1),
            traffic(s.recv.0, s.recv.1),
            s.collectives,
            starts_json(&s.starts)
        );
        let _ = writeln!(
            e_lines,
            "{:>5}  {:<10}  {:>4}  {:<16}  {:>10}  {:>12}  {:>10}  {:>12}  {:>6}  {:>6}",
            rank,
            label,
            opt_dash(*vci),
            truncate(&ids.join(","), 16),
            s.sent.0,
            s.sent.1,
            s.recv.0,
            s.recv.1,
            s.collectives,
            s.starts.iter().sum::<u64>()
        );
    }
    j.push(']');
    let (pj, p_lines, verdict) = profile.unwrap_or_default();
    if !pj.is_empty() {
        let _ = write!(j, ",\"profile\":{pj}");
    }
    j.push('}');
    // Sections separated by form feeds; rank 0 prints every rank's first section, then every second...
    t.push('\x0c');
    t.push_str(&e_lines);
    t.push('\x0c');
    t.push_str(&p_lines);
    t.push('\x0c');
    for line in verdict {
        let _ = writeln!(t, "{line}");
    }
    (j, t)
}

fn opt_dash(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

/// Gathers every rank's bytes to rank 0 (collective): each rank's length with `gather_len(mine, all)`,
/// then the bytes with `gather_bytes(mine, all, lens, displs)` (`MPI_Gather`/`MPI_Gatherv` of the ABI
/// the program speaks, on its `MPI_COMM_WORLD`, through `PMPI_*` so never counted; `false`: the call
/// failed). Rank 0 gets every part, the others an empty list.
pub fn gather_slices(
    bytes: &[u8],
    rank: c_int,
    size: c_int,
    gather_len: impl FnOnce(&[c_int], &mut [c_int]) -> bool,
    gather_bytes: impl FnOnce(&[u8], &mut [u8], &[c_int], &[c_int]) -> bool,
) -> Option<Vec<Vec<u8>>> {
    let len = bytes.len() as c_int;
    let mut lens = vec![0 as c_int; if rank == 0 { size as usize } else { 1 }];
    if !gather_len(&[len], &mut lens) {
        return None;
    }
    let mut displs = vec![0 as c_int; lens.len()];
    let mut total = 0usize;
    if rank == 0 {
        for (i, l) in lens.iter().enumerate() {
            displs[i] = total as c_int;
            total += *l as usize;
        }
    }
    let mut all = vec![0u8; total.max(1)];
    if !gather_bytes(bytes, &mut all, &lens, &displs) {
        return None;
    }
    if rank != 0 {
        return Some(Vec::new());
    }
    Some(lens.iter().zip(displs.iter()).map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec()).collect())
}

/// [`gather_slices`] on MPICH's ABI.
fn gather(bytes: &[u8], rank: c_int, size: c_int) -> Option<Vec<Vec<u8>>> {
    let world = Comm::WORLD;
    gather_slices(
        bytes,
        rank,
        size,
        |mine, all| world.gather(mine, all, 0).is_ok(),
        |mine, all, lens, displs| world.gatherv(mine, all, lens, displs, 0).is_ok(),
    )
}

/// Which ABI the program's MPI library speaks (the report's `abi`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    Mpich,
    Standard,
}

/// Writes the report of `records` (every communicator seen, in creation order); collective over
/// `MPI_COMM_WORLD`.
pub fn write(setup: &Setup, records: &[&CommRec], check_mode: u8) {
    // Fresh: the policy's counters have moved since MPI_Init.
    let d = lean_query::get().describe().or(setup.description);
    let (rank, size) = (Comm::WORLD.rank().unwrap_or(0), Comm::WORLD.size().unwrap_or(1));
    let path = setup.report_path.clone().unwrap_or_default();
    write_with(d, path, records, check_mode, (rank, size), Abi::Mpich, gather);
}

/// The report, given the lean library's description, where to write it, this rank and the job's size in
/// `MPI_COMM_WORLD`, and how to gather every rank's part to rank 0 (the ABI's own `MPI_Gather`).
pub fn write_with(
    d: Option<Description>,
    path: String,
    records: &[&CommRec],
    check_mode: u8,
    (rank, size): (c_int, c_int),
    abi: Abi,
    gather: impl FnOnce(&[u8], c_int, c_int) -> Option<Vec<Vec<u8>>>,
) {
    let policy = policy_name(d.as_ref());
    let comms: Vec<Snapshot> = records.iter().map(|r| snapshot(r, policy == "explicit")).collect();
    let labels: Vec<String> = comms.iter().map(label_of).collect();
    let profile = profile::ran()
        .then(|| profile_report::rank_profile(rank, d.as_ref(), (backend_name(d.as_ref()), policy), records, &labels));
    let ran = profile.is_some();
    let (j, mut t) = rank_part(rank, d.as_ref(), &comms, &labels, profile);
    if ran {
        // The fifth section: this rank's host, its cores and its threads busy in MPI.
        t.push('\x0c');
        t.push_str(&profile_report::load_line());
    }
    // One buffer per rank: JSON, NUL, table text.
    let mut part = j.into_bytes();
    part.push(0);
    part.extend_from_slice(t.as_bytes());
    let Some(parts) = gather(&part, rank, size) else {
        if rank == 0 {
            mpixstream_wrappers::say!("mpixstream report: could not gather the ranks' counters");
        }
        return;
    };
    if rank != 0 {
        return;
    }
    let mut jsons = Vec::new();
    let (mut comm_lines, mut ep_lines, mut profile_lines, mut verdicts, mut loads) =
        (String::new(), String::new(), String::new(), Vec::new(), Vec::new());
    for (rank, part) in parts.iter().enumerate() {
        let cut = part.iter().position(|&b| b == 0).unwrap_or(part.len());
        jsons.push(String::from_utf8_lossy(&part[..cut]).into_owned());
        let text = String::from_utf8_lossy(part.get(cut + 1..).unwrap_or(&[])).into_owned();
        let mut sections = text.splitn(5, '\x0c');
        comm_lines.push_str(sections.next().unwrap_or(""));
        ep_lines.push_str(sections.next().unwrap_or(""));
        profile_lines.push_str(sections.next().unwrap_or(""));
        verdicts.push((rank, sections.next().unwrap_or("").to_string()));
        loads.push((rank, sections.next().unwrap_or("").to_string()));
    }
    let library = d.map(|d| cstr(&d.library)).unwrap_or_default();
    let reason = d.map(|d| cstr(&d.backend_reason)).unwrap_or_default();
    let inert = d.map(|d| cstr(&d.policy_inert)).filter(|s| !s.is_empty());
    let backend = backend_name(d.as_ref());
    // As MPICH runs it (read back), else as the lean library said.
    let implicit_vcis = crate::state::implicit_vcis().or(d.map(|d| d.implicit_vcis)).filter(|&v| v >= 0);
    let reserved_base = if backend == "native" { implicit_vcis } else { None };
    let vci_basis = match backend {
        _ if abi == Abi::Standard => "none: the MPI standard ABI's serial model (every stream on the library's shared endpoints; no VCI is known)",
        "native" => "stream comm: NUM_VCIS + the reserved index MPICH's MPID_Allocate_vci gave its native stream (lowest free; shown by the UCX probe); no stream: VCI 0 when NUM_VCIS is 1, else the VCI MPICH's requests on it came from (vci_seen), else MPICH's round robin (seq % NUM_VCIS, counted under the implicit policy: vci_model), else null",
        "serial" => "one endpoint: VCI 0 when MPICH's implicit pool has one VCI, else as on the native backend (its requests, or MPICH's round robin)",
        "split" => "Intel MPI's thread-split endpoint (the communicator's info key thread_id): a stream's own endpoint 1..pool; no stream: endpoint 0; a multiplex index: null (its traffic runs on endpoints of its own, one per hidden communicator)",
        _ => "unknown: libmpixstream.so was not active",
    };
    let abi_name = if abi == Abi::Standard { "standard" } else { "mpich" };
    let mut doc = String::new();
    let _ = writeln!(
        doc,
        "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"abi\":\"{abi_name}\",\"library\":{},\"backend\":\"{backend}\",\"backend_reason\":{},\
         \"policy\":\"{}\",\"policy_inert\":{},\"pool\":{},\"implicit_vcis\":{},\"reserved_vci_base\":{},\"vci_basis\":{},\"nranks\":{size},\
         \"thread_level\":\"{}\",\"check\":\"{}\",\"guided\":{},\"ranks\":[{}]}}",
        json::string(&library),
        json::string(&reason),
        policy_name(d.as_ref()),
        inert.as_deref().map_or("null".to_string(), json::string),
        d.map_or(0, |d| d.pool),
        opt(implicit_vcis),
        opt(reserved_base),
        json::string(vci_basis),
        thread_level_name(d.map_or(-1, |d| d.thread_level)),
        check_name(check_mode),
        d.filter(|d| d.guided_nranks > 0).map_or("null".to_string(), |d| format!(
            "{{\"profile\":{},\"profile_nranks\":{},\"follows\":{}}}",
            json::string(&cstr(&d.guided_profile)),
            d.guided_nranks,
            d.guided_nranks == size
        )),
        jsons.join(",")
    );
    let written = std::fs::write(&path, doc.as_bytes());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mpixstream report: backend {backend}{} ({library}); policy {}{}; pool {} streams{}; implicit VCIs {}; {size} ranks; {}; check {}",
        if abi == Abi::Standard { " on the MPI standard ABI" } else { "" },
        policy_name(d.as_ref()),
        inert.as_deref().map_or(String::new(), |why| format!(" ({why})")),
        d.map_or(0, |d| d.pool),
        reserved_base.map_or(String::new(), |b| format!(" on reserved VCIs {b}..{}", b + d.map_or(0, |d| d.pool) - 1)),
        opt_dash(implicit_vcis.map(|v| v as u32)),
        thread_level_name(d.map_or(-1, |d| d.thread_level)),
        check_name(check_mode)
    );
    if backend == "serial" && !reason.is_empty() {
        // The pool above is what the explicit policy may use; on the serial backend no VCI is reserved.
        let _ = writeln!(out, "backend serial: {reason}");
    }
    let _ = writeln!(
        out,
        "{:>5}  {:>3} {:<20} {:>5}  {:>6}  {:<9}  {:>4}  {:>10}  {:>12}  {:>10}  {:>12}  {:>6}  {:>6}",
        "rank",
        "id",
        "communicator",
        "size",
        "stream",
        "origin",
        "vci",
        "sent msgs",
        "sent bytes",
        "recv msgs",
        "recv bytes",
        "colls",
        "starts"
    );
    out.push_str(&comm_lines);
    let _ = writeln!(
        out,
        "{:>5}  {:<10}  {:>4}  {:<16}  {:>10}  {:>12}  {:>10}  {:>12}  {:>6}  {:>6}",
        "rank", "endpoint", "vci", "comm ids", "sent msgs", "sent bytes", "recv msgs", "recv bytes", "colls", "starts"
    );
    out.push_str(&ep_lines);
    if !profile_lines.is_empty() {
        let _ = writeln!(
            out,
            "contention profile: time inside MPI calls per endpoint and thread; overlap = time two or more threads were inside one endpoint at once (share: of its busy time)"
        );
        let _ = writeln!(out, "{}", profile_report::header());
        out.push_str(&profile_lines);
        // Each rank's verdict; a rank whose verdict reads as rank 0's is not repeated.
        let first = verdicts.first().map(|v| v.1.clone()).unwrap_or_default();
        for (rank, v) in &verdicts {
            if v.is_empty() || (*rank > 0 && *v == first) {
                continue;
            }
            for (k, line) in v.lines().enumerate() {
                let _ = writeln!(
                    out,
                    "{}{line}",
                    if k == 0 { format!("verdict (rank {rank}): ") } else { "  ".to_string() }
                );
            }
        }
        if verdicts.iter().skip(1).all(|v| v.1 == first) && verdicts.len() > 1 {
            let _ = writeln!(out, "  (every rank's verdict reads the same)");
        }
        for line in profile_report::cores_lines(&loads) {
            let _ = writeln!(out, "verdict (job): {line}");
        }
    }
    if let Some(d) = d {
        if d.policy == 2 {
            let profile = cstr(&d.guided_profile);
            let _ = writeln!(
                out,
                "guided policy (rank 0): profile {profile} ({} ranks): {} communicators selected by it; left implicit: {} the profile never saw, {} without an identity{}",
                d.guided_nranks,
                d.guided_selected,
                d.guided_unseen,
                d.guided_unidentified,
                if d.guided_nranks != size { format!("; the profile's rank count is not this job's ({size}): every communicator left implicit") } else { String::new() }
            );
        }
        if d.policy != 0 {
            let _ = writeln!(
                out,
                "{} policy (rank 0): {} communicators given a stream; left implicit: {} (pool exhausted), {} (nonblocking constructor), {} (intercommunicator); {} streams retired with their communicators",
                policy_name(Some(&d)),
                d.policy_attached, d.policy_exhausted, d.policy_nonblocking, d.policy_intercomm, d.policy_retired
            );
            if d.policy_unserved > 0 {
                let _ = writeln!(
                    out,
                    "explicit policy (rank 0): {} more left implicit: nothing could turn the implicit pool while a stream's call blocks (MPICH 4.1 and 4.2 have no MPIX_Async_start: docs/policy.md)",
                    d.policy_unserved
                );
            }
        }
        if d.policy_twins > 0 {
            let _ = writeln!(
                out,
                "windows, files and distributed graphs of stream communicators (rank 0): {} made on MPICH's implicit pool (a plain twin of the communicator)",
                d.policy_twins
            );
        }
        if abi == Abi::Standard && d.multiplex_pooled > 0 {
            let _ = writeln!(
                out,
                "multiplex communicators (rank 0): {} on the library's shared endpoints (serial model)",
                d.multiplex_pooled
            );
        } else if backend == "split" && d.multiplex_on_streams > 0 {
            let _ = writeln!(
                out,
                "multiplex communicators (rank 0): {} on thread-split endpoints of their own (each index drives its own set)",
                d.multiplex_on_streams
            );
        } else if d.multiplex_on_streams + d.multiplex_pooled > 0 {
            let _ = writeln!(
                out,
                "multiplex communicators (rank 0): {} on the streams' endpoints, {} on MPICH's implicit pool",
                d.multiplex_on_streams, d.multiplex_pooled
            );
        }
    }
    match written {
        Ok(()) => {
            let _ = writeln!(out, "report: {path}");
        }
        Err(e) => {
            let _ = writeln!(out, "report: could not write {path}: {e}");
        }
    }
    mpixstream_wrappers::say::whole(&out);
}

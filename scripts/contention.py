#!/usr/bin/env python3
"""The contention profile of one run, from its mpixstream report (docs/report.schema.json, `profile` of
each rank): a table per endpoint (threads, calls, time inside MPI, time two or more threads were inside
it at once), the communicators with the endpoint MPICH gave them and what the explicit policy would do
with each, the verdict of every rank and of the job, profile.json, and a timeline PNG (threads x time,
coloured by endpoint, overlaps marked).

  contention.py REPORT.json [--out DIR] [--command TEXT]

Used by `mpixrun --profile` (and, for its columns, by compare.py). The PNG needs matplotlib
(pydeps.py says where it is looked for); without it the table and the JSON are still written.
"""
import argparse
import json
import os
import sys

import pydeps  # matplotlib's folder on sys.path; the note when it is missing

# The job's outcome from its ranks': a finding about separable threads wins over "no contention".
ORDER = ["explicit_helps", "partly", "explicit_cannot_help", "still_shared", "in_turns", "separate", "none"]
SENTENCE = {
    "explicit_helps": "explicit endpoints would help: threads met inside a shared endpoint, on communicators the explicit policy separates",
    "partly": "explicit endpoints would help in part: some threads met on communicators the explicit policy separates, others share a communicator",
    "explicit_cannot_help": "explicit endpoints cannot help: the threads that met inside an endpoint share a communicator (one communicator per thread is the change to make)",
    "still_shared": "threads still met inside an endpoint under the explicit policy (see what still shares, below)",
    "in_turns": "threads shared endpoints but never were inside one at once: no contention to remove",
    "separate": "no two threads were inside one endpoint at once",
    "none": "no endpoint was used by two threads",
}


def mpich_note(report):
    """MPICH >= 4.1's yield after every progress poll (docs/performance.md, 'MPICH 5.0.2 against Debian
    4.0.2'): what a run on one node can set about it, or None for another MPI."""
    lib = report.get("library") or ""
    if not lib.startswith("MPICH ") or report.get("backend") == "split":
        return None
    try:
        major, minor = (int(x) for x in lib.split()[1].rstrip(",").split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (4, 1):
        return None
    return ("note: MPICH >= 4.1 yields the core (sched_yield) after every progress poll of a blocking call, and on one "
            "node its shared-memory path completes about one message per poll: on the paper benchmark (T=1) that is "
            "2.6-2.8 sched_yield calls per message. With all ranks on one node, MPIR_CVAR_NOLOCAL=1 (messages through "
            "UCX, as Debian's MPICH 4.0.2 sends them) made it 2.7-3.1x faster on a 2-core machine: docs/performance.md")


def job_outcome(outcomes):
    """One outcome for the job: the ranks' most telling (helps and cannot-help together: partly)."""
    found = set(outcomes)
    if {"explicit_helps", "explicit_cannot_help"} <= found:
        return "partly"
    for o in ORDER:
        if o in found:
            return o
    return "none"


def summarize(report):
    """The profile of every rank, plus the job's totals and outcome."""
    ranks = []
    for r in report.get("ranks", []):
        p = r.get("profile")
        if not p:
            continue
        comms = {c["id"]: c for c in r.get("comms", [])}
        ranks.append({
            "rank": r["rank"],
            "outcome": p["verdict"]["outcome"],
            "verdict": p["verdict"]["lines"],
            "threads": p["threads"],
            "endpoints": [dict(e, names=[comms[i]["name"] or comms[i]["handle"] for i in e["comms"] if i in comms])
                          for e in p["endpoints"]],
            "comms": [c for c in r.get("comms", []) if "explicit" in c and c.get("threads")],
        })
    busy = sum(e["busy_ns"] for r in ranks for e in r["endpoints"])
    overlap = sum(e["overlap_ns"] for r in ranks for e in r["endpoints"])
    shared = [e for r in ranks for e in r["endpoints"] if len(e["threads"]) >= 2]
    return {
        "format": "mpixstream-profile", "version": 1,
        "library": report.get("library"), "backend": report.get("backend"), "policy": report.get("policy"),
        "implicit_vcis": report.get("implicit_vcis"), "nranks": report.get("nranks"),
        "outcome": job_outcome([r["outcome"] for r in ranks]) if ranks else None,
        "busy_ns": busy, "overlap_ns": overlap,
        "overlap_share": overlap / busy if busy else 0.0,
        "shared_endpoints": len(shared),
        "contended_calls": sum(e["contended_calls"] for r in ranks for e in r["endpoints"]),
        "note": mpich_note(report),
        "calls": sum(e["calls"] for r in ranks for e in r["endpoints"]),
        "ranks": ranks,
        "guided": guided_section(report),
    }


def guided_section(report):
    """What the guided policy (MPIXSTREAM_POLICY=guided, MPIXSTREAM_PROFILE=profile.json) reads: per rank,
    the identity of every communicator it made and of those the verdict says the explicit policy would
    separate (threads met inside their shared endpoint, each on a communicator of its own); `select`, the
    union over the ranks (every member of a communicator must decide alike)."""
    ranks, select = [], set()
    for r in report.get("ranks", []):
        p = r.get("profile") or {}
        comms = {c["id"]: c for c in r.get("comms", [])}
        mine = sorted({comms[i]["identity"] for i in p.get("verdict", {}).get("separable", [])
                       if comms.get(i, {}).get("identity")})
        select.update(mine)
        ranks.append({"rank": r["rank"], "made": p.get("identities", []), "select": mine})
    return {"version": 1, "policy": report.get("policy"), "nranks": report.get("nranks"),
            "select": sorted(select), "ranks": ranks}


def print_table(s, command=""):
    print(f"mpixrun --profile: {command}" if command else "mpixstream contention profile")
    print(f"MPI library: {s['library']}; backend {s['backend']}; policy {s['policy']}; implicit VCIs {s['implicit_vcis']}; "
          f"{s['nranks']} ranks")
    if not s["ranks"]:
        print("no profile in the report (the tools library did not run with the report)")
        return
    print("time inside MPI calls per endpoint; overlap = time two or more threads were inside one endpoint at once "
          "(share: of the time the endpoint was busy)")
    print(f"{'rank':>4}  {'endpoint':<12} {'communicators':<28} {'threads':<12} {'calls':>9} {'in MPI ms':>10} "
          f"{'busy ms':>9} {'overlap ms':>10} {'share':>6} {'contended':>9}")
    for r in s["ranks"]:
        for e in r["endpoints"]:
            names = ",".join(str(n) for n in e["names"])
            threads = ",".join(f"T{t}" for t in e["threads"])
            share = 100 * e["overlap_ns"] / e["busy_ns"] if e["busy_ns"] else 0.0
            print(f"{r['rank']:>4}  {e['endpoint'][:12]:<12} {names[:28]:<28} {threads[:12]:<12} {e['calls']:>9} "
                  f"{e['in_mpi_ns'] / 1e6:>10.3f} {e['busy_ns'] / 1e6:>9.3f} {e['overlap_ns'] / 1e6:>10.3f} "
                  f"{share:>5.1f}% {e['contended_calls']:>9}")
    print("\ncommunicators used by the threads (vci: where MPICH runs it; from: how that is known; explicit: what the "
          "explicit policy does with it)")
    print(f"{'rank':>4}  {'id':>3} {'communicator':<20} {'made by':<24} {'vci':>4} {'from':<12} {'threads':<10} explicit")
    for r in s["ranks"]:
        for c in r["comms"]:
            vci = "-" if c["vci"] is None else c["vci"]
            source = "requests" if c.get("vci_seen") and c["stream"] is None else c.get("vci_source", "")
            made = c.get("made_by") or "-"
            if c.get("seq") is not None:
                made += f" (seq {c['seq']})"
            what = c["explicit"].replace("_", " ") + (f": {c['explicit_why']}" if c.get("explicit_why") else "")
            name = c["name"] or c["handle"]
            print(f"{r['rank']:>4}  {c['id']:>3} {name[:20]:<20} {made[:24]:<24} {vci!s:>4} {source:<12} "
                  f"{','.join(f'T{t}' for t in c['threads'])[:10]:<10} {what}")
    if s.get("note"):
        print(f"\n{s['note']}")
    print(f"\nverdict: {SENTENCE.get(s['outcome'], s['outcome'])}")
    print(f"  all ranks: {s['overlap_ns'] / 1e6:.3f} ms of {s['busy_ns'] / 1e6:.3f} ms busy with two or more threads "
          f"inside one endpoint ({100 * s['overlap_share']:.1f} %); {s['contended_calls']} of {s['calls']} calls found "
          "another thread inside")
    # The details of one rank of each outcome, the one with the most overlap (its figures are the telling
    # ones: another rank of the same outcome may have met only for microseconds); the others by number.
    by_outcome = {}
    for r in s["ranks"]:
        by_outcome.setdefault(r["outcome"], []).append(r)
    for outcome, ranks in by_outcome.items():
        first = max(ranks, key=lambda r: (sum(e["overlap_ns"] for e in r["endpoints"]), -r["rank"]))
        rest = ", ".join(str(r["rank"]) for r in ranks if r is not first)
        others = f" (also rank{'s' if len(ranks) > 2 else ''} {rest})" if rest else ""
        print(f"  rank {first['rank']}{others}: {first['verdict'][0]}")
        for line in first["verdict"][1:]:
            print(f"    {line.strip()}")
    g = s.get("guided") or {}
    if g.get("policy") == "implicit":
        chosen = ", ".join(g["select"]) or "none (no threads met on communicators of their own)"
        print(f"\nthe guided policy (MPIXSTREAM_POLICY=guided) would give a stream to: {chosen}")


def timeline_rows(report):
    """{(rank, thread): [(start_ns, end_ns, endpoint label, contended)]} on the ranks' shared clock."""
    rows = {}
    for r in report.get("ranks", []):
        p = r.get("profile")
        if not p:
            continue
        labels = [e["endpoint"] for e in p["endpoints"]]
        origin = p["timeline"]["origin_ns"]
        for thread, ep, start, end, contended in p["timeline"]["events"]:
            rows.setdefault((r["rank"], thread), []).append((origin + start, origin + end, labels[ep], bool(contended)))
    return rows


def overlaps(events):
    """Intervals where two or more of `events` [(start, end, endpoint, _)] (one rank's threads) were
    inside the same endpoint: {endpoint: [(start, end)]}."""
    out = {}
    by_ep = {}
    for start, end, ep, _ in events:
        by_ep.setdefault(ep, []).extend([(start, 1), (end, -1)])
    for ep, marks in by_ep.items():
        marks.sort(key=lambda m: (m[0], m[1]))
        inside, since = 0, None
        for t, d in marks:
            inside += d
            if inside >= 2 and since is None:
                since = t
            elif inside < 2 and since is not None:
                if t > since:
                    out.setdefault(ep, []).append((since, t))
                since = None
    return out


def window(rows, kept):
    """The span to draw: where every thread whose kept calls were cut (it made more than `kept`, the
    timeline keeps the last ones) still has calls; the whole run where none was cut."""
    cut = [ev for ev in rows.values() if len(ev) >= kept]
    hi = max(e[1] for ev in rows.values() for e in ev)
    lo = max((min(e[0] for e in ev) for ev in cut), default=None)
    if lo is None or lo >= hi:
        lo = min(e[0] for ev in rows.values() for e in ev)
    return lo, hi


def plot_timeline(report, path, title=""):
    """Threads x time, one bar per MPI call coloured by its endpoint; calls that found another thread
    inside their endpoint outlined in black; a red band per rank where two or more threads were inside one
    endpoint at once. Returns None, or why no PNG was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return pydeps.NO_MATPLOTLIB
    rows = timeline_rows(report)
    if not rows:
        return "no PNG: the report has no timeline"
    kept = min((r["profile"]["timeline"]["kept_per_thread"] for r in report["ranks"] if r.get("profile")), default=1)
    lo, hi = window(rows, kept)
    ms = lambda t: (t - lo) / 1e6
    labels = sorted({e[2] for ev in rows.values() for e in ev})
    palette = plt.get_cmap("tab10")
    colour = {ep: palette(i % 10) for i, ep in enumerate(labels)}
    ranks = sorted({r for r, _ in rows})
    lines = []  # (y label, kind, payload)
    for rank in ranks:
        for (r, t) in sorted(k for k in rows if k[0] == rank):
            lines.append((f"rank {r} T{t}", "calls", rows[(r, t)]))
        lines.append((f"rank {rank} overlap", "overlap",
                      overlaps([e for (r, _), ev in rows.items() if r == rank for e in ev])))
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.45 * len(lines)))
    for y, (_, kind, payload) in enumerate(reversed(lines)):
        if kind == "calls":
            for ep in labels:
                bars = [(ms(s), max(ms(e) - ms(s), 1e-4)) for s, e, lab, _ in payload if lab == ep and e >= lo and s <= hi]
                if bars:
                    ax.broken_barh(bars, (y - 0.35, 0.7), facecolors=colour[ep], linewidth=0)
            hit = [(ms(s), max(ms(e) - ms(s), 1e-4)) for s, e, _, c in payload if c and e >= lo and s <= hi]
            if hit:
                ax.broken_barh(hit, (y - 0.35, 0.7), facecolors="none", edgecolors="black", linewidth=0.6)
        else:
            for ep, spans in payload.items():
                bars = [(ms(s), ms(e) - ms(s)) for s, e in spans if e >= lo and s <= hi]
                if bars:
                    ax.broken_barh(bars, (y - 0.3, 0.6), facecolors="tab:red", alpha=0.8)
    ax.set_yticks(range(len(lines)), [n for n, _, _ in reversed(lines)], fontsize=8)
    ax.set_xlim(0, ms(hi))
    ax.set_xlabel("time (ms); each thread's last calls are kept, so the plot starts where every cut thread still has some")
    handles = [Patch(color=colour[ep], label=ep) for ep in labels]
    handles.append(Patch(facecolor="none", edgecolor="black", label="call found another thread inside"))
    handles.append(Patch(color="tab:red", label="two or more threads inside one endpoint"))
    ax.legend(handles=handles, fontsize=7, loc="upper right", ncol=min(4, len(handles)))
    ax.set_title(title[:120] or f"MPI calls per thread, coloured by endpoint (policy {report.get('policy')})", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--out", default=".")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    report = json.load(open(a.report))
    s = summarize(report)
    print_table(s, a.command)
    os.makedirs(a.out, exist_ok=True)
    js = os.path.join(a.out, "profile.json")
    with open(js, "w") as f:
        json.dump(dict(s, command=a.command, report=os.path.abspath(a.report)), f, indent=1)
    png = os.path.join(a.out, "timeline.png")
    note = plot_timeline(report, png, a.command)
    print(f"\nwrote {js}" + (f" and {png}" if note is None else f" ({note})"))
    return 0 if s["ranks"] else 1


if __name__ == "__main__":
    sys.exit(main())

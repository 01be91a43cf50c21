#!/usr/bin/env python3
"""The contention profile of one run, from its mpixstream report (docs/report.schema.json, `profile` of
each rank): a table per endpoint (threads, calls, time inside MPI, time two or more threads were inside
it at once), the communicators with the endpoint MPICH gave them and what the explicit policy would do
with each, the whole run apart from its MPI section (start-up), the verdict of every rank and of the job
(threads that outnumber a host's cores contend for cores), profile.json, and a timeline PNG (threads x
time in a representative window, hue by endpoint, shade by communicator, contention ticked) with what it
drew in timeline.json.

  contention.py REPORT.json [--out DIR] [--command TEXT] [--wall SECONDS]

Used by `mpixrun --profile` (and, for its columns, by compare.py). The PNG needs matplotlib
(pydeps.py says where it is looked for); without it the table and the JSON are still written.
"""
import argparse
import bisect
import json
import os
import sys

import pydeps  # matplotlib's folder on sys.path; the note when it is missing

# The job's outcome from its ranks': a finding about separable threads wins over "no contention".
ORDER = ["explicit_helps", "partly", "one_endpoint", "explicit_cannot_help", "still_shared", "in_turns", "separate", "none"]
SENTENCE = {
    "explicit_helps": "explicit endpoints would help: threads met inside a shared endpoint, on communicators the explicit policy separates",
    "partly": "explicit endpoints would help in part: some threads met on communicators the explicit policy separates, others share a communicator",
    "one_endpoint": "explicit endpoints cannot help on this MPICH: threads met on communicators the explicit policy would separate, but MPICH 4.0 has one endpoint (serial backend); an MPICH with native streams (>= 4.1) gives each an endpoint of its own",
    "explicit_cannot_help": "explicit endpoints cannot help: the threads that met inside an endpoint share a communicator (one communicator per thread is the change to make)",
    "cores": "explicit endpoints would not help here: more threads were busy in MPI than the node has cores, so the threads contend for cores, not for the endpoint (on 2 cores a VCI per thread measured 0.6-1.06x the speed of one shared VCI: docs/performance.md, IMB-MT's shape)",
    "still_shared": "threads still met inside an endpoint under the explicit policy (what still shares is named below)",
    "in_turns": "threads shared endpoints but never were inside one at once: no contention to remove",
    "separate": "no two threads were inside one endpoint at once",
    "none": "no endpoint was used by two threads",
}
# A thread counts as busy in MPI when it was inside MPI calls for at least this share of its rank's MPI
# section (a thread that only sends now and then, or the main thread's barrier, does not).
BUSY_SHARE = 0.10


def mpich_version(lib):
    """(major, minor) of an MPICH library string ("MPICH 5.0.2, ..."), else None."""
    if not (lib or "").startswith("MPICH "):
        return None
    try:
        return tuple(int(x) for x in lib.split()[1].rstrip(",").split(".")[:2])
    except ValueError:
        return None


def mpich_note(report):
    """MPICH >= 4.1's yield after every progress poll (docs/performance.md, 'MPICH 5.0.2 against Debian
    4.0.2'): what a run on one node can set about it; None for another MPI, a job across hosts, or one
    whose ranks sent each other no message (the note is about the shared-memory path's messages)."""
    version = mpich_version(report.get("library"))
    if version is None or version < (4, 1) or report.get("backend") == "split":
        return None
    ranks = report.get("ranks", [])
    hosts = {(r.get("profile") or {}).get("host") for r in ranks}
    if len(hosts) > 1 or report.get("nranks", 1) < 2:
        return None
    if not any(ep["sent"]["messages"] for r in ranks for ep in r.get("endpoints", [])):
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


def core_load(report):
    """Per host: its cores online, its ranks, and the threads busy in MPI (inside MPI calls for at least
    BUSY_SHARE of their rank's MPI section); `oversubscribed` where busy threads outnumber the cores."""
    hosts = {}
    for r in report.get("ranks", []):
        p = r.get("profile")
        if not p:
            continue
        span = p.get("span_ns") or 0
        busy = [t for t in p["threads"] if span and t["in_mpi_ns"] >= BUSY_SHARE * span]
        h = hosts.setdefault(p.get("host") or "?", {"host": p.get("host") or "?", "cores": p.get("cores_online"),
                                                    "ranks": [], "busy_threads": 0})
        h["ranks"].append(r["rank"])
        h["busy_threads"] += len(busy)
    out = list(hosts.values())
    for h in out:
        h["oversubscribed"] = bool(h["cores"]) and h["busy_threads"] > h["cores"]
    return out


def section(report):
    """The MPI section (MPI_Init's return to MPI_Finalize's entry) of the longest rank, in seconds, or None."""
    spans = [(r.get("profile") or {}).get("span_ns") for r in report.get("ranks", [])]
    spans = [s for s in spans if s]
    return max(spans) / 1e9 if spans else None


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
    endpoint_outcome = job_outcome([r["outcome"] for r in ranks]) if ranks else None
    hosts = core_load(report)
    # Threads that outnumber the cores contend for cores: what the explicit policy would separate does not
    # make them faster (the endpoint's finding stays in endpoint_outcome).
    crowded = [h for h in hosts if h["oversubscribed"]]
    outcome = "cores" if crowded and endpoint_outcome in ("explicit_helps", "partly") else endpoint_outcome
    return {
        "format": "mpixstream-profile", "version": 1,
        "library": report.get("library"), "backend": report.get("backend"), "policy": report.get("policy"),
        "backend_reason": report.get("backend_reason"), "pool": report.get("pool"),
        "implicit_vcis": report.get("implicit_vcis"), "nranks": report.get("nranks"),
        "outcome": outcome, "endpoint_outcome": endpoint_outcome, "hosts": hosts,
        "section_s": section(report),
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


def table(header, rows, right=()):
    """Lines of a table whose columns fit their content (`right`: the columns aligned right)."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(len(header))]
    fmt = lambda row: "  ".join(c.rjust(w) if k in right else c.ljust(w) for k, (c, w) in enumerate(zip(row, widths)))
    return [fmt(row).rstrip() for row in cells]


def backend_text(s):
    """The backend, and why where it is serial on an MPICH with native streams (the pool is then unused)."""
    text = f"backend {s['backend']}"
    if s.get("backend") == "serial" and s.get("backend_reason"):
        text += f" ({s['backend_reason']})"
    return text


def timing_lines(s, wall=None):
    """The run's whole time apart from its MPI section: start-up and finalize are outside the section."""
    sec = s.get("section_s")
    if sec is None:
        return []
    if wall is None:
        return [f"MPI section (MPI_Init's return to MPI_Finalize's entry, longest rank): {sec:.3f} s"]
    lines = [f"whole run {wall:.3f} s; MPI section (MPI_Init's return to MPI_Finalize's entry, longest rank) {sec:.3f} s "
             f"({100 * sec / wall:.0f} %); outside it (start-up, finalize, the report) {max(wall - sec, 0):.3f} s"]
    if sec < 0.5 * wall:
        lines.append("  most of this run is outside its MPI section: a whole-run comparison (mpixrun --compare) measures "
                     "mostly start-up, which the explicit policy lengthens (it reserves MPIXSTREAM_STREAMS VCIs at "
                     "MPI_Init, 8 by default: a program with fewer threads per rank can ask for fewer: docs/performance.md, what a reserved VCI costs); the verdict below is about the MPI section (--compare's 'MPI section' column)")
    return lines


def verdict_lines(s):
    """The job's verdict: its headline, the totals, the cores where threads outnumber them, and the details
    of one rank of each outcome."""
    lines = [f"verdict: {SENTENCE.get(s['outcome'], s['outcome'])}",
             f"  all ranks: {s['overlap_ns'] / 1e6:.3f} ms of {s['busy_ns'] / 1e6:.3f} ms busy with two or more threads "
             f"inside one endpoint ({100 * s['overlap_share']:.1f} %); {s['contended_calls']} of {s['calls']} calls found "
             "another thread inside"]
    for h in s.get("hosts", []):
        if h["oversubscribed"]:
            lines.append(f"  threads outnumber cores on {h['host']}: {h['busy_threads']} threads busy in MPI (inside MPI for "
                         f"{100 * BUSY_SHARE:.0f} % of the MPI section or more) on {h['cores']} cores online, ranks "
                         f"{','.join(map(str, h['ranks']))}: the contention is for cores")
    if s["outcome"] == "cores":
        lines.append(f"  the endpoints' own finding ({s['endpoint_outcome']}) holds where each busy thread has a core: "
                     "fewer threads or ranks per node, or a node with more cores")
    # The details of one rank of each outcome, the one with the most overlap (its figures are the telling
    # ones: another rank of the same outcome may have met only for microseconds); the others by number.
    by_outcome = {}
    for r in s["ranks"]:
        by_outcome.setdefault(r["outcome"], []).append(r)
    for outcome, ranks in by_outcome.items():
        first = max(ranks, key=lambda r: (sum(e["overlap_ns"] for e in r["endpoints"]), -r["rank"]))
        rest = ", ".join(str(r["rank"]) for r in ranks if r is not first)
        others = f" (also rank{'s' if len(ranks) > 2 else ''} {rest})" if rest else ""
        lines.append(f"  rank {first['rank']}{others}: {first['verdict'][0]}")
        lines.extend(f"    {line.strip()}" for line in first["verdict"][1:])
    return lines


def print_table(s, command="", wall=None):
    print(f"mpixrun --profile: {command}" if command else "mpixstream contention profile")
    print(f"MPI library: {s['library']}; {backend_text(s)}; policy {s['policy']}; implicit VCIs {s['implicit_vcis']}; "
          f"{s['nranks']} ranks")
    for line in timing_lines(s, wall):
        print(line)
    if not s["ranks"]:
        print("no profile in the report (the tools library did not run with the report)")
        return
    print("time inside MPI calls per endpoint; overlap = time two or more threads were inside one endpoint at once "
          "(share: of the time the endpoint was busy)")
    rows = []
    for r in s["ranks"]:
        for e in r["endpoints"]:
            share = 100 * e["overlap_ns"] / e["busy_ns"] if e["busy_ns"] else 0.0
            rows.append([r["rank"], e["endpoint"], ",".join(str(n) for n in e["names"]),
                         ",".join(f"T{t}" for t in e["threads"]), e["calls"], f"{e['in_mpi_ns'] / 1e6:.3f}",
                         f"{e['busy_ns'] / 1e6:.3f}", f"{e['overlap_ns'] / 1e6:.3f}", f"{share:.1f}%",
                         e["contended_calls"]])
    for line in table(["rank", "endpoint", "communicators", "threads", "calls", "in MPI ms", "busy ms", "overlap ms",
                       "share", "contended"], rows, right={0, 4, 5, 6, 7, 8, 9}):
        print(line)
    print("\ncommunicators used by the threads (vci: where MPICH runs it; from: how that is known; explicit: what the "
          "explicit policy does with it)")
    rows = []
    for r in s["ranks"]:
        for c in r["comms"]:
            vci = "-" if c["vci"] is None else c["vci"]
            source = "requests" if c.get("vci_seen") and c["stream"] is None else c.get("vci_source", "")
            made = c.get("made_by") or "-"
            if c.get("seq") is not None:
                made += f" (seq {c['seq']})"
            what = c["explicit"].replace("_", " ") + (f": {c['explicit_why']}" if c.get("explicit_why") else "")
            rows.append([r["rank"], c["id"], c["name"] or c["handle"], made, vci, source,
                         ",".join(f"T{t}" for t in c["threads"]), what])
    for line in table(["rank", "id", "communicator", "made by", "vci", "from", "threads", "explicit"], rows,
                      right={0, 1, 4}):
        print(line)
    if s.get("note"):
        print(f"\n{s['note']}")
    print()
    for line in verdict_lines(s):
        print(line)
    g = s.get("guided") or {}
    if g.get("policy") == "implicit":
        chosen = ", ".join(g["select"]) or "none (no threads met on communicators of their own)"
        print(f"\nthe guided policy (MPIXSTREAM_POLICY=guided) would give a stream to: {chosen}")


def timeline_rows(report):
    """{(rank, thread): [(start_ns, end_ns, series, contended)]} on the ranks' shared clock, where a series is
    (endpoint label, communicator label): the communicator the thread used on that endpoint, or "several"
    where it used more than one there (a call's communicator is not in the timeline)."""
    rows = {}
    for r in report.get("ranks", []):
        p = r.get("profile")
        if not p:
            continue
        comms = {c["id"]: c for c in r.get("comms", [])}
        labels = [e["endpoint"] for e in p["endpoints"]]
        series = {}
        for k, e in enumerate(p["endpoints"]):
            for t in e["threads"]:
                mine = [comms[i] for i in e["comms"] if i in comms and t in comms[i].get("threads", [])]
                name = comm_label(mine[0]) if len(mine) == 1 else "several communicators"
                series[(k, t)] = (labels[k], name)
        origin = p["timeline"]["origin_ns"]
        for thread, ep, start, end, contended in p["timeline"]["events"]:
            key = series.get((ep, thread), (labels[ep], "several communicators"))
            rows.setdefault((r["rank"], thread), []).append((origin + start, origin + end, key, bool(contended)))
    return rows


def comm_label(c):
    """A communicator's name in the timeline's legend, the same on every rank (its handle differs)."""
    if c.get("name") in ("MPI_COMM_WORLD", "MPI_COMM_SELF"):
        return c["name"]
    made = c.get("made_by") or "?"
    return f"comm {c['id']} ({made})"


def overlaps(events):
    """Intervals where two or more of `events` [(start, end, (endpoint, comm), _)] (one rank's threads) were
    inside the same endpoint: {endpoint: [(start, end)]}."""
    out = {}
    by_ep = {}
    for start, end, key, _ in events:
        by_ep.setdefault(key[0], []).extend([(start, 1), (end, -1)])
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


def kept_span(rows, kept):
    """The span every thread's kept calls cover: where every thread whose calls were cut (it made more than
    `kept`, the timeline keeps the last ones) still has calls; the whole run where none was cut."""
    cut = [ev for ev in rows.values() if len(ev) >= kept]
    hi = max(e[1] for ev in rows.values() for e in ev)
    lo = max((min(e[0] for e in ev) for ev in cut), default=None)
    if lo is None or lo >= hi:
        lo = min(e[0] for ev in rows.values() for e in ev)
    return lo, hi


# The window drawn: about this many calls on the busiest thread, so that each call is a visible bar.
WINDOW_CALLS = 120


def steady_window(rows, lo, hi):
    """A representative window: the whole span where the busiest thread made at most WINDOW_CALLS calls in
    it; else a window as wide as WINDOW_CALLS of the busiest thread's calls, placed where the most threads
    have kept calls (each thread's last calls are kept, and on crowded cores threads may run in turns), the
    most calls among those, the middle among equals."""
    busiest = max(sum(1 for e in ev if e[1] >= lo and e[0] <= hi) for ev in rows.values())
    if busiest <= WINDOW_CALLS:
        return lo, hi, "the whole span of the kept calls"
    rate = max(len(ev) / max(ev[-1][1] - ev[0][0], 1) for ev in rows.values())
    width = WINDOW_CALLS / rate
    # The threads that made most of the calls (the main thread's barrier and reduce do not place it).
    most = max(len(ev) for ev in rows.values())
    lanes = [ev for ev in rows.values() if len(ev) >= most / 10]
    starts = [sorted(e[0] for e in ev) for ev in lanes]
    met = [sorted(e[0] for e in ev if e[3]) for ev in lanes]
    every = sorted(t for lane in starts for t in lane)
    mid_all = (every[0] + every[-1]) / 2
    best = None
    # Candidate windows centred on calls of every thread (a few hundred), scored by the threads with calls
    # in them, then the calls that found another thread inside (what the plot is for), then all calls,
    # then nearness to the middle.
    for lane in starts:
        for t in lane[:: max(1, len(lane) // 100)]:
            a, b = t - width / 2, t + width / 2
            counts = [bisect.bisect_right(l, b) - bisect.bisect_left(l, a) for l in starts]
            contended = sum(bisect.bisect_right(l, b) - bisect.bisect_left(l, a) for l in met)
            score = (sum(1 for n in counts if n), contended, sum(counts), -abs(t - mid_all))
            if best is None or score > best[0]:
                best = (score, a, b)
    return best[1], best[2], (f"where the most threads have kept calls and the most met another, about {WINDOW_CALLS} "
                              "calls of the busiest thread (each thread's last calls are kept)")


def shade(rgb, k, n):
    """The k-th of n shades of one hue: the endpoint keeps its hue, each communicator on it a lightness."""
    if n <= 1:
        return rgb
    f = -0.45 + 0.9 * k / (n - 1)  # from darker to lighter
    return tuple(c + (1 - c) * f if f > 0 else c * (1 + f) for c in rgb[:3])


def plot_timeline(report, path, title=""):
    """Threads x time in a representative window: one bar per MPI call, its hue the endpoint and its shade the
    communicator; a thin black tick above each call that found another thread inside its endpoint; a red
    band per rank where two or more of its threads were inside one endpoint at once; above, the whole kept
    span with the window marked. Writes what it drew beside the PNG (PATH.json: window, lanes, series,
    legend). Returns None, or why no PNG was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        return pydeps.NO_MATPLOTLIB
    rows = timeline_rows(report)
    if not rows:
        return "no PNG: the report has no timeline"
    kept = min((r["profile"]["timeline"]["kept_per_thread"] for r in report["ranks"] if r.get("profile")), default=1)
    lo, hi = kept_span(rows, kept)
    w0, w1, how = steady_window(rows, lo, hi)
    lo, hi = min(lo, w0), max(hi, w1)
    zero = min(r["profile"]["timeline"]["origin_ns"] for r in report["ranks"] if r.get("profile"))
    ms = lambda t: (t - zero) / 1e6
    endpoints = sorted({e[2][0] for ev in rows.values() for e in ev})
    palette = plt.get_cmap("tab10")
    colour = {}
    for i, ep in enumerate(endpoints):
        names = sorted({e[2][1] for ev in rows.values() for e in ev if e[2][0] == ep})
        for k, name in enumerate(names):
            colour[(ep, name)] = shade(palette(i % 10), k, len(names))
    ranks = sorted({r for r, _ in rows})
    lines = []  # (lane label, kind, payload)
    for rank in ranks:
        for (r, t) in sorted(k for k in rows if k[0] == rank):
            used = sorted({e[2][1] for e in rows[(r, t)]})
            lines.append((f"rank {r} T{t}: {used[0] if len(used) == 1 else 'several'}", "calls", rows[(r, t)]))
        lines.append((f"rank {rank}: 2+ inside", "overlap",
                      overlaps([e for (r, _), ev in rows.items() if r == rank for e in ev])))
    fig, (top, ax) = plt.subplots(2, 1, figsize=(12, 1.9 + 0.42 * len(lines)), sharex=False,
                                  gridspec_kw={"height_ratios": [1, max(3, len(lines))]})
    drawn = {"window_ms": [ms(w0), ms(w1)], "kept_span_ms": [ms(lo), ms(hi)], "window": how, "lanes": [],
             "series": {}, "contended_marks": 0, "overlap_bands": 0}
    inside = lambda s, e, a, b: e >= a and s <= b
    for y, (name, kind, payload) in enumerate(reversed(lines)):
        drawn["lanes"].append(name)
        if kind == "calls":
            for key in colour:
                bars = [(ms(s), max(ms(e) - ms(s), 1e-4)) for s, e, k, _ in payload if k == key and inside(s, e, w0, w1)]
                if bars:
                    ax.broken_barh(bars, (y - 0.3, 0.6), facecolors=colour[key], linewidth=0)
                    label = f"{key[0]} · {key[1]}"
                    drawn["series"][label] = drawn["series"].get(label, 0) + len(bars)
            ticks = [ms(s) for s, e, _, c in payload if c and inside(s, e, w0, w1)]
            if ticks:
                ax.vlines(ticks, y + 0.32, y + 0.45, colors="black", linewidth=0.5)
                drawn["contended_marks"] += len(ticks)
        else:
            for ep, spans in payload.items():
                bars = [(ms(s), ms(e) - ms(s)) for s, e in spans if inside(s, e, w0, w1)]
                if bars:
                    ax.broken_barh(bars, (y - 0.25, 0.5), facecolors="tab:red", linewidth=0)
                    drawn["overlap_bands"] += len(bars)
            whole = [(ms(s), ms(e) - ms(s)) for spans in payload.values() for s, e in spans if inside(s, e, lo, hi)]
            if whole:
                top.broken_barh(whole, (ranks.index(int(name.split()[1].rstrip(":"))) - 0.3, 0.6),
                                facecolors="tab:red", linewidth=0)
    ax.set_yticks(range(len(lines)), [n for n, _, _ in reversed(lines)], fontsize=7)
    ax.set_xlim(ms(w0), ms(w1))
    ax.set_xlabel("ms since MPI_Init (ranks on one host share the clock)")
    ax.grid(True, axis="x", alpha=0.3)
    top.set_xlim(ms(lo), ms(hi))
    top.axvspan(ms(w0), ms(w1), color="tab:blue", alpha=0.15)
    top.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks], fontsize=7)
    top.set_ylim(-0.6, len(ranks) - 0.4)
    top.tick_params(axis="x", labelsize=7)
    top.set_title("the whole span of the kept calls: red where two or more threads of a rank were inside one "
                  "endpoint; shaded: the window below", fontsize=8)
    handles = [Patch(color=colour[key], label=f"{key[0]} · {key[1]}") for key in colour]
    handles.append(Line2D([], [], color="black", linewidth=0.8, label="tick: the call found another thread inside"))
    handles.append(Patch(color="tab:red", label="two or more threads inside one endpoint"))
    drawn["legend"] = [h.get_label() for h in handles]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              title="endpoint · communicator", title_fontsize=7)
    head = title[:100] or f"policy {report.get('policy')}"
    ax.set_title(f"{head}\nMPI calls per thread, hue = endpoint, shade = communicator; window {ms(w0):.3f}-{ms(w1):.3f} ms "
                 f"of {ms(lo):.1f}-{ms(hi):.1f} ms: {how}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(drawn, f, indent=1)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--out", default=".")
    ap.add_argument("--command", default="")
    ap.add_argument("--wall", type=float, help="the whole run's wall time in seconds (mpixrun --profile measures it)")
    a = ap.parse_args()
    report = json.load(open(a.report))
    s = summarize(report)
    if a.wall is not None:
        s["wall_s"] = a.wall
    print_table(s, a.command, a.wall)
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

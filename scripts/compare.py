#!/usr/bin/env python3
"""The summary of `mpixrun --compare`: one table (wall time median [min..max] per policy, the ratio to
the first policy, per-endpoint traffic side by side), compare.json and compare.png in the output
directory.

  compare.py --runs OUT/runs.tsv --out OUT --policies implicit,explicit [--command TEXT]

runs.tsv (written by mpixrun): policy, rep, kind (timed: no report, no counters; report: one run with
MPIXSTREAM_REPORT=OUT/report-POLICY.json), exit status, wall seconds, log path. The report runs carry
the contention profile (contention.py): a second table gives, per policy, how long threads were inside
one endpoint at once and the profile's verdict; timeline-POLICY.png shows each report run's calls.
The PNG needs matplotlib; without it the table and the JSON are still written (and a note says so).
Exit status 1 when the program failed under some policy.
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contention  # noqa: E402
import pydeps  # noqa: E402

ERROR_LINE = re.compile(
    r"error|abort|fatal|assert|segmentation|signal|killed|terminated|exception|panic|not found|cannot|"
    r"unrecognized|unknown|invalid|unable|expected", re.I
)


# What MPICH and its launcher print around any failure: a line of the program's own says more.
BOILERPLATE = re.compile(r"^(Abort\(|application called MPI_Abort|\[proxy:|\[mpiexec@|=+$|BAD TERMINATION|YOUR APPLICATION|\s*(PID|EXIT CODE|CLEANING|KILLING|RUNNING AT|This typically))")


def first_error_line(log, status):
    """The line of the run's output that best says why it failed: the first error-like line that is
    not launcher boilerplate, else the first error-like line, else the last line."""
    if status == 124:
        return "timed out (mpixrun --timeout)"
    try:
        lines = [line.rstrip() for line in open(log, errors="replace") if line.strip()]
    except OSError:
        return "no output"
    errors = [line for line in lines if ERROR_LINE.search(line)]
    own = [line for line in errors if not BOILERPLATE.match(line)]
    for candidates in (own, errors, lines[-1:]):
        if candidates:
            return candidates[0][:300]
    return "no output"


def endpoint_traffic(report):
    """{endpoint: {"vci": .., "messages": .., "bytes": ..}} summed over ranks (sent + received)."""
    out = {}
    for rank in report.get("ranks", []):
        for ep in rank.get("endpoints", []):
            e = out.setdefault(ep["endpoint"], {"vci": set(), "messages": 0, "bytes": 0, "collectives": 0})
            if ep.get("vci") is not None:
                e["vci"].add(ep["vci"])
            e["messages"] += ep["sent"]["messages"] + ep["received"]["messages"]
            e["bytes"] += ep["sent"]["bytes"] + ep["received"]["bytes"]
            e["collectives"] += ep["collectives"]
    for e in out.values():
        e["vci"] = sorted(e["vci"])
    return out


def endpoint_order(name):
    return (0, 0) if name == "implicit" else (1, int(name.split()[-1]))


def human(n):
    for unit in ("", "K", "M", "G"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}T"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--policies", required=True)
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    policies = a.policies.split(",")

    rows = []
    with open(a.runs) as f:
        next(f)
        for line in f:
            policy, rep, kind, status, seconds, log = line.rstrip("\n").split("\t")
            rows.append(dict(policy=policy, rep=int(rep), kind=kind, status=int(status), seconds=float(seconds), log=log))

    result = {"format": "mpixrun-compare", "version": 1, "command": a.command, "policies": {},
              "timing": "wall time of timed runs without the traffic report or the check (no counters on the "
                        "message path); the traffic comes from one separate run per policy with MPIXSTREAM_REPORT"}
    failed = []
    for p in policies:
        timed = [r for r in rows if r["policy"] == p and r["kind"] == "timed"]
        report_run = next((r for r in rows if r["policy"] == p and r["kind"] == "report"), None)
        bad = [r for r in timed + ([report_run] if report_run else []) if r["status"] != 0]
        entry = {"runs": [r["seconds"] for r in timed], "statuses": [r["status"] for r in timed]}
        if bad:
            entry["failed"] = {"status": bad[0]["status"], "kind": bad[0]["kind"], "rep": bad[0]["rep"],
                               "first_error_line": first_error_line(bad[0]["log"], bad[0]["status"]),
                               "log": bad[0]["log"], "failed_runs": len(bad)}
            failed.append(p)
        else:
            secs = entry["runs"]
            entry.update(median=statistics.median(secs), min=min(secs), max=max(secs))
        path = os.path.join(a.out, f"report-{p}.json")
        if os.path.exists(path):
            try:
                report = json.load(open(path))
                entry["backend"] = report.get("backend")
                entry["library"] = report.get("library")
                entry["report"] = path
                entry["endpoints"] = endpoint_traffic(report)
                entry["backend_reason"] = report.get("backend_reason")
                summary = contention.summarize(report)
                entry["note"] = contention.mpich_note(report)
                if report_run and report_run["status"] == 0 and summary["section_s"] is not None:
                    # Start-up apart: the report run's whole time against its MPI section.
                    entry["report_run"] = {"wall_s": report_run["seconds"], "section_s": summary["section_s"]}
                if summary["ranks"]:
                    entry["profile"] = {k: summary[k] for k in ("outcome", "endpoint_outcome", "hosts", "busy_ns",
                                                                "overlap_ns", "overlap_share", "shared_endpoints",
                                                                "contended_calls", "calls")}
                    entry["profile"]["lines"] = contention.verdict_lines(summary)
                    entry["profile"]["verdicts"] = {r["rank"]: r["verdict"] for r in summary["ranks"]}
                    png = os.path.join(a.out, f"timeline-{p}.png")
                    if contention.plot_timeline(report, png, f"{p}: {a.command}") is None:
                        entry["profile"]["timeline"] = png
            except (OSError, ValueError) as e:
                entry["report_error"] = str(e)
        result["policies"][p] = entry

    base = policies[0]
    ok = [p for p in policies if "median" in result["policies"][p]]
    if base in ok:
        for p in ok[1:] if ok[0] == base else ok:
            if p != base:
                result["policies"][p]["ratio_to_" + base] = result["policies"][p]["median"] / result["policies"][base]["median"]

    # ---- the table
    print(f"mpixrun --compare: {a.command}")
    any_entry = next((result["policies"][p] for p in policies if result["policies"][p].get("library")), None)
    if any_entry:
        backends = list(dict.fromkeys(result["policies"][p].get("backend") for p in policies
                                      if result["policies"][p].get("backend")))
        print(f"MPI library: {any_entry['library']}; backend {', '.join(backends)}")
        for p in policies:
            e = result["policies"][p]
            if e.get("backend") == "serial" and e.get("backend_reason") and backends != ["serial"]:
                print(f"  {p}: backend serial: {e['backend_reason']}")
        if backends == ["serial"]:
            print("note: serial backend (this MPICH has one endpoint): explicit endpoints cannot speed anything up here")
    reps = max((len(result["policies"][p]["runs"]) for p in policies), default=0)
    print(f"wall time of {reps} run(s) per policy, alternating; timed WITHOUT the traffic report "
          f"(its counters sit on the message path); traffic from one extra run per policy")
    w = max(10, *(len(p) for p in policies))
    print(f"{'policy':<{w}} {'median s':>10}  {'[min .. max]':<22} {'vs ' + base:>10}")
    for p in policies:
        e = result["policies"][p]
        if "failed" in e:
            f = e["failed"]
            print(f"{p:<{w}} FAILED: exit status {f['status']} ({f['kind']} run {f['rep']}; {f['failed_runs']} failed run(s)): "
                  f"{f['first_error_line']}")
            print(f"{'':<{w}} log: {f['log']}")
            continue
        ratio = e.get("ratio_to_" + base)
        rtext = "1" if p == base else (f"{ratio:.3f}" if ratio is not None else "-")
        print(f"{p:<{w}} {e['median']:>10.3f}  [{e['min']:.3f} .. {e['max']:.3f}]{'':<3} {rtext:>10}")
    for p in policies:
        r = result["policies"][p].get("ratio_to_" + base)
        if r is not None:
            verdict = "faster" if r < 1 else "slower"
            print(f"{p} takes {r:.3f}x the wall time of {base} ({abs(1 - r) * 100:.1f} % {verdict}; "
                  f"compare with the spread [min .. max] before trusting a small difference)")
    if failed:
        print(f"no ratio for {', '.join(failed)}: the program failed there (see above)")
    start_up_table(result, policies, base, w)

    eps = sorted({n for p in policies for n in result["policies"][p].get("endpoints", {})}, key=endpoint_order)
    if eps:
        print("\nper-endpoint traffic (all ranks, sent + received messages / bytes; collectives as calls)")
        header = f"{'endpoint':<12}" + "".join(f" {p + ' vci':>14} {p + ' msgs':>14} {p + ' bytes':>14} {p + ' colls':>12}" for p in policies)
        print(header)
        for n in eps:
            line = f"{n:<12}"
            for p in policies:
                e = result["policies"][p].get("endpoints", {}).get(n)
                if e is None:
                    line += f" {'-':>14} {'-':>14} {'-':>14} {'-':>12}"
                else:
                    vci = ",".join(map(str, e["vci"])) or "-"
                    line += f" {vci:>14} {e['messages']:>14} {human(e['bytes']):>14} {e['collectives']:>12}"
            print(line)
    else:
        print("\nno traffic report (the report runs failed or wrote nothing)")
    # The MPICH note where the program's situation hits it (one node, messages between its ranks).
    note = next((result["policies"][p]["note"] for p in policies if result["policies"][p].get("note")), None)
    if note:
        result["note"] = note
        print(f"\n{note}")
    profiled = [p for p in policies if "profile" in result["policies"][p]]
    if profiled:
        print("\ncontention profile (report runs): how long two or more threads were inside one endpoint at once")
        rows = []
        for p in profiled:
            q = result["policies"][p]["profile"]
            rows.append([p, q["shared_endpoints"], f"{q['overlap_ns'] / 1e6:.3f} / {q['busy_ns'] / 1e6:.3f}",
                         f"{100 * q['overlap_share']:.1f}%", f"{q['contended_calls']} of {q['calls']}", q["outcome"]])
        for line in contention.table(["policy", "shared endpoints", "overlap ms / busy ms", "share", "contended calls",
                                      "verdict"], rows, right={1, 2, 3, 4}):
            print(line)
        for p in profiled:
            # The whole verdict: its headline, and below it what it names (what still shares, the cores).
            for k, line in enumerate(result["policies"][p]["profile"]["lines"]):
                print(f"{p}: {line[len('verdict: '):]}" if k == 0 else f"{'':<{len(p)}}{line}")
        print("(per endpoint, thread and communicator: scripts/contention.py REPORT; timelines: timeline-POLICY.png)")

    json_path = os.path.join(a.out, "compare.json")
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    png_path = os.path.join(a.out, "compare.png")
    note = plot(result, policies, eps, png_path)
    print(f"\nwrote {json_path}" + (f" and {png_path}" if note is None else f" ({note})"))
    print(f"every run's output: {a.out}/logs/")
    return 1 if failed else 0


def start_up_table(result, policies, base, w):
    """Start-up apart: each policy's report run, its whole time and its MPI section (MPI_Init's return to
    MPI_Finalize's entry); the timed runs carry no tools library, so the section comes from the report run."""
    timed = [p for p in policies if "report_run" in result["policies"][p]]
    if not timed:
        return
    print("\nstart-up apart (the report run of each policy, one run, counters on): whole run against its MPI section "
          "(MPI_Init's return to MPI_Finalize's entry, longest rank)")
    rows = []
    b = result["policies"][base].get("report_run")
    for p in timed:
        r = result["policies"][p]["report_run"]
        ratio = "1" if p == base else (f"{r['section_s'] / b['section_s']:.3f}" if b and b["section_s"] else "-")
        rows.append([p, f"{r['wall_s']:.3f}", f"{r['section_s']:.3f}", f"{max(r['wall_s'] - r['section_s'], 0):.3f}",
                     ratio])
    for line in contention.table(["policy", "whole run s", "MPI section s", "outside it s", "section vs " + base], rows,
                                 right={1, 2, 3, 4}):
        print(line)
    for p in timed:
        r, ratio = result["policies"][p]["report_run"], None
        if p != base and b and b["section_s"]:
            ratio = r["section_s"] / b["section_s"]
            result["policies"][p]["section_ratio_to_" + base] = ratio
    if b and b["wall_s"] and b["section_s"] < 0.5 * b["wall_s"]:
        print(f"  under {base} the MPI section is {100 * b['section_s'] / b['wall_s']:.0f} % of the run: the wall-time "
              "ratio above is mostly start-up and finalize (the explicit policy reserves MPIXSTREAM_STREAMS VCIs at "
              "MPI_Init, 8 by default: fewer for fewer threads per rank: docs/performance.md, what a reserved VCI costs); the section's ratio is what the profile's verdict is about")


def plot(result, policies, eps, path):
    """Two panels: wall time per policy (each run and the median), traffic per endpoint per policy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return pydeps.NO_MATPLOTLIB
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, p in enumerate(policies):
        e = result["policies"][p]
        ax1.scatter([i] * len(e["runs"]), e["runs"], color="tab:gray", s=14, zorder=2)
        if "median" in e:
            ax1.bar(i, e["median"], color=["tab:blue", "tab:red", "tab:green"][i % 3], alpha=0.7, zorder=1)
        else:
            ax1.text(i, 0, "failed", ha="center", va="bottom", color="tab:red")
    ax1.set_xticks(range(len(policies)), policies)
    ax1.set_ylabel("wall time (s): bar = median, dots = runs")
    ax1.set_title("time per policy (runs without the report)")
    width = 0.8 / max(1, len(policies))
    for i, p in enumerate(policies):
        e = result["policies"][p].get("endpoints", {})
        ax2.bar([j + i * width for j in range(len(eps))], [e.get(n, {}).get("messages", 0) for n in eps], width,
                label=p, color=["tab:blue", "tab:red", "tab:green"][i % 3])
    ax2.set_xticks([j + width * (len(policies) - 1) / 2 for j in range(len(eps))], eps, rotation=30)
    ax2.set_ylabel("messages (sent + received, all ranks)")
    ax2.set_title("traffic per endpoint (report runs)")
    if eps:
        ax2.legend()
    fig.suptitle(result["command"][:110], fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    return None


if __name__ == "__main__":
    sys.exit(main())

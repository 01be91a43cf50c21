#!/usr/bin/env python3
"""Plots benches/paper.sh's results: message rate vs threads per variant, and (with --report) the
per-endpoint traffic of an mpixstream report JSON (docs/report.schema.json).

  scripts/plot.py results/paper.csv [--report results/paper-report.json] [-o results/paper.png]
  scripts/plot.py --report REPORT.json -o endpoints.png        (endpoint traffic only)

Needs matplotlib (scripts/install.sh puts it in .deps/py, install.sh --prefix DIR in DIR/lib/mpixstream/python).
"""
import argparse
import csv
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pydeps  # noqa: E402,F401  (puts matplotlib's folder on sys.path)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "deb-4.0.2": ("Debian MPICH 4.0.2 (global lock)", "tab:gray", "s", ":"),
    "mpich5-implicit-1": ("MPICH 5 implicit, 1 VCI", "tab:blue", "o", "--"),
    "mpich5-nolocal-1": ("MPICH 5 implicit, 1 VCI, MPIR_CVAR_NOLOCAL=1", "tab:olive", "o", ":"),
    "mpich5-implicit-T": ("MPICH 5 implicit, T VCIs", "tab:cyan", "o", "--"),
    "mpich5-native": ("MPICH 5 native stream comms (no lib)", "tab:green", "^", "-"),
    "mpich5-explicit": ("unmodified binary, our explicit policy", "tab:red", "D", "-"),
    "mpich5-mpix-lib": ("MPIX-API binary under our library", "tab:orange", "v", "-"),
    "mpich5-explicit-check": ("explicit + MPIXSTREAM_CHECK=1", "tab:purple", "x", "-."),
    "mpich5-explicit-report": ("explicit + MPIXSTREAM_REPORT", "tab:brown", "+", "-."),
}


def rates(path):
    rows = [r for r in csv.DictReader(open(path)) if r["total_rate"]]
    data = {}
    for r in rows:
        data.setdefault(r["variant"], {}).setdefault(int(r["threads"]), []).append(float(r["total_rate"]))
    return data


def plot_rates(ax, data):
    for v, by_t in data.items():
        label, color, marker, ls = STYLE.get(v, (v, None, "o", "-"))
        ts = sorted(by_t)
        med = [statistics.median(by_t[t]) for t in ts]
        lo = [m - min(by_t[t]) for m, t in zip(med, ts)]
        hi = [max(by_t[t]) - m for m, t in zip(med, ts)]
        ax.errorbar(ts, med, yerr=[lo, hi], label=label, color=color, marker=marker, linestyle=ls, capsize=3)
    ax.set_xlabel("threads per process (T)")
    ax.set_ylabel("total message rate (msg/s, median, bars = min..max)")
    ax.set_yscale("log")
    ax.set_xticks(sorted({t for by_t in data.values() for t in by_t}))
    ax.set_title("8-byte messages, 2 processes x T threads, one communicator per thread")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def plot_endpoints(ax, report):
    r = json.load(open(report))
    labels, sent, recv = [], [], []
    for rank in r["ranks"]:
        for ep in rank["endpoints"]:
            vci = "?" if ep["vci"] is None else ep["vci"]
            labels.append(f"r{rank['rank']} {ep['endpoint']}\nVCI {vci}")
            sent.append(ep["sent"]["messages"])
            recv.append(ep["received"]["messages"])
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], sent, width=0.4, label="messages sent")
    ax.bar([i + 0.2 for i in x], recv, width=0.4, label="messages received")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=6)
    ax.set_ylabel("messages")
    ax.set_title(f"per-endpoint traffic (report: backend {r['backend']}, policy {r['policy']})")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--report")
    ap.add_argument("-o", "--output", default="results/paper.png")
    a = ap.parse_args()
    report = a.report if a.report and os.path.exists(a.report) else None
    panels = [p for p in (a.csv, report) if p]
    if not panels:
        ap.error("nothing to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False)
    k = 0
    if a.csv:
        plot_rates(axes[0][k], rates(a.csv))
        k += 1
    if report:
        plot_endpoints(axes[0][k], report)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot: {a.output}")


if __name__ == "__main__":
    main()

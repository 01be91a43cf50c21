#!/usr/bin/env python3
"""Summarize the per-process reports that ucxprobe.so writes into UCXPROBE_DIR.

  summarize.py DIR                      per-rank table of per-worker counters
  summarize.py DIR --json               {rank: {worker: {sends: .., ...}}}
  summarize.py DIR --get RANK WORKER F  one number (0 if absent), for shell tests

From Python: sys.path.insert(0, "tests/probe"); from summarize import load.
Ranks and worker indices are strings in the JSON (JSON keys); load() returns
ints.  Worker -1 collects sends on endpoints the probe never saw created.
Exit status 2 if DIR has no reports or two reports claim the same rank (use a
fresh directory per run).
"""
import argparse
import glob
import json
import os
import sys

FIELDS = ["sends", "send_bytes", "recvs", "recv_bytes", "eps",
          "ssends", "mrecvs", "am_sends", "am_bytes", "generic_ops"]


class ProbeError(Exception):
    pass


def parse_kv(line):
    return dict(item.split("=", 1) for item in line.split())


def load(directory):
    """Return {rank: {worker: {field: int}}} for all reports in directory."""
    out = {}
    files = sorted(glob.glob(os.path.join(directory, "probe.*.txt")))
    if not files:
        raise ProbeError(f"summarize: no probe.*.txt reports in {directory}")
    for path in files:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        head = parse_kv(lines[0])
        rank = int(head.get("rank", -1))
        if rank < 0:  # rank unknown: keep processes apart by negative pid
            rank = -int(head["pid"])
        if rank in out:
            raise ProbeError(f"summarize: two reports for rank {rank} in {directory}")
        workers = {}
        for line in lines[1:]:
            kv = parse_kv(line)
            w = int(kv.pop("worker"))
            workers[w] = {k: int(v) for k, v in kv.items()}
        out[rank] = workers
    return out


def table(data):
    cols = ["rank", "worker"] + FIELDS
    rows = [cols]
    for rank in sorted(data):
        for w in sorted(data[rank]):
            rows.append([str(rank), str(w)] + [str(data[rank][w].get(f, 0)) for f in FIELDS])
    width = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join("  ".join(c.rjust(width[i]) for i, c in enumerate(r)) for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--get", nargs=3, metavar=("RANK", "WORKER", "FIELD"),
                    help="print one counter")
    a = ap.parse_args()
    try:
        data = load(a.dir)
    except ProbeError as e:
        print(e, file=sys.stderr)
        return 2
    if a.get:
        r, w, f = int(a.get[0]), int(a.get[1]), a.get[2]
        print(data.get(r, {}).get(w, {}).get(f, 0))
    elif a.json:
        print(json.dumps({str(r): {str(w): c for w, c in ws.items()}
                          for r, ws in sorted(data.items())}, indent=1, sort_keys=True))
    else:
        print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

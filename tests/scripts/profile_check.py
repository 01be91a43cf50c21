#!/usr/bin/env python3
"""Checks on the contention profile of mpixstream reports (docs/report.schema.json, each rank's
`profile`), for tests/scripts/profile_pattern.sh and profile_round_robin.sh. Each prints what it
compared and exits 1 on a mismatch.

  profile_check.py overlap REPORT RANK MIN_MS MAX_MS
        the rank's overlap (two or more threads inside one endpoint at once, summed over its endpoints)
        lies in [MIN_MS, MAX_MS]
  profile_check.py outcome REPORT RANK OUTCOME [LINE...]
        the rank's verdict outcome is OUTCOME, and each LINE is part of one of its verdict lines
  profile_check.py apart REPORT RANK THREADS
        THREADS threads called on their own endpoints: at least THREADS endpoints with calls by exactly
        one of those threads each, and no endpoint with two of them
  profile_check.py roundrobin REPORT PROBEDIR NUM_VCIS SEQS CALLS
        tests/scripts/programs/round_robin.c: on every rank, communicator k (id k) was made by CALLS[k]
        with seq SEQS[k] (comma lists), its VCI per the report is SEQS[k] % NUM_VCIS, rank 1's requests
        named that VCI (vci_seen), and the UCX probe's sends of rank 0 and receives of rank 1 on each
        worker w > 0 are the messages of the communicators on VCI w (100 * (k + 1) each), plus fewer than
        SLACK of MPICH's own
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Messages of MPICH's own on one VCI beside the program's (roundrobin).
SLACK = 20
ROOT = os.path.dirname(os.path.dirname(HERE))


def rank_of(path, rank):
    r = json.load(open(path))
    for x in r["ranks"]:
        if x["rank"] == rank:
            return r, x
    raise SystemExit(f"{path}: no rank {rank}")


def overlap(path, rank, lo, hi):
    _, r = rank_of(path, rank)
    eps = r["profile"]["endpoints"]
    ov = sum(e["overlap_ns"] for e in eps) / 1e6
    busy = sum(e["busy_ns"] for e in eps) / 1e6
    detail = "; ".join(f"{e['endpoint']} threads {e['threads']} overlap {e['overlap_ns'] / 1e6:.3f} ms of "
                       f"{e['busy_ns'] / 1e6:.3f} busy, {e['contended_calls']} contended" for e in eps)
    print(f"rank {rank}: overlap {ov:.3f} ms (busy {busy:.3f} ms), expected [{lo}, {hi}]: {detail}")
    return lo <= ov <= hi


def outcome(path, rank, want, lines):
    _, r = rank_of(path, rank)
    v = r["profile"]["verdict"]
    ok = v["outcome"] == want
    print(f"rank {rank}: outcome {v['outcome']}, expected {want}")
    for line in lines:
        found = any(line in x for x in v["lines"])
        print(f"  verdict line with {line!r}: {'found' if found else 'MISSING'}")
        ok &= found
    if not ok:
        print("\n".join("  | " + x for x in v["lines"]))
    return ok


def apart(path, rank, n):
    _, r = rank_of(path, rank)
    eps = r["profile"]["endpoints"]
    busy = [e for e in eps if e["calls"] > 0]
    own = [e for e in busy if len(e["threads"]) == 1]
    shared = [e for e in busy if len(e["threads"]) >= 2 and e["overlap_ns"] > 0]
    print(f"rank {rank}: endpoints " + "; ".join(f"{e['endpoint']} threads {e['threads']} overlap "
                                                 f"{e['overlap_ns'] / 1e6:.3f} ms" for e in busy))
    return len(own) >= n and not shared


def roundrobin(path, probedir, n, seqs, calls):
    sys.path.insert(0, os.path.join(ROOT, "tests", "probe"))
    from summarize import load
    rep = json.load(open(path))
    ok = rep["implicit_vcis"] == n
    print(f"implicit_vcis {rep['implicit_vcis']}, expected {n}")
    want = {k: s % n for k, s in enumerate(seqs)}
    for r in rep["ranks"]:
        comms = {c["id"]: c for c in r["comms"]}
        for k, seq in enumerate(seqs):
            c = comms.get(k)
            if c is None:
                print(f"rank {r['rank']}: no communicator {k}")
                ok = False
                continue
            line = (f"rank {r['rank']} c{k}: made by {c['made_by']} seq {c['seq']} vci {c['vci']} "
                    f"(model {c['vci_model']}, requests {c['vci_seen']}), expected {calls[k]} seq {seq} vci {want[k]}")
            good = c["made_by"] == calls[k] and c["seq"] == seq and c["vci_model"] == want[k] and c["vci"] == want[k]
            if r["rank"] == 1:
                good &= c["vci_seen"] == [want[k]]
            print(line + ("" if good else "  <- MISMATCH"))
            ok &= good
    probe = load(probedir)
    for w in range(1, n):
        # The program's messages on VCI w: those of the communicators the report puts there. Beyond
        # them, a worker carries a few messages of MPICH's own collectives over communicators of that
        # VCI (making a communicator from it, a window's setup and free, the tools library's agreement
        # on seq): fewer than SLACK, while a communicator put on the wrong VCI moves 100 or more.
        expect = sum(100 * (k + 1) for k in want if want[k] == w)
        for who, field in ((0, "sends"), (1, "recvs")):
            got = probe.get(who, {}).get(w, {}).get(field, 0)
            good = expect <= got < expect + SLACK
            print(f"probe: rank {who} {field} on worker {w}: {got}, expected {expect} (+ fewer than {SLACK})"
                  + ("" if good else "  <- MISMATCH"))
            ok &= good
    return ok


def main():
    a = sys.argv[1:]
    if a[:1] == ["overlap"] and len(a) == 5:
        ok = overlap(a[1], int(a[2]), float(a[3]), float(a[4]))
    elif a[:1] == ["outcome"] and len(a) >= 4:
        ok = outcome(a[1], int(a[2]), a[3], a[4:])
    elif a[:1] == ["apart"] and len(a) == 4:
        ok = apart(a[1], int(a[2]), int(a[3]))
    elif a[:1] == ["roundrobin"] and len(a) == 6:
        ok = roundrobin(a[1], a[2], int(a[3]), [int(x) for x in a[4].split(",")], a[5].split(","))
    else:
        print(__doc__)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

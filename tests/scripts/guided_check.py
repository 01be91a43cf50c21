#!/usr/bin/env python3
"""Checks for tests/scripts/guided_policy.sh (the guided policy, docs/policy.md "The guided policy").

  guided_check.py select PROFILE_JSON ID...
        profile.json's guided section selects exactly these identities (none: nothing), with one entry
        per rank, whose selection is among the identities it made
  guided_check.py streams REPORT ID...
        under the guided policy, on every rank: the communicators whose identity is one of ID carry a
        policy stream, each its own, and every other communicator carries none; the guided counters
        say the profile selected that many, and the report names the profile it followed
  guided_check.py nostreams REPORT
        no communicator carries a stream on any rank and the policy attached none (as under implicit)
  guided_check.py mismatch REPORT
        the report says the profile's rank count is not the job's, and nothing got a stream
  guided_check.py unseen REPORT N
        every rank counted exactly N constructors the profile never saw
Prints what it compared; exit status 1 on a mismatch.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def fail(msg):
    print(f"MISMATCH: {msg}")
    return 1


def select(path, ids):
    g = load(path).get("guided")
    if not g:
        return fail(f"{path}: no guided section")
    print(f"select: {g['select']} (expected {sorted(ids)}); made per rank: {[r['made'] for r in g['ranks']]}")
    if sorted(g["select"]) != sorted(ids):
        return fail("the selection differs")
    if len(g["ranks"]) != g["nranks"]:
        return fail("not one entry per rank")
    if any(i not in r["made"] for r in g["ranks"] for i in r["select"]):
        return fail("a rank selects an identity it did not make")
    return 0


def streams(path, ids):
    r = load(path)
    bad = 0
    if r["policy"] != "guided" or not r.get("guided") or not r["guided"]["follows"]:
        return fail(f"policy {r['policy']}, guided {r.get('guided')}")
    for rank in r["ranks"]:
        got = {c["identity"]: c for c in rank["comms"]}
        chosen = [got[i] for i in ids if i in got]
        print(f"rank {rank['rank']}: " + ", ".join(f"{c['identity']}: stream {c['stream']} ({c['origin']}, vci {c['vci']})"
                                                   for c in rank["comms"]))
        if len(chosen) != len(ids):
            bad |= fail(f"rank {rank['rank']}: not every selected communicator is in the report")
        if any(c["stream"] is None or c["origin"] != "policy" for c in chosen):
            bad |= fail(f"rank {rank['rank']}: a selected communicator has no policy stream")
        if len({c["stream"] for c in chosen}) != len(chosen):
            bad |= fail(f"rank {rank['rank']}: selected communicators share a stream")
        others = [c for c in rank["comms"] if c["identity"] not in ids and c["stream"] is not None]
        if others:
            bad |= fail(f"rank {rank['rank']}: others carry a stream: {[c['identity'] for c in others]}")
        g = rank["policy_stats"].get("guided") or {}
        if g.get("selected") != len(ids) or rank["policy_stats"]["attached"] != len(ids):
            bad |= fail(f"rank {rank['rank']}: counters {rank['policy_stats']}")
    return bad


def nostreams(path):
    r = load(path)
    bad = 0
    for rank in r["ranks"]:
        with_stream = [c["identity"] for c in rank["comms"] if c["stream"] is not None]
        attached = rank["policy_stats"]["attached"] if rank["policy_stats"] else None
        print(f"rank {rank['rank']}: communicators {[c['identity'] for c in rank['comms']]}; with a stream "
              f"{with_stream}; attached {attached}")
        if with_stream or attached:
            bad |= fail(f"rank {rank['rank']}: a stream")
    return bad


def mismatch(path):
    r = load(path)
    print(f"nranks {r['nranks']}, guided {r.get('guided')}")
    if not r.get("guided") or r["guided"]["follows"] or r["guided"]["profile_nranks"] == r["nranks"]:
        return fail("the report does not say the rank counts differ")
    return nostreams(path)


def unseen(path, n):
    r = load(path)
    bad = 0
    for rank in r["ranks"]:
        g = rank["policy_stats"].get("guided") or {}
        print(f"rank {rank['rank']} guided counters: {g}")
        if g.get("unseen") != n:
            bad |= fail(f"rank {rank['rank']}: not {n} unseen")
    return bad


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "select":
        return select(args[0], args[1:])
    if cmd == "streams":
        return streams(args[0], args[1:])
    if cmd == "nostreams":
        return nostreams(args[0])
    if cmd == "mismatch":
        return mismatch(args[0])
    if cmd == "unseen":
        return unseen(args[0], int(args[1]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Checks on mpixstream report JSON files (docs/report.schema.json), for tests/scripts/policy_report.sh.

  report_check.py validate REPORT...              schema validation (jsonschema)
  report_check.py policy REPORT explicit|implicit N
        explicit: on every rank, N communicators carry a policy stream, each its own stream, and (native)
        each on its own reserved VCI, reserved_vci_base.. ; implicit: no communicator carries a stream.
  report_check.py probe REPORT PROBEDIR
        the report's per-endpoint counters equal the UCX probe's per-worker counts on every reserved VCI
        (sends, send_bytes, recvs, recv_bytes), and no reserved worker has traffic the report does not
        attribute to one of its streams.
  report_check.py stdabi REPORT explicit|implicit N B
        tests/scripts/programs/std_abi_report.c on the MPI standard ABI (abi_standard_report.sh): abi
        standard, backend serial; on every rank dup_a, dup_b and stream_comm sent and received N
        messages of B bytes each way, dup_a and dup_b one collective; explicit: dup_a and dup_b each on
        a policy stream of its own, implicit: neither on a stream; stream_comm on the application's
        stream; the multiplex communicator mx counted per index (0 and 1: N sent and N received each, on
        that index's stream); every endpoint's sums equal its communicators'.
Prints what it compared; exit status 1 on a mismatch.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(path):
    with open(path) as f:
        return json.load(f)


def validate(paths):
    import jsonschema
    schema = load(os.path.join(ROOT, "docs", "report.schema.json"))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    bad = 0
    for p in paths:
        errors = sorted(v.iter_errors(load(p)), key=lambda e: list(e.path))
        for e in errors[:5]:
            print(f"{p}: {'/'.join(map(str, e.path))}: {e.message}")
        bad += bool(errors)
        if not errors:
            print(f"{p}: valid")
    return bad == 0


def policy(path, which, n):
    r = load(path)
    ok = r["policy"] == which
    if not ok:
        print(f"{path}: policy {r['policy']}, expected {which}")
    for rank in r["ranks"]:
        streamed = [c for c in rank["comms"] if c["stream"] is not None]
        if which == "implicit":
            if streamed:
                print(f"rank {rank['rank']}: {len(streamed)} communicators carry a stream under implicit")
                ok = False
            continue
        pol = [c for c in streamed if c["origin"] == "policy"]
        streams = {c["stream"] for c in pol}
        vcis = [c["vci"] for c in pol]
        pairs = ", ".join(f"stream {c['stream']} -> vci {c['vci']}" for c in sorted(pol, key=lambda c: c["stream"]))
        line = f"rank {rank['rank']}: {len(pol)} policy communicators: {pairs}"
        if len(pol) != n or len(streams) != n:
            ok = False
            line += f"  <- expected {n} on {n} distinct streams"
        if r["backend"] == "native":
            base = r["reserved_vci_base"]
            if None in vcis or len(set(vcis)) != n or min(vcis) < base or max(vcis) >= base + r["pool"]:
                ok = False
                line += f"  <- expected {n} distinct reserved VCIs in {base}..{base + r['pool'] - 1}"
        print(line)
    return ok


def probe(path, probedir):
    sys.path.insert(0, os.path.join(ROOT, "tests", "probe"))
    from summarize import load as load_probe
    r = load(path)
    p = load_probe(probedir)
    base = r["reserved_vci_base"]
    ok = True
    for rank in r["ranks"]:
        k = rank["rank"]
        workers = p.get(k, {})
        attributed = set()
        for ep in rank["endpoints"]:
            if ep["stream"] is None:
                continue
            v = ep["vci"]
            if v is None:
                print(f"rank {k} {ep['endpoint']}: no VCI in the report")
                ok = False
                continue
            attributed.add(v)
            w = workers.get(v, {})
            ours = (ep["sent"]["messages"], ep["sent"]["bytes"], ep["received"]["messages"], ep["received"]["bytes"])
            theirs = (w.get("sends", 0), w.get("send_bytes", 0), w.get("recvs", 0), w.get("recv_bytes", 0))
            same = ours == theirs
            ok &= same
            print(f"rank {k} {ep['endpoint']:>9} vci {v}: report sent {ours[0]}/{ours[1]} B recv {ours[2]}/{ours[3]} B"
                  f" | probe worker {v}: sends {theirs[0]}/{theirs[1]} B recvs {theirs[2]}/{theirs[3]} B"
                  f" {'OK' if same else 'MISMATCH'}")
        for v, w in sorted(workers.items()):
            if v >= base and v not in attributed and (w.get("sends", 0) or w.get("recvs", 0)):
                print(f"rank {k}: reserved worker {v} has traffic the report does not attribute: {w}")
                ok = False
    return ok


def stdabi(path, which, n, b):
    r = load(path)
    bad = []
    want = {"messages": n, "bytes": n * b}
    for key, value in (("abi", "standard"), ("backend", "serial"), ("policy", which)):
        if r.get(key) != value:
            bad.append(f"{key} {r.get(key)!r}, expected {value!r}")
    if len(r["ranks"]) != r["nranks"]:
        bad.append(f"{len(r['ranks'])} ranks reported, nranks {r['nranks']}")
    for rank in r["ranks"]:
        k = rank["rank"]
        by = {}
        for c in rank["comms"]:
            by.setdefault(c["name"], []).append(c)
        streams = {}
        for name in ("dup_a", "dup_b", "stream_comm"):
            cs = by.get(name, [])
            if len(cs) != 1:
                bad.append(f"rank {k}: {len(cs)} records named {name}")
                continue
            c = cs[0]
            for field in ("sent", "received"):
                if c[field] != want:
                    bad.append(f"rank {k} {name}: {field} {c[field]}, expected {want}")
            if name != "stream_comm" and c["collectives"] != 1:
                bad.append(f"rank {k} {name}: {c['collectives']} collectives, expected 1")
            if name == "stream_comm":
                if c["stream"] is None or c["origin"] != "user":
                    bad.append(f"rank {k} stream_comm: stream {c['stream']} origin {c['origin']}, expected the application's")
            elif which == "explicit":
                if c["stream"] is None or c["origin"] != "policy":
                    bad.append(f"rank {k} {name}: stream {c['stream']} origin {c['origin']}, expected a policy stream")
            elif c["stream"] is not None or c["origin"] != "none":
                bad.append(f"rank {k} {name}: stream {c['stream']} origin {c['origin']}, expected none")
            streams[name] = c["stream"]
        if which == "explicit" and len({streams.get(x) for x in ("dup_a", "dup_b", "stream_comm")}) != 3:
            bad.append(f"rank {k}: dup_a, dup_b and stream_comm do not have three distinct streams: {streams}")
        mx = {c["multiplex"]["index"]: c for c in by.get("mx", []) if c["multiplex"] is not None}
        if sorted(mx) != [0, 1]:
            bad.append(f"rank {k}: mx records by index {sorted(mx)}, expected [0, 1]")
        for i, c in mx.items():
            for field in ("sent", "received"):
                if c[field] != want:
                    bad.append(f"rank {k} mx[index {i}]: {field} {c[field]}, expected {want}")
            if c["stream"] is None or c["origin"] != "multiplex":
                bad.append(f"rank {k} mx[index {i}]: stream {c['stream']} origin {c['origin']}")
        if len(mx) == 2 and mx[0]["stream"] == mx[1]["stream"]:
            bad.append(f"rank {k}: mx's two indices on one stream")
        ids = {c["id"]: c for c in rank["comms"]}
        for e in rank["endpoints"]:
            for field in ("sent", "received"):
                total = {"messages": sum(ids[i][field]["messages"] for i in e["comms"]),
                         "bytes": sum(ids[i][field]["bytes"] for i in e["comms"])}
                if e[field] != total:
                    bad.append(f"rank {k} endpoint {e['endpoint']}: {field} {e[field]} != its communicators' {total}")
            if any(ids[i]["stream"] != e["stream"] for i in e["comms"]):
                bad.append(f"rank {k} endpoint {e['endpoint']}: a communicator of another stream")
    for line in bad:
        print(f"{path}: {line}")
    if not bad:
        print(f"{path}: {which}: every rank's counters exact (N={n}, B={b}), streams as expected")
    return not bad


def main(argv):
    if len(argv) >= 2 and argv[0] == "validate":
        return validate(argv[1:])
    if len(argv) == 5 and argv[0] == "stdabi":
        return stdabi(argv[1], argv[2], int(argv[3]), int(argv[4]))
    if len(argv) == 4 and argv[0] == "policy":
        return policy(argv[1], argv[2], int(argv[3]))
    if len(argv) == 3 and argv[0] == "probe":
        return probe(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return False


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)

#!/usr/bin/env python3
"""The proof on the wire for tests/scripts/hosts_wire.sh: which TCP connections between two simulated
hosts carried each endpoint's traffic, against the traffic report (and the UCX probe).

  wire_check.py DIR own|one [PROBEDIR]

DIR holds one run of tests/scripts/programs/wire_streams.c (the first half of the ranks sends to the
second half, on another host; T threads, one communicator each): rank-R (pid, host), report.json (the
traffic report), and, per host H, listen-H.txt (`ss -tlnpH`) and conn-H.txt (`ss -tinpH`, every
established connection with its byte counters), both read while the job held every connection open.

How a connection is tied to an endpoint, without looking at its bytes: MPICH's netmod opens one
listening socket per endpoint (VCI) of a process when it creates the endpoint, in VCI order, so a
process has exactly as many listeners as VCIs (checked: implicit + pool from the report) and its k-th
listener by file descriptor is VCI k. A connection between the sender and the receiver whose
receiver-side port is the receiver's VCI-v listener (the sender connected to it), or whose sender-side
port is the sender's VCI-v listener, belongs to VCI v.

Checks, for every sender -> receiver pair:
  - own (the explicit policy on the native backend): each of the receiver's stream endpoints (VCI v, m messages, b bytes received) has exactly
    one connection of its VCI carrying its traffic, and nothing else does: the sender's bytes_sent on
    it equals the receiver's bytes_received (each host's own counter) and equals b + h*m + c, with one
    per-message header h and one per-connection handshake c for every stream of the job; connections
    of other VCIs carry less than the smallest stream's bytes (the MPI library's own messages);
  - one (the implicit policy; any policy on the serial backend): every process has one listener per
    implicit VCI, and the VCI-0 connections carry all of the pair's messages (their bytes_sent >= the
    bytes of every endpoint of the receiver in the report);
  - with PROBEDIR (UCX builds), own: each stream's messages and bytes were posted on the sender's worker
    of its VCI (the probe numbers workers in creation order, VCI order), exactly, and no other worker
    but worker 0 (MPICH's own messages) sent anything; one: the probe's worker 0 of the sender posted the report's messages and
    bytes, plus MPICH's own messages (its address exchange at MPI_Init, MPI_Comm_dup, MPI_Barrier: under
    a tenth of the messages, a twentieth of the bytes), and no other worker sent anything.
Prints what it compared; exit status 1 on a mismatch.
"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

USER = re.compile(r'\("[^"]*",pid=(\d+),fd=(\d+)\)')


def endpoint(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def parse_listeners(path):
    """{pid: [(fd, (ip, port)), ...] sorted by fd}"""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) < 6 or f[0] != "LISTEN":
            continue
        local = endpoint(f[3])
        users = USER.findall(line)
        # A socket listed under several processes was inherited from the launcher (Hydra's control
        # port); a process's own endpoints listen on sockets of their own.
        if len(users) == 1:
            pid, fd = users[0]
            out.setdefault(int(pid), []).append((int(fd), local))
    return {pid: sorted(v) for pid, v in out.items()}


def parse_connections(path):
    """[(pid, local, peer, bytes sent, bytes_received)] of established TCP connections; bytes sent less
    the retransmitted ones (a loaded machine drops segments on the bridge now and then)"""
    out, last = [], None
    for line in open(path):
        if not line[:1].isspace():
            f = line.split()
            last = None
            if len(f) >= 5 and f[0] == "ESTAB":
                users = USER.findall(line)
                last = [int(users[0][0]) if users else None, endpoint(f[3]), endpoint(f[4]), 0, 0, 0]
                out.append(last)
        elif last is not None:
            for key, i in (("bytes_sent", 3), ("bytes_received", 4), ("bytes_retrans", 5)):
                m = re.search(key + r":(\d+)", line)
                if m:
                    last[i] = int(m.group(1))
    return [(pid, local, peer, sent - retrans, received) for pid, local, peer, sent, received, retrans in out]


def main(argv):
    if len(argv) not in (2, 3) or argv[1] not in ("own", "one"):
        print(__doc__, file=sys.stderr)
        return False
    d, mode = argv[0], argv[1]
    report = json.load(open(os.path.join(d, "report.json")))
    ranks = {}
    for path in glob.glob(os.path.join(d, "rank-*")):
        pid, host = open(path).read().split()
        ranks[int(path.rsplit("-", 1)[1])] = (int(pid), host)
    hosts = sorted({h for _, h in ranks.values()})
    listeners, conns = {}, []
    for h in hosts:
        listeners.update(parse_listeners(os.path.join(d, f"listen-{h}.txt")))
        conns += [c + (h,) for c in parse_connections(os.path.join(d, f"conn-{h}.txt"))]
    size = report["nranks"]
    # The pool is reserved (one listener per VCI) on the native backend wherever a stream can be made:
    # under the explicit policy, or when the program can create one (wire_streams.c cannot); on Intel
    # MPI's split backend, its thread-split endpoints 1..pool.
    pool = report["pool"] if report["backend"] in ("native", "split") and report["policy"] == "explicit" else 0
    vcis = (report["implicit_vcis"] or 1) + pool
    ok = True

    def vci_of(pid, addr):
        for k, (_, a) in enumerate(listeners.get(pid, [])):
            if a == addr:
                return k
        return None

    for r, (pid, host) in sorted(ranks.items()):
        n = len(listeners.get(pid, []))
        good = n == vcis
        ok &= good
        print(f"rank {r} (pid {pid}, {host}): {n} listening sockets, {vcis} VCIs {'OK' if good else 'MISMATCH'}")
    fits = []  # (messages, payload bytes, wire bytes) of every stream connection, for the common fit
    for s in range(size // 2):
        rcv = s + size // 2
        (spid, shost), (rpid, rhost) = ranks[s], ranks[rcv]
        if shost == rhost:
            print(f"ranks {s} and {rcv} on one host ({shost}): no wire between them")
            ok = False
            continue
        # The pair's connections, each seen from both hosts: sender's side -> receiver's side.
        pair = {}
        for pid, local, peer, sent, received, h in conns:
            if pid == spid:
                pair.setdefault((local, peer), {})["sent"] = sent
            elif pid == rpid:
                pair.setdefault((peer, local), {})["received"] = received
        by_vci = {}
        for (sside, rside), b in pair.items():
            v = vci_of(rpid, rside)
            if v is None:
                v = vci_of(spid, sside)
            by_vci.setdefault(v, []).append((b.get("sent"), b.get("received"), sside, rside))
        rep = next(x for x in report["ranks"] if x["rank"] == rcv)
        streams = [e for e in rep["endpoints"] if e["stream"] is not None and e["received"]["messages"]]
        if mode == "one":
            m = sum(e["received"]["messages"] for e in rep["endpoints"])
            b = sum(e["received"]["bytes"] for e in rep["endpoints"])
            wire = sum(x[0] or 0 for x in by_vci.get(0, []))
            # Connections tied to no listener (None) may carry setup, not the pair's messages.
            rest = max((x[0] or 0 for v, xs in by_vci.items() if v != 0 for x in xs), default=0)
            # A pool reserved but unused (MPICH 4.1's explicit policy keeps its streams on VCI 0) still has
            # its VCIs' connections, made at MPI_Init: allowed, carrying less than one message (`rest`).
            good = m > 0 and wire >= b and (pool > 0 or all(v in (0, None) for v in by_vci)) and rest < b // max(m, 1)
            ok &= good
            print(f"rank {s} -> {rcv}: report {m} msgs {b} B on {len(rep['endpoints'])} endpoint(s) "
                  f"({', '.join(e['endpoint'] + ' vci ' + str(e['vci']) for e in rep['endpoints'])}) | "
                  f"{len(by_vci.get(0, []))} connection(s) of VCI 0 carry {wire} B, the rest at most {rest} B; other VCIs: "
                  f"{sorted(str(v) for v in by_vci if v != 0)} {'OK' if good else 'MISMATCH'}")
            continue
        used = set()
        for e in streams:
            v, m, b = e["vci"], e["received"]["messages"], e["received"]["bytes"]
            used.add(v)
            carrying = [x for x in by_vci.get(v, []) if (x[0] or 0) >= b]
            good = len(carrying) == 1 and carrying[0][0] == carrying[0][1]
            ok &= good
            desc = (f"{carrying[0][2][0]}:{carrying[0][2][1]} -> {carrying[0][3][0]}:{carrying[0][3][1]} "
                    f"sent {carrying[0][0]} B, received {carrying[0][1]} B") if carrying else "none"
            print(f"rank {s} -> {rcv}: {e['endpoint']} vci {v}: report {m} msgs {b} B | its connection: {desc} "
                  f"{'OK' if good else 'MISMATCH'}")
            if good:
                fits.append((m, b, carrying[0][0]))
        # The MPI library's own traffic (MPI_Comm_dup, MPI_Barrier) runs on VCI 0: less than any stream's.
        smallest = min((e["received"]["bytes"] for e in streams), default=0)
        for v, xs in sorted(by_vci.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            if v in used:
                continue
            most = max((x[0] or 0) for x in xs)
            good = most < smallest
            ok &= good
            print(f"rank {s} -> {rcv}: VCI {v} (no stream of this pair): {len(xs)} connection(s), at most {most} B "
                  f"{'OK' if good else 'MISMATCH: carries stream traffic'}")
    if mode == "own":
        if len(fits) < 3:
            print(f"too few stream connections for the fit ({len(fits)})")
            return False
        # wire = payload + h * messages + c: h and c from the first two distinct message counts, every
        # connection checked against them.
        (m1, b1, w1), (m2, b2, w2) = sorted(fits)[0], next(f for f in sorted(fits) if f[0] != sorted(fits)[0][0])
        h = ((w2 - b2) - (w1 - b1)) // (m2 - m1)
        c = (w1 - b1) - h * m1
        bad = [f for f in fits if f[2] != f[1] + h * f[0] + c]
        print(f"every stream connection: wire bytes = payload + {h} B per message + {c} B: "
              f"{len(fits) - len(bad)} of {len(fits)} exact {'OK' if not bad else 'MISMATCH ' + str(bad)}")
        ok &= not bad
    if len(argv) == 3:
        sys.path.insert(0, os.path.join(ROOT, "tests", "probe"))
        from summarize import load as load_probe
        probe = load_probe(argv[2])
        for s in range(size // 2):
            rep = next(x for x in report["ranks"] if x["rank"] == s)
            sent = [e for e in rep["endpoints"] if e["sent"]["messages"]]
            if mode == "own":
                # Each stream's messages posted on the worker of its VCI, exactly; no worker of a VCI
                # without a stream sent anything but worker 0 (MPICH's own messages).
                streams = {e["vci"]: e for e in sent if e["stream"] is not None}
                for v, e in sorted(streams.items()):
                    w = probe.get(s, {}).get(v, {})
                    good = w.get("sends", 0) == e["sent"]["messages"] and w.get("send_bytes", 0) == e["sent"]["bytes"]
                    ok &= good
                    print(f"rank {s}: {e['endpoint']} vci {v}: report {e['sent']['messages']} msgs {e['sent']['bytes']} B "
                          f"sent | probe worker {v}: {w.get('sends', 0)} sends {w.get('send_bytes', 0)} B "
                          f"{'OK' if good else 'MISMATCH'}")
                stray = sorted(k for k, w in probe.get(s, {}).items() if k != 0 and k not in streams and w.get("sends"))
                good = bool(streams) and not stray
                ok &= good
                print(f"rank {s}: workers of no stream with sends (worker 0 aside): {stray} {'OK' if good else 'MISMATCH'}")
                continue
            m = sum(e["sent"]["messages"] for e in sent)
            b = sum(e["sent"]["bytes"] for e in sent)
            w = probe.get(s, {}).get(0, {})
            others = {k: v for k, v in probe.get(s, {}).items() if k != 0 and v.get("sends")}
            # Worker 0 also posts MPICH's own messages: the address exchange, MPI_Comm_dup, MPI_Barrier.
            extra_m, extra_b = w.get("sends", 0) - m, w.get("send_bytes", 0) - b
            good = 0 <= extra_m <= m // 10 and 0 <= extra_b <= b // 20 and not others
            ok &= good
            print(f"rank {s}: report {m} msgs {b} B sent | probe worker 0: {w.get('sends', 0)} sends "
                  f"{w.get('send_bytes', 0)} B; other workers with sends: {sorted(others)} {'OK' if good else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)

#!/usr/bin/env bash
# The report and the check see multiplex traffic and persistent requests' starts
# (tests/scripts/programs/report_multiplex.c, 2 ranks, 2 streams each), on Debian 4.0.2 (serial backend:
# the pooled layout, MPICH's implicit pool) and MPICH 5.0.2 (native backend: the streams layout):
#   1. the report JSON validates against docs/report.schema.json;
#   2. each rank's multiplex records ("origin": "multiplex") show exactly the program's indexed messages
#      and bytes: on 5.0.2 per index, each on the stream of that index, and the report's endpoint of
#      that stream carries exactly those; on 4.0.2 all on the record of the communicator's implicit pool;
#   3. MPI_COMM_WORLD's record shows the persistent requests' starts by kind (send, recv, collective)
#      and their messages (a send's at each start, a receive's at each completion);
#   4. on 5.0.2 with MPIXSTREAM_CHECK=all the program passes, and with MPIXTEST_BAD=1 (rank 0: one
#      thread in a named receive on index 0 while another sends from index 0) the check stops the job
#      naming the two threads.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/report_multiplex; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
run() { # tag, env...: one job of the program; its exit status
  local tag=$1; shift
  env MPIXSTREAM_STREAMS=2 "$@" timeout 120 "$root/scripts/mpixrun" -n 2 "$bin" </dev/null \
    >"$out/out-$tag.txt" 2>"$out/err-$tag.txt"
  local rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  return $rc
}
for mpich in deb 5; do
  mpich_select $mpich
  bin=$out/report_multiplex-$mpich
  "$MPICC" -O2 -Wno-stringop-overflow -I"$root/include" "$root/tests/scripts/programs/report_multiplex.c" -o "$bin" \
    -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread || { verdict "compile $mpich" 1; continue; }
  rep=$out/report-$mpich.json; rm -f "$rep"
  run $mpich MPIXSTREAM_REPORT="$rep"
  rc=$?
  grep -q " No Errors" "$out/out-$mpich.txt"
  verdict "mpich=$mpich: the program's messages arrive (rc=$rc)" $(( rc != 0 || $? != 0 ))
  python3 "$root/tests/scripts/report_check.py" validate "$rep"
  verdict "mpich=$mpich: the report validates against docs/report.schema.json" $?
  python3 - "$rep" "$out/out-$mpich.txt" <<'PY'
import json, re, sys
rep = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
native = rep["backend"] == "native"
bad = 0
def say(ok, line):
    global bad
    bad += not ok
    print(("ok   " if ok else "BAD  ") + line)
ranks = {r["rank"]: r for r in rep["ranks"]}
# Indexed traffic: per index on the native backend, all on the implicit pool's record otherwise.
want = {}
for rank, index, way, msgs, byts in re.findall(r"EXPECT multiplex rank (\d+) index (\d+) (sent|received) (\d+) (\d+)", text):
    key = (int(rank), int(index) if native else None, way)
    m, b = want.get(key, (0, 0))
    want[key] = (m + int(msgs), b + int(byts))
say(len(want) > 0, f"expected indexed traffic: {want}")
for (rank, index, way), (msgs, byts) in sorted(want.items(), key=str):
    r = ranks[rank]
    recs = [c for c in r["comms"] if c["origin"] == "multiplex" and c["multiplex"]["index"] == index]
    got = (sum(c[way]["messages"] for c in recs), sum(c[way]["bytes"] for c in recs))
    say(got == (msgs, byts), f"rank {rank} multiplex index {index}: {way} {got}, program {(msgs, byts)}")
    if native:
        streams = {c["stream"] for c in recs}
        say(len(streams) == 1 and None not in streams, f"rank {rank} index {index}: on one stream {streams}")
        ep = [e for e in r["endpoints"] if e["stream"] in streams]
        got = (sum(e[way]["messages"] for e in ep), sum(e[way]["bytes"] for e in ep))
        say(got == (msgs, byts), f"rank {rank} endpoint of stream {streams}: {way} {got}")
# Persistent requests' starts, by kind, on MPI_COMM_WORLD.
starts = re.findall(r"EXPECT starts rank (\d+) send (\d+) recv (\d+) collective (\d+)", text)
say(len(starts) == 2, f"expected starts: {starts}")
for rank, send, recv, coll in starts:
    world = [c for c in ranks[int(rank)]["comms"] if c["name"] == "MPI_COMM_WORLD"]
    got = world[0].get("starts") if world else None
    expect = {"send": int(send), "recv": int(recv), "partitioned": 0, "collective": int(coll)}
    say(got == expect, f"rank {rank} MPI_COMM_WORLD starts {got}, program {expect}")
# Persistent requests' messages: sent at each start, received at each completion.
world_io = re.findall(r"EXPECT world rank (\d+) (sent|received) (\d+) (\d+)", text)
say(len(world_io) == 2, f"expected persistent traffic: {world_io}")
for rank, way, msgs, byts in world_io:
    world = [c for c in ranks[int(rank)]["comms"] if c["name"] == "MPI_COMM_WORLD"]
    got = (world[0][way]["messages"], world[0][way]["bytes"]) if world else None
    say(got == (int(msgs), int(byts)), f"rank {rank} MPI_COMM_WORLD {way} {got}, program {(int(msgs), int(byts))}")
sys.exit(1 if bad else 0)
PY
  verdict "mpich=$mpich: the report shows the indexed messages per stream index, the persistent starts by kind and their messages" $?
  grep -E "multiplex|starts" "$out/err-$mpich.txt" | head -12
done

# The check on multiplex traffic (native backend: an index is its stream's, one thread at a time).
mpich_select 5
bin=$out/report_multiplex-5
run check-good MPIXSTREAM_CHECK=all
rc=$?
grep -q " No Errors" "$out/out-check-good.txt"
verdict "mpich=5 MPIXSTREAM_CHECK=all: the program passes the check (rc=$rc)" $(( rc != 0 || $? != 0 ))
run check-bad MPIXSTREAM_CHECK=all MPIXTEST_BAD=1
rc=$?
grep -q "used by two threads at once" "$out/err-check-bad.txt"
verdict "mpich=5 MPIXSTREAM_CHECK=all MPIXTEST_BAD=1: the check stops two threads on one index (rc=$rc)" $(( rc == 0 || $? != 0 ))
grep "mpixstream check" "$out/err-check-bad.txt" | head -2
exit $failed

#!/usr/bin/env bash
# The endpoint policy on an unmodified program (tests/c/percomm.c: MPI_THREAD_MULTIPLE, one
# MPI_Comm_dup per thread), on both MPICHs:
#   1. MPIXSTREAM_POLICY=implicit and =explicit give identical results;
#   2. the report JSON of each run validates against docs/report.schema.json, and shows the mapping:
#      explicit gives each thread's communicator its own stream (native: its own reserved VCI),
#      implicit none;
#   3. on MPICH 5.0.2 (native backend) the UCX probe sees each communicator's traffic on its own
#      reserved worker under explicit, and the report's per-endpoint counters equal the probe's counts;
#      under implicit the reserved workers carry nothing;
#   4. on MPICH 5.0.2 a policy communicator's nonblocking collectives run on its plain base (also with a
#      Cartesian topology): the report counts none on its stream.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/policy; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
check="python3 $root/tests/scripts/report_check.py"
bash "$root/tests/probe/build.sh" "$out" || { echo "FAIL building the UCX probe"; exit 1; }
T=3
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
export PERCOMM_THREADS=$T

for mpich in deb 5; do
  mpich_select $mpich
  bin=$out/percomm-$mpich
  # Unmodified: compiled and linked against MPICH alone.
  "$MPICC" -O2 -Wno-stringop-overflow "$root/tests/c/percomm.c" -o "$bin" -lpthread || { verdict "compile percomm $mpich" 1; continue; }
  for policy in implicit explicit; do
    rm -f "$out/report-$mpich-$policy.json"
    MPIXSTREAM_POLICY=$policy MPIXSTREAM_REPORT=$out/report-$mpich-$policy.json \
      timeout 60 "$root/scripts/mpixrun" -n 2 "$bin" >"$out/out-$mpich-$policy.txt" 2>"$out/err-$mpich-$policy.txt"
    rc=$?
    grep -q " No Errors" "$out/out-$mpich-$policy.txt"; ok=$?
    verdict "mpich=$mpich policy=$policy runs (rc=$rc)" $(( rc != 0 || ok != 0 ))
    # Each RESULT line by its own shape: Hydra may join two ranks' lines when it forwards their output.
    grep -oE 'RESULT pair [0-9]+ thread [0-9]+ side [a-z]+ messages [0-9]+ sum -?[0-9]+ big [0-9]+' \
      "$out/out-$mpich-$policy.txt" | sort >"$out/results-$mpich-$policy.txt"
  done
  [ -s "$out/results-$mpich-implicit.txt" ] && cmp -s "$out/results-$mpich-implicit.txt" "$out/results-$mpich-explicit.txt"
  rc=$?
  verdict "mpich=$mpich implicit and explicit give identical results ($(wc -l <"$out/results-$mpich-explicit.txt") RESULT lines)" $rc
  $check validate "$out/report-$mpich-implicit.json" "$out/report-$mpich-explicit.json"
  verdict "mpich=$mpich report JSON validates against docs/report.schema.json" $?
  $check policy "$out/report-$mpich-explicit.json" explicit $T
  verdict "mpich=$mpich explicit: $T communicators on $T distinct streams" $?
  $check policy "$out/report-$mpich-implicit.json" implicit 0
  verdict "mpich=$mpich implicit: no streams" $?
  cat "$out/err-$mpich-explicit.txt"
done

# MPICH >= 4.3: a policy communicator's nonblocking collectives run on its plain base, on the implicit
# pool (wrapped_collectives::schedule_comm), that of a dup of a Cartesian communicator too; the report
# charges them to the base. tests/c/check_nbc_reuse.c, 100 rounds of MPI_Ibarrier + MPI_Iallreduce.
mpich_select 5
"$MPICC" -O2 -Wno-stringop-overflow -I"$root/include" -I"$root/tests/c" "$root/tests/c/check_nbc_reuse.c" \
  -o "$out/check_nbc_reuse-5" -lpthread || verdict "compile check_nbc_reuse" 1
for topology in 0 1; do
  rep=$out/report-nbc-$topology.json; rm -f "$rep"
  MPIXSTREAM_POLICY=explicit MPIXTEST_TOPOLOGY=$topology MPIXTEST_ROUNDS=100 MPIXSTREAM_REPORT=$rep \
    timeout 60 "$root/scripts/mpixrun" -n 2 "$out/check_nbc_reuse-5" >"$out/out-nbc-$topology.txt" 2>&1
  verdict "check_nbc_reuse topology=$topology runs (rc=$?)" $?
  python3 - "$rep" <<'PY'
import json, sys
for rank in json.load(open(sys.argv[1]))["ranks"]:
    on_streams = sum(e["collectives"] for e in rank["endpoints"] if e["stream"] is not None)
    implicit = sum(e["collectives"] for e in rank["endpoints"] if e["stream"] is None)
    print(f"  rank {rank['rank']}: collectives on streams {on_streams}, on the implicit pool {implicit}")
    if on_streams != 0 or implicit < 200:
        sys.exit(1)
PY
  verdict "explicit on MPICH 5, topology=$topology: the policy communicator's 200 nonblocking collectives on its base, none on its stream" $?
done
# The same, topology=1, seen by the UCX probe: nothing on the reserved workers (the report does not
# count neighbourhood collectives; the probe sees every message, MPI_Ineighbor_allgather's included).
pd=$out/probe-nbc; rm -rf "$pd"; mkdir -p "$pd"
UCXPROBE_DIR=$pd MPIR_CVAR_NOLOCAL=1 UCX_NET_DEVICES=lo MPIXRUN_PRELOAD_EXTRA=$out/ucxprobe.so \
  MPIXSTREAM_POLICY=explicit MPIXTEST_TOPOLOGY=1 MPIXTEST_ROUNDS=100 \
  timeout 60 "$root/scripts/mpixrun" -n 2 "$out/check_nbc_reuse-5" >"$out/out-probe-nbc.txt" 2>&1
verdict "probe run check_nbc_reuse topology=1 (rc=$?)" $?
reserved=0; implicit=0
for rank in 0 1; do
  implicit=$((implicit + $(python3 "$root/tests/probe/summarize.py" "$pd" --get $rank 0 sends)))
  for w in 1 2 3 4 5 6 7 8; do
    reserved=$((reserved + $(python3 "$root/tests/probe/summarize.py" "$pd" --get $rank $w sends)))
  done
done
verdict "explicit on MPICH 5, Cartesian dup: its collectives, neighbourhood ones included, on the implicit worker ($implicit sends), none on reserved workers ($reserved sends)" $(( reserved != 0 || implicit < 600 ))

# Where the messages went (docs/architecture.md §5): the UCX probe, MPICH 5.0.2, through UCX on loopback.
mpich_select 5
for policy in explicit implicit; do
  pd=$out/probe-$policy; rm -rf "$pd"; mkdir -p "$pd"
  rep=$out/report-probe-$policy.json; rm -f "$rep"
  UCXPROBE_DIR=$pd MPIR_CVAR_NOLOCAL=1 UCX_NET_DEVICES=lo MPIXRUN_PRELOAD_EXTRA=$out/ucxprobe.so \
    MPIXSTREAM_POLICY=$policy MPIXSTREAM_REPORT=$rep \
    timeout 60 "$root/scripts/mpixrun" -n 2 "$out/percomm-5" >"$out/out-probe-$policy.txt" 2>&1
  verdict "probe run policy=$policy (rc=$?)" $?
  python3 "$root/tests/probe/summarize.py" "$pd"
done
$check probe "$out/report-probe-explicit.json" "$out/probe-explicit"
verdict "explicit on MPICH 5: each communicator's traffic on its own reserved worker, report counters = probe counts" $?
# Implicit: the reserved workers (1..8) carry nothing; everything is on worker 0.
reserved=0
for rank in 0 1; do for w in 1 2 3 4 5 6 7 8; do
  n=$(python3 "$root/tests/probe/summarize.py" "$out/probe-implicit" --get $rank $w sends)
  reserved=$((reserved + n))
done; done
verdict "implicit on MPICH 5: no traffic on reserved workers ($reserved sends)" $(( reserved != 0 ))
$check validate "$out/report-probe-explicit.json" "$out/report-probe-implicit.json" >/dev/null
verdict "probe-run reports validate" $?

exit $failed

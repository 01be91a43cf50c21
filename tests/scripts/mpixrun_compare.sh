#!/usr/bin/env bash
# mpixrun --compare on a plain MPI program (tests/scripts/programs/two_comms.c: two MPI_Comm_dup's of
# MPI_COMM_WORLD, N ping-pongs on each), on MPICH 5.0.2 (native) and Debian 4.0.2 (serial):
#   1. it exits 0, prints a median [min..max] per policy and the explicit/implicit ratio, and writes
#      compare.json (R timed runs per policy, the ratio) and a PNG;
#   2. the per-endpoint traffic is exact: implicit carries all 8N messages on MPICH's implicit
#      endpoint; explicit carries 4N on each of two streams and none on the implicit endpoint;
#   3. the timed runs carry neither the tools library nor the report, even with MPIXSTREAM_REPORT set
#      by the user; the report runs do;
#   4. a program that fails under one policy is reported as FAILED with its exit status and first
#      error line, no ratio is given, and mpixrun exits 1;
#   5. on Intel MPI (where installed), `--policies implicit,explicit:split`: Intel's implicit mode
#      against the explicit policy on its thread-split endpoints, the ratio, and exact traffic: 8N on
#      endpoint 0 (vci 0) under implicit, 4N on each of two streams on endpoints 1 and 2 under
#      explicit:split, the report saying backend split.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/compare-test
rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
N=2000 R=2

for mpich in 5 deb; do
  mpich_select $mpich
  bin=$out/two_comms-$mpich
  "$MPICC" -O2 "$root/tests/scripts/programs/two_comms.c" -o "$bin" || { verdict "[$mpich] compile two_comms" 1; continue; }
  d=$out/$mpich
  MPIXSTREAM_REPORT=1 timeout 300 "$root/scripts/mpixrun" --compare --reps $R --out "$d" --timeout 60 --mpich $mpich \
    -n 2 "$bin" $N >"$out/$mpich.txt" 2>"$out/$mpich.err"
  rc=$?
  sed 's/^/    | /' "$out/$mpich.txt"
  verdict "[$mpich] mpixrun --compare exits 0" $rc
  grep -Eq '^implicit +[0-9.]+  \[[0-9.]+ \.\. [0-9.]+\]' "$out/$mpich.txt" &&
    grep -Eq '^explicit +[0-9.]+  \[[0-9.]+ \.\. [0-9.]+\] +[0-9.]+$' "$out/$mpich.txt" &&
    grep -q '^explicit takes [0-9.]*x the wall time of implicit' "$out/$mpich.txt"
  verdict "[$mpich] table: median [min..max] per policy and the ratio" $?
  python3 - "$d/compare.json" "$N" "$R" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); n = int(sys.argv[2]); r = int(sys.argv[3])
imp, exp = c["policies"]["implicit"], c["policies"]["explicit"]
errors = []
for name, p in (("implicit", imp), ("explicit", exp)):
    if len(p["runs"]) != r or p["statuses"] != [0] * r: errors.append(f"{name}: runs {p['runs']} statuses {p['statuses']}")
    if not p["min"] <= p["median"] <= p["max"]: errors.append(f"{name}: median outside [min, max]")
if abs(exp["ratio_to_implicit"] - exp["median"] / imp["median"]) > 1e-9: errors.append("ratio")
ie, ee = imp["endpoints"], exp["endpoints"]
if set(ie) != {"implicit"} or ie["implicit"]["messages"] != 8 * n:
    errors.append(f"implicit policy endpoints: {ie}")
if ee.get("implicit", {}).get("messages", 0) != 0 or sorted(k for k in ee if k != "implicit") != ["stream 0", "stream 1"] \
        or any(ee[k]["messages"] != 4 * n for k in ("stream 0", "stream 1")):
    errors.append(f"explicit policy endpoints: {ee}")
print("\n".join(errors) or "json ok")
sys.exit(1 if errors else 0)
PY
  verdict "[$mpich] compare.json: $R timed runs per policy, the ratio, exact per-endpoint traffic (8N implicit; 4N on each of 2 streams)" $?
  [ "$(head -c 4 "$d/compare.png" | od -An -c | tr -d ' ')" = '211PNG' ]
  verdict "[$mpich] compare.png is a PNG" $?
  ! grep -l 'libmpixstream_tools' "$d"/logs/*-timed-*.log && ! grep -l 'mpixstream report' "$d"/logs/*-timed-*.log &&
    [ "$(grep -l 'preload: .*libmpixstream_tools' "$d"/logs/*-report-*.log | wc -l)" -eq 2 ]
  verdict "[$mpich] timed runs without the tools library and report (user's MPIXSTREAM_REPORT=1 ignored there); report runs with it" $?
done

# Intel MPI: its implicit mode against the explicit policy on its thread-split endpoints.
if [ -x "$root/.deps/impi/bin/mpicc" ]; then
  mpich_select impi
  bin=$out/two_comms-impi
  d=$out/impi
  if "$MPICC" -O2 "$root/tests/scripts/programs/two_comms.c" -o "$bin"; then
    timeout 300 "$root/scripts/mpixrun" --compare --reps $R --policies implicit,explicit:split --out "$d" \
      --timeout 60 --mpich impi -n 2 "$bin" $N >"$out/impi.txt" 2>"$out/impi.err"
    rc=$?
    [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
    sed 's/^/    | /' "$out/impi.txt"
    [ $rc -eq 0 ] && grep -q '^explicit:split takes [0-9.]*x the wall time of implicit' "$out/impi.txt"
    verdict "[impi] mpixrun --compare --policies implicit,explicit:split exits 0 with the ratio (exit $rc)" $?
    python3 - "$d/compare.json" "$N" "$R" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); n = int(sys.argv[2]); r = int(sys.argv[3])
imp, exp = c["policies"]["implicit"], c["policies"]["explicit:split"]
errors = []
for name, p in (("implicit", imp), ("explicit:split", exp)):
    if len(p["runs"]) != r or p["statuses"] != [0] * r: errors.append(f"{name}: runs {p['runs']} statuses {p['statuses']}")
if imp.get("backend") != "serial" or exp.get("backend") != "split": errors.append(f"backends {imp.get('backend')}, {exp.get('backend')}")
ie, ee = imp["endpoints"], exp["endpoints"]
if set(ie) != {"implicit"} or ie["implicit"]["messages"] != 8 * n or ie["implicit"]["vci"] != [0]:
    errors.append(f"implicit policy endpoints: {ie}")
if ee.get("implicit", {}).get("messages", 0) != 0 or sorted(k for k in ee if k != "implicit") != ["stream 0", "stream 1"] \
        or any(ee[k]["messages"] != 4 * n for k in ("stream 0", "stream 1")) \
        or sorted(ee["stream 0"]["vci"] + ee["stream 1"]["vci"]) != [1, 2]:
    errors.append(f"explicit:split endpoints: {ee}")
print("\n".join(errors) or "json ok")
sys.exit(1 if errors else 0)
PY
    verdict "[impi] compare.json: backends serial and split, 8N on endpoint 0 under implicit, 4N on each of endpoints 1 and 2 under explicit:split" $?
  else
    verdict "[impi] compile two_comms" 1
  fi
else
  echo "SKIP [impi]: no Intel MPI (scripts/install.sh --mpich impi)"
fi

# A program that fails under the explicit policy only.
mpich_select 5
d=$out/fail
timeout 300 "$root/scripts/mpixrun" --compare --reps 1 --out "$d" --timeout 60 --mpich 5 \
  -n 2 "$out/two_comms-5" 100 --fail-if-explicit >"$out/fail.txt" 2>"$out/fail.err"
rc=$?
bash "$root/scripts/shm_cleanup.sh"
sed 's/^/    | /' "$out/fail.txt"
[ $rc -eq 1 ] && grep -q '^explicit *FAILED: exit status [1-9][0-9]* .*deliberate failure under the explicit policy' "$out/fail.txt" &&
  grep -Eq '^implicit +[0-9.]+  \[' "$out/fail.txt" && ! grep -q 'explicit takes' "$out/fail.txt" &&
  grep -q 'no ratio for explicit' "$out/fail.txt"
verdict "a failure under one policy: exit status and first error line instead of a ratio, mpixrun exits 1 (got $rc)" $?
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); f=c['policies']['explicit']['failed']; sys.exit(0 if f['status']!=0 and 'deliberate' in f['first_error_line'] and 'ratio_to_implicit' not in c['policies']['explicit'] else 1)" "$d/compare.json"
verdict "compare.json records the failure" $?

exit $failed

#!/usr/bin/env bash
# The guided policy against implicit and explicit (docs/policy.md, "The guided policy"): `mpixrun --compare
# --policies implicit,explicit,guided` (its profile run first, then REPS timed runs per policy,
# alternating) on the profile tests' programs, MPICH 5.0.2, 2 ranks:
#   paper T=2    benches/paper_msgrate.c, 2 threads each on its own dup (threads meet: guided selects both)
#   paper T=1    the same with 1 thread (single-threaded: guided selects nothing)
#   imb biband   benches/imb_mt.c 2 biband (threads meet on their dups)
#   select       tests/scripts/programs/guided_select.c (two dups threads meet on, a split and its dup
#                used by the main thread alone: guided selects the two dups)
# For each: the wall time per policy (median [min..max] of REPS runs, mpixrun --compare's figure) and,
# for the benchmarks, their own figure from the timed runs' output (the message rate: median of REPS).
#   benches/guided_policy.sh [REPS=5] [OUT=build/guided_bench]
# Extra arguments for the guided runs' pool: GUIDED_STREAMS=N sets MPIXSTREAM_STREAMS=N for every policy's
# runs (the pool the guided policy needs; until the pool is sized from `policy::guided::streams_wanted`
# every policy reserves MPIXSTREAM_STREAMS' default).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
reps=${1:-5}
out=${2:-$root/build/guided_bench}
mpich_select 5 || { echo "benches/guided_policy.sh: MPICH 5.0.2 is needed (scripts/install.sh)"; exit 2; }
rm -rf "$out"; mkdir -p "$out"
"$MPICC" -O2 -Wno-stringop-overflow "$root/benches/paper_msgrate.c" -o "$out/paper_msgrate" -lpthread || exit 1
"$MPICC" -O2 -Wno-stringop-overflow "$root/benches/imb_mt.c" -o "$out/imb_mt" -lpthread || exit 1
"$MPICC" -O2 "$root/tests/scripts/programs/guided_select.c" -o "$out/guided_select" -lpthread || exit 1
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
[ -n "${GUIDED_STREAMS:-}" ] && export MPIXSTREAM_STREAMS=$GUIDED_STREAMS

# name | program and arguments | the figure in its RESULT line (key=value; empty: wall time only)
while IFS='|' read -r name args figure; do
  dir=$out/$name
  # shellcheck disable=SC2086
  timeout 900 "$root/scripts/mpixrun" --compare --reps "$reps" --policies implicit,explicit,guided --timeout 120 \
    --out "$dir" -n 2 $args >"$dir.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  echo "== $name: mpixrun --compare --reps $reps --policies implicit,explicit,guided -n 2 $args (exit $rc)"
  grep -E '^(policy|implicit|explicit|guided) ' "$dir.txt" | head -4
  grep '^mpixrun --compare: the guided policy' "$dir.txt"
  [ -n "$figure" ] || continue
  python3 - "$dir/runs.tsv" "$figure" <<'EOF'
import csv, re, statistics, sys
runs, key = sys.argv[1], sys.argv[2]
vals = {}
for r in csv.DictReader(open(runs), delimiter="\t"):
    if r["kind"] != "timed":
        continue
    m = re.search(rf"\b{re.escape(key)}=([0-9.]+)", open(r["log"]).read())
    if m:
        vals.setdefault(r["policy"], []).append(float(m.group(1)))
best = None
for p, v in vals.items():
    print(f"  {key} {p:<9} median {statistics.median(v):14.1f}  [{min(v):.1f} .. {max(v):.1f}]  ({len(v)} runs)")
EOF
done <<EOF
paper-T2|$out/paper_msgrate 2 8 1.0 0.2|total_rate
paper-T1|$out/paper_msgrate 1 8 1.0 0.2|total_rate
imb-biband|$out/imb_mt 2 0.5 0.1 biband|biband_MBps
select|$out/guided_select|
EOF

#!/usr/bin/env bash
# What one reserved VCI costs on each MPICH (docs/performance.md, "What a reserved VCI costs"): a
# barrier-only program (benches/pool_cost.c), 2 ranks on one node, WITHOUT mpixstream, MPICH's own
# MPIR_CVAR_CH4_RESERVE_VCIS = 0, 1, 2, 4, 8; sizes alternating, REPS runs each. Per size: the job's wall
# time (mpiexec to exit) median [min..max], rank 0's mapped /dev/shm bytes and resident memory, and per
# reserved VCI the difference to 0 divided by the size.
#   benches/pool_cost.sh [--mpich LIST] [--reps N]     (default: 4.1.3,4.3.2,5; 7 runs)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
mpichs=4.1.3,4.3.2,5; reps=7; sizes="0 1 2 4 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpichs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    *) echo "usage: benches/pool_cost.sh [--mpich LIST] [--reps N]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench; mkdir -p "$bin"
for m in ${mpichs//,/ }; do
  mpich_select "$m" || { echo "$m: not installed (scripts/install.sh --mpich $m)"; continue; }
  "$MPICC" -O2 "$root/benches/pool_cost.c" -o "$bin/pool_cost-$m" || continue
  rows=$bin/pool_cost-$m.txt; : >"$rows"
  for r in $(seq "$reps"); do
    for n in $sizes; do
      t0=$(date +%s.%N)
      line=$(MPIR_CVAR_CH4_RESERVE_VCIS=$n timeout 120 "$MPIEXEC" -n 2 "$bin/pool_cost-$m" 2>/dev/null </dev/null | tail -n 1)
      t1=$(date +%s.%N)
      echo "$n $r $(echo "$t1 - $t0" | bc) ${line:-failed}" >>"$rows"
    done
  done
  python3 - "$m" "$reps" "$rows" <<'PY'
import statistics, sys
m, reps, path = sys.argv[1], sys.argv[2], sys.argv[3]
by = {}
for line in open(path):
    f = line.split()
    if len(f) >= 7 and f[3] == "shm":
        by.setdefault(int(f[0]), []).append((float(f[2]), int(f[4]), int(f[6])))
print(f"MPICH {m}: 2 ranks, barrier-only program, MPIR_CVAR_CH4_RESERVE_VCIS=N without mpixstream, {reps} runs each")
print(f"  {'N':>2}  {'wall s median [min..max]':<28} {'shm MB':>8} {'rss MB':>8}   per reserved VCI: wall ms, shm MB, rss MB")
base = None
for n in sorted(by):
    w = [x[0] for x in by[n]]; shm = statistics.median(x[1] for x in by[n]) / 1e6; rss = statistics.median(x[2] for x in by[n]) / 1024
    wm = statistics.median(w)
    if n == 0:
        base = (wm, shm, rss)
    per = "" if n == 0 or base is None else f"   {(wm - base[0]) / n * 1000:7.1f} {(shm - base[1]) / n:7.2f} {(rss - base[2]) / n:7.2f}"
    print(f"  {n:>2}  {wm:6.3f} [{min(w):.3f}..{max(w):.3f}]{'':<12} {shm:8.1f} {rss:8.1f}{per}")
PY
done

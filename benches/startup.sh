#!/usr/bin/env bash
# Start-up under the explicit policy against MPICH alone (docs/performance.md, "Programs that cannot
# gain"): the wall time of a job (mpiexec to exit, 2 ranks) of tests/scripts/programs/read_reserve.c,
# which only initialises, reads MPI_T and finalises, built three ways:
#   single        MPI_Init                                  (the policy is inert: no pool)
#   multiple      MPI_Init_thread(MULTIPLE), no constructor (inert: nothing to move, no pool)
#   multiple-dup  the same, naming MPI_Comm_dup             (the pool: the cost of reserving it)
# Variants none / explicit alternate, REPS runs each; medians [min..max] and the difference.
#   benches/startup.sh [--mpich 5|deb|X.Y.Z] [--reps N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
mpich=5; reps=7
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    *) echo "usage: benches/startup.sh [--mpich NAME] [--reps N]" >&2; exit 2 ;;
  esac
done
mpich_select "$mpich"
bin=$root/build/bench; mkdir -p "$bin"
src=$root/tests/scripts/programs/read_reserve.c
"$MPICC" -O2 "$src" -o "$bin/startup-single-$mpich" &&
  "$MPICC" -O2 -DLEVEL=MPI_THREAD_MULTIPLE "$src" -o "$bin/startup-multiple-$mpich" &&
  "$MPICC" -O2 -DLEVEL=MPI_THREAD_MULTIPLE -DUSES_DUP "$src" -o "$bin/startup-multiple-dup-$mpich" || exit 1
rows=$bin/startup-$mpich.txt; : >"$rows"
for r in $(seq "$reps"); do
  for p in single multiple multiple-dup; do
    for v in none explicit; do
      pre=(); [ $v = explicit ] && pre=(LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit)
      t0=$(date +%s.%N)
      env "${pre[@]}" timeout 120 "$MPIEXEC" -n 2 "$bin/startup-$p-$mpich" >/dev/null 2>&1 </dev/null
      rc=$?
      t1=$(date +%s.%N)
      echo "$p $v $rc $(echo "$t1 - $t0" | bc)" >>"$rows"
    done
  done
done
python3 - "$mpich" "$reps" "$rows" <<'PY'
import statistics, sys
mpich, reps, path = sys.argv[1:4]
t = {}
for line in open(path):
    p, v, rc, s = line.split()
    t.setdefault((p, v), []).append(float(s) if rc == "0" else float("nan"))
print(f"start-up, MPICH {mpich}, 2 ranks, {reps} alternating runs: job wall time in s, median [min..max]")
for p in ("single", "multiple", "multiple-dup"):
    n, e = t[(p, "none")], t[(p, "explicit")]
    mn, me = statistics.median(n), statistics.median(e)
    print(f"  {p:<13} none {mn:.3f} [{min(n):.3f}..{max(n):.3f}]  explicit {me:.3f} [{min(e):.3f}..{max(e):.3f}]  difference {me - mn:+.3f}")
PY

#!/usr/bin/env bash
# What a single-threaded program pays for the preloaded library under each policy (issue: "pays only
# where it helps"; docs/performance.md, "Programs that cannot gain"): an 8-byte MPI_Allreduce's latency
# (benches/allreduce_latency.c) and the message rate of 8-byte Isend/Irecv windows (benches/msgrate.c),
# each on a duplicate of MPI_COMM_WORLD, 2 ranks, MPI_Init. Variants, alternating in one run, REPS each:
#   none      MPICH alone
#   implicit  the library, MPIXSTREAM_POLICY=implicit
#   explicit  the library, MPIXSTREAM_POLICY=explicit
#   before    --lib-before PATH under explicit (an earlier build, e.g. one that raised the level)
#   multiple  MPICH alone with MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE (what a raised level costs)
# Prints medians [min..max] and each variant's ratio to `none` (ratio of medians, and the median of the
# back-to-back pair ratios).
#   benches/single_thread.sh [--mpich 5|deb] [--reps N] [--lib-before PATH]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
mpich=5; reps=11; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --lib-before) before=$2; shift 2 ;;
    *) echo "usage: benches/single_thread.sh [--mpich 5|deb] [--reps N] [--lib-before PATH]" >&2; exit 2 ;;
  esac
done
mpich_select "$mpich"
bin=$root/build/bench; mkdir -p "$bin"
"$MPICC" -O2 "$root/benches/allreduce_latency.c" -o "$bin/allreduce_latency-$mpich" &&
  "$MPICC" -O2 -Wno-stringop-overflow "$root/benches/msgrate.c" -o "$bin/msgrate-$mpich" || exit 1
variants="none implicit explicit multiple"
[ -n "$before" ] && variants="none implicit explicit before multiple"
# one VARIANT PROGRAM ARGS...: the program's one number under that variant
one() {
  local v=$1; shift
  case $v in
    none) env timeout 120 "$MPIEXEC" -n 2 "$@" ;;
    implicit) env LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=implicit timeout 120 "$MPIEXEC" -n 2 "$@" ;;
    explicit) env LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit timeout 120 "$MPIEXEC" -n 2 "$@" ;;
    before) env LD_PRELOAD="$before" MPIXSTREAM_POLICY=explicit timeout 120 "$MPIEXEC" -n 2 "$@" ;;
    multiple) env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE timeout 120 "$MPIEXEC" -n 2 "$@" ;;
  esac </dev/null 2>/dev/null | tail -n 1
}
for bench in allreduce msgrate; do
  rows=()
  for r in $(seq "$reps"); do
    for v in $variants; do
      if [ $bench = allreduce ]; then x=$(one $v "$bin/allreduce_latency-$mpich" 100000)
      else x=$(one $v "$bin/msgrate-$mpich" 2000 64); fi
      rows+=("$v $r ${x:-nan}")
    done
  done
  printf '%s\n' "${rows[@]}" >"$bin/single_thread-$bench-$mpich.txt"
  python3 -c '
import statistics, sys
bench, mpich, reps = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}
for line in sys.stdin:
    v, r, x = line.split()
    runs.setdefault(v, {})[int(r)] = float(x)
unit = "us per 8-byte MPI_Allreduce (lower is better)" if bench == "allreduce" else "messages/s, 8-byte Isend/Irecv windows of 64 (higher is better)"
print(f"{bench}: MPICH {mpich}, 2 ranks, MPI_Init, one thread, {reps} alternating repetitions; {unit}")
base = runs["none"]
for v, xs in runs.items():
    vals = [x for x in xs.values() if x == x]
    if not vals:
        print(f"  {v:<9} failed every run"); continue
    m = statistics.median(vals)
    pairs = sorted(xs[r] / base[r] for r in xs if r in base and xs[r] == xs[r] and base[r] == base[r])
    ratio = m / statistics.median([x for x in base.values() if x == x])
    failed = "" if len(vals) == len(xs) else "  %d runs failed" % (len(xs) - len(vals))
    print(f"  {v:<9} median {m:12.4f} [{min(vals):.4f}..{max(vals):.4f}]  /none {ratio:.3f} (pair ratios median {statistics.median(pairs):.3f}){failed}")
' "$bench" "$mpich" "$reps" <"$bin/single_thread-$bench-$mpich.txt"
done

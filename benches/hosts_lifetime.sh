#!/usr/bin/env bash
# Making and freeing multiplex communicators across hosts on Intel MPI's split backend, against what
# MPICH alone pays for the same communicators: tests/c/multiplex_lifetime.c (its loop makes and frees a
# 2-index multiplex communicator per round at 4 ranks, and makes and frees as many MPI_Comm_dup pairs)
# with the library, against tests/mpich_builds/comm_churn_hosts.c WITHOUT it (per round the 8
# communicators the streams layout of such a communicator has, MPI_Comm_dup_with_info with a
# thread_id, and one MPI_Comm_dup, each freed), 2 simulated hosts x 2 ranks (scripts/hosts.sh), ROUNDS
# rounds each, the two alternating, the wall time of each mpiexec. The library's communicator has 6
# dedicated endpoints' communicators and its own dup where the model has 8 and none, plus one allgather
# of the creation's facts (docs/cluster.md, Intel MPI).
#   benches/hosts_lifetime.sh [--reps N (5)] [--rounds R (300)] [--lock FILE]
# --lock FILE: each run under flock FILE (a machine shared with other jobs).
# Prints each run and the medians [min..max] and the median of the per-repetition ratios
# library / MPICH alone. Exits 77 (SKIP) where hosts cannot be made, 1 where a run failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
source tests/scripts/hosts_up.bash
reps=5 rounds=300 lock=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --lock) lock=$2; shift 2 ;;
    *) echo "usage: benches/hosts_lifetime.sh [--reps N] [--rounds R] [--lock FILE]" >&2; exit 2 ;;
  esac
done
hosts_or_skip
hosts_up
mpich_select impi || exit 1
cargo build --release --quiet || exit 1
mkdir -p build/bench
lifetime=$root/build/bench/multiplex_lifetime-impi
"$MPICC" -Wl,--no-as-needed -O2 -Iinclude -Itests/c tests/c/multiplex_lifetime.c -o "$lifetime" \
  -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread -lm || exit 1
build_without_library comm_churn_hosts impi
churn=$bin
mpiexec_across -hosts h1:2,h2:2 || exit 2
[ -n "$lock" ] && exec 9>>"$lock"
# wall VARIANT: seconds of one run (empty where it failed).
wall() {
  local start rc log=build/bench/hosts_lifetime.$1.log
  # The lock is taken before the clock starts (its wait is no part of the run).
  [ -n "$lock" ] && flock 9
  start=$(date +%s.%N)
  case $1 in
    native) env -u LD_PRELOAD MPIR_CVAR_THREAD_SPLIT=1 MPIR_CVAR_THREAD_MAX=21 \
              timeout 300 "${MPIEXEC_ACROSS[@]}" -n 4 "$churn" "$rounds" >"$log" 2>&1 </dev/null ;;
    library) env MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=20 MPIXTEST_ROUNDS="$rounds" \
              timeout 300 scripts/mpixrun --hosts h1:2,h2:2 -n 4 "$lifetime" \
              >"$log" 2>&1 </dev/null ;;
  esac
  rc=$?
  local end; end=$(date +%s.%N)
  [ $rc -ne 0 ] && { scripts/hosts.sh reap; bash scripts/shm_cleanup.sh; }
  [ -n "$lock" ] && flock -u 9
  if [ $rc -ne 0 ]; then
    echo "hosts_lifetime: $1 run failed (exit $rc; log $log)" >&2
    return
  fi
  echo "$end - $start" | bc
}
rows=()
for r in $(seq "$reps"); do
  n=$(wall native); l=$(wall library)
  [ -n "$n" ] && [ -n "$l" ] || exit 1
  echo "repetition $r: MPICH alone $n s, the library $l s"
  rows+=("$n $l")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics as st, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin]
n = [a for a, _ in rows]; l = [b for _, b in rows]
ratios = sorted(b / a for a, b in rows)
print(f"'"$rounds"' rounds, 2 x 2 hosts, Intel MPI: MPICH alone {st.median(n):.2f} s [{min(n):.2f}..{max(n):.2f}], "
      f"the library {st.median(l):.2f} s [{min(l):.2f}..{max(l):.2f}], library / MPICH alone: median ratio "
      f"{st.median(ratios):.3f} [{ratios[0]:.3f}..{ratios[-1]:.3f}] ({len(rows)} repetitions)")
'

#!/usr/bin/env bash
# tests/mpich_builds/stream_requests_hosts.c (tests/c/stream_requests.c's pattern with MPICH's own MPIX
# streams), built with PyPI MPICH 4.1.3's mpicc alone (no mpixstream: neither linked nor preloaded),
# RUNS jobs (default 5) at PLACE (default 2 simulated hosts x 2 ranks, scripts/hosts.sh) over 4.1.3's
# default netmod (ch4:ofi), MPIR_CVAR_CH4_RESERVE_VCIS=${VCIS:-8}, 30 s each; counts the jobs that
# completed (" No Errors"), aborted on "Assertion failed in ofi_events.h" and other outcomes.
# Run under the shared lock:
#   flock /tmp/mpix-heavy.lock timeout 300 bash tests/mpich_builds/stream_requests_hosts.sh
# TRACE=1: each rank names on stderr the step it enters.
# Exits 0 when every job completed, 1 otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-5} place=${PLACE:-h1:2,h2:2} vcis=${VCIS:-8} rounds=${ROUNDS:-1}
build_without_library stream_requests_hosts 4.1.3
across_hosts "$place"
ok=0 assert=0 other=0
for i in $(seq "$runs"); do
  log=$out/stream_requests_hosts-$i.log
  job_across "$log" 30 MPIR_CVAR_CH4_RESERVE_VCIS="$vcis" -- "$rounds"
  rc=$?
  if [ $rc -eq 0 ] && grep -q ' No Errors' "$log"; then ok=$((ok + 1)); r=completed
  elif grep -q 'Assertion failed in .*ofi_events.h' "$log"; then assert=$((assert + 1)); r="aborted: $(grep -m1 -o 'Assertion failed.*' "$log")"
  else other=$((other + 1)); r="other (exit $rc): $(tail -n 2 "$log" | tr '\n' ' ')"; fi
  reap_after_failure $rc
  echo "job $i: $r"
done
echo "MPICH 4.1.3 (ch4:ofi), $place, RESERVE_VCIS=$vcis, $rounds round(s), without mpixstream: $ok of $runs completed, $assert aborted on the ofi_events.h assertion, $other other"
[ $ok -eq $runs ]

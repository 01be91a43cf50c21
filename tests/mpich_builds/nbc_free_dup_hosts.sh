#!/usr/bin/env bash
# tests/mpich_builds/nbc_free_dup_hosts.c built with Intel MPI's mpicc alone (no mpixstream: neither
# linked nor preloaded), RUNS jobs (default 10) at PLACE (default 2 simulated hosts x 2 ranks,
# scripts/hosts.sh), 60 s each; counts the jobs that completed (" No Errors"), crashed (a signal: exit
# status 139 or the launcher's "KILLED BY SIGNAL") and other outcomes (docs/native-defects.md, "Intel
# MPI: a nonblocking collective on a freed communicator beside a thread's MPI_Comm_dup").
#   flock /tmp/mpix-heavy.lock timeout 900 bash tests/mpich_builds/nbc_free_dup_hosts.sh
# Exits 0 when every job completed, 1 otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-10} place=${PLACE:-h1:2,h2:2}
build_without_library nbc_free_dup_hosts impi
across_hosts "$place"
ok=0 crashed=0 other=0
for i in $(seq "$runs"); do
  log=$out/nbc_free_dup_hosts-$i.log
  job_across "$log" 60 --
  rc=$?
  if [ $rc -eq 0 ] && grep -q ' No Errors' "$log"; then ok=$((ok + 1))
  elif [ $rc -eq 139 ] || grep -q 'KILLED BY SIGNAL: 11' "$log"; then crashed=$((crashed + 1))
  else other=$((other + 1)); echo "  job $i: exit $rc: $(tail -n 2 "$log" | tr '\n' ' ')"; fi
  reap_after_failure $rc
done
echo "Intel MPI, $place, without mpixstream: $ok of $runs jobs completed, $crashed crashed (SIGSEGV), $other other"
[ "$ok" -eq "$runs" ]

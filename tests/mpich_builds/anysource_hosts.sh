#!/usr/bin/env bash
# MPICH >= 4.3 over ch4:ucx with ranks on two hosts (UCX's tcp between them, shared memory within): an
# MPI_ANY_SOURCE receive never completes, WITHOUT mpixstream (docs/native-defects.md, "MPI_ANY_SOURCE over
# UCX's tcp between hosts"; tests/c/KNOWN's 5/hosts and 4.3.2/hosts rows: policy_isendrecv's any-source
# exchange, policy_forms' MPI_Dist_graph_create, whose MPICH implementation receives from any source).
# tests/mpich_builds/anysource_hosts.c, built with the build's mpicc alone (neither linked nor preloaded),
# RUNS jobs (default 3) of each variant at 2 simulated hosts x 2 ranks (scripts/hosts.sh), 30 s each:
# "named" (each receive names its source: the control) and "any" (MPI_ANY_SOURCE). MPICH=NAME (default 5).
#   flock /tmp/mpix-heavy.lock timeout 300 bash tests/mpich_builds/anysource_hosts.sh
# Prints the counts; exits 0 when every "named" job got through its rounds (the defect shown or not by
# "any"; on Debian's 4.0.2 a job may then hang in MPI_Finalize, its own defect, counted apart), 1
# otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-3} build=${MPICH:-5}
build_without_library anysource_hosts "$build"
across_hosts h1:2,h2:2
named_ok=0
for variant in named any; do
  ok=0 hung=0 fin=0 other=0
  for i in $(seq "$runs"); do
    log=$out/anysource_hosts-$build-$variant-$i.log
    job_across "$log" 30 -- "$variant"
    rc=$?
    if [ $rc -eq 0 ] && grep -q ' No Errors' "$log"; then ok=$((ok + 1))
    # Every round done, then MPI_Finalize hung: Debian 4.0.2's own defect ("MPI_Finalize over UCX's tcp").
    elif [ $rc -eq 124 ] && grep -q ' No Errors' "$log"; then fin=$((fin + 1))
    elif [ $rc -eq 124 ]; then hung=$((hung + 1))
    else other=$((other + 1)); fi
    reap_after_failure $rc
  done
  echo "MPICH $build, 2 hosts x 2 ranks, without mpixstream, receives from $variant source: $ok of $runs jobs completed, $hung hung in the rounds, $fin hung in MPI_Finalize after them, $other other"
  [ $variant = named ] && named_ok=$((ok + fin))
done
[ "$named_ok" -eq "$runs" ]

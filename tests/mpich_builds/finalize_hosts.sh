#!/usr/bin/env bash
# Debian's MPICH 4.0.2 over UCX's tcp between hosts: MPI_Finalize hangs now and then, WITHOUT mpixstream
# (docs/native-defects.md, "MPI_Finalize over UCX's tcp between hosts"; tests/c/KNOWN's deb/hosts row).
# MPICH=4.1.3 runs PyPI's 4.1.3 over its ch4:ucx (MPIR_CVAR_CH4_NETMOD=ucx) instead, which hangs there too.
# tests/mpich_builds/finalize_hosts.c, built with Debian's mpicc alone (no mpixstream anywhere: neither
# linked nor preloaded), RUNS jobs (default 10) of 2 simulated hosts x 2 ranks (scripts/hosts.sh), 20 s
# each; counts the jobs that printed " No Errors" (every rank past its checks) and then did not finish,
# and the ranks whose "finalized" line came back (a killed job may lose them). Run under the shared lock:
#   flock /tmp/mpix-heavy.lock timeout 300 bash tests/mpich_builds/finalize_hosts.sh
# Exits 0 when every job completed or hung in MPI_Finalize (the defect shown or not), 1 on any other
# outcome, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-10} place=${PLACE:-h1:2,h2:2} build=${MPICH:-deb}
netmod=(); [ "$build" = deb ] || netmod=(MPIR_CVAR_CH4_NETMOD=ucx)
build_without_library finalize_hosts "$build"
across_hosts "$place"
done_ok=0 hung=0 other=0
for i in $(seq "$runs"); do
  log=$out/finalize_hosts-$i.log
  job_across "$log" 20 "${netmod[@]}" --
  rc=$?
  fin=$(grep -c '^finalized ' "$log")
  if [ $rc -eq 0 ] && [ "$fin" -eq "$np" ]; then done_ok=$((done_ok + 1)); r=completed
  elif [ $rc -eq 124 ] && grep -q ' No Errors' "$log"; then hung=$((hung + 1)); r="hung in MPI_Finalize ($fin of $np ranks' \"finalized\" lines came back)"
  else other=$((other + 1)); r="other (exit $rc)"; fi
  reap_after_failure $rc
  echo "job $i: $r"
done
echo "$([ "$build" = deb ] && echo "Debian 4.0.2" || echo "MPICH $build") over UCX's tcp, $place, without mpixstream: $hung of $runs jobs hung in MPI_Finalize, $done_ok completed, $other other"
[ $other -eq 0 ]

#!/usr/bin/env bash
# Over ch4:ofi with libfabric's tcp provider between hosts, WITHOUT mpixstream: a receive waits forever
# once 64 messages from its peer wait unreceived (docs/native-defects.md, "Unexpected messages over
# libfabric's tcp between hosts"; tests/c/KNOWN's 4.1.3/hosts multiplex_stress row). Two programs, built
# with the build's mpicc alone (neither linked nor preloaded), RUNS jobs (default 2) of each variant,
# 30 s each:
#   unexpected_hosts.c at 1 + 1 simulated hosts: "10" unexpected messages before the one waited for (the
#     control), "100", and "100" again with FI_TCP_MAX_SAVED=4096 (the provider's bound raised);
#   pooled_alltoall_hosts.c at 2 x 2: multiplex_alltoall's traffic as mpixstream's pooled layout carries
#     it, each probed message received at once ("now": the control) or held as its MPI_Message meanwhile
#     ("hold", as mpixstream's matching engine did before it bounded the handles it holds).
# MPICH=NAME (default 4.1.3; 5-ofi and impi show it too, impi only in "hold").
#   flock /tmp/mpix-heavy.lock timeout 400 bash tests/mpich_builds/unexpected_hosts.sh
# Prints the counts; exits 0 when every control job completed (the defect shown or not by the others),
# 1 otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-2} build=${MPICH:-4.1.3}
controls_ok=1
# run_variant NAME PLACEMENT NP CONTROL(1|0) [VAR=VALUE...] -- ARGS...
run_variant() {
  local name=$1 where=$2 np=$3 control=$4 envs=(-u LD_PRELOAD) ok=0 hung=0 other=0 i rc log
  shift 4
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mpiexec_across -hosts "$where" || exit 2
  for i in $(seq "$runs"); do
    log=$out/$(basename "$bin")-$name-$i.log
    env "${envs[@]}" timeout 30 "${MPIEXEC_ACROSS[@]}" -n "$np" "$bin" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    if [ $rc -eq 0 ] && grep -q ' No Errors' "$log"; then ok=$((ok + 1))
    elif [ $rc -eq 124 ]; then hung=$((hung + 1))
    else other=$((other + 1)); fi
    [ $rc -ne 0 ] && { "$hosts" reap; bash "$root/scripts/shm_cleanup.sh"; }
  done
  echo "$build, $where, without mpixstream, $(basename "$bin") $name: $ok of $runs jobs completed, $hung hung, $other other"
  [ "$control" = 1 ] && [ $ok -ne "$runs" ] && controls_ok=0
}
build_without_library unexpected_hosts "$build"
run_variant "10 unexpected" h1:1,h2:1 2 1 -- 10
run_variant "100 unexpected" h1:1,h2:1 2 0 -- 100
run_variant "100 unexpected, FI_TCP_MAX_SAVED=4096" h1:1,h2:1 2 0 FI_TCP_MAX_SAVED=4096 -- 100
build_without_library pooled_alltoall_hosts "$build"
run_variant now h1:2,h2:2 4 1 -- 200 now
run_variant hold h1:2,h2:2 4 0 -- 200 hold
[ "$controls_ok" = 1 ]

#!/usr/bin/env bash
# Multiplex communicators across two simulated hosts (scripts/hosts.sh): tests/c/multiplex_n_to_1.c
# (every sender thread of every process to one polling index) and tests/c/multiplex_alltoall.c (every
# index to every index of every other process), at 2 hosts x 2 ranks and uneven, 3 + 1, on MPICH 5.0.2
# over ch4:ofi (libfabric's tcp between hosts) and over ch4:ucx (UCX's tcp between hosts; the pool there
# needs the library's UCX route, tests/scripts/hosts_ucx_init.sh). Each program checks every message
# (payload, status, per-pair order) and exits non-zero on a mismatch; a run past its time limit fails.
# Before the native backend kept a freed stream's VCI turning (shim/src/backend/native.rs, RETIRED),
# multiplex_n_to_1 hung across hosts over ch4:ofi in most runs: the senders' last messages stayed in
# their freed streams' VCIs, which nothing turned any more.
#   RUNS=N (default 1): each case N times in a row; ONLY=GLOB: the cases whose PROGRAM-MPICH-HOSTS
#   (e.g. multiplex_n_to_1-5-ofi-h1:2,h2:2) matches. The run counts in docs/cluster.md come from these.
# Prints PASS/FAIL per case (with its run count); exits 1 if any failed, 77 (SKIP) where hosts cannot
# be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
out=$root/build/hosts-multiplex
mkdir -p "$out"
runs=${RUNS:-1}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
for b in 5-ofi 5; do
  mpich_select $b || exit 1
  for prog in multiplex_n_to_1 multiplex_alltoall; do
    "$MPICC" -Wl,--no-as-needed -O2 -Wall -I"$root/include" -I"$root/tests/c" "$root/tests/c/$prog.c" \
      -o "$out/$prog-$b" -lpthread || { echo "FAIL compile $prog"; exit 1; }
    for where in h1:2,h2:2 h1:3,h2:1; do
      # shellcheck disable=SC2053
      [[ $prog-$b-$where == ${ONLY:-*} ]] || continue
      ok=0
      for ((i = 1; i <= runs; i++)); do
        MPIXTEST_MESSAGES=$([ $prog = multiplex_n_to_1 ] && echo 2000 || echo 50) MPIXSTREAM_STREAMS=8 \
          timeout 60 "$root/scripts/mpixrun" --hosts "$where" -n 4 "$out/$prog-$b" >"$out/$prog-$b-$where.txt" 2>&1 </dev/null
        rc=$?
        if [ $rc -ne 0 ]; then
          tail -3 "$out/$prog-$b-$where.txt"
          "$hosts" reap
          bash "$root/scripts/shm_cleanup.sh"
          break
        fi
        ok=$((ok + 1))
      done
      [ $ok -eq "$runs" ]
      all=$?
      verdict "$prog, MPICH 5.0.2 over ch4:$([ $b = 5 ] && echo ucx || echo ofi), ranks on $where: $ok of $runs runs in a row (last exit $rc)" $all
    done
  done
done
exit $failed

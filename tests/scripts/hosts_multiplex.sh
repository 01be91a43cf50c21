#!/usr/bin/env bash
# Multiplex communicators across two simulated hosts (scripts/hosts.sh): tests/c/multiplex_n_to_1.c
# (every sender thread of every process to one polling index) and tests/c/multiplex_alltoall.c (every
# index to every index of every other process), at 2 hosts x 2 ranks and uneven, 3 + 1, on MPICH 5.0.2
# over ch4:ofi (libfabric's tcp between hosts) and over ch4:ucx (UCX's tcp between hosts; the pool there
# needs the library's UCX route, tests/scripts/hosts_ucx_init.sh), and on Intel MPI's split backend
# (MPIXSTREAM_BACKEND=split; shared memory within a host, ofi's tcp provider between hosts). Each
# program checks every message (payload, status, per-pair order) and exits non-zero on a mismatch; a
# run past 60 s fails, and leaves its ranks' backtraces (gdb, every thread) next to its output.
# Before the native backend kept a freed stream's VCI turning (shim/src/backend/native.rs, RETIRED),
# multiplex_n_to_1 hung across hosts over ch4:ofi in most runs: the senders' last messages stayed in
# their freed streams' VCIs, which nothing turned any more.
#   RUNS=N (default 1): each case N times in a row; ONLY=GLOB: the cases whose PROGRAM-BUILD-HOSTS
#   (BUILD 5-ofi, 5, impi or 5-pool; e.g. multiplex_n_to_1-5-ofi-h1:2,h2:2) matches. The run counts in
#   docs/cluster.md come from these (2026-12-05: every case 50 of 50 in a row, each alone under the lock).
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
# A build's name in the verdicts, and the settings of its cases.
# 5-pool: MPICH 5.0.2 over ch4:ucx with the default pool (no MPIXSTREAM_STREAMS), sized per host from
# its ranks (docs/cluster.md): at 3 + 1 both hosts get the same pool, which ch4:ucx needs; the banner
# (MPIXSTREAM_VERBOSE=1) must show the pool reserved and the same on both hosts.
label() { case $1 in 5-ofi) echo "MPICH 5.0.2 over ch4:ofi" ;; 5) echo "MPICH 5.0.2 over ch4:ucx" ;;
  5-pool) echo "MPICH 5.0.2 over ch4:ucx, default pool" ;; impi) echo "Intel MPI, split backend" ;; esac; }
case_env() { case $1 in impi) echo MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=20 ;; 5-pool) echo MPIXSTREAM_VERBOSE=1 ;;
  *) echo MPIXSTREAM_STREAMS=8 ;; esac; }
# The hosts of a build's cases.
layouts() { case $1 in 5-pool) echo h1:3,h2:1 ;; *) echo h1:2,h2:2 h1:3,h2:1 ;; esac; }
# banner_check LOG: the default pool reserved, the same on both hosts, the ranks where they were put.
banner_check() {
  grep -q 'pool: [1-9][0-9]* streams, each a native stream on its own reserved VCI' "$1" &&
    grep -q '| 4 ranks on 2 hosts (h1: 3, h2: 1) |' "$1" && ! grep -q 'pool by host' "$1"
}
# Messages per pair: the all-to-all on Intel MPI at the test's own 200, where it hung in 3 of 6 runs
# before the helper thread turned the dedicated endpoints of an index whose thread is away
# (split::OWNER; a sender's last bytes stayed in libfabric's queue): 10 of 10 since.
messages() { case $1-$2 in multiplex_n_to_1-*) echo 2000 ;; multiplex_alltoall-impi) echo 200 ;; *) echo 50 ;; esac; }
# run_case PROG BUILD HOSTS LOG: one run, 60 s at most (rc 124 past it). A run still going at 60 s
# leaves every rank's backtraces (gdb, all threads) in LOG.bt.txt before it is stopped.
run_case() {
  local prog=$1 b=$2 where=$3 log=$4 pid i p
  rm -f "$log.bt.txt"
  # shellcheck disable=SC2046
  env $(case_env "$b") MPIXTEST_MESSAGES=$(messages "$prog" "$b") \
    timeout 120 "$root/scripts/mpixrun" --hosts "$where" -n 4 "$out/$prog-$b" >"$log.txt" 2>&1 </dev/null &
  pid=$!
  for ((i = 0; i < 600; i++)); do
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 $pid 2>/dev/null; then
    for p in $(pgrep -f "^$out/$prog-$b\$"); do
      echo "=== rank process $p on $(tr '\0' ' ' </proc/$p/environ | grep -o 'PMI_RANK=[0-9]*' || true)"
      timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)'
    done >"$log.bt.txt"
    kill $pid
    wait $pid
    rc=124
  else
    wait $pid
    rc=$?
  fi
}
for b in 5-ofi 5 impi 5-pool; do
  # Only the builds some selected case needs (a run of one case builds nothing else).
  # shellcheck disable=SC2053
  [[ multiplex_n_to_1-$b-h1:2,h2:2 == ${ONLY:-*} || multiplex_n_to_1-$b-h1:3,h2:1 == ${ONLY:-*} ||
    multiplex_alltoall-$b-h1:2,h2:2 == ${ONLY:-*} || multiplex_alltoall-$b-h1:3,h2:1 == ${ONLY:-*} ]] || continue
  if [ $b = impi ] && [ ! -x "$root/.deps/impi/bin/mpicc" ]; then
    echo "SKIP: Intel MPI cases: not installed (scripts/install.sh --mpich impi)"
    continue
  fi
  mpich_select ${b%-pool} || exit 1
  for prog in multiplex_n_to_1 multiplex_alltoall; do
    # Linked to the library as the C table's programs are (Intel MPI's libmpi has no MPIX symbols).
    "$MPICC" -Wl,--no-as-needed -O2 -g -Wall -I"$root/include" -I"$root/tests/c" "$root/tests/c/$prog.c" \
      -o "$out/$prog-$b" -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread ||
      { echo "FAIL compile $prog"; exit 1; }
    for where in $(layouts $b); do
      # shellcheck disable=SC2053
      [[ $prog-$b-$where == ${ONLY:-*} ]] || continue
      ok=0
      for ((i = 1; i <= runs; i++)); do
        run_case "$prog" $b "$where" "$out/$prog-$b-$where"
        if [ $rc -eq 0 ] && [ $b = 5-pool ]; then
          banner_check "$out/$prog-$b-$where.txt" || { echo "  banner: $(grep -o 'pool: [^|]*|' "$out/$prog-$b-$where.txt") $(grep -o '[0-9]* ranks on [^|]*' "$out/$prog-$b-$where.txt")"; rc=1; }
        fi
        if [ $rc -ne 0 ]; then
          tail -3 "$out/$prog-$b-$where.txt"
          [ -s "$out/$prog-$b-$where.bt.txt" ] && echo "  (the hung ranks' backtraces: $out/$prog-$b-$where.bt.txt)"
          "$hosts" reap
          bash "$root/scripts/shm_cleanup.sh"
          break
        fi
        ok=$((ok + 1))
      done
      [ $ok -eq "$runs" ]
      all=$?
      verdict "$prog, $(label $b), ranks on $where: $ok of $runs runs in a row (last exit $rc)" $all
    done
  done
done
exit $failed

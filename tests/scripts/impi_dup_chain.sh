#!/usr/bin/env bash
# Intel MPI 2021.19's thread-split mode and chains of dups, without the library (tests/impi/dup_chain.c;
# docs/architecture.md section 8): at 4 ranks a dup that stays on its parent's endpoint hangs in its
# collectives now and then (a chain of 3 such dups, nearly always), while a chain whose every dup is on an
# endpoint of its own completes. The library's explicit policy relies on the second: it gives a dup of a
# policy communicator an endpoint of its own. Checks: MODE=distinct, 4 levels, 4 ranks completes in
# 3 runs of 3 (and at 2 ranks). The inheriting chain is run too and its outcome printed (not a check:
# the hang is Intel's, and not certain).
# tests/impi/dup_nbc.c (enqueue_host's last part without the library) is run and printed the same way.
# Needs scripts/install.sh --mpich impi; SKIP without it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
if [ ! -x "$root/.deps/impi/bin/mpicc" ]; then
  echo "SKIP: needs Intel MPI (scripts/install.sh --mpich impi)"
  exit 77
fi
mpich_select impi || exit 1
out=$root/build/impi-dup-chain
mkdir -p "$out"
"$MPICC" -O2 -Wall "$root/tests/impi/dup_chain.c" -o "$out/dup_chain" || { echo "FAIL compile"; exit 1; }
"$MPICC" -O2 -Wall "$root/tests/impi/dup_nbc.c" -o "$out/dup_nbc" || { echo "FAIL compile"; exit 1; }
split=(I_MPI_THREAD_SPLIT=1 I_MPI_THREAD_RUNTIME=generic I_MPI_THREAD_MAX=6)
failed=0
# run MODE LEVELS NP -> 1 if rank 0 printed done
run() {
  env "${split[@]}" MODE=$1 LEVELS=$2 timeout 10 "$MPIEXEC" -n "$3" "$out/dup_chain" >"$out/run.log" 2>&1 </dev/null
  local rc=$?
  [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
  [ $rc -eq 0 ] && grep -q '^done' "$out/run.log"
}
for np in 2 4; do
  ok=0
  for r in 1 2 3; do run distinct 4 "$np" && ok=$((ok + 1)); done
  if [ $ok -eq 3 ]; then echo "PASS dup chain, each dup on an endpoint of its own, $np ranks: $ok of 3 complete"
  else echo "FAIL dup chain, each dup on an endpoint of its own, $np ranks: $ok of 3 complete"; failed=1; fi
done
ok=0
for r in 1 2 3; do run inherit 3 4 && ok=$((ok + 1)); done
echo "INFO dup chain, each dup on its parent's endpoint, 4 ranks: $ok of 3 complete (Intel MPI's hang when fewer)"
# tests/c/enqueue_host.c's last part: an MPI_Iallreduce on a dup of an endpoint's communicator, polled,
# then MPI_Allreduce on that communicator (why its 4-rank impi row leaves that part out).
for twin in 0 1; do
  ok=0
  for r in 1 2 3; do
    env "${split[@]}" TWIN=$twin timeout 10 "$MPIEXEC" -n 4 "$out/dup_nbc" >"$out/run.log" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
    [ $rc -eq 0 ] && grep -q '^done' "$out/run.log" && ok=$((ok + 1))
  done
  echo "INFO nonblocking allreduce on a dup on its parent's endpoint, then a blocking one on the parent, 4 ranks, TWIN=$twin: $ok of 3 complete"
done
exit $failed

#!/usr/bin/env bash
# Which operations on a native MPICH 5.0.2 stream communicator complete, without mpixstream and with it.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"; mpich_select 5
out=$root/build/native_defects; mkdir -p "$out"
"$MPICC" -O2 "$root/tests/native_defects/persistent_and_sendrecv.c" -o "$out/repro"
outcome() {
  if "$@" 2>/dev/null </dev/null | grep -q completed; then echo "completes"; else echo "hangs (killed after 10 s)"; fi
  bash "$root/scripts/shm_cleanup.sh" # the killed ranks' shared memory
}
for op in 0 1 2 3 4 5 6 7 8 9 10 11 12; do
  without=$(MPIR_CVAR_CH4_RESERVE_VCIS=1 outcome timeout 10 "$MPIEXEC" -n 2 "$out/repro" $op)
  with=$(outcome timeout 10 "$root/scripts/mpixrun" -n 2 "$out/repro" $op)
  echo "operation $op: without mpixstream: $without | with mpixstream: $with"
done
# MPI_Cancel of a send on a stream communicator (cancel_send.c): crashes MPICH 5.0.2 at 2 ranks, without
# mpixstream; a receive's cancel completes. With mpixstream nothing changes (we pass MPI_Cancel through).
"$MPICC" -O2 "$root/tests/native_defects/cancel_send.c" -o "$out/cancel_send"
for what in send recv; do
  n=$(MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 20 "$MPIEXEC" -n 2 "$out/cancel_send" $what 2>/dev/null </dev/null | grep -o completed | wc -l)
  bash "$root/scripts/shm_cleanup.sh"
  echo "MPI_Cancel of a $what on a stream communicator, 2 ranks, without mpixstream: $n of 2 ranks completed"
done
# MPI's progress rule (rma_starvation.c): passive RMA on a window of MPI_COMM_WORLD while the target waits
# in an allreduce on a native stream communicator, without mpixstream, on every native build installed.
for b in 4.1.3 4.2.3 4.3.2 5; do
  mpich_select $b 2>/dev/null || continue
  "$MPICC" -O2 "$root/tests/native_defects/rma_starvation.c" -o "$out/rma_starvation-$b" || continue
  n=$(MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 20 "$MPIEXEC" -n 2 "$out/rma_starvation-$b" 2>/dev/null </dev/null | grep -o completed | wc -l)
  bash "$root/scripts/shm_cleanup.sh"
  echo "[$b] passive RMA on MPI_COMM_WORLD while the target waits on a stream communicator, without mpixstream: $n of 2 ranks completed"
done

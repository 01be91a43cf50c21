#!/usr/bin/env bash
# Shows which operations on a native MPICH 5.0.2 stream communicator complete, without mpixstream.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"; mpich_select 5
out=$root/build/native_defects; mkdir -p "$out"
"$MPICC" -O2 "$root/tests/native_defects/persistent_and_sendrecv.c" -o "$out/repro"
for op in 0 1 2 3 4 5 6 7; do
  if MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 10 "$MPIEXEC" -n 2 "$out/repro" $op 2>/dev/null | grep -q completed; then
    echo "operation $op: completes"
  else
    echo "operation $op: hangs (killed after 10 s)"
  fi
done

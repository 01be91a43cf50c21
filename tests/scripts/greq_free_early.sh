#!/usr/bin/env bash
# MPICH 4.1 runs a generalized request's free function inside MPI_Request_free of a request that is not
# complete yet (later versions only after MPI_Grequest_complete). The lean library hands out routed
# MPI_Isendrecv(_replace) on native stream communicators as generalized requests: freed early, their
# state must outlive MPICH's free function until the operation completes (shim/src/native_fixes/greq.rs;
# before, the replace form's receive wrote into freed memory). tests/c/progress_spins.c frees a routed
# MPI_Isendrecv and an MPI_Isendrecv_replace before they complete, from threads (its phases 3 and 4),
# checks the data, and needs no thread to wait for a peer at its exit: run here on MPICH 4.1.3 (the
# build where the free function runs early; scripts/test.sh installs it) at 2 and 4 ranks, and on 5.0.2.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/greq-free-early
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

for name in 4.1.3 5; do
  if ! mpich_select "$name" 2>/dev/null; then
    verdict "[$name] MPICH available (scripts/install.sh --mpich 4.1.3)" 1
    continue
  fi
  bin=$out/progress_spins-$MPICH_NAME
  "$MPICC" -Wl,--no-as-needed -O2 -g -Wall -I"$root/include" -I"$root/tests/c" "$root/tests/c/progress_spins.c" \
    -o "$bin" -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread -lm \
    2>"$out/compile-$MPICH_NAME.log"
  rc=$?
  verdict "[$name] compile" $rc
  [ $rc -eq 0 ] || continue
  for np in 2 4; do
    log=$out/$MPICH_NAME-$np.log
    MPIXSTREAM_STREAMS=4 timeout 60 "$root/scripts/mpixrun" -n $np "$bin" >"$log" 2>&1 </dev/null
    rc=$?
    [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
    grep -q " No Errors" "$log"
    ok=$?
    verdict "[$name] np=$np: freed send-receives complete, their data arrive, no thread waits at its exit (rc=$rc)" \
      $(( rc != 0 || ok != 0 ))
    [ $rc -ne 0 ] && tail -n 8 "$log" | sed 's/^/    | /'
  done
done
exit $failed

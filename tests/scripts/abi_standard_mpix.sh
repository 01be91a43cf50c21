#!/usr/bin/env bash
# The MPIX stream API for a program built for the MPI-5 standard ABI (include/mpix_stream_abi.h; the
# serial model: docs/architecture.md, section 7). tests/scripts/programs/std_abi_mpix.c, built with
# `mpicc -mpi-abi -Iinclude`, checks streams, a stream communicator per thread with its traffic,
# MPIX_Comm_get_stream, MPIX_Stream_progress, a multiplex communicator with indexed messages between every
# pair of (rank, index) and the wildcards, and the errors with their classes and messages (a freed
# stream, on every rank and on one: all fail together; out of streams; bad indices; the enqueue calls
# refused). Runs at 2 and 4 ranks under both MPIXSTREAM_POLICY values, with a smaller pool
# (MPIXSTREAM_STREAMS=4) and with the banner, on MPICH 5.0.2's libmpi_abi.so.1 and on Intel MPI's (each
# SKIPped where absent), preloaded and linked. Without the library the program must fail (its MPIX
# functions are undefined).
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# one NAME: the program built and run against MPI library NAME (scripts/env.sh) if it has the ABI.
one() {
  local name=$1
  mpich_select "$name" || { echo "SKIP [$name]: not installed"; return; }
  if [ ! -e "$MPICH_PREFIX/lib/libmpi_abi.so.1" ] || [ ! -x "$MPICC" ]; then
    echo "SKIP [$name]: no libmpi_abi.so.1 in $MPICH_PREFIX/lib (scripts/install.sh --mpich $name)"
    return
  fi
  local out=$root/build/abi-standard-mpix/$name bin rc
  rm -rf "$out"; mkdir -p "$out"
  bin=$out/std_abi_mpix
  "$MPICC" -mpi-abi -O2 -Wall -Werror -Iinclude tests/scripts/programs/std_abi_mpix.c -o "$bin" -lpthread \
    >"$out/compile.log" 2>&1
  verdict "[$name] std_abi_mpix.c builds with mpicc -mpi-abi against include/mpix_stream_abi.h" $?
  ldd "$bin" | grep 'libmpi_abi\.so\.1' >/dev/null
  verdict "[$name] the program links libmpi_abi.so.1" $?

  # Without the library: the MPIX functions are not defined, the program must not pass.
  timeout 60 "$MPIEXEC" -n 2 "$bin" >"$out/alone.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -ne 0 ] && ! grep -q "No Errors" "$out/alone.log" && grep -q "MPIX stream API is not defined" "$out/alone.log"
  verdict "[$name] without the library the program fails (exit $rc, MPIX API undefined)" $?

  local np policy log
  for np in 2 4; do
    for policy in implicit explicit; do
      log=$out/np$np-$policy.log
      env MPIXSTREAM_POLICY=$policy timeout 120 scripts/mpixrun -n $np "$bin" >"$log" 2>&1 </dev/null
      rc=$?
      [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
      [ $rc -eq 0 ] && grep -q "No Errors" "$log" && ! grep -q 'FAILED\|signal\|Segmentation\|internal error' "$log"
      verdict "[$name np=$np policy=$policy] every check passed (exit $rc)" $?
    done
  done
  log=$out/np2-pool4.log
  env MPIXSTREAM_STREAMS=4 timeout 120 scripts/mpixrun -n 2 "$bin" >"$log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && grep -q "No Errors" "$log" && grep -qF "out of streams: all 4 streams of the pool are in use" "$log"
  verdict "[$name np=2 MPIXSTREAM_STREAMS=4] the pool has 4 streams (exit $rc)" $?
  # Each error checked by the program (class and text) is printed by rank 0: all of them, once.
  [ "$(grep -c '^error ok: ' "$out/np2-implicit.log")" = 18 ]
  verdict "[$name] rank 0 saw all 18 errors with their classes and messages" $?
  # Linked to the library instead of preloaded (as pkg-config's flags do: no ABI library defines the MPIX
  # functions, so a program that calls them links libmpixstream.so, kept by --no-as-needed).
  local libdir
  libdir=$(dirname "${MPIXSTREAM_LIB:-$root/target/release/libmpixstream.so}")
  "$MPICC" -mpi-abi -O2 -Wall -Werror -Iinclude tests/scripts/programs/std_abi_mpix.c -o "$bin-linked" -lpthread \
    -Wl,--no-as-needed -L"$libdir" -lmpixstream -Wl,-rpath,"$libdir" >>"$out/compile.log" 2>&1 &&
    timeout 120 "$MPIEXEC" -n 2 "$bin-linked" >"$out/linked.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && grep -q "No Errors" "$out/linked.log"
  verdict "[$name] linked to libmpixstream.so, not preloaded: every check passed (exit $rc)" $?
  log=$out/verbose.log
  env MPIXSTREAM_VERBOSE=1 timeout 120 scripts/mpixrun -n 2 "$bin" >"$log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && grep -q "No Errors" "$log" &&
    grep -qF "MPI standard ABI 1.0: handles are pointers" "$log" &&
    grep -qF "MPIX stream API on the serial model: 8 streams sharing the library's endpoints, no enqueue" "$log"
  verdict "[$name] the banner says the MPIX API runs on the serial model (exit $rc)" $?
}

one 5
one impi
[ $failed -eq 0 ] && echo "PASS: a standard-ABI program has the MPIX stream API on the serial model"
exit $failed

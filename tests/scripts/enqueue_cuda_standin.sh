#!/usr/bin/env bash
# CUDA queues without a GPU: tests/gpu/*.c against the CPU stand-in for the CUDA driver
# (tests/cuda_standin, built here with cc as libcuda.so.1 and found through LD_LIBRARY_PATH, given to
# these runs only). First tests/gpu/cuda_model.c checks that the stand-in models what docs/enqueue.md
# says (one callback thread per context, a bounded host-function queue whose full launch blocks other
# calls, a destroyed stream's CUDA_ERROR_INVALID_CONTEXT, stream capture). Then, on both MPICHs, 2 ranks,
# each run under a timeout: enqueue_cuda (ordering, Isend/Irecv + Waitall, every collective, pinned
# buffers), enqueue_cuda_staging (every datatype shape, staging-buffer reuse), enqueue_cuda_faults (a
# stream destroyed and a context failing mid-run: MPI errors, no crash), enqueue_cuda_capture (enqueue
# on a capturing stream refused, the capture left valid) and enqueue_cuda_backlog (a backlog of
# receives behind one waiting for its peer: the host-function deadlock an H200 showed), each with stream
# memory operations (MPIXSTREAM_CUDA_SYNC=memops), with host functions (hostfn), and on a device that
# refuses stream memory operations (CUDA_STANDIN_NO_MEMOPS=1: auto falls back to host functions;
# memops must be refused with a clear error); then the 8-byte latency run (300 round trips x 7) with
# host functions, the run that did not finish on the H200.
# MPIXSTREAM_LIB=/path/libmpixstream.so runs the same tests against another build of the library (the
# tests link and preload it): how the reproductions were shown failing on the library before the fix.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
out=$root/build/cuda-standin
mkdir -p "$out/lib"
lib=${MPIXSTREAM_LIB:-$root/target/release/libmpixstream.so}
libdir=$(dirname "$(readlink -f "$lib")")
export MPIXSTREAM_LIB=$libdir/libmpixstream.so
cc=${CC:-$(command -v cc || command -v gcc || command -v clang)}
"$cc" -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -Wl,-soname,libcuda.so.1 tests/cuda_standin/cuda_standin.c \
  tests/cuda_standin/callbacks.c tests/cuda_standin/graphs.c -o "$out/lib/libcuda.so.1" || {
  echo "FAIL: the stand-in does not build"; exit 1; }
tests=(enqueue_cuda enqueue_cuda_staging enqueue_cuda_faults enqueue_cuda_capture enqueue_cuda_backlog)
passed=0
failed=0
check() { # name rc log
  if [ "$2" -eq 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else
    echo "FAIL $1 (rc $2, log $3)"; tail -n 15 "$3" | sed 's/^/    | /'; failed=$((failed + 1)); fi
}
log=$out/cuda_model.log
{ "$cc" -O2 -Wall -Wextra -Werror -pthread tests/gpu/cuda_model.c -o "$out/cuda_model" -ldl &&
  LD_LIBRARY_PATH="$out/lib" timeout 30 "$out/cuda_model"; } >"$log" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] && ! grep -q " No Errors" "$log" && rc=99
check "the stand-in models what docs/enqueue.md says (cuda_model)" $rc "$log"
for mpich in deb 5; do
  mpich_select $mpich
  for t in "${tests[@]}"; do
    "$MPICC" -O2 -g -Wall -Werror -Iinclude -Itests/c -Itests/gpu "tests/gpu/$t.c" -o "$out/$t-$mpich" \
      -L"$libdir" -lmpixstream -Wl,-rpath,"$libdir" -ldl -lpthread -lm \
      >"$out/compile-$t-$mpich.log" 2>&1 || { check "compile $t mpich=$mpich" 1 "$out/compile-$t-$mpich.log"; continue; }
    for mode in "MPIXSTREAM_CUDA_SYNC=memops" "MPIXSTREAM_CUDA_SYNC=hostfn" "CUDA_STANDIN_NO_MEMOPS=1"; do
      log=$out/$t-$mpich-${mode//[^A-Za-z0-9]/_}.log
      env LD_LIBRARY_PATH="$out/lib" MPIXSTREAM_STREAMS=4 "$mode" timeout 60 scripts/mpixrun -n 2 "$out/$t-$mpich" \
        >"$log" 2>&1 </dev/null
      rc=$?
      [ $rc -ne 0 ] && bash scripts/shm_cleanup.sh
      [ $rc -eq 0 ] && ! grep -q " No Errors" "$log" && rc=99
      check "$t mpich=$mpich [$mode]" $rc "$log"
    done
  done
  # A device without stream memory operations and MPIXSTREAM_CUDA_SYNC=memops: a clear refusal.
  log=$out/memops-refused-$mpich.log
  env LD_LIBRARY_PATH="$out/lib" MPIXSTREAM_STREAMS=4 CUDA_STANDIN_NO_MEMOPS=1 MPIXSTREAM_CUDA_SYNC=memops \
    timeout 60 scripts/mpixrun -n 2 "$out/enqueue_cuda-$mpich" >"$log" 2>&1 </dev/null
  rc=$?
  [ $rc -ne 0 ] && bash scripts/shm_cleanup.sh
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "MPIXSTREAM_CUDA_SYNC=memops, but cuStreamWriteValue32 fails on this device (CUDA_ERROR_NOT_SUPPORTED)" "$log"
  check "memops required, device refuses them: MPIX_Stream_create fails clearly, mpich=$mpich" $? "$log"
  # The 8-byte latency run with host functions (on the H200 it did not finish in 120 s).
  log=$out/latency-hostfn-$mpich.log
  env LD_LIBRARY_PATH="$out/lib" MPIXSTREAM_STREAMS=4 MPIXSTREAM_CUDA_SYNC=hostfn MPIXTEST_LATENCY=1 MPIXTEST_LATENCY_ITERS=300 \
    timeout 120 scripts/mpixrun -n 2 "$out/enqueue_cuda-$mpich" >"$log" 2>&1 </dev/null
  rc=$?
  [ $rc -ne 0 ] && bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && ! { grep -q " No Errors" "$log" && grep -q "^latency:" "$log"; } && rc=99
  check "8-byte latency with host functions finishes, mpich=$mpich" $rc "$log"
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

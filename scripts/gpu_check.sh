#!/usr/bin/env bash
# GPU check of the enqueue engine's CUDA queues: tests/gpu/enqueue_cuda.c (ordering, Isend/Irecv +
# Waitall, every collective on device buffers, pinned buffers) on CUDA streams with 2 ranks on one
# GPU, with stream memory operations and with the host-function fallback, on both backends of PyPI's
# MPICH 5 (not GPU-aware: device buffers are staged), then the 8-byte ping-pong latency of
# MPIX_Send/Recv_enqueue against cuStreamSynchronize + MPI_Send/MPI_Recv. Also runs the staging
# (every datatype shape, buffer reuse) and fault (destroyed stream) tests, and the host-queue C test.
# The same CUDA tests run in CI on a CPU stand-in for the driver (tests/scripts/enqueue_cuda_standin.sh);
# this script is what shows them on a real GPU. About 2 minutes; every run is under a timeout. Ends with "N passed, M failed".
#
# Needs: an NVIDIA GPU and driver (libcuda.so.1), a C compiler, the library and MPICH 5. Nothing is
# fetched. A device machine has no cargo and no MPICH, so carry both from a machine that built them:
#   cargo build --release        # here, first
#   device run: command "bash scripts/gpu_check.sh", carry [".deps/mpich5", "target/release/libmpixstream.so"],
#               timeout_s 420    (results also land in $OUT when the device tool sets it)
# Built here against glibc <= 2.34, the library runs on the device image (Ubuntu 24.04).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$root/build/gpu
out=${OUT:-$bin}   # logs only (the device tool brings back at most 8 files from $OUT)
mkdir -p "$bin" "$out"
log=$out/gpu_check.log
: >"$log"
say() { echo "$@" | tee -a "$log"; }
passed=0
failed=0
verdict() { # name rc file
  if [ "$2" -eq 0 ]; then say "PASS $1"; passed=$((passed + 1)); else say "FAIL $1 (rc $2)"; tail -n 20 "$3" | sed 's/^/    | /' | tee -a "$log"; failed=$((failed + 1)); fi
}

say "== machine"
(nvidia-smi -L 2>&1 || echo "nvidia-smi: not found") | tee -a "$log"
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1' && [ ! -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
  say "no libcuda.so.1 on this machine: nothing to check (CUDA-absent behaviour is covered by tests/c/enqueue_errors.c)"
  say "0 passed, 1 failed"
  exit 1
fi
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

lib=$root/target/release/libmpixstream.so
if command -v cargo >/dev/null 2>&1 && [ "${MPIXSTREAM_GPU_NO_BUILD:-0}" != 1 ]; then
  say "== cargo build --release"
  cargo build --release --quiet 2>&1 | tee -a "$log" || { say "0 passed, 1 failed"; exit 1; }
fi
mpich=$root/.deps/mpich5
if [ ! -f "$lib" ] || [ ! -f "$mpich/lib/libmpi.so.12" ]; then
  say "missing $lib or $mpich: build here with cargo build --release and carry target/release/libmpixstream.so and .deps/mpich5"
  say "0 passed, 1 failed"
  exit 1
fi
cc=${CC:-$(command -v gcc || command -v cc || command -v clang)}
say "== build tests with $cc"
build() { # src out
  "$cc" -O2 -g -Iinclude -Itests/c -Itests/gpu -I"$mpich/include" "$1" -o "$2" -L"$root/target/release" -lmpixstream \
    -L"$mpich/lib" -lmpi -Wl,-rpath,"$root/target/release:$mpich/lib" -ldl -lpthread -lm >>"$log" 2>&1
}
build tests/gpu/enqueue_cuda.c "$bin/enqueue_cuda" || { say "FAIL compile enqueue_cuda"; say "0 passed, 1 failed"; exit 1; }
for t in enqueue_cuda_staging enqueue_cuda_faults; do
  build tests/gpu/$t.c "$bin/$t" || { say "FAIL compile $t"; failed=$((failed + 1)); }
done
build tests/c/enqueue_host.c "$bin/enqueue_host" || say "(enqueue_host does not compile here; skipped)"

export PATH=$mpich/bin:$PATH
run() { # name timeout env... -- program args
  local name=$1 t=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=(-genv "${1%%=*}" "${1#*=}"); shift; done
  shift
  local f=$out/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.=-' '_').out
  timeout "$t" "$mpich/bin/mpiexec" -n 2 -genv LD_PRELOAD "$lib" -genv MPIXSTREAM_STREAMS 4 "${envs[@]}" "$@" \
    >"$f" 2>&1 </dev/null
  local rc=$?
  [ $rc -eq 0 ] && ! grep -q " No Errors" "$f" && rc=99
  cat "$f" >>"$log"
  verdict "$name" $rc "$f"
}

say "== CUDA streams"
run "cuda memops native" 90 MPIXSTREAM_CUDA_SYNC=memops -- "$bin/enqueue_cuda"
run "cuda hostfn native" 90 MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/enqueue_cuda"
run "cuda auto serial" 90 MPIXSTREAM_BACKEND=serial -- "$bin/enqueue_cuda"
for t in enqueue_cuda_staging enqueue_cuda_faults; do
  [ -x "$bin/$t" ] || continue
  run "$t memops native" 90 MPIXSTREAM_CUDA_SYNC=memops -- "$bin/$t"
  run "$t hostfn native" 90 MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/$t"
done
say "== latency"
run "cuda latency" 120 MPIXTEST_LATENCY=1 -- "$bin/enqueue_cuda"
grep -A4 '^latency:' "$out"/cuda_latency.out 2>/dev/null | tee -a "$log"
run "cuda latency hostfn" 120 MPIXTEST_LATENCY=1 MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/enqueue_cuda"
grep -A4 '^latency:' "$out"/cuda_latency_hostfn.out 2>/dev/null | tee -a "$log"
if [ -x "$bin/enqueue_host" ]; then
  say "== host queues on this machine"
  run "host queue" 60 -- "$bin/enqueue_host"
fi
say "$passed passed, $failed failed"
[ $failed -eq 0 ]

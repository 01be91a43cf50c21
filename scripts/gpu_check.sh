#!/usr/bin/env bash
# GPU check of the enqueue engine's CUDA queues: tests/gpu/enqueue_cuda.c (ordering, Isend/Irecv +
# Waitall, every collective on device buffers, pinned buffers) on CUDA streams with 2 ranks on one
# GPU, with stream memory operations and with the host-function fallback, on both backends of PyPI's
# MPICH 5 (not GPU-aware: device buffers are staged), then the 8-byte ping-pong latency of
# MPIX_Send/Recv_enqueue against cuStreamSynchronize + MPI_Send/MPI_Recv. Also runs the staging
# (every datatype shape, buffer reuse), fault (destroyed stream), capture (enqueue on a capturing
# stream) and backlog (the host-function deadlock an H200 showed) tests, tests/gpu/cuda_model.c (what
# the driver does where the stand-in models it: reported, for comparison), and the host-queue C test.
# The same CUDA tests run in CI on a CPU stand-in for the driver (tests/scripts/enqueue_cuda_standin.sh);
# this script is what shows them on a real GPU. About 2 minutes; every run is under a timeout. Ends with "N passed, M failed".
#   scripts/gpu_check.sh [--standin DIR] [--build-only]
#     --standin DIR: DIR/libcuda.so.1 (the stand-in) instead of a GPU: a rehearsal
#     --build-only: build the test binaries into GPU_CHECK_BIN and stop (no GPU needed)
# Settings: MPIXSTREAM_LIB (the library), MPICH_DIR (default .deps/mpich5), GPU_CHECK_BIN (where the
# test binaries are built, default build/gpu), GPU_CHECK_NO_BUILD=1 (use the binaries already there:
# scripts/device_check.sh --prepare builds them), GPU_CHECK_LATENCY_ITERS (round trips per latency run).
#
# Needs: an NVIDIA GPU and driver (libcuda.so.1), a C compiler, the library and MPICH 5. Nothing is
# fetched. scripts/device_check.sh runs this script (prebuilt binaries, the library stripped) and the
# thread scaling in one device run. A device machine has no cargo and no MPICH, so carry both from a
# machine that built them:
#   cargo build --release        # here, first
#   device run: command "bash scripts/gpu_check.sh", carry [".deps/mpich5", "target/release/libmpixstream.so"],
#               timeout_s 420    (results also land in $OUT when the device tool sets it)
# Built here against glibc <= 2.34, the library runs on the device image (Ubuntu 24.04).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
standin=""
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --standin) standin=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    *) echo "usage: scripts/gpu_check.sh [--standin DIR] [--build-only]" >&2; exit 2 ;;
  esac
done
bin=${GPU_CHECK_BIN:-$root/build/gpu}
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
if [ $build_only -eq 1 ]; then
  say "(building only)"
elif [ -n "$standin" ]; then
  say "the CPU stand-in for the CUDA driver ($standin/libcuda.so.1), not a GPU: a rehearsal (latencies are not a GPU's)"
  export LD_LIBRARY_PATH=$standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  (nvidia-smi -L 2>&1 || echo "nvidia-smi: not found") | tee -a "$log"
  if ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1' && [ ! -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
    say "no libcuda.so.1 on this machine: nothing to check (CUDA-absent behaviour is covered by tests/c/enqueue_errors.c)"
    say "0 passed, 1 failed"
    exit 1
  fi
  [ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

lib=${MPIXSTREAM_LIB:-$root/target/release/libmpixstream.so}
# GPU_CHECK_NO_BUILD=1: nothing is built (binaries already in GPU_CHECK_BIN are used as they are);
# MPIXSTREAM_GPU_NO_BUILD=1: no cargo build (the test binaries are still built).
nobuild=${GPU_CHECK_NO_BUILD:-0}
if command -v cargo >/dev/null 2>&1 && [ "$nobuild" != 1 ] && [ "${MPIXSTREAM_GPU_NO_BUILD:-0}" != 1 ] &&
  [ -z "${MPIXSTREAM_LIB:-}" ]; then
  say "== cargo build --release"
  cargo build --release --quiet 2>&1 | tee -a "$log" || { say "0 passed, 1 failed"; exit 1; }
fi
mpich=${MPICH_DIR:-$root/.deps/mpich5}
if [ ! -f "$lib" ] || [ ! -f "$mpich/lib/libmpi.so.12" ]; then
  say "missing $lib or $mpich: build here with cargo build --release and carry target/release/libmpixstream.so and .deps/mpich5"
  say "0 passed, 1 failed"
  exit 1
fi
cc=${CC:-$(command -v gcc || command -v cc || command -v clang)}
gpu_tests="enqueue_cuda_staging enqueue_cuda_faults enqueue_cuda_capture enqueue_cuda_backlog"
build() { # src out; with GPU_CHECK_NO_BUILD=1 a binary already there is used as it is
  [ "$nobuild" = 1 ] && [ -x "$2" ] && return 0
  [ -n "$cc" ] || { say "no C compiler and no $2: run scripts/device_check.sh --prepare and carry build/device"; return 1; }
  "$cc" -O2 -g -Iinclude -Itests/c -Itests/gpu -I"$mpich/include" "$1" -o "$2" -L"$(dirname "$lib")" -lmpixstream \
    -L"$mpich/lib" -lmpi -Wl,-rpath,"$(dirname "$lib"):$mpich/lib" -ldl -lpthread -lm >>"$log" 2>&1
}
say "== build tests${cc:+ with $cc}"
build tests/gpu/enqueue_cuda.c "$bin/enqueue_cuda" || { say "FAIL compile enqueue_cuda"; say "0 passed, 1 failed"; exit 1; }
for t in $gpu_tests; do
  build tests/gpu/$t.c "$bin/$t" || { say "FAIL compile $t"; failed=$((failed + 1)); }
done
build tests/c/enqueue_host.c "$bin/enqueue_host" || say "(enqueue_host does not compile here; skipped)"
if [ "$nobuild" != 1 ] || [ ! -x "$bin/cuda_model" ]; then
  "$cc" -O2 -pthread tests/gpu/cuda_model.c -o "$bin/cuda_model" -ldl >>"$log" 2>&1 || say "(cuda_model does not compile here)"
fi
if [ $build_only -eq 1 ]; then
  say "built in $bin"
  [ $failed -eq 0 ]
  exit
fi

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

if [ -x "$bin/cuda_model" ]; then
  say "== the driver where the stand-in models it (tests/gpu/cuda_model.c)"
  f=$out/cuda_model.out
  timeout 30 "$bin/cuda_model" >"$f" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] && ! grep -q " No Errors" "$f" && rc=99
  cat "$f" >>"$log"
  grep -E '^  (seen|ok|FAILED)' "$f"
  verdict "cuda_model (documented behaviour asserted, the rest reported)" $rc "$f"
fi
say "== CUDA streams"
run "cuda memops native" 90 MPIXSTREAM_CUDA_SYNC=memops -- "$bin/enqueue_cuda"
run "cuda hostfn native" 90 MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/enqueue_cuda"
run "cuda auto serial" 90 MPIXSTREAM_BACKEND=serial -- "$bin/enqueue_cuda"
for t in $gpu_tests; do
  [ -x "$bin/$t" ] || continue
  run "$t memops native" 90 MPIXSTREAM_CUDA_SYNC=memops -- "$bin/$t"
  run "$t hostfn native" 90 MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/$t"
done
say "== latency"
iters=${GPU_CHECK_LATENCY_ITERS:-1000}
run "cuda latency" 120 MPIXTEST_LATENCY=1 MPIXTEST_LATENCY_ITERS=$iters -- "$bin/enqueue_cuda"
grep -A4 '^latency:' "$out"/cuda_latency.out 2>/dev/null | tee -a "$log"
run "cuda latency hostfn" 120 MPIXTEST_LATENCY=1 MPIXTEST_LATENCY_ITERS=$iters MPIXSTREAM_CUDA_SYNC=hostfn -- "$bin/enqueue_cuda"
grep -A4 '^latency:' "$out"/cuda_latency_hostfn.out 2>/dev/null | tee -a "$log"
if [ -x "$bin/enqueue_host" ]; then
  say "== host queues on this machine"
  run "host queue" 60 -- "$bin/enqueue_host"
fi
say "$passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# Everything a lent GPU machine (an NVIDIA H200, 16 cores, bare: no network, no cargo, no MPICH) should
# show, in one run of at most 8 minutes, ending with one text table and one PNG in $OUT:
#   1. the GPU tests of scripts/gpu_check.sh (enqueue_cuda with stream memory operations, with host
#      functions and on the serial backend; staging, faults, capture and backlog tests both ways;
#      tests/gpu/cuda_model.c, which reports what the driver does where the stand-in models it; the
#      host queue), and the 8-byte latency both ways (MPIX_Send/Recv_enqueue with memops and with
#      hostfn against cuStreamSynchronize + MPI_Send/MPI_Recv);
#   2. thread scaling, 2 ranks x T threads, T = 1 2 4 8 (16 busy threads on 16 cores: no
#      oversubscription), variants interleaved in each repetition, medians: the paper benchmark
#      (benches/paper_msgrate.c, 8-byte messages) and IMB-MT's shape (benches/imb_mt.sh), each for no
#      library, implicit-T (policy implicit, MPIR_CVAR_CH4_NUM_VCIS=T), native streams (the MPIX binary
#      without the library) and the explicit policy;
#   3. the issue's targets: latency with memops <= 1.05 x and with hostfn <= 1.2 x the baseline;
#      explicit >= 0.8 x linear up to T = 8 and >= 1.2 x implicit-T at T = 8 (met, or missed by how much).
# Without a GPU (a rehearsal, e.g. on the 2-core development machine) the GPU part runs on the CPU stand-in
# for the driver (tests/cuda_standin) and says so, and the scaling part runs on whatever cores there are:
# the table is then a rehearsal of the script, not a measurement of the targets.
#
#   scripts/device_check.sh --prepare   here, first: cargo build, then builds into build/device (the
#                                        library stripped, the GPU tests, the stand-in) and build/bench
#                                        (the benchmarks); prints the carry list with sizes
#   scripts/device_check.sh [--reps N]  the run (N repetitions of the scaling runs, default 3)
# Device run (the device tool, 64 MiB in all travel, 8 paths at most):
#   command "bash scripts/device_check.sh", timeout_s 540,
#   carry ["build/device", "build/bench", ".deps/mpich5"]
# Measured here on 2026-12-04 (du -sh, --prepare prints it): build/device 2.2 MiB (the library stripped of
# its debug info: 15 MiB with it), build/bench 84 KiB, .deps/mpich5 36 MiB, the tracked tree 3.1 MiB:
# about 42 MiB. (.deps is a link to the main checkout: a carried path through a link travels.)
# Rehearsed here (2 cores, no GPU, 2026-12-04): 84 s from start to table (gpu_check.sh on the stand-in
# 11 s, the paper benchmark 31 s, IMB-MT 41 s); on the device the GPU tests take longer (about 2 minutes
# when they ran there before), so about 4 minutes in all, well inside the 8.
# Files in $OUT (at most 8 come back): device_check.txt (the table), device_check.png, device_check.log
# (everything printed), device_check_logs.tar.gz (every run's log).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
reps=3
prepare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) prepare=1; shift ;;
    --reps) reps=$2; shift 2 ;;
    *) echo "usage: scripts/device_check.sh [--prepare] [--reps N]" >&2; exit 2 ;;
  esac
done
dev=$root/build/device
mpich=$root/.deps/mpich5
source scripts/env.sh

if [ $prepare -eq 1 ]; then
  nice -n 10 cargo build --release --quiet || exit 1
  mkdir -p "$dev/lib" "$dev/gpu" "$dev/standin" build/bench
  strip --strip-debug -o "$dev/lib/libmpixstream.so" target/release/libmpixstream.so || exit 1
  MPIXSTREAM_LIB=$dev/lib/libmpixstream.so GPU_CHECK_BIN=$dev/gpu bash scripts/gpu_check.sh --build-only || exit 1
  cc -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -Wl,-soname,libcuda.so.1 tests/cuda_standin/cuda_standin.c \
    tests/cuda_standin/callbacks.c tests/cuda_standin/graphs.c -o "$dev/standin/libcuda.so.1" || exit 1
  mpich_select 5 || exit 1
  for b in "paper-5:benches/paper_msgrate.c:" "paper-5-mpix:benches/paper_msgrate.c:-DUSE_MPIX" \
    "imb_mt-5:benches/imb_mt.c:" "imb_mt-5-mpix:benches/imb_mt.c:-DUSE_MPIX"; do
    IFS=: read -r name src flag <<<"$b"
    "$MPICC" -O2 -Wno-stringop-overflow $flag "$src" -o "build/bench/$name" -lpthread || exit 1
  done
  echo "carry (sizes measured now):"
  du -sh --dereference build/device build/bench "$mpich" | sed 's/^/  /'
  echo "  tracked tree: $(git ls-files -z | du -ch --files0-from=- 2>/dev/null | tail -1 | cut -f1)"
  exit 0
fi

out=${OUT:-$root/results/device}
work=$root/build/device-check
rm -rf "$work"
mkdir -p "$out" "$work"
log=$out/device_check.log
exec > >(tee "$log") 2>&1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
[ -f "$dev/lib/libmpixstream.so" ] && [ -x "$mpich/bin/mpiexec" ] && [ -x build/bench/paper-5 ] || {
  echo "FAILED: run scripts/device_check.sh --prepare where cargo is, and carry build/device, build/bench and .deps/mpich5"
  exit 1
}
export MPIXSTREAM_LIB=$dev/lib/libmpixstream.so
# The prebuilt binaries find the library and MPICH here, wherever the checkout is.
export LD_LIBRARY_PATH=$dev/lib:$mpich/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mpich_select 5 || exit 1
cores=$(nproc)
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
stamp "machine: $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load $(cut -d' ' -f1-3 /proc/loadavg)"
[ $gpu -eq 1 ] && stamp "GPU: $(nvidia-smi -L | head -1)"

# 1. GPU tests and latency (gpu_check.sh; on the stand-in without a GPU).
stamp "== 1. GPU tests and latency (scripts/gpu_check.sh)"
gpu_args=()
if [ $gpu -eq 0 ]; then
  stamp "SKIPPED on a GPU: no NVIDIA GPU here (nvidia-smi absent or sees none): the GPU tests and latencies run on the CPU stand-in instead (a rehearsal; its latencies are not a GPU's)"
  gpu_args=(--standin "$dev/standin")
fi
OUT=$work/gpu GPU_CHECK_BIN=$dev/gpu GPU_CHECK_NO_BUILD=1 MPICH_DIR=$mpich timeout 300 bash scripts/gpu_check.sh "${gpu_args[@]}"
stamp "gpu_check.sh exit $?"

# 2a. The paper benchmark, variants interleaved within each repetition.
threads="1 2 4 8"
[ "$cores" -ge 16 ] || stamp "note: 2 x 8 threads oversubscribe $cores cores at T = 8 (a rehearsal here; the device has 16)"
stamp "== 2a. paper benchmark, 2 ranks x T threads, T in {$threads}, $reps repetitions"
paper() { # variant T
  local a=("$2" 64 0.4 0.05)
  case "$1" in
    none) timeout 60 "$MPIEXEC" -n 2 build/bench/paper-5 "${a[@]}" ;;
    implicit-T) MPIXSTREAM_POLICY=implicit MPIR_CVAR_CH4_NUM_VCIS=$2 timeout 60 scripts/mpixrun -n 2 build/bench/paper-5 "${a[@]}" ;;
    native) MPIR_CVAR_CH4_NUM_VCIS=1 MPIR_CVAR_CH4_RESERVE_VCIS=$2 timeout 60 "$MPIEXEC" -n 2 build/bench/paper-5-mpix "${a[@]}" ;;
    explicit) MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$2 timeout 60 scripts/mpixrun -n 2 build/bench/paper-5 "${a[@]}" ;;
  esac
}
csv=$work/paper.csv
echo "variant,threads,rep,total_rate" >"$csv"
for r in $(seq "$reps"); do
  for T in $threads; do
    for v in none implicit-T native explicit; do
      line=$(paper "$v" "$T" </dev/null 2>>"$work/paper.err" | grep '^RESULT' | tail -1)
      rate=$(echo "$line" | tr ' ' '\n' | sed -n 's/^total_rate=//p')
      [ -n "$rate" ] || stamp "  rep $r T=$T $v: no result"
      echo "$v,$T,$r,$rate" >>"$csv"
    done
  done
  stamp "  repetition $r/$reps done"
done

# 2b. IMB-MT's shape (benches/imb_mt.sh, its binaries prebuilt).
stamp "== 2b. IMB-MT shape (benches/imb_mt.sh), T in {$threads}, $reps repetitions"
OUT=$work timeout 300 bash benches/imb_mt.sh --mpich 5 --no-build --reps "$reps" --threads "$threads" \
  --variants "none explicit native" --extra 'implicit-T=MPIXSTREAM_POLICY=implicit MPIR_CVAR_CH4_NUM_VCIS={T}' >"$work/imb_mt.out" 2>&1
stamp "imb_mt.sh exit $? ($(grep -c . "$work/imb_mt.csv" 2>/dev/null) lines of CSV)"

# 3. The table and the figure.
stamp "== 3. table"
PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH} python3 scripts/device_check_table.py --gpu "$gpu" --cores "$cores" \
  --reps "$reps" --gpu-dir "$work/gpu" --paper "$csv" --imb "$work/imb_mt.csv" --txt "$out/device_check.txt" \
  --png "$out/device_check.png" --date "$(date -u +%Y-%m-%d)"
tar -czf "$out/device_check_logs.tar.gz" -C "$work" . 2>/dev/null
stamp "done in $(($(date +%s) - t0)) s"

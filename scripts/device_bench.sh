#!/usr/bin/env bash
# benches/imb_mt.sh (IMB-MT's shape: 2 ranks x T threads, one communicator per thread; none / implicit /
# explicit / native streams, interleaved) on a machine with enough cores that 2 x T threads do not
# oversubscribe them: the project's own machine has 2 cores, where from T = 2 on every thread that waits
# in MPICH gives its core away with sched_yield on each turn, and a VCI per thread loses to one shared
# VCI that any thread of the rank progresses (docs/performance.md, "IMB-MT's shape"). scripts/device_check.sh
# runs IMB-MT with implicit-T too, the paper benchmark and the GPU tests in one device run. Short: T in
# {1 2 4 8}, 5 repetitions, about 2 minutes. Prints the machine and the table; ends with "done" or
# "FAILED: why".
#
# Needs: the library, MPICH 5 (PyPI 5.0.2) and, to build the benchmark, a C compiler; with no compiler,
# the binaries already built in build/bench (carry them). Python 3 for the table (without it: the CSV).
# A device machine has no cargo and no MPICH, so carry both from a machine that built them:
#   cargo build --release && bash benches/imb_mt.sh --reps 1 --threads 1   # here, first (builds build/bench/imb_mt-5*)
#   device run: command "bash scripts/device_bench.sh", carry [".deps/mpich5", "target/release/libmpixstream.so",
#               "build/bench"], timeout_s 420    (the table also lands in $OUT when the device tool sets it)
#   scripts/device_bench.sh [--reps N] [--threads "1 2 4 8"]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
reps=5; threads="1 2 4 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: scripts/device_bench.sh [--reps N] [--threads \"1 2 4 8\"]" >&2; exit 2 ;;
  esac
done
out=${OUT:-$root/results}
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }

echo "== machine"
echo "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); load $(cut -d' ' -f1-3 /proc/loadavg)"
cores=$(nproc)
maxt=$(echo $threads | tr ' ' '\n' | sort -n | tail -1)
[ "$cores" -ge $((2 * maxt)) ] || echo "note: 2 x $maxt threads oversubscribe $cores cores at the largest T"

build=--no-build
if command -v cargo >/dev/null 2>&1; then build=""; fi
[ -f target/release/libmpixstream.so ] || [ -n "$build" ] || fail "no target/release/libmpixstream.so and no cargo: carry it"
[ -x .deps/mpich5/bin/mpiexec ] || fail "no .deps/mpich5 (PyPI MPICH 5.0.2): carry it"
if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
  [ -x build/bench/imb_mt-5 ] && [ -x build/bench/imb_mt-5-mpix ] || fail "no C compiler and no build/bench/imb_mt-5*: carry build/bench"
  build=--no-build
fi
command -v python3 >/dev/null 2>&1 || echo "note: no python3: the table is not computed; the CSV follows"

echo "== benches/imb_mt.sh --mpich 5 --reps $reps --threads \"$threads\""
# The variants named: MPICH 5 has native streams (the script would ask nm, which a bare machine may lack).
OUT=$out bash benches/imb_mt.sh --mpich 5 --reps "$reps" --threads "$threads" --variants "none implicit explicit native" \
  $build 2>&1 | tee "$out/device_bench.log"
rc=${PIPESTATUS[0]}
[ -s "$out/imb_mt.csv" ] || fail "benches/imb_mt.sh exited with $rc and measured nothing"
if command -v python3 >/dev/null 2>&1; then
  [ "$rc" -eq 0 ] || fail "benches/imb_mt.sh exited with $rc"
else
  cat "$out/imb_mt.csv"
fi
echo "done"

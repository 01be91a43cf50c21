#!/usr/bin/env bash
# Host-queue enqueue overhead vs direct MPI calls (benches/enqueue_overhead.c), 2 ranks, on each MPICH.
#   benches/enqueue_overhead.sh [--mpich deb|5|both] [N] [REPS]
# Builds the library (cargo build --release) and the program; each run is under a timeout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
which=both
if [ "${1:-}" = "--mpich" ]; then which=$2; shift 2; fi
n=${1:-2000}
reps=${2:-11}
cargo build --release --quiet
out=$root/build/benches
mkdir -p "$out"
for mpich in deb 5; do
  [ "$which" = both ] || [ "$which" = "$mpich" ] || continue
  mpich_select $mpich
  "$MPICC" -O2 -Iinclude benches/enqueue_overhead.c -o "$out/enqueue_overhead-$mpich" \
    -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release"
  echo "== MPICH $mpich ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run)"
  MPIXSTREAM_STREAMS=2 timeout 300 scripts/mpixrun -n 2 "$out/enqueue_overhead-$mpich" "$n" "$reps" </dev/null
done

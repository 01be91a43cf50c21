#!/usr/bin/env bash
# Pass-through cost of the preloaded library on calls it does not own: the same msgrate binary with and
# without libmpixstream.so, alternating in one run, REPS times each; medians, their ratio, and the median
# of the back-to-back pair ratios (robust to drifts in machine load).
#   benches/passthrough.sh [deb|5] [REPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
mpich=${1:-deb}; reps=${2:-11}
mpich_select "$mpich"
out=$root/results; mkdir -p "$out" "$root/build/bench"
bin=$root/build/bench/msgrate-$mpich
"$MPICC" -O2 -Wno-stringop-overflow "$root/benches/msgrate.c" -o "$bin"
with=(); without=()
for r in $(seq "$reps"); do
  without+=("$(timeout 120 "$MPIEXEC" -n 2 "$bin" 2000 64 </dev/null)")
  with+=("$(timeout 120 "$root/scripts/mpixrun" -n 2 "$bin" 2000 64 </dev/null)")
done
python3 - "$mpich" "${without[*]}" "${with[*]}" <<'PY'
import statistics, sys
mpich, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ma, mb = statistics.median(a), statistics.median(b)
spread = lambda v: (max(v) - min(v)) / statistics.median(v) * 100
print(f"mpich={mpich} reps={len(a)} (2 ranks, 8-byte Isend/Irecv, window 64; 2-core machine)")
print(f"  without mpixstream: median {ma:,.0f} msg/s (spread {spread(a):.1f}%)")
print(f"  with    mpixstream: median {mb:,.0f} msg/s (spread {spread(b):.1f}%)")
pairs = sorted(y / x for x, y in zip(a, b))
print(f"  ratio of medians with/without: {mb / ma:.4f}  (overhead {100 * (1 - mb / ma):+.2f}%)")
print(f"  median of the {len(pairs)} back-to-back pair ratios: {statistics.median(pairs):.4f} "
      f"(quartiles {pairs[len(pairs) // 4]:.4f} .. {pairs[(3 * len(pairs)) // 4]:.4f})")
PY

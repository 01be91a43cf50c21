#!/usr/bin/env bash
# What the explicit policy costs on MPICH 4.2 (no MPIX_Async_start), against the same MPICH
# without the library: benches/msgrate.c (2 ranks, 8-byte Isend/Irecv, window 64), its variants
# alternating in one run, REPS times each. There the policy gives streams only under
# MPI_THREAD_MULTIPLE, where a thread of ours (the pool thread) turns the implicit pool
# (shim/src/progress_rule.rs); below it every communicator stays implicit. Variants:
#   none         without libmpixstream.so (MPI_THREAD_SINGLE)
#   implicit     the library, MPIXSTREAM_POLICY=implicit (pass-through)
#   explicit     the library, explicit, on a duplicate (below MULTIPLE on 4.2: left implicit)
#   mt           the library, implicit, MPIXSTREAM_THREAD_MULTIPLE=1: MPICH's own cost of MULTIPLE
#   mt-world     explicit + MULTIPLE, on MPI_COMM_WORLD (a communicator without a stream; the pool
#                thread runs beside it)
#   mt-policy    explicit + MULTIPLE, on a duplicate (a policy communicator, on its stream)
# Prints each variant's median msg/s and the median [min..max] of its back-to-back pair ratios to
# `none`; the pool thread's own cost is mt-world against mt.
#   benches/pool_thread_cost.sh [MPICH] [REPS]      (default 4.2.3 11; scripts/install.sh --mpich 4.2.3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
mpich=${1:-4.2.3}; reps=${2:-11}
mpich_select "$mpich"
mkdir -p "$root/build/bench"
bin=$root/build/bench/msgrate-$mpich
"$MPICC" -O2 -Wno-stringop-overflow "$root/benches/msgrate.c" -o "$bin"
lib() { timeout 120 env "$@" "$root/scripts/mpixrun" -n 2 "$bin" 2000 64 ${world:+world} </dev/null; }
run() { # variant
  case $1 in
    none) timeout 120 "$MPIEXEC" -n 2 "$bin" 2000 64 </dev/null ;;
    implicit) lib MPIXSTREAM_POLICY=implicit ;;
    explicit) lib MPIXSTREAM_POLICY=explicit ;;
    mt) world=1 lib MPIXSTREAM_POLICY=implicit MPIXSTREAM_THREAD_MULTIPLE=1 ;;
    mt-world) world=1 lib MPIXSTREAM_POLICY=explicit MPIXSTREAM_THREAD_MULTIPLE=1 ;;
    mt-policy) lib MPIXSTREAM_POLICY=explicit MPIXSTREAM_THREAD_MULTIPLE=1 ;;
  esac
}
variants=(none implicit explicit mt mt-world mt-policy)
declare -A rates
for r in $(seq "$reps"); do
  for v in "${variants[@]}"; do rates[$v]+="$(run "$v") "; done
done
args=()
for v in "${variants[@]}"; do args+=("$v" "${rates[$v]}"); done
python3 - "$mpich" "$reps" "${args[@]}" <<'PY'
import statistics, sys
mpich, reps, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {rest[i]: [float(x) for x in rest[i + 1].split()] for i in range(0, len(rest), 2)}
print(f"mpich={mpich} reps={reps} (2 ranks, 8-byte Isend/Irecv, window 64; msg/s)")
def line(name, ref):
    pairs = sorted(y / x for x, y in zip(runs[ref], runs[name]))
    return f"median {statistics.median(pairs):.3f} [{pairs[0]:.3f}..{pairs[-1]:.3f}]"
for n, v in runs.items():
    print(f"  {n:10} median {statistics.median(v):>12,.0f}  pair ratio to none: {line(n, 'none')}")
print(f"  pool thread alone (mt-world / mt): {line('mt-world', 'mt')}")
PY

#!/usr/bin/env bash
# Cost of the explicit policy's communicator constructors (benches/policy_ctor_cost.c: MPI_Comm_dup,
# MPI_Comm_split and MPI_Comm_idup of a dup of MPI_COMM_WORLD, and MPI_Comm_dup of a periodic Cartesian
# ring (whose base gets a copy of the topology), each created and freed, 2 ranks): the
# same binary without the library, with it under implicit, and under explicit with this build and with
# an earlier one (--lib-before PATH, e.g. a copy of target/release/libmpixstream.so of an earlier
# commit), and under the guided policy with this program's own profile (one thread: it selects nothing,
# so the guided runs are implicit's plus the identity each constructor computes), alternating within
# each repetition. Prints the medians of microseconds per create + free.
#   benches/policy_ctor_cost.sh [--mpich 5|deb] [--reps N] [--rounds N] [--lib-before PATH]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=7; rounds=200; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --lib-before) before=$2; shift 2 ;;
    *) echo "usage: benches/policy_ctor_cost.sh [--mpich 5|deb] [--reps N] [--rounds N] [--lib-before PATH]" >&2; exit 2 ;;
  esac
done
cargo build --release --quiet || exit 1
mpich_select "$mpich"
bin=$root/build/bench/policy_ctor_cost-$mpich; mkdir -p "$root/build/bench"
"$MPICC" -O2 -Wall benches/policy_ctor_cost.c -o "$bin" || exit 1
# The guided policy's profile of this program (made once, not timed).
timeout 120 scripts/mpixrun --profile --out "$root/build/bench/policy_ctor_cost-profile-$mpich" -n 2 "$bin" 20 \
  >/dev/null 2>&1 </dev/null || { echo "benches/policy_ctor_cost.sh: the profile run failed" >&2; exit 1; }
profile=$root/build/bench/policy_ctor_cost-profile-$mpich/profile.json
variants="none implicit explicit guided${before:+ explicit-before}"
rows=()
for r in $(seq "$reps"); do
  for v in $variants; do
    case "$v" in
      none) line=$(timeout 120 "$MPIEXEC" -n 2 "$bin" "$rounds" </dev/null 2>/dev/null | grep '^RESULT') ;;
      implicit) line=$(MPIXSTREAM_POLICY=implicit timeout 120 scripts/mpixrun -n 2 "$bin" "$rounds" </dev/null 2>/dev/null | grep '^RESULT') ;;
      explicit) line=$(MPIXSTREAM_POLICY=explicit timeout 120 scripts/mpixrun -n 2 "$bin" "$rounds" </dev/null 2>/dev/null | grep '^RESULT') ;;
      guided) line=$(MPIXSTREAM_POLICY=guided MPIXSTREAM_PROFILE=$profile timeout 120 scripts/mpixrun -n 2 "$bin" "$rounds" </dev/null 2>/dev/null | grep '^RESULT') ;;
      explicit-before) line=$(MPIXSTREAM_POLICY=explicit timeout 120 scripts/mpixrun --lib "$before" -n 2 "$bin" "$rounds" </dev/null 2>/dev/null | grep '^RESULT') ;;
    esac
    [ -n "$line" ] && rows+=("$v $line") || bash scripts/shm_cleanup.sh
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
d = {}
for l in sys.stdin:
    f = l.split()
    d.setdefault(f[0], []).append(dict(kv.split("=") for kv in f[2:]))
print(f"policy constructors, MPICH '"$mpich"', 2 ranks, '"$rounds"' rounds, medians of {max(len(v) for v in d.values())} repetitions [min..max], us per create + free")
print("variant".ljust(16) + "".join(k.rjust(26) for k in ("dup_us", "split_us", "idup_us", "cart_dup_us")))
for v, rs in d.items():
    cells = []
    for k in ("dup_us", "split_us", "idup_us", "cart_dup_us"):
        x = [float(r[k]) for r in rs]
        cells.append(f"{statistics.median(x):8.1f} [{min(x):.1f}..{max(x):.1f}]")
    print(f"{v:16}" + "".join(f"{c:>26}" for c in cells))
'

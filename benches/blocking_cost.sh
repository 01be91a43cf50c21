#!/usr/bin/env bash
# The blocking point-to-point interposers' cost (benches/blocking_cost.c) for this build of the lean
# library against an earlier one (--lib-before PATH: e.g. a build of a commit that did not interpose
# MPI_Send/MPI_Recv), alternating in one run, REPS times each; medians [min..max] and their ratio.
#   benches/blocking_cost.sh --lib-before PATH [--mpich 5|deb] [--reps N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
before="" mpich=5 reps=7
while [ $# -gt 0 ]; do
  case $1 in
    --lib-before) before=$2; shift 2 ;;
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    *) sed -n '2,5p' "$0"; exit 2 ;;
  esac
done
[ -n "$before" ] || { sed -n '2,5p' "$0"; exit 2; }
cargo build --release -q
# shellcheck source=/dev/null
source scripts/env.sh
mpich_select "$mpich"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$MPICC" -O2 -o "$out/blocking_cost" benches/blocking_cost.c
cp target/release/libmpixstream.so "$out/after.so"; cp "$before" "$out/before.so"
for ((r = 0; r < reps; r++)); do
  for v in before after; do
    timeout 60 scripts/mpixrun --mpich "$mpich" --lib "$out/$v.so" -n 1 "$out/blocking_cost" |
      sed -n "s/^RESULT procnull_ns=/$v procnull /p" >>"$out/t"
    timeout 60 scripts/mpixrun --mpich "$mpich" --lib "$out/$v.so" -n 2 "$out/blocking_cost" |
      sed -n "s/^RESULT pingpong_us=/$v pingpong /p" >>"$out/t"
  done
done
python3 - "$out/t" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for m in ("procnull", "pingpong"):
    med = {}
    for v in ("before", "after"):
        xs = sorted(float(x) for w, k, x in rows if w == v and k == m)
        med[v] = st.median(xs)
        print(f"{m} {v}: median {med[v]:.3f} [{xs[0]:.3f}..{xs[-1]:.3f}]")
    print(f"{m} after/before: {med['after'] / med['before']:.3f}")
PY

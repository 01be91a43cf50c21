#!/usr/bin/env bash
# The price of the endpoint claims (docs/architecture.md, "Ownership and the progress helper"), every
# call on a stream communicator pays it:
#   - an uncontended claim and its release, in nanoseconds (cargo's example claim_cost: no MPI);
#   - instructions (callgrind) per iteration of benches/callcost.c (MPI_Irecv, MPI_Isend, MPI_Waitall:
#     one message) on a policy communicator (MPIXSTREAM_POLICY=explicit: a native stream communicator),
#     this build against MPICH alone on the communicator the policy makes (a native stream communicator
#     of its own, no library) and against an earlier build (--lib-before PATH: e.g. the target/release
#     of an earlier commit built into another CARGO_TARGET_DIR), MPICH 5.0.2, one process;
#   - the wall time of callcost under both, REPS runs alternating: medians [min..max] and their ratio.
#   benches/claim_cost.sh [--lib-before PATH] [--reps N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=9; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --lib-before) before=$2; shift 2 ;;
    *) echo "usage: benches/claim_cost.sh [--lib-before PATH] [--reps N]" >&2; exit 2 ;;
  esac
done
[ -z "$before" ] || [ -f "$before" ] || { echo "benches/claim_cost.sh: --lib-before $before: no such file" >&2; exit 2; }
cargo build --release --quiet || exit 1
after=$MPIXSTREAM_LIB
cargo run --release --quiet --example claim_cost -- 20000000 "$reps"
mpich_select 5
bin=$root/build/bench; mkdir -p "$bin"
"$MPICC" -O2 benches/callcost.c -o "$bin/callcost-5" || exit 1

# instructions LIB|native: callgrind's count inside callcost's measured_loop alone (--toggle-collect: no
# start-up, finalize or other thread), over its 22,000 iterations (20,000 and a tenth as warm-up): one
# iteration's MPI_Irecv + MPI_Isend + MPI_Waitall, MPICH's share included. "native": no library, the
# program's own MPICH stream communicator (MPIR_CVAR_CH4_RESERVE_VCIS=1), what MPICH alone costs there.
instructions() {
  local out=$bin/callgrind.claim.$$ total run=(env LD_PRELOAD="$1" MPIXSTREAM_POLICY=explicit) mode=""
  [ "$1" = native ] && { run=(env MPIR_CVAR_CH4_RESERVE_VCIS=1); mode=native; }
  "${run[@]}" timeout 300 valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_loop \
    --callgrind-out-file="$out" "$bin/callcost-5" 20000 $mode >/dev/null 2>&1 || { echo failed; return; }
  total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  rm -f "$out"
  echo "$total" | awk '{ printf "%.1f", $1 / 22000 }'
}
echo "instructions per iteration (MPI_Irecv + MPI_Isend + MPI_Waitall: one message) on a policy stream"
echo "  communicator (callcost, explicit, MPICH 5.0.2, one process):"
echo "  MPICH alone (its own stream communicator, no library) $(instructions native)"
[ -n "$before" ] && echo "  before $(instructions "$before")"
echo "  this build $(instructions "$after")"

# Wall time, alternating: MPICH alone on its own stream communicator, [before,] this build.
variants=(native after); [ -n "$before" ] && variants=(native before after)
rows=()
for r in $(seq "$reps"); do
  for v in "${variants[@]}"; do
    case $v in
      native) out=$(env MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 120 "$bin/callcost-5" 400000 native </dev/null) ;;
      before) out=$(env LD_PRELOAD="$before" MPIXSTREAM_POLICY=explicit timeout 120 "$bin/callcost-5" 400000 </dev/null) ;;
      after) out=$(env LD_PRELOAD="$after" MPIXSTREAM_POLICY=explicit timeout 120 "$bin/callcost-5" 400000 </dev/null) ;;
    esac
    rows+=("$v $(echo "$out" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p')")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics as st, sys
data = {}
for line in sys.stdin:
    v, ns = line.split()
    data.setdefault(v, []).append(float(ns))
n = data["native"]
print("Irecv + Isend + Waitall on a policy communicator, ns per call, medians [min..max]:")
for v in ("native", "before", "after"):
    if v in data:
        d = data[v]
        pairs = sorted(y / x for x, y in zip(n, d))
        name = {"native": "MPICH alone", "before": "before", "after": "this build"}[v]
        print(f"  {name:12} {st.median(d):7.2f} [{min(d):.2f}..{max(d):.2f}]  / MPICH alone: median pair ratio "
              f"{st.median(pairs):.3f} ({len(pairs)} pairs)")
'

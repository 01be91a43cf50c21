#!/usr/bin/env bash
# The price of the endpoint claims (docs/architecture.md, "Ownership and the progress helper"), every
# call on a stream communicator pays it:
#   - an uncontended claim and its release, in nanoseconds (cargo's example claim_cost: no MPI);
#   - instructions (callgrind) per iteration of benches/callcost.c (MPI_Irecv, MPI_Isend, MPI_Waitall) on a
#     policy communicator (MPIXSTREAM_POLICY=explicit: a native stream communicator), this build against
#     an earlier one (--lib-before PATH: e.g. the target/release of an earlier commit built into another
#     CARGO_TARGET_DIR), MPICH 5.0.2, one process;
#   - the wall time of callcost under both, REPS runs alternating: medians [min..max] and their ratio.
#   benches/claim_cost.sh --lib-before PATH [--reps N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=9; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --lib-before) before=$2; shift 2 ;;
    *) echo "usage: benches/claim_cost.sh --lib-before PATH [--reps N]" >&2; exit 2 ;;
  esac
done
[ -f "$before" ] || { echo "benches/claim_cost.sh: --lib-before PATH (an earlier libmpixstream.so) is required" >&2; exit 2; }
cargo build --release --quiet || exit 1
after=$MPIXSTREAM_LIB
cargo run --release --quiet --example claim_cost -- 20000000 "$reps"
mpich_select 5
bin=$root/build/bench; mkdir -p "$bin"
"$MPICC" -O2 benches/callcost.c -o "$bin/callcost-5" || exit 1

# instructions LIB: callgrind's whole-run count of callcost at 10,000 and 30,000 iterations (each
# plus a tenth as warm-up); the difference over the 22,000 extra iterations is one iteration's
# MPI_Irecv + MPI_Isend + MPI_Waitall, MPICH's share included, with nothing of start-up or finalize.
instructions() {
  local out=$bin/callgrind.claim.$$ n total=()
  for n in 10000 30000; do
    env LD_PRELOAD="$1" MPIXSTREAM_POLICY=explicit timeout 300 valgrind --tool=callgrind \
      --callgrind-out-file="$out" "$bin/callcost-5" $n >/dev/null 2>&1 || { echo failed; return; }
    total+=("$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')")
    rm -f "$out"
  done
  echo "${total[0]} ${total[1]}" | awk '{ printf "%.1f", ($2 - $1) / 22000 }'
}
echo "instructions per iteration (MPI_Irecv + MPI_Isend + MPI_Waitall) on a policy stream communicator"
echo "  (callcost, explicit, MPICH 5.0.2, one process): before $(instructions "$before"), this build $(instructions "$after")"

rows=()
for r in $(seq "$reps"); do
  for v in before after; do
    lib=$before; [ $v = after ] && lib=$after
    out=$(env LD_PRELOAD=$lib MPIXSTREAM_POLICY=explicit timeout 120 "$bin/callcost-5" 400000 </dev/null)
    rows+=("$v $(echo "$out" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p')")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics as st, sys
data = {}
for line in sys.stdin:
    v, ns = line.split()
    data.setdefault(v, []).append(float(ns))
a, b = data["before"], data["after"]
pairs = sorted(y / x for x, y in zip(a, b))
print(f"Irecv + Isend + Waitall on a policy communicator, per call: before {st.median(a):.2f} ns "
      f"[{min(a):.2f}..{max(a):.2f}], this build {st.median(b):.2f} ns [{min(b):.2f}..{max(b):.2f}]; "
      f"this/before {st.median(b) / st.median(a):.3f}, median pair ratio {st.median(pairs):.3f} ({len(pairs)} pairs)")
'

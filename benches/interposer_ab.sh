#!/usr/bin/env bash
# This build of the lean library against an earlier one (--lib-before PATH, e.g. target/release of an
# earlier commit built into another CARGO_TARGET_DIR), on calls it passes through, one process under
# the implicit policy (no oversubscription, so it holds on a busy 2-core machine):
#   - instructions (callgrind) per MPI_Iprobe (benches/interposer_cost.c, loop `per_call` built with
#     -fno-inline: an interposer with a communicator passed by value) and per MPI_Waitall of
#     benches/callcost.c (a completion interposer), MPICH alone too for MPI_Iprobe;
#   - wall time of both programs, REPS runs of each library alternating: medians [min..max], the ratio
#     of the medians this/before and the median of the back-to-back pair ratios.
#   benches/interposer_ab.sh --lib-before PATH [--mpich 5|deb] [--reps N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=11; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --lib-before) before=$2; shift 2 ;;
    *) echo "usage: benches/interposer_ab.sh --lib-before PATH [--mpich 5|deb] [--reps N]" >&2; exit 2 ;;
  esac
done
[ -f "$before" ] || { echo "benches/interposer_ab.sh: --lib-before PATH (an earlier libmpixstream.so) is required" >&2; exit 2; }
cargo build --release --quiet || exit 1
after=$MPIXSTREAM_LIB
mpich_select "$mpich"
bin=$root/build/bench; mkdir -p "$bin"
"$MPICC" -O2 -fno-inline benches/interposer_cost.c -o "$bin/interposer_cost-$mpich" || exit 1
"$MPICC" -O2 benches/callcost.c -o "$bin/callcost-$mpich" || exit 1

# instructions LIB FUNCTION CALLS PROGRAM ARGS...: callgrind's count inside FUNCTION, per call.
instructions() {
  local lib=$1 fn=$2 calls=$3 out=$bin/callgrind.ab.$$; shift 3
  local pre=(); [ "$lib" != none ] && pre=(env LD_PRELOAD="$lib")
  "${pre[@]}" timeout 300 valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" "$@" \
    >/dev/null 2>&1 || { echo "failed"; return; }
  callgrind_annotate "$out" 2>/dev/null | awk -v n="$calls" '/PROGRAM TOTALS/ { gsub(",", "", $1); printf "%.1f", $1 / n }'
  rm -f "$out"
}
echo "mpich=$mpich, one process, implicit policy; before: $before; this build: $after"
echo "instructions per MPI_Iprobe (21,000 calls): MPICH alone $(instructions none per_call 21000 "$bin/interposer_cost-$mpich" 10000)," \
  "before $(instructions "$before" per_call 21000 "$bin/interposer_cost-$mpich" 10000)," \
  "this build $(instructions "$after" per_call 21000 "$bin/interposer_cost-$mpich" 10000)"
echo "instructions per MPI_Waitall of callcost (22,000 calls): before $(instructions "$before" MPI_Waitall 22000 "$bin/callcost-$mpich" 20000)," \
  "this build $(instructions "$after" MPI_Waitall 22000 "$bin/callcost-$mpich" 20000)"

rows=()
for r in $(seq "$reps"); do
  for v in before after; do
    lib=$before; [ $v = after ] && lib=$after
    out=$(LD_PRELOAD=$lib timeout 120 "$bin/interposer_cost-$mpich" 2000000 </dev/null)
    rows+=("$v iprobe_world $(echo "$out" | sed -n 's/.*world_ns=\([0-9.]*\).*/\1/p')")
    rows+=("$v iprobe_idup $(echo "$out" | sed -n 's/.*idup_ns=\([0-9.]*\).*/\1/p')")
    out=$(LD_PRELOAD=$lib timeout 120 "$bin/callcost-$mpich" 400000 </dev/null)
    rows+=("$v callcost $(echo "$out" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p')")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics as st, sys
data = {}
for line in sys.stdin:
    v, metric, ns = line.split()
    data.setdefault(metric, {}).setdefault(v, []).append(float(ns))
names = {"iprobe_world": "MPI_Iprobe on MPI_COMM_WORLD", "iprobe_idup": "MPI_Iprobe on an idup",
         "callcost": "Irecv + Isend + Waitall, per call"}
for metric, name in names.items():
    a, b = data[metric]["before"], data[metric]["after"]
    pairs = sorted(y / x for x, y in zip(a, b))
    print(f"{name}: before {st.median(a):.2f} ns [{min(a):.2f}..{max(a):.2f}], this build {st.median(b):.2f} ns "
          f"[{min(b):.2f}..{max(b):.2f}]; this/before {st.median(b) / st.median(a):.3f}, "
          f"median pair ratio {st.median(pairs):.3f} ({len(pairs)} pairs)")
'

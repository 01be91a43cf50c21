#!/usr/bin/env bash
# What the counters and the checking mode cost per MPI call (benches/callcost.c: one process, Irecv +
# Isend to itself + Waitall on a policy-stream communicator, 3 calls per iteration; one process, so a
# busy 2-core machine does not oversubscribe it). Variants interleaved, REPS times; medians.
#   plain          MPICH 5.0.2 alone (no preload; its dup is an ordinary communicator on the locked
#                  implicit VCI, so this is a reference, not the baseline of the cost: lean is)
#   lean           libmpixstream.so, MPIXSTREAM_POLICY=explicit
#   tools-off      + libmpixstream_tools.so preloaded with nothing switched on
#   check          + MPIXSTREAM_CHECK=1
#   report         + MPIXSTREAM_REPORT
#   check+report   both
# Then the lean library's own per-call cost where it interposes on every call (benches/interposer_cost.c:
# MPI_Iprobe on communicators without a stream while a stream communicator exists, explicit policy):
#   plain vs lean, interleaved, REPS times; medians.
# Writes results/check_cost.txt and .json.   benches/check_cost.sh [REPS=7] [ITERS=200000]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=${1:-7}; iters=${2:-200000}
out=$root/results; bin=$root/build/bench; mkdir -p "$out" "$bin"
mpich_select 5
"$MPICC" -O2 -Wno-stringop-overflow benches/callcost.c -o "$bin/callcost-5" || exit 1
"$MPICC" -O2 benches/interposer_cost.c -o "$bin/interposer_cost-5" || exit 1
tools=$(dirname "$MPIXSTREAM_LIB")/libmpixstream_tools.so
variants="plain lean tools-off check report check+report"
run() {
  case "$1" in
    plain) timeout 60 "$MPIEXEC" -n 1 "$bin/callcost-5" "$iters" ;;
    lean) MPIXSTREAM_POLICY=explicit timeout 60 scripts/mpixrun -n 1 "$bin/callcost-5" "$iters" ;;
    tools-off) MPIXSTREAM_POLICY=explicit MPIXRUN_PRELOAD_EXTRA=$tools timeout 60 scripts/mpixrun -n 1 "$bin/callcost-5" "$iters" ;;
    check) MPIXSTREAM_POLICY=explicit MPIXSTREAM_CHECK=1 timeout 60 scripts/mpixrun -n 1 "$bin/callcost-5" "$iters" ;;
    report) MPIXSTREAM_POLICY=explicit MPIXSTREAM_REPORT=$out/.cc.json timeout 60 scripts/mpixrun -n 1 "$bin/callcost-5" "$iters" 2>/dev/null ;;
    check+report) MPIXSTREAM_POLICY=explicit MPIXSTREAM_CHECK=1 MPIXSTREAM_REPORT=$out/.cc.json timeout 60 scripts/mpixrun -n 1 "$bin/callcost-5" "$iters" 2>/dev/null ;;
  esac
}
results=""
for r in $(seq "$reps"); do
  for v in $variants; do
    ns=$(run "$v" </dev/null | sed -n 's/^RESULT ns_per_call=//p')
    results+="$v $ns"$'\n'
  done
done
rm -f "$out/.cc.json"
printf '%s' "$results" | python3 -c '
import json, statistics, sys
reps, iters, out = sys.argv[1:]
data = {}
for line in sys.stdin:
    parts = line.split()
    if len(parts) == 2:
        data.setdefault(parts[0], []).append(float(parts[1]))
med = {v: statistics.median(x) for v, x in data.items()}
base = med.get("lean")
lines = [f"Cost per MPI call (Irecv/Isend/Waitall on a policy-stream communicator, MPICH 5.0.2 native, 1 process; {reps} reps x {iters} iterations; median ns per call [min..max])"]
for v, x in data.items():
    extra = f"   {med[v] - base:+6.1f} ns vs lean" if base is not None and v != "lean" else ""
    lines.append(f"  {v:<13} {med[v]:7.1f} [{min(x):.1f}..{max(x):.1f}]{extra}")
text = "\n".join(lines)
print(text)
open(f"{out}/check_cost.txt", "w").write(text + "\n")
json.dump({"reps": int(reps), "iters": int(iters), "ns_per_call": data, "median": med}, open(f"{out}/check_cost.json", "w"), indent=1)
' "$reps" "$iters" "$out"

# The interposers' own cost (MPI_Iprobe on communicators without a stream).
iresults=""
for r in $(seq "$reps"); do
  for v in plain lean; do
    case "$v" in
      plain) line=$(timeout 60 "$MPIEXEC" -n 1 "$bin/interposer_cost-5" $((iters * 5)) </dev/null) ;;
      lean) line=$(MPIXSTREAM_POLICY=explicit timeout 60 scripts/mpixrun -n 1 "$bin/interposer_cost-5" $((iters * 5)) </dev/null) ;;
    esac
    iresults+="$v $(sed -n 's/^RESULT world_ns=\([0-9.]*\) idup_ns=\([0-9.]*\)/\1 \2/p' <<<"$line")"$'\n'
  done
done
printf '%s' "$iresults" | python3 -c '
import statistics, sys
out = sys.argv[1]
data = {}
for line in sys.stdin:
    p = line.split()
    if len(p) == 3:
        data.setdefault(p[0], []).append((float(p[1]), float(p[2])))
lines = ["Cost per MPI_Iprobe on a communicator without a stream while a stream communicator exists (explicit policy; median ns [min..max])"]
for v, xs in data.items():
    w = [x[0] for x in xs]; d = [x[1] for x in xs]
    lines.append(f"  {v:<6} MPI_COMM_WORLD {statistics.median(w):6.2f} [{min(w):.2f}..{max(w):.2f}]   idup of it {statistics.median(d):6.2f} [{min(d):.2f}..{max(d):.2f}]")
if "plain" in data and "lean" in data:
    for i, name in ((0, "MPI_COMM_WORLD"), (1, "idup")):
        lean = statistics.median(x[i] for x in data["lean"])
        plain = statistics.median(x[i] for x in data["plain"])
        lines.append(f"  lean - plain on {name}: {lean - plain:+.2f} ns")
text = "\n".join(lines)
print(text)
open(f"{out}/check_cost.txt", "a").write(text + "\n")
' "$out"

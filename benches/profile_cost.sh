#!/usr/bin/env bash
# What the report costs now that it carries the contention profile, on the paper benchmark
# (benches/paper_msgrate.c, MPICH 5.0.2, 2 ranks x T threads, the explicit policy), variants interleaved
# in every repetition:
#   explicit        the unmodified binary under the explicit policy, no report (paper.sh's mpich5-explicit)
#   report          the same with MPIXSTREAM_REPORT: counters and the profile (paper.sh's mpich5-explicit-report)
#   report-before   the same with the tools library given by --tools-before (an earlier build's
#                   libmpixstream_tools.so, e.g. one without the profile), same lean library
# Prints, per T, the medians and the medians of the per-repetition ratios [min..max]: report / explicit
# (what paper.sh calls "counted / explicit") and, with --tools-before, report-before / explicit and
# report / report-before. Writes results/profile_cost.{csv,txt}.
#   benches/profile_cost.sh [--tools-before PATH] [--reps N] [--threads "1 2 4"] [--seconds S]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=7; threads="1 2 4"; seconds=0.4; before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tools-before) before=$(readlink -f "$2"); shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: benches/profile_cost.sh [--tools-before PATH] [--reps N] [--threads \"1 2 4\"] [--seconds S]" >&2; exit 2 ;;
  esac
done
out=$root/results; bin=$root/build/bench; mkdir -p "$out" "$bin"
mpich_select 5
"$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-5" -lpthread || exit 1
variants="explicit report"
[ -n "$before" ] && variants="$variants report-before"
csv=$out/profile_cost.csv
echo "variant,threads,rep,total_rate" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$reps"); do
  for T in $threads; do
    order=$variants
    # Alternate the order each repetition.
    [ $((r % 2)) -eq 0 ] && order=$(echo $variants | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $order; do
      case $v in
        explicit) envs=() ;;
        report) envs=(MPIXSTREAM_REPORT=$out/.profile-cost.json) ;;
        report-before) envs=(MPIXSTREAM_REPORT=$out/.profile-cost.json MPIXSTREAM_TOOLS_LIB=$before) ;;
      esac
      line=$(env "${envs[@]}" MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T timeout 120 scripts/mpixrun -n 2 \
        "$bin/paper-5" "$T" 64 "$seconds" 0.05 </dev/null 2>/dev/null | grep '^RESULT')
      rate=$(echo "$line" | tr ' ' '\n' | sed -n 's/^total_rate=//p')
      echo "$v,$T,$r,$rate" >>"$csv"
    done
  done
done
rm -f "$out/.profile-cost.json"
python3 - "$csv" "$out" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import csv, statistics, sys
path, out, lb, la = sys.argv[1:]
rows = [r for r in csv.DictReader(open(path)) if r["total_rate"]]
variants = list(dict.fromkeys(r["variant"] for r in rows))
threads = sorted({int(r["threads"]) for r in rows})
rate = {(r["variant"], int(r["threads"]), r["rep"]): float(r["total_rate"]) for r in rows}
lines = [f"paper benchmark, MPICH 5.0.2, explicit policy, 2 ranks x T threads; load {lb} -> {la}",
         "medians (msg/s) and medians of per-repetition ratios [min..max]"]
for t in threads:
    med = {v: statistics.median([x for (vv, tt, _), x in rate.items() if vv == v and tt == t] or [0]) for v in variants}
    lines.append(f"T={t}: " + ", ".join(f"{v} {med[v] / 1e6:.2f} M" for v in variants))
    for a, b in (("report", "explicit"), ("report-before", "explicit"), ("report", "report-before")):
        if a in variants and b in variants:
            q = [rate[(a, t, k)] / rate[(b, t, k)] for (v, tt, k) in rate if v == a and tt == t and (b, t, k) in rate]
            if q:
                lines.append(f"    {a} / {b}: {statistics.median(q):.3f} [{min(q):.3f}..{max(q):.3f}]")
text = "\n".join(lines)
print(text)
open(f"{out}/profile_cost.txt", "w").write(text + "\n")
PY

#!/usr/bin/env bash
# Why PyPI's MPICH 5.0.2 moves far fewer messages than Debian's 4.0.2 on the paper benchmark at T=1
# (benches/paper.sh rows deb-4.0.2 and mpich5-implicit-1), without the library, variants interleaved:
#   deb              Debian 4.0.2 (ch4:ucx, no POSIX shared-memory module: same-node messages go
#                    through UCX's shared-memory transport)
#   m5               MPICH 5.0.2 as installed (same-node messages through MPICH's POSIX shared memory)
#   m5-nolocal       MPIR_CVAR_NOLOCAL=1: same-node messages through UCX, as on Debian
#   m5-noyield       diagnostic: sched_yield made a no-op (benches/noyield.c preloaded)
#   m5-nolocal-noyield  both
# With `perf` (linux-perf) on PATH and tracepoints readable, also counts sched_yield calls per message
# (perf stat -e syscalls:sys_enter_sched_yield) in one more run of deb, m5 and m5-nolocal.
# Writes results/anchor_gap.{csv,txt}.   benches/anchor_gap.sh [--reps N] [--seconds S]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=7; seconds=0.4
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: benches/anchor_gap.sh [--reps N] [--seconds S]" >&2; exit 2 ;;
  esac
done
out=$root/results; bin=$root/build/bench; mkdir -p "$out" "$bin"
mpich_select deb; "$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-deb" -lpthread || exit 1
mpich_select 5; "$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-5" -lpthread || exit 1
cc -O2 -shared -fPIC benches/noyield.c -o "$bin/noyield.so" || exit 1
variants="deb m5 m5-nolocal m5-noyield m5-nolocal-noyield"
command_of() { # variant -> the mpiexec command line (after mpich_select)
  case "$1" in
    deb) mpich_select deb; cmd=("$MPIEXEC" -n 2 "$bin/paper-deb") ;;
    m5) mpich_select 5; cmd=("$MPIEXEC" -n 2 "$bin/paper-5") ;;
    m5-nolocal) mpich_select 5; cmd=("$MPIEXEC" -genv MPIR_CVAR_NOLOCAL 1 -n 2 "$bin/paper-5") ;;
    m5-noyield) mpich_select 5; cmd=("$MPIEXEC" -genv LD_PRELOAD "$bin/noyield.so" -n 2 "$bin/paper-5") ;;
    m5-nolocal-noyield) mpich_select 5
      cmd=("$MPIEXEC" -genv MPIR_CVAR_NOLOCAL 1 -genv LD_PRELOAD "$bin/noyield.so" -n 2 "$bin/paper-5") ;;
  esac
}
csv=$out/anchor_gap.csv
echo "variant,rep,total_rate" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$reps"); do
  order=$variants
  [ $((r % 2)) -eq 0 ] && order=$(echo $variants | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $order; do
    command_of "$v"
    rate=$(timeout 60 "${cmd[@]}" 1 64 "$seconds" 0.05 </dev/null 2>/dev/null | tr ' ' '\n' | sed -n 's/^total_rate=//p')
    echo "$v,$r,$rate" >>"$csv"
  done
done
yields=""
if command -v perf >/dev/null && perf stat -e syscalls:sys_enter_sched_yield true >/dev/null 2>&1; then
  for v in deb m5 m5-nolocal; do
    command_of "$v"
    text=$(perf stat -x, -e syscalls:sys_enter_sched_yield -- timeout 60 "${cmd[@]}" 1 64 "$seconds" 0.05 2>&1 </dev/null)
    msgs=$(echo "$text" | tr ' ' '\n' | sed -n 's/^messages=//p')
    n=$(echo "$text" | awk -F, '/sched_yield/ { print $1 }')
    yields+="$v ${n:-0} ${msgs:-0}"$'\n'
  done
fi
printf '%s' "$yields" | python3 -c '
import csv, statistics, sys
path, out, lb, la = sys.argv[1:]
rows = [r for r in csv.DictReader(open(path)) if r["total_rate"]]
variants = list(dict.fromkeys(r["variant"] for r in rows))
rate = {(r["variant"], r["rep"]): float(r["total_rate"]) for r in rows}
lines = [f"paper benchmark, T=1, 2 ranks on one node, no library; load {lb} -> {la}; median msg/s [min..max], ratio to deb (median of per-repetition ratios)"]
for v in variants:
    x = [rate[k] for k in rate if k[0] == v]
    q = [rate[(v, k[1])] / rate[("deb", k[1])] for k in rate if k[0] == v and ("deb", k[1]) in rate]
    lines.append(f"  {v:<20} {statistics.median(x) / 1e6:6.2f} M [{min(x) / 1e6:.2f}..{max(x) / 1e6:.2f}]   vs deb {statistics.median(q):.3f}")
for line in sys.stdin:
    v, n, msgs = line.split()
    if int(msgs) > 0:
        lines.append(f"  {v:<20} sched_yield calls: {int(n)} for {int(msgs)} messages ({int(n) / int(msgs):.2f} per message)")
text = "\n".join(lines)
print(text)
open(f"{out}/anchor_gap.txt", "w").write(text + "\n")
' "$csv" "$out" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)"

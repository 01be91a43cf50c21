#!/usr/bin/env bash
# All-to-all message rate (benches/multiplex_alltoall.c): 2 ranks, T threads each, thread t owning
# stream t, every index to every index of the other rank, 8-byte messages, written two ways and
# measured in the same run, variants alternating within each repetition:
#   multiplex  one multiplex communicator (named receives: the direct path)
#   percomm    one stream communicator per thread pair (T*T of them)
# Prints median rates [min..max] and the ratio multiplex / percomm (median of per-repetition ratios).
# Writes results/multiplex_alltoall.csv (results/multiplex_alltoall-impi.csv for --mpich impi).
#   benches/multiplex_alltoall.sh [--mpich 5|deb|impi] [--reps N] [--threads "1 2 4"] [--messages N] [--window W]
# --mpich impi: Intel MPI on the split backend (MPIXSTREAM_BACKEND=split), pool T + T^2: the T streams
# and a multiplex communicator's T + T(T-1) dedicated endpoints at 2 ranks. There `percomm` exists at
# T = 1 only: a pair i -> j (i != j) would attach different endpoints at its two ends, which the split
# backend refuses (its rows stay empty, shown as -).
# --messages: per (thread, partner index); by default 400000 / T^2 (every run then carries 800000
# messages, half a second or more here; 20000 at T = 1 ran for 30 ms)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=5; threads="1 2 4"; messages=auto; window=16
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --messages) messages=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    *) echo "usage: benches/multiplex_alltoall.sh [--mpich 5|deb|impi] [--reps N] [--threads \"1 2 4\"] [--messages N] [--window W]" >&2; exit 2 ;;
  esac
done
out=$root/results; bin=$root/build/bench; mkdir -p "$out" "$bin"
cargo build --release --quiet || exit 1
mpich_select "$mpich"
"$MPICC" -O2 -Wall -Iinclude benches/multiplex_alltoall.c -o "$bin/multiplex_alltoall-$mpich" \
  -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread || exit 1
csv=$out/multiplex_alltoall.csv
backend=()
[ "$mpich" = impi ] && { csv=$out/multiplex_alltoall-impi.csv; backend=(MPIXSTREAM_BACKEND=split); }
echo "variant,threads,rep,rate,seconds" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
echo "all-to-all: 2 ranks x T threads, every index to every index, 8-byte messages, $([ "$messages" = auto ] && echo "400000/T^2" || echo "$messages") per (thread, partner index), window $window, MPICH $mpich, $reps repetitions, T in {$threads}"
for r in $(seq "$reps"); do
  for T in $threads; do
    order="multiplex percomm"; [ $((r % 2)) -eq 0 ] && order="percomm multiplex"
    for v in $order; do
      n=$messages; [ "$n" = auto ] && n=$((400000 / (T * T)))
      pool=$T; [ "$mpich" = impi ] && pool=$((T + T * T))
      line=$(env "${backend[@]}" MPIXSTREAM_STREAMS=$pool timeout 120 scripts/mpixrun -n 2 "$bin/multiplex_alltoall-$mpich" "$v" "$T" "$n" "$window" </dev/null 2>/dev/null | grep '^RESULT' | tail -1)
      [ $? -ne 0 ] || [ -z "$line" ] && bash scripts/shm_cleanup.sh
      get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
      echo "$v,$T,$r,$(get rate),$(get seconds)" >>"$csv"
    done
  done
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$csv" "$mpich" "$reps" "$load_before" "$load_after" <<'PY'
import csv, statistics, sys
path, mpich, reps, lb, la = sys.argv[1:]
rows = [r for r in csv.DictReader(open(path)) if r["rate"]]
ts = sorted({int(r["threads"]) for r in rows})
def rates(v, t): return {int(r["rep"]): float(r["rate"]) for r in rows if r["variant"] == v and int(r["threads"]) == t}
print(f"all-to-all message rate (msg/s), MPICH {mpich}, {reps} repetitions, variants alternating; load average {lb} -> {la}")
print("median [min..max]")
print(f"{'variant':12}" + "".join(f"{'T=%d' % t:>30}" for t in ts))
for v in ("multiplex", "percomm"):
    cells = []
    for t in ts:
        x = list(rates(v, t).values())
        cells.append(f"{statistics.median(x)/1e3:,.0f}k [{min(x)/1e3:,.0f}k..{max(x)/1e3:,.0f}k]" if x else "-")
    print(f"{v:12}" + "".join(f"{c:>30}" for c in cells))
print("ratio multiplex / percomm: median of per-repetition ratios [min..max]")
cells = []
for t in ts:
    m, p = rates("multiplex", t), rates("percomm", t)
    q = [m[k] / p[k] for k in m if k in p]
    cells.append(f"{statistics.median(q):.2f} [{min(q):.2f}..{max(q):.2f}]" if q else "-")
print(f"{'':12}" + "".join(f"{c:>30}" for c in cells))
PY

#!/usr/bin/env bash
# N-to-1 message rate on multiplex stream communicators (benches/multiplex_n_to_1.c): T sender threads
# on rank 1, one stream each, 8-byte messages to one polling receiver thread on rank 0, written two
# ways, measured in the same run, variants interleaved within each repetition:
#   multiplex   one multiplex communicator; the receiver polls T windows of MPI_ANY_SOURCE +
#               MPIX_ANY_INDEX receives (MPIX_Stream_irecv, MPI_Testall in turn)
#   percomm     one stream communicator per sender thread, the receiver polls a window on each in turn
#   named       multiplex with percomm's windows: window k names rank 1 and source index k (percomm's
#               matching work, on the multiplex communicator's direct receive path)
#   blocking    (extra) multiplex, received one at a time with blocking MPIX_Stream_recv
#   percomm-locked  (extra, MPICH 5 only) percomm under MPIXSTREAM_BACKEND=serial: the same stream
#               communicators as plain ones on MPICH's locked implicit VCI, where multiplex traffic runs
# Reports median rates [min..max] and the ratio multiplex / percomm (median of per-repetition ratios).
# Writes results/multiplex_n_to_1.{csv,txt,json}.
#   benches/multiplex_n_to_1.sh [--mpich 5|deb] [--reps N] [--threads "1 2 4"] [--messages N] [--window W]
# --messages: per sender thread; by default 1000000 / T, so that every run lasts about half a second or
# more here (100000 per sender at T = 1 ran for 50 ms, and its ratios swung from 0.4 to 2.9)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=7; threads="1 2 4"; messages=auto; window=32
variants="multiplex percomm named blocking percomm-locked"
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --messages) messages=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    *) echo "usage: benches/multiplex_n_to_1.sh [--mpich 5|deb] [--reps N] [--threads \"1 2 4\"] [--messages N] [--window W]" >&2; exit 2 ;;
  esac
done
out=$root/results; bin=$root/build/bench; mkdir -p "$out" "$bin"
cargo build --release --quiet || exit 1
mpich_select "$mpich"
[ "$mpich" = deb ] && variants="multiplex percomm named blocking"   # Debian's MPICH: everything is locked anyway
"$MPICC" -O2 -Wall -Wno-stringop-overflow -Iinclude benches/multiplex_n_to_1.c -o "$bin/multiplex_n_to_1-$mpich" \
  -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread || exit 1

csv=$out/multiplex_n_to_1.csv
echo "variant,threads,rep,rate,seconds" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s)
echo "N-to-1: T sender threads (rank 1) -> 1 polling thread (rank 0), 8-byte messages, $([ "$messages" = auto ] && echo "1000000/T" || echo "$messages") messages per sender, window $window, MPICH $mpich, $reps repetitions, T in {$threads}"
for r in $(seq "$reps"); do
  for T in $threads; do
    for v in $variants; do
      mode=$v; backend=${MPIXSTREAM_BACKEND:-auto}
      [ "$v" = percomm-locked ] && { mode=percomm; backend=serial; }
      n=$messages; [ "$n" = auto ] && n=$((1000000 / T))
      line=$(MPIXSTREAM_BACKEND=$backend MPIXSTREAM_STREAMS=$((T + 1)) timeout 120 scripts/mpixrun -n 2 "$bin/multiplex_n_to_1-$mpich" "$mode" "$T" "$n" "$window" </dev/null 2>/dev/null | grep '^RESULT' | tail -1)
      get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
      if [ -z "$line" ]; then echo "  rep $r T=$T $v: no result"; echo "$v,$T,$r,," >>"$csv"; continue; fi
      echo "$v,$T,$r,$(get rate),$(get seconds)" >>"$csv"
    done
  done
  echo "  repetition $r/$reps done ($(( $(date +%s) - start )) s)"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)

python3 - "$csv" "$out" "$(nproc)" "$load_before" "$load_after" "$mpich" "$messages" "$window" "$reps" <<'PY'
import csv, json, statistics, sys
path, out, cores, lb, la, mpich, messages, window, reps = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
variants = list(dict.fromkeys(r["variant"] for r in rows))
threads = sorted({int(r["threads"]) for r in rows})
def rates(v, t):
    return {r["rep"]: float(r["rate"]) for r in rows if r["variant"] == v and int(r["threads"]) == t and r["rate"]}
summary, ratios = {}, {}
for v in variants:
    for t in threads:
        x = list(rates(v, t).values())
        if x:
            summary.setdefault(v, {})[t] = {"median": statistics.median(x), "min": min(x), "max": max(x), "n": len(x)}
for name, a, b in [("multiplex / percomm", "multiplex", "percomm"), ("named / percomm", "named", "percomm"),
                   ("blocking / percomm", "blocking", "percomm"),
                   ("multiplex / percomm-locked", "multiplex", "percomm-locked")]:
    for t in threads:
        pa, pb = rates(a, t), rates(b, t)
        paired = [pa[k] / pb[k] for k in pa if k in pb and pb[k] > 0]
        if paired and t in summary.get(a, {}) and t in summary.get(b, {}):
            ratios.setdefault(name, {})[t] = {"median_paired": statistics.median(paired), "min": min(paired),
                                              "max": max(paired),
                                              "of_medians": summary[a][t]["median"] / summary[b][t]["median"]}
fmt = lambda x: f"{x / 1e3:,.0f}k"
lines = [f"N-to-1 message rate (msg/s), MPICH {mpich}, 8-byte messages, {'1000000/T' if messages == 'auto' else messages} per sender thread, window {window}, "
         f"{reps} repetitions, variants interleaved",
         f"machine: {cores} cores, load average {lb} -> {la}; rank 1's T sender threads share the cores with rank 0's "
         f"poller, so compare ratios within this run, not absolute rates",
         "",
         "median [min..max]",
         f"{'variant':<16}" + "".join(f"{'T=' + str(t):>26}" for t in threads)]
for v in variants:
    cells = []
    for t in threads:
        q = summary.get(v, {}).get(t)
        cells.append(f"{fmt(q['median'])} [{fmt(q['min'])}..{fmt(q['max'])}]" if q else "n/a")
    lines.append(f"{v:<16}" + "".join(f"{c:>26}" for c in cells))
lines += ["", "ratio: median of per-repetition ratios [min..max] (ratio of medians)",
          f"{'':<28}" + "".join(f"{'T=' + str(t):>26}" for t in threads)]
for name in ratios:
    cells = []
    for t in threads:
        q = ratios[name].get(t)
        cells.append(f"{q['median_paired']:.2f} [{q['min']:.2f}..{q['max']:.2f}] ({q['of_medians']:.2f})" if q else "n/a")
    lines.append(f"{name:<28}" + "".join(f"{c:>26}" for c in cells))
text = "\n".join(lines)
print(text)
open(f"{out}/multiplex_n_to_1.txt", "w").write(text + "\n")
json.dump({"benchmark": "benches/multiplex_n_to_1.c", "mpich": mpich, "messages_per_sender": messages if messages == "auto" else int(messages),
           "window": int(window), "reps": int(reps), "cores": int(cores), "load_before": float(lb),
           "load_after": float(la), "threads": threads, "summary": summary, "ratios": ratios},
          open(f"{out}/multiplex_n_to_1.json", "w"), indent=1)
PY
echo "wrote $out/multiplex_n_to_1.csv, .txt, .json ($(( $(date +%s) - start )) s)"

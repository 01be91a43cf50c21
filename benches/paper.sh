#!/usr/bin/env bash
# The seed paper's benchmark (benches/paper_msgrate.c: 2 processes x T threads, thread i -> thread i on
# its own communicator, 8-byte messages, windowed Isend/Irecv) in every variant, one run:
#   deb-4.0.2           Debian MPICH 4.0.2, unmodified (MPI_Comm_dup) binary, no library: global lock
#   mpich5-implicit-1   MPICH 5.0.2, unmodified binary under libmpixstream.so, policy implicit, NUM_VCIS=1
#   mpich5-implicit-T   the same with MPIR_CVAR_CH4_NUM_VCIS=T (MPICH's round robin puts communicators on T VCIs)
#   mpich5-nolocal-1    mpich5-implicit-1 with MPIR_CVAR_NOLOCAL=1: same-node messages through UCX, as Debian's
#                       4.0.2 sends them, instead of MPICH's shared memory (docs/performance.md, the gap to Debian)
#   mpich5-native       MPIX-API binary (stream comms) on MPICH 5.0.2, WITHOUT our library, RESERVE_VCIS=T
#   mpich5-explicit     the unmodified binary under our explicit policy (MPIXSTREAM_STREAMS=T)
#   mpich5-mpix-lib     the MPIX-API binary under our library (MPIXSTREAM_STREAMS=T)
#   mpich5-explicit-check   mpich5-explicit with MPIXSTREAM_CHECK=1 (cost of the checking mode)
#   mpich5-explicit-report  mpich5-explicit with MPIXSTREAM_REPORT (cost of the counters)
# and with --impi (Intel MPI 2021.19, scripts/install.sh --mpich impi; its shm transport):
#   impi-implicit       the unmodified binary built with Intel MPI under libmpixstream.so, policy implicit
#                       (serial backend: Intel MPI's implicit mode, one endpoint)
#   impi-split-explicit the same under the explicit policy on the split backend (each thread's
#                       communicator on its own thread-split endpoint, MPIXSTREAM_STREAMS=T)
#   impi-split-mpix     the MPIX-API binary on the split backend
# Variants are interleaved within each repetition, so that ratios compare runs made under the same load.
# Writes results/paper.csv (every run), results/paper.json (medians, spreads, ratios), results/paper.txt
# (the table, also printed), results/paper-report.json (the explicit policy's traffic report at the
# largest T) and results/paper.png (scripts/plot.py); then benches/check_cost.sh (per-call cost of the
# counters and of the checking mode: results/check_cost.txt).
# Each run measures for SECONDS per thread pair (time-bounded, so it lasts the same on a busy machine).
#   benches/paper.sh [--reps N] [--threads "1 2 4"] [--seconds S] [--window W] [--quick] [--impi | --impi-only]
#                    [--variants "..."] [--mpich NAME] [--hosts LIST] [--out DIR]
# --impi-only: the three Intel MPI variants alone, into results/impi/, without benches/check_cost.sh.
# --variants: these variants only; --mpich: the build of the mpich5-* variants (default 5; 5-ofi: over
# ch4:ofi); --hosts: every run across these hosts (Hydra's -hosts list, e.g. h1,h2: one rank on each;
# simulated ones of scripts/hosts.sh too), without benches/check_cost.sh; --out: the results' folder.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
reps=5; threads="1 2 4"; seconds=0.4; window=64; warmup=0.05; cc_reps=5; impi=0; only=""; m5=5; hosts=""; out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --quick) reps=1; threads="1 2"; seconds=0.2; cc_reps=2; shift ;;
    --impi) impi=1; shift ;;
    --impi-only) impi=2; shift ;;
    --variants) only=$2; shift 2 ;;
    --mpich) m5=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: benches/paper.sh [--reps N] [--threads \"1 2 4\"] [--seconds S] [--window W] [--quick] [--impi | --impi-only] [--variants \"...\"] [--mpich NAME] [--hosts LIST] [--out DIR]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench
if [ -z "$out" ]; then out=$root/results; [ $impi -eq 2 ] && out=$root/results/impi; fi
mkdir -p "$out" "$bin"
lib=$MPIXSTREAM_LIB
[ -f "$lib" ] && [ -f "$(dirname "$lib")/libmpixstream_tools.so" ] || { echo "paper.sh: build first: cargo build --release" >&2; exit 2; }

mpich_select deb; "$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-deb" -lpthread || exit 1
mpich_select "$m5" || exit 2
"$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-5" -lpthread || exit 1
"$MPICC" -O2 -Wno-stringop-overflow -DUSE_MPIX benches/paper_msgrate.c -o "$bin/paper-5-mpix" -lpthread || exit 1

variants="deb-4.0.2 mpich5-implicit-1 mpich5-nolocal-1 mpich5-implicit-T mpich5-native mpich5-explicit mpich5-mpix-lib mpich5-explicit-check mpich5-explicit-report"
if [ $impi -ge 1 ]; then
  mpich_select impi || { echo "paper.sh: --impi needs scripts/install.sh --mpich impi" >&2; exit 2; }
  "$MPICC" -O2 -Wno-stringop-overflow benches/paper_msgrate.c -o "$bin/paper-impi" -lpthread || exit 1
  "$MPICC" -O2 -Wno-stringop-overflow -DUSE_MPIX -Iinclude -include mpix_stream.h benches/paper_msgrate.c \
    -o "$bin/paper-impi-mpix" -L"$(dirname "$lib")" -lmpixstream -Wl,-rpath,"$(dirname "$lib")" -lpthread || exit 1
  variants="$variants impi-implicit impi-split-explicit impi-split-mpix"
  [ $impi -eq 2 ] && variants="impi-implicit impi-split-explicit impi-split-mpix"
fi
[ -n "$only" ] && variants=$only
maxt=$(echo $threads | tr ' ' '\n' | sort -n | tail -1)
# use NAME: selects that MPICH and sets mpx (its mpiexec, across --hosts) and across (mpixrun's --hosts).
mpx=() across=()
use() {
  mpich_select "$1" || return
  mpx=("$MPIEXEC") across=()
  if [ -n "$hosts" ]; then
    mpiexec_across -hosts "$hosts" && mpx=("${MPIEXEC_ACROSS[@]}") across=(--hosts "$hosts")
  fi
}

run_variant() { # variant T -> prints the RESULT line (or nothing)
  local v=$1 T=$2 args=("$2" "$window" "$seconds" "$warmup")
  case "$v" in
    deb-4.0.2) use deb; timeout 120 "${mpx[@]}" -n 2 "$bin/paper-deb" "${args[@]}" ;;
    mpich5-implicit-1) use "$m5"
      MPIXSTREAM_POLICY=implicit MPIXSTREAM_IMPLICIT_VCIS=1 timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" ;;
    mpich5-nolocal-1) use "$m5"
      MPIXSTREAM_POLICY=implicit MPIXSTREAM_IMPLICIT_VCIS=1 MPIR_CVAR_NOLOCAL=1 timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" ;;
    mpich5-implicit-T) use "$m5"
      MPIXSTREAM_POLICY=implicit MPIR_CVAR_CH4_NUM_VCIS=$T timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" ;;
    mpich5-native) use "$m5"
      MPIR_CVAR_CH4_NUM_VCIS=1 MPIR_CVAR_CH4_RESERVE_VCIS=$T timeout 120 "${mpx[@]}" -n 2 "$bin/paper-5-mpix" "${args[@]}" ;;
    mpich5-explicit) use "$m5"
      MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" ;;
    mpich5-mpix-lib) use "$m5"
      MPIXSTREAM_STREAMS=$T timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5-mpix" "${args[@]}" ;;
    mpich5-explicit-check) use "$m5"
      MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T MPIXSTREAM_CHECK=1 timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" ;;
    impi-implicit) use impi
      MPIXSTREAM_POLICY=implicit timeout 120 scripts/mpixrun --mpich impi "${across[@]}" -n 2 "$bin/paper-impi" "${args[@]}" ;;
    impi-split-explicit) use impi
      MPIXSTREAM_BACKEND=split MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T timeout 120 scripts/mpixrun --mpich impi "${across[@]}" -n 2 "$bin/paper-impi" "${args[@]}" ;;
    impi-split-mpix) use impi
      MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=$T timeout 120 scripts/mpixrun --mpich impi "${across[@]}" -n 2 "$bin/paper-impi-mpix" "${args[@]}" ;;
    mpich5-explicit-report) use "$m5"
      local rep=$out/.report-tmp.json
      [ "$T" = "$maxt" ] && rep=$out/paper-report.json
      MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T MPIXSTREAM_REPORT=$rep timeout 120 scripts/mpixrun "${across[@]}" -n 2 "$bin/paper-5" "${args[@]}" 2>/dev/null ;;
  esac
}

csv=$out/paper.csv
echo "variant,threads,rep,total_rate,min_thread_rate,max_thread_rate" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s)
echo "paper benchmark: 2 ranks x T threads, 8-byte messages, window $window, ${seconds} s per run (+${warmup} s warm-up), $reps repetitions, T in {$threads}"
echo "machine: $(nproc) cores; load average $load_before at start. Few cores: T threads per rank oversubscribe them, so compare ratios within this run, not absolute rates."
for r in $(seq "$reps"); do
  for T in $threads; do
    for v in $variants; do
      line=$(run_variant "$v" "$T" </dev/null 2>/dev/null | grep '^RESULT' | tail -1)
      if [ -z "$line" ]; then
        echo "  rep $r T=$T $v: no result (failed or timed out)"
        echo "$v,$T,$r,,," >>"$csv"
        continue
      fi
      get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
      echo "$v,$T,$r,$(get total_rate),$(get min_thread_rate),$(get max_thread_rate)" >>"$csv"
    done
  done
  echo "  repetition $r/$reps done ($(( $(date +%s) - start )) s)"
done
rm -f "$out/.report-tmp.json"
load_after=$(cut -d' ' -f1 /proc/loadavg)

python3 - "$csv" "$out" "$(nproc)" "$load_before" "$load_after" "$window" "$seconds" "$reps" <<'PY'
import csv, json, statistics, sys
path, out, cores, lb, la, window, seconds, reps = sys.argv[1:]
rows = [r for r in csv.DictReader(open(path))]
variants = list(dict.fromkeys(r["variant"] for r in rows))
threads = sorted({int(r["threads"]) for r in rows})
def vals(v, t, key="total_rate"):
    return [float(r[key]) for r in rows if r["variant"] == v and int(r["threads"]) == t and r[key]]
def per_rep(v, t):
    return {r["rep"]: float(r["total_rate"]) for r in rows if r["variant"] == v and int(r["threads"]) == t and r["total_rate"]}
summary = {}
for v in variants:
    for t in threads:
        x = vals(v, t)
        if not x:
            continue
        m = statistics.median(x)
        summary.setdefault(v, {})[t] = {
            "median": m, "best": max(x), "min": min(x), "n": len(x),
            "spread_pct": (max(x) - min(x)) / m * 100 if m else 0,
            "per_thread_median": m / t,
            "slowest_thread_median": statistics.median(vals(v, t, "min_thread_rate")),
        }
RATIOS = [
    ("explicit / implicit-1", "mpich5-explicit", "mpich5-implicit-1"),
    ("explicit / implicit-T", "mpich5-explicit", "mpich5-implicit-T"),
    ("explicit-policy / native-stream", "mpich5-explicit", "mpich5-native"),
    ("mpix-under-lib / native-stream", "mpich5-mpix-lib", "mpich5-native"),
    ("native-stream / implicit-1", "mpich5-native", "mpich5-implicit-1"),
    ("implicit-1 / deb-4.0.2", "mpich5-implicit-1", "deb-4.0.2"),
    ("nolocal-1 / implicit-1 (shm vs UCX)", "mpich5-nolocal-1", "mpich5-implicit-1"),
    ("nolocal-1 / deb-4.0.2", "mpich5-nolocal-1", "deb-4.0.2"),
    ("checked / explicit (check cost)", "mpich5-explicit-check", "mpich5-explicit"),
    ("counted / explicit (report cost)", "mpich5-explicit-report", "mpich5-explicit"),
    ("impi split-explicit / impi implicit", "impi-split-explicit", "impi-implicit"),
    ("impi split-mpix / impi implicit", "impi-split-mpix", "impi-implicit"),
]
ratios = {}
for name, a, b in RATIOS:
    for t in threads:
        pa, pb = per_rep(a, t), per_rep(b, t)
        paired = [pa[k] / pb[k] for k in pa if k in pb and pb[k] > 0]
        if paired:
            ratios.setdefault(name, {})[t] = {
                "median_paired": statistics.median(paired), "min": min(paired), "max": max(paired),
                "of_medians": summary[a][t]["median"] / summary[b][t]["median"],
                "of_bests": summary[a][t]["best"] / summary[b][t]["best"]}
fmt = lambda x: f"{x / 1e3:,.0f}k" if x < 1e6 else f"{x / 1e6:,.2f}M"
lines = []
lines.append(f"Message rate, 8-byte messages, 2 ranks x T threads (one communicator per thread pair), window {window}, "
             f"{seconds} s per run, {reps} repetitions, variants interleaved")
lines.append(f"machine: {cores} cores, load average {lb} -> {la} during the run (other jobs share it). 2 ranks x T busy-polling "
             f"threads oversubscribe {cores} cores for T > 1, so absolute rates mean little; compare ratios within this run.")
lines.append("")
lines.append("total message rate (msg/s): median [min..max] over repetitions; pt = median per thread (total / T)")
lines.append(f"{'variant':<24}" + "".join(f"{'T=' + str(t):>32}" for t in threads))
for v in variants:
    cells = []
    for t in threads:
        q = summary.get(v, {}).get(t)
        cells.append(f"{fmt(q['median'])} [{fmt(q['min'])}..{fmt(q['best'])}] pt {fmt(q['per_thread_median'])}" if q else "n/a")
    lines.append(f"{v:<24}" + "".join(f"{c:>32}" for c in cells))
lines.append("")
lines.append("ratios: median of per-repetition ratios [min..max]; (best/best)")
lines.append(f"{'':<34}" + "".join(f"{'T=' + str(t):>28}" for t in threads))
for name, _, _ in RATIOS:
    cells = []
    for t in threads:
        q = ratios.get(name, {}).get(t)
        cells.append(f"{q['median_paired']:.2f} [{q['min']:.2f}..{q['max']:.2f}] ({q['of_bests']:.2f})" if q else "n/a")
    lines.append(f"{name:<34}" + "".join(f"{c:>28}" for c in cells))
text = "\n".join(lines)
print(text)
open(f"{out}/paper.txt", "w").write(text + "\n")
json.dump({"benchmark": "benches/paper_msgrate.c", "window": int(window), "seconds": float(seconds), "reps": int(reps),
           "cores": int(cores), "load_before": float(lb), "load_after": float(la), "threads": threads,
           "summary": summary, "ratios": ratios}, open(f"{out}/paper.json", "w"), indent=1)
PY
echo
[ $impi -eq 2 ] || [ -n "$hosts" ] || bash benches/check_cost.sh "$cc_reps" 200000
PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH} python3 scripts/plot.py "$out/paper.csv" --report "$out/paper-report.json" -o "$out/paper.png" \
  && echo "wrote $out/paper.csv, paper.json, paper.txt, paper-report.json, paper.png, check_cost.txt ($(( $(date +%s) - start )) s)"

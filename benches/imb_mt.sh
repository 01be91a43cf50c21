#!/usr/bin/env bash
# IMB-MT's shape (benches/imb_mt.c: 2 ranks x T threads, MPI_THREAD_MULTIPLE, one MPI_Comm_dup per
# thread; ping-pong 8 and 512 bytes, MPI_Sendrecv, a bidirectional window of 64, a small allreduce),
# variants interleaved in one run, their order rotating from one repetition to the next:
#   none        the unmodified binary, no library (MPICH alone)
#   implicit    the same under libmpixstream.so, MPIXSTREAM_POLICY=implicit
#   implicit-T  implicit with MPICH's implicit pool at T VCIs (MPIXSTREAM_IMPLICIT_VCIS=T: MPICH's
#               round robin spreads the dups over them)
#   explicit    the same under MPIXSTREAM_POLICY=explicit (each dup a native stream communicator)
#   explicit-T  explicit with a pool of T streams (MPIXSTREAM_STREAMS=T: as many reserved VCIs as native)
#   native      (MPICH >= 4.1) the -DUSE_MPIX build WITHOUT the library: MPIX_Stream_create +
#               MPIX_Stream_comm_create per thread, MPIR_CVAR_CH4_RESERVE_VCIS=T; its sendrecv is
#               Irecv + Send + Wait (MPICH's Sendrecv hangs there), as the library's route
#   explicit-before  (--lib-before PATH) explicit with another build of the library
#   NAME        (--extra 'NAME=KEY=VAL ...') the binary under the library with those settings (policy
#               explicit unless they say otherwise; {T} stands for T), e.g. --extra 'streamsT=MPIXSTREAM_STREAMS={T}'
# Prints medians [min..max] over repetitions per metric and T, and speed ratios (1/latency, bandwidth:
# above 1, the first variant is faster): the median of per-repetition ratios [min..max] and, in
# parentheses, best / best (the noise of a shared machine only ever slows a run down).
# Writes results/imb_mt.{csv,txt,json} ($OUT instead of results/ if set). A default run (9
# repetitions) measures for about 2 minutes here.
#   benches/imb_mt.sh [--mpich 5|deb] [--reps N] [--threads "1 2 4"] [--seconds S] [--variants "..."]
#                     [--biband-bytes N (8)] [--lib-before PATH] [--extra 'NAME=KEY=VAL ...']... [--lock FILE] [--no-build]
#                     [--hosts LIST]
#   benches/imb_mt.sh --table CSV      (the table of a CSV this script wrote; writes nothing)
# --lock FILE: each repetition runs under flock FILE (a machine shared with other jobs: the lock is
# held one repetition at a time, never for the whole run). --no-build: no cargo, and the benchmark
# binaries already in build/bench are used (a device machine: scripts/device_bench.sh). --hosts: every
# run across these hosts (Hydra's -hosts list, e.g. h1,h2: one rank on each; simulated ones of
# scripts/hosts.sh too).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=9; threads="1 2 4"; seconds=0.1; warmup=0.02; variants=""; before=""; lock=""; extras=(); build=1; table=""; bibytes=8; hosts=""
usage="usage: benches/imb_mt.sh [--mpich 5|deb] [--reps N] [--threads \"1 2 4\"] [--seconds S] [--variants \"none implicit implicit-T explicit explicit-T native\"] [--biband-bytes N] [--lib-before PATH] [--extra 'NAME=KEY=VAL ...'] [--lock FILE] [--no-build] | --table CSV"
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --lib-before) before=$(readlink -f "$2"); shift 2 ;;
    --extra) extras+=("$2"); shift 2 ;;
    --lock) lock=$2; shift 2 ;;
    --biband-bytes) bibytes=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --table) table=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
out=${OUT:-$root/results}; bin=$root/build/bench

# The table of a CSV: variants in order of appearance, medians, paired ratios. Writes .txt and .json
# beside the CSV unless WRITE=0.
summarise() { # csv mpich seconds load_before load_after variants write
  python3 - "$@" "$(nproc)" <<'PY'
import csv, json, os, statistics, sys
path, mpich, seconds, lb, la, variants, write, cores = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
known = ["none", "implicit", "implicit-T", "explicit", "explicit-T", "native", "explicit-before"]
variants = variants.split() or sorted(dict.fromkeys(r["variant"] for r in rows),
                                      key=lambda v: known.index(v) if v in known else len(known))
reps = len({r["rep"] for r in rows})
threads = sorted({int(r["threads"]) for r in rows})
metrics = [("pp8_us", "pp8 (us)", False), ("pp512_us", "pp512 (us)", False), ("sendrecv_us", "sendrecv (us)", False),
           ("biband_MBps", "biband (MB/s)", True), ("allreduce_us", "allreduce (us)", False)]
def values(v, t, m):
    return {r["rep"]: float(r[m]) for r in rows if r["variant"] == v and int(r["threads"]) == t and r[m]}
summary, ratios = {}, {}
for m, _, higher in metrics:
    for v in variants:
        for t in threads:
            x = list(values(v, t, m).values())
            if x:
                summary.setdefault(m, {}).setdefault(v, {})[t] = {"median": statistics.median(x), "min": min(x), "max": max(x),
                                                                  "best": max(x) if higher else min(x), "n": len(x)}
pairs = [(a, b) for a, b in [("explicit", "none"), ("explicit", "implicit"), ("implicit", "none"), ("native", "none"),
                             ("explicit", "native"), ("explicit", "explicit-before"), ("explicit", "implicit-T"),
                             ("explicit-T", "implicit-T"), ("explicit-T", "native")] if a in variants and b in variants]
pairs += [(v, "explicit") for v in variants
          if v not in ("none", "implicit", "implicit-T", "explicit", "explicit-T", "native", "explicit-before")]
for m, _, higher in metrics:
    for a, b in pairs:
        for t in threads:
            pa, pb = values(a, t, m), values(b, t, m)
            # speed ratio: above 1, a is faster (latencies inverted)
            paired = [(pa[k] / pb[k]) if higher else (pb[k] / pa[k]) for k in pa if k in pb and pa[k] > 0 and pb[k] > 0]
            if paired:
                sa, sb = summary[m][a][t]["best"], summary[m][b][t]["best"]
                ratios.setdefault(m, {}).setdefault(f"{a}/{b}", {})[t] = {
                    "median": statistics.median(paired), "min": min(paired), "max": max(paired),
                    "best_over_best": (sa / sb) if higher else (sb / sa)}
lines = [f"IMB-MT shape, MPICH {mpich}, 2 ranks x T threads (one MPI_Comm_dup each), {seconds} s per metric, {reps} repetitions, variants rotated",
         f"machine: {cores} cores, load average {lb} -> {la}; 2 x T busy threads oversubscribe {cores} cores where 2 x T > {cores}: compare within this run",
         "", "median [min..max] over repetitions (a thread's figure: its median 1/10 slice of the run; latencies: mean over threads; bandwidth: sum, both ways)",
         f"{'metric':<15}{'variant':<11}" + "".join(f"{'T=' + str(t):>30}" for t in threads)]
for m, label, _ in metrics:
    for i, v in enumerate(variants):
        cells = []
        for t in threads:
            q = summary.get(m, {}).get(v, {}).get(t)
            cells.append(f"{q['median']:.2f} [{q['min']:.2f}..{q['max']:.2f}]" if q else "n/a")
        lines.append(f"{label if i == 0 else '':<15}{v:<11}" + "".join(f"{c:>30}" for c in cells))
lines += ["", "speed ratios (1/latency; bandwidth): above 1 the first is faster; median of per-repetition ratios [min..max] (best/best)",
          f"{'metric':<15}{'ratio':<22}" + "".join(f"{'T=' + str(t):>29}" for t in threads)]
for m, label, _ in metrics:
    for i, (name, per_t) in enumerate(ratios.get(m, {}).items()):
        cells = [f"{q['median']:.2f} [{q['min']:.2f}..{q['max']:.2f}] ({q['best_over_best']:.2f})" if (q := per_t.get(t)) else "n/a"
                 for t in threads]
        lines.append(f"{label if i == 0 else '':<15}{name:<22}" + "".join(f"{c:>29}" for c in cells))
text = "\n".join(lines)
print(text)
if write == "1":
    base = os.path.splitext(path)[0]
    open(base + ".txt", "w").write(text + "\n")
    json.dump({"benchmark": "benches/imb_mt.c", "mpich": mpich, "seconds": float(seconds), "reps": reps, "cores": int(cores),
               "load_before": lb, "load_after": la, "threads": threads, "variants": variants,
               "summary": summary, "ratios": ratios}, open(base + ".json", "w"), indent=1)
PY
}
if [ -n "$table" ]; then
  summarise "$table" "$mpich" "$seconds" "?" "?" "" 0
  exit
fi

mkdir -p "$out" "$bin"
if [ $build -eq 1 ]; then cargo build --release --quiet || exit 1; fi
[ -f "$MPIXSTREAM_LIB" ] || { echo "imb_mt.sh: no $MPIXSTREAM_LIB (cargo build --release)" >&2; exit 2; }
mpich_select "$mpich" || exit 2
mpx=("$MPIEXEC") across=()
if [ -n "$hosts" ]; then
  mpiexec_across -hosts "$hosts" || exit 2
  mpx=("${MPIEXEC_ACROSS[@]}") across=(--hosts "$hosts")
fi
compile() { # binary cflags...; with --no-build a binary already there is used as it is
  [ $build -eq 0 ] && [ -x "$1" ] && return 0
  local o=$1; shift
  "$MPICC" -O2 -Wall -Wno-stringop-overflow "$@" benches/imb_mt.c -o "$o" -lpthread
}
compile "$bin/imb_mt-$MPICH_NAME" || exit 1
if [ -z "$variants" ]; then
  variants="none implicit explicit"
  [ "$MPICH_BACKEND" = native ] && variants+=" native"
fi
[ -n "$before" ] && variants+=" explicit-before"
for e in "${extras[@]}"; do variants+=" ${e%%=*}"; done
case " $variants " in
  *" native "*) compile "$bin/imb_mt-$MPICH_NAME-mpix" -DUSE_MPIX || exit 1 ;;
esac

run_variant() { # variant T -> the RESULT line (or nothing)
  local v=$1 T=$2 args=("$bin/imb_mt-$MPICH_NAME" "$2" "$seconds" "$warmup" all "$bibytes") e
  case "$v" in
    none) timeout 60 "${mpx[@]}" -n 2 "${args[@]}" ;;
    implicit) MPIXSTREAM_POLICY=implicit timeout 60 scripts/mpixrun "${across[@]}" -n 2 "${args[@]}" ;;
    implicit-T) MPIXSTREAM_POLICY=implicit MPIXSTREAM_IMPLICIT_VCIS=$T timeout 60 scripts/mpixrun "${across[@]}" -n 2 "${args[@]}" ;;
    explicit) MPIXSTREAM_POLICY=explicit timeout 60 scripts/mpixrun "${across[@]}" -n 2 "${args[@]}" ;;
    explicit-T) MPIXSTREAM_POLICY=explicit MPIXSTREAM_STREAMS=$T timeout 60 scripts/mpixrun "${across[@]}" -n 2 "${args[@]}" ;;
    native) MPIR_CVAR_CH4_RESERVE_VCIS=$T timeout 60 "${mpx[@]}" -n 2 "$bin/imb_mt-$MPICH_NAME-mpix" "${args[@]:1}" ;;
    explicit-before) MPIXSTREAM_POLICY=explicit timeout 60 scripts/mpixrun "${across[@]}" --lib "$before" -n 2 "${args[@]}" ;;
    *) for e in "${extras[@]}"; do
         [ "${e%%=*}" = "$v" ] || continue
         # shellcheck disable=SC2046
         env MPIXSTREAM_POLICY=explicit $(echo "${e#*=}" | sed "s/{T}/$T/g") timeout 60 scripts/mpixrun "${across[@]}" -n 2 "${args[@]}"
       done ;;
  esac
}

csv=$out/imb_mt.csv
echo "variant,threads,rep,pp8_us,pp512_us,sendrecv_us,biband_MBps,allreduce_us" >"$csv"
load_before=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s)
echo "IMB-MT shape: 2 ranks x T threads, one MPI_Comm_dup per thread, MPICH $mpich, biband $bibytes B, ${seconds} s per metric (+${warmup} s warm-up), $reps repetitions, T in {$threads}, variants: $variants"
read -r -a vs <<<"$variants"
nv=${#vs[@]}
[ -n "$lock" ] && exec 9>>"$lock"
for r in $(seq "$reps"); do
  [ -n "$lock" ] && flock 9   # held for this repetition only
  for T in $threads; do
    for k in $(seq 0 $((nv - 1))); do
      v=${vs[$(((k + r) % nv))]}
      line=$(run_variant "$v" "$T" </dev/null 2>/dev/null | grep '^RESULT' | tail -1)
      if [ -z "$line" ]; then echo "  rep $r T=$T $v: no result" >&2; bash scripts/shm_cleanup.sh; continue; fi
      get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
      echo "$v,$T,$r,$(get pp8_us),$(get pp512_us),$(get sendrecv_us),$(get biband_MBps),$(get allreduce_us)" >>"$csv"
    done
  done
  [ -n "$lock" ] && flock -u 9
  echo "  repetition $r/$reps done ($(( $(date +%s) - start )) s)"
done
summarise "$csv" "$mpich" "$seconds" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" "$variants" 1
echo "wrote $out/imb_mt.csv, .txt, .json ($(( $(date +%s) - start )) s)"

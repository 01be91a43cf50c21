#!/usr/bin/env bash
# Per-call cost of MPIX_Stream_isend on a multiplex communicator against MPI_Isend on a stream
# communicator of the same stream (benches/multiplex_send_cost.c: both in one process, alternating
# blocks). Prints the median over repetitions of each and of the per-run ratio.
#   benches/multiplex_send_cost.sh [--mpich 5|deb] [--reps N] [--windows N] [--libs NAME=DIR,NAME=DIR...]
# --libs compares builds of the library (each DIR holds a libmpixstream.so, e.g. a copy of
# target/release made before a change): every repetition runs each of them once, in an order that
# rotates from one repetition to the next, so that the machine's load changes hit every build alike;
# it also prints each build's ratio over the first build's, repetition by repetition.
# Default: the checkout's target/release alone, built first.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=5; windows=20000; libs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --windows) windows=$2; shift 2 ;;
    --libs) libs=$2; shift 2 ;;
    *) echo "usage: benches/multiplex_send_cost.sh [--mpich 5|deb] [--reps N] [--windows N] [--libs NAME=DIR,...]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench; mkdir -p "$bin"
if [ -z "$libs" ]; then
  cargo build --release --quiet || exit 1
  libs=current=$root/target/release
fi
names=(); dirs=()
for v in ${libs//,/ }; do
  [ -f "${v#*=}/libmpixstream.so" ] || { echo "no libmpixstream.so in ${v#*=}" >&2; exit 2; }
  names+=("${v%%=*}"); dirs+=("$(cd "${v#*=}" && pwd)")
done
mpich_select "$mpich"
# Linked against the library without a run path to it: each run finds the build it names on
# LD_LIBRARY_PATH, the same file as the one preloaded (one copy of the library in the process).
"$MPICC" -O2 -Wall -Iinclude benches/multiplex_send_cost.c -o "$bin/multiplex_send_cost-$mpich" \
  -L"${dirs[0]}" -lmpixstream || exit 1
n=${#names[@]}
results=()
for r in $(seq "$reps"); do
  for k in $(seq 0 $((n - 1))); do
    v=$(((k + r) % n))
    line=$(LD_LIBRARY_PATH=${dirs[$v]} MPIXSTREAM_STREAMS=1 timeout 120 scripts/mpixrun --lib "${dirs[$v]}/libmpixstream.so" \
      -n 2 "$bin/multiplex_send_cost-$mpich" "$windows" </dev/null 2>/dev/null | grep '^RESULT')
    [ -n "$line" ] || { bash scripts/shm_cleanup.sh; continue; }
    results+=("${names[$v]} $r $line")
  done
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows, by_rep = {}, {}
for l in sys.stdin:
    if l.strip():
        name, rep, _, *kv = l.split()
        row = dict(x.split("=") for x in kv)
        rows.setdefault(name, []).append(row)
        by_rep.setdefault(rep, {})[name] = float(row["ratio"])
order = sys.argv[1].split(",")
span = lambda x: f"{statistics.median(x):8.2f} [{min(x):.2f}..{max(x):.2f}]"
for name in order:
    got = rows.get(name, [])
    print(f"send cost per call, MPICH '"$mpich"', build {name}, {len(got)} repetitions (median [min..max]):")
    for k, what in (("stream_ns", "MPI_Isend, stream communicator"), ("multiplex_ns", "MPIX_Stream_isend, multiplex"), ("ratio", "ratio multiplex / stream")):
        x = [float(r[k]) for r in got]
        if x:
            print(f"  {what:34} {span(x)}" + (" ns" if k != "ratio" else ""))
# Builds against the first, repetition by repetition (the runs of one repetition are back to back).
for name in order[1:]:
    x = [r[name] / r[order[0]] for r in by_rep.values() if name in r and order[0] in r]
    if x:
        print(f"ratio of build {name} to build {order[0]}, same repetition: {span(x)} ({len(x)} pairs)")
' "$(IFS=,; echo "${names[*]}")"

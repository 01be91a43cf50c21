#!/usr/bin/env bash
# Per-call cost of MPIX_Stream_isend on a multiplex communicator against MPI_Isend on a stream
# communicator of the same stream (benches/multiplex_send_cost.c: both in one process, alternating
# blocks). Prints the median over repetitions of each and of the per-run ratio.
#   benches/multiplex_send_cost.sh [--mpich 5|deb] [--reps N] [--windows N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=5; windows=20000
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --windows) windows=$2; shift 2 ;;
    *) echo "usage: benches/multiplex_send_cost.sh [--mpich 5|deb] [--reps N] [--windows N]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench; mkdir -p "$bin"
cargo build --release --quiet || exit 1
mpich_select "$mpich"
"$MPICC" -O2 -Wall -Iinclude benches/multiplex_send_cost.c -o "$bin/multiplex_send_cost-$mpich" \
  -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" || exit 1
results=()
for r in $(seq "$reps"); do
  line=$(MPIXSTREAM_STREAMS=1 timeout 120 scripts/mpixrun -n 2 "$bin/multiplex_send_cost-$mpich" "$windows" </dev/null 2>/dev/null | grep '^RESULT')
  [ -n "$line" ] || { bash scripts/shm_cleanup.sh; continue; }
  results+=("$line")
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) for l in sys.stdin if l.strip()]
m = lambda k: [float(r[k]) for r in rows]
print(f"send cost per call, MPICH '"$mpich"', {len(rows)} repetitions (median [min..max]):")
for k, what in (("stream_ns", "MPI_Isend, stream communicator"), ("multiplex_ns", "MPIX_Stream_isend, multiplex"), ("ratio", "ratio multiplex / stream")):
    x = m(k)
    print(f"  {what:34} {statistics.median(x):8.2f} [{min(x):.2f}..{max(x):.2f}]" + (" ns" if k != "ratio" else ""))
'

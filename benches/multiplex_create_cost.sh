#!/usr/bin/env bash
# Creation cost of multiplex stream communicators (benches/multiplex_create_cost.c): N processes each
# attach S streams to a multiplex communicator of MPI_COMM_WORLD. Per (N, S): the slowest process's
# time of MPIX_Stream_comm_create_multiplex and of MPI_Comm_free (medians over repetitions), MPI_Comm_dup
# of MPI_COMM_WORLD in the same run for reference, and the growth of resident memory per communicator
# kept alive. The hidden communicators per multiplex communicator follow docs/multiplex.md ("Cost"):
# 2S + S(S-1)B with B = ceil(log2 N) in the streams layout (native backend), S in the pooled one
# (serial backend).
#   benches/multiplex_create_cost.sh [--mpich 5|deb] [--reps N] [--ranks "2 4"] [--streams "1 2 4 8"]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=15; ranks="2 4"; streams="1 2 4 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    *) echo "usage: benches/multiplex_create_cost.sh [--mpich 5|deb] [--reps N] [--ranks \"2 4\"] [--streams \"1 2 4 8\"]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench; mkdir -p "$bin"
cargo build --release --quiet || exit 1
mpich_select "$mpich"
"$MPICC" -O2 -Wall -Iinclude benches/multiplex_create_cost.c -o "$bin/multiplex_create_cost-$mpich" \
  -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" || exit 1
layout=streams; [ "$mpich" = deb ] && layout=pooled
echo "multiplex creation, MPICH $mpich ($layout layout), $reps repetitions, medians of the slowest process"
printf '%5s %3s %7s %11s %13s %9s %9s %13s %14s\n' N S hidden create_us per_hidden_us free_us dup_us rss_kib/comm rss_kib/hidden
for n in $ranks; do
  for s in $streams; do
    line=$(MPIXSTREAM_STREAMS=$s timeout 300 scripts/mpixrun -n "$n" "$bin/multiplex_create_cost-$mpich" "$s" "$reps" </dev/null 2>/dev/null | grep '^RESULT')
    if [ -z "$line" ]; then echo "  N=$n S=$s: no result"; bash scripts/shm_cleanup.sh; continue; fi
    python3 - "$line" "$n" "$s" "$layout" <<'PY'
import math, sys
line, n, s, layout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = dict(kv.split("=") for kv in line.split()[1:])
b = math.ceil(math.log2(n)) if n > 1 else 0
hidden = 2 * s + s * (s - 1) * b if layout == "streams" else s
c, f, d, m = (float(r[k]) for k in ("create_us", "free_us", "dup_us", "rss_kib_per_comm"))
print(f"{n:5d} {s:3d} {hidden:7d} {c:11.1f} {c / hidden:13.1f} {f:9.1f} {d:9.1f} {m:13.0f} {m / hidden:14.1f}")
PY
  done
done

#!/usr/bin/env bash
# MPI_Sendrecv on a communicator the program made against MPI_Sendrecv on MPI_COMM_WORLD
# (benches/sendrecv_cost.c: both in one process, alternating blocks), under each policy, the policies
# alternating from run to run. Under explicit the dup is a native stream communicator whose Sendrecv
# mpixstream routes as Irecv + Isend + Waitall; under implicit the two are alike (the control).
# Prints, per policy, the median [min..max] over repetitions of each variant and of the per-run ratio.
#   benches/sendrecv_cost.sh [--mpich 5|deb] [--reps N] [--rounds N] [--msg BYTES]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich=5; reps=5; rounds=200000; msg=8
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --msg) msg=$2; shift 2 ;;
    *) echo "usage: benches/sendrecv_cost.sh [--mpich 5|deb] [--reps N] [--rounds N] [--msg BYTES]" >&2; exit 2 ;;
  esac
done
bin=$root/build/bench; mkdir -p "$bin"
cargo build --release --quiet || exit 1
mpich_select "$mpich"
"$MPICC" -O2 -Wall benches/sendrecv_cost.c -o "$bin/sendrecv_cost-$mpich" || exit 1
echo "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg), MPICH $mpich, $rounds exchanges of $msg bytes, $reps repetitions"
lines=()
for r in $(seq "$reps"); do
  order="implicit explicit"; [ $((r % 2)) -eq 0 ] && order="explicit implicit"
  for policy in $order; do
    line=$(MPIXSTREAM_POLICY=$policy timeout 300 scripts/mpixrun -n 2 "$bin/sendrecv_cost-$mpich" "$rounds" "$msg" \
      </dev/null 2>/dev/null | grep '^RESULT')
    [ -n "$line" ] || { echo "policy $policy: run $r failed"; bash scripts/shm_cleanup.sh; continue; }
    lines+=("$policy $line")
  done
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
rows = {}
for l in sys.stdin:
    f = l.split()
    if len(f) > 2:
        rows.setdefault(f[0], []).append(dict(kv.split("=") for kv in f[2:]))
what = (("dup_ns", "Sendrecv on the dup"), ("world_ns", "Sendrecv on MPI_COMM_WORLD"),
        ("manual_ns", "Irecv+Isend+Waitall on the dup"), ("ratio", "ratio dup / MPI_COMM_WORLD"))
for policy, rs in rows.items():
    print(f"policy {policy}, {len(rs)} runs, per exchange (median [min..max]):")
    for k, name in what:
        x = [float(r[k]) for r in rs]
        unit = "" if k == "ratio" else " ns"
        print(f"  {name:32} {statistics.median(x):9.3f} [{min(x):.3f}..{max(x):.3f}]{unit}")
'

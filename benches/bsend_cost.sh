#!/usr/bin/env bash
# Instructions per MPI_Bsend + MPI_Recv to self (benches/bsend_cost.c), counted with callgrind (independent of
# the machine's load), one process, on MPI_COMM_WORLD and on a dup of it, for: MPICH alone, the library
# under implicit, under explicit, and (BEFORE_LIB=path) another build of the library under explicit.
#   benches/bsend_cost.sh [MPICH=5] [ITERS=10000]   -> a table on stdout
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
mpich_select "${1:-5}"
iters=${2:-10000}
bin=$root/build/bench; mkdir -p "$bin"
"$MPICC" -O2 -fno-inline benches/bsend_cost.c -o "$bin/bsend_cost-$MPICH_NAME" || exit 1
count() { # $1 = label, then env assignments; prints per-iteration instructions of both loops
  local label=$1; shift
  local out=$bin/callgrind.bsend.$$
  env "$@" timeout 300 valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect=bsend_world --toggle-collect=bsend_dup "$bin/bsend_cost-$MPICH_NAME" "$iters" >/dev/null 2>&1 </dev/null
  python3 - "$out" "$iters" "$label" <<'PY'
import re, sys
path, iters, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# Inclusive cost of each loop function: callgrind_annotate --inclusive=yes
import subprocess
text = subprocess.run(["callgrind_annotate", "--inclusive=yes", path], capture_output=True, text=True).stdout
vals = {}
for line in text.splitlines():
    m = re.match(r"\s*([\d,]+)\s+\(.*?\)\s+.*:(bsend_world|bsend_dup)\b", line) or re.match(r"\s*([\d,]+)\s+.*:(bsend_world|bsend_dup)\b", line)
    if m: vals[m.group(2)] = int(m.group(1).replace(",", ""))
# warm-up runs iters/10 through the same functions
n = iters + iters // 10
print(f"{label:<34} world {vals.get('bsend_world', 0)/n:10.1f}   dup {vals.get('bsend_dup', 0)/n:10.1f}")
PY
  rm -f "$out"
}
echo "instructions per MPI_Bsend + MPI_Recv to self, MPICH $MPICH_NAME, $iters iterations (+10% warm-up)"
count "MPICH alone"
count "library, implicit" LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=implicit
count "library, explicit" LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit
if [ -n "${BEFORE_LIB:-}" ]; then
  count "before (BEFORE_LIB), implicit" LD_PRELOAD="$BEFORE_LIB" MPIXSTREAM_POLICY=implicit
  count "before (BEFORE_LIB), explicit" LD_PRELOAD="$BEFORE_LIB" MPIXSTREAM_POLICY=explicit
fi

#!/usr/bin/env bash
# Instructions per ucp_worker_progress call (benches/ucx_progress_cost.c), counted with callgrind
# (independent of the machine's load): UCX alone, and with the lean library preloaded, whose interposer
# (wrappers/src/ucx.rs) passes straight through outside MPI_Init; BEFORE_LIB=path adds another build.
# The UCX is the one bundled with PyPI's MPICH 5.0.2 (what ch4:ucx calls); the headers are the system's
# (UCX's API is stable across 1.x for these calls).
#   benches/ucx_progress_cost.sh [N=200000]   -> a table on stdout
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
n=${1:-200000}
ucx=$root/.deps/mpich5/lib/mpich
lib=${MPIXSTREAM_LIB:-$root/target/release/libmpixstream.so}
[ -f /usr/include/ucp/api/ucp.h ] || { echo "no UCX headers (/usr/include/ucp: apt-get install libucx-dev)"; exit 1; }
bin=$root/build/bench; mkdir -p "$bin"
cc -O2 benches/ucx_progress_cost.c -o "$bin/ucx_progress_cost" -L"$ucx" -Wl,-rpath,"$ucx" -l:libucp.so.0 -l:libucs.so.0 || exit 1
count() { # $1 = label, then env assignments
  local label=$1 out=$bin/callgrind.ucx.$$
  shift
  env "$@" UCX_TLS=self timeout 300 valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect=progress_loop "$bin/ucx_progress_cost" "$n" >/dev/null 2>&1 </dev/null
  local total
  total=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null | grep -E ':progress_loop ' | head -1 | awk '{gsub(",", "", $1); print $1}')
  rm -f "$out"
  python3 -c "import sys; print(f'{sys.argv[1]:<40} {int(sys.argv[2] or 0) / int(sys.argv[3]):8.1f}')" "$label" "${total:-0}" $((n + n / 10))
}
echo "instructions per ucp_worker_progress call, $((n + n / 10)) calls, UCX of MPICH 5.0.2 (UCX_TLS=self)"
count "UCX alone"
count "libmpixstream.so preloaded" LD_PRELOAD="$lib"
[ -n "${BEFORE_LIB:-}" ] && count "BEFORE_LIB preloaded" LD_PRELOAD="$BEFORE_LIB"
exit 0

#!/usr/bin/env bash
# Explicit endpoints against implicit ones and against MPICH's own stream communicators across two
# hosts, with the network in the way: the paper benchmark (benches/paper.sh) and IMB-MT's shape
# (benches/imb_mt.sh), one rank on each of two simulated hosts (scripts/hosts.sh), T threads each, on
# MPICH 5.0.2 over one netmod:
#   --netmod ofi   ch4:ofi, libfabric's tcp provider between the hosts (mpich_select 5-ofi)
#   --netmod ucx   ch4:ucx, UCX's tcp between the hosts (mpich_select 5, MPICH's default netmod): with
#                  more than one VCI MPICH's MPI_Init hangs there, the library routes around it
#                  (docs/native-defects.md, "More than one VCI over UCX's tcp between hosts"), so the
#                  variants under the library run; the native one cannot: one probe run (20 s) says
#                  whether it starts, and where it does not it is left out, the reason in the summary
# Variants, interleaved within each repetition (ratios compare runs made under the same load):
#   paper: mpich5-implicit-T (implicit policy, MPIR_CVAR_CH4_NUM_VCIS=T), mpich5-explicit (explicit
#          policy, MPIXSTREAM_STREAMS=T), mpich5-native (the MPIX-API binary WITHOUT the library,
#          MPIR_CVAR_CH4_RESERVE_VCIS=T)
#   IMB-MT: implicit-T (MPIXSTREAM_IMPLICIT_VCIS=T), explicit-T (MPIXSTREAM_STREAMS=T), native (the
#          -DUSE_MPIX build without the library, MPIR_CVAR_CH4_RESERVE_VCIS=T)
# Ratios (median of the per-repetition ratios [min..max]): explicit / implicit-T and explicit / native
# per T; above 1 explicit is faster (IMB-MT's latencies inverted).
# Link shapes, in turn (each set and put back under the lock, as the hosts are shared):
#   off           the bare veth pairs and bridge (the two cores bound the rate)
#   rate=1gbit    tbf on each host's link
#   rate=10mbit   tbf, low enough that 8-byte messages fill the link (the network bounds the rate)
# (a delay needs the kernel's sch_netem: `scripts/hosts.sh shape delay=10us` says whether it is there).
# Writes results/hosts/NETMOD/{paper,imb}-SHAPE/ (each script's CSV, JSON and table) and
# results/hosts/NETMOD/summary.txt (each run appended, headed by its command and date).
#   benches/hosts_net.sh [--netmod ofi|ucx (ofi)] [--reps N (5)] [--threads "1 2"]
#                        [--shapes "off rate=1gbit rate=10mbit"] [--lock FILE]
# --lock FILE: each benchmark of each shape (and the ucx probe) runs under flock FILE, the link's
# shape set and put back inside it (a machine shared with other jobs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
usage='usage: benches/hosts_net.sh [--netmod ofi|ucx] [--reps N] [--threads "1 2"] [--shapes "off rate=1gbit ..."] [--lock FILE]'
netmod=ofi; reps=5; threads="1 2"; shapes="off rate=1gbit rate=10mbit"; lock=""
while [ $# -gt 0 ]; do
  case "$1" in
    --netmod) netmod=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --lock) lock=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case "$netmod" in
  ofi) mpich=5-ofi ;;
  ucx) mpich=5 ;;
  *) echo "hosts_net.sh: --netmod ofi or ucx, not '$netmod'" >&2; exit 2 ;;
esac
why=$(scripts/hosts.sh check) || { echo "hosts_net.sh: no simulated hosts here: $why" >&2; exit 2; }
scripts/hosts.sh owns h1 h2 || scripts/hosts.sh up 2 || exit 1
[ -f "$MPIXSTREAM_LIB" ] || { echo "hosts_net.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/results/hosts/$netmod
mkdir -p "$out" "$root/build/bench"
locked() { if [ -n "$lock" ]; then flock "$lock" "$@"; else "$@"; fi; }
# shaped SHAPE CMD...: CMD with the link shaped SHAPE, put back to bare afterwards.
shaped() {
  local shape=$1 rc; shift
  scripts/hosts.sh shape "$shape" >/dev/null || return 1
  "$@"; rc=$?
  scripts/hosts.sh shape off >/dev/null
  return $rc
}
export -f shaped
summary=$out/summary.txt
{
  echo "hosts_net.sh --netmod $netmod --reps $reps --threads \"$threads\" --shapes \"$shapes\", $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "MPICH 5.0.2 over ch4:$netmod, 2 simulated hosts x 1 rank, $(nproc) cores; $(uptime | sed 's/.*load/load/')"
} | tee -a "$summary"

paper_variants="mpich5-implicit-T mpich5-explicit mpich5-native"
imb_variants="implicit-T explicit-T native"
if [ "$netmod" = ucx ]; then
  # Does MPICH's own stream communicator start between the hosts without the library?
  mpich_select "$mpich" || exit 2
  "$MPICC" -O2 -Wno-stringop-overflow -DUSE_MPIX benches/paper_msgrate.c -o build/bench/paper-5-mpix -lpthread || exit 1
  mpiexec_across -hosts h1,h2 || exit 2
  probe() {
    MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 20 "${MPIEXEC_ACROSS[@]}" -n 2 build/bench/paper-5-mpix 1 64 0.2 0.05 \
      </dev/null 2>&1 | grep -q '^RESULT'
    local rc=$?
    [ $rc -eq 0 ] || { scripts/hosts.sh reap >/dev/null 2>&1; bash scripts/shm_cleanup.sh; }
    return $rc
  }
  if locked bash -c "$(declare -p MPIEXEC_ACROSS); $(declare -f probe); probe"; then
    echo "native (no library, RESERVE_VCIS=1) starts between the hosts over ch4:ucx: kept" | tee -a "$summary"
  else
    echo "native (no library, RESERVE_VCIS=1) over ch4:ucx between the hosts: no result in 20 s (MPI_Init hangs," \
      "docs/native-defects.md): left out, explicit / native n/a" | tee -a "$summary"
    paper_variants="mpich5-implicit-T mpich5-explicit"
    imb_variants="implicit-T explicit-T"
  fi
fi

for shape in $shapes; do
  echo "== link shape: $shape" | tee -a "$summary"
  locked bash -c 'shaped "$@"' _ "$shape" bash benches/paper.sh --mpich "$mpich" --hosts h1,h2 --variants "$paper_variants" \
    --threads "$threads" --reps "$reps" --out "$out/paper-$shape" >"$out/paper-$shape.log" 2>&1
  grep -E '^(mpich5-|explicit / implicit-T|explicit-policy / native)' "$out/paper-$shape/paper.txt" |
    sed 's/^/paper   /' | tee -a "$summary"
  OUT=$out/imb-$shape locked bash -c 'shaped "$@"' _ "$shape" bash benches/imb_mt.sh --mpich "$mpich" --hosts h1,h2 \
    --variants "$imb_variants" --threads "$threads" --reps "$reps" --no-build >"$out/imb-$shape.log" 2>&1
  sed -n '/^speed ratios/,$p' "$out/imb-$shape/imb_mt.txt" | sed 's/^/imb-mt  /' | tee -a "$summary"
  grep -h 'no result' "$out/paper-$shape.log" "$out/imb-$shape.log" | sed 's/^/missing /' | tee -a "$summary"
done
echo "after: $(uptime | sed 's/.*load/load/')" | tee -a "$summary"
echo "wrote $summary"

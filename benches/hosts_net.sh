#!/usr/bin/env bash
# Explicit against implicit endpoints across two hosts, with the network in the way: the paper
# benchmark (benches/paper.sh) and IMB-MT's shape (benches/imb_mt.sh), one rank on each of two
# simulated hosts (scripts/hosts.sh), T threads each, on MPICH 5.0.2 over ch4:ofi (libfabric's tcp
# provider between the hosts; over ch4:ucx, MPI_Init hangs with reserved VCIs between hosts:
# docs/native-defects.md), under each link shape in turn:
#   off           the bare veth pairs and bridge (the two cores bound the rate)
#   rate=1gbit    tbf on each host's link
#   rate=10mbit   tbf, low enough that 8-byte messages fill the link (the network bounds the rate)
# (a delay needs the kernel's sch_netem: `scripts/hosts.sh shape delay=10us` says whether it is there).
# Variants alternate within each repetition (paper: mpich5-implicit-1, mpich5-explicit, mpich5-native;
# IMB-MT: implicit, explicit), so each shape's ratios compare runs made under the same load.
# Writes results/hosts/{paper,imb}-SHAPE/ (each script's CSV, JSON and table) and results/hosts/summary.txt.
#   benches/hosts_net.sh [--reps N (5)] [--threads "1 2"] [--shapes "off rate=1gbit rate=10mbit"] [--lock FILE]
# --lock FILE: each benchmark of each shape runs under flock FILE (a machine shared with other jobs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
reps=5; threads="1 2"; shapes="off rate=1gbit rate=10mbit"; lock=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --lock) lock=$2; shift 2 ;;
    *) echo "usage: benches/hosts_net.sh [--reps N] [--threads \"1 2\"] [--shapes \"off rate=1gbit ...\"] [--lock FILE]" >&2; exit 2 ;;
  esac
done
why=$(scripts/hosts.sh check) || { echo "hosts_net.sh: no simulated hosts here: $why" >&2; exit 2; }
scripts/hosts.sh owns h1 h2 || scripts/hosts.sh up 2 || exit 1
trap 'scripts/hosts.sh shape off' EXIT
out=$root/results/hosts
mkdir -p "$out"
locked() { if [ -n "$lock" ]; then flock "$lock" "$@"; else "$@"; fi; }
: >"$out/summary.txt"
for shape in $shapes; do
  scripts/hosts.sh shape "$shape" || exit 1
  echo "== link shape: $shape ($(scripts/hosts.sh status | head -1 | cut -c19-))" | tee -a "$out/summary.txt"
  locked bash benches/paper.sh --mpich 5-ofi --hosts h1,h2 --variants "mpich5-implicit-1 mpich5-explicit mpich5-native" \
    --threads "$threads" --reps "$reps" --out "$out/paper-$shape" >"$out/paper-$shape.log" 2>&1
  grep -E '^(mpich5-|explicit / implicit-1|explicit-policy / native|native-stream / implicit)' "$out/paper-$shape/paper.txt" |
    sed 's/^/paper   /' | tee -a "$out/summary.txt"
  OUT=$out/imb-$shape locked bash benches/imb_mt.sh --mpich 5-ofi --hosts h1,h2 --variants "implicit explicit" \
    --threads "$threads" --reps "$reps" >"$out/imb-$shape.log" 2>&1
  sed -n '/^speed ratios/,$p' "$out/imb-$shape/imb_mt.txt" | sed 's/^/imb-mt  /' | tee -a "$out/summary.txt"
done
echo "wrote $out/summary.txt"

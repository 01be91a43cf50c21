#!/usr/bin/env bash
# The README's first command: on a fresh machine, installs both MPICHs and the Python tools, builds the
# libraries, and runs the paper's benchmark in every variant (benches/paper.sh): the table is printed
# and left in results/paper.txt with the plot results/paper.png (plus CSV/JSON, the explicit policy's
# traffic report and the checking mode's cost). Takes a few minutes on 2 cores.
#   scripts/demo.sh [benches/paper.sh options, e.g. --quick]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install.sh
echo "demo: cargo build --release"
cargo build --release --quiet --workspace
bash benches/paper.sh "$@"
echo "demo: table results/paper.txt, plot results/paper.png"

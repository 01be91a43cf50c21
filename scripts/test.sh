#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs every test; ends with "N passed, M failed".
#   scripts/test.sh [tests/run.sh options]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install.sh"
exec bash "$root/tests/run.sh" "$@"

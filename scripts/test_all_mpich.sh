#!/usr/bin/env bash
# The C test table (tests/c/TESTS) on every MPICH build the scripts know, one build per job under the
# shared lock of this machine (/tmp/mpix-heavy.lock, taken per build), installing the PyPI builds that
# are missing and Intel MPI (scripts/install.sh --mpich, a few seconds each). Prints each build's PASS/FAIL lines and
# its "N passed, M failed", then one summary line per build; exits 1 if any build failed.
#   scripts/test_all_mpich.sh [BUILD ...]     default: every build of scripts/env.sh's MPICH_ALL_NAMES
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
builds=("$@")
[ ${#builds[@]} -gt 0 ] || read -r -a builds <<<"$MPICH_ALL_NAMES"
summary=() status=0
for b in "${builds[@]}"; do
  case "$b" in [0-9]*.[0-9]*.[0-9]* | impi) bash "$root/scripts/install.sh" --mpich "$b" || { summary+=("$b: install failed"); status=1; continue; } ;; esac
  echo "== MPICH $b"
  log=$root/build/test-all-mpich-$b.log
  mkdir -p "$root/build"
  t0=$(date +%s)
  flock /tmp/mpix-heavy.lock timeout 1800 bash "$root/tests/run.sh" --quick --mpich "$b" --only "mpich=$b" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary+=("$b: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1) in $(($(date +%s) - t0)) s")
  [ "$rc" -eq 0 ] || status=1
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status

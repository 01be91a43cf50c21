#!/usr/bin/env bash
# The whole conformance matrix: every test of MPICH's testlists (run.sh --all) on Debian 4.0.2 and
# MPICH 5.0.2 under both policies, with --check-known. Hours on the 2-core machine (README.md here).
#   tests/conformance/run_all.sh [--dirs D1,D2..] [run.sh options...]
# Prints each run's summary, then the totals: "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
passed=0 failed=0 rc=0
for mpich in deb 5; do
  for policy in implicit explicit; do
    out=$(bash "$here/run.sh" --all --check-known --timeout 90 --mpich "$mpich" --policy "$policy" "$@" 2>&1) || rc=1
    echo "== mpich=$mpich policy=$policy"
    grep -vE '^PASS ' <<<"$out"
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
    if [ -z "$last" ]; then failed=$((failed + 1)); continue; fi
    passed=$((passed + ${last%% passed*}))
    f=${last#*passed, }; failed=$((failed + ${f%% failed*}))
  done
done
echo "$passed passed, $failed failed"
exit $rc

#!/usr/bin/env bash
# Runs one row of the C test table (tests/c/TESTS) N times in a loop, exactly as tests/run.sh runs it
# (its environment, its limit, its verdict), to count intermittent failures. Each chunk of runs holds the
# machine lock (/tmp/mpix-heavy.lock) for at most CHUNK seconds, then releases it so others get turns.
#   benches/loop_row.sh [--load] [--chunk S] ROW BUILD N
# ROW: tests/run.sh's --only pattern naming one row, e.g. 'multiplex_alltoall np=4 mpich=4.1.3 [MPIXSTREAM_STREAMS=8]'
#      (the row's name as tests/run.sh prints it; brackets are taken literally); BUILD: the MPICH (4.1.3, impi, ...).
# --load: a CPU hog (`yes >/dev/null`, one per core) runs beside every run of a chunk.
# --chunk: seconds of runs per lock (default 180).
# Prints one line per run (PASS/FAIL/KNOWN and its seconds), keeps each failing run's log under
# build/loop-logs/, and ends with "ROW on BUILD: P passed, F failed of N (load: yes|no)"; exits 1 if any failed,
# or if the pattern selected no row or more than one.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
load=0 chunk=180
while [ $# -gt 0 ]; do
  case "$1" in
    --load) load=1; shift ;;
    --chunk) chunk=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 3 ] || { echo "usage: benches/loop_row.sh [--load] [--chunk S] ROW BUILD N" >&2; exit 2; }
row=$1 build=$2 n=$3
# tests/run.sh's --only is a shell pattern: a row name's literal brackets must not become a class.
pattern=$(printf '%s' "$row" | sed 's/[][*?]/\\&/g')
logs=$root/build/loop-logs
mkdir -p "$logs"
nice -n 10 cargo build --release --quiet --workspace || exit 1
hogs=()
start_load() {
  [ $load -eq 1 ] || return 0
  local c
  for c in $(seq "$(nproc)"); do yes >/dev/null & hogs+=($!); done
}
stop_load() {
  local p
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  hogs=()
}
trap stop_load EXIT
passed=0 failed=0 i=0
# One chunk under the lock: runs until CHUNK seconds have gone or N runs are done; prints its counts.
chunk_runs() {
  local t0=$SECONDS out rc s
  start_load
  while [ "$i" -lt "$n" ] && [ $((SECONDS - t0)) -lt "$chunk" ]; do
    i=$((i + 1))
    s=$SECONDS
    # tests/run.sh gives the row its own limit (60 s, or the KNOWN row's) and cleans /dev/shm after a
    # failed run; this timeout only guards the script itself.
    out=$(timeout 400 bash tests/run.sh --quick --mpich "$build" --only "$pattern" 2>&1)
    rc=$?
    local verdict
    verdict=$(grep -E '^(PASS|FAIL|KNOWN) ' <<<"$out")
    if [ "$(grep -c . <<<"$verdict")" -ne 1 ]; then
      echo "loop_row: the pattern selected $(grep -c . <<<"$verdict") rows (want 1; tests/run.sh rc $rc):"
      tail -20 <<<"$out"
      stop_load
      exit 1
    fi
    case "$verdict" in
      PASS*) passed=$((passed + 1)); echo "run $i: PASS ($((SECONDS - s)) s)" ;;
      *) failed=$((failed + 1))
         cp "$(grep -Eo 'log: [^)]*' <<<"$verdict" | cut -c6-)" "$logs/$build-run$i-$(date +%H%M%S).log" 2>/dev/null
         echo "run $i: ${verdict%% *} ($((SECONDS - s)) s)"; grep '^    |' <<<"$out" | tail -8 ;;
    esac
  done
  stop_load
}
while [ "$i" -lt "$n" ]; do
  exec 9>/tmp/mpix-heavy.lock
  flock 9
  chunk_runs
  exec 9>&-
  [ "$i" -lt "$n" ] && sleep 5  # the lock is free: a waiting job takes it
done
bash scripts/shm_cleanup.sh
echo "$row on $build: $passed passed, $failed failed of $n (load: $([ $load -eq 1 ] && echo yes || echo no))"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# The contention profile counts the program's threads only (issue 46): the lean library's own threads
# (here the multiplex progress thread, which matches posted indexed receives while the program sits in
# other calls, through the tools library's interposers like any caller) say so when they start
# (`thread::BackgroundThread` -> `mpixstream_tools_library_thread`) and are never profiled. The program
# is tests/c/multiplex_progress.c (one thread per rank, MPI_THREAD_MULTIPLE, 2 ranks), under
# `mpixrun --profile` on Debian's 4.0.2 and on MPICH 5.0.2's serial backend (where it runs in the C table):
# every rank's profile must list exactly one thread, and the run must pass. Before the fix rank 1 listed
# two (T0, T1: 9 calls of the progress thread, all "contended") and the verdict blamed a communicator
# shared by two threads.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/profile_library_threads; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
for run in "deb -" "5 MPIXSTREAM_BACKEND=serial"; do
  read -r mpich env_set <<<"$run"
  mpich_select "$mpich"
  bin=$out/multiplex_progress-$mpich
  "$MPICC" -O2 -I"$root/include" "$root/tests/c/multiplex_progress.c" -o "$bin" \
    -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" -lpthread || { verdict "compile $mpich" 1; continue; }
  dir=$out/run-$mpich; rm -rf "$dir"
  envs=(MPIXSTREAM_STREAMS=4); [ "$env_set" != - ] && envs+=("$env_set")
  env "${envs[@]}" timeout 180 "$root/scripts/mpixrun" --profile --out "$dir" -n 2 "$bin" >"$out/out-$mpich.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  grep -q " No Errors" "$dir/run.log"
  verdict "mpich=$mpich: multiplex_progress passes under mpixrun --profile (rc=$rc)" $(( rc != 0 || $? != 0 ))
  python3 - "$dir/report.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
bad = 0
for r in rep["ranks"]:
    threads = (r.get("profile") or {}).get("threads", [])
    print(f"rank {r['rank']}: profile threads {[t['thread'] for t in threads]} (calls {[t['calls'] for t in threads]})")
    bad += len(threads) != 1
sys.exit(1 if bad or not rep["ranks"] else 0)
PY
  verdict "mpich=$mpich: every rank's profile lists its one program thread, not the library's" $?
done
exit $failed

#!/usr/bin/env bash
# MPICH's per-VCI segments in /dev/shm never outlive a job whose pool the library reserved
# (shim/src/backend/shm_segments.rs; scripts/mpixrun): MPICH 5.0.2, 2 ranks, MPIXSTREAM_POLICY=explicit.
#   1. a program that returns from main without MPI_Finalize leaves no mpich_* segment of its job (the
#      control: without the library the same program leaves one, so the check can fail);
#   2. a job under mpixrun ended by its time limit (SIGTERM to mpixrun) leaves none either;
#   3. mpixrun still forwards standard input and the job's exit status.
# Only this job's segments are counted (the names a listing before the run did not have), so other jobs
# on the machine do not disturb it. Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/shm-segments
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
mpich_select 5
prog=$out/exit_without_finalize
"$MPICC" "$root/tests/scripts/programs/exit_without_finalize.c" -o "$prog" || { echo "FAIL compile"; exit 1; }
segments() { ls /dev/shm 2>/dev/null | grep '^mpich_' | sort; }
# new BEFORE-FILE: the mpich_* segments present now that BEFORE-FILE did not list, and still unused
new() { segments | comm -13 "$1" - ; }

segments >"$out/before-none"
timeout 60 "$MPIEXEC" -n 2 "$prog" >"$out/none.log" 2>&1
rc=$?
left=$(new "$out/before-none")
[ $rc -eq 0 ] && [ -n "$left" ]
verdict "control: without the library the program leaves its segments behind (exit $rc; left: ${left:-none})" $?
for f in $left; do rm -f "/dev/shm/$f"; done

segments >"$out/before-lib"
env LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit MPIXSTREAM_VERBOSE=1 timeout 60 "$MPIEXEC" -n 2 "$prog" \
  >"$out/lib.log" 2>&1
rc=$?
left=$(new "$out/before-lib")
grep -q "MPIR_CVAR_CH4_RESERVE_VCIS=8" "$out/lib.log" && [ $rc -eq 0 ] && [ -z "$left" ]
verdict "with the pool reserved, an exit without MPI_Finalize leaves no segment (exit $rc; left: ${left:-none})" $?

segments >"$out/before-killed"
MPIXSTREAM_POLICY=explicit timeout 4 "$root/scripts/mpixrun" -n 2 "$prog" 60 >"$out/killed.log" 2>&1
rc=$?
sleep 1
left=$(new "$out/before-killed")
[ $rc -eq 124 ] && [ -z "$left" ] && ! pgrep -f "$prog" >/dev/null
verdict "mpixrun: a job ended by its time limit leaves no segment and no rank (exit $rc; left: ${left:-none})" $?
pkill -9 -f "$prog" 2>/dev/null

got=$(echo hello | timeout 30 "$root/scripts/mpixrun" -n 1 cat)
rc=$?
[ $rc -eq 0 ] && [ "$got" = hello ]
verdict "mpixrun forwards standard input (got '$got', exit $rc)" $?
timeout 30 "$root/scripts/mpixrun" -n 1 sh -c 'exit 3' >/dev/null 2>&1
rc=$?
[ $rc -eq 3 ]
verdict "mpixrun exits with the job's status (3: got $rc)" $?
exit $failed

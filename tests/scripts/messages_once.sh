#!/usr/bin/env bash
# The library's messages are whole lines, and a message of the job is printed once: a malformed
# MPIXSTREAM_POLICY or MPIXSTREAM_STREAMS at 4 ranks gives exactly one line on stderr, the whole
# message (every rank printed it at once before, interleaved: "mpixstream: mpixstream: MPIXSTREAM_...")
# and the job still fails (every rank stops in MPI_Init). A message of one rank (an MPIX call before
# MPI_Init) is printed by each rank, each line whole. On MPICH 5.0.2 and Debian's 4.0.2, real mpiexec.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/messages-once
mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
cat >"$out/ranks.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
#ifdef MPIX_STREAM_NULL
    MPIX_Stream early; /* before MPI_Init: an error of this rank's, printed by this rank */
    if (argc > 1 && strcmp(argv[1], "early") == 0) MPIX_Stream_create(MPI_INFO_NULL, &early);
#endif
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d ran\n", rank);
    MPI_Finalize();
    return 0;
}
C

for m in 5 deb; do
  mpich_select "$m" || { echo "SKIP: MPICH $m unavailable"; exit 77; }
  "$MPICC" -O1 "$out/ranks.c" -o "$out/ranks-$m" || { echo "FAIL build with $MPICC"; exit 1; }
  # The control: a good setting runs 4 ranks (so the single line below is not a single rank's).
  timeout 60 "$root/scripts/mpixrun" -n 4 "$out/ranks-$m" >"$out/good-$m.out" 2>"$out/good-$m.err"
  rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c '^rank [0-3] ran$' "$out/good-$m.out")" -eq 4 ]
  verdict "mpich=$m: the program runs 4 ranks with good settings (exit $rc)" $?
  for bad in "MPIXSTREAM_POLICY=explict|expected implicit, explicit or guided" \
    "MPIXSTREAM_STREAMS=100|expected a whole number from 1 to 63"; do
    setting=${bad%%|*} expected="mpixstream: ${bad%%|*}: ${bad#*|}"
    log=$out/${setting%%=*}-$m.err
    env "$setting" timeout 60 "$root/scripts/mpixrun" -n 4 "$out/ranks-$m" >/dev/null 2>"$log"
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ]
    verdict "mpich=$m $setting: the job fails (exit $rc)" $?
    lines=$(wc -l <"$log")
    [ "$lines" -eq 1 ] && [ "$(cat "$log")" = "$expected" ]
    verdict "mpich=$m $setting: stderr is the one whole line '$expected' ($lines lines)" $?
    [ "$lines" -eq 1 ] || sed 's/^/    | /' "$log"
  done
done

# A message of each rank's own: 4 lines, each whole (MPICH 5's mpi.h declares MPIX_Stream_create).
mpich_select 5 || exit 1
timeout 60 "$root/scripts/mpixrun" -n 4 "$out/ranks-5" early >"$out/early.out" 2>"$out/early.err"
rc=$?
whole="mpixstream: MPIX_Stream_create called before MPI_Init (or MPI was not initialised through mpixstream)"
[ $rc -eq 0 ] && [ "$(grep -cxF "$whole" "$out/early.err")" -eq 4 ] && [ "$(wc -l <"$out/early.err")" -eq 4 ]
verdict "an MPIX call before MPI_Init: each of the 4 ranks prints the whole line once (exit $rc)" $?
[ $failed -eq 0 ] || sed 's/^/    | /' "$out/early.err"
exit $failed

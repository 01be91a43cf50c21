#!/usr/bin/env bash
# mpixrun's options come before the mpiexec arguments:
#   - each of its options placed after them (`mpixrun -n 2 --reps 1 ./app`, issue 49's
#     `mpixrun --compare --mpich 5 -n 2 --reps 1 ./app`) is refused with "mpixrun: OPT must come before
#     the mpiexec arguments", exit 2, and no job runs;
#   - the same words after the program are the program's own arguments (passed on, the job runs);
#   - `--compare` stops after the first repetition in which every run failed the same way (an option
#     Hydra does not know: 2 runs, not 2 x 3 + 2), and its table quotes that run's first error line
#     (Hydra's "unrecognized argument", not its second line "argument matching returned error"), with
#     no Python/matplotlib warning in the output.
# Real mpiexec (MPICH 5.0.2), 2 ranks. Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/mpixrun-options
rm -rf "$out"
mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
show() { sed 's/^/    | /' "$1"; }
mpich_select 5 || { echo "SKIP: MPICH 5 unavailable"; exit 77; }
"$MPICC" -O1 -DNO_MPIX "$root/tests/scripts/programs/which_mpi.c" -o "$out/app" || { echo "FAIL build with $MPICC"; exit 1; }
mpixrun=$root/scripts/mpixrun

# Each option of mpixrun's after the mpiexec arguments: refused, and the program never started.
n=0
for opt in "--compare" "--profile" "--reps 1" "--policies implicit" "--profile-file $out/p.json" "--policy explicit" \
  "--out $out/o" "--timeout 5" "--mpich 5" "--lib $root/target/release/libmpixstream.so" "--hosts h1" "--hostfile $out/app"; do
  n=$((n + 1))
  # shellcheck disable=SC2086 # the option and its value, two words
  (cd "$out" && timeout 60 "$mpixrun" -n 2 $opt ./app) >"$out/late-$n.out" 2>"$out/late-$n.err" </dev/null
  rc=$?
  [ $rc -eq 2 ] && [ "$(cat "$out/late-$n.err")" = "mpixrun: ${opt%% *} must come before the mpiexec arguments (mpixrun [mpixrun options] [--] <mpiexec arguments> ./app [app arguments])" ] &&
    [ ! -s "$out/late-$n.out" ]
  rc2=$?
  verdict "mpixrun -n 2 $opt ./app: refused before any job (exit $rc)" $rc2
  [ $rc2 -eq 0 ] || show "$out/late-$n.err"
done
# Issue 49's command line: --compare first, --reps among mpiexec's arguments. No run, no output folder.
(cd "$out" && timeout 60 "$mpixrun" --compare --mpich 5 -n 2 --reps 1 ./app) >"$out/issue.out" 2>"$out/issue.err" </dev/null
rc=$?
[ $rc -eq 2 ] && grep -qx 'mpixrun: --reps must come before the mpiexec arguments.*' "$out/issue.err" &&
  [ "$(wc -l <"$out/issue.err")" -eq 1 ] && [ -z "$(find "$out" -maxdepth 1 -name 'mpixrun-compare-*')" ]
verdict "mpixrun --compare --mpich 5 -n 2 --reps 1 ./app: refused, no run (exit $rc)" $?
# After the program, they are the program's.
(cd "$out" && timeout 60 "$mpixrun" -n 2 -genv MPIR_CVAR_X 1 ./app --reps 3 --mpich 5) >"$out/own.out" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] && grep -qx 'argument: --reps' "$out/own.out" && grep -qx 'argument: --mpich' "$out/own.out"
rc2=$?
verdict "mpixrun -n 2 -genv K V ./app --reps 3 --mpich 5: the program's own arguments (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/own.out"

# --compare, every run failing alike (Hydra rejects -bogus-option): one repetition, then the table.
timeout 120 "$mpixrun" --compare --reps 3 --out "$out/compare" -n 2 -bogus-option 1 "$out/app" >"$out/compare.out" 2>&1 </dev/null
rc=$?
runs=$(awk -F'\t' 'NR > 1' "$out/compare/runs.tsv" 2>/dev/null | wc -l)
[ $rc -eq 1 ] && [ "$runs" -eq 2 ] && grep -q 'every run of repetition 1 failed with exit status' "$out/compare.out"
rc2=$?
verdict "--compare stops after the first repetition in which every run failed alike ($runs runs, exit $rc)" $rc2
grep -q 'FAILED: .*unrecognized argument bogus-option' "$out/compare.out" && ! grep -q 'argument matching returned error' "$out/compare.out"
rc3=$?
verdict "--compare quotes the failed run's first error line (Hydra's 'unrecognized argument')" $rc3
! grep -qi 'warning' "$out/compare.out"
rc4=$?
verdict "--compare's output has no (matplotlib) warning" $rc4
[ $((rc2 + rc3 + rc4)) -eq 0 ] || show "$out/compare.out"
exit $failed

#!/usr/bin/env bash
# The MPI-5 standard ABI: a program built with MPICH 5.0.2's `mpicc -mpi-abi` (mpi_abi.h, linked to
# libmpi_abi.so.1: handles are pointers, constants are not MPICH's) runs untouched under the library
# (tests/scripts/programs/std_abi.c: constructors, keyvals, error handlers, point-to-point, probes,
# persistent requests, collectives, completion calls, each result checked), at 2 ranks, under every
# MPIXSTREAM_POLICY value, with the tools library (report, check) and with the banner: exit 0,
# "No Errors", MPIX_Stream_create making a stream (the MPIX API on the serial model:
# tests/scripts/abi_standard_mpix.sh), the banner saying standard ABI, untouched and serial model, the
# explicit policy, the report and the check taking effect (the report written; its numbers and the check
# are tested by tests/scripts/abi_standard_report.sh). Without the library the program passes too and MPIX_Stream_create is not defined.
# Prints PASS/FAIL per check (exit 77 with a SKIP line where MPICH 5 has no libmpi_abi); exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
mpicc=$root/.deps/mpich5/bin/mpicc
if [ ! -e "$root/.deps/mpich5/lib/libmpi_abi.so.1" ] || [ ! -x "$mpicc" ]; then
  echo "SKIP: .deps/mpich5 has no libmpi_abi.so.1 (PyPI's MPICH 5.0.2: scripts/install.sh)"
  exit 77
fi
mpich_select 5
out=$root/build/abi-standard
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
bin=$out/std_abi
"$mpicc" -mpi-abi -O2 -Wall -Werror tests/scripts/programs/std_abi.c -o "$bin" 2>"$out/compile.log"
verdict "std_abi.c builds with mpicc -mpi-abi" $?
# (grep reads all of ldd's output, no -q: a pipe closed early would fail under pipefail.)
ldd "$bin" | grep 'libmpi_abi\.so\.1' >/dev/null
verdict "the program links libmpi_abi.so.1" $?
ldd "$bin" | grep 'libmpi\.so\.12' >/dev/null
verdict "the program does not link MPICH's libmpi.so.12" $((1 - $?))

# run NAME [KEY=VALUE ...]: 2 ranks under the library; the output in $out/NAME.log, its status in $rc.
run() {
  local name=$1; shift
  env "$@" timeout 60 scripts/mpixrun -n 2 "$bin" >"$out/$name.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
}
has() { grep -qF -- "$2" "$out/$1.log"; }
passes() { # NAME: exit 0, every check passed, MPIX_Stream_create made a stream
  verdict "[$1] exit 0 (got $rc)" $((rc != 0))
  has "$1" "No Errors"; verdict "[$1] every result correct" $?
  has "$1" 'MPIX_Stream_create: a stream'
  verdict "[$1] MPIX_Stream_create makes a stream (serial model)" $?
  grep -q 'FAILED\|signal\|Segmentation\|internal error' "$out/$1.log"
  verdict "[$1] no failed check, no crash" $((1 - $?))
}

env timeout 60 "$MPIEXEC" -n 2 "$bin" >"$out/alone.log" 2>&1 </dev/null
rc=$?
verdict "[alone] without the library: exit 0 (got $rc)" $((rc != 0))
has alone "No Errors" && has alone "MPIX_Stream_create: not defined"
verdict "[alone] every result correct, no MPIX_Stream_create" $?

for policy in implicit explicit; do
  run "$policy" MPIXSTREAM_POLICY=$policy
  passes "$policy"
done
# Explicit without the banner: the policy takes effect (bookkeeping on the serial model), nothing to say.
has explicit "without effect"
verdict "[explicit] no line says the policy has no effect on the standard ABI" $((1 - $?))
has implicit "without effect"
verdict "[implicit] nothing to say without settings" $((1 - $?))

run verbose MPIXSTREAM_VERBOSE=1
passes verbose
has verbose "MPI standard ABI 1.0: handles are pointers, MPI calls pass through untouched" &&
  has verbose "libmpi_abi.so.1 |" && has verbose "policy implicit, no report, no check" &&
  has verbose "MPIX stream API on the serial model: 8 streams sharing the library's endpoints"
verdict "[verbose] the banner: standard ABI, untouched, the library file, the MPIX API on the serial model" $?
[ "$(grep -c '^mpixstream 0' "$out/verbose.log")" = 1 ]
verdict "[verbose] one banner (rank 0)" $?

# The tools library: the report on the serial model (every call the program makes still passes through
# untouched: the results are checked as above).
run report MPIXSTREAM_VERBOSE=1 MPIXSTREAM_POLICY=explicit MPIXSTREAM_REPORT="$out/report.json"
passes report
has report "policy explicit (a stream per communicator of a blocking constructor)" &&
  has report ", report (libmpixstream_tools.so:" && has report "mpixstream report: backend serial on the MPI standard ABI"
verdict "[report] the banner says the explicit policy and the report take effect; rank 0's table" $?
[ -s "$out/report.json" ] && grep -q '"abi":"standard"' "$out/report.json"
verdict "[report] the report file is written (abi standard)" $?
for check in 1 all; do
  run "check-$check" MPIXSTREAM_POLICY=explicit MPIXSTREAM_CHECK=$check
  passes "check-$check"
  has "check-$check" "without effect"
  verdict "[check-$check] the check takes effect (no line says it has none)" $((1 - $?))
done

[ $failed -eq 0 ] && echo "PASS: a standard-ABI program runs untouched under every policy, the report, the check and the banner"
exit $failed

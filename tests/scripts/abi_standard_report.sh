#!/usr/bin/env bash
# The report (MPIXSTREAM_REPORT, libmpixstream_tools.so), the check and the explicit policy on the MPI-5 standard ABI
# (serial model: docs/architecture.md, section 7). tests/scripts/programs/std_abi_report.c, built with
# `mpicc -mpi-abi -Iinclude`: two dups of MPI_COMM_WORLD with N ping-pongs of B bytes each (blocking and
# nonblocking), a stream communicator with N more, and a multiplex communicator with N indexed messages
# each way between index 0 and 1 (one direction naming the source index, the other MPIX_ANY_INDEX).
# At 2 ranks, under MPIXSTREAM_POLICY=implicit and =explicit:
#   - the program passes; MPIX_Comm_get_stream on the dups says none (implicit) or a stream each, two
#     distinct ones (explicit);
#   - the report JSON validates against docs/report.schema.json and its numbers are exact
#     (tests/scripts/report_check.py stdabi: abi standard, backend serial, per communicator and per
#     index of the multiplex communicator, messages and bytes each way, the dups' collectives, the dups'
#     streams as the policy says, every endpoint the sum of its communicators);
#   - rank 0's table is printed (backend serial on the MPI standard ABI), and the banner no longer says
#     the report or the policy is without effect;
#   - the checker rejects the same report against a wrong N (it can fail);
#   - the check (MPIXSTREAM_CHECK=1): tests/c/check_bad.c built for the standard ABI (two threads on one
#     dup at once) is stopped with the message under the explicit policy, passes under the implicit one;
#     std_abi_report.c passes it;
#   - `scripts/mpixrun --compare` (implicit vs explicit, 1 timed run each) completes on the program.
# On MPICH 5.0.2's libmpi_abi.so.1 and on Intel MPI's (each SKIPped where absent).
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
check="python3 $root/tests/scripts/report_check.py"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
N=${STD_REPORT_N:-20}
B=${STD_REPORT_B:-1000}
export STD_REPORT_N=$N STD_REPORT_B=$B

one() {
  local name=$1
  mpich_select "$name" || { echo "SKIP [$name]: not installed"; return; }
  if [ ! -e "$MPICH_PREFIX/lib/libmpi_abi.so.1" ] || [ ! -x "$MPICC" ]; then
    echo "SKIP [$name]: no libmpi_abi.so.1 in $MPICH_PREFIX/lib (scripts/install.sh --mpich $name)"
    return
  fi
  local out=$root/build/abi-standard-report/$name bin rc policy log rep
  rm -rf "$out"; mkdir -p "$out"
  bin=$out/std_abi_report
  "$MPICC" -mpi-abi -O2 -Wall -Werror -Iinclude tests/scripts/programs/std_abi_report.c -o "$bin" \
    >"$out/compile.log" 2>&1
  verdict "[$name] std_abi_report.c builds with mpicc -mpi-abi" $?
  for policy in implicit explicit; do
    log=$out/$policy.log rep=$out/report-$policy.json
    rm -f "$rep"
    env MPIXSTREAM_POLICY=$policy MPIXSTREAM_REPORT="$rep" timeout 120 scripts/mpixrun -n 2 "$bin" \
      >"$log" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
    [ $rc -eq 0 ] && grep -q "No Errors" "$log" && ! grep -q 'FAILED\|signal\|Segmentation\|internal error' "$log"
    verdict "[$name policy=$policy] the program passes (exit $rc)" $?
    if [ $policy = implicit ]; then
      grep -qx "stream dup_a: none" "$log" && grep -qx "stream dup_b: none" "$log"
      verdict "[$name policy=implicit] MPIX_Comm_get_stream: the dups carry no stream" $?
    else
      grep -qx "stream dup_a: set" "$log" && grep -qx "stream dup_b: set" "$log" && grep -qx "dups distinct: yes" "$log"
      verdict "[$name policy=explicit] MPIX_Comm_get_stream: each dup carries a stream of its own" $?
    fi
    ! grep -q "without effect" "$log"
    verdict "[$name policy=$policy] no setting said to be without effect" $?
    grep -q "^mpixstream report: backend serial on the MPI standard ABI" "$log" && grep -q "^report: $rep" "$log"
    verdict "[$name policy=$policy] rank 0 printed the table" $?
    $check validate "$rep" >"$out/check-$policy.txt" 2>&1
    verdict "[$name policy=$policy] the report validates against docs/report.schema.json" $?
    $check stdabi "$rep" $policy "$N" "$B" >>"$out/check-$policy.txt" 2>&1
    verdict "[$name policy=$policy] the report's counters and streams are exact (N=$N, B=$B)" $?
  done
  # The checker can fail: the same report against one message more per communicator.
  ! $check stdabi "$out/report-explicit.json" explicit $((N + 1)) "$B" >"$out/check-wrong.txt" 2>&1 &&
    grep -q "expected {'messages': $((N + 1))" "$out/check-wrong.txt"
  verdict "[$name] the checker rejects the report against N+1" $?
  # The check (MPIXSTREAM_CHECK=1): tests/c/check_bad.c (two threads of rank 0 on one dup at once),
  # built for the standard ABI, must be stopped with the message under the explicit policy, and passes
  # under the implicit one (no policy communicator); std_abi_report.c passes the check, and its report
  # says so.
  "$MPICC" -mpi-abi -O2 -Wall tests/c/check_bad.c -o "$out/check_bad" -lpthread >>"$out/compile.log" 2>&1
  verdict "[$name] check_bad.c builds with mpicc -mpi-abi" $?
  env MPIXSTREAM_POLICY=explicit MPIXSTREAM_CHECK=1 timeout 60 scripts/mpixrun -n 2 "$out/check_bad" \
    >"$out/check-bad-explicit.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && ! grep -q "No Errors" "$out/check-bad-explicit.log" &&
    grep -q "mpixstream check: \[rank 0\] communicator 0x[0-9a-f]* (id 0, stream 0, policy stream, VCI unknown) used by two threads at once" \
      "$out/check-bad-explicit.log"
  verdict "[$name] the check stops two threads on one policy communicator, with the message (exit $rc)" $?
  env MPIXSTREAM_POLICY=implicit MPIXSTREAM_CHECK=1 timeout 60 scripts/mpixrun -n 2 "$out/check_bad" \
    >"$out/check-bad-implicit.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && grep -q "No Errors" "$out/check-bad-implicit.log"
  verdict "[$name] implicit policy: nothing to check, check_bad passes (exit $rc)" $?
  rep=$out/report-check.json
  env MPIXSTREAM_POLICY=explicit MPIXSTREAM_CHECK=1 MPIXSTREAM_REPORT="$rep" timeout 120 scripts/mpixrun -n 2 "$bin" \
    >"$out/check-ok.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && grep -q "No Errors" "$out/check-ok.log" && grep -q '"check":"policy"' "$rep" &&
    $check stdabi "$rep" explicit "$N" "$B" >"$out/check-check-ok.txt" 2>&1
  verdict "[$name] std_abi_report.c passes the check, its report exact and saying check policy (exit $rc)" $?
  # The policies compared on the program (1 timed run each, then the reports).
  timeout 300 scripts/mpixrun --compare --reps 1 --out "$out/compare" -n 2 "$bin" >"$out/compare.log" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash scripts/shm_cleanup.sh
  [ $rc -eq 0 ] && [ -s "$out/compare/compare.json" ]
  verdict "[$name] mpixrun --compare implicit vs explicit completes (exit $rc)" $?
}

one 5
one impi
exit $failed

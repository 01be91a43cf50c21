#!/usr/bin/env bash
# The profile's model of MPICH's round robin over its implicit VCIs, against MPICH itself (MPICH 5.0.2,
# MPIR_CVAR_CH4_NUM_VCIS=4, implicit policy, the report on): tests/scripts/programs/round_robin.c makes
# nine communicators between which MPICH counts windows, a split_type's temporary split, a topology
# constructor and more (but not a dup of MPI_COMM_SELF). The report must give each the call that made
# it, MPICH's seq and the VCI seq % 4; rank 1's receive requests must name that VCI (MPICH's own word);
# and the UCX probe (tests/probe; MPIR_CVAR_NOLOCAL=1, loopback) must see those communicators' messages,
# and only a few of MPICH's own beside them, on each of workers 1, 2, 3. Then the same with
# MPIR_CVAR_CH4_NUM_VCIS=3. Prints PASS/FAIL per check; exits 1 if
# any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich_select 5
out=$root/build/profile_round_robin; rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
bash "$root/tests/probe/build.sh" "$out" >/dev/null || { verdict "build the UCX probe" 1; exit 1; }
"$MPICC" -O2 "$root/tests/scripts/programs/round_robin.c" -o "$out/round_robin" || { verdict "compile round_robin.c" 1; exit 1; }
# MPICH's seq of c0..c8 (the program's header says why) and the calls that made them.
seqs=1,3,6,7,8,9,10,11,13
calls=MPI_Comm_dup,MPI_Comm_dup,MPI_Comm_split,MPI_Comm_idup,MPI_Cart_create,MPI_Comm_create,MPI_Comm_create_group,MPI_Comm_dup_with_info,MPI_Comm_dup
for n in 4 3; do
  d=$out/probe-$n; mkdir -p "$d"
  MPIR_CVAR_CH4_NUM_VCIS=$n MPIXSTREAM_REPORT=$out/report-$n.json UCXPROBE_DIR=$d MPIR_CVAR_NOLOCAL=1 UCX_NET_DEVICES=lo \
    MPIXRUN_PRELOAD_EXTRA=$out/ucxprobe.so timeout 120 "$root/scripts/mpixrun" -n 2 "$out/round_robin" \
    >"$out/out-$n.txt" 2>"$out/err-$n.txt" </dev/null
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  grep -q " No Errors" "$out/out-$n.txt"
  verdict "NUM_VCIS=$n: round_robin.c runs under the report (rc=$rc)" $(( rc != 0 || $? != 0 ))
  python3 "$root/tests/scripts/report_check.py" validate "$out/report-$n.json" >/dev/null
  verdict "NUM_VCIS=$n: the report is valid against docs/report.schema.json" $?
  python3 "$root/tests/scripts/profile_check.py" roundrobin "$out/report-$n.json" "$d" $n $seqs $calls
  verdict "NUM_VCIS=$n: each communicator's call, seq and VCI (seq % $n) as MPICH's requests and the UCX probe show them" $?
done
# The check can fail: the count of a model that missed the window's internal communicator (every seq
# after it one lower) must be refused by the same data.
python3 "$root/tests/scripts/profile_check.py" roundrobin "$out/report-4.json" "$out/probe-4" 4 1,2,5,6,7,8,9,10,12 $calls >/dev/null
verdict "a model one commit short (no window) is refused by the report and the probe" $(( $? == 0 ))
exit $failed

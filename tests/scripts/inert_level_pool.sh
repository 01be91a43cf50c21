#!/usr/bin/env bash
# A program that cannot gain from the library runs as if it were not there (shim/src/backend/demand.rs,
# docs/policy.md "When the policy is inert"), under every policy, on MPICH 5.0.2 (native streams) and
# Debian's 4.0.2:
#   - below MPI_THREAD_MULTIPLE (MPI_Init; MPI_Init_thread with FUNNELED or SERIALIZED) and naming no MPIX
#     stream call: the thread level provided is the one MPICH gives without the library, no VCI is
#     reserved (MPI_T reads MPIR_CVAR_CH4_RESERVE_VCIS = 0), no helper thread runs (the process has as
#     many threads as without the library), and the banner and the report say the policy is inert and why;
#   - under `explicit`, a program at MPI_THREAD_MULTIPLE that names no communicator constructor: the same;
#   - under `explicit`, a process started by MPI_Comm_spawn gets no pool, while its parent (the same
#     program) does (MPICH 5.0.2);
#   - under `explicit` on MPICH 4.1.3, where the policy gives no streams: a program at MULTIPLE that names
#     MPI_Comm_dup and no stream call gets no pool and no helper thread either, while MPIXSTREAM_STREAMS=2
#     still reserves the 2 it asks for;
#   - the controls, which must differ: a program below MULTIPLE that names MPIX_Stream_create gets
#     MPI_THREAD_MULTIPLE, the pool and the helper thread; one at MULTIPLE that names MPI_Comm_dup gets the
#     explicit policy's pool.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/inert-level-pool
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
src=$root/tests/scripts/programs/read_reserve.c

# field FILE NAME: the value rank 0 printed as "NAME value"
field() { awk -v k="$2" '$1 == k { print $2; exit }' "$1"; }

for mpich in 5 deb; do
  mpich_select $mpich
  b=$out/$mpich; mkdir -p "$b"
  # Debian's MPICH has no MPIX_Stream_create: a program naming it links the library.
  streams_link=""
  [ $mpich = deb ] && streams_link="-L$(dirname "$MPIXSTREAM_LIB") -lmpixstream -Wl,-rpath,$(dirname "$MPIXSTREAM_LIB")"
  "$MPICC" "$src" -o "$b/single" &&
    "$MPICC" -DLEVEL=MPI_THREAD_FUNNELED "$src" -o "$b/funneled" &&
    "$MPICC" -DLEVEL=MPI_THREAD_SERIALIZED -DUSES_DUP "$src" -o "$b/serialized" &&
    "$MPICC" -DLEVEL=MPI_THREAD_MULTIPLE "$src" -o "$b/multiple" &&
    "$MPICC" -DLEVEL=MPI_THREAD_MULTIPLE -DUSES_DUP "$src" -o "$b/multiple-dup" &&
    "$MPICC" -DUSES_STREAMS -I"$root/include" "$src" -o "$b/single-streams" $streams_link ||
    { verdict "compile on $mpich" 1; continue; }
  # run NAME PROGRAM [KEY=VALUE ...]: the program under mpiexec (env first), rank 0's lines in NAME.out
  run() {
    local name=$1 prog=$2; shift 2
    env "$@" timeout 60 "$MPIEXEC" -n 2 "$b/$prog" >"$b/$name.out" 2>"$b/$name.log"
    local rc=$?
    [ $rc -eq 0 ] || { verdict "$mpich $name runs (exit $rc)" 1; tail -3 "$b/$name.log" | sed 's/^/    | /'; }
  }
  for prog in single funneled serialized multiple; do
    run "$prog-none" $prog
    for policy in implicit explicit; do
      # Under implicit a program at MULTIPLE gets nothing either, but is not "inert" (nothing to move).
      [ $prog = multiple ] && [ $policy = implicit ] && continue
      name=$prog-$policy
      run "$name" $prog LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=$policy MPIXSTREAM_VERBOSE=1
      [ "$(field "$b/$name.out" provided)" = "$(field "$b/$prog-none.out" provided)" ]
      ok=$?
      verdict "$mpich $name: thread level provided $(field "$b/$name.out" provided), as without the library" $ok
      [ "$(field "$b/$name.out" threads)" = "$(field "$b/$prog-none.out" threads)" ]
      ok=$?
      verdict "$mpich $name: $(field "$b/$name.out" threads) threads, as without the library (no helper thread)" $ok
      if [ $mpich = 5 ]; then
        [ "$(field "$b/$name.out" reserve)" = 0 ]
        ok=$?
        verdict "$mpich $name: no reserved VCI (reserve $(field "$b/$name.out" reserve))" $ok
      fi
      grep -q "policy implicit ($policy requested; inert: " "$b/$name.log"
      verdict "$mpich $name: the banner says the policy is inert" $?
    done
  done
  grep -q "inert: the program asked for MPI_THREAD_FUNNELED and names no MPIX stream call" "$b/funneled-explicit.log"
  verdict "$mpich funneled-explicit: the banner names the level as the reason" $?
  grep -q "inert: no loaded object names a communicator constructor" "$b/multiple-explicit.log"
  verdict "$mpich multiple-explicit: the banner names the missing constructor as the reason" $?

  # The report says it too (the tools library, through mpixrun).
  rep=$b/report.json
  MPIXSTREAM_POLICY=explicit MPIXSTREAM_REPORT=$rep timeout 60 "$root/scripts/mpixrun" -n 2 "$b/single" \
    >"$b/report-run.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] && python3 - "$rep" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["policy"] == "implicit", r["policy"]
assert r["policy_inert"] and r["policy_inert"].startswith("explicit requested; inert: the program asked for MPI_THREAD_SINGLE"), r["policy_inert"]
assert r["thread_level"] == "MPI_THREAD_SINGLE", r["thread_level"]
PY
  verdict "$mpich report: policy implicit, policy_inert says explicit was requested and why (exit $rc)" $?
  grep -q "^mpixstream report: .*policy implicit (explicit requested; inert: " "$b/report-run.out"
  verdict "$mpich report: its text header says the policy is inert" $?

  # Controls: what the library does where the program can gain.
  run streams-none single-streams
  run streams-explicit single-streams LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit
  run dup-explicit multiple-dup LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit
  if [ $mpich = 5 ]; then
    [ "$(field "$b/streams-explicit.out" provided)" = 3 ] && [ "$(field "$b/streams-explicit.out" reserve)" = 8 ] &&
      [ "$(field "$b/streams-explicit.out" threads)" -gt "$(field "$b/streams-none.out" threads)" ]
    verdict "5 control: a program naming MPIX_Stream_create gets MULTIPLE, the pool and the helper thread" $?
    [ "$(field "$b/dup-explicit.out" reserve)" = 8 ]
    verdict "5 control: a program at MULTIPLE naming MPI_Comm_dup gets the explicit policy's pool" $?
    "$MPICC" "$root/tests/scripts/programs/spawn_reserve.c" -o "$b/spawn_reserve" &&
      env LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit timeout 60 "$MPIEXEC" -n 1 "$b/spawn_reserve" \
        >"$b/spawn.out" 2>"$b/spawn.log"
    rc=$?
    [ $rc -eq 0 ] && grep -qx "parent reserve 8" "$b/spawn.out" && grep -qx "child reserve 0" "$b/spawn.out"
    ok=$?
    verdict "5 spawn: the parent gets the pool, the child it spawns none (exit $rc: $(tr '\n' ' ' <"$b/spawn.out"))" $ok
  else
    ! grep -q "inert" "$b/streams-explicit.log" && ! grep -q "inert" "$b/dup-explicit.log"
    verdict "deb control: programs that can gain are not called inert" $?
  fi
done

# MPICH 4.1.3: the explicit policy gives no streams there (no progress helper on the implicit pool), so
# a program that names no stream call is inert under it; a pool size the user asks for is still reserved.
mpich_select 4.1.3
b=$out/4.1.3; mkdir -p "$b"
if "$MPICC" -DLEVEL=MPI_THREAD_MULTIPLE -DUSES_DUP "$src" -o "$b/multiple-dup"; then
  run() {
    local name=$1; shift
    env "$@" timeout 60 "$MPIEXEC" -n 2 "$b/multiple-dup" >"$b/$name.out" 2>"$b/$name.log"
    local rc=$?
    [ $rc -eq 0 ] || { verdict "4.1.3 $name runs (exit $rc)" 1; tail -3 "$b/$name.log" | sed 's/^/    | /'; }
  }
  run none
  run explicit LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit MPIXSTREAM_VERBOSE=1
  run sized LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit MPIXSTREAM_VERBOSE=1 MPIXSTREAM_STREAMS=2
  reserve=$(field "$b/explicit.out" reserve) threads=$(field "$b/explicit.out" threads)
  [ "$reserve" = 0 ]
  ok=$?
  verdict "4.1.3 multiple-dup explicit: no reserved VCI (reserve $reserve)" $ok
  [ "$threads" = "$(field "$b/none.out" threads)" ]
  ok=$?
  verdict "4.1.3 multiple-dup explicit: $threads threads, as without the library" $ok
  grep -q "policy implicit (explicit requested; inert: MPICH 4.1 and 4.2 have no progress helper" "$b/explicit.log"
  verdict "4.1.3 multiple-dup explicit: the banner says inert, and why" $?
  reserve=$(field "$b/sized.out" reserve)
  [ "$reserve" = 2 ] && ! grep -q "inert" "$b/sized.log"
  ok=$?
  verdict "4.1.3 control: MPIXSTREAM_STREAMS=2 reserves 2 (reserve $reserve), not inert" $ok
else
  verdict "compile on 4.1.3" 1
fi
exit $failed

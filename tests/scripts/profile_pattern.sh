#!/usr/bin/env bash
# The contention profile's numbers and verdicts (issue 38), on MPICH 5.0.2 and Debian 4.0.2, under the
# report (MPIXSTREAM_REPORT), 2 ranks:
#   1. a known overlap pattern (tests/scripts/programs/profile_pattern.c: 2 threads of rank 1 each held in
#      MPI_Recv 8 times for 25 ms): threads on their own MPI_Comm_dup held AT ONCE overlap inside MPICH's
#      one implicit VCI for 100..600 ms (about 200), and the verdict is that explicit endpoints would
#      help (on Debian's one endpoint: one_endpoint, whose headline says they cannot help there); held IN TURNS they overlap less than 1 ms (never at once) and the verdict says so; `mpixrun
#      --profile` prints the verdict and writes the timeline PNG;
#   2. the same at once under the explicit policy: on MPICH 5 every thread on its own endpoint and no
#      overlap at all; on Debian's one endpoint (serial backend) the overlap stays and the verdict names
#      the serial backend;
#   3. both threads on MPI_COMM_WORLD: the verdict is that explicit endpoints cannot help and one
#      communicator per thread is the change to make (under the explicit policy too: still shared);
#   4. MPICH 5 with MPIR_CVAR_CH4_NUM_VCIS=2: a window made between the two threads' dups puts both on
#      VCI 1 (MPICH's round robin, seq 1 and 3): they overlap there, the verdict names the window between
#      them; under the explicit policy, no overlap;
#   5. the paper benchmark (benches/paper_msgrate.c, 2 threads per rank, one dup each) and IMB-MT's shape
#      (benches/imb_mt.c, biband): overlap under implicit, with the verdict that explicit endpoints would
#      help; under the explicit policy on MPICH 5 none (each thread apart), on Debian still shared.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/profile_pattern; rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
check=$root/tests/scripts/profile_check.py
failed=0
# Returns the check's status, so that `verdict … || continue` skips what depends on a failed check.
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; return 1; fi; }

# run NAME [VAR=VALUE...] -- PROGRAM ARGS: one job under the report, into $out/NAME.json
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" MPIXSTREAM_REPORT="$out/$name.json" timeout 120 "$root/scripts/mpixrun" -n 2 "$@" \
    >"$out/$name.out" 2>"$out/$name.err" </dev/null
  local rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  [ $rc -eq 0 ] && [ -s "$out/$name.json" ] && python3 "$root/tests/scripts/report_check.py" validate "$out/$name.json" >/dev/null
  verdict "$name: runs, and its report is valid (rc=$rc)" $(( rc != 0 || $? != 0 ))
}
expect() { # description, checker arguments...
  local what=$1; shift
  python3 "$check" "$@" | sed 's/^/    | /'
  verdict "$what" "${PIPESTATUS[0]}"
}

for mpich in 5 deb; do
  mpich_select $mpich
  p=$out/pattern-$mpich paper=$out/paper-$mpich imb=$out/imb-$mpich
  "$MPICC" -O2 "$root/tests/scripts/programs/profile_pattern.c" -o "$p" -lpthread &&
    "$MPICC" -O2 -Wno-stringop-overflow "$root/benches/paper_msgrate.c" -o "$paper" -lpthread &&
    "$MPICC" -O2 -Wno-stringop-overflow "$root/benches/imb_mt.c" -o "$imb" -lpthread
  verdict "[$mpich] compile the programs" $? || continue
  # On Debian's MPICH 4.0 (one endpoint) the same finding is one_endpoint: its headline says that
  # explicit endpoints cannot help on this MPICH, and the detail why.
  if [ $mpich = 5 ]; then
    native=1 explicit_outcome=separate helps="an endpoint each" helps_outcome=explicit_helps
    headline='^verdict: explicit endpoints would help'
  else
    native=0 explicit_outcome=still_shared helps="this MPICH has one endpoint (MPICH 4.0, serial backend)" helps_outcome=one_endpoint
    headline='^verdict: explicit endpoints cannot help on this MPICH'
  fi

  # 1. At once and in turns, implicit; the first one through mpixrun --profile.
  d=$out/$mpich-once-cli
  PROFILE_MODE=once timeout 120 "$root/scripts/mpixrun" --profile --out "$d" -n 2 "$p" >"$out/$mpich-cli.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  sed 's/^/    | /' "$out/$mpich-cli.txt" | head -40
  grep -q "$headline" "$out/$mpich-cli.txt" &&
    [ "$(head -c 4 "$d/timeline.png" | od -An -c | tr -d ' ')" = '211PNG' ] && [ -s "$d/profile.json" ]
  verdict "[$mpich] mpixrun --profile (at once): exit 0, the verdict, profile.json and timeline.png (rc=$rc)" $(( rc != 0 || $? != 0 ))
  expect "[$mpich] at once, implicit: rank 1's threads overlap 100..600 ms (8 holds of 25 ms)" overlap "$d/report.json" 1 100 600
  expect "[$mpich] at once, implicit: explicit endpoints would help ($helps_outcome)" outcome "$d/report.json" 1 $helps_outcome "$helps"

  run $mpich-turns PROFILE_MODE=turns -- "$p"
  expect "[$mpich] in turns: rank 1's threads overlap less than 1 ms" overlap "$out/$mpich-turns.json" 1 0 1
  expect "[$mpich] in turns: the verdict says never at once" outcome "$out/$mpich-turns.json" 1 in_turns "never inside at once"

  # 2. At once under the explicit policy.
  run $mpich-once-explicit PROFILE_MODE=once MPIXSTREAM_POLICY=explicit -- "$p"
  if [ $native = 1 ]; then
    expect "[5] at once, explicit: each thread on its own endpoint, no overlap" apart "$out/5-once-explicit.json" 1 2
    expect "[5] at once, explicit: no overlap at all" overlap "$out/5-once-explicit.json" 1 0 0
  else
    expect "[deb] at once, explicit: still 100..600 ms on the one endpoint" overlap "$out/deb-once-explicit.json" 1 100 600
  fi
  expect "[$mpich] at once, explicit: outcome $explicit_outcome" outcome "$out/$mpich-once-explicit.json" 1 $explicit_outcome

  # 3. One communicator for both threads.
  run $mpich-world PROFILE_MODE=once PROFILE_COMMS=world -- "$p"
  expect "[$mpich] MPI_COMM_WORLD shared: overlap 100..600 ms" overlap "$out/$mpich-world.json" 1 100 600
  expect "[$mpich] MPI_COMM_WORLD shared: explicit endpoints cannot help, one communicator per thread" \
    outcome "$out/$mpich-world.json" 1 explicit_cannot_help "one communicator per thread"
  run $mpich-world-explicit PROFILE_MODE=once PROFILE_COMMS=world MPIXSTREAM_POLICY=explicit -- "$p"
  expect "[$mpich] MPI_COMM_WORLD shared, explicit: still shared, and named" \
    outcome "$out/$mpich-world-explicit.json" 1 still_shared "still shared under the explicit policy" "comm 0 (MPI_COMM_WORLD) (T0, T1)"

  # 4. MPICH's round robin over 2 implicit VCIs: a window between the dups.
  if [ $native = 1 ]; then
    run 5-collide PROFILE_MODE=once PROFILE_COMMS=collide MPIR_CVAR_CH4_NUM_VCIS=2 -- "$p"
    expect "[5] collide (NUM_VCIS=2): the dups meet on VCI 1, 100..600 ms" overlap "$out/5-collide.json" 1 100 600
    expect "[5] collide: the verdict names the round robin and the window between the dups" \
      outcome "$out/5-collide.json" 1 explicit_helps "on VCI 1" "counted in between: MPI_Win_create (seq 2)"
    run 5-collide-explicit PROFILE_MODE=once PROFILE_COMMS=collide MPIR_CVAR_CH4_NUM_VCIS=2 MPIXSTREAM_POLICY=explicit -- "$p"
    expect "[5] collide, explicit: no overlap" overlap "$out/5-collide-explicit.json" 1 0 0
  fi

  # 5. The paper benchmark and IMB-MT's shape, 2 threads per rank.
  for prog in paper imb; do
    case $prog in
      paper) args=("$paper" 2 64 0.2 0.02) ;;
      imb) args=("$imb" 2 0.1 0.02 biband) ;;
    esac
    run $mpich-$prog -- "${args[@]}"
    for r in 0 1; do
      expect "[$mpich] $prog, implicit, rank $r: the threads overlap (at least 5 ms)" overlap "$out/$mpich-$prog.json" $r 5 1e9
      expect "[$mpich] $prog, implicit, rank $r: explicit endpoints would help ($helps_outcome)" outcome "$out/$mpich-$prog.json" $r $helps_outcome
    done
    run $mpich-$prog-explicit MPIXSTREAM_POLICY=explicit -- "${args[@]}"
    for r in 0 1; do
      if [ $native = 1 ]; then
        expect "[5] $prog, explicit, rank $r: no overlap" overlap "$out/5-$prog-explicit.json" $r 0 0
      fi
      expect "[$mpich] $prog, explicit, rank $r: outcome $explicit_outcome" outcome "$out/$mpich-$prog-explicit.json" $r $explicit_outcome
    done
  done
done
exit $failed

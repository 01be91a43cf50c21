#!/usr/bin/env bash
# The guided policy (MPIXSTREAM_POLICY=guided, MPIXSTREAM_PROFILE; docs/policy.md "The guided policy"), on
# MPICH 5.0.2, 2 ranks, every run under the report:
#   1. tests/scripts/programs/guided_select.c (rank 1's threads held in MPI_Recv at once on their own
#      dups a and b; a split c and its dup d used by the main thread alone): `mpixrun --profile` selects
#      exactly a and b (world/dup:0, world/dup:1) and prints the guided command; that command, run as
#      printed, gives a and b a policy stream each and leaves c and d (and MPI_COMM_WORLD) implicit;
#   2. a single-threaded program (benches/paper_msgrate.c with 1 thread): the profile selects nothing and
#      the guided policy gives no communicator a stream, as the implicit policy; the same benchmark with 2
#      threads (one dup each, threads meet): both dups selected and given a stream each; profile_pattern.c
#      with the threads in turns (never inside at once), and both on MPI_COMM_WORLD (one communicator):
#      nothing selected, no stream;
#   3. the 2-rank profile of 1 on 3 ranks: said on stderr and in the report, and nothing gets a stream;
#   4. a constructor the profile never saw (GUIDED_EXTRA=1: one more split at the end): said once on
#      stderr and counted (it alone: not the idup before it), while a and b keep their streams;
#   5. mistakes stop MPI_Init with a message naming MPIXSTREAM_PROFILE: guided without a profile, an
#      unreadable one, one that is not a profile, the profile without the guided policy, one made under
#      the explicit policy;
#   6. `mpixrun --compare --policies implicit,explicit,guided` (one repetition, its own profile run):
#      every policy runs, and the guided report run has the two streams.
# Prints PASS/FAIL per check; exits 1 if any failed, 77 (SKIP) without MPICH 5.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
if ! mpich_select 5 2>/dev/null; then
  echo "SKIP: MPICH 5.0.2 is not installed (scripts/install.sh)"
  exit 77
fi
out=$root/build/guided_policy; rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
check=$root/tests/scripts/guided_check.py
mpixrun=$root/scripts/mpixrun
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
expect() { # description, checker arguments...
  local what=$1; shift
  python3 "$check" "$@" | sed 's/^/    | /'
  verdict "$what" "${PIPESTATUS[0]}"
}
valid() { python3 "$root/tests/scripts/report_check.py" validate "$1" >/dev/null; }
# job NAME [VAR=VALUE...] -- MPIEXEC ARGS: one job under the report ($out/NAME.json, .out, .err); rc in $rc.
job() {
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" MPIXSTREAM_REPORT="$out/$name.json" timeout 120 "$mpixrun" "$@" \
    >"$out/$name.out" 2>"$out/$name.err" </dev/null
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  return 0
}

sel=$out/guided_select paper=$out/paper_msgrate
"$MPICC" -O2 "$root/tests/scripts/programs/guided_select.c" -o "$sel" -lpthread &&
  "$MPICC" -O2 -Wno-stringop-overflow "$root/benches/paper_msgrate.c" -o "$paper" -lpthread
verdict "compile the programs" $? || exit 1
selected=(world/dup:0 world/dup:1)

# 1. The profile, then the command it prints.
timeout 120 "$mpixrun" --profile --out "$out/prof" -n 2 "$sel" >"$out/prof.txt" 2>&1
rc=$?
[ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
sed 's/^/    | /' "$out/prof.txt" | tail -8
verdict "mpixrun --profile of guided_select: exit 0 (rc=$rc)" $rc
expect "the profile selects a and b only (the threads met on them; c and d were the main thread's alone)" \
  select "$out/prof/profile.json" "${selected[@]}"
command=$(grep -A1 '^run it under the guided policy' "$out/prof.txt" | tail -1)
case "$command" in *MPIXSTREAM_POLICY=guided*MPIXSTREAM_PROFILE=*profile.json*) ok=0 ;; *) ok=1 ;; esac
verdict "mpixrun --profile prints the guided command: $command" $ok
(cd "$out" && timeout 120 bash -c "MPIXSTREAM_REPORT=$out/guided.json MPIXSTREAM_VERBOSE=1 $command") \
  >"$out/guided.out" 2>"$out/guided.err" </dev/null
rc=$?
[ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
grep -q 'policy guided' "$out/guided.err" && grep -q 'No Errors' "$out/guided.out" && valid "$out/guided.json"
verdict "the printed command runs: exit 0, banner 'policy guided', a valid report (rc=$rc)" $(( rc != 0 || $? != 0 ))
expect "guided: a and b on a policy stream each, c, d and MPI_COMM_WORLD implicit, on both ranks" \
  streams "$out/guided.json" "${selected[@]}"

# 2. A single-threaded program: nothing selected, no stream, as under implicit.
timeout 120 "$mpixrun" --profile --out "$out/prof1" -n 2 "$paper" 1 8 0.2 0.05 >"$out/prof1.txt" 2>&1
rc=$?
verdict "mpixrun --profile of the single-threaded benchmark: exit 0 (rc=$rc)" $rc
expect "single-threaded: the profile selects nothing" select "$out/prof1/profile.json"
job single MPIXSTREAM_POLICY=guided MPIXSTREAM_PROFILE="$out/prof1/profile.json" -- -n 2 "$paper" 1 8 0.2 0.05
grep -q '^RESULT' "$out/single.out" && valid "$out/single.json"
verdict "single-threaded under guided: runs (rc=$rc)" $(( rc != 0 || $? != 0 ))
expect "single-threaded under guided: no communicator has a stream" nostreams "$out/single.json"
job single-implicit MPIXSTREAM_POLICY=implicit -- -n 2 "$paper" 1 8 0.2 0.05
expect "single-threaded under implicit: the same (no stream)" nostreams "$out/single-implicit.json"

# 2b. The other profile tests' programs: threads meeting on dups; in turns; on one communicator.
pattern=$out/profile_pattern
"$MPICC" -O2 "$root/tests/scripts/programs/profile_pattern.c" -o "$pattern" -lpthread
verdict "compile profile_pattern.c" $?
while IFS='|' read -r name envs args expected; do
  # shellcheck disable=SC2086
  env $envs timeout 120 "$mpixrun" --profile --out "$out/prof-$name" -n 2 $args >"$out/prof-$name.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  verdict "[$name] mpixrun --profile: exit 0 (rc=$rc)" $rc
  # shellcheck disable=SC2086
  expect "[$name] the profile selects: ${expected:-nothing}" select "$out/prof-$name/profile.json" $expected
  # shellcheck disable=SC2086
  job "$name" $envs MPIXSTREAM_POLICY=guided MPIXSTREAM_PROFILE="$out/prof-$name/profile.json" -- -n 2 $args
  valid "$out/$name.json"
  verdict "[$name] under guided: runs, valid report (rc=$rc)" $(( rc != 0 || $? != 0 ))
  if [ -n "$expected" ]; then
    # shellcheck disable=SC2086
    expect "[$name] under guided: a stream each for $expected, nothing else" streams "$out/$name.json" $expected
  else
    expect "[$name] under guided: no stream" nostreams "$out/$name.json"
  fi
done <<EOF
paper-T2||$paper 2 8 0.3 0.05|world/dup:0 world/dup:1
pattern-turns|PROFILE_MODE=turns PROFILE_COMMS=dup|$pattern|
pattern-world|PROFILE_MODE=once PROFILE_COMMS=world|$pattern|
EOF

# 3. Another rank count.
job ranks3 MPIXSTREAM_POLICY=guided MPIXSTREAM_PROFILE="$out/prof/profile.json" -- -n 3 "$sel"
grep -q 'was made with 2 ranks, this job has 3' "$out/ranks3.err" && grep -q 'No Errors' "$out/ranks3.out" &&
  valid "$out/ranks3.json"
verdict "a 2-rank profile on 3 ranks: runs, and stderr says the rank counts differ (rc=$rc)" $(( rc != 0 || $? != 0 ))
sed 's/^/    | /' "$out/ranks3.err" | grep 'guided policy' | head -2
expect "a 2-rank profile on 3 ranks: the report says so, and nothing gets a stream" mismatch "$out/ranks3.json"

# 4. A constructor the profile never saw.
job extra GUIDED_EXTRA=1 MPIXSTREAM_POLICY=guided MPIXSTREAM_PROFILE="$out/prof/profile.json" -- -n 2 "$sel"
[ "$(grep -c 'which the profile .* never saw' "$out/extra.err")" = 1 ] && grep -q 'world/split:4' "$out/extra.err" && valid "$out/extra.json"
verdict "a constructor the profile never saw: said once on stderr, naming world/split:4 (rc=$rc)" $(( rc != 0 || $? != 0 ))
expect "... counted in the report (that one alone: the idup before it is not unseen)" unseen "$out/extra.json" 1
expect "... while a and b keep their streams" streams "$out/extra.json" "${selected[@]}"

# 5. Mistakes stop MPI_Init, naming the variable.
python3 - "$out/prof/profile.json" "$out/explicit-profile.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["guided"]["policy"] = "explicit"
json.dump(p, open(sys.argv[2], "w"))
EOF
echo '{"format": "mpixstream-profile"' >"$out/broken.json"
while IFS='|' read -r what policy profile text; do
  job mistake MPIXSTREAM_POLICY="$policy" ${profile:+MPIXSTREAM_PROFILE="$profile"} -- -n 2 "$sel"
  grep -qF "$text" "$out/mistake.err"
  verdict "$what: MPI_Init stops (rc=$rc), saying '$text'" $(( rc == 0 || $? != 0 ))
done <<EOF
guided without a profile|guided||MPIXSTREAM_POLICY=guided needs MPIXSTREAM_PROFILE
an unreadable profile|guided|$out/none.json|MPIXSTREAM_PROFILE=$out/none.json: cannot read it
a profile that is not JSON|guided|$out/broken.json|MPIXSTREAM_PROFILE=$out/broken.json: not JSON
a profile made under explicit|guided|$out/explicit-profile.json|made under the explicit policy
the profile without the guided policy|explicit|$out/prof/profile.json|MPIXSTREAM_PROFILE=$out/prof/profile.json: expected
EOF

# 6. mpixrun --compare with the guided policy (its own profile run first).
timeout 300 "$mpixrun" --compare --reps 1 --policies implicit,explicit,guided --out "$out/compare" -n 2 "$sel" \
  >"$out/compare.txt" 2>&1
rc=$?
[ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
sed 's/^/    | /' "$out/compare.txt" | grep -v '^    | mpixrun --compare: .* run 1' | head -20
python3 -c "
import json, sys
c = json.load(open('$out/compare/compare.json'))
sys.exit(0 if all('median' in c['policies'][p] for p in ('implicit', 'explicit', 'guided')) else 1)"
verdict "mpixrun --compare --policies implicit,explicit,guided: every policy ran (rc=$rc)" $(( rc != 0 || $? != 0 ))
expect "... and its guided report run has a and b on streams, nothing else" streams "$out/compare/report-guided.json" \
  "${selected[@]}"

exit $failed

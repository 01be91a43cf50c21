# Sourced by the tests across simulated hosts (tests/scripts/hosts_*.sh, tests/mpich_builds/*_hosts.sh),
# after they set $root. Its build and job functions use scripts/env.sh (mpich_select, mpiexec_across).
hosts=$root/scripts/hosts.sh

# hosts_or_skip: exits 77 (SKIP, with the reason) where hosts cannot be made on this machine.
hosts_or_skip() {
  local why
  why=$("$hosts" check) || { echo "SKIP: no simulated hosts on this machine: $why"; exit 77; }
}

# hosts_up: h1 and h2 up; taken down at exit when this test brought them up (another test's stay).
hosts_up() {
  "$hosts" owns h1 h2 && return
  "$hosts" up 2 || { echo "FAIL scripts/hosts.sh up 2"; exit 1; }
  trap '"$hosts" down' EXIT
}

# build_without_library NAME BUILD: tests/mpich_builds/NAME.c built with BUILD's mpicc alone into
# build/mpich_builds/NAME-BUILD (sets $out and $bin): neither linked with mpixstream nor loading it
# (ldd checks), for the reproducers that show a defect without the library. Exits 1 where it cannot.
build_without_library() {
  mpich_select "$2" || exit 1
  out=$root/build/mpich_builds
  mkdir -p "$out"
  bin=$out/$1-$2
  "$MPICC" -O2 "$root/tests/mpich_builds/$1.c" -o "$bin" || exit 1
  ! ldd "$bin" | grep -q mpixstream || { echo "$bin loads mpixstream"; exit 1; }
}

# across_hosts PLACEMENT: the jobs that follow run at PLACEMENT (Hydra's -hosts list, e.g. h1:2,h2:2):
# sets $np to its rank count and MPIEXEC_ACROSS (scripts/env.sh's mpiexec_across). Exits 2 where it
# cannot.
across_hosts() {
  np=$(echo "$1" | tr ',' '\n' | awk -F: '{ s += $2 } END { print s }')
  mpiexec_across -hosts "$1" || exit 2
}

# job_across LOG LIMIT [VAR=VALUE...] -- ARGS...: one job of $bin ARGS at across_hosts' placement
# ($np ranks), with VAR=VALUE set and LD_PRELOAD unset (no mpixstream), killed after LIMIT seconds;
# its output in LOG. Returns the job's status (124: it ran past LIMIT).
job_across() {
  local log=$1 seconds=$2 envs=(-u LD_PRELOAD)
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout "$seconds" "${MPIEXEC_ACROSS[@]}" -n "$np" "$bin" "$@" >"$log" 2>&1 </dev/null
}

# reap_after_failure RC: after a job that exited RC, a failed or killed one's leftovers go (the
# processes left in the hosts, MPICH's stale /dev/shm segments) so that the next job starts clean.
reap_after_failure() {
  [ "$1" -eq 0 ] && return 0
  "$hosts" reap
  bash "$root/scripts/shm_cleanup.sh"
}

# run_variant NAME PLACEMENT CONTROL(1|0) [VAR=VALUE...] -- ARGS...: $runs jobs of job_across (LIMIT
# $limit) at PLACEMENT, logs under $out named after $bin, NAME and the job's number; prints a line
# "$build, PLACEMENT, without mpixstream, PROGRAM NAME: N of $runs jobs completed, H hung, O other"
# (completed: exit 0 and " No Errors"; hung: killed at $limit). A CONTROL variant (1) that did not
# complete every job sets controls_ok=0.
run_variant() {
  local name=$1 where=$2 control=$3 ok=0 hung=0 other=0 i rc log
  shift 3
  across_hosts "$where"
  for i in $(seq "$runs"); do
    log=$out/$(basename "$bin")-${name//[^A-Za-z0-9=]/_}-$i.log
    job_across "$log" "$limit" "$@"
    rc=$?
    if [ $rc -eq 0 ] && grep -q ' No Errors' "$log"; then ok=$((ok + 1))
    elif [ $rc -eq 124 ]; then hung=$((hung + 1))
    else other=$((other + 1)); fi
    reap_after_failure $rc
  done
  echo "$build, $where, without mpixstream, $(basename "$bin") $name: $ok of $runs jobs completed, $hung hung, $other other"
  [ "$control" = 1 ] && [ $ok -ne "$runs" ] && controls_ok=0
}

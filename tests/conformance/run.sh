#!/usr/bin/env bash
# Runs a selection of MPICH's own test suite (test/mpi of Debian's `mpich`
# 4.0.2 source package) against an installed MPICH, with libmpixstream
# preloaded into the ranks.  See README.md in this directory.
#
#   run.sh [--mpich NAME|PREFIX] [--policy implicit|explicit]
#          [--preload PATH | --no-preload] [--list FILE | --all [--dirs D1,D2..]]
#          [--known FILE] [--max-np N] [--timeout S] [--logs DIR]
#          [--check-known] [--hosts LIST] [-v|--verbose]
#
#   --mpich       MPICH to build against and run with: deb, 5, 5-ofi, a PyPI version X.Y.Z
#                 (scripts/install.sh --mpich X.Y.Z) or a prefix (scripts/env.sh), default deb
#   --policy      MPIXSTREAM_POLICY given to the ranks, default implicit
#   --preload     library preloaded into the ranks (mpiexec -genv LD_PRELOAD),
#                 default $MPIXSTREAM_LIB; --no-preload runs the plain MPICH
#   --list        selection file, default selection.txt here
#   --all         every test of MPICH's testlists (what MPICH's own runtests runs), from the
#                 top-level testlist of the configured build down: every C directory but spawn,
#                 Fortran, C++, ft, perf and checkpointing (not configured: README.md says why);
#                 --dirs limits it to these top-level directories (comma list, e.g. rma,io)
#   --slice K/N   only the tests at positions K, K+N, K+2N... of the list (0 <= K < N): CI's
#                 rotation runs one slice of --all per day (tests/run.sh)
#   --known       known failures, default known-failures.txt here
#   --max-np      cap on the number of processes, default 4
#   --timeout     per-test limit in seconds where the testlist sets none, default 30
#   --logs        per-test output and times.tsv, default results/conformance/<run>
#   --hosts       run each test across these hosts (Hydra's -hosts list, e.g. h1,h2: ranks round
#                 robin; simulated hosts of scripts/hosts.sh are entered through it)
#   --check-known re-run each KNOWN failure without the library; it stays KNOWN
#                 only if it fails there with the same reason
#   -v            print the first lines of the output of each test not passed
#
# Fetch, configure and build are cached and idempotent:
#   .deps/mpich-src/mpich-4.0.2/      the unpacked source package (never modified)
#   .deps/mpich-src/tests-<mpich>/    VPATH build of test/mpi, one per MPICH
# Output: one line per test (PASS/FAIL/KNOWN/SKIP), then
#   "K known failures (fail identically without mpixstream)" and
#   "N passed, M failed" as the last line.  Exit status 1 if M > 0.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=/dev/null
source "$root/scripts/env.sh"

mpich=deb policy=implicit preload=default list="$here/selection.txt"
known="$here/known-failures.txt" max_np=4 def_timeout=30 logs="" verbose=0
check_known=0 all=0 dirs="" slice="" hosts=""
usage() { sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift ;;
    --policy) policy=$2; shift ;;
    --preload) preload=$2; shift ;;
    --no-preload) preload=none ;;
    --list) list=$2; shift ;;
    --all) all=1 ;;
    --dirs) dirs=$2; shift ;;
    --slice) slice=$2; shift ;;
    --known) known=$2; shift ;;
    --max-np) max_np=$2; shift ;;
    --timeout) def_timeout=$2; shift ;;
    --logs) logs=$2; shift ;;
    --check-known) check_known=1 ;;
    --hosts) hosts=$2; shift ;;
    -v|--verbose) verbose=1 ;;
    -h|--help) usage 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
case "$policy" in implicit|explicit) ;; *) echo "run.sh: --policy must be implicit or explicit" >&2; exit 2 ;; esac
mpich_select "$mpich" || exit 2
launch=("$MPIEXEC")
if [ -n "$hosts" ]; then
  mpiexec_across -hosts "$hosts" || exit 2
  launch=("${MPIEXEC_ACROSS[@]}")
fi
[ -n "$dirs" ] && [ $all -eq 0 ] && { echo "run.sh: --dirs needs --all" >&2; exit 2; }
slice_k=0 slice_n=1
if [ -n "$slice" ]; then
  [[ "$slice" =~ ^([0-9]+)/([1-9][0-9]*)$ ]] && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ] ||
    { echo "run.sh: --slice takes K/N with 0 <= K < N" >&2; exit 2; }
  slice_k=${BASH_REMATCH[1]} slice_n=${BASH_REMATCH[2]}
fi
[ -r "$list" ] || { echo "run.sh: cannot read list '$list'" >&2; exit 2; }
[ -f "$list" ] && list=$(cd "$(dirname "$list")" && pwd)/$(basename "$list")

if [ "$preload" = default ]; then
  preload=$MPIXSTREAM_LIB
  if [ ! -f "$preload" ]; then
    echo "run.sh: $preload does not exist; build it (cargo build --release)," \
         "pass --preload PATH, or run the baseline with --no-preload" >&2
    exit 2
  fi
fi
if [ "$preload" != none ]; then
  [ -f "$preload" ] || { echo "run.sh: preload library '$preload' not found" >&2; exit 2; }
  preload=$(cd "$(dirname "$preload")" && pwd)/$(basename "$preload")
fi

src_parent=$root/.deps/mpich-src
src_ver=4.0.2
src=$src_parent/mpich-$src_ver/test/mpi
build=$src_parent/tests-$MPICH_NAME
tag=$MPICH_NAME-$policy-$([ "$preload" = none ] && echo nopreload || echo preload)$([ $all -eq 1 ] && echo -all)${hosts:+-hosts}
logs=${logs:-$root/results/conformance/$tag}
mkdir -p "$src_parent" "$logs"

die() { echo "run.sh: $*" >&2; exit 2; }

# ---------------------------------------------------------------- fetch ----
# Debian's source package, via deb-src entries for the same suites as the
# configured binary entries.
fetch_source() {
  [ -f "$src/runtests.in" ] && return 0
  local log=$src_parent/fetch.log
  : >"$log"
  command -v dpkg-source >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >>"$log" 2>&1 ||
      die "cannot install dpkg-dev (see $log)"
  }
  if ! grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ -w /etc/apt/sources.list.d ] || die "no deb-src entries and /etc/apt not writable (run as root once)"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed -E 's/^Types:[[:space:]]*deb([[:space:]]*)$/Types: deb-src/' \
        /etc/apt/sources.list.d/debian.sources >/etc/apt/sources.list.d/mpixstream-deb-src.sources
    elif [ -f /etc/apt/sources.list ]; then
      sed -nE 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list \
        >/etc/apt/sources.list.d/mpixstream-deb-src.list
    else
      die "no /etc/apt/sources.list(.d/debian.sources) to derive deb-src entries from"
    fi
    echo "note: added deb-src entries in /etc/apt/sources.list.d/mpixstream-deb-src.*"
  fi
  if ! apt-cache showsrc mpich 2>/dev/null | grep -q "^Version: $src_ver-"; then
    apt-get update -qq >>"$log" 2>&1 || die "apt-get update failed (see $log)"
  fi
  local ver
  ver=$(apt-cache showsrc mpich 2>/dev/null | sed -n "s/^Version: \($src_ver-.*\)/\1/p" | head -1)
  [ -n "$ver" ] || die "Debian source package mpich $src_ver-* not available (see $log)"
  rm -rf "$src_parent/mpich-$src_ver"  # a half-extracted tree from an interrupted run
  (cd "$src_parent" && apt-get source -qq "mpich=$ver") >>"$log" 2>&1 ||
    die "apt-get source mpich=$ver failed (see $log)"
  [ -f "$src/runtests.in" ] || die "unexpected source layout in $src_parent (see $log)"
  echo "note: fetched Debian source mpich=$ver into .deps/mpich-src"
}

# ------------------------------------------------------------ configure ----
# Every C directory: C only, MPI_THREAD_MULTIPLE for threads/, error-checking tests (errors/), RMA,
# MPI-IO (io/, ROMIO) and partitioned communication (part/). Not configured: spawn (the policy does not
# cover spawned worlds), Fortran and C++ bindings (the library interposes the C ABI only), ft (process
# failures), perf (timing assertions, meaningless on a shared 2-core machine), checkpointing (BLCR),
# and the dtpools-generated datatype variants (thousands of type combinations of tests that also run
# with their basic types).
conf_args=(--enable-threads=multiple --enable-fortran=no --disable-cxx
           --disable-spawn --disable-dtpools --disable-perftest
           --disable-ft-tests --disable-checkfaults
           --disable-checkpointing --disable-dependency-tracking --enable-silent-rules)
configure_build() {
  local stamp="$build/.mpixstream-configured" want
  want="MPICC=$MPICC MPIEXEC=$MPIEXEC ${conf_args[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  rm -rf "$build"; mkdir -p "$build"
  (cd "$build" && CC=$MPICC MPICC=$MPICC MPIEXEC=$MPIEXEC "$src/configure" -q "${conf_args[@]}") \
    >"$src_parent/configure-$MPICH_NAME.log" 2>&1 ||
    die "configure of test/mpi against $MPICC failed (see $src_parent/configure-$MPICH_NAME.log)"
  echo "$want" >"$stamp"
}

# ------------------------------------------------------------- selection ----
# Lines: dir/prog np [arg=..] [env=..] [mpiexecarg=..] [timeLimit=S]
#        [resultTest=..] [minnp=N] [cap=N]
# An np above --max-np is capped to cap=N (when given) or to --max-np; an
# entry with minnp=N above --max-np is skipped instead.
# (the testlist syntax of test/mpi, with the directory in front).
declare -a T_NAME T_NP T_REQNP T_ARGS T_ENVS T_MPX T_TLIM T_RESULT T_SKIP
read_selection() {
  local line name np opt n=0
  local pos=-1
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    read -r -a f <<<"$line"
    [ ${#f[@]} -eq 0 ] && continue
    pos=$((pos + 1))
    [ $((pos % slice_n)) -eq "$slice_k" ] || continue
    name=${f[0]} np=${f[1]:-}
    [[ "$np" =~ ^[0-9]+$ ]] || die "$list: bad line '$line'"
    local args=() envs=() mpx=() tlim=$def_timeout result="" minnp=1 cap="" skip=""
    for opt in "${f[@]:2}"; do
      case "$opt" in
        arg=*) args+=("${opt#arg=}") ;;
        env=*) envs+=("${opt#env=}") ;;
        timeLimit=*) tlim=${opt#timeLimit=} ;;
        resultTest=*) result=${opt#resultTest=} ;;
        minnp=*) minnp=${opt#minnp=} ;;
        cap=*) cap=${opt#cap=} ;;
        mpiexecarg=*) mpx+=("${opt#mpiexecarg=}") ;;
        xfail=*) skip="MPICH's testlist expects it to fail (${opt#xfail=})" ;;
        mem=*|strict=*|mpix=*|lock=*|mpiversion=*) ;;
        *=*) die "$list: unknown option '$opt' in '$line'" ;;
        *) ;;  # bare words are ignored, as runtests does
      esac
    done
    case "$result" in ""|TestStatus|TestStatusNoErrors) ;; *) skip="resultTest=$result not supported" ;; esac
    T_NAME[n]=$name T_REQNP[n]=$np
    if [ "$np" -gt "$max_np" ]; then
      if [ "$minnp" -gt "$max_np" ]; then skip="needs $minnp processes, max is $max_np"; fi
      if [ -n "$cap" ] && [ "$cap" -le "$max_np" ]; then np=$cap; else np=$max_np; fi
    fi
    T_NP[n]=$np T_TLIM[n]=$tlim T_RESULT[n]=$result T_SKIP[n]=$skip
    T_ARGS[n]="" T_ENVS[n]="" T_MPX[n]=""
    [ ${#mpx[@]} -gt 0 ] && T_MPX[n]=$(printf '%q ' "${mpx[@]}")
    [ ${#args[@]} -gt 0 ] && T_ARGS[n]=$(printf '%q ' "${args[@]}")
    [ ${#envs[@]} -gt 0 ] && T_ENVS[n]=$(printf '%q ' "${envs[@]}")
    n=$((n + 1))
  done <"$list"
}

# --all: the selection, in the harness's format, from the configured build's testlists (each line of a
# testlist is a program with its process count and options, or a subdirectory; configure comments out
# what it did not configure). MPICH's own expected failures (xfail=) are skipped, with the reason.
all_tests() { # dir (relative to $build, "" for the top)
  local d=$1 line f tl
  # configure makes a directory's testlist from testlist.in; the others are in the source tree
  tl=$build/${d:+$d/}testlist
  [ -f "$tl" ] || tl=$src/${d:+$d/}testlist
  [ -f "$tl" ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    read -r -a f <<<"$line"
    [ ${#f[@]} -eq 0 ] && continue
    if [ ${#f[@]} -eq 1 ] && [ -d "$build/${d:+$d/}${f[0]}" ]; then
      if [ -z "$d" ] && [ -n "$dirs" ] && [[ ",$dirs," != *",${f[0]},"* ]]; then continue; fi
      all_tests "${d:+$d/}${f[0]}"
    elif [ -n "$d" ] && [ ${#f[@]} -ge 2 ]; then
      echo "$d/${f[*]}"
    fi
  done <"$tl"
}

# Programs are built one by one with `make <prog>` in their directory.
build_selected() {
  local -A progs=()
  local i d p blog=$build/build.log
  for i in "${!T_NAME[@]}"; do
    [ -n "${T_SKIP[i]}" ] && continue
    d=${T_NAME[i]%/*} p=${T_NAME[i]##*/}
    [[ " ${progs[$d]:-} " == *" $p "* ]] || progs[$d]="${progs[$d]:-} $p"
  done
  : >"$blog"
  for d in "${!progs[@]}"; do
    [ -f "$build/$d/Makefile" ] || { echo "no directory $d in test/mpi" >>"$blog"; continue; }
    # shellcheck disable=SC2086
    make -k -j2 -C "$build/$d" ${progs[$d]} >>"$blog" 2>&1 || true
  done
}

# ------------------------------------------------------------------- known ----
is_known() { # mpich name np -> prints the reason and returns 0 if listed
  [ -f "$known" ] || return 1
  awk -v m="$1" -v t="$2" -v n="$3" '
    /^[[:space:]]*(#|$)/ { next }
    ($1 == m || $1 == "*") && $2 == t && ($3 == n || $3 == "*") {
      $1 = $2 = $3 = ""; sub(/^ +/, ""); print; found = 1; exit }
    END { exit !found }' "$known"
}

# Tests that fail only under the explicit policy on MPICH 5.0.2, because the policy makes the test's
# communicators native stream communicators and MPICH itself hangs on the calls they use there
# (persistent requests, buffered sends, nonblocking collectives: tests/native_defects/run.sh shows each
# hanging without mpixstream). Listed with the reproducer's operation; never used for other runs.
native_defects="$here/native-defects.txt"
is_native_defect() { # name np -> prints the reason and returns 0 if listed (explicit policy, MPICH 5 only)
  [ "$MPICH_NAME" = 5 ] && [ "$policy" = explicit ] && [ "$preload" != none ] && [ -f "$native_defects" ] || return 1
  awk -v t="$1" -v n="$2" '
    /^[[:space:]]*(#|$)/ { next }
    $1 == t && ($2 == n || $2 == "*") { $1 = $2 = ""; sub(/^ +/, ""); print; found = 1; exit }
    END { exit !found }' "$native_defects"
}

# Tests that use one communicator from several threads at once: legal MPI, but not under the explicit
# policy, which asserts one thread per communicator at a time (a stream's VCI has no lock). Under
# `explicit` each runs with MPIXSTREAM_CHECK=1 and passes only if the check stops it.
violations="$here/policy-violations.txt"
is_policy_violation() { # name np -> prints the reason and returns 0 if listed (explicit policy, with the library)
  [ "$policy" = explicit ] && [ "$preload" != none ] && [ -f "$violations" ] || return 1
  awk -v t="$1" -v n="$2" '
    /^[[:space:]]*(#|$)/ { next }
    $1 == t && ($2 == n || $2 == "*") { $1 = $2 = ""; sub(/^ +/, ""); print; found = 1; exit }
    END { exit !found }' "$violations"
}
check_message="used by two threads at once"

# --------------------------------------------------------------------- run ----
# run_one i preloadlib logfile [check] -> sets R_REASON ("" = pass), R_SECS, R_RC; `check`: with the
# tools library after the lean one and MPIXSTREAM_CHECK=1
run_one() {
  local i=$1 lib=$2 log=$3 d p np tl rc start
  d=${T_NAME[i]%/*} p=${T_NAME[i]##*/} np=${T_NP[i]} tl=${T_TLIM[i]}
  local -a genv=(-genv MPIXSTREAM_POLICY "$policy") args=() envs=() mpx=()
  if [ "${4:-}" = check ]; then
    genv+=(-genv LD_PRELOAD "$lib:${MPIXSTREAM_TOOLS_LIB:-${lib%/*}/libmpixstream_tools.so}" -genv MPIXSTREAM_CHECK 1)
  elif [ "$lib" != none ]; then
    genv+=(-genv LD_PRELOAD "$lib")
  fi
  # MPICH's tests mostly call MPI_Init, below MPI_THREAD_MULTIPLE, where the policy is inert
  # (shim/src/backend/demand.rs): on a native build their level is raised, so that the policy moves their
  # communicators and the suite checks it (as every program was raised before the policy became inert).
  if [ "$lib" != none ] && [ "$policy" = explicit ] && [ "${MPICH_BACKEND:-}" = native ]; then
    genv+=(-genv MPIXSTREAM_THREAD_MULTIPLE 1)
  fi
  eval "args=(${T_ARGS[i]})"; eval "envs=(${T_ENVS[i]})"; eval "mpx=(${T_MPX[i]})"
  local e
  for e in "${envs[@]}"; do genv+=(-genv "${e%%=*}" "${e#*=}"); done
  R_SECS=0
  if [ ! -x "$build/$d/$p" ]; then
    R_REASON="not built, see $build/build.log"; echo "$R_REASON" >"$log"; return
  fi
  start=$(date +%s.%N)
  (cd "$build/$d" && exec timeout -k 5 "$tl" "${launch[@]}" -n "$np" "${mpx[@]}" "${genv[@]}" "./$p" "${args[@]}") \
    </dev/null >"$log" 2>"$log.stderr"
  rc=$?
  R_RC=$rc
  # A rank killed by the timeout leaves MPICH's shared memory behind; enough of it fills /dev/shm.
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && bash "$here/../../scripts/shm_cleanup.sh"
  # ... and, across simulated hosts, the ranks its killed mpiexec left there.
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ ${#launch[@]} -gt 1 ] && "$root/scripts/hosts.sh" reap 2>/dev/null
  R_SECS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  # The verdict is the program's standard output: MPICH's own warnings on standard error (MPICH 5.0.2's
  # "Builtin communicator ... has pending 1 references" at the end of pt2pt/rqfreeb, with and without
  # the library) were seen merged into the " No Errors" line. The log keeps both, stderr last.
  local noerr=0
  grep -qE '^[[:space:]]*No [Ee]rrors[[:space:]]*$' "$log" && noerr=1
  cat "$log.stderr" >>"$log" 2>/dev/null; rm -f "$log.stderr"
  R_REASON=""
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then R_REASON="timeout after ${tl}s"
  else
    case "${T_RESULT[i]}" in
      TestStatus) [ $rc -ne 0 ] || R_REASON="exit 0, expected a non-zero exit status" ;;
      TestStatusNoErrors)
        if [ $rc -eq 0 ]; then R_REASON="exit 0, expected a non-zero exit status"
        elif [ $noerr -eq 0 ]; then R_REASON="no 'No Errors' in output"; fi ;;
      *)
        if [ $rc -ne 0 ] && [ $noerr -eq 0 ]; then R_REASON="exit $rc, no 'No Errors' in output"
        elif [ $rc -ne 0 ]; then R_REASON="exit $rc"
        elif [ $noerr -eq 0 ]; then R_REASON="no 'No Errors' in output"; fi ;;
    esac
  fi
}

# mpiexec forwards its whole environment to the ranks: the library must reach
# them only through -genv, never through a preload inherited from the caller.
unset LD_PRELOAD

exec 9>"$src_parent/.lock"
flock 9
fetch_source
configure_build
if [ $all -eq 1 ]; then
  # The harness keys (cap=, minnp=) of selection.txt and all-keys.txt hold for the same program.
  all_tests "" | awk 'FILENAME != "-" { sub(/#.*/, ""); for (i = 2; i <= NF; i++) if ($i ~ /^(cap|minnp)=/) keys[$1] = keys[$1] " " $i; next }
                      { print $0 keys[$1] }' "$list" "$here/all-keys.txt" - >"$logs/all-tests.txt"
  list=$logs/all-tests.txt
fi
read_selection
build_selected
flock -u 9

echo "conformance: MPICH=$MPICH_NAME ($MPIEXEC${hosts:+ on hosts $hosts}) policy=$policy" \
     "preload=$([ "$preload" = none ] && echo none || echo "$preload") tests=${#T_NAME[@]}"
pass=0 fail=0 knownc=0 nativec=0 skipped=0 unbuilt=0 t0=$(date +%s)
rm -f "$logs"/*.np[0-9]*.log "$logs"/*.np[0-9]*.log.nopreload
times=$logs/times.tsv
printf 'test\tnp\tseconds\tresult\n' >"$times"
# One mpiexec at a time (the machine has 2 cores); a lock shared with other
# runs of this harness keeps concurrent invocations from overlapping.
exec 8>"$src_parent/.run-lock"
flock 8
for i in "${!T_NAME[@]}"; do
  name=${T_NAME[i]} np=${T_NP[i]}
  if [ -n "${T_SKIP[i]}" ]; then
    echo "SKIP $name np=${T_REQNP[i]} (${T_SKIP[i]})"
    skipped=$((skipped + 1)); continue
  fi
  if [ $all -eq 1 ] && [ ! -x "$build/${name%/*}/${name##*/}" ]; then
    # --all takes every program of the testlists; some use what this MPICH lacks (e.g. MPICH 5.0.2
    # has no MPIX_Delete_error_string). A selected program that does not build is a FAIL instead.
    echo "SKIP $name np=${T_REQNP[i]} (does not build against MPICH $MPICH_NAME: $build/build.log)"
    skipped=$((skipped + 1)) unbuilt=$((unbuilt + 1)); continue
  fi
  capnote=""
  [ "$np" != "${T_REQNP[i]}" ] && capnote=" [testlist np=${T_REQNP[i]}, capped]"
  log=$logs/${name//\//_}.np$np.$i.log
  native_reason=""
  if native_reason=$(is_native_defect "$name" "$np"); then
    # A hang: 10 s show it as well as the testlist's limit.
    [ "${T_TLIM[i]}" -gt 10 ] && T_TLIM[i]=10
  fi
  if violation=$(is_policy_violation "$name" "$np"); then
    run_one "$i" "$preload" "$log" check
    if [ "$R_RC" -ne 0 ] && [ "$R_RC" -ne 124 ] && [ "$R_RC" -ne 137 ] && grep -qF "$check_message" "$log"; then
      pass=$((pass + 1)); echo "PASS $name np=$np (violates the explicit policy, $violation; MPIXSTREAM_CHECK=1 stopped it)"
      printf '%s\t%s\t%s\t%s\n' "$name" "$np" "$R_SECS" CAUGHT >>"$times"
    else
      fail=$((fail + 1)); echo "FAIL $name np=$np (violates the explicit policy, $violation; MPIXSTREAM_CHECK=1 did not stop it: ${R_REASON:-it passed})"
      printf '%s\t%s\t%s\t%s\n' "$name" "$np" "$R_SECS" FAIL >>"$times"
    fi
    continue
  fi
  run_one "$i" "$preload" "$log"
  if [ -n "$R_REASON" ] && [ -n "$native_reason" ]; then
    status=NATIVE; nativec=$((nativec + 1))
    echo "NATIVE-DEFECT $name np=$np ($R_REASON; $native_reason)"
  elif [ -z "$R_REASON" ]; then
    status=PASS; pass=$((pass + 1))
    if reason=$(is_known "$MPICH_NAME" "$name" "$np"); then
      echo "note: $name np=$np is listed in $(basename "$known") but passed"
    fi
    echo "PASS $name np=$np"
  elif reason=$(is_known "$MPICH_NAME" "$name" "$np"); then
    status=KNOWN
    if [ $check_known -eq 1 ] && [ "$preload" != none ]; then
      saved=$R_REASON
      run_one "$i" none "$log.nopreload"
      if [ -z "$R_REASON" ]; then
        status=FAIL R_REASON="$saved; listed as known but passes without mpixstream"
      elif [ "$R_REASON" != "$saved" ]; then
        status=FAIL R_REASON="$saved; listed as known but fails differently without mpixstream: $R_REASON"
      else
        R_REASON=$saved
      fi
    fi
    if [ $status = KNOWN ]; then
      knownc=$((knownc + 1)); echo "KNOWN $name np=$np ($R_REASON; known: $reason)"
    else
      fail=$((fail + 1)); echo "FAIL $name np=$np ($R_REASON)"
    fi
  else
    status=FAIL; fail=$((fail + 1))
    echo "FAIL $name np=$np ($R_REASON)$capnote"
  fi
  if [ $verbose -eq 1 ] && [ $status != PASS ]; then head -n 20 "$log" | sed 's/^/    | /'; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$np" "$R_SECS" "$status" >>"$times"
done
flock -u 8

capped=$(for i in "${!T_NAME[@]}"; do
  [ -z "${T_SKIP[i]}" ] && [ "${T_NP[i]}" != "${T_REQNP[i]}" ] && printf ' %s(%s->%s)' "${T_NAME[i]}" "${T_REQNP[i]}" "${T_NP[i]}"
done)
[ -n "$capped" ] && echo "capped to at most $max_np processes (testlist np->np run):$capped"
echo "elapsed $(( $(date +%s) - t0 ))s; logs and times.tsv in $logs"
[ $skipped -gt 0 ] && echo "$skipped skipped$([ $unbuilt -gt 0 ] && echo " ($unbuilt of them do not build against MPICH $MPICH_NAME)")"
echo "$knownc known failures (fail identically without mpixstream)"
[ $nativec -gt 0 ] && echo "$nativec failures from native MPICH 5.0.2 stream-communicator defects under the explicit policy (each call reproduced hanging without mpixstream: tests/native_defects/run.sh; listed in native-defects.txt)"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# mpi4py's own test suite, without mpixstream and with it (MPIXSTREAM_POLICY=explicit), compared test by test.
#   tests/mpi4py/run.sh [--mpich deb|5] [--np N] [--only MODULE-PATTERN] [--policy explicit|implicit]
#                       [--hosts LIST]
# The whole suite runs in one job of N ranks (default 2), as a user runs it (`mpiexec -n 2 python3
# runtests.py`), first without mpixstream (the reference), then with it; each rank writes unittest's
# verbose output to a log of its own, and tests/mpi4py/compare.py compares the two runs test by test on
# every rank (a crash, a timeout or a test not reached never counts as the same outcome; a test that
# passes without mpixstream must pass with it). Where the reference itself hangs on a test listed in
# tests/mpi4py/KNOWN (Debian's 4.0.2: test_util_sync), the suite runs in groups of whole modules instead:
# each module holding such a test alone, the modules between them together, so that the hang stops only
# its own module; the tests of that module after the hang are reached by neither run (on Debian 4.0.2,
# 70 of test_util_sync's 78; no log names them). Nothing is ever left out, and no test is run alone.
# --policy: the policy of the runs with mpixstream; --hosts: every run across these hosts (Hydra's -hosts
# list, e.g. h1,h2; simulated ones of scripts/hosts.sh too); --only: the modules whose name contains the
# pattern (for development: the suite is then no longer whole).
# The suite comes from mpi4py's PyPI source distribution (the version of the installed wheel), fetched
# into .deps/ on first use; nothing of it is kept in the repository.
# Prints a FAIL line per test whose outcome differs (KNOWN where a KNOWN row excuses it), a PASS or FAIL
# line per job with the counts and both wall times and their ratio, and ends with
# "N passed, M failed, K known" (N, M, K: tests).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich=5; np=2; only=""; policy=explicit; hosts=""
# A job's limit in seconds: MPICH 5.0.2's whole suite takes about 30 s without mpixstream and 70 s with it
# (2 ranks, 2 cores); a group whose reference is known to hang is stopped sooner (its tests before the hang
# take under 5 s).
limit=${MPIXTEST_MPI4PY_TIMEOUT:-300}
hang_limit=${MPIXTEST_MPI4PY_HANG_TIMEOUT:-20}
while [ $# -gt 0 ]; do
  case "$1" in
    --mpich) mpich=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    *) echo "usage: tests/mpi4py/run.sh [--mpich deb|5] [--np N] [--only PATTERN] [--policy explicit|implicit] [--hosts LIST]" >&2; exit 2 ;;
  esac
done
version=4.1.2
src=$root/.deps/mpi4py-src/mpi4py-$version
if [ ! -f "$src/test/runtests.py" ]; then
  mkdir -p "$root/.deps/mpi4py-src"
  url=$(curl -fsSL https://pypi.org/simple/mpi4py/ | grep -o "href=\"[^\"]*mpi4py-$version.tar.gz[^\"]*\"" | head -1 |
    sed 's/^href="//; s/"$//; s/#.*//')
  [ -n "$url" ] && curl -fsSL -o "$root/.deps/mpi4py-src/sdist.tar.gz" "$url" &&
    tar xzf "$root/.deps/mpi4py-src/sdist.tar.gz" -C "$root/.deps/mpi4py-src" ||
    { echo "mpi4py $version source distribution unavailable"; echo "0 passed, 1 failed, 0 known"; exit 1; }
fi
mpich_select "$mpich" || { echo "0 passed, 1 failed, 0 known"; exit 1; }
case "$policy" in explicit|implicit) ;; *) echo "--policy: explicit or implicit" >&2; exit 2 ;; esac
launch=("$MPIEXEC") across=()
if [ -n "$hosts" ]; then
  mpiexec_across -hosts "$hosts" || exit 2
  launch=("${MPIEXEC_ACROSS[@]}") across=(--hosts "$hosts")
fi
# mpi4py's wheel loads libmpi.so.12; Debian names its library libmpich.so.12.
libdir=$MPICH_PREFIX/lib
if [ "$mpich" = deb ]; then
  libdir=$root/build/abi/lib; mkdir -p "$libdir"
  ln -sf /usr/lib/x86_64-linux-gnu/libmpich.so.12 "$libdir/libmpi.so.12"
fi
out=$root/build/mpi4py/$MPICH_NAME
rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/mpi4py LD_LIBRARY_PATH=$libdir
known_file=$root/tests/mpi4py/KNOWN
cd "$src/test"

# The modules, in runtests.py's order, and the groups they run in: one group of all of them, unless
# a KNOWN row says the reference hangs in a module of this build (outcome "timeout").
modules=()
for f in test_*.py; do
  m=${f%.py}
  [ -n "$only" ] && [[ "$m" != *$only* ]] && continue
  modules+=("$m")
done
# The KNOWN rows' builds: this one, and across hosts (--hosts) also BUILD/hosts, rows of what hangs there only.
kbuilds=$MPICH_NAME${hosts:+,$MPICH_NAME/hosts}
hanging=$(awk -v b=",$kbuilds," 'index(b, "," $1 ",") && $3 == "timeout" { split($2, p, "."); print p[1] }' "$known_file" | sort -u)
groups=() current=""
for m in "${modules[@]}"; do
  if grep -qx "$m" <<<"$hanging"; then
    [ -n "$current" ] && groups+=("$current")
    groups+=("$m"); current=""
  else
    current="${current:+$current }$m"
  fi
done
[ -n "$current" ] && groups+=("$current")

# run without|with LOG_PREFIX LIMIT MODULES...: one job of the modules (all of them: no argument),
# without mpixstream or with it, each rank's unittest output in LOG_PREFIX.RANK (Hydra's PMI_RANK); the
# job's exit status and wall time on stdout.
run() {
  local mode=$1 prefix=$2 lim=$3; shift 3
  local -a cmd=(sh -c 'exec python3 runtests.py --no-builddir -v "$@" >"$0.$PMI_RANK" 2>&1' "$prefix" "$@")
  local start=$EPOCHREALTIME rc
  if [ "$mode" = without ]; then
    timeout "$lim" "${launch[@]}" -genv LD_LIBRARY_PATH "$libdir" -n "$np" "${cmd[@]}" </dev/null >"$prefix.mpiexec" 2>&1
  else
    MPIXSTREAM_POLICY=$policy timeout "$lim" "$root/scripts/mpixrun" --mpich "$mpich" "${across[@]}" \
      -genv LD_LIBRARY_PATH "$libdir" -n "$np" "${cmd[@]}" </dev/null >"$prefix.mpiexec" 2>&1
  fi
  rc=$?
  bash "$root/scripts/shm_cleanup.sh" >/dev/null 2>&1
  echo "$rc $(echo "$EPOCHREALTIME - $start" | bc)"
}

passed=0 failed=0 known=0 unreached=0 tref=0 twith=0
ptag=""; [ "$policy" = implicit ] && ptag=" policy=implicit"
for g in "${!groups[@]}"; do
  set -- ${groups[$g]}
  lim=$limit; grep -qx "$1" <<<"$hanging" && lim=$hang_limit
  if [ ${#groups[@]} -eq 1 ] && [ -z "$only" ]; then what="whole suite"; set --; else what="modules $1..${!#} ($# modules)"; fi
  read -r rc_ref wall_ref < <(run without "$out/g$g-without" "$lim" "$@")
  read -r rc_with wall_with < <(run with "$out/g$g-with" "$lim" "$@")
  tref=$(echo "$tref + $wall_ref" | bc) twith=$(echo "$twith + $wall_with" | bc)
  python3 "$root/tests/mpi4py/compare.py" --build "$kbuilds" --known "$known_file" --np "$np" \
    "$out/g$g-without" "$rc_ref" "$out/g$g-with" "$rc_with" >"$out/g$g-compare"
  rc=$?
  grep -v '^COUNTS ' "$out/g$g-compare" | head -40
  read -r _ p f k u < <(grep '^COUNTS ' "$out/g$g-compare")
  [ $rc -ne 0 ] || [ -z "${p:-}" ] && { p=0 f=1 k=0 u=0; echo "FAIL compare.py failed on $out/g$g-*"; }
  passed=$((passed + p)) failed=$((failed + f)) known=$((known + k)) unreached=$((unreached + u))
  name="mpi4py $what np=$np mpich=$MPICH_NAME${hosts:+ hosts=$hosts}$ptag"
  times=$(printf 'wall %.1f s without mpixstream (exit %s), %.1f s with it (exit %s), ratio %.2f' \
    "$wall_ref" "$rc_ref" "$wall_with" "$rc_with" "$(echo "$wall_with / $wall_ref" | bc -l)")
  counts="$p tests identical, $f different, $k known"
  [ "$u" -gt 0 ] && counts+=", $u after a known hang reached by neither run"
  if [ "$f" -eq 0 ]; then echo "PASS $name: $counts; $times"; else echo "FAIL $name: $counts; $times (logs: $out/g$g-*)"; fi
done
printf 'mpi4py %s np=%s: wall %.1f s without mpixstream, %.1f s with it, ratio %.2f\n' "$MPICH_NAME" "$np" \
  "$tref" "$twith" "$(echo "$twith / $tref" | bc -l)"
echo "$passed passed, $failed failed, $known known"
[ $failed -eq 0 ]

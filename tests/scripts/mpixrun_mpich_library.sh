#!/usr/bin/env bash
# mpixrun --mpich NAME selects the MPI library the program loads as well as the launcher, and without
# --mpich the launcher is the one of the library the program loads (not the first mpiexec on PATH):
#   - a program built with MPICH 5.0.2's mpicc (MPIX streams used, its RUNPATH on MPICH 5's lib) runs on
#     Debian's MPICH 4.0.2 through `mpixrun --mpich deb` (the library's version line says 4.0.2, the
#     ranks' parent is Debian's hydra_pmi_proxy), and a Debian-built one on 5.0.2 through --mpich 5;
#   - without --mpich (and no $MPIEXEC), the MPICH-5 program runs under MPICH 5's Hydra, although
#     Debian's mpiexec comes first on PATH;
#   - refusals, exit 2 and nothing run: a program whose DT_RPATH pins MPICH 5's library under
#     --mpich deb (the message names both libraries), and one whose libmpi.so.12 the loader does not
#     find without --mpich (the same program runs with --mpich 5).
# Real mpiexec, 2 ranks. Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/mpixrun-mpich-library
mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
show() { sed 's/^/    | /' "$1"; }
src=$root/tests/scripts/programs/which_mpi.c
mpich_select deb || { echo "SKIP: Debian's MPICH unavailable"; exit 77; }
deb_proxy=$(dirname "$(readlink -f "$MPIEXEC")")/hydra_pmi_proxy
"$MPICC" -O1 -DNO_MPIX "$src" -o "$out/which_deb" || { echo "FAIL build with $MPICC"; exit 1; }
mpich_select 5 || { echo "SKIP: MPICH 5 unavailable"; exit 77; }
five_proxy=$(dirname "$(readlink -f "$MPIEXEC")")/hydra_pmi_proxy
"$MPICC" -O1 "$src" -o "$out/which_5" || { echo "FAIL build with $MPICC"; exit 1; }
# DT_RPATH (not RUNPATH): searched before LD_LIBRARY_PATH, so no directory can point it elsewhere.
cc -O1 -I"$MPICH_PREFIX/include" "$src" -L"$MPICH_PREFIX/lib" -Wl,-rpath,"$MPICH_PREFIX/lib" -Wl,--disable-new-dtags -lmpi \
  -o "$out/which_5_rpath" || { echo "FAIL build (rpath)"; exit 1; }
# Linked without any run path: the loader finds libmpi.so.12 only through LD_LIBRARY_PATH.
cc -O1 -I"$MPICH_PREFIX/include" "$src" -L"$MPICH_PREFIX/lib" -lmpi -o "$out/which_5_bare" || { echo "FAIL build (bare)"; exit 1; }
readelf -d "$out/which_5_rpath" | grep -q '(RPATH)'
verdict "the pinned program carries a DT_RPATH" $?
private_dirs() { find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'mpixrun-mpi.*' -user "$(id -u)" 2>/dev/null | wc -l; }
dirs_before=$(private_dirs)
run() { # name, then mpixrun's arguments: stdout+stderr in $out/NAME.log, status in $rc
  local name=$1
  shift
  (cd "$out" && env -u MPIEXEC timeout 60 "$root/scripts/mpixrun" "$@") >"$out/$name.log" 2>&1 </dev/null
  rc=$?
}

# --mpich deb: MPICH 5's program on Debian's library and launcher, its MPIX calls served by mpixstream.
run deb-runs-5 --mpich deb -n 2 ./which_5
grep -q 'library: MPICH Version:[[:space:]]*4\.0\.2$' "$out/deb-runs-5.log" && grep -qxF "launcher: $deb_proxy" "$out/deb-runs-5.log" &&
  grep -qx ' No Errors' "$out/deb-runs-5.log" && [ $rc -eq 0 ]
rc2=$?
verdict "--mpich deb: the MPICH-5 program ran on MPICH 4.0.2 under Debian's Hydra (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/deb-runs-5.log"
# The other way: Debian's program (libmpich.so.12) on MPICH 5.0.2.
run 5-runs-deb --mpich 5 -n 2 ./which_deb
grep -q 'library: MPICH Version:[[:space:]]*5\.0\.2$' "$out/5-runs-deb.log" && grep -qxF "launcher: $five_proxy" "$out/5-runs-deb.log" &&
  grep -qx ' No Errors' "$out/5-runs-deb.log" && [ $rc -eq 0 ]
rc2=$?
verdict "--mpich 5: the Debian-built program ran on MPICH 5.0.2 (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/5-runs-deb.log"

# No --mpich: MPICH 5's launcher for MPICH 5's program, with Debian's mpiexec first on PATH.
path_mpiexec=$(PATH=/usr/bin:$PATH type -P mpiexec)
[ "$(dirname "$(readlink -f "$path_mpiexec")")" = "$(dirname "$deb_proxy")" ]
verdict "Debian's mpiexec is the first on PATH=/usr/bin:... ($path_mpiexec)" $?
PATH=/usr/bin:$PATH run default-5 -n 2 ./which_5
grep -q 'library: MPICH Version:[[:space:]]*5\.0\.2$' "$out/default-5.log" && grep -qxF "launcher: $five_proxy" "$out/default-5.log" &&
  grep -qx ' No Errors' "$out/default-5.log" && [ $rc -eq 0 ]
rc2=$?
verdict "no --mpich: the MPICH-5 program ran under MPICH 5's Hydra, not PATH's mpiexec (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/default-5.log"
PATH=/usr/bin:$PATH run default-deb -n 2 ./which_deb
grep -q 'library: MPICH Version:[[:space:]]*4\.0\.2$' "$out/default-deb.log" && grep -qxF "launcher: $deb_proxy" "$out/default-deb.log" && [ $rc -eq 0 ]
verdict "no --mpich: the Debian-built program ran on Debian's MPICH (exit $rc)" $?

# Refusals: exit 2, the mismatch named, no rank started.
run rpath-refused --mpich deb -n 2 ./which_5_rpath
grep -q "^mpixrun: --mpich deb: .*which_5_rpath loads .*/libmpi.so.12 .*RPATH.*/usr/lib/.*libmpich.so" "$out/rpath-refused.log" &&
  ! grep -q '^library:' "$out/rpath-refused.log" && [ $rc -eq 2 ]
rc2=$?
verdict "--mpich deb refuses a program whose RPATH pins MPICH 5's library, naming both (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/rpath-refused.log"
run bare-refused -n 2 ./which_5_bare
grep -q "^mpixrun: .*which_5_bare needs libmpi.so.12, which the loader does not find.*--mpich" "$out/bare-refused.log" &&
  ! grep -q '^library:' "$out/bare-refused.log" && [ $rc -eq 2 ]
rc2=$?
verdict "no --mpich: a program whose libmpi.so.12 is not found is refused, not started (exit $rc)" $rc2
[ $rc2 -eq 0 ] || show "$out/bare-refused.log"
run bare-5 --mpich 5 -n 2 ./which_5_bare
grep -q 'library: MPICH Version:[[:space:]]*5\.0\.2$' "$out/bare-5.log" && grep -qx ' No Errors' "$out/bare-5.log" && [ $rc -eq 0 ]
verdict "--mpich 5 gives that program MPICH 5's library (exit $rc)" $?
# The private directory of the soname links is gone after the job.
dirs_after=$(private_dirs)
[ "$dirs_after" -eq "$dirs_before" ]
verdict "no mpixrun-mpi.* directory left in ${TMPDIR:-/tmp} ($dirs_before before, $dirs_after after)" $?
exit $failed

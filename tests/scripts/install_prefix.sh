#!/usr/bin/env bash
# scripts/install.sh --prefix, as an HPC user would use it:
#   1. it installs the libraries, the header, bin/mpixrun, the pkg-config file and the CMake package
#      into a fresh prefix; `mpixrun --version` prints the workspace version, `--help` the usage;
#   2. for each MPICH (default: deb and 5; MPIXTEST_MPICHS="deb 5 4.3.2 ..." for others), a program
#      that uses the MPIX Stream API (tests/scripts/programs/stream_user.c) builds
#        a. with `mpicc app.c $(pkg-config --cflags --libs mpixstream)` and
#        b. with CMake's find_package(mpixstream <version> REQUIRED) + mpixstream::mpixstream,
#      and each runs under the prefix's mpixrun (outside the checkout's PATH and variables), prints
#      " No Errors" and runs with the prefix's libmpixstream.so;
#   3. find_package refuses a version newer than the installed one.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/mpixstream-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
show() { sed 's/^/    | /' "$1" | tail -n 20; }
for tool in pkg-config cmake; do
  command -v $tool >/dev/null || { echo "FAIL $tool is missing (scripts/install.sh installs it)"; exit 1; }
done

bash "$root/scripts/install.sh" --prefix "$prefix" >"$work/install.log" 2>&1
verdict "install.sh --prefix" $?
for f in lib/libmpixstream.so lib/libmpixstream_tools.so include/mpix_stream.h bin/mpixrun \
  lib/pkgconfig/mpixstream.pc lib/cmake/mpixstream/mpixstream-config.cmake \
  lib/cmake/mpixstream/mpixstream-config-version.cmake; do
  [ -s "$prefix/$f" ]; verdict "installed $f" $?
done
# A second install into the same prefix is quiet and changes nothing that matters.
bash "$root/scripts/install.sh" --prefix "$prefix" >"$work/install2.log" 2>&1 && [ ! -s "$work/install2.log" ]
verdict "install.sh --prefix again: quiet" $?

want=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
# The installed launcher must not lean on the checkout's variables.
clean_env=(env -u MPIXSTREAM_LIB -u MPIXSTREAM_TOOLS_LIB -u MPIXSTREAM_ROOT -u MPIEXEC)
got=$("${clean_env[@]}" "$prefix/bin/mpixrun" --version)
[ "$got" = "mpixrun (mpixstream) $want" ]; verdict "mpixrun --version: '$got' (want $want)" $?
"${clean_env[@]}" "$prefix/bin/mpixrun" --help >"$work/help.txt" && grep -q -- "--compare" "$work/help.txt" &&
  grep -q -- "--mpich" "$work/help.txt"
verdict "mpixrun --help" $?
[ "$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion mpixstream)" = "$want" ]
verdict "pkg-config --modversion mpixstream = $want" $?

for mpich in ${MPIXTEST_MPICHS:-deb 5}; do
  mpich_select "$mpich" || { verdict "select MPICH $mpich" 1; continue; }
  # a. pkg-config
  bin=$work/stream_user-pc-$MPICH_NAME
  # shellcheck disable=SC2046
  "$MPICC" -O2 "$root/tests/scripts/programs/stream_user.c" -o "$bin" \
    $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mpixstream) >"$work/pc-$MPICH_NAME.log" 2>&1
  rc=$?; verdict "[$MPICH_NAME] mpicc \$(pkg-config --cflags --libs mpixstream)" $rc; [ $rc -eq 0 ] || show "$work/pc-$MPICH_NAME.log"
  # b. CMake
  cm=$work/cmake-$MPICH_NAME
  (CC=$MPICC cmake -S "$root/tests/scripts/programs/cmake_project" -B "$cm" -DCMAKE_PREFIX_PATH="$prefix" \
      -DWANT_VERSION="$want" && cmake --build "$cm") >"$work/cmake-$MPICH_NAME.log" 2>&1
  rc=$?; verdict "[$MPICH_NAME] cmake find_package(mpixstream $want REQUIRED)" $rc; [ $rc -eq 0 ] || show "$work/cmake-$MPICH_NAME.log"
  for b in "$bin" "$cm/stream_user"; do
    [ -x "$b" ] || continue
    how=$([ "$b" = "$bin" ] && echo pkg-config || echo cmake)
    readelf -d "$b" | grep -q 'NEEDED.*\[libmpixstream.so\]'
    verdict "[$MPICH_NAME] the $how build links libmpixstream.so" $?
    log=$work/run-$how-$MPICH_NAME.log
    (cd "$work" && "${clean_env[@]}" timeout 60 "$prefix/bin/mpixrun" --mpich "$mpich" -n 2 "$b") >"$log" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] && grep -q " No Errors" "$log" && grep -qx "loaded: $prefix/lib/libmpixstream.so" "$log"
    rc2=$?; verdict "[$MPICH_NAME] the $how build under the prefix's mpixrun (exit $rc, the prefix's library)" $rc2
    [ $rc2 -eq 0 ] || { show "$log"; [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"; }
  done
done

# The version file: a newer version than installed is refused.
mpich_select deb
(CC=$MPICC cmake -S "$root/tests/scripts/programs/cmake_project" -B "$work/cmake-too-new" -DCMAKE_PREFIX_PATH="$prefix" \
  -DWANT_VERSION=99.0) >"$work/cmake-too-new.log" 2>&1
[ $? -ne 0 ] && grep -q "mpixstream" "$work/cmake-too-new.log"
verdict "cmake find_package(mpixstream 99.0) refused" $?

exit $failed

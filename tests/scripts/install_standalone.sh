#!/usr/bin/env bash
# scripts/install.sh --prefix makes an install that stands alone, as an HPC user would use it:
#   1. from a temporary copy of this checkout (the files git tracks or would track, this build's
#      target/release so that nothing is rebuilt, and a .deps of its own holding PyPI's MPICH 5.0.2, as a
#      fresh checkout's scripts/install.sh makes it), with a `cargo` whose clippy is missing and a
#      `rustup` that cannot add it: the install succeeds and prints what it installed and where;
#   2. the copy is then moved away; no installed file names it or this checkout (the libraries'
#      debug information, which names the directory they were built in for a debugger, aside);
#   3. `mpixrun --version`/`--help`, pkg-config's version, and CMake refusing a newer version than
#      installed;
#   4. with MPICH 5.0.2 as the prefix recorded it (copied into the prefix, the copy being gone) and with
#      Debian's 4.0.2 where installed: tests/scripts/programs/stream_user.c (the MPIX Stream API) builds
#      with `mpicc $(pkg-config --cflags --libs mpixstream)` and with CMake's find_package(mpixstream
#      VERSION) + mpixstream::mpixstream, and each runs under the prefix's `mpixrun --mpich NAME -n 2`
#      (outside the checkout's variables): " No Errors", with the prefix's libmpixstream.so;
#   5. on MPICH 5, the installed `mpixrun --profile` (report.json, profile.json, the table and its
#      verdict; timeline.png when matplotlib is in the prefix) and `mpixrun --compare --reps 1` (the
#      table with both policies, compare.json; compare.png when matplotlib is in the prefix).
# Prints PASS/FAIL per check; exits 1 if any failed, 77 (SKIP) without MPICH 5.0.2, pkg-config or cmake.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich5=$(mpich_pypi_prefix 5.0.2)
for tool in pkg-config cmake git; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is missing (scripts/install.sh installs it)"; exit 77; }
done
[ -x "$mpich5/bin/mpicc" ] || { echo "SKIP: PyPI's MPICH 5.0.2 is not installed (scripts/install.sh)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/mpixstream-standalone.XXXXXX")
work=$(cd "$work" && pwd -P)
trap 'rm -rf "$work"' EXIT
clone=$work/checkout prefix=$work/prefix
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
show() { sed 's/^/    | /' "$1" | tail -n 20; }

# 1. The copy, and a cargo without clippy.
mkdir -p "$clone/.deps" "$clone/target" "$work/bin"
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$clone" -xf -
[ -d "$root/target/release" ] && cp -a "$root/target/release" "$clone/target/"
cp -a "$(cd "$mpich5" && pwd -P)" "$clone/.deps/mpich5"
real_cargo=$(command -v cargo)
printf '#!/bin/sh\n[ "$1" = clippy ] && { echo "no clippy here" >&2; exit 101; }\nexec %q "$@"\n' "$real_cargo" >"$work/bin/cargo"
printf '#!/bin/sh\necho "rustup: offline" >&2\nexit 1\n' >"$work/bin/rustup"
chmod +x "$work/bin/cargo" "$work/bin/rustup"
PATH=$work/bin:$PATH bash "$clone/scripts/install.sh" --prefix "$prefix" >"$work/install.log" 2>&1
rc=$?
verdict "install.sh --prefix without clippy (exit $rc)" $rc
[ $rc -eq 0 ] || show "$work/install.log"
for line in "into $prefix:" "bin/mpixrun" "lib/libmpixstream.so" "lib/pkgconfig/mpixstream.pc" \
  "lib/cmake/mpixstream/" "share/mpixstream/"; do
  grep -qF -- "$line" "$work/install.log"
  verdict "install.sh says what it installed: '$line'" $?
done
for f in lib/libmpixstream.so lib/libmpixstream_tools.so include/mpix_stream.h bin/mpixrun \
  lib/pkgconfig/mpixstream.pc lib/cmake/mpixstream/mpixstream-config.cmake \
  lib/cmake/mpixstream/mpixstream-config-version.cmake share/mpixstream/env.sh \
  share/mpixstream/compare.py share/mpixstream/contention.py share/mpixstream/plot.py \
  share/mpixstream/shm_cleanup.sh; do
  [ -s "$prefix/$f" ]; verdict "installed $f" $?
done
# The MPICH inside the checkout went into the prefix, and the table names that copy.
mpich5_installed=$(sed -n 's/^5\.0\.2=//p' "$prefix/share/mpixstream/mpich-builds" 2>/dev/null)
[ "$mpich5_installed" = "$prefix/lib/mpixstream/mpich-5.0.2" ] && [ -x "$mpich5_installed/bin/mpiexec" ]
verdict "MPICH 5.0.2 from the checkout's .deps recorded as its copy in the prefix ('$mpich5_installed')" $?
PATH=$work/bin:$PATH bash "$clone/scripts/install.sh" --prefix "$prefix" >"$work/install2.log" 2>&1
verdict "install.sh --prefix again into the same prefix" $?

# 2. The checkout goes away; nothing installed names it.
moved=$work/moved-away
mv "$clone" "$moved"
verdict "the checkout moved to $moved" $?
names_checkout() { # PATH-STRING: the installed files that contain it, debug sections of ELF files aside
  local f
  grep -rlF -- "$1" "$prefix" 2>/dev/null | while read -r f; do
    if [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then
      objcopy --strip-debug "$f" "$work/stripped" || { echo "$f (objcopy failed)"; continue; }
      grep -qF -- "$1" "$work/stripped" || continue
    fi
    echo "$f"
  done
}
for path in "$clone" "$root"; do
  names_checkout "$path" >"$work/names.txt"
  [ ! -s "$work/names.txt" ]
  rc=$?; verdict "no installed file names $path" $rc; [ $rc -eq 0 ] || show "$work/names.txt"
done

# 3. The launcher and the package files, outside the checkout's variables.
clean_env=(env -u MPIXSTREAM_LIB -u MPIXSTREAM_TOOLS_LIB -u MPIXSTREAM_ROOT -u MPIEXEC -u PYTHONPATH
  -u MPICH_NAMED_TABLE -u MPICH_ENV)
want=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
got=$("${clean_env[@]}" "$prefix/bin/mpixrun" --version)
[ "$got" = "mpixrun (mpixstream) $want" ]; verdict "mpixrun --version: '$got' (want $want)" $?
"${clean_env[@]}" "$prefix/bin/mpixrun" --help >"$work/help.txt" && grep -q -- "--compare" "$work/help.txt" &&
  grep -q -- "--mpich" "$work/help.txt"
verdict "mpixrun --help" $?
pc() { PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config "$@"; }
[ "$(pc --modversion mpixstream)" = "$want" ]; verdict "pkg-config --modversion mpixstream = $want" $?
(CC=/usr/bin/cc cmake -S "$root/tests/scripts/programs/cmake_project" -B "$work/cmake-too-new" \
  -DCMAKE_PREFIX_PATH="$prefix" -DWANT_VERSION=99.0) >"$work/cmake-too-new.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "mpixstream" "$work/cmake-too-new.log"
verdict "cmake find_package(mpixstream 99.0) refused (exit $rc)" $?

# 4. A program built both ways, run under the prefix's mpixrun.
declare -A mpicc_of=()
[ -n "$mpich5_installed" ] && [ -x "$mpich5_installed/bin/mpicc" ] && mpicc_of[5]=$mpich5_installed/bin/mpicc
[ -x /usr/bin/mpicc.mpich ] && mpicc_of[deb]=/usr/bin/mpicc.mpich
[ -n "${mpicc_of[deb]:-}" ] || echo "SKIP [deb]: Debian's MPICH is not installed"
for mpich in 5 deb; do
  cc=${mpicc_of[$mpich]:-}
  [ -n "$cc" ] || continue
  bin=$work/stream_user-pc-$mpich
  # shellcheck disable=SC2046
  "$cc" -O2 "$root/tests/scripts/programs/stream_user.c" -o "$bin" $(pc --cflags --libs mpixstream) \
    >"$work/pc-$mpich.log" 2>&1
  rc=$?; verdict "[$mpich] mpicc \$(pkg-config --cflags --libs mpixstream)" $rc; [ $rc -eq 0 ] || show "$work/pc-$mpich.log"
  cm=$work/cmake-$mpich
  (CC=$cc cmake -S "$root/tests/scripts/programs/cmake_project" -B "$cm" -DCMAKE_PREFIX_PATH="$prefix" \
    -DWANT_VERSION="$want" && cmake --build "$cm") >"$work/cmake-$mpich.log" 2>&1
  rc=$?; verdict "[$mpich] cmake find_package(mpixstream $want REQUIRED)" $rc; [ $rc -eq 0 ] || show "$work/cmake-$mpich.log"
  for b in "$bin" "$cm/stream_user"; do
    [ -x "$b" ] || continue
    how=$([ "$b" = "$bin" ] && echo pkg-config || echo cmake)
    log=$work/run-$how-$mpich.log
    (cd "$work" && "${clean_env[@]}" timeout 60 "$prefix/bin/mpixrun" --mpich "$mpich" -n 2 "$b") >"$log" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] && grep -q " No Errors" "$log" && grep -qx "loaded: $prefix/lib/libmpixstream.so" "$log"
    rc2=$?; verdict "[$mpich] the $how build under the prefix's mpixrun --mpich $mpich (exit $rc, the prefix's library)" $rc2
    [ $rc2 -eq 0 ] || { show "$log"; [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"; }
  done
done

# 5. --profile and --compare from the prefix, on MPICH 5.
has_matplotlib=0
PYTHONPATH=$prefix/lib/mpixstream/python python3 -c 'import matplotlib' 2>/dev/null && has_matplotlib=1
[ $has_matplotlib -eq 1 ] || echo "note: matplotlib is not in the prefix (install.sh could not fetch it): no PNG checks"
app=$work/stream_user-pc-5
out=$work/profile
(cd "$work" && "${clean_env[@]}" timeout 120 "$prefix/bin/mpixrun" --profile --out "$out" --timeout 60 \
  --mpich 5 -n 2 "$app") >"$work/profile.txt" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] && [ -s "$out/report.json" ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out/profile.json" &&
  grep -q "^verdict" "$work/profile.txt" && grep -q " No Errors" "$out/run.log"
rc2=$?; verdict "installed mpixrun --profile (exit $rc): report.json, profile.json, the table and its verdict" $rc2
[ $rc2 -eq 0 ] || show "$work/profile.txt"
if [ $has_matplotlib -eq 1 ]; then
  [ -s "$out/timeline.png" ]; verdict "installed mpixrun --profile: timeline.png (matplotlib from the prefix)" $?
fi
out=$work/compare
(cd "$work" && "${clean_env[@]}" timeout 240 "$prefix/bin/mpixrun" --compare --reps 1 --out "$out" --timeout 60 \
  --mpich 5 -n 2 "$app") >"$work/compare.txt" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out/compare.json" &&
  grep -q "^ *implicit " "$work/compare.txt" && grep -q "^ *explicit " "$work/compare.txt"
rc2=$?; verdict "installed mpixrun --compare --reps 1 (exit $rc): the table with both policies, compare.json" $rc2
[ $rc2 -eq 0 ] || show "$work/compare.txt"
if [ $has_matplotlib -eq 1 ]; then
  [ -s "$out/compare.png" ]; verdict "installed mpixrun --compare: compare.png (matplotlib from the prefix)" $?
fi
grep -q "matplotlib is not importable" "$work/profile.txt" "$work/compare.txt"
[ $? -ne 0 ] || [ $has_matplotlib -eq 0 ]; verdict "no 'matplotlib is not importable' note while the prefix has it" $?

exit $failed

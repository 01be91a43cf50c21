#!/usr/bin/env bash
# Brings what mpixstream needs onto a fresh Debian machine, or installs mpixstream into a prefix;
# idempotent; quiet but for what it installs.
#
#   scripts/install.sh                   the development setup (what scripts/test.sh and demo.sh need):
#       - Debian's MPICH 4.0.2 (mpich, libmpich-dev): the "serial" backend's reference build
#       - PyPI's MPICH 5.0.2 into .deps/mpich5: the "native" backend's reference build
#       - python tools for the report/plot scripts (into .deps/py), mpi4py (into .deps/mpi4py)
#       - cmake and pkg-config (the install test builds a program both ways)
#       - iproute2 (ip, tc, ss: the simulated hosts of scripts/hosts.sh)
#   scripts/install.sh --prefix DIR      builds (cargo build --release; needs cargo and cc only) and installs
#       into DIR, then says what went where:
#       lib/libmpixstream.so, lib/libmpixstream_tools.so, include/mpix_stream.h (and mpix_stream_abi.h), bin/mpixrun (finds
#       the libraries relative to itself), share/mpixstream/ (mpixrun's helpers: the Python tools,
#       shm_cleanup.sh, env.sh, mpich-builds: the MPICH builds `mpixrun --mpich NAME` knows),
#       lib/pkgconfig/mpixstream.pc, lib/cmake/mpixstream/mpixstream-config{,-version}.cmake
#       (imported target mpixstream::mpixstream), lib/mpixstream/python (matplotlib, from PyPI, unless
#       python3 has it), lib/mpixstream/mpich-X.Y.Z (a PyPI MPICH that lived in this checkout's .deps).
#       Nothing installed leads back into the checkout: DIR works with the checkout moved or gone.
#   scripts/install.sh --mpich X.Y.Z[,X.Y.Z...]
#                                        PyPI's `mpich` X.Y.Z into .deps/mpich-X.Y.Z (5.0.2: .deps/mpich5),
#                                        for scripts/env.sh's `mpich_select X.Y.Z` (tests/run.sh --mpich)
#   scripts/install.sh --mpich impi      Intel MPI from PyPI (impi-rt, impi-devel 2021.19.0) into
#                                        .deps/impi, for `mpich_select impi` (runs over its shm
#                                        transport on one host; scripts/env.sh says how)
# --prefix and --mpich may be combined; either one skips the development setup.
# Everything project-local lives under .deps/ (git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
prefix="" mpichs=""
usage() { sed -n '2,/^set /p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
    --mpich) [ $# -ge 2 ] || usage; mpichs="$mpichs ${2//,/ }"; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "install.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
mkdir -p "$deps"

apt_install() { # packages...: installs those missing, quietly
  local need=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  echo "install: apt-get install ${need[*]}"
  if [ ! -f "$deps/.apt-updated" ]; then apt-get update -qq >/dev/null && touch "$deps/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

IMPI_VERSION=2021.19.0
pip_impi() { # Intel MPI's runtime and compiler wrappers from PyPI into .deps/impi
  local dir=$deps/impi f
  [ -x "$dir/bin/mpicc" ] && [ -f "$dir/.done" ] && return 0
  echo "install: PyPI impi-rt, impi-devel==$IMPI_VERSION into ${dir#"$root"/}"
  # --no-deps: impi-rt asks for PyPI's `libfabric`, which Intel MPI only loads for its ofi transport;
  # on one host it runs on its shared-memory transport without it (scripts/env.sh, mpich_select impi).
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --no-deps --prefix "$dir" "impi-rt==$IMPI_VERSION" "impi-devel==$IMPI_VERSION"
  [ -x "$dir/bin/mpicc" ] || { echo "install.sh: PyPI's impi-devel==$IMPI_VERSION has no bin/mpicc" >&2; exit 1; }
  # The wheels' compiler wrappers carry a placeholder for their prefix (conda substitutes it; pip does
  # not): the real, symbolic-link-free prefix, so that the programs' rpath stays valid.
  dir=$(cd "$dir" && pwd -P)
  for f in "$dir"/bin/*; do
    if [ -f "$f" ] && grep -q I_MPI_SUBSTITUTE_INSTALLDIR "$f" 2>/dev/null; then
      sed -i "s|I_MPI_SUBSTITUTE_INSTALLDIR|$dir|g" "$f"
    fi
  done
  touch "$dir/.done"
}

pip_mpich() { # version: PyPI's mpich wheel into its .deps directory (scripts/env.sh mpich_pypi_prefix)
  local dir
  case "$1" in [0-9]*.[0-9]*.[0-9]*) ;; *) echo "install.sh: --mpich wants a version X.Y.Z or impi, not '$1'" >&2; exit 2 ;; esac
  if [ "$1" = 5.0.2 ]; then dir=$deps/mpich5; else dir=$deps/mpich-$1; fi
  [ -x "$dir/bin/mpicc" ] && return 0
  echo "install: PyPI mpich==$1 into ${dir#"$root"/}"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --prefix "$dir" "mpich==$1"
  [ -x "$dir/bin/mpicc" ] || { echo "install.sh: PyPI's mpich==$1 has no bin/mpicc (not a full MPICH wheel)" >&2; exit 1; }
}

need_cargo() {
  command -v cargo >/dev/null 2>&1 || { echo "install: cargo is missing; install a Rust toolchain (rustup) first" >&2; exit 1; }
}
need_clippy() { # the development setup only: the test suite's cargo-lints row (tests/run.sh) runs clippy
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy >/dev/null 2>&1 ||
    { echo "install: cargo clippy is missing and rustup could not add it" >&2; exit 1; }
}

# The named MPICH builds an install's mpixrun knows (--mpich 5, X.Y.Z, impi), written to its table
# share/mpixstream/mpich-builds (NAME=PREFIX; scripts/env.sh reads it): those this checkout has at install
# time. A build inside the checkout (.deps a directory of its own) would go with it: a PyPI MPICH (its
# files find each other relative to themselves) is copied into DIR/lib/mpixstream/mpich-X.Y.Z; Intel MPI
# (its wrappers carry its absolute path) is left out, with a note. Debian's (`deb`, /usr) needs no entry.
record_mpichs() ( # dir (a subshell: env.sh's names stay in it)
  local dir=$1 rootp name src srcp dest
  MPIXSTREAM_ROOT=$root MPICH_NAMED_TABLE=""
  source "$root/scripts/env.sh"
  rootp=$(cd "$root" && pwd -P)
  : >"$dir/share/mpixstream/mpich-builds"
  for name in $MPICH_PYPI_VERSIONS impi; do
    src=$(mpich_pypi_prefix "$name")
    [ -x "$src/bin/mpicc" ] && [ -x "$src/bin/mpiexec" ] || continue
    srcp=$(cd "$src" && pwd -P)
    case "$srcp/" in
      "$rootp"/*)
        if [ "$name" = impi ]; then
          echo "  note: Intel MPI (.deps/impi) lives in the checkout and is not relocatable: not recorded; use --mpich PREFIX"
          continue
        fi
        dest=$dir/lib/mpixstream/mpich-$name
        rm -rf "$dest" && mkdir -p "$dir/lib/mpixstream" && cp -a "$srcp" "$dest"
        srcp=$dest ;;
    esac
    echo "$name=$srcp" >>"$dir/share/mpixstream/mpich-builds"
  done
)

# matplotlib for the PNGs of mpixrun --profile and --compare: into DIR/lib/mpixstream/python (the Python
# tools look there), unless this python3 has it already; without it they write their tables and JSON.
python_deps() { # dir
  local target=$1/lib/mpixstream/python log=$1/share/mpixstream/pip.log
  if [ ! -d "$target" ] && python3 -c 'import matplotlib' >/dev/null 2>&1; then
    echo "  (matplotlib, for the PNGs of mpixrun --profile and --compare: python3's own)"
    return 0
  fi
  if PYTHONPATH=$target python3 -c 'import matplotlib' >/dev/null 2>&1 ||
    python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
      --timeout 30 --retries 1 --target "$target" matplotlib >"$log" 2>&1; then
    rm -f "$log"
    echo "  lib/mpixstream/python/              matplotlib (the PNGs of mpixrun --profile and --compare)"
  else
    echo "  note: matplotlib could not be installed (pip's output: $log); the PNGs of --profile and"
    echo "        --compare are skipped until: python3 -m pip install --target $target matplotlib"
  fi
}

install_prefix() { # dir
  local dir version rel share
  need_cargo
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  share=$dir/share/mpixstream
  (cd "$root" && cargo build --release --quiet --workspace)
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
  rel=${CARGO_TARGET_DIR:-target}/release
  case "$rel" in /*) ;; *) rel=$root/$rel ;; esac
  install -d "$dir/lib/pkgconfig" "$dir/lib/cmake/mpixstream" "$dir/include" "$dir/bin" "$share"
  install -m 755 "$rel/libmpixstream.so" "$rel/libmpixstream_tools.so" "$dir/lib/"
  install -m 644 "$root/include/mpix_stream.h" "$root/include/mpix_stream_abi.h" "$dir/include/"
  install -m 755 "$root/scripts/mpixrun" "$dir/bin/mpixrun"
  install -m 644 "$root/scripts/compare.py" "$root/scripts/contention.py" "$root/scripts/plot.py" \
    "$root/scripts/pydeps.py" "$root/scripts/shm_cleanup.sh" "$share/"
  echo "$version" >"$share/version"
  # scripts/env.sh, with this prefix in place of the checkout (found from the file's own place).
  {
    echo "# scripts/env.sh as installed by scripts/install.sh --prefix: the root is this prefix, the named MPICH"
    echo "# builds (mpixrun --mpich 5, X.Y.Z, impi) are those recorded in mpich-builds next to this file."
    echo 'MPIXSTREAM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)'
    echo 'MPIXSTREAM_LIB=${MPIXSTREAM_LIB:-$MPIXSTREAM_ROOT/lib/libmpixstream.so}'
    echo 'MPICH_NAMED_TABLE=$MPIXSTREAM_ROOT/share/mpixstream/mpich-builds'
    cat "$root/scripts/env.sh"
  } >"$share/env.sh"
  sed -e "s|@PREFIX@|$dir|g" -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream.pc.in" \
    >"$dir/lib/pkgconfig/mpixstream.pc"
  sed -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream-config.cmake.in" \
    >"$dir/lib/cmake/mpixstream/mpixstream-config.cmake"
  sed -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream-config-version.cmake.in" \
    >"$dir/lib/cmake/mpixstream/mpixstream-config-version.cmake"
  echo "install: mpixstream $version into $dir:"
  echo "  bin/mpixrun                         the launcher (mpixrun --help)"
  echo "  lib/libmpixstream.so, lib/libmpixstream_tools.so"
  echo "  include/mpix_stream.h, include/mpix_stream_abi.h"
  echo "  lib/pkgconfig/mpixstream.pc         PKG_CONFIG_PATH=$dir/lib/pkgconfig"
  echo "  lib/cmake/mpixstream/               CMAKE_PREFIX_PATH=$dir"
  echo "  share/mpixstream/                   mpixrun's helpers: compare.py contention.py plot.py shm_cleanup.sh env.sh mpich-builds"
  python_deps "$dir"
  record_mpichs "$dir"
  echo "  mpixrun --mpich NAME knows (share/mpixstream/mpich-builds), besides any MPICH's prefix directory:"
  [ -x /usr/bin/mpiexec.mpich ] && echo "    deb                               /usr (Debian's MPICH)"
  sed -e 's/^5\.0\.2=/5=/' -e 's/^\([^=]*\)=\(.*\)/    \1\t\2/' "$share/mpich-builds" | expand -t 38
}

if [ -n "$prefix" ] || [ -n "$mpichs" ]; then
  for v in $mpichs; do
    if [ "$v" = impi ]; then pip_impi; else pip_mpich "$v"; fi
  done
  [ -z "$prefix" ] || install_prefix "$prefix"
  exit 0
fi

apt_install mpich libmpich-dev gcc make python3-pip cmake pkg-config iproute2
pip_mpich 5.0.2

if [ ! -f "$deps/py/.done" ]; then
  echo "install: python tools (matplotlib, jsonschema) into .deps/py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --target "$deps/py" matplotlib jsonschema
  touch "$deps/py/.done"
fi

if [ ! -f "$deps/mpi4py/.done" ]; then
  echo "install: mpi4py (binary wheel for MPICH's ABI; loads the installed libmpi.so.12 at run time) into .deps/mpi4py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --only-binary :all: --target "$deps/mpi4py" mpi4py==4.1.2
  touch "$deps/mpi4py/.done"
fi

need_cargo
need_clippy

#!/usr/bin/env bash
# Brings what mpixstream needs onto a fresh Debian machine, or installs mpixstream into a prefix;
# idempotent and quiet.
#
#   scripts/install.sh                   the development setup (what scripts/test.sh and demo.sh need):
#       - Debian's MPICH 4.0.2 (mpich, libmpich-dev): the "serial" backend's reference build
#       - PyPI's MPICH 5.0.2 into .deps/mpich5: the "native" backend's reference build
#       - python tools for the report/plot scripts (into .deps/py), mpi4py (into .deps/mpi4py)
#       - cmake and pkg-config (the install test builds a program both ways)
#       - iproute2 (ip, tc, ss: the simulated hosts of scripts/hosts.sh)
#   scripts/install.sh --prefix DIR      builds (cargo build --release) and installs into DIR:
#       lib/libmpixstream.so, lib/libmpixstream_tools.so, include/mpix_stream.h (and mpix_stream_abi.h), bin/mpixrun (finds
#       the libraries relative to itself), share/mpixstream/ (mpixrun's helpers),
#       lib/pkgconfig/mpixstream.pc, lib/cmake/mpixstream/mpixstream-config{,-version}.cmake
#       (imported target mpixstream::mpixstream)
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
  # clippy checks the unsafe rule in the test suite (tests/run.sh, cargo-lints).
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy >/dev/null 2>&1 ||
    { echo "install: cargo clippy is missing and rustup could not add it" >&2; exit 1; }
}

install_prefix() { # dir
  local dir version rel
  need_cargo
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  (cd "$root" && cargo build --release --quiet --workspace)
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
  rel=$root/target/release
  install -d "$dir/lib/pkgconfig" "$dir/lib/cmake/mpixstream" "$dir/include" "$dir/bin" "$dir/share/mpixstream"
  install -m 755 "$rel/libmpixstream.so" "$rel/libmpixstream_tools.so" "$dir/lib/"
  install -m 644 "$root/include/mpix_stream.h" "$root/include/mpix_stream_abi.h" "$dir/include/"
  install -m 755 "$root/scripts/mpixrun" "$dir/bin/mpixrun"
  install -m 644 "$root/scripts/compare.py" "$root/scripts/contention.py" "$root/scripts/shm_cleanup.sh" \
    "$dir/share/mpixstream/"
  echo "$version" >"$dir/share/mpixstream/version"
  # mpixrun's MPICH names (deb, 5, X.Y.Z) resolve in the checkout this prefix was installed from; a
  # prefix directory works anywhere.
  { echo "MPIXSTREAM_ROOT=\${MPIXSTREAM_ROOT:-$root}"; cat "$root/scripts/env.sh"; } >"$dir/share/mpixstream/env.sh"
  sed -e "s|@PREFIX@|$dir|g" -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream.pc.in" \
    >"$dir/lib/pkgconfig/mpixstream.pc"
  sed -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream-config.cmake.in" \
    >"$dir/lib/cmake/mpixstream/mpixstream-config.cmake"
  sed -e "s|@VERSION@|$version|g" "$root/scripts/templates/mpixstream-config-version.cmake.in" \
    >"$dir/lib/cmake/mpixstream/mpixstream-config-version.cmake"
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

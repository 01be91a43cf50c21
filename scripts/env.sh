# Sourced by the scripts: picks an MPICH by name (or prefix) and exports its tools.
#   mpich_select deb      -> Debian's MPICH 4.0.2 at /usr (serial backend)
#   mpich_select 5        -> PyPI's MPICH 5.0.2 in .deps/mpich5 (native backend, ch4:ucx)
#   mpich_select 5-ofi    -> the same MPICH 5.0.2 over its ch4:ofi netmod (libfabric tcp on lo, no shared memory)
#   mpich_select X.Y.Z    -> PyPI's MPICH X.Y.Z in .deps/mpich-X.Y.Z (scripts/install.sh --mpich X.Y.Z);
#                            5.0.2 is the same as 5
#   mpich_select impi     -> Intel MPI 2021.19 (PyPI impi-rt, impi-devel) in .deps/impi
#                            (scripts/install.sh --mpich impi), on its shm transport (MPICH_IMPI_ENV)
#   mpich_select PREFIX   -> any MPICH installed under the directory PREFIX (PREFIX/bin/mpicc, mpiexec)
# Exports MPICH_NAME (used in test names and build directories), MPICH_PREFIX, MPICC, MPIEXEC,
# MPICH_LIBRARY (the MPI library its mpicc links: what its programs load), MPICH_BACKEND (native when the library has MPIX_Stream_create, else serial: what mpixstream will pick)
# and MPICH_ENV (the KEY=VALUE settings the build needs in the ranks' environment; also exported, so
# mpiexec passes them on). Selecting another MPICH unsets the previous one's MPICH_ENV.
MPIXSTREAM_ROOT=${MPIXSTREAM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
MPIXSTREAM_LIB=${MPIXSTREAM_LIB:-$MPIXSTREAM_ROOT/target/release/libmpixstream.so}
export MPIXSTREAM_ROOT MPIXSTREAM_LIB

# The PyPI versions scripts/install.sh --mpich knows to be wheels of a full MPICH (mpicc, mpiexec).
MPICH_PYPI_VERSIONS="4.0.3 4.1.3 4.2.3 4.3.2 5.0.2"
# Every build the test scripts know by name (scripts/test_all_mpich.sh runs them all).
MPICH_ALL_NAMES="deb 5 4.0.3 4.1.3 4.2.3 4.3.2 5-ofi impi"
# ch4:ofi on one machine: libfabric's tcp provider on the loopback, and no shared-memory shortcut, so
# every message crosses the netmod.
MPICH_OFI_ENV="MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp FI_TCP_IFACE=lo MPIR_CVAR_NOLOCAL=1"

# Intel MPI on one host without a network: its shared-memory transport alone (no libfabric needed;
# PyPI's impi-rt wants a `libfabric` wheel that the install leaves out).
MPICH_IMPI_ENV="I_MPI_FABRICS=shm"

# The directory a PyPI version (or impi) is installed into: in the checkout, under .deps; in an install
# (scripts/install.sh --prefix), the one its table MPICH_NAMED_TABLE records (NAME=PREFIX lines, the
# builds the checkout had at install time), empty when it recorded none.
mpich_pypi_prefix() {
  if [ -n "${MPICH_NAMED_TABLE:-}" ]; then
    sed -n "s|^$1=||p" "$MPICH_NAMED_TABLE" | head -n 1
  elif [ "$1" = 5.0.2 ]; then echo "$MPIXSTREAM_ROOT/.deps/mpich5"
  elif [ "$1" = impi ]; then echo "$MPIXSTREAM_ROOT/.deps/impi"
  else echo "$MPIXSTREAM_ROOT/.deps/mpich-$1"; fi
}

# Unsets the settings (MPICH_ENV) of the MPICH selected last.
mpich_unselect() {
  local kv
  for kv in ${MPICH_ENV:-}; do unset "${kv%%=*}"; done
  MPICH_ENV=""
}

mpich_select() {
  local name=$1 prefix env="" kv
  mpich_unselect
  case "$name" in
    deb)
      MPICH_NAME=deb MPICH_PREFIX=/usr MPICC=/usr/bin/mpicc.mpich MPIEXEC=/usr/bin/mpiexec.mpich ;;
    5 | 5.0.2 | 5-ofi)
      prefix=$(mpich_pypi_prefix 5.0.2)
      MPICH_NAME=${name/5.0.2/5} MPICH_PREFIX=$prefix MPICC=$prefix/bin/mpicc MPIEXEC=$prefix/bin/mpiexec
      [ "$name" = 5-ofi ] && env=$MPICH_OFI_ENV ;;
    impi)
      prefix=$(mpich_pypi_prefix impi)
      MPICH_NAME=impi MPICH_PREFIX=$prefix MPICC=$prefix/bin/mpicc MPIEXEC=$prefix/bin/mpiexec
      env=$MPICH_IMPI_ENV ;;
    [0-9].[0-9]*.[0-9]*)
      prefix=$(mpich_pypi_prefix "$name")
      MPICH_NAME=$name MPICH_PREFIX=$prefix MPICC=$prefix/bin/mpicc MPIEXEC=$prefix/bin/mpiexec ;;
    */*)
      prefix=$(cd "$name" 2>/dev/null && pwd) || { echo "mpich_select: no directory '$name'" >&2; return 1; }
      # A name usable in file names and test names: the prefix without its slashes.
      MPICH_NAME=$(echo "${prefix#/}" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_$//')
      MPICH_PREFIX=$prefix MPICC=$prefix/bin/mpicc MPIEXEC=$prefix/bin/mpiexec ;;
    *)
      echo "mpich_select: unknown MPICH '$name' (deb, 5, 5-ofi, impi, a PyPI version X.Y.Z, or a prefix directory)" >&2
      return 1 ;;
  esac
  if [ ! -x "$MPICC" ] || [ ! -x "$MPIEXEC" ]; then
    case "$name" in
      [0-9].[0-9]*.[0-9]* | impi | 5 | 5-ofi)
        if [ -n "${MPICH_NAMED_TABLE:-}" ]; then
          echo "mpich_select: MPICH $name was not installed when this prefix was (its table: $MPICH_NAMED_TABLE); give its prefix: --mpich /path/to/mpich" >&2
        else
          echo "mpich_select: MPICH $name is not installed; run: scripts/install.sh --mpich ${name%-ofi}" >&2
        fi ;;
      *) echo "mpich_select: MPICH '$name' has no $MPICC or $MPIEXEC" >&2 ;;
    esac
    return 1
  fi
  MPICH_LIBRARY=$(mpich_library_of "$MPICC") || MPICH_LIBRARY=""
  MPICH_BACKEND=$(mpich_backend_of "$MPICC")
  MPICH_ENV=$env
  for kv in $env; do export "${kv?}"; done
  export MPICH_NAME MPICH_PREFIX MPICC MPIEXEC MPICH_LIBRARY MPICH_BACKEND MPICH_ENV
}

# The MPI library that the mpicc $1 links (libmpi.so.12, Debian's libmpich.so.12), by path; status 1
# when none is found.
mpich_library_of() {
  local libdir lib libs=()
  # Every -L directory in order (Intel MPI's wrappers quote them, and list lib/release first, which
  # its wheel does not have).
  for libdir in $("$1" -link_info 2>/dev/null | tr -d '"' | tr ' ' '\n' | sed -n 's/^-L//p'); do
    libs+=("$libdir/libmpi.so.12" "$libdir/libmpich.so.12" "$libdir/libmpi.so")
  done
  for lib in "${libs[@]}" /usr/lib/x86_64-linux-gnu/libmpich.so.12; do
    [ -e "$lib" ] && { echo "$lib"; return 0; }
  done
  return 1
}

# native if the libmpi that mpicc links has MPIX_Stream_create (what mpixstream's backend detection
# looks for at run time), else serial.
mpich_backend_of() {
  local lib
  lib=$(mpich_library_of "$1") || { echo serial; return; }
  # grep reads all of nm's output (no -q): a pipe closed early would fail under pipefail.
  if nm -D --defined-only "$lib" 2>/dev/null | grep -w MPIX_Stream_create >/dev/null; then echo native; else echo serial; fi
}

# The name mpich_select takes for the MPICH whose library is $1 (a path: deb, 5, a PyPI version,
# impi), else the prefix above the library's directory when it holds bin/mpicc and bin/mpiexec; status
# 1 when no MPICH here owns that library. (mpixrun picks the mpiexec of the library a program loads.)
mpich_name_of_library() {
  local lib v prefix
  lib=$(readlink -f "$1") || return 1
  if [ "$lib" = "$(readlink -f /usr/lib/x86_64-linux-gnu/libmpich.so.12)" ]; then echo deb; return 0; fi
  for v in $MPICH_PYPI_VERSIONS; do
    prefix=$(readlink -f "$(mpich_pypi_prefix "$v")")
    if [[ $lib == "$prefix"/* ]]; then [ "$v" = 5.0.2 ] && echo 5 || echo "$v"; return 0; fi
  done
  prefix=$(readlink -f "$MPIXSTREAM_ROOT/.deps/impi")
  if [[ $lib == "$prefix"/* ]]; then echo impi; return 0; fi
  prefix=$(dirname "$(dirname "$lib")")
  if [ -x "$prefix/bin/mpicc" ] && [ -x "$prefix/bin/mpiexec" ]; then echo "$prefix"; return 0; fi
  return 1
}

# mpiexec_across -hosts LIST | -f FILE: sets the array MPIEXEC_ACROSS to the command that starts
# "$MPIEXEC" on those hosts (Hydra's -hosts list, HOST or HOST:RANKS comma-separated, or its host file,
# a HOST[:RANKS] per line): entered through scripts/hosts.sh run when they are its simulated hosts
# (mpiexec then runs on the first of them), else mpiexec with the option alone (a real cluster).
# The caller appends mpiexec's other arguments.
mpiexec_across() {
  local names=()
  case "$1" in
    -hosts) IFS=, read -r -a names <<<"$2" ;;
    -f) mapfile -t names < <(sed -e 's/#.*//' -e 's/[[:space:]:].*//' -e '/^$/d' "$2") ;;
    *) echo "mpiexec_across: -hosts LIST or -f FILE, not '$1'" >&2; return 2 ;;
  esac
  MPIEXEC_ACROSS=()
  if [ ${#names[@]} -gt 0 ] && [ -x "$MPIXSTREAM_ROOT/scripts/hosts.sh" ] &&
    "$MPIXSTREAM_ROOT/scripts/hosts.sh" owns "${names[@]}"; then
    MPIEXEC_ACROSS=("$MPIXSTREAM_ROOT/scripts/hosts.sh" run)
  fi
  MPIEXEC_ACROSS+=("${MPIEXEC:-mpiexec}" "$1" "$2")
}


# Sourced by the scripts: picks an MPICH by name and exports its tools.
#   mpich_select deb   -> Debian's MPICH 4.0.2 (serial backend)
#   mpich_select 5     -> PyPI's MPICH 5.0.2 in .deps/mpich5 (native backend)
MPIXSTREAM_ROOT=${MPIXSTREAM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
MPIXSTREAM_LIB=${MPIXSTREAM_LIB:-$MPIXSTREAM_ROOT/target/release/libmpixstream.so}
export MPIXSTREAM_ROOT MPIXSTREAM_LIB

mpich_select() {
  case "$1" in
    deb)
      MPICH_NAME=deb MPICH_PREFIX=/usr
      MPICC=/usr/bin/mpicc.mpich MPIEXEC=/usr/bin/mpiexec.mpich ;;
    5)
      MPICH_NAME=5 MPICH_PREFIX=$MPIXSTREAM_ROOT/.deps/mpich5
      MPICC=$MPICH_PREFIX/bin/mpicc MPIEXEC=$MPICH_PREFIX/bin/mpiexec ;;
    *) echo "mpich_select: unknown MPICH '$1' (deb or 5)" >&2; return 1 ;;
  esac
  export MPICH_NAME MPICH_PREFIX MPICC MPIEXEC
}

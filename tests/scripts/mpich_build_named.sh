#!/usr/bin/env bash
# The banner (MPIXSTREAM_VERBOSE=1) and the report name the MPICH build exactly: its version (as in the
# mpi.h the program was compiled with), the netmod in use, and the MPI library file loaded in the
# process (as /proc/self/maps shows it). On Debian 4.0.2, MPICH 5.0.2 (ch4:ucx by default) and MPICH
# 5.0.2 over ch4:ofi (5-ofi), plus every other PyPI build that is installed (scripts/install.sh --mpich),
# Intel MPI included (impi: its own version line and its fabrics, I_MPI_FABRICS).
# The report's JSON `library` and its table name the same build as the banner.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/mpich-build-named
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# The netmod each build uses: what its `MPICH Device` line lists first, unless MPIR_CVAR_CH4_NETMOD says.
expected_netmod() {
  case "$1" in
    deb) echo "netmod ch4:ucx," ;;                                  # Device: ch4:ucx
    5 | 4.3.2) echo "netmod ch4:ucx (default of ch4:ucx ofi)," ;;
    4.0.3 | 4.1.3 | 4.2.3) echo "netmod ch4:ofi (default of ch4:ofi ucx)," ;;
    5-ofi) echo "netmod ch4:ofi (MPIR_CVAR_CH4_NETMOD, provider tcp)," ;;
    impi) echo "fabrics shm (I_MPI_FABRICS)," ;;
  esac
}

for name in $MPICH_ALL_NAMES; do
  if ! mpich_select "$name" 2>/dev/null; then
    # The two reference builds must be there; the other PyPI builds are tested where installed.
    case "$name" in deb | 5 | 5-ofi) verdict "[$name] MPICH available" 1 ;; esac
    continue
  fi
  bin=$out/build_info-$MPICH_NAME
  "$MPICC" -O2 "$root/tests/scripts/programs/build_info.c" -o "$bin" || { verdict "[$name] compile" 1; continue; }
  # stdout and stderr apart: mpiexec forwards each rank's two streams separately, so the program's
  # lines may land in the middle of the banner's in one file.
  log=$out/$MPICH_NAME.out err=$out/$MPICH_NAME.err
  # MPIXSTREAM_STREAMS: a pool even though the program names no MPIX function, so that the backend is
  # the build's own (native where it has streams), which the report line below names; and
  # MPIXSTREAM_THREAD_MULTIPLE=1, since below MPI_THREAD_MULTIPLE (the program calls MPI_Init) the
  # library would be inert and reserve nothing.
  MPIXSTREAM_STREAMS=2 MPIXSTREAM_THREAD_MULTIPLE=1 MPIXSTREAM_VERBOSE=1 MPIXSTREAM_REPORT="$out/report-$MPICH_NAME.json" timeout 60 "$root/scripts/mpixrun" -n 2 "$bin" \
    >"$log" 2>"$err" </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
  version=$(sed -n 's/^compiled: MPICH //p' "$log")
  intel=$(sed -n 's/^compiled: Intel MPI //p' "$log")
  path=$(sed -n 's/^loaded: //p' "$log")
  banner=$(grep '^mpixstream [0-9.]*: ' "$err" | head -1)
  library=$(echo "$banner" | sed -n 's/^mpixstream [0-9.]*: \(.*\) | backend .*/\1/p')
  want="MPICH $version, $(expected_netmod "$name") $path"
  [ -n "$intel" ] && version=$intel want="Intel(R) MPI Library $intel for Linux* OS, $(expected_netmod "$name") $path"
  echo "  $name: banner names '$library'"
  [ $rc -eq 0 ] && [ -n "$version" ] && [ -n "$path" ] && [ "$library" = "$want" ]
  verdict "[$name] banner: '$want'" $?
  python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['library'] == sys.argv[2] else 1)" \
    "$out/report-$MPICH_NAME.json" "$want" 2>/dev/null
  verdict "[$name] report JSON library = the banner's" $?
  cat "$log" "$err" | grep -qF "mpixstream report: backend $MPICH_BACKEND ($want)"
  verdict "[$name] report table names the build" $?
done
exit $failed

#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs every test; ends with "N passed, M failed".
#   scripts/test.sh [tests/run.sh options]
# Besides Debian 4.0.2 and MPICH 5.0.2, the C test table also runs on one extra MPICH build chosen
# by the day (scripts/mpich_rotation.sh; MPIXTEST_ROTATION=none turns it off, =NAME picks one);
# scripts/test_all_mpich.sh runs the table on every build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install.sh"
# Intel MPI on every run: tests/scripts/impi_thread_split.sh proves the split backend's endpoints.
bash "$root/scripts/install.sh" --mpich impi
# MPICH 4.1.3 on every run: tests/scripts/greq_free_early.sh needs its early generalized-request free.
bash "$root/scripts/install.sh" --mpich 4.1.3
# MPICH 4.3.2 on every run: tests/scripts/hosts_ucx_init.sh proves the ch4:ucx route across hosts on
# 4.1.3, 4.3.2 and 5.0.2.
bash "$root/scripts/install.sh" --mpich 4.3.2
extra=$(bash "$root/scripts/mpich_rotation.sh")
case "$extra" in
  [0-9]*.[0-9]*.[0-9]*) bash "$root/scripts/install.sh" --mpich "$extra" ;;
esac
exec bash "$root/tests/run.sh" --mpich "deb,5${extra:+,$extra}" "$@"

#!/usr/bin/env bash
# Intel MPI 2021.19 between simulated hosts (ofi: libfabric's tcp provider, scripts/hosts.sh), WITHOUT
# mpixstream: tests/c/multiplex_stress.c's traffic hangs as the library's row does (tests/c/KNOWN's
# impi/hosts row; docs/native-defects.md, "Unexpected messages over libfabric's tcp between hosts").
# Built with Intel's mpicc alone (neither linked nor preloaded), RUNS jobs (default 2) of each variant,
# LIMIT seconds each (default 20; a completed job takes about 1 s):
#   stress: improbe_unexpected_hosts.c at 2 x 2, the test's 250000 messages in 4096-message rounds on
#     4 dups: "sweep" (every message received as it comes: the control), "improbe" (the library's
#     receive path: MPI_Improbe polling on the index's dup + MPI_Mrecv), "recv" (MPI_Recv from
#     MPI_ANY_SOURCE on it), "named" (MPI_Recv from the sender), "improbe" with FI_TCP_MAX_SAVED=1024
#     and 4096 (the provider's bound raised);
#   plain: unexpected_hosts.c at 1 + 2 ranks (rank 0 on h1), N unexpected messages before the one
#     waited for: from rank 0 to rank 2, "10" (the control) and "100"; from rank 0 to rank 1, "1000".
# MPICH=NAME (default impi). Argument: stress or plain (default both).
#   flock /tmp/mpix-heavy.lock timeout 400 bash tests/mpich_builds/improbe_unexpected_hosts.sh
# Prints the counts; exits 0 when every control job completed (the defect shown or not by the others),
# 1 otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-2} limit=${LIMIT:-20} build=${MPICH:-impi} which=${1:-both}
case "$which" in stress | plain | both) ;; *) echo "usage: improbe_unexpected_hosts.sh [stress|plain]" >&2; exit 2 ;; esac
controls_ok=1
if [ "$which" != plain ]; then
  build_without_library improbe_unexpected_hosts "$build"
  run_variant sweep h1:2,h2:2 1 -- sweep
  run_variant improbe h1:2,h2:2 0 -- improbe
  run_variant recv h1:2,h2:2 0 -- recv
  run_variant named h1:2,h2:2 0 -- named
  run_variant "improbe, FI_TCP_MAX_SAVED=1024" h1:2,h2:2 0 FI_TCP_MAX_SAVED=1024 -- improbe
  run_variant "improbe, FI_TCP_MAX_SAVED=4096" h1:2,h2:2 0 FI_TCP_MAX_SAVED=4096 -- improbe
fi
if [ "$which" != stress ]; then
  build_without_library unexpected_hosts "$build"
  run_variant "10 unexpected, rank 0 to 2 of 3" h1:1,h2:2 1 -- 10 0 2
  run_variant "100 unexpected, rank 0 to 2 of 3" h1:1,h2:2 0 -- 100 0 2
  run_variant "1000 unexpected, rank 0 to 1 of 3" h1:1,h2:2 0 -- 1000 0 1
fi
[ "$controls_ok" = 1 ]

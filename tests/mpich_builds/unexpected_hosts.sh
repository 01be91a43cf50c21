#!/usr/bin/env bash
# Over ch4:ofi with libfabric's tcp provider between hosts, WITHOUT mpixstream: a receive waits forever
# once 64 messages from its peer wait unreceived (docs/native-defects.md, "Unexpected messages over
# libfabric's tcp between hosts"; tests/c/KNOWN's 4.1.3/hosts multiplex_stress row). Two programs, built
# with the build's mpicc alone (neither linked nor preloaded), RUNS jobs (default 2) of each variant,
# 30 s each:
#   unexpected_hosts.c at 1 + 1 simulated hosts: "10" unexpected messages before the one waited for (the
#     control), "100", and "100" again with FI_TCP_MAX_SAVED=4096 (the provider's bound raised);
#   pooled_alltoall_hosts.c at 2 x 2: multiplex_alltoall's traffic as mpixstream's pooled layout carries
#     it, each probed message received at once ("now": the control) or held as its MPI_Message meanwhile
#     ("hold", as mpixstream's matching engine did before it bounded the handles it holds).
# MPICH=NAME (default 4.1.3; 5-ofi and impi show it too, impi only in "hold").
#   flock /tmp/mpix-heavy.lock timeout 400 bash tests/mpich_builds/unexpected_hosts.sh
# Prints the counts; exits 0 when every control job completed (the defect shown or not by the others),
# 1 otherwise, 77 (SKIP) where hosts cannot be made.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
runs=${RUNS:-2} limit=30 build=${MPICH:-4.1.3}
controls_ok=1
build_without_library unexpected_hosts "$build"
run_variant "10 unexpected" h1:1,h2:1 1 -- 10
run_variant "100 unexpected" h1:1,h2:1 0 -- 100
run_variant "100 unexpected, FI_TCP_MAX_SAVED=4096" h1:1,h2:1 0 FI_TCP_MAX_SAVED=4096 -- 100
build_without_library pooled_alltoall_hosts "$build"
run_variant now h1:2,h2:2 1 -- 200 now
run_variant hold h1:2,h2:2 0 -- 200 hold
[ "$controls_ok" = 1 ]

#!/usr/bin/env bash
# The C test table across hosts: the 4-rank rows of its stream, multiplex, policy and host-enqueue
# programs on 2 simulated hosts x 2 ranks (scripts/hosts.sh): shared memory within a host, MPICH's netmod
# between hosts, both policies (the policy rows run under explicit, the others under implicit). On MPICH
# 5.0.2 over ch4:ofi (libfabric's tcp provider between hosts): its native streams' reserved VCIs reach
# the other host there; over ch4:ucx, MPI_Init hangs with a reserved VCI when UCX joins hosts by TCP
# (docs/native-defects.md). tests/run.sh --hosts 2 runs the rows; left out:
#   - policy_windows_files: its MPI_Win_allocate_shared needs every rank on one node;
#   - multiplex_basic, multiplex_idup, multiplex_lifetime: they time out on this build on one host too;
#   - multiplex_stress: KNOWN on this build (tests/c/KNOWN), 60 s to time out;
#   - multiplex_n_to_1: tests/scripts/hosts_multiplex.sh runs it across hosts (2 x 2 and 3 + 1, over
#     ch4:ofi and ch4:ucx), with multiplex_alltoall.
# Exits 1 if a row failed, 77 (SKIP) where hosts cannot be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
log=$root/build/hosts-table.log
bash "$root/tests/run.sh" --quick --mpich 5-ofi --hosts 2 \
  --only '@(stream_|multiplex_|policy_|enqueue_host)*np=4 mpich=5-ofi*' \
  --skip '@(policy_windows_files|multiplex_basic|multiplex_idup|multiplex_lifetime|multiplex_stress|multiplex_n_to_1) ' >"$log" 2>&1
rc=$?
grep -E '^(PASS|FAIL|KNOWN) |^    \| ' "$log"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
echo "C table rows on 2 hosts x 2 ranks, MPICH 5.0.2 over ch4:ofi: ${summary:-no summary (log: $log)}"
# At least the rows named above ran: a selection that matched nothing is no pass.
[ $rc -eq 0 ] && [ "${summary%% *}" -ge 15 ]

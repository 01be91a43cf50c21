#!/usr/bin/env bash
# The C test table across hosts: the 4-rank rows of its stream, multiplex, policy and host-enqueue
# programs on 2 simulated hosts x 2 ranks (scripts/hosts.sh): shared memory within a host, MPICH's netmod
# between hosts. tests/run.sh --hosts 2 runs the rows.
#   MPICHS="5-ofi"        the builds (scripts/env.sh names: deb 4.1.3 4.3.2 5 5-ofi impi), one after another
#   POLICIES="rows"       "rows": each row as the table sets it (its own MPIXSTREAM_POLICY, else implicit);
#                         "explicit" (or "implicit"): the rows that set no policy of their own, under that
#                         policy (tests/run.sh --policy)
# CI runs the default, MPICH 5.0.2 over ch4:ofi (libfabric's tcp provider between hosts). The whole
# rotation, by hand, one build per run (docs/cluster.md, "What runs across hosts, per MPICH"):
#   MPICHS=4.3.2 POLICIES="rows explicit" tests/scripts/hosts_table.sh
# Left out:
#   - policy_windows_files, every build: its MPI_Win_allocate_shared needs every rank on one node;
#   - on 5-ofi: multiplex_basic, multiplex_idup, multiplex_lifetime time out on this build on one host too;
#     multiplex_n_to_1: tests/scripts/hosts_multiplex.sh runs it across hosts (2 x 2 and 3 + 1, over ch4:ofi and ch4:ucx).
# Exits 1 if a row failed, 77 (SKIP) where hosts cannot be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
MPICHS=${MPICHS:-5-ofi}
POLICIES=${POLICIES:-rows}
status=0
mkdir -p "$root/build"
for mpich in $MPICHS; do
  skip='policy_windows_files'
  [ "$mpich" = 5-ofi ] && skip+='|multiplex_basic|multiplex_idup|multiplex_lifetime|multiplex_n_to_1'
  for policy in $POLICIES; do
    popt=()
    case "$policy" in
      rows) ;;
      implicit | explicit) popt=(--policy "$policy") ;;
      *) echo "hosts_table.sh: POLICIES: rows, explicit or implicit, not '$policy'" >&2; exit 2 ;;
    esac
    log=$root/build/hosts-table-$mpich-$policy.log
    start=$SECONDS
    bash "$root/tests/run.sh" --quick --mpich "$mpich" --hosts 2 "${popt[@]}" \
      --only "@(stream_|multiplex_|policy_|enqueue_host)*np=4 mpich=$mpich*" --skip "@($skip) " >"$log" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|KNOWN) |^    \| ' "$log"
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    nknown=$(grep -c '^KNOWN ' "$log")
    echo "C table rows on 2 hosts x 2 ranks, $mpich, policy $policy: ${summary:-no summary (log: $log)}, $nknown known, $((SECONDS - start)) s"
    # At least some rows ran: a selection that matched nothing is no pass.
    [ $rc -eq 0 ] && [ "${summary%% *}" -ge 5 ] || status=1
  done
done
exit $status

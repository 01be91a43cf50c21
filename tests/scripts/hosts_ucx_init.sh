#!/usr/bin/env bash
# MPICH over ch4:ucx across two simulated hosts (scripts/hosts.sh; UCX joins them by TCP) with the
# explicit policy's reserved pool: without the library's UCX route MPICH's MPI_Init hangs there
# (docs/native-defects.md, "More than one VCI over UCX's tcp between hosts"; shim/src/backend/ucx_init.rs).
#   1. Where the route cannot work (UCX's libucp preloaded before the library, so MPICH's progress calls
#      never reach it), MPI_Init is refused at once with an error naming MPIR_CVAR_CH4_NETMOD: one host,
#      no namespaces needed.
#   2. tests/scripts/programs/two_comms.c (two dups of MPI_COMM_WORLD, rank pairs exchanging 100
#      messages on each) at 2 hosts x 1 rank under explicit on MPICH 5.0.2 (ch4:ucx, its default), 4.3.2
#      and 4.1.3 (MPIR_CVAR_CH4_NETMOD=ucx), each installed: the job completes, and the report shows the
#      pool reserved and, on 5.0.2 and 4.3.2, the pair's traffic on its streams' reserved VCIs (4.1's
#      policy gives no streams, and reserves no pool unless asked: MPIXSTREAM_STREAMS=8 there, so that
#      the route is what is tested, docs/policy.md); the same at 2 hosts, 3 + 1 ranks, on 5.0.2 (each host's
#      pool sized for its own ranks).
#   3. The defect is still there without the library (the check can fail): MPICH 5.0.2 with one reserved
#      VCI (MPIR_CVAR_CH4_RESERVE_VCIS=1) does not finish MPI_Init in 15 s.
# Prints PASS/FAIL per check; exits 1 if any failed, 77 (SKIP) where hosts cannot be made here (after 1).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
out=$root/build/hosts-ucx-init
mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
mpich_select 5 || exit 1
"$MPICC" -O2 "$root/tests/scripts/programs/two_comms.c" -o "$out/two_comms-5" || { echo "FAIL compile"; exit 1; }

# 1. Not routable: refused before MPI_Init, with the setting to change.
ucp=$MPICH_PREFIX/lib/mpich/libucp.so.0
LD_PRELOAD="$ucp:$MPIXSTREAM_LIB" MPIXSTREAM_POLICY=explicit timeout 20 "$MPIEXEC" -n 2 "$out/two_comms-5" 10 \
  >"$out/unroutable.txt" 2>&1 </dev/null
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "cannot route around it here: ucp_worker_progress resolves to .*libucp.* MPIR_CVAR_CH4_NETMOD=ofi" "$out/unroutable.txt"
verdict "libucp preloaded first: MPI_Init refused at once (exit $rc), the error names MPIR_CVAR_CH4_NETMOD" $?
[ $rc -eq 124 ] && bash "$root/scripts/shm_cleanup.sh"

hosts_or_skip
hosts_up

# run NAME MPICH[+ucx] HOSTS NP [env...]: two_comms under explicit across hosts; its report in $out/NAME.
run() {
  local name=$1 mpich=$2 where=$3 np=$4 envs=()
  shift 4
  [[ $mpich == *+ucx ]] && { envs+=(MPIR_CVAR_CH4_NETMOD=ucx); mpich=${mpich%+ucx}; }
  mpich_select "$mpich" || return 1
  [ -x "$out/two_comms-$MPICH_NAME" ] || "$MPICC" -O2 "$root/tests/scripts/programs/two_comms.c" -o "$out/two_comms-$MPICH_NAME"
  rm -f "$out/$name.json"
  env "${envs[@]}" "$@" MPIXSTREAM_POLICY=explicit MPIXSTREAM_REPORT="$out/$name.json" \
    timeout 40 "$root/scripts/mpixrun" --hosts "$where" -n "$np" "$out/two_comms-$MPICH_NAME" 100 \
    >"$out/$name.txt" 2>&1 </dev/null
  local rc=$?
  [ $rc -ne 0 ] && { tail -3 "$out/$name.txt"; "$hosts" reap; bash "$root/scripts/shm_cleanup.sh"; }
  return $rc
}
# report_check FILE streams|pool: the pool reserved on every rank; `streams`: every rank's traffic with
# its pair on two stream endpoints of reserved VCIs (>= 1), 200 messages received on each.
report_check() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["backend"] == "native" and r["pool"] > 0
for rank in r["ranks"]:
    streams = [e for e in rank["endpoints"] if e["stream"] is not None and e["vci"] and e["vci"] >= 1
               and e["received"]["messages"] >= 100]
    if sys.argv[2] == "streams" and len(streams) < 2:
        ok = False
    print(f"  rank {rank['rank']}: " + ", ".join(f"{e['endpoint']} vci {e['vci']} {e['received']['messages']} msgs"
                                         for e in rank["endpoints"] if e["received"]["messages"]))
print(f"  backend {r['backend']}, pool {r['pool']}")
sys.exit(0 if ok else 1)
PY
}
for c in 5:streams 4.3.2+ucx:streams 4.1.3+ucx:pool; do
  m=${c%%:*} v=${m%+ucx}
  if [ "$v" != 5 ] && [ ! -x "$root/.deps/mpich-$v/bin/mpicc" ]; then
    echo "SKIP: MPICH $v over ch4:ucx: not installed (scripts/install.sh --mpich $v)"
    continue
  fi
  run "ucx-$v" "$m" h1:1,h2:1 2 $([ "$v" = 4.1.3 ] && echo MPIXSTREAM_STREAMS=8)
  rc=$?
  verdict "MPICH $v over ch4:ucx, 2 hosts x 1 rank, explicit: MPI_Init completes with the pool, the job passes (exit $rc)" $rc
  [ $rc -eq 0 ] || continue
  report_check "$out/ucx-$v.json" "${c#*:}"
  checked=$?
  verdict "MPICH $v over ch4:ucx: $([ "${c#*:}" = streams ] && echo "the pairs' traffic on their streams' reserved VCIs" || echo "the pool reserved")" $checked
done
run ucx-uneven 5 h1:3,h2:1 4
rc=$?
verdict "MPICH 5.0.2 over ch4:ucx, 3 + 1 ranks, explicit: completes (exit $rc)" $rc
[ $rc -eq 0 ] && { report_check "$out/ucx-uneven.json" streams; verdict "3 + 1 ranks: every pair's traffic on its streams' reserved VCIs" $?; }

# 3. Without the library: the defect itself.
mpich_select 5
MPIR_CVAR_CH4_RESERVE_VCIS=1 timeout 15 "$hosts" run "$MPIEXEC" -hosts h1:1,h2:1 -n 2 "$out/two_comms-5" 10 \
  >"$out/native.txt" 2>&1 </dev/null
rc=$?
[ $rc -eq 124 ] && { "$hosts" reap; bash "$root/scripts/shm_cleanup.sh"; }
[ $rc -eq 124 ] && ! grep -q "No Errors" "$out/native.txt"
verdict "without the library, one reserved VCI: MPI_Init still hangs between hosts (exit $rc; the route is what passes)" $?
exit $failed

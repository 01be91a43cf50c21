#!/usr/bin/env bash
# The proof on the wire, across two simulated hosts (scripts/hosts.sh): tests/scripts/programs/
# wire_streams.c on 2 hosts x 2 ranks (Debian: 1 rank per host), each rank of h1 sending to one of h2
# from 3 threads, each thread on its own communicator (100, 200, 300 messages of 1 KiB), under each
# policy. While the job holds its connections
# open, `ss` in each host's namespace reads every TCP connection's byte counters; tests/scripts/wire_check.py
# ties each connection to an endpoint by the listening socket it was made to (one per VCI) and checks:
#   - MPICH 5.0.2 over ch4:ofi (libfabric tcp between hosts, shared memory within), explicit policy,
#     and Intel MPI on the split backend, explicit policy: each stream's traffic between hosts travels
#     on one connection of its own, the sender's and the receiver's counters agree, and its bytes equal
#     the report's bytes for that endpoint plus one fixed header per message and one handshake per
#     connection; other endpoints' connections carry less than any stream;
#   - the same builds under implicit, Debian's 4.0.2 (UCX: tcp between hosts, shared memory within;
#     serial backend) under both policies and MPICH 5.0.2 over ch4:ucx under implicit: one endpoint
#     (VCI 0) carries it all; on the UCX builds the UCX probe's worker 0 posted the report's messages
#     and no other worker sent anything.
#   - MPICH 5.0.2 and 4.3.2 over ch4:ucx under explicit, the pool reserved (UCX: tcp between hosts): each
#     stream's traffic on a connection of its own as above, and the UCX probe's worker of the stream's
#     VCI posted exactly its messages. Without the library's UCX route (shim/src/backend/ucx_init.rs)
#     their MPI_Init hangs there (docs/native-defects.md); MPICH 4.1.3 over ch4:ucx under explicit (which
#     gives no streams there, so the program is inert: docs/policy.md) completes, VCI 0 carrying it all.
# Prints PASS/FAIL per check; exits 1 if any failed, 77 (SKIP) where hosts cannot be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
out=$root/build/hosts-wire
mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
bash "$root/tests/probe/build.sh" "$out" || { echo "FAIL building the UCX probe"; exit 1; }
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# case NAME MPICH HOSTS POLICY[:BACKEND] own|one [probe]   (HOSTS: Hydra's -hosts list, in blocks)
run_case() {
  local name=$1 mpich=$2 where=$3 policy=${4%%:*} mode=$5 probe=${6:-} d=$out/$1 bin pid rc i np envs=()
  [[ $4 == *:* ]] && envs+=(MPIXSTREAM_BACKEND="${4#*:}")
  # MPICH+ucx: that MPICH over ch4:ucx where another netmod is its default (4.1.3).
  [[ $mpich == *+ucx ]] && { envs+=(MPIR_CVAR_CH4_NETMOD=ucx); mpich=${mpich%+ucx}; }
  np=$(( $(echo "$where" | tr ',' '\n' | cut -d: -f2 | paste -sd+) ))
  mpich_select "$mpich" || { verdict "$name: MPICH $mpich" 1; return; }
  bin=$out/wire_streams-$MPICH_NAME
  "$MPICC" -O2 -Wall "$root/tests/scripts/programs/wire_streams.c" -o "$bin" -lpthread ||
    { verdict "$name: compile" 1; return; }
  rm -rf "$d"; mkdir -p "$d"
  [ -n "$probe" ] && envs+=(UCXPROBE_DIR="$d/probe" MPIXRUN_PRELOAD_EXTRA="$out/ucxprobe.so") && mkdir -p "$d/probe"
  env "${envs[@]}" WIRE_DIR="$d" MPIXSTREAM_POLICY="$policy" MPIXSTREAM_REPORT="$d/report.json" \
    timeout 30 "$root/scripts/mpixrun" --hosts "$where" -n $np "$bin" >"$d/out.txt" 2>&1 </dev/null &
  pid=$!
  for ((i = 0; i < 250; i++)); do
    [ -e "$d/ready" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  # Every connection's counters, read in each host's namespace while the job holds them open.
  for h in h1 h2; do
    "$hosts" exec $h ss -tlnpH >"$d/listen-$h.txt"
    "$hosts" exec $h ss -tinpH >"$d/conn-$h.txt"
  done
  touch "$d/go"
  wait $pid
  rc=$?
  [ $rc -ne 0 ] && { tail -5 "$d/out.txt"; "$hosts" reap; bash "$root/scripts/shm_cleanup.sh"; }
  if [ $rc -eq 124 ] && { [ "$mpich" = deb ] || [ "$mpich" = 4.1.3 ]; } && [ -s "$d/report.json" ]; then
    # Every message was received and the report written (rank 0 writes it in MPI_Finalize, before
    # PMPI_Finalize): Debian's 4.0.2, or 4.1.3 over ch4:ucx, hung in its own MPI_Finalize, as it does
    # without mpixstream (docs/native-defects.md, tests/mpich_builds/finalize_hosts.sh). The counters
    # were read before; the checks below still hold.
    echo "KNOWN $name: MPICH $mpich's MPI_Finalize hung over UCX's tcp after the traffic (a defect of that MPICH)"
    # The UCX probe writes its reports at exit, which a killed rank never reaches: the wire alone then.
    if [ -n "$probe" ] && ! compgen -G "$d/probe/probe.*.txt" >/dev/null; then
      echo "  (no probe reports: the ranks were killed before exit; the wire is checked without them)"
      probe=
    fi
  else
    verdict "$name: ranks on hosts $where (exit $rc)" $rc
    [ $rc -eq 0 ] || return
  fi
  python3 "$root/tests/scripts/wire_check.py" "$d" "$mode" ${probe:+"$d/probe"}
  rc=$?
  if [ "$mode" = own ]; then
    verdict "$name: each stream's traffic on a connection of its own, its bytes the report's" $rc
  else
    verdict "$name: one endpoint carries it all${probe:+ (the probe agrees)}" $rc
  fi
}

run_case ofi-explicit 5-ofi h1:2,h2:2 explicit own
run_case ofi-implicit 5-ofi h1:2,h2:2 implicit one
# Debian's 4.0.2 hangs in MPI_Finalize over UCX's tcp now and then, without mpixstream too, more often
# with 2 ranks per host (docs/native-defects.md): one rank per host here.
run_case deb-implicit deb h1:1,h2:1 implicit one probe
run_case deb-explicit deb h1:1,h2:1 explicit one probe
run_case ucx-implicit 5 h1:2,h2:2 implicit one probe
run_case ucx-explicit 5 h1:2,h2:2 explicit own probe
for v in 4.3.2:own 4.1.3:one; do
  if [ -x "$root/.deps/mpich-${v%:*}/bin/mpicc" ]; then
    # 4.1.3 without the probe (written when the pool was reserved there: its MPI_Init's own messages for
    # 9 VCIs exceeded the probe check's allowance).
    run_case "ucx${v%:*}-explicit" "${v%:*}+ucx" h1:1,h2:1 explicit "${v#*:}" $([ "${v#*:}" = own ] && echo probe)
  else
    echo "SKIP: MPICH ${v%:*} over ch4:ucx: not installed (scripts/install.sh --mpich ${v%:*})"
  fi
done
# Intel MPI (shared memory within a host, ofi's tcp provider between hosts): the split backend's
# thread-split endpoints, each on connections of its own; Intel's own mode, one endpoint.
if [ -x "$root/.deps/impi/bin/mpicc" ]; then
  run_case impi-split impi h1:2,h2:2 explicit:split own
  run_case impi-implicit impi h1:2,h2:2 implicit one
else
  echo "SKIP: Intel MPI cases: not installed (scripts/install.sh --mpich impi)"
fi
# The checker can fail: the explicit run is not one endpoint's, the implicit run not one per stream.
if [ -s "$out/ofi-explicit/report.json" ] && [ -s "$out/ofi-implicit/report.json" ]; then
  python3 "$root/tests/scripts/wire_check.py" "$out/ofi-explicit" one >/dev/null
  a=$?
  python3 "$root/tests/scripts/wire_check.py" "$out/ofi-implicit" own >/dev/null
  b=$?
  verdict "wire_check.py rejects the explicit run as one endpoint's (exit $a) and the implicit run as per-stream (exit $b)" \
    $(( a == 0 || b == 0 ))
fi
exit $failed

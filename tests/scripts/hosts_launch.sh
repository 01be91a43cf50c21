#!/usr/bin/env bash
# scripts/hosts.sh and launching across its simulated hosts:
#   - `up 2` twice leaves the same two hosts (idempotent); each has its own hostname and boot id, an
#     address on the bridge, and no route out (neither to the internet nor to this machine's own
#     addresses); `owns` tells its hosts from others;
#   - mpixrun --hosts h1,h2 and --hostfile (Hydra's host file) start ranks on both hosts; the banner
#     names the hosts and their ranks;
#   - the pool per host: on MPICH 5.0.2 over ch4:ofi under explicit, a job of 4 + 1 ranks sizes each
#     host's default pool from the ranks on that host (6 on h1, 8 on h2; the world size, 5, would give
#     6 on both) and runs (tests/c/policy_forms.c, its checks);
#   - after a job killed with SIGKILL (mpiexec and launchers gone, ranks left running), `reap` ends the
#     ranks left in the hosts, and `down` removes everything, twice without error.
# Exits 1 if a check failed, 77 (SKIP) where hosts cannot be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
out=$root/build/hosts-launch
rm -rf "$out"; mkdir -p "$out"
# Hosts another test left up are restored at the end.
was_up=0
"$hosts" owns h1 h2 && was_up=1
trap '[ $was_up -eq 1 ] && "$hosts" up 2 >/dev/null || "$hosts" down' EXIT

"$hosts" up 2
rc=$?
verdict "hosts.sh up 2" $rc
ns_before=$(ip netns list | awk '{print $1}' | sort | tr '\n' ' ')
"$hosts" up 2
rc=$?
ns_after=$(ip netns list | awk '{print $1}' | sort | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$ns_before" = "$ns_after" ]
verdict "hosts.sh up 2 again keeps the same hosts ($ns_after)" $?
"$hosts" owns h1 h2 && ! "$hosts" owns h1 h3 && ! "$hosts" owns "$(hostname)"
verdict "owns h1 h2, not h3 nor this machine" $?
n1=$("$hosts" exec h1 hostname)
n2=$("$hosts" exec h2 hostname)
b1=$("$hosts" exec h1 cat /proc/sys/kernel/random/boot_id)
b2=$("$hosts" exec h2 cat /proc/sys/kernel/random/boot_id)
[ "$n1" = h1 ] && [ "$n2" = h2 ] && [ "$b1" != "$b2" ] && [ "$b1" != "$(cat /proc/sys/kernel/random/boot_id)" ]
verdict "hostnames $n1, $n2; a boot id each" $?
resolved=$("$hosts" exec h1 getent hosts h2 | tr -s ' ')
[[ $resolved == "10.77.0.2 h2" ]]
verdict "h1 resolves h2 ($resolved)" $?
# No route out: nothing but the bridge's subnet, and a connection to this machine's address fails.
own=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
! "$hosts" exec h1 ip route get 1.1.1.1 >/dev/null 2>&1
r1=$?
r2=0
if [ -n "$own" ]; then
  ! "$hosts" exec h1 timeout 3 bash -c "exec 3<>/dev/tcp/$own/22" 2>/dev/null
  r2=$?
  "$hosts" exec h1 ip route get "$own" >/dev/null 2>&1 && r2=1
fi
verdict "no route out of h1 (to 1.1.1.1; to this machine's ${own:-(none)})" $((r1 || r2))

# hello: MPI_Init, a barrier, MPI_Finalize; sleeper: rank 0 sleeps while the others wait in a barrier.
cat >"$out/hello.c" <<'C'
#include <mpi.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && rank == 0) sleep(300);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
C
mpich_select 5
"$MPICC" -O2 "$out/hello.c" -o "$out/hello" || verdict "compile hello" 1
MPIXSTREAM_VERBOSE=1 timeout 60 "$root/scripts/mpixrun" --hosts h1,h2 -n 4 "$out/hello" >"$out/hosts.txt" 2>&1 </dev/null
rc=$?
grep -q '4 ranks on 2 hosts (h1: 2, h2: 2)' "$out/hosts.txt"
ok=$?
verdict "mpixrun --hosts h1,h2 -n 4: exit $rc, banner: $(grep -o '[0-9]* ranks on [^|]*' "$out/hosts.txt")" $((rc || ok))
printf 'h1:3\n# the second host\nh2:1\n' >"$out/hostfile"
MPIXSTREAM_VERBOSE=1 timeout 60 "$root/scripts/mpixrun" --hostfile "$out/hostfile" -n 4 "$out/hello" >"$out/hostfile.txt" 2>&1 </dev/null
rc=$?
grep -q '4 ranks on 2 hosts (h1: 3, h2: 1)' "$out/hostfile.txt"
ok=$?
verdict "mpixrun --hostfile (h1:3, h2:1): exit $rc, banner: $(grep -o '[0-9]* ranks on [^|]*' "$out/hostfile.txt")" $((rc || ok))

mpich_select 5-ofi
"$MPICC" -O2 -I"$root/include" -I"$root/tests/c" "$root/tests/c/policy_forms.c" -o "$out/policy_forms" -lpthread ||
  verdict "compile policy_forms" 1
# MPIXSTREAM_THREAD_MULTIPLE=1: policy_forms calls MPI_Init, below which the policy is inert.
MPIXSTREAM_VERBOSE=1 MPIXSTREAM_POLICY=explicit MPIXSTREAM_THREAD_MULTIPLE=1 timeout 60 "$root/scripts/mpixrun" --hosts h1:4,h2:1 -n 5 \
  "$out/policy_forms" >"$out/uneven.txt" 2>&1 </dev/null
rc=$?
grep -q ' No Errors' "$out/uneven.txt" && grep -q '5 ranks on 2 hosts (h1: 4, h2: 1); pool by host: h1 6, h2 8' "$out/uneven.txt"
ok=$?
verdict "uneven job (h1: 4, h2: 1) under explicit on 5-ofi: exit $rc, $(grep -o '[0-9]* ranks on [^|]*' "$out/uneven.txt")" $((rc || ok))

# A killed job: mpixrun, its mpiexec and mpiexec's launchers SIGKILLed (nothing of mpixrun's cleanup
# runs), the ranks (held in MPI_Barrier by rank 0, which sleeps) left running in both hosts.
mpich_select 5
"$root/scripts/mpixrun" --hosts h1,h2 -n 2 "$out/hello" sleep >/dev/null 2>&1 </dev/null &
job=$!
for ((i = 0; i < 100; i++)); do
  [ -n "$(ip netns pids mpixs-h2)" ] && [ "$(ip netns pids mpixs-h1 | wc -l)" -ge 2 ] && break
  sleep 0.1
done
sleep 1
launcher=$(pgrep -P $job)
kill -KILL $job 2>/dev/null
for p in $launcher; do pkill -KILL -P "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
wait $job 2>/dev/null
left=$(( $(ip netns pids mpixs-h1 | wc -l) + $(ip netns pids mpixs-h2 | wc -l) ))
"$hosts" reap
after=$(( $(ip netns pids mpixs-h1 | wc -l) + $(ip netns pids mpixs-h2 | wc -l) ))
[ "$left" -gt 0 ] && [ "$after" -eq 0 ]
verdict "a killed job left $left processes in the hosts; reap left $after" $?
bash "$root/scripts/shm_cleanup.sh"
"$hosts" down && "$hosts" down
rc=$?
[ $rc -eq 0 ] && [ -z "$(ip netns list | grep '^mpixs-')" ] && [ ! -e /run/mpixstream-hosts ] && ! ls -d /etc/netns/mpixs-* >/dev/null 2>&1
verdict "down, twice: no namespace, state or /etc/netns entry left" $?
exit $failed

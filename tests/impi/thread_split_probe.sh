#!/usr/bin/env bash
# Where Intel MPI's thread-split messages go, seen by libfabric itself (docs/architecture.md, "Intel
# MPI's thread-split endpoints"). Runs thread_split.c (3 threads, each on its own duplicate of
# MPI_COMM_WORLD with info thread_id=t, 100/200/300 messages rank 0 -> 1) over Intel MPI's ofi
# transport on the libfabric of PyPI's MPICH 5.0.2 wheel (I_MPI_OFI_LIBRARY; tcp provider on the
# loopback), with libfabric's trace hook (FI_HOOK=trace), which logs every endpoint opened and every
# tagged send with its destination address. Checks, on rank 0's log:
#   - thread split (I_MPI_THREAD_SPLIT=1 I_MPI_THREAD_RUNTIME=generic I_MPI_THREAD_MAX=4): 4 endpoints
#     opened; the three communicators' messages (told apart by the tag, which carries the context id)
#     number exactly 100, 200 and 300, each communicator's to one destination address, the three
#     addresses distinct;
#   - without thread split: 1 endpoint; the three communicators' messages all to one address;
# with thread_id given by MPI_Comm_set_info on a dup (MODE=setinfo) and by MPI_Comm_dup_with_info
# (MODE=dupinfo). Needs scripts/install.sh --mpich impi and --mpich 5.0.2 (the libfabric). Not part of
# tests/run.sh: an investigation of Intel MPI, no mpixstream involved. Prints PASS/FAIL; exits 1 if any.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich_select impi || exit 1
fabric=$root/.deps/mpich5/lib/mpich/libfabric.so.1
[ -f "$fabric" ] || { echo "FAIL no libfabric at $fabric (scripts/install.sh)"; exit 1; }
out=$root/build/impi-thread-split
rm -rf "$out"; mkdir -p "$out"
"$MPICC" -O2 -Wall "$root/tests/impi/thread_split.c" -o "$out/thread_split" -lpthread || { echo "FAIL compile"; exit 1; }
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# rank 0's log -> "endpoints N" and one line per communicator tag: "tag COUNT ADDR[,ADDR...]" (the
# tags that carry at least 50 of the 4-byte sends: the test's three communicators).
summarise() {
  local eps
  eps=$(grep -a -c 'trace_endpoint().*<trace> ep 0x' "$1")
  echo "endpoints $eps"
  grep -a -E 'trace_(tinject|tsend)\(\).* len 4 addr' "$1" |
    sed -E 's/.* addr ([0-9]+) .* tag (0x[0-9a-f]+) .*/\2 \1/' |
    awk '{ n[$1]++; k = $1 " " $2; if (!(k in seen)) { seen[k] = 1; a[$1] = a[$1] (a[$1] == "" ? "" : ",") $2 } }
         END { for (t in n) if (n[t] >= 50) print "tag", t, n[t], a[t] }' | sort -k3n
}

for mode in setinfo dupinfo; do
  for split in 1 0; do
    name=$mode-split$split
    envs=(MODE=$mode I_MPI_FABRICS=ofi I_MPI_OFI_LIBRARY=$fabric FI_PROVIDER=tcp FI_TCP_IFACE=lo FI_HOOK=trace FI_LOG_LEVEL=trace)
    [ $split -eq 1 ] && envs+=(I_MPI_THREAD_SPLIT=1 I_MPI_THREAD_RUNTIME=generic I_MPI_THREAD_MAX=4)
    env -u I_MPI_FABRICS "${envs[@]}" timeout 120 "$MPIEXEC" -n 2 -errfile-pattern "$out/$name.err.%r" \
      "$out/thread_split" >"$out/$name.out" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
    verdict "[$name] runs, every value right (exit $rc)" $rc
    summarise "$out/$name.err.0" >"$out/$name.summary"
    sed 's/^/    /' "$out/$name.summary"
    eps=$(awk '$1 == "endpoints" { print $2 }' "$out/$name.summary")
    counts=$(awk '$1 == "tag" { printf "%s ", $3 }' "$out/$name.summary")
    addrs=$(awk '$1 == "tag" { print $4 }' "$out/$name.summary")
    shown=$(echo $addrs)
    if [ $split -eq 1 ]; then
      [ "$eps" = 4 ]; verdict "[$name] 4 endpoints per rank (I_MPI_THREAD_MAX=4): $eps" $?
      [ "$counts" = "100 200 300 " ]; verdict "[$name] the communicators carry 100, 200, 300 messages: $counts" $?
      [ -n "$addrs" ] && ! echo "$addrs" | grep -q ,; verdict "[$name] each communicator's messages to one address" $?
      [ "$(echo "$addrs" | sort -u | grep -c .)" -eq 3 ]; verdict "[$name] three distinct destination addresses: $shown" $?
    else
      [ "$eps" = 1 ]; verdict "[$name] 1 endpoint per rank: $eps" $?
      [ "$counts" = "100 200 300 " ]; verdict "[$name] the communicators carry 100, 200, 300 messages: $counts" $?
      [ "$(echo "$addrs" | sort -u | grep -c .)" -eq 1 ] && ! echo "$addrs" | grep -q ,
      verdict "[$name] all to one destination address: $shown" $?
    fi
  done
done
exit $failed

#!/usr/bin/env bash
# Where Intel MPI's thread-split messages go, seen by libfabric itself (docs/architecture.md, "Intel
# MPI's thread-split endpoints"): Intel MPI's own endpoints, and the library's split backend on them.
# Runs tests/impi/thread_split.c (3 threads, each on its own communicator, 100/200/300 messages rank 0
# -> 1) over Intel MPI's ofi transport on the libfabric of PyPI's MPICH 5.0.2 wheel (I_MPI_OFI_LIBRARY;
# tcp provider on the loopback), with libfabric's trace hook (FI_HOOK=trace), which logs every endpoint
# opened and every tagged send with its destination address. Checks, on rank 0's log:
#   - Intel MPI alone, thread split on (I_MPI_THREAD_SPLIT=1 I_MPI_THREAD_RUNTIME=generic
#     I_MPI_THREAD_MAX=4), each communicator a dup with info thread_id=t (MODE=setinfo: MPI_Comm_set_info;
#     MODE=dupinfo: MPI_Comm_dup_with_info): 4 endpoints opened; the three communicators' messages (told
#     apart by the tag, which carries the context id) number exactly 100, 200 and 300, each
#     communicator's to one destination address, the three addresses distinct;
#   - Intel MPI alone, without thread split: 1 endpoint; the three communicators' messages all to one
#     address;
#   - with libmpixstream.so, MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=3 (the library switches thread
#     split on through MPI_T, no I_MPI_* variable set): each thread's communicator a stream communicator
#     on a stream of its own (MODE=mpix), or a plain dup under MPIXSTREAM_POLICY=explicit (MODE=plain):
#     the same as Intel's own thread split (4 endpoints, 100/200/300 messages, three distinct addresses),
#     and the communicators report thread_id 1, 2, 3;
#   - with libmpixstream.so on its default (serial) backend, MODE=mpix: 1 endpoint, one address.
# Then a multiplex communicator (tests/impi/multiplex_split.c, checks below), and tests/c/split_backend.c (the split backend's rules, each checked) at 2 ranks under both policies
# on Intel MPI's shm transport, as its rows of tests/c/TESTS do on the days CI's rotation picks impi.
# Needs scripts/install.sh --mpich impi and the MPICH 5.0.2 wheel (its libfabric); SKIP without them.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
fabric=$root/.deps/mpich5/lib/mpich/libfabric.so.1
if [ ! -x "$root/.deps/impi/bin/mpicc" ] || [ ! -f "$fabric" ]; then
  echo "SKIP: needs Intel MPI (scripts/install.sh --mpich impi) and MPICH 5.0.2's libfabric (scripts/install.sh)"
  exit 77
fi
mpich_select impi || exit 1
out=$root/build/impi-thread-split
rm -rf "$out"; mkdir -p "$out"
"$MPICC" -O2 -Wall "$root/tests/impi/thread_split.c" -o "$out/thread_split" -lpthread || { echo "FAIL compile"; exit 1; }
lib=$root/target/release
"$MPICC" -Wl,--no-as-needed -O2 -Wall -DWITH_MPIX -I"$root/include" "$root/tests/impi/thread_split.c" \
  -o "$out/thread_split_lib" -L"$lib" -lmpixstream -Wl,-rpath,"$lib" -lpthread || { echo "FAIL compile (library)"; exit 1; }
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

# case: name, program, expected endpoints (1 or 4), then the environment.
fabric_env=(I_MPI_FABRICS=ofi I_MPI_OFI_LIBRARY=$fabric FI_PROVIDER=tcp FI_TCP_IFACE=lo FI_HOOK=trace FI_LOG_LEVEL=trace)
intel_split=(I_MPI_THREAD_SPLIT=1 I_MPI_THREAD_RUNTIME=generic I_MPI_THREAD_MAX=4)
ours=(MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=3)
cases=(
  "setinfo-split1|thread_split|4|MODE=setinfo ${intel_split[*]}"
  "setinfo-split0|thread_split|1|MODE=setinfo"
  "dupinfo-split1|thread_split|4|MODE=dupinfo ${intel_split[*]}"
  "dupinfo-split0|thread_split|1|MODE=dupinfo"
  "lib-mpix-split|thread_split_lib|4|MODE=mpix ${ours[*]}"
  "lib-plain-explicit-split|thread_split_lib|4|MODE=plain MPIXSTREAM_POLICY=explicit ${ours[*]}"
  "lib-mpix-serial|thread_split_lib|1|MODE=mpix"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name prog split envs <<<"$c"
  read -ra extra <<<"$envs"
  env -u I_MPI_FABRICS "${fabric_env[@]}" "${extra[@]}" timeout 120 "$MPIEXEC" -n 2 -errfile-pattern "$out/$name.err.%r" \
    "$out/$prog" >"$out/$name.out" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
  verdict "[$name] runs, every value right (exit $rc)" $rc
  summarise "$out/$name.err.0" >"$out/$name.summary"
  sed 's/^/    /' "$out/$name.summary"
  eps=$(awk '$1 == "endpoints" { print $2 }' "$out/$name.summary")
  counts=$(awk '$1 == "tag" { printf "%s ", $3 }' "$out/$name.summary")
  addrs=$(awk '$1 == "tag" { print $4 }' "$out/$name.summary")
  shown=$(echo $addrs)
  [ "$counts" = "100 200 300 " ]; verdict "[$name] the communicators carry 100, 200, 300 messages: $counts" $?
  if [ "$split" = 4 ]; then
    [ "$eps" = 4 ]; verdict "[$name] 4 endpoints per rank: $eps" $?
    [ -n "$addrs" ] && ! echo "$addrs" | grep -q ,; verdict "[$name] each communicator's messages to one address" $?
    [ "$(echo "$addrs" | sort -u | grep -c .)" -eq 3 ]; verdict "[$name] three distinct destination addresses: $shown" $?
  else
    [ "$eps" = 1 ]; verdict "[$name] 1 endpoint per rank: $eps" $?
    [ "$(echo "$addrs" | sort -u | grep -c .)" -eq 1 ] && ! echo "$addrs" | grep -q ,
    verdict "[$name] all to one destination address: $shown" $?
  fi
  if [[ $name == lib-*-split ]]; then
    [ "$(grep -c '^comm [0-9]: thread_id' "$out/$name.out")" = 3 ] &&
      [ "$(grep '^comm [0-9]: thread_id' "$out/$name.out" | awk '{ printf "%s ", $4 }')" = "1 2 3 " ]
    rc=$?
    verdict "[$name] the communicators carry thread_id 1, 2, 3: $(grep '^comm' "$out/$name.out" | awk '{ printf "%s ", $4 }')" $rc
  fi
done

# A multiplex communicator on the split backend (tests/impi/multiplex_split.c): the four (source index,
# destination index) pairs from rank 0 to rank 1 carry 100, 200, 300 and 400 messages, each on a hidden
# communicator of its own, to one destination address each, four distinct (four of rank 1's endpoints);
# the 60 messages between rank 0's two indices never reach libfabric (no communicator carries 60).
# Pool 6: the program's 2 streams and the 4 dedicated endpoints (MPIR_CVAR_THREAD_MAX=7).
"$MPICC" -Wl,--no-as-needed -O2 -Wall -I"$root/include" "$root/tests/impi/multiplex_split.c" \
  -o "$out/multiplex_split" -L"$lib" -lmpixstream -Wl,-rpath,"$lib" -lpthread || { echo "FAIL compile multiplex_split"; exit 1; }
name=lib-multiplex-split
env -u I_MPI_FABRICS "${fabric_env[@]}" MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=6 timeout 120 "$MPIEXEC" -n 2 \
  -errfile-pattern "$out/$name.err.%r" "$out/multiplex_split" >"$out/$name.out" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
[ $rc -eq 0 ] && grep -q " No Errors" "$out/$name.out"
verdict "[$name] runs, every pair complete and in order (exit $rc)" $?
summarise "$out/$name.err.0" >"$out/$name.summary"
sed 's/^/    /' "$out/$name.summary"
eps=$(awk '$1 == "endpoints" { print $2 }' "$out/$name.summary")
counts=$(awk '$1 == "tag" { printf "%s ", $3 }' "$out/$name.summary")
addrs=$(awk '$1 == "tag" { print $4 }' "$out/$name.summary")
[ "$eps" = 7 ]; verdict "[$name] 7 endpoints per rank (pool 6 + the conventional one): $eps" $?
[ "$counts" = "100 200 300 400 " ]; verdict "[$name] the pairs' communicators carry 100, 200, 300, 400 messages, nothing else 50 or more: $counts" $?
[ -n "$addrs" ] && ! echo "$addrs" | grep -q ,; verdict "[$name] each pair's messages to one address" $?
[ "$(echo "$addrs" | sort -u | grep -c .)" -eq 4 ]; rc=$?
verdict "[$name] four distinct destination addresses: $(echo $addrs)" $rc

"$MPICC" -Wl,--no-as-needed -O2 -Wall -I"$root/include" -I"$root/tests/c" "$root/tests/c/split_backend.c" \
  -o "$out/split_backend" -L"$lib" -lmpixstream -Wl,-rpath,"$lib" -lpthread || { echo "FAIL compile split_backend"; exit 1; }
for policy in implicit explicit; do
  MPIXSTREAM_BACKEND=split MPIXSTREAM_STREAMS=3 MPIXSTREAM_POLICY=$policy timeout 120 \
    "$root/scripts/mpixrun" --mpich impi -n 2 "$out/split_backend" >"$out/split_backend-$policy.out" 2>&1 </dev/null
  rc=$?
  [ $rc -eq 0 ] || bash "$root/scripts/shm_cleanup.sh"
  [ $rc -eq 0 ] && grep -q " No Errors" "$out/split_backend-$policy.out"
  verdict "[split_backend, policy $policy] exit $rc, No Errors" $?
  [ $rc -eq 0 ] || sed 's/^/    /' "$out/split_backend-$policy.out" | grep -v "MPI startup" | head -20
done
exit $failed

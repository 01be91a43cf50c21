#!/usr/bin/env bash
# Where multiplex traffic goes, per message, with the UCX probe (tests/probe, tests/probe/README.md).
# Two ranks, 3 streams each (workers 1..3 with MPICH's implicit pool of 1: worker 1+i is stream i),
# thread i of each rank owns index i. In a run with SHIFT s, rank 0's thread i sends 100*(i+1) indexed
# messages from its index i to rank 1's index (i+s)%3, which receives them on its thread (i+s)%3; the
# pairs of one run form a permutation, so each worker's count is one pair's. SHIFT 0, 1, 2 cover all
# nine (i, j) pairs, received three ways (full wildcards; named source and index: the direct path;
# MPIX_ANY_INDEX with a named source). On the native backend, for every pair:
#   rank 0's worker of stream i sends exactly 100*(i+1), rank 1's worker of stream j receives exactly
#   that many, every other reserved worker stays at 0, and the implicit worker 0 carries exactly what
#   it carries in a run without indexed messages (creation and finalize only).
# Then the same with conventional indices (MPIX_STREAM_NULL: rank 0's index 1, rank 1's index 2): a pair
# with an end on one runs on the implicit worker 0 at both ends, exactly its messages; the others as above.
# With MPIXSTREAM_BACKEND=serial everything stays on worker 0, and the payloads are still right.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich_select 5
out=$root/build/multiplex-endpoints; mkdir -p "$out"
bash "$root/tests/probe/build.sh" "$out" >/dev/null
cat > "$out/mxprobe.c" <<'C'
#include <mpi.h>
#include "mpix_stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define T 3
static MPI_Comm mx;
static int rank, shift, scale, bad;
static void *run(void *arg) {
    int me = (int)(long)arg;
    if (rank == 0) {
        int j = (me + shift) % T, n = scale * (me + 1);
        for (int k = 0; k < n; k++) { long v = 1000 * me + k; MPIX_Stream_send(&v, 1, MPI_LONG, 1, k, mx, me, j); }
    } else {
        int i = (me - shift + T) % T, n = scale * (i + 1);
        for (int k = 0; k < n; k++) {
            long v = -1;
            MPI_Status st;
            if (shift == 0) MPIX_Stream_recv(&v, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, me, &st);
            else if (shift == 1) MPIX_Stream_recv(&v, 1, MPI_LONG, 0, k, mx, i, me, &st);
            else MPIX_Stream_recv(&v, 1, MPI_LONG, 0, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, me, &st);
            if (v != 1000 * i + k || st.MPI_TAG != k || st.MPI_SOURCE != 0) bad++;
        }
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    shift = atoi(getenv("SHIFT"));
    scale = atoi(getenv("SCALE"));
    MPIX_Stream s[T], attach[T];
    for (int i = 0; i < T; i++) MPIX_Stream_create(MPI_INFO_NULL, &s[i]), attach[i] = s[i];
    /* NULLIDX=1: rank 0's index 1 and rank 1's index 2 are conventional (the streams still exist, so
     * worker 1+i stays stream i's) */
    if (getenv("NULLIDX") && atoi(getenv("NULLIDX"))) attach[rank == 0 ? 1 : 2] = MPIX_STREAM_NULL;
    MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, T, attach, &mx);
    pthread_t th[T];
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, run, (void *)(long)i);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    MPI_Comm_free(&mx);
    for (int i = 0; i < T; i++) MPIX_Stream_free(&s[i]);
    if (rank == 1) printf(bad ? "BAD %d\n" : "payloads ok\n", bad);
    MPI_Finalize();
    return 0;
}
C
"$MPICC" -O2 -I"$root/include" "$out/mxprobe.c" -o "$out/mxprobe" -L"$root/target/release" -lmpixstream \
  -Wl,-rpath,"$root/target/release" -lpthread
fails=0
run_probe() { # dir, extra env...
  local d=$1; shift
  rm -rf "$d"; mkdir -p "$d"
  env "$@" UCXPROBE_DIR="$d" MPIXSTREAM_STREAMS=3 MPIR_CVAR_NOLOCAL=1 UCX_NET_DEVICES=lo \
    MPIXRUN_PRELOAD_EXTRA="$out/ucxprobe.so" timeout 60 "$root/scripts/mpixrun" -n 2 "$out/mxprobe" </dev/null \
    >"$d.out" 2>&1
  grep -q "payloads ok" "$d.out"; local rc=$?
  check "payloads and statuses right ($(basename "$d"))" $rc
}
get() { python3 "$root/tests/probe/summarize.py" "$1" --get "$2" "$3" "$4"; }
check() { # description, condition result (0/1)
  if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

# baseline: no indexed message at all (worker 0 carries creation and finalize traffic only)
run_probe "$out/base" SHIFT=0 SCALE=0
b0s=$(get "$out/base" 0 0 sends); b0r=$(get "$out/base" 0 0 recvs)
b1s=$(get "$out/base" 1 0 sends); b1r=$(get "$out/base" 1 0 recvs)
how=("full wildcards" "named source and index (direct path)" "MPIX_ANY_INDEX, named source")
for shift in 0 1 2; do
  d=$out/shift$shift
  run_probe "$d" SHIFT=$shift SCALE=100
  python3 "$root/tests/probe/summarize.py" "$d"
  for i in 0 1 2; do
    j=$(((i + shift) % 3)); n=$((100 * (i + 1)))
    s=$(get "$d" 0 $((1 + i)) sends); r=$(get "$d" 1 $((1 + j)) recvs)
    [ "$s" -eq "$n" ] && [ "$r" -eq "$n" ]
    check "pair $i -> $j (${how[$shift]}): worker of stream $i sent $s, peer's worker of stream $j received $r, expected $n" $?
    # nothing else on those workers: rank 0's stream worker receives nothing, rank 1's sends nothing
    x=$(( $(get "$d" 0 $((1 + i)) recvs) + $(get "$d" 1 $((1 + j)) sends) ))
    [ "$x" -eq 0 ]; check "pair $i -> $j: no traffic the other way on those workers ($x)" $?
  done
  w0="$(get "$d" 0 0 sends)/$(get "$d" 0 0 recvs)/$(get "$d" 1 0 sends)/$(get "$d" 1 0 recvs)"
  [ "$w0" = "$b0s/$b0r/$b1s/$b1r" ]
  check "shift $shift: implicit worker 0 carries exactly the baseline ($w0 sends/recvs of rank 0, rank 1)" $?
done

# conventional indices: rank 0's index 1 and rank 1's index 2 attach MPIX_STREAM_NULL. A pair with an end
# on one of them runs on the implicit worker 0 at both ends (exactly its messages beyond the baseline of
# a run with the same conventional indices and no message); every other pair stays exact on its streams'
# workers.
run_probe "$out/nbase" SHIFT=0 SCALE=0 NULLIDX=1
n0s=$(get "$out/nbase" 0 0 sends); n0r=$(get "$out/nbase" 0 0 recvs)
n1s=$(get "$out/nbase" 1 0 sends); n1r=$(get "$out/nbase" 1 0 recvs)
for shift in 0 1 2; do
  d=$out/null$shift
  run_probe "$d" SHIFT=$shift SCALE=100 NULLIDX=1
  python3 "$root/tests/probe/summarize.py" "$d"
  conv=0
  for i in 0 1 2; do
    j=$(((i + shift) % 3)); n=$((100 * (i + 1)))
    s=$(get "$d" 0 $((1 + i)) sends); r=$(get "$d" 1 $((1 + j)) recvs)
    if [ $i -eq 1 ] || [ $j -eq 2 ]; then
      conv=$((conv + n))
      [ "$s" -eq 0 ] && [ "$r" -eq 0 ]
      check "conventional pair $i -> $j (${how[$shift]}): nothing on the workers of stream $i ($s) and of the peer's stream $j ($r)" $?
    else
      [ "$s" -eq "$n" ] && [ "$r" -eq "$n" ]
      check "pair $i -> $j beside conventional indices (${how[$shift]}): worker of stream $i sent $s, peer's worker of stream $j received $r, expected $n" $?
    fi
  done
  w0="$(get "$d" 0 0 sends)/$(get "$d" 0 0 recvs)/$(get "$d" 1 0 sends)/$(get "$d" 1 0 recvs)"
  want="$((n0s + conv))/$n0r/$n1s/$((n1r + conv))"
  [ "$w0" = "$want" ]
  check "shift $shift with conventional indices: implicit worker 0 carries the baseline plus exactly the conventional pairs' $conv messages ($w0, expected $want)" $?
done

# serial backend: everything on worker 0, still correct
d=$out/serial
run_probe "$d" SHIFT=1 SCALE=100 MPIXSTREAM_BACKEND=serial
python3 "$root/tests/probe/summarize.py" "$d"
s0=$(get "$d" 0 0 sends); r0=$(get "$d" 1 0 recvs)
[ "$s0" -ge 600 ] && [ "$r0" -ge 600 ]; check "serial: all 600 indexed messages on worker 0 ($s0 sends, $r0 recvs)" $?
other=$(python3 "$root/tests/probe/summarize.py" "$d" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(v.get("sends", 0) + v.get("recvs", 0) for r in d.values() for w, v in r.items() if w not in ("0",)))')
[ "$other" -eq 0 ]; check "serial: no other worker used ($other operations)" $?
[ $fails -eq 0 ]

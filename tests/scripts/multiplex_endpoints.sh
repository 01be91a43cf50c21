#!/usr/bin/env bash
# Where multiplex traffic goes, per message, on the native backend (MPICH 5.0.2), with the UCX probe
# (tests/probe; DESIGN.md §4). Thread i of each rank owns stream i of a multiplex communicator (3
# streams per rank); rank 0's thread i sends 100*(i+1) indexed messages from index i to rank 1's
# index i, received with MPIX_ANY_INDEX. Indexed traffic runs on MPICH's implicit (locked) pool, never
# on the streams' reserved workers, whichever thread sends: with the implicit pool of 1 VCI all 600
# messages use worker 0 and the reserved workers stay idle; with MPIXSTREAM_IMPLICIT_VCIS=3 they stay
# on implicit workers (0..2), off the reserved ones (3..), each destination index on its own worker.
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
#define T 3
static MPI_Comm mx;
static int rank;
static void *run(void *arg) {
    int i = (int)(long)arg, n = 100 * (i + 1);
    long v = 0;
    for (int k = 0; k < n; k++) {
        if (rank == 0) MPIX_Stream_send(&v, 1, MPI_LONG, 1, k, mx, i, i);
        else MPIX_Stream_recv(&v, 1, MPI_LONG, 0, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, i, MPI_STATUS_IGNORE);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_Stream s[T];
    for (int i = 0; i < T; i++) MPIX_Stream_create(MPI_INFO_NULL, &s[i]);
    MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, T, s, &mx);
    pthread_t th[T];
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, run, (void *)(long)i);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    MPI_Comm_free(&mx);
    for (int i = 0; i < T; i++) MPIX_Stream_free(&s[i]);
    if (rank == 0) printf("done\n");
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
    MPIXRUN_PRELOAD_EXTRA="$out/ucxprobe.so" timeout 60 "$root/scripts/mpixrun" -n 2 "$out/mxprobe" </dev/null
}
get() { python3 "$root/tests/probe/summarize.py" "$1" --get "$2" "$3" "$4"; }
sum_workers() { # dir rank field first last
  local t=0; for w in $(seq "$4" "$5"); do t=$((t + $(get "$1" "$2" "$w" "$3"))); done; echo $t
}
check() { # description, condition result (0/1)
  if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

# implicit pool of 1: worker 0 implicit, workers 1..3 the streams
run_probe "$out/one"
python3 "$root/tests/probe/summarize.py" "$out/one"
s0=$(get "$out/one" 0 0 sends); r0=$(get "$out/one" 1 0 recvs)
[ "$s0" -ge 600 ]; check "implicit pool of 1: rank 0 sends all 600 indexed messages on worker 0 ($s0 sends)" $?
[ "$r0" -ge 600 ]; check "implicit pool of 1: rank 1 receives them on worker 0 ($r0 recvs)" $?
rs=$(sum_workers "$out/one" 0 sends 1 3); rr=$(sum_workers "$out/one" 1 recvs 1 3)
[ "$rs" -eq 0 ] && [ "$rr" -eq 0 ]; check "implicit pool of 1: reserved workers 1-3 idle ($rs sends, $rr recvs)" $?

# implicit pool of 3: workers 0..2 implicit, 3..5 the streams
run_probe "$out/three" MPIXSTREAM_IMPLICIT_VCIS=3
python3 "$root/tests/probe/summarize.py" "$out/three"
s=$(sum_workers "$out/three" 0 sends 0 2); r=$(sum_workers "$out/three" 1 recvs 0 2)
[ "$s" -ge 600 ] && [ "$r" -ge 600 ]; check "implicit pool of 3: indexed traffic on implicit workers 0-2 ($s sends, $r recvs)" $?
# each destination index has its own hidden communicator, and MPICH gives consecutive communicators
# consecutive VCIs: the three indices' 100, 200, 300 messages land on three different workers
m=$(for w in 0 1 2; do get "$out/three" 1 $w mrecvs; done | sort -n | tr '\n' ' ')
[ "$m" = "100 200 300 " ]; check "implicit pool of 3: one implicit worker per destination index (mrecvs per worker: $m)" $?
rs=$(sum_workers "$out/three" 0 sends 3 5); rr=$(sum_workers "$out/three" 1 recvs 3 5)
[ "$rs" -eq 0 ] && [ "$rr" -eq 0 ]; check "implicit pool of 3: reserved workers 3-5 idle ($rs sends, $rr recvs)" $?
[ $fails -eq 0 ]

#!/usr/bin/env bash
# Proof, per message, of the endpoint mapping on the native backend (MPICH 5.0.2), with the UCX probe
# (tests/probe; docs/architecture.md §5): T stream communicators on T streams, one thread each, put their
# traffic on T distinct reserved workers (VCIs 1..T with MPICH's implicit pool of 1), and nothing else
# does; with MPIXSTREAM_BACKEND=serial the same program keeps all traffic on worker 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
mpich_select 5
out=$root/build/mapping; mkdir -p "$out"
bash "$root/tests/probe/build.sh" "$out" >/dev/null
cat > "$out/mapping.c" <<'C'
/* Thread i of rank 0 sends 100*(i+1) 8-byte messages to thread i of rank 1 on stream comm i. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define T 3
static MPI_Comm comms[T];
static int rank;
static void *run(void *arg) {
    int i = (int)(long)arg, n = 100 * (i + 1);
    long v = 0;
    for (int k = 0; k < n; k++) {
        if (rank == 0) MPI_Send(&v, 1, MPI_LONG, 1, k, comms[i]);
        else MPI_Recv(&v, 1, MPI_LONG, 0, k, comms[i], MPI_STATUS_IGNORE);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_Stream s[T];
    for (int i = 0; i < T; i++) {
        MPIX_Stream_create(MPI_INFO_NULL, &s[i]);
        MPIX_Stream_comm_create(MPI_COMM_WORLD, s[i], &comms[i]);
    }
    pthread_t th[T];
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, run, (void *)(long)i);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) { MPI_Comm_free(&comms[i]); MPIX_Stream_free(&s[i]); }
    if (rank == 0) printf("done\n");
    MPI_Finalize();
    return 0;
}
C
"$MPICC" -O2 "$out/mapping.c" -o "$out/mapping" -lpthread
fails=0
run_probe() { # dir, extra env...
  local d=$1; shift
  rm -rf "$d"; mkdir -p "$d"
  env "$@" UCXPROBE_DIR="$d" MPIXSTREAM_STREAMS=4 MPIR_CVAR_NOLOCAL=1 UCX_NET_DEVICES=lo \
    MPIXRUN_PRELOAD_EXTRA="$out/ucxprobe.so" timeout 60 "$root/scripts/mpixrun" -n 2 "$out/mapping" </dev/null
}
get() { python3 "$root/tests/probe/summarize.py" "$1" --get "$2" "$3" "$4"; }
expect() { # description, actual, expected
  if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got $2, expected $3"; fails=$((fails + 1)); fi
}

run_probe "$out/native"
python3 "$root/tests/probe/summarize.py" "$out/native"
# The three streams take reserved workers 1, 2, 3 in creation order; worker 4 (the pool's 4th) is idle.
for w in 1 2 3; do
  expect "native: rank 0 sends on reserved worker $w" "$(get "$out/native" 0 $w sends)" $((100 * w))
  expect "native: rank 1 receives on reserved worker $w" "$(get "$out/native" 1 $w recvs)" $((100 * w))
  expect "native: rank 0 receives nothing on worker $w" "$(get "$out/native" 0 $w recvs)" 0
done
expect "native: unused reserved worker 4 idle (rank 0)" "$(get "$out/native" 0 4 sends)" 0
expect "native: unused reserved worker 4 idle (rank 1)" "$(get "$out/native" 1 4 recvs)" 0
w0=$(get "$out/native" 0 0 sends)
if [ "$w0" -lt 100 ]; then echo "PASS native: worker 0 carries only setup traffic ($w0 sends)"; else echo "FAIL native: worker 0 has $w0 sends"; fails=$((fails + 1)); fi

run_probe "$out/serial" MPIXSTREAM_BACKEND=serial
total=$(( $(get "$out/serial" 0 0 sends) ))
if [ "$total" -ge 600 ]; then echo "PASS serial: all 600 messages on worker 0 ($total sends)"; else echo "FAIL serial: worker 0 has $total sends"; fails=$((fails + 1)); fi
for w in 1 2 3 4; do expect "serial: worker $w idle" "$(get "$out/serial" 0 $w sends)" 0; done
[ $fails -eq 0 ]

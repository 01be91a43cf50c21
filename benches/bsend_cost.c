/* Instructions per MPI_Bsend (counted by benches/bsend_cost.sh with callgrind): one process, MPI_Bsend of
 * one int to itself then MPI_Recv of it, on MPI_COMM_WORLD (never a stream communicator) and on an
 * MPI_Comm_dup of it (a native stream communicator under MPIXSTREAM_POLICY=explicit on MPICH >= 4.1).
 * Each loop is its own function so that callgrind counts it alone (--toggle-collect).
 *   bsend_cost [ITERS=10000]  -> "RESULT world_ns=... dup_ns=..." */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) double bsend_world(long n) {
    int out = 1, in = 0;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        MPI_Bsend(&out, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        MPI_Recv(&in, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return (MPI_Wtime() - t0) / n * 1e9;
}

__attribute__((noinline)) double bsend_dup(MPI_Comm c, long n) {
    int out = 1, in = 0;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        MPI_Bsend(&out, 1, MPI_INT, 0, 0, c);
        MPI_Recv(&in, 1, MPI_INT, 0, 0, c, MPI_STATUS_IGNORE);
    }
    return (MPI_Wtime() - t0) / n * 1e9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    int bytes = 64 * (MPI_BSEND_OVERHEAD + 8);
    void *buffer = malloc(bytes);
    MPI_Buffer_attach(buffer, bytes);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    bsend_world(iters / 10); /* warm-up */
    bsend_dup(dup, iters / 10);
    double world = bsend_world(iters);
    double d = bsend_dup(dup, iters);
    printf("RESULT world_ns=%.2f dup_ns=%.2f\n", world, d);
    MPI_Comm_free(&dup);
    int size;
    MPI_Buffer_detach(&buffer, &size);
    free(buffer);
    MPI_Finalize();
    return 0;
}

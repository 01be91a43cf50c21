/* Cost per call of the interposers that route around native defects (MPI_Iprobe here), on
 * communicators that do not carry a stream, while stream communicators exist (always the case under
 * MPIXSTREAM_POLICY=explicit): one process, a loop of MPI_Iprobe on MPI_COMM_WORLD and on an
 * MPI_Comm_idup of it (left implicit by the policy: its result is not ready when idup returns), with
 * one MPI_Comm_dup (a policy stream communicator) alive.
 *   interposer_cost [ITERS=1000000]  -> "RESULT world_ns=... idup_ns=..." */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double per_call(MPI_Comm c, long n) {
    int flag;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, MPI_STATUS_IGNORE);
    return (MPI_Wtime() - t0) / n * 1e9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 1000000;
    MPI_Comm streamed, plain;
    MPI_Request r;
    MPI_Comm_dup(MPI_COMM_WORLD, &streamed);
    MPI_Comm_idup(MPI_COMM_WORLD, &plain, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    per_call(plain, iters / 10); /* warm-up */
    double world = per_call(MPI_COMM_WORLD, iters);
    double idup = per_call(plain, iters);
    printf("RESULT world_ns=%.2f idup_ns=%.2f\n", world, idup);
    MPI_Comm_free(&plain);
    MPI_Comm_free(&streamed);
    MPI_Finalize();
    return 0;
}

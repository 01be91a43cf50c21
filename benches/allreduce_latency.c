/* Latency of a single-threaded program's 8-byte MPI_Allreduce (MPI_SUM of one double), the program as
 * most MPI programs are: MPI_Init, one thread. Prints microseconds per call (rank 0).
 *   allreduce_latency [iterations]
 * Called on a duplicate of MPI_COMM_WORLD, as libraries do (under the explicit policy, a communicator
 * the policy could move). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, iters = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Comm comm;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    double in = rank, outv = 0, t = 0;
    for (int phase = 0; phase < 2; phase++) { /* phase 0: warm-up */
        int n = phase ? iters : iters / 10;
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) MPI_Allreduce(&in, &outv, 1, MPI_DOUBLE, MPI_SUM, comm);
        t = MPI_Wtime() - t0;
        if (phase) t = t / n * 1e6;
    }
    double worst;
    MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%.4f\n", worst);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}

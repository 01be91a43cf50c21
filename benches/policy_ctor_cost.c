/* Time of the explicit policy's communicator constructors (and MPICH's alone, run without the library
 * or under implicit): N rounds of each form, create then free, 2 ranks. Every round is a collective, so
 * the time is the slower rank's; rank 0 prints microseconds per create + free.
 * Usage: policy_ctor_cost [N=200]
 * Prints: RESULT dup_us=X split_us=Y idup_us=Z */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Comm parent, c, cart;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent); /* a policy communicator under explicit */
    int size, dims, periodic = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dims = size;
    MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &periodic, 0, &cart); /* its dups: with a topology */
    double t[4] = {0, 0, 0, 0};
    for (int round = -2; round < n; round++) { /* two warm-up rounds */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Comm_dup(parent, &c);
        MPI_Comm_free(&c);
        double t1 = MPI_Wtime();
        MPI_Comm_split(parent, 0, rank, &c);
        MPI_Comm_free(&c);
        double t2 = MPI_Wtime();
        MPI_Request r;
        MPI_Comm_idup(parent, &c, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Comm_free(&c);
        double t3 = MPI_Wtime();
        MPI_Comm_dup(cart, &c);
        MPI_Comm_free(&c);
        double t4 = MPI_Wtime();
        if (round >= 0) {
            t[0] += t1 - t0;
            t[1] += t2 - t1;
            t[2] += t3 - t2;
            t[3] += t4 - t3;
        }
    }
    if (rank == 0)
        printf("RESULT dup_us=%.1f split_us=%.1f idup_us=%.1f cart_dup_us=%.1f\n", t[0] / n * 1e6, t[1] / n * 1e6,
               t[2] / n * 1e6, t[3] / n * 1e6);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&parent);
    MPI_Finalize();
    return 0;
}

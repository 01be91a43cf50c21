/* A plain MPI program (no MPIX call) for the install and compare tests: rank pairs exchange N messages
 * on each of two duplicates of MPI_COMM_WORLD. It asks for MPI_THREAD_MULTIPLE, as a threaded program
 * does, so the explicit policy (inert below that level) gives it two streams.
 *   two_comms [N] [--fail-if-explicit]
 * --fail-if-explicit makes it fail (MPI_Abort, exit status 3) when MPIXSTREAM_POLICY=explicit: the
 * compare test's program that fails under one policy only. Rank 0 prints the LD_PRELOAD it runs with
 * (the compare test checks that the timed runs carry no tools library). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 1000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *policy = getenv("MPIXSTREAM_POLICY"), *preload = getenv("LD_PRELOAD");
    if (rank == 0) printf("preload: %s\n", preload ? preload : "(none)");
    if (argc > 2 && strcmp(argv[2], "--fail-if-explicit") == 0 && policy && strcmp(policy, "explicit") == 0) {
        /* Every rank says why before anyone aborts: an abort may kill the others before their output
         * is forwarded. */
        fprintf(stderr, "two_comms: error: deliberate failure under the explicit policy\n");
        fflush(stderr);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) MPI_Abort(MPI_COMM_WORLD, 3);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Comm comm[2];
    for (int c = 0; c < 2; c++) MPI_Comm_dup(MPI_COMM_WORLD, &comm[c]);
    int peer = rank ^ 1, buf = 0, errors = 0;
    if (peer < size) {
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < n; i++) {
                if (rank & 1) {
                    MPI_Recv(&buf, 1, MPI_INT, peer, i, comm[c], MPI_STATUS_IGNORE);
                    if (buf != i * 10 + c) errors++;
                    MPI_Send(&buf, 1, MPI_INT, peer, i, comm[c]);
                } else {
                    buf = i * 10 + c;
                    MPI_Send(&buf, 1, MPI_INT, peer, i, comm[c]);
                    MPI_Recv(&buf, 1, MPI_INT, peer, i, comm[c], MPI_STATUS_IGNORE);
                    if (buf != i * 10 + c) errors++;
                }
            }
    }
    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int c = 0; c < 2; c++) MPI_Comm_free(&comm[c]);
    if (rank == 0) printf(total ? "two_comms: %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}

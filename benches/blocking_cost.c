/* Cost of the blocking point-to-point interposers (MPI_Send, MPI_Recv: `lean:blocking` rows, which
 * load one counter before the call goes on) on a communicator without a stream.
 *   1 rank:  a loop of MPI_Send + MPI_Recv with MPI_PROC_NULL on MPI_COMM_WORLD (MPICH returns at
 *            once: the interposers' share is largest)       -> "RESULT procnull_ns=..."
 *   2 ranks: an 8-byte MPI_Send/MPI_Recv ping-pong on MPI_COMM_WORLD -> "RESULT pingpong_us=..."
 *   blocking_cost [ITERS=1000000] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int rank, size;
    char b[8] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 1) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            MPI_Send(b, 8, MPI_CHAR, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
            MPI_Recv(b, 8, MPI_CHAR, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        printf("RESULT procnull_ns=%.2f\n", (MPI_Wtime() - t0) / n * 1e9);
    } else {
        long m = n / 20;
        int peer = rank ^ 1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < m; i++) {
            if (rank == 0) {
                MPI_Send(b, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
                MPI_Recv(b, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(b, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(b, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("RESULT pingpong_us=%.3f\n", (MPI_Wtime() - t0) / m / 2 * 1e6);
    }
    MPI_Finalize();
    return 0;
}

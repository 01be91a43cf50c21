/* Message rate of plain MPI calls (the ones mpixstream passes through): rank 0 streams windows of
 * 8-byte MPI_Isend to rank 1, which posts matching MPI_Irecv; one ack per window. Prints messages/s.
 *   msgrate [iterations] [window] [world]
 * On a duplicate of MPI_COMM_WORLD (under the explicit policy, a policy communicator), or with "world"
 * on MPI_COMM_WORLD itself (a communicator without a stream under every policy). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = argc > 1 ? atoi(argv[1]) : 2000, window = argc > 2 ? atoi(argv[2]) : 64;
    long buf[256];
    MPI_Request reqs[256];
    int world = argc > 3 && argv[3][0] == 'w';
    MPI_Comm comm = MPI_COMM_WORLD;
    if (!world) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int phase = 0; phase < 2; phase++) { /* phase 0: warm-up */
        int n = phase ? iters : iters / 10;
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        for (int it = 0; it < n; it++) {
            for (int w = 0; w < window; w++) {
                if (rank == 0) MPI_Isend(&buf[w], 1, MPI_LONG, 1, w, comm, &reqs[w]);
                else MPI_Irecv(&buf[w], 1, MPI_LONG, 0, w, comm, &reqs[w]);
            }
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            if (rank == 0) MPI_Recv(buf, 0, MPI_BYTE, 1, 999, comm, MPI_STATUS_IGNORE);
            else MPI_Send(buf, 0, MPI_BYTE, 0, 999, comm);
        }
        double t = MPI_Wtime() - t0;
        if (phase && rank == 0) printf("%.0f\n", (double)n * window / t);
    }
    if (!world) MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}

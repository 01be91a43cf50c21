/* Cost per MPI call of what mpixstream interposes, measured in one process (no oversubscription, so it
 * holds on a busy 2-core machine): a loop of MPI_Irecv + MPI_Isend to itself + MPI_Waitall on one
 * MPI_Comm_dup(MPI_COMM_WORLD) (a policy stream under MPIXSTREAM_POLICY=explicit), 3 calls per iteration.
 *   callcost [ITERS=200000]  -> "RESULT ns_per_call=..." */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    long v = 1, w = 0;
    MPI_Request q[2];
    for (int phase = 0; phase < 2; phase++) { /* 0: warm-up */
        long n = phase ? iters : iters / 10;
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            MPI_Irecv(&w, 1, MPI_LONG, 0, 0, c, &q[0]);
            MPI_Isend(&v, 1, MPI_LONG, 0, 0, c, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
        double dt = MPI_Wtime() - t0;
        if (phase) printf("RESULT ns_per_call=%.1f\n", dt / n / 3 * 1e9);
    }
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}

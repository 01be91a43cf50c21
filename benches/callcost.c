/* Cost per MPI call of what mpixstream interposes, measured in one process (no oversubscription, so it
 * holds on a busy 2-core machine): a loop of MPI_Irecv + MPI_Isend to itself + MPI_Waitall on one
 * MPI_Comm_dup(MPI_COMM_WORLD) (a policy stream under MPIXSTREAM_POLICY=explicit), 3 calls per iteration.
 * With "native" (an MPICH with MPIX streams, no library, MPIR_CVAR_CH4_RESERVE_VCIS >= 1) the communicator is
 * MPICH's own stream communicator instead, made with MPIX_Stream_create + MPIX_Stream_comm_create: what
 * the explicit policy's communicator costs in MPICH alone.
 *   callcost [ITERS=200000] [native]  -> "RESULT ns_per_call=..." */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loop alone, in a function of its own: benches/claim_cost.sh counts instructions with callgrind's
 * --toggle-collect=measured_loop, so nothing of start-up, finalize or other threads enters the count. */
__attribute__((noinline)) void measured_loop(MPI_Comm c, long n) {
    long v = 1, w = 0;
    MPI_Request q[2];
    for (long i = 0; i < n; i++) {
        MPI_Irecv(&w, 1, MPI_LONG, 0, 0, c, &q[0]);
        MPI_Isend(&v, 1, MPI_LONG, 0, 0, c, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    }
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    MPI_Comm c;
#ifdef MPIX_STREAM_NULL
    MPIX_Stream s = MPIX_STREAM_NULL;
    if (argc > 2 && strcmp(argv[2], "native") == 0) {
        if (MPIX_Stream_create(MPI_INFO_NULL, &s) != MPI_SUCCESS ||
            MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c) != MPI_SUCCESS) {
            fprintf(stderr, "callcost: no native stream communicator\n");
            return 1;
        }
    } else
#endif
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    for (int phase = 0; phase < 2; phase++) { /* 0: warm-up */
        long n = phase ? iters : iters / 10;
        double t0 = MPI_Wtime();
        measured_loop(c, n);
        double dt = MPI_Wtime() - t0;
        if (phase) printf("RESULT ns_per_call=%.1f\n", dt / n / 3 * 1e9);
    }
    MPI_Comm_free(&c);
#ifdef MPIX_STREAM_NULL
    if (s != MPIX_STREAM_NULL) MPIX_Stream_free(&s);
#endif
    MPI_Finalize();
    return 0;
}

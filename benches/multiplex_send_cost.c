/* Cost of one indexed send call: MPIX_Stream_isend on a multiplex communicator (index 0 -> 0) against
 * MPI_Isend on a stream communicator of the same stream, in one process, alternating blocks of
 * windows between the two. Rank 0 times only its send calls (W per window, then MPI_Waitall outside
 * the timing); rank 1 receives (named receives on the multiplex communicator: the direct path).
 * Usage: multiplex_send_cost [WINDOWS=20000] [W=32]
 * Rank 0 prints: RESULT stream_ns=X multiplex_ns=Y ratio=Y/X */
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAXW 256
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long windows = argc > 1 ? atol(argv[1]) : 20000;
    int w = argc > 2 ? atoi(argv[2]) : 32;
    if (w < 1 || w > MAXW) MPI_Abort(MPI_COMM_WORLD, 2);
    MPIX_Stream s;
    MPI_Comm sc, mx;
    MPIX_Stream_create(MPI_INFO_NULL, &s);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc);
    MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, &s, &mx);
    static char buf[8 * MAXW];
    MPI_Request req[MAXW];
    double spent[2] = {0, 0};
    long calls[2] = {0, 0};
    const int block = 64; /* windows per block, the variants alternate */
    for (long k = 0; k < windows; k++) {
        int v = (k / block) % 2; /* 0: stream communicator, 1: multiplex */
        if (rank == 0) {
            double t0 = now_ns();
            for (int i = 0; i < w; i++) {
                if (v == 0) MPI_Isend(buf + 8 * i, 8, MPI_BYTE, 1, 0, sc, &req[i]);
                else MPIX_Stream_isend(buf + 8 * i, 8, MPI_BYTE, 1, 0, mx, 0, 0, &req[i]);
            }
            if (k >= 2 * block) { /* the first two blocks warm up */
                spent[v] += now_ns() - t0;
                calls[v] += w;
            }
        } else {
            for (int i = 0; i < w; i++) {
                if (v == 0) MPI_Irecv(buf + 8 * i, 8, MPI_BYTE, 0, 0, sc, &req[i]);
                else MPIX_Stream_irecv(buf + 8 * i, 8, MPI_BYTE, 0, 0, mx, 0, 0, &req[i]);
            }
        }
        MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
        if (k % block == block - 1) MPI_Barrier(MPI_COMM_WORLD); /* blocks do not overlap */
    }
    if (rank == 0) {
        double a = spent[0] / calls[0], b = spent[1] / calls[1];
        printf("RESULT stream_ns=%.1f multiplex_ns=%.1f ratio=%.3f\n", a, b, b / a);
    }
    MPI_Comm_free(&mx);
    MPI_Comm_free(&sc);
    MPIX_Stream_free(&s);
    MPI_Finalize();
    return 0;
}

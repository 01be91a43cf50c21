/* All-to-all message rate between two ranks, T threads each, thread t owning stream t: every index of
 * each rank sends to every index of the other, and receives from every index of it. Two ways:
 *   multiplex  one multiplex communicator; sends MPIX_Stream_isend(peer, t -> j), receives
 *              MPIX_Stream_irecv naming (peer, source index i) on index t (the direct path);
 *   percomm    one stream communicator per thread pair: C[i][j] where rank 0 attaches its stream i and
 *              rank 1 its stream j; thread t uses C[t][*] on rank 0 and C[*][t] on rank 1.
 * Each thread, per round: a window of W receives and W sends per partner index, then MPI_Waitall.
 * Usage: multiplex_alltoall multiplex|percomm T [N=20000 per (thread, partner)] [W=16]
 * Rank 0 prints: RESULT variant=V threads=T messages=M seconds=S rate=MSG/S (messages received by
 * both ranks over the slowest thread's time). */
#include <mpi.h>
#include "mpix_stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 16
#define MAXW 64
enum { MULTIPLEX, PERCOMM };
static int variant, nthreads, window = 16, rank, peer;
static long nmsg = 20000;
static MPI_Comm mx, pc[MAXT][MAXT];

#define CK(call)                                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS) {                                                          \
            fprintf(stderr, "multiplex_alltoall: %s failed (%d)\n", #call, rc_);           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

static void *worker(void *p) {
    int t = (int)(long)p;
    static __thread char sbuf[8 * MAXT * MAXW], rbuf[8 * MAXT * MAXW];
    MPI_Request req[2 * MAXT * MAXW];
    for (long done = 0; done < nmsg; done += window) {
        int n = 0;
        for (int j = 0; j < nthreads; j++) {
            MPI_Comm c = rank == 0 ? pc[t][j] : pc[j][t];
            for (int w = 0; w < window; w++) {
                char *rb = rbuf + 8 * (j * window + w);
                if (variant == MULTIPLEX)
                    CK(MPIX_Stream_irecv(rb, 8, MPI_BYTE, peer, 0, mx, j, t, &req[n++]));
                else
                    CK(MPI_Irecv(rb, 8, MPI_BYTE, peer, 0, c, &req[n++]));
            }
        }
        for (int j = 0; j < nthreads; j++) {
            MPI_Comm c = rank == 0 ? pc[t][j] : pc[j][t];
            for (int w = 0; w < window; w++) {
                char *sb = sbuf + 8 * (j * window + w);
                if (variant == MULTIPLEX)
                    CK(MPIX_Stream_isend(sb, 8, MPI_BYTE, peer, 0, mx, t, j, &req[n++]));
                else
                    CK(MPI_Isend(sb, 8, MPI_BYTE, peer, 0, c, &req[n++]));
            }
        }
        CK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
    }
    return NULL;
}

static double run_once(void) {
    pthread_t th[MAXT];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    double dt = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || argc < 3 || provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "usage: 2 ranks, MPI_THREAD_MULTIPLE, multiplex_alltoall multiplex|percomm T [N] [W]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    variant = !strcmp(argv[1], "percomm") ? PERCOMM : MULTIPLEX;
    nthreads = atoi(argv[2]);
    if (argc > 3) nmsg = atol(argv[3]);
    if (argc > 4) window = atoi(argv[4]);
    if (nthreads < 1 || nthreads > MAXT || window < 1 || window > MAXW) MPI_Abort(MPI_COMM_WORLD, 2);
    MPIX_Stream s[MAXT];
    for (int t = 0; t < nthreads; t++) CK(MPIX_Stream_create(MPI_INFO_NULL, &s[t]));
    if (variant == MULTIPLEX) {
        CK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, nthreads, s, &mx));
    } else {
        for (int i = 0; i < nthreads; i++)
            for (int j = 0; j < nthreads; j++) CK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[rank == 0 ? i : j], &pc[i][j]));
    }
    long full = nmsg;
    nmsg = full / 10 > window ? full / 10 : window; /* warm-up */
    run_once();
    nmsg = full;
    double sec = run_once();
    long total = 2L * nthreads * nthreads * nmsg;
    if (rank == 0)
        printf("RESULT variant=%s threads=%d messages=%ld seconds=%.4f rate=%.0f\n", argv[1], nthreads, total, sec,
               total / sec);
    if (variant == MULTIPLEX) {
        MPI_Comm_free(&mx);
    } else {
        for (int i = 0; i < nthreads; i++)
            for (int j = 0; j < nthreads; j++) MPI_Comm_free(&pc[i][j]);
    }
    for (int t = 0; t < nthreads; t++) MPIX_Stream_free(&s[t]);
    MPI_Finalize();
    return 0;
}

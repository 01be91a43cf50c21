/* N-to-1 message rate: T sender threads on rank 1, each with its own stream, send 8-byte messages to
 * one receiving thread on rank 0, which polls. Two ways to write it:
 *   multiplex  one multiplex communicator (rank 1 attaches T streams, rank 0 one); the receiver keeps T
 *              windows of W receives (MPI_ANY_SOURCE, MPIX_ANY_INDEX) on it and polls them in turn
 *              with MPI_Testall, reposting each window as it completes;
 *   percomm    T stream communicators, one per sender thread (rank 0 attaches its one stream to all of
 *              them); the receiver keeps a window of W receives on each and polls them in turn.
 *   named      the multiplex communicator, with the windows of percomm: window k names rank 1, source
 *              index k and tag 0, as percomm's window k names its communicator (the same matching
 *              work as percomm; multiplex's wildcards must also merge the T senders' streams);
 *   blocking   (extra) the multiplex communicator, received with blocking MPIX_Stream_recv
 *              (MPI_ANY_SOURCE, MPIX_ANY_INDEX) one at a time.
 * Senders: windows of W MPIX_Stream_isend / MPI_Isend and MPI_Waitall, N messages each, no
 * acknowledgements (the receiver is the bottleneck being measured). The rate is all messages over the
 * receiver's time from a common start (barrier) to the last message, after a warm-up round.
 * Usage: multiplex_n_to_1 multiplex|percomm|named|blocking T [N=200000] [W=32]
 * Rank 0 prints: RESULT variant=V threads=T messages=M seconds=S rate=MSG/S */
#include <mpi.h>
#include "mpix_stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 64
enum { MULTIPLEX, PERCOMM, NAMED, BLOCKING };
static int variant, nthreads, window = 32, rank;
static long nmsg = 200000;
static MPI_Comm mx, comms[MAXT];

static void fail(const char *what, int rc) {
    fprintf(stderr, "multiplex_n_to_1: %s failed (%d)\n", what, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CK(call)                                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS) fail(#call, rc_);                                          \
    } while (0)

typedef struct {
    int index;
    long n;
} job_t;

static void *sender(void *p) {
    job_t *job = p;
    char buf[8 * 256] = {0};
    MPI_Request req[256];
    MPI_Status st[256];
    for (long sent = 0; sent < job->n; sent += window) {
        for (int w = 0; w < window; w++) {
            if (variant == PERCOMM)
                CK(MPI_Isend(buf + 8 * w, 8, MPI_BYTE, 0, 0, comms[job->index], &req[w]));
            else
                CK(MPIX_Stream_isend(buf + 8 * w, 8, MPI_BYTE, 0, 0, mx, job->index, 0, &req[w]));
        }
        CK(MPI_Waitall(window, req, st));
    }
    return NULL;
}

/* Posts window k's W receives into its part of buf and req. */
static void post_window(int k, char *buf, MPI_Request *req) {
    for (int w = 0; w < window; w++) {
        char *b = buf + 8 * ((size_t)k * window + w);
        MPI_Request *r = &req[k * window + w];
        if (variant == PERCOMM)
            CK(MPI_Irecv(b, 8, MPI_BYTE, 1, 0, comms[k], r));
        else if (variant == NAMED)
            CK(MPIX_Stream_irecv(b, 8, MPI_BYTE, 1, 0, mx, k, 0, r));
        else
            CK(MPIX_Stream_irecv(b, 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, r));
    }
}

/* Receives n messages per sender thread. */
static void receive(long n) {
    long total = n * nthreads;
    char *buf = malloc((size_t)8 * window * nthreads);
    if (variant == BLOCKING) {
        for (long k = 0; k < total; k++)
            CK(MPIX_Stream_recv(buf, 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, MPI_STATUS_IGNORE));
        free(buf);
        return;
    }
    MPI_Request *req = malloc(sizeof(MPI_Request) * window * nthreads);
    MPI_Status *st = malloc(sizeof(MPI_Status) * window);
    long *left = malloc(sizeof(long) * nthreads); /* per window: messages still to post there */
    long posted = 0, done = 0;
    int *active = calloc(nthreads, sizeof(int));
    int per_window = variant == PERCOMM || variant == NAMED; /* window k receives sender k's n */
    for (int k = 0; k < nthreads; k++) left[k] = per_window ? n : 0;
    /* post one window on each */
    for (int k = 0; k < nthreads; k++) {
        int ok = per_window ? left[k] >= window : posted + window <= total;
        if (!ok) continue;
        post_window(k, buf, req);
        if (per_window) left[k] -= window;
        posted += window;
        active[k] = 1;
    }
    while (done < total) {
        for (int k = 0; k < nthreads; k++) {
            if (!active[k]) continue;
            int flag = 0;
            CK(MPI_Testall(window, &req[k * window], &flag, st));
            if (!flag) continue;
            done += window;
            active[k] = 0;
            int again = per_window ? left[k] >= window : posted + window <= total;
            if (!again) continue;
            post_window(k, buf, req);
            if (per_window) left[k] -= window;
            posted += window;
            active[k] = 1;
        }
    }
    free(buf);
    free(req);
    free(st);
    free(left);
    free(active);
}

static void round_trip(long n, double *seconds) {
    CK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    if (rank == 0) {
        receive(n);
        *seconds = MPI_Wtime() - t0;
    } else {
        pthread_t th[MAXT];
        job_t jobs[MAXT];
        for (int i = 0; i < nthreads; i++) {
            jobs[i].index = i;
            jobs[i].n = n;
            pthread_create(&th[i], NULL, sender, &jobs[i]);
        }
        for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    }
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size != 2 || provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "usage: mpiexec -n 2 multiplex_n_to_1 multiplex|percomm|named|blocking T [N] [W]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    variant = !strcmp(argv[1], "percomm") ? PERCOMM : !strcmp(argv[1], "named") ? NAMED
              : !strcmp(argv[1], "blocking") ? BLOCKING : MULTIPLEX;
    nthreads = atoi(argv[2]);
    if (argc > 3) nmsg = atol(argv[3]);
    if (argc > 4) window = atoi(argv[4]);
    if (nthreads < 1 || nthreads > MAXT || window < 1 || window > 256) MPI_Abort(MPI_COMM_WORLD, 2);
    nmsg = (nmsg + window - 1) / window * window;

    /* rank 0: one stream (the receiver's); rank 1: one per sender thread */
    int nstreams = rank == 0 ? 1 : nthreads;
    MPIX_Stream streams[MAXT];
    for (int i = 0; i < nstreams; i++) CK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
    if (variant == PERCOMM) {
        for (int i = 0; i < nthreads; i++)
            CK(MPIX_Stream_comm_create(MPI_COMM_WORLD, rank == 0 ? streams[0] : streams[i], &comms[i]));
    } else {
        CK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, nstreams, streams, &mx));
    }

    double seconds = 0;
    round_trip(window, &seconds); /* warm-up */
    round_trip(nmsg, &seconds);
    if (rank == 0)
        printf("RESULT variant=%s threads=%d messages=%ld seconds=%.4f rate=%.0f\n", argv[1], nthreads,
               nmsg * nthreads, seconds, nmsg * nthreads / seconds);

    if (variant == PERCOMM)
        for (int i = 0; i < nthreads; i++) CK(MPI_Comm_free(&comms[i]));
    else
        CK(MPI_Comm_free(&mx));
    for (int i = 0; i < nstreams; i++) CK(MPIX_Stream_free(&streams[i]));
    MPI_Finalize();
    return 0;
}

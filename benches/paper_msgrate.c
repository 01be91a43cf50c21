/* The seed paper's multithreaded message-rate microbenchmark, written once:
 *   2 processes x T threads; thread i of rank 0 sends 8-byte messages to thread i of rank 1, each pair
 *   on its own communicator; windowed nonblocking (WINDOW Isends / Irecvs, Waitall, then a 0-byte ack
 *   from the receiver so the sender never runs ahead by more than one window).
 *   Each pair runs for a fixed time (SECONDS) rather than a fixed count, so a run lasts the same on a
 *   fast or a slow (or busy) machine: the sender marks the last window in the messages' first byte.
 *
 * Two builds of this one file:
 *   default      each thread's communicator is MPI_Comm_dup(MPI_COMM_WORLD): an unmodified program,
 *                whose endpoints are whatever the MPI (or mpixstream's policy) gives it;
 *   -DUSE_MPIX   each thread's communicator is MPIX_Stream_comm_create(MPI_COMM_WORLD, stream) on its
 *                own MPIX_Stream: the MPIX-API version (native MPICH >= 4.1, or any MPICH under
 *                libmpixstream.so).
 *
 * Usage: paper_msgrate T [WINDOW=64] [SECONDS=0.5] [WARMUP_SECONDS=0.05]
 * Rank 0 prints one line:
 *   RESULT api=comm_dup|mpix threads=T window=W seconds=S messages=N total_rate=MSG/S min_thread_rate=.. max_thread_rate=..
 *   (rates in messages per second; total = all messages / slowest thread's time from a common start). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXT 64
static int rank, nthreads, window = 64;
static double seconds = 0.5, warmup = 0.05;
static MPI_Comm comms[MAXT];
#ifdef USE_MPIX
static MPIX_Stream streams[MAXT];
#endif
static double elapsed[MAXT];
static long sent[MAXT];
static pthread_barrier_t start_line;

/* Windows on `c` for `duration` seconds (the sender decides; the receiver follows the mark); returns
 * the number of messages. */
static long windows(MPI_Comm c, double duration, char *buf, MPI_Request *req) {
    int peer = 1 - rank;
    long n = 0;
    double t0 = MPI_Wtime();
    for (;;) {
        char last;
        if (rank == 0) {
            last = MPI_Wtime() - t0 >= duration;
            for (int w = 0; w < window; w++) buf[8 * w] = last;
            for (int w = 0; w < window; w++) MPI_Isend(buf + 8 * w, 8, MPI_BYTE, peer, 0, c, &req[w]);
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, peer, 1, c, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < window; w++) MPI_Irecv(buf + 8 * w, 8, MPI_BYTE, peer, 0, c, &req[w]);
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, peer, 1, c);
            last = buf[0];
        }
        n += window;
        if (last) return n;
    }
}

static void *run(void *arg) {
    int t = (int)(long)arg;
    char *buf = calloc(window, 8);
    MPI_Request *req = malloc(sizeof(MPI_Request) * window);
    windows(comms[t], warmup, buf, req);
    /* Common start: every thread of both ranks has warmed up (the pairs handshake on their own comm). */
    pthread_barrier_wait(&start_line);
    double t0 = MPI_Wtime();
    sent[t] = windows(comms[t], seconds, buf, req);
    elapsed[t] = MPI_Wtime() - t0;
    free(buf);
    free(req);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    nthreads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) window = atoi(argv[2]);
    if (argc > 3) seconds = atof(argv[3]);
    if (argc > 4) warmup = atof(argv[4]);
    if (size != 2 || provided < MPI_THREAD_MULTIPLE || nthreads < 1 || nthreads > MAXT || window < 1) {
        if (rank == 0) fprintf(stderr, "paper_msgrate: 2 ranks, MPI_THREAD_MULTIPLE, 1..%d threads\n", MAXT);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int t = 0; t < nthreads; t++) {
#ifdef USE_MPIX
        MPIX_Stream_create(MPI_INFO_NULL, &streams[t]);
        MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[t], &comms[t]);
#else
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
#endif
    }
    pthread_barrier_init(&start_line, NULL, nthreads);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t th[MAXT];
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, run, (void *)(long)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    if (rank == 0) {
        double slowest = 0, lo = 1e300, hi = 0;
        long total = 0;
        for (int t = 0; t < nthreads; t++) {
            double r = sent[t] / elapsed[t];
            total += sent[t];
            if (elapsed[t] > slowest) slowest = elapsed[t];
            if (r < lo) lo = r;
            if (r > hi) hi = r;
        }
        printf("RESULT api=%s threads=%d window=%d seconds=%g messages=%ld total_rate=%.0f min_thread_rate=%.0f max_thread_rate=%.0f\n",
#ifdef USE_MPIX
               "mpix",
#else
               "comm_dup",
#endif
               nthreads, window, seconds, total, total / slowest, lo, hi);
        fflush(stdout);
    }
    for (int t = 0; t < nthreads; t++) {
        MPI_Comm_free(&comms[t]);
#ifdef USE_MPIX
        MPIX_Stream_free(&streams[t]);
#endif
    }
    pthread_barrier_destroy(&start_line);
    MPI_Finalize();
    return 0;
}

/* The shape of Intel's IMB-MT (one communicator per thread) in one small program:
 *   2 processes x T threads (pthreads), MPI_THREAD_MULTIPLE; thread t of rank 0 works with thread t of
 *   rank 1 on comms[t], an MPI_Comm_dup of MPI_COMM_WORLD made by the main thread, in order. Every
 *   thread runs the same metric at the same time (a local barrier between metrics), each metric for a
 *   fixed time after a short warm-up (rank 0's thread decides when to stop and says so in its messages,
 *   so a run lasts the same on a fast or a busy machine):
 *     pp8, pp512   ping-pong, MPI_Send + MPI_Recv of 8 / 512 bytes; half a round trip (IMB's t)
 *     sendrecv     MPI_Sendrecv of 8 bytes with the peer; time per call
 *     biband       64 MPI_Irecv + 64 MPI_Isend of 8 bytes (BIBAND_BYTES) each way, MPI_Waitall; MB/s both ways
 *     allreduce    MPI_Allreduce of 8 bytes (2 ints, MPI_MAX); time per call
 *   A thread's figure is its median time per iteration over ten slices of the run (see `struct
 *   clock`); latencies are the mean over the T threads (IMB-MT's t_avg), the bandwidth the sum.
 *
 * Two builds of this one file:
 *   default      comms[t] = MPI_Comm_dup(MPI_COMM_WORLD): an unmodified program, whose endpoints are
 *                whatever the MPI (or mpixstream's policy) gives it;
 *   -DUSE_MPIX   comms[t] = MPIX_Stream_comm_create(MPI_COMM_WORLD, its own MPIX_Stream): native MPICH
 *                streams (run it WITHOUT the library, with MPIR_CVAR_CH4_RESERVE_VCIS=T). MPICH's own
 *                MPI_Sendrecv hangs on a native stream communicator (its global progress skips the
 *                stream's VCI), so this build's sendrecv is MPI_Irecv + MPI_Send + MPI_Wait: what
 *                mpixstream's route does under the explicit policy.
 *
 * Usage: imb_mt T [SECONDS=0.1] [WARMUP_SECONDS=0.02] [METRICS=all] [BIBAND_BYTES=8]
 *   METRICS: all, or a comma list of pp8,pp512,sendrecv,biband,allreduce (for a profile of one); the
 *   others print 0. BIBAND_BYTES: biband's message size.
 * Rank 0 prints one line:
 *   RESULT api=comm_dup|mpix threads=T pp8_us=.. pp512_us=.. sendrecv_us=.. biband_MBps=.. allreduce_us=..
 *          pp8_us_mean=.. (and so on: the same over the whole run, IMB-MT's way) */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 64
#define WINDOW 64
enum { PP8, PP512, SENDRECV, BIBAND, ALLREDUCE, NMETRICS };
static const char *names[NMETRICS] = {"pp8_us", "pp512_us", "sendrecv_us", "biband_MBps", "allreduce_us"};

static int rank, nthreads;
static int wanted[NMETRICS];
static int bibytes = 8; /* biband's message size */
static double seconds = 0.1, warmup = 0.02;
static MPI_Comm comms[MAXT];
#ifdef USE_MPIX
static MPIX_Stream streams[MAXT];
#endif
static double per_iter[NMETRICS][MAXT];  /* seconds per iteration, per thread: the median slice */
static double mean_iter[NMETRICS][MAXT]; /* the same over the whole run */
static pthread_barrier_t line;

/* The timed loops record, on rank 0, the time per iteration of each CHUNKS-th of the duration (a
 * slice); a metric's value for a thread is the median slice. The machine this was written for is
 * shared: another job's burst stalls a few slices by milliseconds, which a mean over the run would
 * charge to whichever variant ran then (IMB-MT reports the mean; so does the _mean field). */
#define CHUNKS 10
struct clock {
    double t0, duration, slice_start;
    long slice_iters, iters;
    int nslices;
    double slices[4 * CHUNKS];
};

static void clock_start(struct clock *c, double duration) {
    c->t0 = c->slice_start = MPI_Wtime();
    c->duration = duration;
    c->slice_iters = c->iters = 0;
    c->nslices = 0;
}

/* Rank 0 decides: the duration has passed (the flag its messages carry). Called once per iteration,
 * before it; records the slice that ends here. */
static int due(struct clock *c) {
    if (rank != 0) return 0;
    double now = MPI_Wtime();
    if (c->slice_iters > 0 && now - c->slice_start >= c->duration / CHUNKS && c->nslices < 4 * CHUNKS) {
        c->slices[c->nslices++] = (now - c->slice_start) / c->slice_iters;
        c->slice_start = now;
        c->slice_iters = 0;
    }
    c->slice_iters++;
    c->iters++;
    return now - c->t0 >= c->duration;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 0: the median slice (seconds per iteration); the whole run where no slice was recorded. */
static double median_slice(struct clock *c, double elapsed) {
    if (c->nslices == 0) return elapsed / (c->iters ? c->iters : 1);
    qsort(c->slices, c->nslices, sizeof(double), by_value);
    return c->nslices % 2 ? c->slices[c->nslices / 2]
                          : (c->slices[c->nslices / 2 - 1] + c->slices[c->nslices / 2]) / 2;
}

static long pingpong(MPI_Comm c, int size, struct clock *k, char *buf) {
    int peer = 1 - rank;
    long n = 0;
    for (;;) {
        if (rank == 0) {
            buf[0] = (char)due(k);
            MPI_Send(buf, size, MPI_BYTE, peer, 0, c);
            MPI_Recv(buf, size, MPI_BYTE, peer, 0, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_BYTE, peer, 0, c, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, peer, 0, c); /* echoes the flag */
        }
        n++;
        if (buf[0]) return n;
    }
}

static long sendrecv(MPI_Comm c, struct clock *k, char *out, char *in) {
    int peer = 1 - rank;
    long n = 0;
    for (;;) {
        char last = (char)due(k);
        out[0] = last;
#ifdef USE_MPIX
        MPI_Request r;
        MPI_Irecv(in, 8, MPI_BYTE, peer, 1, c, &r);
        MPI_Send(out, 8, MPI_BYTE, peer, 1, c);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
#else
        MPI_Sendrecv(out, 8, MPI_BYTE, peer, 1, in, 8, MPI_BYTE, peer, 1, c, MPI_STATUS_IGNORE);
#endif
        n++;
        if (rank == 0 ? last : in[0]) return n;
    }
}

static long biband(MPI_Comm c, struct clock *k, char *out, char *in, MPI_Request *req) {
    int peer = 1 - rank;
    long n = 0;
    for (;;) {
        char last = (char)due(k);
        for (int w = 0; w < WINDOW; w++) out[(size_t)bibytes * w] = last;
        for (int w = 0; w < WINDOW; w++) MPI_Irecv(in + (size_t)bibytes * w, bibytes, MPI_BYTE, peer, 2, c, &req[w]);
        for (int w = 0; w < WINDOW; w++)
            MPI_Isend(out + (size_t)bibytes * w, bibytes, MPI_BYTE, peer, 2, c, &req[WINDOW + w]);
        MPI_Waitall(2 * WINDOW, req, MPI_STATUSES_IGNORE);
        n++;
        if (rank == 0 ? last : in[0]) return n;
    }
}

static long allreduce(MPI_Comm c, struct clock *k) {
    long n = 0;
    for (;;) {
        int mine[2] = {due(k), 0}, all[2];
        MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, c);
        n++;
        if (all[0]) return n;
    }
}

static long metric(int m, MPI_Comm c, struct clock *k, char *out, char *in, MPI_Request *req) {
    switch (m) {
    case PP8: return pingpong(c, 8, k, out);
    case PP512: return pingpong(c, 512, k, out);
    case SENDRECV: return sendrecv(c, k, out, in);
    case BIBAND: return biband(c, k, out, in, req);
    default: return allreduce(c, k);
    }
}

static void *run(void *arg) {
    int t = (int)(long)arg;
    size_t bytes = (size_t)bibytes * WINDOW + 512;
    char *out = calloc(bytes, 1), *in = calloc(bytes, 1);
    MPI_Request req[2 * WINDOW];
    struct clock k;
    for (int m = 0; m < NMETRICS; m++) {
        if (!wanted[m]) continue;
        pthread_barrier_wait(&line);
        clock_start(&k, warmup);
        metric(m, comms[t], &k, out, in, req);
        /* Every thread of this rank has warmed up (each pair handshakes on its own communicator). */
        pthread_barrier_wait(&line);
        clock_start(&k, seconds);
        long n = metric(m, comms[t], &k, out, in, req);
        double elapsed = MPI_Wtime() - k.t0;
        per_iter[m][t] = median_slice(&k, elapsed);
        mean_iter[m][t] = elapsed / n;
    }
    free(out);
    free(in);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    nthreads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) seconds = atof(argv[2]);
    if (argc > 3) warmup = atof(argv[3]);
    for (int m = 0; m < NMETRICS; m++) {
        char name[32];
        snprintf(name, sizeof name, "%s", names[m]);
        *strchr(name, '_') = 0;
        wanted[m] = argc <= 4 || !strcmp(argv[4], "all") || strstr(argv[4], name) != NULL;
    }
    if (argc > 5) bibytes = atoi(argv[5]);
    if (size != 2 || provided < MPI_THREAD_MULTIPLE || nthreads < 1 || nthreads > MAXT || bibytes < 1) {
        if (rank == 0) fprintf(stderr, "imb_mt: 2 ranks, MPI_THREAD_MULTIPLE, 1..%d threads\n", MAXT);
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
    pthread_barrier_init(&line, NULL, nthreads);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t th[MAXT];
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, run, (void *)(long)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    if (rank == 0) {
        printf("RESULT api=%s threads=%d",
#ifdef USE_MPIX
               "mpix",
#else
               "comm_dup",
#endif
               nthreads);
        for (int mean = 0; mean < 2; mean++)
            for (int m = 0; m < NMETRICS; m++) {
                double v = 0;
                for (int t = 0; t < nthreads && wanted[m]; t++) {
                    double x = mean ? mean_iter[m][t] : per_iter[m][t];
                    v += m == BIBAND ? 2.0 * WINDOW * bibytes / x / 1e6 /* MB/s, both ways */
                                     : x * 1e6 / (m <= PP512 ? 2 : 1) / nthreads;
                }
                printf(" %s%s=%.3f", names[m], mean ? "_mean" : "", v);
            }
        printf("\n");
        fflush(stdout);
    }
    /* The streams stay: MPICH 5.0.2 keeps a freed stream communicator's stream referenced, so its
     * MPIX_Stream_free would fail (docs/native-defects.md); MPI_Finalize releases them. */
    for (int t = 0; t < nthreads; t++) MPI_Comm_free(&comms[t]);
    pthread_barrier_destroy(&line);
    MPI_Finalize();
    return 0;
}

/* Stress of multiplex matching: MPIXTEST_MESSAGES small messages in total (default 10^6) over random
 * (destination process, source index, destination index, tag) choices, sent with MPIX_Stream_isend in
 * rounds. Every process replays the other processes' random streams, so it knows exactly what it will
 * receive, and receives each round in one of three ways:
 *   0: full wildcards (MPI_ANY_SOURCE, MPI_ANY_TAG, MPIX_ANY_INDEX) with blocking receives;
 *   1: specific receives (source, tag, source index), posted in a shuffled order, completed together;
 *   2: MPI_ANY_SOURCE + a given tag + MPIX_ANY_INDEX, shuffled, completed together.
 * Checks: every message received exactly once (per-class counts, and the global total), and MPI order:
 * in posting order, each class (source process, source index, destination index, tag) arrives in
 * sequence, and with full wildcards each pair (source process, source index) -> destination index does.
 * Stream counts differ between processes (2, 3, 4, 2, ...); index 1 is MPIX_STREAM_NULL.
 * One thread drives every index, so this runs on the implicit pool (Debian, and MPIXSTREAM_BACKEND=serial
 * on MPICH 5): on the streams' own endpoints a blocking receive on one index progresses only that
 * index's VCI, while this thread's sends from the others wait in MPICH's queues (docs/multiplex.md,
 * "Progress"); tests/c/multiplex_alltoall.c runs the streams' endpoints with one thread per index. */
#include "mpixtest.h"

enum { KMAX = 4, T = 8, BATCH = 4096, WORDS = 6 };
static int rank, size;

/* CHECK that stops printing after 20 failures (a broken run would print a million lines). */
#define SCHECK(cond, ...)                                                                  \
    do {                                                                                   \
        if (mpixtest_errs < 20) {                                                          \
            CHECK(cond, __VA_ARGS__);                                                      \
        } else if (!(cond)) {                                                              \
            mpixtest_errs++;                                                               \
        }                                                                                  \
    } while (0)

static int count_of(int r) { return 2 + r % 3; }

typedef struct {
    unsigned long long s;
} rng_t;
static unsigned long long next64(rng_t *r) {
    /* xorshift64* */
    unsigned long long x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

typedef struct {
    int dest, si, di, tag;
} choice_t;

static choice_t draw(rng_t *r, int src) {
    unsigned long long v = next64(r);
    choice_t c;
    c.dest = size == 1 ? src : (src + 1 + (int)(v % (unsigned)(size - 1))) % size;
    v >>= 16;
    c.si = (int)(v % (unsigned)count_of(src));
    v >>= 8;
    c.di = (int)(v % (unsigned)count_of(c.dest));
    v >>= 8;
    c.tag = (int)(v % T);
    return c;
}

/* Class and pair indices: (src process, si, di, tag) for a given destination process. */
static size_t cls(int q, int si, int di, int tag) { return (((size_t)q * KMAX + si) * KMAX + di) * T + tag; }
static size_t pair(int q, int si, int di) { return ((size_t)q * KMAX + si) * KMAX + di; }

/* Which messages of a pair have been received: a growable bitmap and the oldest one not received. */
typedef struct {
    unsigned char *got;
    int cap, low;
} pairlog_t;
static void pair_mark(pairlog_t *p, int seq) {
    if (seq >= p->cap) {
        int cap = p->cap ? p->cap : 1024;
        while (cap <= seq) cap *= 2;
        p->got = realloc(p->got, cap);
        memset(p->got + p->cap, 0, cap - p->cap);
        p->cap = cap;
    }
    p->got[seq] = 1;
    while (p->low < p->cap && p->got[p->low]) p->low++;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    long total = env_int("MPIXTEST_MESSAGES", 1000000);
    long per = total / size; /* messages each process sends */
    double t0 = MPI_Wtime();

    int n = count_of(rank);
    MPIX_Stream streams[KMAX];
    for (int i = 0; i < n; i++) {
        streams[i] = MPIX_STREAM_NULL;
        if (i != 1) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i])); /* index 1: conventional */
    }
    MPI_Comm mx;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, n, streams, &mx));

    /* sender state */
    rng_t mine = {0x9E3779B97F4A7C15ULL * (rank + 1)};
    int *send_cls = calloc((size_t)size * KMAX * KMAX * T, sizeof(int)); /* by (dest, si, di, tag) */
    int *send_pair = calloc((size_t)size * KMAX * KMAX, sizeof(int));
    int *sbuf = malloc(sizeof(int) * WORDS * BATCH);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * BATCH);
    MPI_Status *sst = malloc(sizeof(MPI_Status) * BATCH);

    /* receiver state: replay of every other process's stream */
    rng_t *replay = malloc(sizeof(rng_t) * size);
    for (int q = 0; q < size; q++) replay[q].s = 0x9E3779B97F4A7C15ULL * (q + 1);
    int *exp_cls = calloc((size_t)size * KMAX * KMAX * T, sizeof(int)); /* sent to me so far, by class */
    int *got_cls = calloc((size_t)size * KMAX * KMAX * T, sizeof(int)); /* received, by class */
    pairlog_t *got_pair = calloc((size_t)size * KMAX * KMAX, sizeof(pairlog_t));
    size_t cap = (size_t)BATCH * size;
    choice_t *want = malloc(sizeof(choice_t) * cap); /* .dest holds the source process */
    int *rbuf = malloc(sizeof(int) * WORDS * cap);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * cap);
    MPI_Status *rst = malloc(sizeof(MPI_Status) * cap);
    int *order = malloc(sizeof(int) * cap);
    rng_t shuffle = {0xD1B54A32D192ED03ULL ^ (unsigned long long)(rank + 7)};
    long received = 0;

    long rounds = (per + BATCH - 1) / BATCH;
    for (long r = 0; r < rounds; r++) {
        long lo = r * BATCH, hi = lo + BATCH < per ? lo + BATCH : per;
        /* send this round */
        int ns = 0;
        for (long j = lo; j < hi; j++, ns++) {
            choice_t c = draw(&mine, rank);
            int *m = &sbuf[ns * WORDS];
            m[0] = rank;
            m[1] = c.si;
            m[2] = c.di;
            m[3] = c.tag;
            m[4] = send_cls[cls(c.dest, c.si, c.di, c.tag)]++;
            m[5] = send_pair[pair(c.dest, c.si, c.di)]++;
            OK(MPIX_Stream_isend(m, WORDS, MPI_INT, c.dest, c.tag, mx, c.si, c.di, &sreq[ns]));
        }
        /* what I receive this round */
        size_t nw = 0;
        for (int q = 0; q < size; q++) {
            if (q == rank) continue;
            for (long j = lo; j < hi; j++) {
                choice_t c = draw(&replay[q], q);
                if (c.dest != rank) continue;
                c.dest = q;
                want[nw++] = c;
                exp_cls[cls(q, c.si, c.di, c.tag)]++;
            }
        }
        int mode = (int)(r % 3);
        if (mode == 0) {
            for (size_t k = 0; k < nw; k++) {
                int *m = &rbuf[k * WORDS];
                OK(MPIX_Stream_recv(m, WORDS, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, want[k].di,
                                    &rst[k]));
                int q = m[0], si = m[1], di = m[2], tag = m[3];
                if (q < 0 || q >= size || si < 0 || si >= KMAX || di != want[k].di || tag < 0 || tag >= T) {
                    SCHECK(0, "round %ld: bad payload %d %d %d %d", r, q, si, di, tag);
                    continue;
                }
                SCHECK(rst[k].MPI_SOURCE == q && rst[k].MPI_TAG == tag, "status %d/%d vs %d/%d", rst[k].MPI_SOURCE,
                      rst[k].MPI_TAG, q, tag);
                SCHECK(m[4] == got_cls[cls(q, si, di, tag)], "class order: %d, expected %d", m[4],
                      got_cls[cls(q, si, di, tag)]);
                /* a full wildcard takes the oldest message of the pair not received yet */
                SCHECK(m[5] == got_pair[pair(q, si, di)].low, "pair order (%d/%d -> %d): %d, expected %d", q, si, di,
                       m[5], got_pair[pair(q, si, di)].low);
                got_cls[cls(q, si, di, tag)]++;
                if (m[5] >= 0) pair_mark(&got_pair[pair(q, si, di)], m[5]);
            }
        } else {
            for (size_t k = 0; k < nw; k++) order[k] = (int)k;
            for (size_t k = nw; k > 1; k--) {
                size_t j = next64(&shuffle) % k;
                int t = order[k - 1];
                order[k - 1] = order[j];
                order[j] = t;
            }
            for (size_t k = 0; k < nw; k++) {
                choice_t c = want[order[k]];
                if (mode == 1)
                    OK(MPIX_Stream_irecv(&rbuf[k * WORDS], WORDS, MPI_INT, c.dest, c.tag, mx, c.si, c.di, &rreq[k]));
                else
                    OK(MPIX_Stream_irecv(&rbuf[k * WORDS], WORDS, MPI_INT, MPI_ANY_SOURCE, c.tag, mx, MPIX_ANY_INDEX,
                                         c.di, &rreq[k]));
            }
            OK(MPI_Waitall((int)nw, rreq, rst));
            for (size_t k = 0; k < nw; k++) { /* posting order */
                int *m = &rbuf[k * WORDS];
                choice_t c = want[order[k]];
                int q = m[0], si = m[1], di = m[2], tag = m[3];
                if (q < 0 || q >= size || si < 0 || si >= KMAX || di != c.di || tag != c.tag ||
                    (mode == 1 && (q != c.dest || si != c.si))) {
                    SCHECK(0, "round %ld mode %d: got %d/%d/%d/%d for %d/%d/%d/%d", r, mode, q, si, di, tag, c.dest,
                          c.si, c.di, c.tag);
                    continue;
                }
                SCHECK(rst[k].MPI_SOURCE == q && rst[k].MPI_TAG == tag, "status %d/%d vs %d/%d", rst[k].MPI_SOURCE,
                      rst[k].MPI_TAG, q, tag);
                SCHECK(m[4] == got_cls[cls(q, si, di, tag)], "mode %d class order: %d, expected %d", mode, m[4],
                      got_cls[cls(q, si, di, tag)]);
                got_cls[cls(q, si, di, tag)]++;
                if (m[5] >= 0) pair_mark(&got_pair[pair(q, si, di)], m[5]);
            }
        }
        received += (long)nw;
        OK(MPI_Waitall(ns, sreq, sst));
        /* Rounds are separated: otherwise a wildcard round could take messages of the next round and
         * leave a later specific round waiting for messages that the round after it would send. */
        OK(MPI_Barrier(mx));
    }
    /* exactly once: every class complete, and the global totals agree */
    size_t ncls = (size_t)size * KMAX * KMAX * T;
    long missing = 0;
    for (size_t i = 0; i < ncls; i++) missing += exp_cls[i] != got_cls[i];
    CHECK(missing == 0, "%ld classes incomplete", missing);
    long sent = per, all_sent = 0, all_received = 0;
    MPI_Allreduce(&sent, &all_sent, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&received, &all_received, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all_sent == all_received, "%ld sent, %ld received", all_sent, all_received);
    if (rank == 0)
        printf("%ld messages over %d processes in %.2f s (%.0f msg/s)\n", all_received, size, MPI_Wtime() - t0,
               all_received / (MPI_Wtime() - t0));

    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < n; i++)
        if (streams[i] != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&streams[i]));
    free(send_cls);
    free(send_pair);
    free(sbuf);
    free(sreq);
    free(sst);
    free(replay);
    free(exp_cls);
    free(got_cls);
    for (size_t i = 0; i < (size_t)size * KMAX * KMAX; i++) free(got_pair[i].got);
    free(got_pair);
    free(want);
    free(rbuf);
    free(rreq);
    free(rst);
    free(order);
    return mpixtest_finish();
}

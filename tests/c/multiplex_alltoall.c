/* All-to-all on a multiplex communicator with MPI_THREAD_MULTIPLE, one thread per stream: every index of
 * every process sends N messages to every index of every other process (stream counts differ between
 * processes). Each thread receives on its own index: first the first R messages of every (process,
 * source index) pair with specific receives (source, tag, source index) posted in reverse pair order,
 * then the rest with MPI_ANY_SOURCE, MPI_ANY_TAG, MPIX_ANY_INDEX. Payloads (64 ints) are checked, and
 * every pair must arrive complete and in order.
 *   MPIXTEST_MESSAGES: N per (source index, destination index) pair (default 200). */
#include "mpixtest.h"
#include <pthread.h>

enum { LEN = 64, R = 4 };
static int rank, size, nmsg;
static MPI_Comm mx;
static int *counts; /* stream count of every process */

static int count_of(int r) { return 2 + r % 2; }

static int word(int src, int si, int dst, int di, int seq, int k) {
    return ((src * 8 + si) * 8 + dst) * 8 + di + seq * 4096 + k * 7;
}

static void fill(int *b, int src, int si, int dst, int di, int seq) {
    b[0] = src;
    b[1] = si;
    b[2] = seq;
    for (int k = 3; k < LEN; k++) b[k] = word(src, si, dst, di, seq, k);
}

static int check(const int *b, int dst, int di) {
    for (int k = 3; k < LEN; k++)
        if (b[k] != word(b[0], b[1], dst, di, b[2], k)) return 0;
    return 1;
}

static void *worker(void *p) {
    int me = (int)(long)p; /* my stream index */
    /* sends: to every index of every other process */
    int targets = 0;
    for (int q = 0; q < size; q++)
        if (q != rank) targets += counts[q];
    long nsend = (long)targets * nmsg;
    int *sbuf = malloc(sizeof(int) * LEN * nsend);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * nsend);
    long s = 0;
    for (int seq = 0; seq < nmsg; seq++)
        for (int q = 0; q < size; q++) {
            if (q == rank) continue;
            for (int di = 0; di < counts[q]; di++, s++) {
                fill(&sbuf[s * LEN], rank, me, q, di, seq);
                OK(MPIX_Stream_isend(&sbuf[s * LEN], LEN, MPI_INT, q, seq % 3, mx, me, di, &sreq[s]));
            }
        }

    /* receives on my index: pairs (q, si) for every other process q */
    int pairs = 0;
    for (int q = 0; q < size; q++)
        if (q != rank) pairs += counts[q];
    int *next = calloc((size_t)size * 8, sizeof(int));
    int r = nmsg < R ? nmsg : R;
    int *rbuf = malloc(sizeof(int) * LEN * (pairs * r + 1));
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (pairs * r + 1));
    MPI_Status *rst = malloc(sizeof(MPI_Status) * (pairs * r + 1));
    int *pq = malloc(sizeof(int) * pairs * r), *psi = malloc(sizeof(int) * pairs * r);
    int n = 0;
    for (int q = size - 1; q >= 0; q--) {
        if (q == rank) continue;
        for (int si = counts[q] - 1; si >= 0; si--)
            for (int seq = 0; seq < r; seq++, n++) {
                pq[n] = q;
                psi[n] = si;
                OK(MPIX_Stream_irecv(&rbuf[n * LEN], LEN, MPI_INT, q, seq % 3, mx, si, me, &rreq[n]));
            }
    }
    OK(MPI_Waitall(n, rreq, rst));
    for (int k = 0; k < n; k++) {
        int *b = &rbuf[k * LEN];
        CHECK(b[0] == pq[k] && b[1] == psi[k] && b[2] == next[pq[k] * 8 + psi[k]] && check(b, rank, me),
              "index %d, specific receive %d from %d/%d: got %d/%d seq %d (expected %d)", me, k, pq[k], psi[k], b[0],
              b[1], b[2], next[pq[k] * 8 + psi[k]]);
        CHECK(rst[k].MPI_SOURCE == pq[k] && rst[k].MPI_TAG == b[2] % 3, "status %d/%d", rst[k].MPI_SOURCE,
              rst[k].MPI_TAG);
        next[pq[k] * 8 + psi[k]]++;
    }
    long rest = (long)pairs * (nmsg - r);
    int buf[LEN];
    for (long k = 0; k < rest; k++) {
        MPI_Status st;
        OK(MPIX_Stream_recv(buf, LEN, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, me, &st));
        int q = buf[0], si = buf[1];
        if (q < 0 || q >= size || q == rank || si < 0 || si >= counts[q]) {
            CHECK(0, "index %d: bad payload %d/%d", me, q, si);
            continue;
        }
        CHECK(buf[2] == next[q * 8 + si] && check(buf, rank, me), "index %d from %d/%d: seq %d, expected %d", me, q,
              si, buf[2], next[q * 8 + si]);
        CHECK(st.MPI_SOURCE == q && st.MPI_TAG == buf[2] % 3, "status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
        next[q * 8 + si] = buf[2] + 1;
    }
    for (int q = 0; q < size; q++)
        if (q != rank)
            for (int si = 0; si < counts[q]; si++)
                CHECK(next[q * 8 + si] == nmsg, "index %d: %d of %d messages from %d/%d", me, next[q * 8 + si], nmsg, q,
                      si);
    MPI_Status *sst = malloc(sizeof(MPI_Status) * (nsend > 0 ? nsend : 1));
    OK(MPI_Waitall(nsend, sreq, sst));
    free(sst);
    free(sbuf);
    free(sreq);
    free(next);
    free(rbuf);
    free(rreq);
    free(rst);
    free(pq);
    free(psi);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(provided == MPI_THREAD_MULTIPLE, "no MPI_THREAD_MULTIPLE");
    nmsg = env_int("MPIXTEST_MESSAGES", 200);
    counts = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) counts[q] = count_of(q);

    int n = counts[rank];
    MPIX_Stream streams[8];
    for (int i = 0; i < n; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, n, streams, &mx));
    pthread_t th[8];
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, worker, (void *)(long)i);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    OK(MPI_Barrier(mx));
    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < n; i++) OK(MPIX_Stream_free(&streams[i]));
    free(counts);
    return mpixtest_finish();
}

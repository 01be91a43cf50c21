/* Reproducer, WITHOUT mpixstream, of a defect of native MPIX streams in PyPI MPICH 4.1.3: 2 ranks, T
 * threads each (default 3), thread t owning stream t. The communicators are those mpixstream's multiplex
 * communicators use at 2 ranks (shim/src/multiplex/endpoints.rs), made with MPICH's own
 * MPIX_Stream_comm_create:
 *   D_i       (every rank attaches its stream i): messages from index i to index i;
 *   C_{i,j}   (i != j; rank 0 attaches stream i, rank 1 stream j): messages between rank 0's index i and
 *             rank 1's index j, both ways.
 * Each thread drives only the streams it owns: every communicator on which its rank attached its stream.
 * Thread t sends N messages (64 ints, tag seq % 3) to every index of the other rank (MPI_Isend, all at
 * once), then receives on its index: first the first R of every source index with named MPI_Irecvs
 * posted in reverse pair order and one MPI_Waitall, then the rest by polling MPI_Improbe (after an
 * MPIX_Stream_progress of its stream: global progress skips a reserved VCI) on its communicators, each
 * matched message taken with MPI_Mrecv. Payloads, statuses and per-pair order are checked.
 * "same": only D_i (each thread sends to the peer's index t alone).
 *   stream_pairs [cross|same] [N]   prints "rank R completed" (or "... with N WRONG results");
 *   needs MPIR_CVAR_CH4_RESERVE_VCIS >= T; run: tests/mpich_builds/run.sh */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef T
#define T 3
#endif
enum { LEN = 64, R = 4 };
static int rank, peer, nmsg = 200, cross = 1, bad;
static MPIX_Stream stream[T];
static MPI_Comm d_comm[T], c_comm[T][T]; /* c_comm[i][j]: rank 0's index i, rank 1's index j */

/* The communicator of a message from (rank a, index si) to (rank b, index di). */
static MPI_Comm route(int a, int si, int di) {
    if (si == di) return d_comm[si];
    return a == 0 ? c_comm[si][di] : c_comm[di][si];
}

static int word(int src, int si, int di, int seq, int k) { return ((src * 8 + si) * 8 + di) * 8 + seq * 4096 + k * 7; }

static void fail(const char *what, int t, int si, int seq, int got_si, int got_seq, int src, int tag) {
    __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&bad, __ATOMIC_RELAXED) <= 5)
        fprintf(stderr, "rank %d index %d: %s: expected %d/seq %d, got %d/seq %d, status source %d tag %d\n", rank, t,
                what, si, seq, got_si, got_seq, src, tag);
}

static int payload_ok(const int *b, int di) {
    for (int k = 3; k < LEN; k++)
        if (b[k] != word(b[0], b[1], di, b[2], k)) return 0;
    return b[0] == peer;
}

static void *worker(void *arg) {
    int t = (int)(long)arg, lo = cross ? 0 : t, hi = cross ? T : t + 1, pairs = hi - lo;
    long nsend = (long)pairs * nmsg;
    int *sbuf = malloc(sizeof(int) * LEN * nsend);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * nsend);
    long s = 0;
    for (int seq = 0; seq < nmsg; seq++)
        for (int di = lo; di < hi; di++, s++) {
            int *b = &sbuf[s * LEN];
            b[0] = rank, b[1] = t, b[2] = seq;
            for (int k = 3; k < LEN; k++) b[k] = word(rank, t, di, seq, k);
            MPI_Isend(b, LEN, MPI_INT, peer, seq % 3, route(rank, t, di), &sreq[s]);
        }
    /* Named receives, reverse pair order: every (source index, seq < R). */
    int next[T] = {0}, n = 0;
    int *rbuf = malloc(sizeof(int) * LEN * pairs * R), *rsi = malloc(sizeof(int) * pairs * R);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * pairs * R);
    MPI_Status *rst = malloc(sizeof(MPI_Status) * pairs * R);
    for (int si = hi - 1; si >= lo; si--)
        for (int seq = 0; seq < R; seq++, n++) {
            rsi[n] = si;
            MPI_Irecv(&rbuf[n * LEN], LEN, MPI_INT, peer, seq % 3, route(peer, si, t), &rreq[n]);
        }
    int rc = MPI_Waitall(n, rreq, rst);
    if (rc != MPI_SUCCESS) fail("MPI_Waitall failed", t, rc, 0, 0, 0, 0, 0);
    for (int k = 0; k < n; k++) {
        int *b = &rbuf[k * LEN], si = rsi[k];
        if (b[1] != si || b[2] != next[si] || !payload_ok(b, t) || rst[k].MPI_SOURCE != peer ||
            rst[k].MPI_TAG != next[si] % 3)
            fail("named receive", t, si, next[si], b[1], b[2], rst[k].MPI_SOURCE, rst[k].MPI_TAG);
        next[si]++;
    }
    /* The rest: MPI_Improbe on every communicator this thread receives on. */
    MPI_Comm mine[T];
    for (int si = lo; si < hi; si++) mine[si - lo] = route(peer, si, t);
    long rest = (long)pairs * (nmsg - R);
    int buf[LEN];
    for (int c = 0; rest > 0; c = (c + 1) % pairs) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        MPIX_Stream_progress(stream[t]);
        rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, mine[c], &flag, &msg, &st);
        if (rc != MPI_SUCCESS) { fail("MPI_Improbe failed", t, rc, 0, 0, 0, 0, 0); break; }
        if (!flag) continue;
        MPI_Status st2;
        rc = MPI_Mrecv(buf, LEN, MPI_INT, &msg, &st2);
        if (rc != MPI_SUCCESS) { fail("MPI_Mrecv failed", t, rc, 0, 0, 0, 0, 0); break; }
        int si = buf[1];
        if (si < lo || si >= hi) { fail("bad payload", t, -1, -1, buf[1], buf[2], st.MPI_SOURCE, st.MPI_TAG); rest--; continue; }
        if (buf[2] != next[si] || !payload_ok(buf, t) || st.MPI_SOURCE != peer || st.MPI_TAG != buf[2] % 3 ||
            st2.MPI_SOURCE != peer || st2.MPI_TAG != buf[2] % 3 || route(peer, si, t) != mine[c])
            fail("probed receive", t, si, next[si], si, buf[2], st.MPI_SOURCE, st.MPI_TAG);
        next[si] = buf[2] + 1;
        rest--;
    }
    rc = MPI_Waitall(nsend, sreq, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) fail("MPI_Waitall of the sends failed", t, rc, 0, 0, 0, 0, 0);
    free(sbuf), free(sreq), free(rbuf), free(rsi), free(rreq), free(rst);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || provided != MPI_THREAD_MULTIPLE) {
        printf("rank %d: needs 2 ranks and MPI_THREAD_MULTIPLE\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    peer = 1 - rank;
    cross = !(argc > 1 && !strcmp(argv[1], "same"));
    if (argc > 2) nmsg = atoi(argv[2]);
    if (nmsg < R) nmsg = R;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int t = 0; t < T; t++)
        if (MPIX_Stream_create(MPI_INFO_NULL, &stream[t]) != MPI_SUCCESS) {
            printf("rank %d: MPIX_Stream_create failed (set MPIR_CVAR_CH4_RESERVE_VCIS=%d)\n", rank, T);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    for (int i = 0; i < T; i++) MPIX_Stream_comm_create(MPI_COMM_WORLD, stream[i], &d_comm[i]);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            if (i != j) MPIX_Stream_comm_create(MPI_COMM_WORLD, stream[rank == 0 ? i : j], &c_comm[i][j]);
    pthread_t th[T];
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (bad) printf("rank %d completed with %d WRONG results\n", rank, bad);
    else printf("rank %d completed\n", rank);
    MPI_Finalize();
    return 0;
}

/* Buffered sends on communicators the explicit policy made (MPI_Comm_dup of MPI_COMM_WORLD; on MPICH >= 4.1
 * native stream communicators), MPI_THREAD_MULTIPLE, one thread per communicator (3 threads). Ranks pair
 * up (0-1, 2-3); in each phase one side of a pair sends and the other receives, then they swap. Each
 * sending thread makes small (eager) messages with MPI_Bsend, MPI_Ibsend + MPI_Wait and MPI_Bsend_init +
 * MPI_Start + MPI_Wait in turn, then large (rendezvous, 512 KiB) ones with MPI_Bsend_c and MPI_Ibsend_c,
 * then an MPI_Bsend followed by an MPI_Send to the same peer with the same tag (they must match in that
 * order). The attached buffer holds one large message and a few small ones, so the three threads' large
 * messages must wait for space. Every received value is checked; MPI_Buffer_detach at the end returns
 * the attached buffer. A message larger than the buffer, and a buffered send with no buffer attached,
 * fail with MPI_ERR_BUFFER. After the threads, each pair exchanges buffered sends both ways before
 * receiving (no rank may wait in its buffered send for the other's receive).
 *
 * Native MPICH fails a buffered send with MPI_ERR_BUFFER instead of waiting when the buffer is full
 * after one turn of its global progress; on a native stream communicator that progress never completes
 * the stream's earlier messages, so the buffer filled up for good (or, where a thread returned from its
 * last MPI_Bsend, the receiver waited forever). The lean library buffers such messages itself and
 * waits for space (shim/src/native_fixes/buffered/). With MPIXTEST_BSEND_ROUTED=1 (the native rows) a fitting
 * message must never be refused; elsewhere MPICH's own refusal (MPI_ERR_BUFFER while the buffer is
 * full) is retried here, as MPICH's behaviour, not a failure. Plain MPICH 5.0.2 (no library, no streams)
 * fails this program in 2 runs of 3 ("invalid error code ... Ring ids do not match" from concurrent
 * refused buffered sends, then wrong data or a hang): its row without the policy is Debian's only. */
#include "mpixtest.h"
#include <pthread.h>

#define NT 3
#define SMALL 4                 /* ints per small message */
#define LARGE (128 * 1024)      /* ints per large message: 512 KiB, past every eager limit */
#define ROUNDS 60               /* small messages per thread and phase */
#define LROUNDS 4               /* large messages per thread and phase */

static int rank, size, peer, routed;
static MPI_Comm comms[NT];

/* A buffered send by `call`; MPICH's own MPI_ERR_BUFFER for a full buffer is retried unless routed. */
#define BUFFERED(call)                                                                             \
    do {                                                                                           \
        int rc_;                                                                                   \
        while ((rc_ = (call)) != MPI_SUCCESS && err_class(rc_) == MPI_ERR_BUFFER && !routed)       \
            ;                                                                                      \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d (%s)", #call, rc_, err_text(rc_));               \
    } while (0)

static int small_value(int t, int phase, int i, int k) { return t * 1000000 + phase * 100000 + i * 10 + k; }
static int large_value(int t, int phase, int j, long k) { return (int)((t * 7 + phase * 3 + j) * 1000 + k % 997); }

static void *run(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm c = comms[t];
    int *large = malloc(sizeof(int) * LARGE);
    for (int phase = 0; phase < 2; phase++) {
        int sender = (rank % 2) == phase;
        if (sender) {
            int out[SMALL], pout[SMALL];
            MPI_Request preq, req;
            OK(MPI_Bsend_init(pout, SMALL, MPI_INT, peer, 1, c, &preq));
            for (int i = 0; i < ROUNDS; i++) {
                int how = i % 3;
                int *buf = how == 2 ? pout : out;
                for (int k = 0; k < SMALL; k++) buf[k] = small_value(t, phase, i, k);
                if (how == 0) {
                    BUFFERED(MPI_Bsend(out, SMALL, MPI_INT, peer, 1, c));
                } else if (how == 1) {
                    BUFFERED(MPI_Ibsend(out, SMALL, MPI_INT, peer, 1, c, &req));
                    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                } else {
                    BUFFERED(MPI_Start(&preq));
                    OK(MPI_Wait(&preq, MPI_STATUS_IGNORE));
                }
                for (int k = 0; k < SMALL; k++) buf[k] = -1; /* the message was copied */
            }
            OK(MPI_Request_free(&preq));
            for (int j = 0; j < LROUNDS; j++) {
                for (long k = 0; k < LARGE; k++) large[k] = large_value(t, phase, j, k);
                if (j % 2 == 0) {
                    BUFFERED(MPI_Bsend_c(large, LARGE, MPI_INT, peer, 2, c));
                } else {
                    BUFFERED(MPI_Ibsend_c(large, LARGE, MPI_INT, peer, 2, c, &req));
                    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                }
            }
            /* A buffered send, then a standard one, same peer and tag: they match in this order. */
            int first = small_value(t, phase, 7, 7), second = first + 1;
            BUFFERED(MPI_Bsend(&first, 1, MPI_INT, peer, 3, c));
            OK(MPI_Send(&second, 1, MPI_INT, peer, 3, c));
        } else {
            int in[SMALL];
            for (int i = 0; i < ROUNDS; i++) {
                OK(MPI_Recv(in, SMALL, MPI_INT, peer, 1, c, MPI_STATUS_IGNORE));
                for (int k = 0; k < SMALL; k++)
                    CHECK(in[k] == small_value(t, phase, i, k), "thread %d phase %d small %d[%d]: %d", t, phase, i,
                          k, in[k]);
            }
            for (int j = 0; j < LROUNDS; j++) {
                MPI_Status st;
                OK(MPI_Recv(large, LARGE, MPI_INT, peer, 2, c, &st));
                int n = -1;
                MPI_Get_count(&st, MPI_INT, &n);
                CHECK(n == LARGE, "thread %d large %d: count %d", t, j, n);
                long bad = 0;
                for (long k = 0; k < LARGE; k++) bad += large[k] != large_value(t, phase, j, k);
                CHECK(bad == 0, "thread %d phase %d large %d: %ld wrong ints", t, phase, j, bad);
            }
            int a = -1, b = -1;
            OK(MPI_Recv(&a, 1, MPI_INT, peer, 3, c, MPI_STATUS_IGNORE));
            OK(MPI_Recv(&b, 1, MPI_INT, peer, 3, c, MPI_STATUS_IGNORE));
            int first = small_value(t, phase, 7, 7);
            CHECK(a == first && b == first + 1, "thread %d phase %d: order %d then %d, expected %d then %d", t,
                  phase, a, b, first, first + 1);
        }
    }
    free(large);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    routed = env_int("MPIXTEST_BSEND_ROUTED", 0);
    if (provided < MPI_THREAD_MULTIPLE || size % 2 != 0) {
        CHECK(0, "needs MPI_THREAD_MULTIPLE (got %d) and an even number of ranks (got %d)", provided, size);
        return mpixtest_finish();
    }
    if (routed && !policy_gives_streams()) {
        /* MPICH 4.1 (mpixtest.h): the policy leaves the communicators implicit, so nothing is routed, and
         * what follows would test MPICH's own buffered sends from threads, which corrupt its state as on
         * plain 5.0.2 (above; 4.1.3: "Ring ids do not match" in 2 runs of 2). Only the policy's part. */
        MPI_Comm c;
        MPIX_Stream s = MPIX_STREAM_NULL;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        OK(MPIX_Comm_get_stream(c, 0, &s));
        CHECK(s == MPIX_STREAM_NULL, "a policy communicator carries a stream where the policy gives none");
        if (rank == 0) printf("policy_bsend: no policy streams on this MPICH; routed buffered sends not run\n");
        OK(MPI_Comm_free(&c));
        return mpixtest_finish();
    }
    peer = rank ^ 1;
    /* MPICH reports MPI_Start's errors (a persistent buffered send refused for space) through
     * MPI_COMM_WORLD's handler, the others through the communicator's. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (int t = 0; t < NT; t++) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
        OK(MPI_Comm_set_errhandler(comms[t], MPI_ERRORS_RETURN));
        MPIX_Stream s = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(comms[t], 0, &s));
        if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "policy communicator %d carries no stream", t);
    }

    /* No buffer attached yet. */
    int one = 1;
    EXPECT_ERR(MPI_Bsend(&one, 1, MPI_INT, peer, 9, comms[0]), MPI_ERR_BUFFER, "");

    int bytes = (int)(sizeof(int) * LARGE) + MPI_BSEND_OVERHEAD + 4 * ((int)sizeof(int) * SMALL + MPI_BSEND_OVERHEAD);
    char *buffer = malloc(bytes);
    OK(MPI_Buffer_attach(buffer, bytes));

    /* A message that can never fit. */
    int *huge = calloc(2 * LARGE, sizeof(int));
    EXPECT_ERR(MPI_Bsend(huge, 2 * LARGE, MPI_INT, peer, 9, comms[0]), MPI_ERR_BUFFER, "");
    free(huge);

    pthread_t th[NT];
    for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, run, (void *)(long)t);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);

    /* Both sides of each pair send first, then receive (the classic use of a buffered send): a small and a
     * 16 KiB message (past MPICH's shared-memory cell and single-copy threshold). */
    for (int round = 0; round < 4; round++) {
        int n = round % 2 ? 4096 : 1;
        int *mine = malloc(sizeof(int) * n), *theirs = malloc(sizeof(int) * n);
        for (int k = 0; k < n; k++) mine[k] = rank * 100000 + round * 1000 + k % 1000;
        BUFFERED(MPI_Bsend(mine, n, MPI_INT, peer, 4, comms[0]));
        OK(MPI_Recv(theirs, n, MPI_INT, peer, 4, comms[0], MPI_STATUS_IGNORE));
        long bad = 0;
        for (int k = 0; k < n; k++) bad += theirs[k] != peer * 100000 + round * 1000 + k % 1000;
        CHECK(bad == 0, "exchange round %d: %ld wrong ints", round, bad);
        free(mine);
        free(theirs);
    }

    void *back = NULL;
    int back_bytes = 0;
    OK(MPI_Buffer_detach(&back, &back_bytes));
    CHECK(back == buffer && back_bytes == bytes, "detach returned %p/%d, attached %p/%d", back, back_bytes,
          (void *)buffer, bytes);
    free(buffer);
    for (int t = 0; t < NT; t++) OK(MPI_Comm_free(&comms[t]));
    return mpixtest_finish();
}

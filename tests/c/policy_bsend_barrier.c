/* MPI_Bsend is local in every order (MPI 4.1 §3.4), whatever the receiver and the sender's other calls
 * do. Ranks pair up (0-1, 2-3); the even rank sends, the odd one receives, on a dup of MPI_COMM_WORLD
 * (under the explicit policy a native stream communicator whose buffered sends the lean library routes),
 * N buffered messages of each size from 1 KiB to 64 KiB (far more than the shared-memory queue holds):
 *   1. the sender makes its N MPI_Bsend, then MPI_Barrier on MPI_COMM_WORLD; the receiver enters the
 *      barrier first and receives the N afterwards. The barrier's progress never turned the dup's
 *      endpoint: the sender waited for its messages to leave before the barrier, the receiver was in the
 *      barrier, and the job hung (issue 37's first scenario; tests/c/policy_bsend_local.c tries only the
 *      order in which the receiver takes its messages first).
 *   2. the same with the receiver in MPI_Recv on MPI_COMM_WORLD for a token the sender sends after its
 *      buffered sends.
 *   3. a thread of the sender makes the N MPI_Bsend and then waits outside MPI (a condition the main
 *      thread signals only after the barrier): nobody of the sender's calls on the dup is in MPI while
 *      the receiver takes the messages.
 * Every message's contents are checked; the sender detaches the buffer at the end of each phase (which
 * waits for every message to have left). MPIXTEST_THREADS=1: MPI_Init_thread(MPI_THREAD_MULTIPLE),
 * else MPI_Init (phase 3 then only where the library provides MPI_THREAD_MULTIPLE anyway). A hang reads
 * as the test's timeout. */
#include "mpixtest.h"
#include <pthread.h>

static int rank, peer, sender, level;
static MPI_Comm c;
static int n_msgs, bytes;

static void fill(char *m, int phase, int i) {
    for (int k = 0; k < bytes; k++) m[k] = (char)(phase * 31 + i * 7 + k + bytes);
}

static void bsends(int phase) {
    char *m = malloc(bytes);
    for (int i = 0; i < n_msgs; i++) {
        fill(m, phase, i);
        OK(MPI_Bsend(m, bytes, MPI_CHAR, peer, i, c));
    }
    free(m);
}

static void receive_all(int phase) {
    char *m = malloc(bytes), *expect = malloc(bytes);
    for (int i = 0; i < n_msgs; i++) {
        OK(MPI_Recv(m, bytes, MPI_CHAR, peer, i, c, MPI_STATUS_IGNORE));
        fill(expect, phase, i);
        CHECK(memcmp(m, expect, bytes) == 0, "phase %d, %d bytes: message %d has wrong contents", phase, bytes, i);
    }
    free(m);
    free(expect);
}

static void attach(void) {
    int size = n_msgs * (bytes + MPI_BSEND_OVERHEAD);
    OK(MPI_Buffer_attach(malloc(size), size));
}

static void detach(void) {
    void *back = NULL;
    int size = 0;
    OK(MPI_Buffer_detach(&back, &size));
    free(back);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int released;

static void *bsend_then_wait(void *arg) {
    bsends((int)(long)arg);
    pthread_mutex_lock(&lock);
    while (!released) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void phases(void) {
    int token = 0;
    /* 1 */
    if (sender) {
        attach();
        bsends(1);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        detach();
    } else {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        receive_all(1);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* 2 */
    if (sender) {
        attach();
        bsends(2);
        OK(MPI_Send(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD));
        detach();
    } else {
        OK(MPI_Recv(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        receive_all(2);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* 3 */
    if (level == MPI_THREAD_MULTIPLE) {
        if (sender) {
            attach();
            released = 0;
            pthread_t t;
            pthread_create(&t, NULL, bsend_then_wait, (void *)3L);
            OK(MPI_Recv(&token, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            pthread_mutex_lock(&lock);
            released = 1;
            pthread_cond_signal(&cond);
            pthread_mutex_unlock(&lock);
            pthread_join(t, NULL);
            detach();
        } else {
            receive_all(3);
            OK(MPI_Send(&token, 1, MPI_INT, peer, 1, MPI_COMM_WORLD));
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv) {
    int size;
    if (env_int("MPIXTEST_THREADS", 0)) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    } else {
        MPI_Init(&argc, &argv);
        MPI_Query_thread(&level);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2 != 0) {
        CHECK(0, "needs an even number of ranks (got %d)", size);
        return mpixtest_finish();
    }
    peer = rank ^ 1;
    sender = rank % 2 == 0;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    n_msgs = env_int("MPIXTEST_MESSAGES", 300);
    for (bytes = 1024; bytes <= 64 * 1024; bytes *= 4) phases();
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

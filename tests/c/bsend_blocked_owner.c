/* A buffered message's space comes back once the message has left, whoever owns its endpoint and
 * whatever that owner does meanwhile (MPI 4.1 §3.6: the buffer space is reclaimed once the message is
 * transmitted). Ranks pair up (0-1, 2-3 ...); the even rank has two threads, each on its own dup of
 * MPI_COMM_WORLD (under the explicit policy each dup carries its own stream), and an attached buffer that
 * holds one 1 MiB message and no more:
 *   1. thread 1 makes MPI_Bsend of m1 on c1, then blocks in MPI_Recv on c1 for an answer; thread 2,
 *      once the odd rank has received m1 (it says so on c2), makes MPI_Bsend of m2 on c2, which needs
 *      the space m1 held; the odd rank answers thread 1 only after it has m2.
 *   2. the same, but thread 2 detaches the buffer (MPI_Buffer_detach returns once every buffered
 *      message has left) and attaches it again instead of sending m2; the odd rank answers thread 1
 *      once thread 2 said it detached.
 * In both, m1 has left while thread 1 is blocked inside c1's endpoint: if its space came back only
 * under c1's claim, which thread 1 keeps while it blocks, thread 2 waited forever (the job hung; issue
 * 46). Each message's contents are checked. A hang reads as the test's timeout. MPIXTEST_BYTES: the
 * message size (default 1 MiB). */
#include "mpixtest.h"
#include <pthread.h>

static int rank, peer, bytes;
static MPI_Comm c1, c2;
enum { TAG_M1 = 1, TAG_M2 = 2, TAG_ANSWER = 3, TAG_NOTE = 4 };

static void fill(char *m, int which) {
    for (int k = 0; k < bytes; k++) m[k] = (char)(which * 31 + k);
}

static void *buffer;
static int buffer_size;

static void attach(void) { OK(MPI_Buffer_attach(buffer, buffer_size)); }

static void detach(void) {
    void *back = NULL;
    int size = 0;
    OK(MPI_Buffer_detach(&back, &size));
    CHECK(back == buffer && size == buffer_size, "detach gave back %p (%d bytes), attached %p (%d bytes)", back,
          size, buffer, buffer_size);
}

static int phase;

/* The even rank's thread 1: m1 on c1, then blocked in MPI_Recv on c1 until the odd rank answers. */
static void *thread1(void *arg) {
    (void)arg;
    char *m = malloc(bytes);
    fill(m, 1);
    OK(MPI_Bsend(m, bytes, MPI_CHAR, peer, TAG_M1, c1));
    free(m);
    int answer = -1;
    OK(MPI_Recv(&answer, 1, MPI_INT, peer, TAG_ANSWER, c1, MPI_STATUS_IGNORE));
    CHECK(answer == phase, "phase %d: answer %d", phase, answer);
    return NULL;
}

/* The even rank's thread 2: once the odd rank has m1, m2 on c2 (phase 1), or a detach (phase 2). */
static void *thread2(void *arg) {
    (void)arg;
    int note = -1;
    OK(MPI_Recv(&note, 1, MPI_INT, peer, TAG_NOTE, c2, MPI_STATUS_IGNORE));
    CHECK(note == phase, "phase %d: note %d", phase, note);
    if (phase == 1) {
        char *m = malloc(bytes);
        fill(m, 2);
        OK(MPI_Bsend(m, bytes, MPI_CHAR, peer, TAG_M2, c2));
        free(m);
    } else {
        detach();
        attach();
        OK(MPI_Send(&phase, 1, MPI_INT, peer, TAG_NOTE, c2));
    }
    return NULL;
}

static void receive(int which, int tag, MPI_Comm c) {
    char *m = malloc(bytes), *expect = malloc(bytes);
    OK(MPI_Recv(m, bytes, MPI_CHAR, peer, tag, c, MPI_STATUS_IGNORE));
    fill(expect, which);
    CHECK(memcmp(m, expect, bytes) == 0, "phase %d: m%d has wrong contents", phase, which);
    free(m);
    free(expect);
}

static void run_phase(void) {
    if (rank % 2 == 0) {
        pthread_t t1, t2;
        pthread_create(&t1, NULL, thread1, NULL);
        pthread_create(&t2, NULL, thread2, NULL);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
    } else {
        receive(1, TAG_M1, c1);
        OK(MPI_Send(&phase, 1, MPI_INT, peer, TAG_NOTE, c2));
        if (phase == 1) {
            receive(2, TAG_M2, c2);
        } else {
            int note = -1;
            OK(MPI_Recv(&note, 1, MPI_INT, peer, TAG_NOTE, c2, MPI_STATUS_IGNORE));
            CHECK(note == phase, "phase %d: detach note %d", phase, note);
        }
        OK(MPI_Send(&phase, 1, MPI_INT, peer, TAG_ANSWER, c1));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
    int level, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (level != MPI_THREAD_MULTIPLE || size % 2 != 0) {
        CHECK(0, "needs MPI_THREAD_MULTIPLE (got %d) and an even number of ranks (got %d)", level, size);
        return mpixtest_finish();
    }
    peer = rank ^ 1;
    bytes = env_int("MPIXTEST_BYTES", 1 << 20);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c1));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    if (policy_gives_streams()) {
        MPIX_Stream s1 = MPIX_STREAM_NULL, s2 = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(c1, 0, &s1));
        OK(MPIX_Comm_get_stream(c2, 0, &s2));
        CHECK(s1 != MPIX_STREAM_NULL && s2 != MPIX_STREAM_NULL && s1 != s2,
              "the policy's dups carry no streams of their own (%#x, %#x)", (unsigned)s1, (unsigned)s2);
    }
    /* One message and its overhead: a second one finds no space until the first has left. */
    buffer_size = bytes + MPI_BSEND_OVERHEAD;
    buffer = malloc(buffer_size);
    if (rank % 2 == 0) attach();
    for (phase = 1; phase <= 2; phase++) run_phase();
    if (rank % 2 == 0) detach();
    free(buffer);
    OK(MPI_Comm_free(&c1));
    OK(MPI_Comm_free(&c2));
    return mpixtest_finish();
}

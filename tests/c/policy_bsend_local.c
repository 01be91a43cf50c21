/* MPI_Bsend is local (MPI 4.1 §3.4): it returns once the message is in the attached buffer, whatever the
 * receiver does. On communicators the explicit policy made (MPI_Comm_dup of MPI_COMM_WORLD; on MPICH >= 4.1
 * native stream communicators, whose buffered sends the lean library routes: shim/src/native_fixes/buffered/) the
 * route used to drive each small message until it had left; once MPICH's shared-memory queue to the peer
 * is full a message leaves only when the receiver takes earlier ones, so the sender waited in MPI_Bsend
 * for a receiver that was waiting for it. Ranks pair up (0-1, 2-3); the even rank sends, the odd one
 * receives, on two dups A and B, with N buffered messages of 1 KiB (more than the queue holds):
 *   1. the sender makes N MPI_Bsend on A, then MPI_Send on B; the receiver receives on B first, then the
 *      N on A. The sender then detaches the buffer (which waits until every message has left).
 *   2. the same N MPI_Bsend on A, then the sender waits (MPI_Irecv + MPI_Wait on B) for the receiver's
 *      word that all N arrived: the sender's completion calls must progress its buffered messages.
 *   3. a thread of the sender makes the N MPI_Bsend on A and exits before the receiver has posted one
 *      receive (the receiver waits on B for the main thread's MPI_Send, made after the join): the
 *      thread's exit must not wait for the receiver.
 *   4. as 3, then the main thread sends one more buffered message on A (it takes over the exited
 *      thread's messages) and waits for the receiver's word as in 2.
 *   5. the N MPI_Bsend on A, then the sender blocks in MPI_Barrier on MPI_COMM_WORLD (no stream: its
 *      progress never turns A's), which the receiver enters only after taking all N (the shape of
 *      MPICH's threads/pt2pt/mt_bsendrecv): the sender's small messages must leave before it blocks there.
 * Every message's contents are checked. A hang reads as the test's timeout. */
#include "mpixtest.h"
#include <pthread.h>

#define N 100
#define BYTES 1024

static int rank, peer;
static MPI_Comm A, B;

static void fill(char *m, int phase, int i) {
    for (int k = 0; k < BYTES; k++) m[k] = (char)(phase * 31 + i * 7 + k);
}

static void bsends(int phase, int first, int count) {
    char m[BYTES];
    for (int i = first; i < first + count; i++) {
        fill(m, phase, i);
        OK(MPI_Bsend(m, BYTES, MPI_CHAR, peer, i, A));
    }
}

static void *bsend_thread(void *arg) {
    bsends((int)(long)arg, 0, N);
    return NULL;
}

static void receive_all(int phase, int count) {
    char m[BYTES], expect[BYTES];
    for (int i = 0; i < count; i++) {
        OK(MPI_Recv(m, BYTES, MPI_CHAR, peer, i, A, MPI_STATUS_IGNORE));
        fill(expect, phase, i);
        CHECK(memcmp(m, expect, BYTES) == 0, "phase %d: message %d has wrong contents", phase, i);
    }
}

/* The sender's side of a phase ends with the detach (every message has left then). */
static void detach(void) {
    void *back = NULL;
    int bytes = 0;
    OK(MPI_Buffer_detach(&back, &bytes));
    free(back);
}

static void attach(void) {
    int bytes = (N + 1) * (BYTES + MPI_BSEND_OVERHEAD);
    OK(MPI_Buffer_attach(malloc(bytes), bytes));
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size % 2 != 0) {
        CHECK(0, "needs MPI_THREAD_MULTIPLE (got %d) and an even number of ranks (got %d)", provided, size);
        return mpixtest_finish();
    }
    peer = rank ^ 1;
    int sender = rank % 2 == 0;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &A));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &B));
    OK(MPI_Comm_set_errhandler(A, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(B, MPI_ERRORS_RETURN));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(A, 0, &s));
    if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    int word = 1;

    /* 1: the reproducer of issue 28. */
    if (sender) {
        attach();
        bsends(1, 0, N);
        OK(MPI_Send(&word, 1, MPI_INT, peer, 0, B));
        detach();
    } else {
        OK(MPI_Recv(&word, 1, MPI_INT, peer, 0, B, MPI_STATUS_IGNORE));
        receive_all(1, N);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2: the sender's MPI_Wait on B progresses its buffered messages on A. */
    if (sender) {
        attach();
        bsends(2, 0, N);
        MPI_Request r;
        OK(MPI_Irecv(&word, 1, MPI_INT, peer, 0, B, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        detach();
    } else {
        receive_all(2, N);
        OK(MPI_Send(&word, 1, MPI_INT, peer, 0, B));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3 and 4: the buffered sends of a thread that exits before the receiver posts a receive. */
    for (int phase = 3; phase <= 4; phase++) {
        if (sender) {
            attach();
            pthread_t t;
            pthread_create(&t, NULL, bsend_thread, (void *)(long)phase);
            pthread_join(t, NULL);
            if (phase == 4) bsends(phase, N, 1);
            OK(MPI_Send(&word, 1, MPI_INT, peer, 0, B));
            if (phase == 4) {
                MPI_Request r;
                OK(MPI_Irecv(&word, 1, MPI_INT, peer, 0, B, &r));
                OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            }
            detach();
        } else {
            OK(MPI_Recv(&word, 1, MPI_INT, peer, 0, B, MPI_STATUS_IGNORE));
            receive_all(phase, phase == 4 ? N + 1 : N);
            if (phase == 4) OK(MPI_Send(&word, 1, MPI_INT, peer, 0, B));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* 5: a blocking collective on a communicator without a stream after the buffered sends. */
    if (sender) {
        attach();
        bsends(5, 0, N);
        MPI_Barrier(MPI_COMM_WORLD);
        detach();
    } else {
        receive_all(5, N);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    OK(MPI_Comm_free(&A));
    OK(MPI_Comm_free(&B));
    return mpixtest_finish();
}

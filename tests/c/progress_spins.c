/* No wait spins without progress, and no thread waits for a peer at its exit: what a thread started on
 * its stream completes through the progress helper (shim/src/helper.rs) whatever that thread does next.
 * Ranks pair up (0-1, 2-3); each thread of the even rank has a stream communicator of its own (MPIX API;
 * MPIXTEST_POLICY_DUPS=1: plain dups under the explicit policy instead). The odd rank receives.
 *   1. MPI_Buffer_detach waits for another thread's buffered messages: thread T makes N MPI_Bsend on its
 *      communicator and blocks outside MPI; the main thread tells the receiver to start (a message on
 *      MPI_COMM_WORLD) and detaches. Only T's stream carries the messages, and T is away: the detach
 *      used to wait for T's next MPI call (MPICH 4.1 and 4.2) or observe them only.
 *   2. A buffered send waits for space that another thread's messages hold: T fills the buffer and
 *      blocks outside MPI; the main thread's buffered send on its own communicator must get the space
 *      once the receiver takes T's messages.
 *   3. A thread that frees a routed MPI_Isendrecv before it completed, and exits, is joined at once:
 *      the peer sends the matching message only after the join (it used to spin at its exit until the
 *      peer matched: the join, and the job, hung).
 *   4. MPI_Finalize completes another thread's freed MPI_Isendrecv_replace: T frees it and blocks
 *      outside MPI until after the main thread's MPI_Finalize; the peer sends its message before its
 *      finalize; T then checks that the buffer holds it.
 * Phases 3 and 4 where the calls are routed only: elsewhere they are MPICH's own, and MPICH 4.0.2's and
 * 4.1.3's MPI_Request_free refuse the request of their own MPI_Isendrecv ("invalid (kind=10)", 11).
 * A hang reads as the test's timeout. */
#include "mpixtest.h"
#include <pthread.h>

#define N 200
#define BYTES 1024

static int rank, peer, sender;
static MPI_Comm main_comm, thread_comm;
static MPIX_Stream streams[2];

/* A gate outside MPI. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int gate;
static void gate_wait(int value) {
    pthread_mutex_lock(&lock);
    while (gate < value) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}
static void gate_open(int value) {
    pthread_mutex_lock(&lock);
    gate = value;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void bsends(MPI_Comm c, int first, int count) {
    char m[BYTES];
    for (int i = first; i < first + count; i++) {
        memset(m, (char)(i + 1), BYTES);
        OK(MPI_Bsend(m, BYTES, MPI_CHAR, peer, i, c));
    }
}

static void receive(MPI_Comm c, int first, int count) {
    char m[BYTES];
    for (int i = first; i < first + count; i++) {
        OK(MPI_Recv(m, BYTES, MPI_CHAR, peer, i, c, MPI_STATUS_IGNORE));
        CHECK(m[0] == (char)(i + 1) && m[BYTES - 1] == (char)(i + 1), "message %d has wrong contents", i);
    }
}

static void attach(int messages) {
    int size = messages * (BYTES + MPI_BSEND_OVERHEAD);
    OK(MPI_Buffer_attach(malloc(size), size));
}

static void detach(void) {
    void *back = NULL;
    int size = 0;
    OK(MPI_Buffer_detach(&back, &size));
    free(back);
}

static int filled;
static void *fill_and_wait(void *arg) {
    bsends(thread_comm, 0, N);
    pthread_mutex_lock(&lock);
    filled = (int)(long)arg;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    gate_wait((int)(long)arg);
    return NULL;
}

static void wait_filled(int value) {
    pthread_mutex_lock(&lock);
    while (filled < value) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void *sendrecv_free_exit(void *arg) {
    (void)arg;
    static int out = 7, in = -1;
    MPI_Request r;
    OK(MPI_Isendrecv(&out, 1, MPI_INT, peer, 30, &in, 1, MPI_INT, peer, 31, thread_comm, &r));
    OK(MPI_Request_free(&r));
    return NULL;
}

static int replaced = -1;
static int replace_checked;
static void *replace_free_wait(void *arg) {
    (void)arg;
    MPI_Request r;
    replaced = 40;
    OK(MPI_Isendrecv_replace(&replaced, 1, MPI_INT, peer, 40, peer, 41, thread_comm, &r));
    OK(MPI_Request_free(&r));
    gate_open(100);
    gate_wait(101); /* after the main thread's MPI_Finalize */
    replace_checked = replaced == 41;
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size, token = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size % 2 != 0) {
        CHECK(0, "needs MPI_THREAD_MULTIPLE (got %d) and an even number of ranks (got %d)", provided, size);
        return mpixtest_finish();
    }
    peer = rank ^ 1;
    sender = rank % 2 == 0;
    if (env_int("MPIXTEST_POLICY_DUPS", 0)) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &main_comm));
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm));
    } else {
        for (int i = 0; i < 2; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[0], &main_comm));
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[1], &thread_comm));
    }
    pthread_t t;

    /* 1 */
    if (sender) {
        attach(N);
        pthread_create(&t, NULL, fill_and_wait, (void *)1L);
        wait_filled(1);
        OK(MPI_Send(&token, 1, MPI_INT, peer, 1, MPI_COMM_WORLD));
        detach();
        gate_open(1);
        pthread_join(t, NULL);
    } else {
        OK(MPI_Recv(&token, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        receive(thread_comm, 0, N);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 2 */
    if (sender) {
        attach(N);
        pthread_create(&t, NULL, fill_and_wait, (void *)2L);
        wait_filled(2);
        OK(MPI_Send(&token, 1, MPI_INT, peer, 2, MPI_COMM_WORLD));
        bsends(main_comm, N, 1); /* no space until the receiver takes T's messages */
        gate_open(2);
        pthread_join(t, NULL);
        detach();
    } else {
        /* The sender's thread has filled the buffer: take its messages. */
        OK(MPI_Recv(&token, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        receive(thread_comm, 0, N);
        receive(main_comm, N, 1);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Routed where the communicators are native stream communicators: the MPIX API's on the native
     * backend, the policy's where it gives streams. */
    int routed = native_backend() && (!env_int("MPIXTEST_POLICY_DUPS", 0) || policy_gives_streams());
    /* 3 */
    if (!routed) {
    } else if (sender) {
        pthread_create(&t, NULL, sendrecv_free_exit, NULL);
        pthread_join(t, NULL);
        OK(MPI_Send(&token, 1, MPI_INT, peer, 3, MPI_COMM_WORLD));
    } else {
        int in = -1, out = 8;
        OK(MPI_Recv(&token, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Sendrecv(&out, 1, MPI_INT, peer, 31, &in, 1, MPI_INT, peer, 30, thread_comm, MPI_STATUS_IGNORE));
        CHECK(in == 7, "the freed send-receive sent %d", in);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 4 */
    int errs = mpixtest_errs, total = 0;
    if (!routed) {
        replace_checked = 1;
    } else if (sender) {
        pthread_create(&t, NULL, replace_free_wait, NULL);
        gate_wait(100);
    } else {
        int in = -1, out = 41;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, peer, 41, &in, 1, MPI_INT, peer, 40, thread_comm, MPI_STATUS_IGNORE));
        CHECK(in == 40, "the freed send-receive-replace sent %d", in);
    }
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* The communicators stay: the thread's freed request uses its communicator until it completes. */
    MPI_Finalize();
    if (sender && routed) {
        gate_open(101);
        pthread_join(t, NULL);
        if (!replace_checked) {
            fprintf(stderr, "[rank %d] the freed MPI_Isendrecv_replace did not complete by MPI_Finalize (%d)\n", rank,
                    replaced);
            total++;
        }
    }
    if (rank == 0 && total == 0) printf(" No Errors\n");
    return total != 0;
}

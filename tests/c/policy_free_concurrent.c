/* Communicators destroyed while something still runs on them, from several threads at once, under the
 * explicit policy (MPI_THREAD_MULTIPLE; run with a small pool, MPIXSTREAM_STREAMS=3: the multiplex part's stream and two, so that
 * freed communicators' streams are handed to new ones at once):
 *   1. thread A starts an MPI_Iallreduce (and a persistent MPI_Allreduce_init + MPI_Start) on a new
 *      communicator, frees the communicator, then waits; meanwhile thread B makes communicators (which
 *      get the freed one's stream) and exchanges on them. The freed communicator's stream was handed on
 *      while A's wait still turned it: two threads inside one unlocked endpoint.
 *   2. two communicators sharing one stream (a policy communicator and its MPI_Comm_idup child, on the
 *      serial backend: MPIXSTREAM_BACKEND=serial) freed by two threads at the same instant, then two new
 *      communicators made: they must not get the same stream (both frees gave the stream back, so the
 *      second new one took the stream the first already had).
 *   3. a communicator freed with its receive and send pending: its record goes when the last of them
 *      completes, inside MPI_Waitall (the record's destruction used to call MPI there); likewise a
 *      multiplex communicator freed with an indexed receive pending, whose streams are freed after.
 * Results are checked; a hang reads as the test's timeout. */
#include "mpixtest.h"
#include <pthread.h>

static int rank, size, left, right;
static MPI_Comm parent_a, parent_b;
static int rounds;

static void *thread_a(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(parent_a, &c));
        int in = rank + i, out = -1, pin = rank, pout = -1;
        MPI_Request r, p;
        OK(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, c, &r));
        OK(MPI_Allreduce_init(&pin, &pout, 1, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &p));
        OK(MPI_Start(&p));
        OK(MPI_Comm_free(&c));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
        OK(MPI_Request_free(&p));
        CHECK(out == size * (size - 1) / 2 + size * i, "round %d: Iallreduce gave %d", i, out);
        CHECK(pout == size * (size - 1) / 2, "round %d: persistent allreduce gave %d", i, pout);
    }
    return NULL;
}

static void *thread_b(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        MPI_Comm d;
        OK(MPI_Comm_dup(parent_b, &d));
        int out = rank * 1000 + i, in = -1;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 1, &in, 1, MPI_INT, left, 1, d, MPI_STATUS_IGNORE));
        CHECK(in == left * 1000 + i, "round %d: ring received %d", i, in);
        int one = 1, sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d));
        CHECK(sum == size, "round %d: allreduce gave %d", i, sum);
        OK(MPI_Comm_free(&d));
    }
    return NULL;
}

static pthread_barrier_t together;
static MPI_Comm to_free[2];
static void *free_one(void *arg) {
    int k = (int)(long)arg;
    pthread_barrier_wait(&together);
    OK(MPI_Comm_free(&to_free[k]));
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(provided == MPI_THREAD_MULTIPLE, "needs MPI_THREAD_MULTIPLE (got %d)", provided);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    rounds = env_int("MPIXTEST_ROUNDS", 40);
    /* The multiplex communicator's stream first: the policy's streams, once retired, stay taken. */
    MPIX_Stream s;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));

    /* 1 */
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &parent_a));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &parent_b));
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    OK(MPI_Comm_free(&parent_a));
    OK(MPI_Comm_free(&parent_b));

    /* 2 */
    pthread_barrier_init(&together, NULL, 2);
    for (int i = 0; i < rounds; i++) {
        MPI_Request r;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &to_free[0]));
        OK(MPI_Comm_idup(to_free[0], &to_free[1], &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        pthread_t t[2];
        for (long k = 0; k < 2; k++) pthread_create(&t[k], NULL, free_one, (void *)k);
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
        MPI_Comm x, y;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &x));
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &y));
        MPIX_Stream sx = MPIX_STREAM_NULL, sy = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(x, 0, &sx));
        OK(MPIX_Comm_get_stream(y, 0, &sy));
        CHECK(sx == MPIX_STREAM_NULL || sx != sy, "round %d: two live communicators got stream 0x%08x", i, (unsigned)sx);
        OK(MPI_Comm_free(&x));
        OK(MPI_Comm_free(&y));
    }
    pthread_barrier_destroy(&together);

    /* 3 */
    for (int i = 0; i < rounds; i++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        int out = rank + i, in = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_INT, left, 3, c, &r[0]));
        OK(MPI_Isend(&out, 1, MPI_INT, right, 3, c, &r[1]));
        OK(MPI_Comm_free(&c));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(in == left + i, "round %d: pending receive got %d", i, in);
    }
    MPI_Comm mx;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, &s, &mx));
    int out = rank, in = -1;
    MPI_Request r;
    OK(MPIX_Stream_irecv(&in, 1, MPI_INT, MPI_ANY_SOURCE, 4, mx, MPIX_ANY_INDEX, 0, &r));
    OK(MPIX_Stream_send(&out, 1, MPI_INT, right, 4, mx, 0, 0));
    OK(MPI_Comm_free(&mx));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in == left, "multiplex: pending receive got %d", in);
    OK(MPIX_Stream_free(&s));
    return mpixtest_finish();
}

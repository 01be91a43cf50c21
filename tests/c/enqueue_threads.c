/* Several host-queue streams driven at once: each of NT application threads owns a stream (its own
 * engine thread, its own endpoint on the native backend) and runs a ping-pong, nonblocking
 * exchanges and allreduces on it, while the main thread uses MPI_COMM_WORLD directly. */
#include "mpixtest.h"
#include <pthread.h>

enum { NT = 3, ITERS = 300 };
static int rank, size;
static MPIX_Stream streams[NT];
static MPI_Comm comms[NT];
static int bad[NT];

static void *worker(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm c = comms[t];
    MPIX_Stream s = streams[t];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < ITERS; i++) {
        int out = rank * 1000000 + t * 10000 + i, in = -1, sum = -1;
        MPI_Request r[2];
        MPIX_Irecv_enqueue(&in, 1, MPI_INT, left, i, c, &r[0]);
        MPIX_Isend_enqueue(&out, 1, MPI_INT, right, i, c, &r[1]);
        MPIX_Waitall_enqueue(2, r, MPI_STATUSES_IGNORE);
        MPIX_Allreduce_enqueue(&t, &sum, 1, MPI_INT, MPI_SUM, c);
        if (i % 50 == 49 || i == ITERS - 1) {
            MPIX_Host_queue_synchronize(s);
            bad[t] += in != left * 1000000 + t * 10000 + i;
            bad[t] += sum != t * size;
        } else {
            MPIX_Host_queue_synchronize(s);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    for (int t = 0; t < NT; t++) {
        OK(MPIX_Stream_create(info, &streams[t]));
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[t], &comms[t]));
    }
    MPI_Info_free(&info);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    /* Meanwhile, ordinary traffic on MPI_COMM_WORLD from the main thread. */
    for (int i = 0; i < 200; i++) {
        int v = rank, s = -1;
        OK(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(s == size * (size - 1) / 2, "world allreduce %d", s);
    }
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++) {
        CHECK(bad[t] == 0, "thread %d: %d wrong results", t, bad[t]);
        OK(MPI_Comm_free(&comms[t]));
        OK(MPIX_Stream_free(&streams[t]));
    }
    return mpixtest_finish();
}

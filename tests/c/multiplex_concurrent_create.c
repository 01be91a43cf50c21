/* Multiplex communicators made by two threads of each process at once, each thread over its own
 * duplicate of MPI_COMM_WORLD with its own two streams, MPIXTEST_ROUNDS times (default 40): each made,
 * used (index 0 of every rank to index 1 of the next, checked) and freed. On the split backend a
 * creation takes the dedicated endpoints its count needs before its one allgather
 * (shim/src/multiplex/offer.rs); two threads taking them at once get different ones on different
 * processes, and the creation must then give them back and agree on them over its communicator, on
 * every member: no hang, no wrong message, no endpoint kept. The end checks the last: with every
 * stream freed, the whole pool (MPIXTEST_POOL streams, MPIXSTREAM_STREAMS's value) can be made again. */
#include "mpixtest.h"
#include <pthread.h>

enum { THREADS = 2 };
static int rounds;
static MPI_Comm parent[THREADS];

static void *worker(void *arg) {
    int t = (int)(long)arg;
    MPIX_Stream s[2];
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
    for (int round = 0; round < rounds; round++) {
        MPI_Comm mx;
        OK(MPIX_Stream_comm_create_multiplex(parent[t], 2, s, &mx));
        multiplex_ring(mx, round);
        OK(MPI_Comm_free(&mx));
    }
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_free(&s[i]));
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE, "no MPI_THREAD_MULTIPLE");
    rounds = env_int("MPIXTEST_ROUNDS", 40);
    int pool = env_int("MPIXTEST_POOL", 0);
    for (int t = 0; t < THREADS; t++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &parent[t]));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) OK(MPI_Comm_free(&parent[t]));
    /* Every endpoint back: the whole pool can be made again. */
    MPIX_Stream *all = calloc((size_t)pool + 1, sizeof *all);
    int made = 0;
    for (; made < pool; made++) {
        int rc = MPIX_Stream_create(MPI_INFO_NULL, &all[made]);
        if (rc != MPI_SUCCESS) {
            CHECK(0, "stream %d of the pool of %d: %s", made, pool, err_text(rc));
            break;
        }
    }
    for (int i = 0; i < made; i++) OK(MPIX_Stream_free(&all[i]));
    free(all);
    return mpixtest_finish();
}

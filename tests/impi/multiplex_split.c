/* A multiplex communicator on the library's split backend (tests/scripts/impi_thread_split.sh), 2 ranks,
 * two streams per rank, one thread per stream index. Rank 0's index i sends (1 + 2i + j) * 100 4-byte
 * messages to rank 1's index j (100, 200, 300, 400 for the pairs 0->0, 0->1, 1->0, 1->1), and its index 0
 * sends LOCAL messages to its own index 1 (between two indices of one process: never an MPI message).
 * Every receiver takes its messages with MPI_ANY_SOURCE and MPIX_ANY_INDEX and checks each pair's
 * order and count. Built with -DWITH_MPIX, linked to libmpixstream.so. */
#include <mpi.h>
#include "mpix_stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { LOCAL = 60 };
static MPI_Comm mx;
static int rank, errors;

static int pair_count(int i, int j) { return (1 + 2 * i + j) * 100; }

static void bad(const char *what, int a, int b) {
    fprintf(stderr, "rank %d: %s (%d, %d)\n", rank, what, a, b);
    __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
}

static void *body(void *arg) {
    int me = (int)(long)arg;
    if (rank == 0) {
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < pair_count(me, j); k++)
                if (MPIX_Stream_send(&k, 1, MPI_INT, 1, me, mx, me, j) != MPI_SUCCESS) bad("send", me, j);
        if (me == 0)
            for (int k = 0; k < LOCAL; k++)
                if (MPIX_Stream_send(&k, 1, MPI_INT, 0, 7, mx, 0, 1) != MPI_SUCCESS) bad("local send", k, 0);
        if (me == 1)
            for (int k = 0; k < LOCAL; k++) {
                int x = -1;
                MPI_Status st;
                if (MPIX_Stream_recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 1, &st) !=
                        MPI_SUCCESS ||
                    x != k || st.MPI_SOURCE != 0 || st.MPI_TAG != 7)
                    bad("local message", k, x);
            }
    } else if (rank == 1) {
        int next[2] = {0, 0}, total = pair_count(0, me) + pair_count(1, me);
        for (int k = 0; k < total; k++) {
            int x = -1;
            MPI_Status st;
            if (MPIX_Stream_recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, me, &st) !=
                MPI_SUCCESS) {
                bad("recv", me, k);
                continue;
            }
            int i = st.MPI_TAG; /* the source index, sent as the tag */
            if (st.MPI_SOURCE != 0 || i < 0 || i > 1 || x != next[i]) {
                bad("order", i, x);
                continue;
            }
            next[i]++;
        }
        for (int i = 0; i < 2; i++)
            if (next[i] != pair_count(i, me)) bad("count", i, next[i]);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_Stream streams[2];
    for (int i = 0; i < 2; i++)
        if (MPIX_Stream_create(MPI_INFO_NULL, &streams[i]) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 2);
    if (MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, streams, &mx) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 3);
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, body, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    MPI_Comm_free(&mx);
    for (int i = 0; i < 2; i++) MPIX_Stream_free(&streams[i]);
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all == 0 ? " No Errors\n" : " Found %d errors\n", all);
    MPI_Finalize();
    return all != 0;
}

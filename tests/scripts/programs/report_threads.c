/* Exact receive counts under threads (tests/scripts/report_threads.sh): MPI_THREAD_MULTIPLE, T threads
 * per rank (REPORT_THREADS, default 2), each on its own MPI_Comm_dup of MPI_COMM_WORLD, each doing N
 * rounds (REPORT_ROUNDS, default 20000) of W (REPORT_WINDOW, default 1) Irecv + W Isend of one long with rank ^ 1 and an
 * MPI_Waitall, as IMB-MT's BiBandMT does. Under the implicit policy (and on Debian's one VCI) the threads
 * share MPICH's endpoint, and MPICH recycles request handles across them at once. Prints, per rank,
 * the receives it completed: "EXPECT rank R recv_msgs M recv_bytes B". */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define WMAX 64
static int rank, rounds, W = 1, count = 1;
static MPI_Comm comms[64];

static void *body(void *arg) {
    MPI_Comm c = comms[(long)arg];
    int peer = rank ^ 1;
    long in[WMAX], out[WMAX];
    MPI_Request r[2 * WMAX];
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < W; i++) {
            out[i] = round * W + i;
            in[i] = -1;
            MPI_Irecv(&in[i], count, MPI_LONG, peer, i, c, &r[i]);
        }
        for (int i = 0; i < W; i++) MPI_Isend(&out[i], count, MPI_LONG, peer, i, c, &r[W + i]);
        MPI_Waitall(2 * W, r, MPI_STATUSES_IGNORE); /* statuses ignored, as IMB-MT does */
        for (int i = 0; i < W; i++)
            if (count && in[i] != round * W + i) {
                fprintf(stderr, "rank %d: round %d: got %ld\n", rank, round, in[i]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE || size % 2) {
        fprintf(stderr, "needs MPI_THREAD_MULTIPLE and an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int threads = getenv("REPORT_THREADS") ? atoi(getenv("REPORT_THREADS")) : 2;
    rounds = getenv("REPORT_ROUNDS") ? atoi(getenv("REPORT_ROUNDS")) : 20000;
    W = getenv("REPORT_WINDOW") ? atoi(getenv("REPORT_WINDOW")) : 1;
    if (threads < 1 || threads > 64) threads = 2;
    if (W < 1 || W > WMAX) W = 1;
    count = getenv("REPORT_COUNT") ? atoi(getenv("REPORT_COUNT")) != 0 : 1;
    for (int t = 0; t < threads; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[64];
    for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, body, (void *)t);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < threads; t++) MPI_Comm_free(&comms[t]);
    long msgs = (long)threads * rounds * W;
    printf("EXPECT rank %d recv_msgs %ld recv_bytes %ld\n", rank, msgs, msgs * count * (long)sizeof(long));
    MPI_Finalize();
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

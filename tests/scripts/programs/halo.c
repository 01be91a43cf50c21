/* A small hybrid halo exchange, as a newcomer would write one (issue 49): 2 ranks x 2 threads,
 * MPI_THREAD_MULTIPLE. Thread t of each rank owns a strip of CELLS doubles; each iteration it smooths
 * its strip (a 3-point stencil) and swaps a halo of HALO doubles with thread t of the other rank
 * (MPI_Sendrecv, tag t).
 *   halo dup   [ITERATIONS]   each thread on its own MPI_Comm_dup of MPI_COMM_WORLD
 *   halo world [ITERATIONS]   both threads on MPI_COMM_WORLD (the tags tell them apart)
 * ITERATIONS defaults to 1000. The main thread alone uses MPI_COMM_WORLD besides: a barrier before
 * the threads start and a reduce of the strips' sums after they end. Rank 0 prints
 * "HALO variant=.. iterations=.. checksum=.. section_s=.." (section_s: MPI_Wtime between the barrier
 * and the reduce) and " No Errors" after MPI_Finalize. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELLS 256
#define HALO 16

static int rank, peer, iterations = 1000;
static MPI_Comm comms[2];
static double sums[2];

static void *exchange(void *arg) {
    int t = (int)(long)arg;
    double strip[CELLS + 2 * HALO], next[CELLS + 2 * HALO];
    for (int i = 0; i < CELLS + 2 * HALO; i++) strip[i] = rank * 1000 + t * 100 + i % 7;
    for (int it = 0; it < iterations; it++) {
        /* My right edge goes to the peer's left halo and the other way round (a ring of two). */
        MPI_Sendrecv(&strip[CELLS], HALO, MPI_DOUBLE, peer, t, strip, HALO, MPI_DOUBLE, peer, t, comms[t],
                     MPI_STATUS_IGNORE);
        for (int i = HALO; i < CELLS + HALO; i++) next[i] = (strip[i - 1] + strip[i] + strip[i + 1]) / 3.0;
        memcpy(&strip[HALO], &next[HALO], CELLS * sizeof(double));
    }
    double s = 0;
    for (int i = HALO; i < CELLS + HALO; i++) s += strip[i];
    sums[t] = s;
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *variant = argc > 1 ? argv[1] : "dup";
    if (argc > 2) iterations = atoi(argv[2]);
    int world = strcmp(variant, "world") == 0;
    if (size != 2 || provided != MPI_THREAD_MULTIPLE || (!world && strcmp(variant, "dup") != 0) || iterations < 1) {
        if (rank == 0) fprintf(stderr, "usage: halo dup|world [ITERATIONS >= 1], 2 ranks, MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    peer = 1 - rank;
    for (int t = 0; t < 2; t++) {
        if (world)
            comms[t] = MPI_COMM_WORLD;
        else
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, exchange, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    double mine = sums[0] + sums[1], total = 0;
    MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double section = MPI_Wtime() - t0;
    if (!world)
        for (int t = 0; t < 2; t++) MPI_Comm_free(&comms[t]);
    if (rank == 0)
        printf("HALO variant=%s iterations=%d checksum=%.6e section_s=%.6f\n", variant, iterations, total, section);
    MPI_Finalize();
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

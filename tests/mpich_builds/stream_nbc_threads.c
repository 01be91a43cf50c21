/* Reproducer, WITHOUT mpixstream, of a defect of native MPIX streams in PyPI MPICH 4.2.3: T threads
 * per rank (default 3) each own one MPIX stream and its stream communicator, and each thread alone
 * drives its stream (MPIX_Stream_progress + MPI_Testall: the stream's one serial context). Each runs
 * ITERS rounds of
 *   coll: MPI_Iallreduce on its stream communicator
 *   p2p:  MPI_Irecv from the left + MPI_Isend to the right (ring) on its stream communicator
 *   both: p2p, then coll
 * while the main thread runs MPI_Allreduce on MPI_COMM_WORLD (unless "noworld"). A waiting thread
 * polls 4096 times, then yields for 5 ms, then naps NAP_US microseconds between polls, and naps once
 * after each operation (as mpixstream's host-queue worker does on a small machine).
 * MPICH 4.2.3 progresses every nonblocking collective's schedule from whichever thread runs progress
 * (one global schedule list, walked by a progress hook that MPIX_Stream_progress runs too), so one
 * stream's thread posts the next round of another stream's collective on that stream's reserved VCI,
 * which MPICH never locks (MPIDI_VCI_IS_EXPLICIT), while the owning thread drives it: at 4 ranks
 * a run sometimes hangs (a collective never completes). Over MPICH 5.0.2 (ch4:ucx) it does not.
 *   stream_nbc_threads MODE [ITERS] [world|noworld] [NAP_US]   prints "rank R completed";
 *   needs MPIR_CVAR_CH4_RESERVE_VCIS >= T; run: tests/mpich_builds/run.sh */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifndef T
#define T 3
#endif
static int rank, size, iters = 300, mode_p2p, mode_coll, bad, running = T;
static MPIX_Stream stream[T];
static MPI_Comm comm[T];

static int nap_us = 0;
/* Waits as a driving thread on a small machine does: polls 4096 times, then polls and yields for 5 ms,
 * then (nap_us > 0) polls every nap_us microseconds. */
static void wait_on(int t, int n, MPI_Request *r) {
    int done = 0;
    double t0 = 0;
    for (int polls = 0;; polls++) {
        MPIX_Stream_progress(stream[t]);
        MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (done) break;
        if (polls < 4096) continue;
        if (polls == 4096) t0 = MPI_Wtime();
        if (nap_us && MPI_Wtime() - t0 > 0.005) usleep(nap_us);
        else sched_yield();
    }
    if (nap_us) usleep(nap_us); /* the next operation comes from another thread */
}

static void *worker(void *arg) {
    int t = (int)(long)arg, right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < iters; i++) {
        MPI_Request r[2];
        if (mode_p2p) {
            int out = rank * 100000 + i, in = -1;
            MPI_Irecv(&in, 1, MPI_INT, left, i, comm[t], &r[0]);
            MPI_Isend(&out, 1, MPI_INT, right, i, comm[t], &r[1]);
            wait_on(t, 2, r);
            if (in != left * 100000 + i) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        }
        if (mode_coll) {
            int sum = -1;
            MPI_Iallreduce(&t, &sum, 1, MPI_INT, MPI_SUM, comm[t], &r[0]);
            wait_on(t, 1, r);
            if (sum != t * size) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        }
    }
    __atomic_sub_fetch(&running, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "both";
    mode_p2p = !strcmp(mode, "p2p") || !strcmp(mode, "both");
    mode_coll = !strcmp(mode, "coll") || !strcmp(mode, "both");
    if (argc > 2) iters = atoi(argv[2]);
    int world = !(argc > 3 && !strcmp(argv[3], "noworld"));
    if (argc > 4) nap_us = atoi(argv[4]);
    for (int t = 0; t < T; t++) {
        if (MPIX_Stream_create(MPI_INFO_NULL, &stream[t]) != MPI_SUCCESS) {
            printf("rank %d: MPIX_Stream_create failed (set MPIR_CVAR_CH4_RESERVE_VCIS=%d)\n", rank, T);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPIX_Stream_comm_create(MPI_COMM_WORLD, stream[t], &comm[t]);
    }
    pthread_t th[T];
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    /* Until every thread of this rank is done: world traffic has no end the peers could wait for,
     * so every rank runs one more allreduce than the slowest needs. */
    for (int more = 1; world && more;) {
        int v = rank, s = -1;
        MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (s != size * (size - 1) / 2) bad++;
        int mine = __atomic_load_n(&running, __ATOMIC_ACQUIRE) > 0;
        MPI_Allreduce(&mine, &more, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    printf("rank %d completed%s\n", rank, bad ? " with WRONG results" : "");
    for (int t = 0; t < T; t++) {
        MPI_Comm_free(&comm[t]);
        MPIX_Stream_free(&stream[t]);
    }
    MPI_Finalize();
    return 0;
}

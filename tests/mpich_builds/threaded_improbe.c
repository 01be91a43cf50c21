/* Reproducer, WITHOUT mpixstream, of a slowdown of MPICH 5.0.2 over ch4:ofi (libfabric tcp) under
 * MPI_THREAD_MULTIPLE: T threads per rank (compile with -DT=..., default 4); thread t sends N messages
 * to the peer's thread t on its own dup of MPI_COMM_WORLD and receives N with a polling loop of
 * MPI_Improbe(ANY_SOURCE, ANY_TAG) + MPI_Mrecv (what mpixstream's multiplex engine does). Over ofi, 4
 * threads move the same number of messages as 1 thread some 40x more slowly (one thread sits in
 * libfabric's progress, the others wait for MPICH's VCI lock); over ch4:ucx they do not.
 *   threaded_improbe [N]       prints "rank R completed"; run: tests/mpich_builds/run.sh */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef T
#define T 4
#endif
static int N = 20000, rank, peer;
static MPI_Comm comm[T];
static void *worker(void *arg) {
    int t = (int)(long)arg, got = 0, sent = 0, buf[16] = {0}, in[16];
    MPI_Request sreq[64];
    int ns = 0;
    while (got < N || sent < N) {
        if (sent < N && ns < 64) { MPI_Isend(buf, 16, MPI_INT, peer, sent % 7, comm[t], &sreq[ns++]); sent++; }
        if (ns == 64 || sent == N) { MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE); ns = 0; }
        int flag = 0; MPI_Message m; MPI_Status st;
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm[t], &flag, &m, &st);
        if (flag) { MPI_Mrecv(in, 16, MPI_INT, &m, MPI_STATUS_IGNORE); got++; }
    }
    if (ns) MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE);
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = rank ^ 1;
    if (argc > 1) N = atoi(argv[1]);
    for (int t = 0; t < T; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comm[t]);
    pthread_t th[T];
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    printf("rank %d completed\n", rank);
    for (int t = 0; t < T; t++) MPI_Comm_free(&comm[t]);
    MPI_Finalize();
    return 0;
}

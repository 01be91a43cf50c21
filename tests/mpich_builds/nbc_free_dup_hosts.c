/* Intel MPI across hosts, without mpixstream: thread A starts an MPI_Iallreduce and a persistent
 * MPI_Allreduce_init + MPI_Start on a new duplicate, frees it (MPI lets pending operations finish) and
 * waits; meanwhile thread B duplicates another communicator (MPI_Comm_dup's context-id agreement is
 * an allreduce), exchanges on it and frees it. tests/c/policy_free_concurrent.c's part 1 with no MPIX
 * call. Crashes (SIGSEGV in MPIDU_Sched_progress, under thread A's MPI_Wait) in some runs at
 * 2 simulated hosts x 2 ranks: tests/mpich_builds/nbc_free_dup_hosts.sh.
 *   argument: rounds (default 40). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, left, right, rounds, errs;
static MPI_Comm parent_a, parent_b;

static void *thread_a(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        MPI_Comm c;
        MPI_Comm_dup(parent_a, &c);
        int in = rank + i, out = -1, pin = rank, pout = -1;
        MPI_Request r, p;
        MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, c, &r);
        MPI_Allreduce_init(&pin, &pout, 1, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &p);
        MPI_Start(&p);
        MPI_Comm_free(&c);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Wait(&p, MPI_STATUS_IGNORE);
        MPI_Request_free(&p);
        if (out != size * (size - 1) / 2 + size * i || pout != size * (size - 1) / 2) errs++;
    }
    return NULL;
}

static void *thread_b(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        MPI_Comm d;
        MPI_Comm_dup(parent_b, &d);
        int out = rank * 1000 + i, in = -1, one = 1, sum = 0;
        MPI_Sendrecv(&out, 1, MPI_INT, right, 1, &in, 1, MPI_INT, left, 1, d, MPI_STATUS_IGNORE);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d);
        if (in != left * 1000 + i || sum != size) errs++;
        MPI_Comm_free(&d);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 2);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    rounds = argc > 1 ? atoi(argv[1]) : 40;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent_a);
    MPI_Comm_dup(MPI_COMM_WORLD, &parent_b);
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    MPI_Comm_free(&parent_a);
    MPI_Comm_free(&parent_b);
    int all = 0;
    MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? " Found %d errors\n" : " No Errors\n", all);
    MPI_Finalize();
    return all != 0;
}

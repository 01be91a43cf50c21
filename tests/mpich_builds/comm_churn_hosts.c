/* tests/c/multiplex_lifetime.c's create/free loop WITHOUT mpixstream, on Intel MPI 2021.19 between
 * simulated hosts: per round, the 8 communicators a 2-index multiplex communicator at 4 ranks makes on
 * the split backend (2S + S(S-1)ceil(log2 N), S = 2, N = 4: docs/multiplex.md), here
 * MPI_Comm_dup_with_info with a thread_id info (1..5 cycling), freed, then the test's MPI_Comm_dup and
 * MPI_Comm_free. Shows (2 hosts x 2 ranks, MPIR_CVAR_THREAD_SPLIT=1 MPIR_CVAR_THREAD_MAX=21 in the
 * environment, 2026-12-05, 1 run each): 300 rounds 16.55 s, 1000 rounds 54.53 s: some 6 ms per
 * communicator made and freed across hosts, so the test's default 3000 rounds cannot finish within
 * its 60 s limit without the library either. benches/hosts_lifetime.sh compares the test with the
 * library against this at 300 rounds (docs/cluster.md, Intel MPI). Build with Intel MPI's mpicc; run:
 *   source scripts/env.sh; mpich_select impi; $MPICC -O2 tests/mpich_builds/comm_churn_hosts.c -o /tmp/cc
 *   mpiexec_across -hosts h1:2,h2:2; MPIR_CVAR_THREAD_SPLIT=1 MPIR_CVAR_THREAD_MAX=21 \
 *     flock /tmp/mpix-heavy.lock timeout 90 "${MPIEXEC_ACROSS[@]}" -n 4 /tmp/cc 1000
 *   comm_churn_hosts [ROUNDS]   (default 300) prints the time on rank 0 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int provided, rank, n = argc > 1 ? atoi(argv[1]) : 300;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double t = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Comm c[8], d;
        for (int k = 0; k < 8; k++) {
            MPI_Info in; char v[8]; MPI_Info_create(&in); snprintf(v, sizeof v, "%d", 1 + k % 5);
            MPI_Info_set(in, "thread_id", v); MPI_Comm_dup_with_info(MPI_COMM_WORLD, in, &c[k]); MPI_Info_free(&in);
        }
        for (int k = 0; k < 8; k++) MPI_Comm_free(&c[k]);
        MPI_Comm_dup(MPI_COMM_WORLD, &d); MPI_Comm_free(&d);
    }
    t = MPI_Wtime() - t;
    if (rank == 0) printf("%d rounds of 8 + 1 communicators: %.2f s\n", n, t);
    MPI_Finalize();
    return 0;
}

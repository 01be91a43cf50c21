/* Over ch4:ofi with libfabric's tcp provider between hosts (MPICH 4.1.3, 5.0.2 over ofi), WITHOUT
 * mpixstream: rank 0 sends N small messages on one dup of MPI_COMM_WORLD, then one on another; rank 1
 * (on the other host) waits a second, so the N arrive before any receive is posted, then receives the
 * one, then the N. With N past 64 (libfabric's FI_TCP_MAX_SAVED: messages the provider queues with no
 * buffer posted) rank 1's receive of the one never completes: the provider stops reading the
 * connection, and MPICH leaves its unexpected messages in the provider. 2026-12-05, 1 + 1 simulated
 * hosts, MPICH 4.1.3: N = 10 and 60 complete, 70, 100 and 1000 hang; 1000 completes with
 * FI_TCP_MAX_SAVED=4096; Intel MPI 2021.19 completes N = 1000 from rank 0 to rank 1, also in a 3-rank
 * job, and hangs at N = 100 from rank 0 to rank 2 of 3 (1 + 2 hosts, 3 of 3 jobs; 10 completes 3 of 3:
 * tests/mpich_builds/improbe_unexpected_hosts.sh).
 * Run: tests/mpich_builds/unexpected_hosts.sh.
 *   unexpected_hosts N [SENDER RECEIVER]   (default 0 1) RECEIVER prints " No Errors" */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, n = argc > 1 ? atoi(argv[1]) : 100, one = 0;
    int from = argc > 3 ? atoi(argv[2]) : 0, to = argc > 3 ? atoi(argv[3]) : 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm many, single;
    MPI_Comm_dup(MPI_COMM_WORLD, &many);
    MPI_Comm_dup(MPI_COMM_WORLD, &single);
    int *buf = calloc((size_t)n + 1, 6 * sizeof(int));
    MPI_Request *req = malloc(((size_t)n + 1) * sizeof(MPI_Request));
    if (rank == from) {
        for (int i = 0; i < n; i++) MPI_Isend(buf + 6 * i, 6, MPI_INT, to, 0, many, &req[i]);
        MPI_Send(&one, 1, MPI_INT, to, 0, single);
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    } else if (rank == to) {
        sleep(1);
        MPI_Recv(&one, 1, MPI_INT, from, 0, single, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) MPI_Recv(buf + 6 * i, 6, MPI_INT, from, 0, many, MPI_STATUS_IGNORE);
        printf("%d unexpected messages, then the one on the other communicator: received\n No Errors\n", n);
    }
    MPI_Comm_free(&many);
    MPI_Comm_free(&single);
    MPI_Finalize();
    return 0;
}

/* An MPI_ANY_SOURCE receive over ch4:ucx with peers on this host and on another (docs/native-defects.md,
 * "MPI_ANY_SOURCE over UCX's tcp between hosts"), without mpixstream: a ring on an MPI_Comm_dup of
 * MPI_COMM_WORLD, each round an MPI_Irecv from the left neighbour (argument "any": MPI_ANY_SOURCE and
 * MPI_ANY_TAG, else the neighbour and its tag) and an MPI_Isend to the right, completed by MPI_Test
 * polling, 200 rounds; data and source checked. A rank still polling after 50 million tests says so
 * ("stuck at round N"); the job's time limit ends it. " No Errors" on rank 0 when every round of every
 * rank completed correctly. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, any = argc > 1 && strcmp(argv[1], "any") == 0, errs = 0, total = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int round = 0; round < 200; round++) {
        int out = rank * 1000 + round, in = -1, got = 0, sent = 0;
        long polls = 0;
        MPI_Request r[2];
        MPI_Status st;
        MPI_Irecv(&in, 1, MPI_INT, any ? MPI_ANY_SOURCE : left, any ? MPI_ANY_TAG : 20 + left, c, &r[0]);
        MPI_Isend(&out, 1, MPI_INT, right, 20 + rank, c, &r[1]);
        while (!(got && sent)) {
            if (!got) MPI_Test(&r[0], &got, &st);
            if (!sent) MPI_Test(&r[1], &sent, MPI_STATUS_IGNORE);
            if (++polls == 50000000) {
                printf("rank %d stuck at round %d (receive %s, send %s)\n", rank, round, got ? "done" : "pending",
                       sent ? "done" : "pending");
                fflush(stdout);
            }
        }
        errs += in != left * 1000 + round || st.MPI_SOURCE != left;
    }
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, c);
    MPI_Comm_free(&c);
    if (rank == 0 && total == 0) printf(" No Errors\n");
    MPI_Finalize();
    return total != 0;
}

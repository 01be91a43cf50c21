/* MPI's progress rule under the explicit policy: rank 1 does passive-target RMA (MPI_Win_lock,
 * MPI_Fetch_and_op, MPI_Win_unlock) on a window of MPI_COMM_WORLD while rank 0 waits in a blocking call on
 * a policy communicator (an MPI_Allreduce, then an MPI_Recv). On MPICH >= 4.1 that communicator is a
 * native stream communicator whose blocking calls progress only the stream's reserved VCI, so rank 0
 * never served the RMA, which travels on the implicit pool: rank 1 waited in MPI_Win_unlock for ever
 * and rank 0 in its call (a hang reads as the test's timeout). A correct single-threaded program. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = env_int("MPIXTEST_ROUNDS", 20);
    long *base = calloc(1, sizeof(long));
    MPI_Win win;
    /* MPI_Win_create on ordinary memory: the target's side of passive RMA runs in its progress. */
    OK(MPI_Win_create(base, sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    for (int round = 0; round < rounds; round++) {
        if (rank != 0) {
            long one = 1, old = -1;
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
            OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win));
            OK(MPI_Win_unlock(0, win));
            CHECK(old >= 0, "round %d: fetched %ld", round, old);
        }
        /* Rank 0 enters at once and waits here while the others' RMA needs it. */
        int sum = 0;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == size * (size - 1) / 2, "round %d: allreduce %d", round, sum);
        /* The same with a blocking receive: rank 0 waits for rank 1, which first does its RMA. */
        if (rank == 1) {
            long one = 1, old = -1;
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
            OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win));
            OK(MPI_Win_unlock(0, win));
            OK(MPI_Send(&round, 1, MPI_INT, 0, round, c));
        } else if (rank == 0) {
            int got = -1;
            OK(MPI_Recv(&got, 1, MPI_INT, 1, round, c, MPI_STATUS_IGNORE));
            CHECK(got == round, "round %d: received %d", round, got);
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        long expected = (long)rounds * (size - 1) + (size > 1 ? rounds : 0);
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        long now = *base;
        OK(MPI_Win_unlock(0, win));
        CHECK(now == expected, "counter %ld, expected %ld", now, expected);
    }
    OK(MPI_Comm_free(&c));
    OK(MPI_Win_free(&win));
    free(base);
    return mpixtest_finish();
}

/* MPI's progress rule for the explicit policy's nonblocking collectives: rank 0 starts a collective on a
 * policy communicator, then blocks in an MPI_Recv on that communicator for a message that rank 1 sends
 * only once the collective is complete there. Rank 1 completes it only if rank 0 progresses its share
 * while it sits in MPI_Recv. A correct program. On MPICH >= 4.1 the communicator is a native stream
 * communicator, whose MPI_Recv progresses only the stream's reserved VCI. Where the policy runs the
 * collective on the implicit pool instead (its plain base), it must turn that pool for rank 0 meanwhile:
 * the stream's async thing on MPICH >= 4.3 (shim/src/policy/progress_rule.rs; on 4.1 and 4.2 the policy gives
 * no streams).
 * A hang reads as the test's timeout.
 * Each round: an MPI_Ibarrier (a dissemination barrier: at 4 ranks, its second step needs rank 0's
 * progress), then an MPI_Iallreduce of MPIXTEST_COUNT ints (default 262144, 1 MiB: rendezvous, several
 * steps each needing both sides). MPIXTEST_ROUNDS rounds (default 10). MPIXTEST_THREADS=1: initialised
 * with MPI_THREAD_MULTIPLE (otherwise MPI_Init, single-threaded). */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size, provided;
    if (env_int("MPIXTEST_THREADS", 0)) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = env_int("MPIXTEST_ROUNDS", 10), count = env_int("MPIXTEST_COUNT", 262144);
    int *in = malloc(sizeof(int) * count), *out = malloc(sizeof(int) * count);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    for (int round = 0; round < rounds && size > 1; round++) {
        for (int k = 0; k < 2; k++) {
            MPI_Request r;
            if (k == 0) {
                OK(MPI_Ibarrier(c, &r));
            } else {
                for (int i = 0; i < count; i++) in[i] = rank + i + round;
                OK(MPI_Iallreduce(in, out, count, MPI_INT, MPI_SUM, c, &r));
            }
            int token = -1;
            if (rank == 0) {
                /* Blocked here while rank 1 waits for the collective. */
                OK(MPI_Recv(&token, 1, MPI_INT, 1, k, c, MPI_STATUS_IGNORE));
                CHECK(token == round, "round %d step %d: received %d", round, k, token);
                OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            } else {
                OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                if (rank == 1) OK(MPI_Send(&round, 1, MPI_INT, 0, k, c));
            }
            if (k == 1) {
                int bad = 0;
                for (int i = 0; i < count; i++)
                    if (out[i] != size * (size - 1) / 2 + size * (i + round)) bad++;
                CHECK(bad == 0, "round %d: %d of %d Iallreduce results wrong", round, bad, count);
            }
        }
    }
    OK(MPI_Comm_free(&c));
    free(in);
    free(out);
    return mpixtest_finish();
}

/* The explicit policy keeps applying after MPIXSTREAM_STREAMS communicators have been created and freed
 * (it used to retire a freed communicator's native stream for good, leaving every later communicator
 * implicit without a word): 40 rounds of dup + traffic + free, each communicator carrying a stream (none
 * where the policy leaves them all implicit: MPICH 4.1, and 4.2 below MPI_THREAD_MULTIPLE). */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int without = 0;
    for (int round = 0; round < 40; round++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        MPIX_Stream s = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(c, 0, &s));
        if (s == MPIX_STREAM_NULL) without++;
        int peer = (rank + 1) % size, from = (rank + size - 1) % size, out = round * 100 + rank, in = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_INT, from, round, c, &r[0]));
        OK(MPI_Isend(&out, 1, MPI_INT, peer, round, c, &r[1]));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(in == round * 100 + from, "round %d: got %d", round, in);
        int sum = 0;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == size * (size - 1) / 2, "round %d: allreduce %d", round, sum);
        OK(MPI_Comm_free(&c));
    }
    if (policy_gives_streams())
        CHECK(without == 0, "%d of 40 policy communicators were left without a stream", without);
    else /* MPICH 4.1, 4.2 below MPI_THREAD_MULTIPLE: every one stays implicit, as the banner says. */
        CHECK(without == 40, "%d of 40 communicators got a stream where the policy can keep no progress rule",
              40 - without);
    return mpixtest_finish();
}

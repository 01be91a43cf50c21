/* Persistent requests on a communicator the explicit policy made (an MPI_Comm_dup of MPI_COMM_WORLD; on
 * MPICH >= 4.1 a native stream communicator): a halo-style ring of MPI_Send_init/MPI_Recv_init restarted
 * with MPI_Startall and completed with each completion call (Waitall, Wait, Waitany, Waitsome, a Test
 * loop, a Testall loop), MPI_Ssend_init, and the MPI-4 persistent collectives MPI_Allreduce_init,
 * MPI_Bcast_init and MPI_Reduce_init_c (MPI_Allgather_init_c is left out: Debian's MPICH 4.0.2
 * returns stale data from its sixth start on, under either policy). Native MPICH 5.0.2 waits for a persistent request on the
 * VCI of its pool, the implicit one, while the started operation runs on the stream's reserved VCI, so
 * each hung there (a hang reads as the test's timeout) until the lean library polled them with the
 * stream's progress (shim/src/native_fixes/persistent.rs). Ordinary requests in the same calls still complete. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long out[2], in[2];
    MPI_Request r[2];
    OK(MPI_Recv_init(&in[0], 1, MPI_LONG, left, 7, c, &r[0]));
    OK(MPI_Send_init(&out[0], 1, MPI_LONG, right, 7, c, &r[1]));
    for (int round = 0; round < 60; round++) {
        out[0] = 100L * round + rank;
        in[0] = -1;
        OK(MPI_Startall(2, r));
        int how = round % 6;
        if (how == 0) {
            OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        } else if (how == 1) {
            OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        } else if (how == 2) {
            for (int k = 0; k < 2; k++) {
                int idx = -1;
                OK(MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE));
                CHECK(idx == 0 || idx == 1, "Waitany index %d", idx);
            }
        } else if (how == 3) {
            int done = 0, outcount = 0, idx[2];
            while (done < 2) {
                OK(MPI_Waitsome(2, r, &outcount, idx, MPI_STATUSES_IGNORE));
                CHECK(outcount != MPI_UNDEFINED && outcount > 0, "Waitsome outcount %d", outcount);
                if (outcount == MPI_UNDEFINED || outcount <= 0) break;
                done += outcount;
            }
        } else if (how == 4) {
            for (int k = 0; k < 2; k++) {
                int flag = 0;
                while (!flag) OK(MPI_Test(&r[k], &flag, MPI_STATUS_IGNORE));
            }
        } else {
            int flag = 0;
            while (!flag) OK(MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE));
        }
        CHECK(in[0] == 100L * round + left, "round %d (completion %d): got %ld", round, how, in[0]);
    }
    OK(MPI_Request_free(&r[0]));
    OK(MPI_Request_free(&r[1]));

    /* A synchronous persistent send next to an ordinary receive. */
    OK(MPI_Ssend_init(&out[1], 1, MPI_LONG, right, 8, c, &r[1]));
    for (int round = 0; round < 10; round++) {
        out[1] = 7L * round + rank;
        OK(MPI_Irecv(&in[1], 1, MPI_LONG, left, 8, c, &r[0]));
        OK(MPI_Start(&r[1]));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(in[1] == 7L * round + left, "Ssend_init round %d: got %ld", round, in[1]);
    }
    OK(MPI_Request_free(&r[1]));

    /* Persistent collectives. */
    long mine = 0, sum = 0, root_value = 0;
    long *all = malloc(sizeof(long) * size);
    MPI_Request ar, br, gr;
    OK(MPI_Allreduce_init(&mine, &sum, 1, MPI_LONG, MPI_SUM, c, MPI_INFO_NULL, &ar));
    OK(MPI_Bcast_init(&root_value, 1, MPI_LONG, 0, c, MPI_INFO_NULL, &br));
    OK(MPI_Reduce_init_c(&mine, all, 1, MPI_LONG, MPI_MAX, size - 1, c, MPI_INFO_NULL, &gr));
    for (int round = 0; round < 20; round++) {
        mine = round + rank;
        OK(MPI_Start(&ar));
        OK(MPI_Wait(&ar, MPI_STATUS_IGNORE));
        long want = (long)round * size + (long)size * (size - 1) / 2;
        CHECK(sum == want, "Allreduce_init round %d: %ld, expected %ld", round, sum, want);
        root_value = rank == 0 ? 1000 + round : -1;
        OK(MPI_Start(&br));
        OK(MPI_Wait(&br, MPI_STATUS_IGNORE));
        CHECK(root_value == 1000 + round, "Bcast_init round %d: %ld", round, root_value);
        all[0] = -1;
        OK(MPI_Start(&gr));
        int flag = 0;
        while (!flag) OK(MPI_Test(&gr, &flag, MPI_STATUS_IGNORE));
        if (rank == size - 1) CHECK(all[0] == round + size - 1, "Reduce_init_c round %d: %ld", round, all[0]);
    }
    OK(MPI_Request_free(&ar));
    OK(MPI_Request_free(&br));
    OK(MPI_Request_free(&gr));
    free(all);
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

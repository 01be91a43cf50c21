/* Progress of posted indexed receives while the receiver is busy in other MPI calls (with
 * MPI_THREAD_MULTIPLE, mpixstream's progress thread matches them): a large (rendezvous) indexed send
 * whose receiver sits in MPI_Barrier after posting the receive, and a process sending to itself that
 * waits for its send before its receive. Under MPI's progress rule both complete.
 * MPIXTEST_STREAM_PROGRESS=1 (native backend, where indexed traffic runs on the streams' reserved VCIs,
 * which only their owner drives): the receiver names the source index (so the receive is MPICH's own)
 * and, while it sits in the barrier, lets MPIX_Start_progress_thread drive its stream 0. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPIX_Stream s[2];
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s[0]));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s[1]));
    MPI_Comm mx;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, s, &mx));

    /* rank 0 -> rank 1, 4 MiB, blocking send; rank 1 posts, then waits in a barrier first */
    int stream_progress = env_int("MPIXTEST_STREAM_PROGRESS", 0);
    int n = 1 << 20;
    int *buf = malloc(sizeof(int) * n);
    for (int round = 0; round < 3; round++) {
        if (rank == 0) {
            for (int i = 0; i < n; i++) buf[i] = i + round;
            OK(MPIX_Stream_send(buf, n, MPI_INT, 1, round, mx, 1, 0));
            OK(MPI_Barrier(mx));
        } else if (rank == 1) {
            MPI_Request r;
            memset(buf, 0, sizeof(int) * n);
            if (stream_progress) {
                OK(MPIX_Stream_irecv(buf, n, MPI_INT, 0, round, mx, 1, 0, &r));
                OK(MPIX_Start_progress_thread(s[0]));
                OK(MPI_Barrier(mx));
                OK(MPIX_Stop_progress_thread(s[0]));
            } else {
                OK(MPIX_Stream_irecv(buf, n, MPI_INT, 0, round, mx, MPIX_ANY_INDEX, 0, &r));
                OK(MPI_Barrier(mx));
            }
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            int bad = 0;
            for (int i = 0; i < n; i++) bad += buf[i] != i + round;
            CHECK(bad == 0, "round %d: %d wrong", round, bad);
        } else {
            OK(MPI_Barrier(mx));
        }
    }

    /* to oneself: the send is waited for before the receive */
    int x = 100 + rank, y = -1;
    MPI_Request rr, sr;
    OK(MPIX_Stream_irecv(&y, 1, MPI_INT, rank, 3, mx, 1, 0, &rr));
    OK(MPIX_Stream_isend(&x, 1, MPI_INT, rank, 3, mx, 1, 0, &sr));
    OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    CHECK(y == 100 + rank, "self: %d", y);

    free(buf);
    OK(MPI_Comm_free(&mx));
    OK(MPIX_Stream_free(&s[0]));
    OK(MPIX_Stream_free(&s[1]));
    return mpixtest_finish();
}

/* A multiplex communicator made from a stream communicator carries the parent's stream (MPICH copies it
 * into the user's handle, as into any dup), and so does a dup of it: the library records both. So
 * MPIX_Stream_free of the parent's stream fails while they exist (it used to succeed), and the routes
 * around native MPICH defects apply on them: MPI_Sendrecv, MPI_Iprobe polling and MPI_Ibarrier complete
 * (they hung there on native MPICH, as on a bare stream communicator). */
#include "mpixtest.h"

static int rank, size;

static void traffic(MPI_Comm c, const char *what) {
    int peer = (rank + 1) % size, from = (rank + size - 1) % size, out = rank, in = -1;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, peer, 7, &in, 1, MPI_INT, from, 7, c, MPI_STATUS_IGNORE));
    CHECK(in == from, "%s: MPI_Sendrecv got %d, expected %d", what, in, from);
    MPI_Request r;
    OK(MPI_Isend(&out, 1, MPI_INT, peer, 8, c, &r));
    int flag = 0;
    MPI_Status st;
    while (!flag) OK(MPI_Iprobe(from, 8, c, &flag, &st));
    OK(MPI_Recv(&in, 1, MPI_INT, from, 8, c, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in == from, "%s: probed receive got %d, expected %d", what, in, from);
    OK(MPI_Ibarrier(c, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPIX_Stream parent_stream, mx_stream;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &parent_stream));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &mx_stream));
    MPI_Comm parent, mx, mx_dup;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, parent_stream, &parent));
    OK(MPIX_Stream_comm_create_multiplex(parent, 1, &mx_stream, &mx));
    OK(MPI_Comm_dup(mx, &mx_dup));
    OK(MPI_Comm_free(&parent));

    /* The parent is gone; its stream is still in use by the multiplex communicator and its dup. */
    MPIX_Stream s = parent_stream;
    EXPECT_ERR(MPIX_Stream_free(&s), MPI_ERR_OTHER, "still attached to 2 communicator(s)");

    traffic(mx, "multiplex communicator");
    traffic(mx_dup, "dup of the multiplex communicator");

    OK(MPI_Comm_free(&mx));
    s = parent_stream;
    EXPECT_ERR(MPIX_Stream_free(&s), MPI_ERR_OTHER, "still attached to 1 communicator(s)");
    OK(MPI_Comm_free(&mx_dup));
    OK(MPIX_Stream_free(&parent_stream));
    OK(MPIX_Stream_free(&mx_stream));
    return mpixtest_finish();
}

/* MPI_Cancel on a native MPICH 5.0.2 stream communicator, without mpixstream.
 *   cancel_send send : MPI_Issend of 0 bytes to self, seen by MPI_Iprobe (polled with the stream's
 *                      progress, as MPI_Probe would hang there), then MPI_Cancel of the send.
 *   cancel_send recv : MPI_Irecv that nothing matches, then MPI_Cancel + MPI_Wait.
 * Prints "completed" when it gets through. With 2 ranks, the send case crashes in ucp_request_cancel
 * (on a duplicate of MPI_COMM_WORLD instead, mpi4py's testProbeCancel, which runs this pattern with
 * MPI_Probe and MPI_Request_get_status, passes). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPIX_Stream s;
    MPI_Comm c;
    MPIX_Stream_create(MPI_INFO_NULL, &s);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c);
    int rank, flag = 0;
    MPI_Comm_rank(c, &rank);
    MPI_Request r;
    MPI_Status st;
    if (argc > 1 && strcmp(argv[1], "recv") == 0) {
        int x;
        MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 77, c, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, &st);
        MPI_Test_cancelled(&st, &flag);
        if (!flag) return 1;
    } else {
        MPI_Issend(NULL, 0, MPI_BYTE, rank, 123, c, &r);
        while (!flag) {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, &st);
            if (!flag) MPIX_Stream_progress(s);
        }
        MPI_Cancel(&r);
        MPI_Request_get_status(r, &flag, &st);
        MPI_Test_cancelled(&st, &flag);
        if (!flag) MPI_Recv(NULL, 0, MPI_BYTE, rank, 123, c, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    printf("completed\n");
    fflush(stdout);
    MPI_Comm_free(&c);
    MPIX_Stream_free(&s);
    MPI_Finalize();
    return 0;
}

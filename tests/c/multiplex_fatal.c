/* With the default handler (MPI_ERRORS_ARE_FATAL) on a multiplex communicator, an error that MPICH
 * meets completing an indexed receive (here a truncation of a receive naming its source index, MPICH's
 * own request on the streams layout) ends the job, as on a native communicator: the runner expects a
 * non-zero exit and MPICH's truncation message. With MPIXTEST_SET_AFTER=1 the communicator is made
 * under MPI_ERRORS_RETURN and given MPI_ERRORS_ARE_FATAL afterwards (MPI_Comm_set_errhandler), which
 * must hold the same way (on the native backend: see docs/multiplex.md, "Errors"). Run on 2 processes. */
#include "mpixtest.h"
#include <stdlib.h>

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *after = getenv("MPIXTEST_SET_AFTER");
    int set_after = after && atoi(after) == 1;
    if (set_after) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPIX_Stream s;
    MPI_Comm mx;
    if (MPIX_Stream_create(MPI_INFO_NULL, &s) != MPI_SUCCESS ||
        MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, &s, &mx) != MPI_SUCCESS) {
        printf("setup failed\n");
        return 1;
    }
    if (set_after) MPI_Comm_set_errhandler(mx, MPI_ERRORS_ARE_FATAL);
    int big[4] = {1, 2, 3, 4}, small[2];
    MPI_Request r;
    if (rank == 0) {
        MPIX_Stream_send(big, 4, MPI_INT, 1, 7, mx, 0, 0);
    } else if (rank == 1) {
        MPIX_Stream_irecv(small, 2, MPI_INT, 0, 7, mx, 0, 0, &r);
        int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        printf("still running after a fatal error (MPI_Wait returned %d)\n", rc);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&mx);
    MPIX_Stream_free(&s);
    MPI_Finalize();
    return 0;
}

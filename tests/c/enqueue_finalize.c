/* MPI_Finalize with enqueued work outstanding never hangs.
 *   MPIXTEST_FINALIZE=drain:   work still queued (behind a slow callback) is completed by
 *                              MPI_Finalize, which returns MPI_SUCCESS; the data arrived.
 *   MPIXTEST_FINALIZE=abandon: a receive that nothing matches is reported, cancelled and abandoned
 *                              after MPIXSTREAM_FINALIZE_TIMEOUT; MPI_Finalize returns an error
 *                              (this program then exits 3, and the test expects the report). */
#include "mpixtest.h"
#include <unistd.h>

static void slow_cb(void *a) { usleep(300000); *(int *)a = 42; }

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = getenv("MPIXTEST_FINALIZE");
    int abandon = mode && strcmp(mode, "abandon") == 0;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    MPIX_Stream s;
    MPI_Comm c;
    OK(MPIX_Stream_create(info, &s));
    MPI_Info_free(&info);
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    int v = -1;
    if (!abandon) {
        if (rank == 0) {
            OK(MPIX_Host_queue_launch(s, slow_cb, &v));
            OK(MPIX_Send_enqueue(&v, 1, MPI_INT, 1, 0, c));
        } else if (rank == 1) {
            OK(MPIX_Recv_enqueue(&v, 1, MPI_INT, 0, 0, c, MPI_STATUS_IGNORE));
        }
    } else if (rank == 0) {
        MPI_Request r;
        OK(MPIX_Irecv_enqueue(&v, 1, MPI_INT, 1, 99, c, &r));
        OK(MPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE));
    }
    /* No synchronisation, no frees: straight to MPI_Finalize. */
    int errs = mpixtest_errs;
    int rc = MPI_Finalize();
    if (abandon && rank == 0) {
        printf("MPI_Finalize returned %d (expected an error)\n", rc);
        return rc == MPI_SUCCESS ? 1 : 3;
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "[rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    if (!abandon && rank <= 1 && v != 42) {
        fprintf(stderr, "[rank %d] value %d after MPI_Finalize, expected 42\n", rank, v);
        return 1;
    }
    if (errs) return 1;
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

/* One driver per stream endpoint (a native stream's reserved VCI has no lock in MPICH): a deliberate
 * violation gets a clear error, not corruption.
 *  1. MPIX_Stream_progress(s) while MPIX_Start_progress_thread(s) runs: MPI_ERR_OTHER naming the
 *     progress thread (it used to succeed, two threads then driving one VCI); after the stop it works.
 *  2. Two threads calling MPIX_Stream_progress(s) at once: every call either succeeds or gets the
 *     clear error; nothing crashes, and the stream still carries traffic afterwards.
 *  3. A queue-backed stream is driven by its engine alone: MPIX_Start_progress_thread is refused. */
#include "mpixtest.h"
#include <pthread.h>

static MPIX_Stream shared;
static int iterations = 20000;

static void *hammer(void *arg) {
    int *clashes = arg;
    for (int i = 0; i < iterations; i++) {
        int rc = MPIX_Stream_progress(shared);
        if (rc != MPI_SUCCESS) {
            CHECK(err_class(rc) == MPI_ERR_OTHER && strstr(err_text(rc), "two threads must never drive"),
                  "concurrent progress: unexpected error %s", err_text(rc));
            (*clashes)++;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* 1 */
    MPIX_Stream s;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    OK(MPIX_Start_progress_thread(s));
    EXPECT_ERR(MPIX_Stream_progress(s), MPI_ERR_OTHER, "progress thread");
    EXPECT_ERR(MPIX_Start_progress_thread(s), MPI_ERR_OTHER, "already running");
    OK(MPIX_Stop_progress_thread(s));
    OK(MPIX_Stream_progress(s));

    /* 2 */
    shared = s;
    int clashes[2] = {0, 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, hammer, &clashes[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    if (rank == 0) printf("concurrent MPIX_Stream_progress: %d of %d calls refused\n", clashes[0] + clashes[1], 2 * iterations);
    MPI_Comm c;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    int peer = (rank + 1) % size, from = (rank + size - 1) % size, out = rank, in = -1;
    MPI_Request r[2];
    OK(MPI_Irecv(&in, 1, MPI_INT, from, 7, c, &r[0]));
    OK(MPI_Isend(&out, 1, MPI_INT, peer, 7, c, &r[1]));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(in == from, "after the clashes the stream carried %d, expected %d", in, from);
    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&s));

    /* 3 */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "mpixstream_host_queue");
    MPIX_Stream q;
    OK(MPIX_Stream_create(info, &q));
    MPI_Info_free(&info);
    EXPECT_ERR(MPIX_Start_progress_thread(q), MPI_ERR_OTHER, "engine");
    OK(MPIX_Stream_free(&q));
    return mpixtest_finish();
}

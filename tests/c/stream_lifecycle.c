/* Calls outside MPI_Init..MPI_Finalize and thread-level mismatches: each gets a clear error, never a
 * crash. Initialised with MPI_THREAD_SINGLE: streams work (the main thread is the serial context),
 * a progress thread is refused with a message naming MPI_THREAD_MULTIPLE. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    MPIX_Stream s = MPIX_STREAM_NULL;
    int before = MPIX_Stream_create(MPI_INFO_NULL, &s);
    int before_progress = MPIX_Stream_progress(MPIX_STREAM_NULL);

    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(before == MPI_ERR_OTHER, "MPIX_Stream_create before MPI_Init returned %d", before);
    CHECK(before_progress == MPI_ERR_OTHER, "MPIX_Stream_progress before MPI_Init returned %d", before_progress);
    CHECK(s == MPIX_STREAM_NULL, "a stream was created before MPI_Init");

    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPI_Comm c;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    int size;
    MPI_Comm_size(c, &size);
    CHECK(sum == size, "allreduce on a stream comm under MPI_THREAD_SINGLE: %d", sum);
    if (provided < MPI_THREAD_MULTIPLE)
        EXPECT_ERR(MPIX_Start_progress_thread(s), MPI_ERR_OTHER, "MPI_THREAD_MULTIPLE");
    MPI_Comm_free(&c);
    OK(MPIX_Stream_free(&s));

    /* the verdict, then MPI_Finalize, then calls after it */
    int total = 0;
    MPI_Allreduce(&mpixtest_errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    int after = MPIX_Stream_create(MPI_INFO_NULL, &s);
    int after_free = MPIX_Stream_free(&s);
    if (after != MPI_ERR_OTHER || after_free != MPI_ERR_OTHER) {
        fprintf(stderr, "[rank %d] after MPI_Finalize: create %d free %d\n", rank, after, after_free);
        total++;
    }
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    return total != 0;
}

/* Enqueue needs MPI_THREAD_MULTIPLE (the engine's thread calls MPI). On the serial backend a program that
 * calls plain MPI_Init gets a clear error when it creates a queue-backed stream, unless
 * MPIXSTREAM_THREAD_MULTIPLE=1 makes our MPI_Init ask MPICH for MPI_THREAD_MULTIPLE; then enqueue works.
 * The native backend always asks MPICH for MPI_THREAD_MULTIPLE (its progress helper thread calls MPI:
 * shim/src/helper.rs): plain MPI_Init gives that level there, and enqueue works. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size, level = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Query_thread(&level);
    int asked = env_int("MPIXSTREAM_THREAD_MULTIPLE", 0) || native_backend();
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    MPIX_Stream s = MPIX_STREAM_NULL;
    if (!asked) {
        CHECK(level < MPI_THREAD_MULTIPLE, "plain MPI_Init gave level %d", level);
        EXPECT_ERR(MPIX_Stream_create(info, &s), MPI_ERR_OTHER, "MPIXSTREAM_THREAD_MULTIPLE=1");
        /* Streams without a queue do not need it. */
        OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
        OK(MPIX_Stream_free(&s));
    } else {
        CHECK(level == MPI_THREAD_MULTIPLE, "MPIXSTREAM_THREAD_MULTIPLE=1 or the native backend gave level %d", level);
        OK(MPIX_Stream_create(info, &s));
        MPI_Comm c;
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
        int v = rank, sum = -1;
        OK(MPIX_Allreduce_enqueue(&v, &sum, 1, MPI_INT, MPI_SUM, c));
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(sum == size * (size - 1) / 2, "allreduce %d", sum);
        OK(MPI_Comm_free(&c));
        OK(MPIX_Stream_free(&s));
    }
    MPI_Info_free(&info);
    return mpixtest_finish();
}

/* Every error of the core API returns a code through the error handler (MPI_ERRORS_RETURN here),
 * with the right class and a readable MPI_Error_string; nothing hangs or crashes. Pool size 2. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    MPIX_Stream bogus = 0x1234, s, s2, s3;
    /* invalid and freed handles */
    EXPECT_ERR(MPIX_Stream_free(&bogus), MPIX_ERR_STREAM, "is not a valid stream handle");
    EXPECT_ERR(MPIX_Stream_progress(bogus), MPIX_ERR_STREAM, "is not a valid stream handle");
    MPIX_Stream out_of_range = (MPIX_Stream)0xbc0000ff;
    EXPECT_ERR(MPIX_Stream_progress(out_of_range), MPIX_ERR_STREAM, "is not a valid stream handle");
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPIX_Stream stale = s;
    OK(MPIX_Stream_free(&s));
    EXPECT_ERR(MPIX_Stream_free(&stale), MPIX_ERR_STREAM, "has been freed");
    MPI_Comm c;
    EXPECT_ERR(MPIX_Stream_comm_create(MPI_COMM_WORLD, stale, &c), MPIX_ERR_STREAM, "has been freed");
    s = MPIX_STREAM_NULL;
    EXPECT_ERR(MPIX_Stream_free(&s), MPIX_ERR_STREAM, "MPIX_STREAM_NULL");

    /* null pointers */
    EXPECT_ERR(MPIX_Stream_create(MPI_INFO_NULL, NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Stream_free(NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Comm_get_stream(MPI_COMM_WORLD, 0, NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Stream_comm_create(MPI_COMM_NULL, MPIX_STREAM_NULL, &c), MPI_ERR_COMM, "MPI_COMM_NULL");

    /* exhaustion: pool of 2 */
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s2));
    EXPECT_ERR(MPIX_Stream_create(MPI_INFO_NULL, &s3), MPI_ERR_OTHER, "out of streams");
    EXPECT_ERR(MPIX_Stream_create(MPI_INFO_NULL, &s3), MPI_ERR_OTHER, "MPIXSTREAM_STREAMS");

    /* unknown stream type */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "abacus");
    OK(MPIX_Stream_free(&s2));
    EXPECT_ERR(MPIX_Stream_create(info, &s3), MPI_ERR_INFO_VALUE, "abacus");
    MPI_Info_free(&info);

    /* free while attached; index out of range */
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    EXPECT_ERR(MPIX_Stream_free(&s), MPI_ERR_OTHER, "still attached to 1 communicator");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    EXPECT_ERR(MPIX_Comm_get_stream(c, 1, &s3), MPI_ERR_ARG, "out of range");
    EXPECT_ERR(MPIX_Comm_get_stream(c, -1, &s3), MPI_ERR_ARG, "out of range");
    MPI_Comm_free(&c);
    OK(MPIX_Stream_free(&s));

    /* progress threads */
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    EXPECT_ERR(MPIX_Stop_progress_thread(s), MPI_ERR_OTHER, "no progress thread");
    if (provided == MPI_THREAD_MULTIPLE) {
        OK(MPIX_Start_progress_thread(s));
        EXPECT_ERR(MPIX_Start_progress_thread(s), MPI_ERR_OTHER, "already running");
        OK(MPIX_Stop_progress_thread(s));
    }
    OK(MPIX_Stream_free(&s));

    /* hex: round trip, bit-exact form, malformed values, wrong sizes */
    MPI_Info_create(&info);
    unsigned long long v = 0x5555DEADBEEFULL, back = 0;
    OK(MPIX_Info_set_hex(info, "value", &v, sizeof v));
    char text[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    MPI_Info_get(info, "value", MPI_MAX_INFO_VAL, text, &flag);
    CHECK(flag && strcmp(text, "EFBEADDE5555[2]") == 0, "set_hex wrote '%s'", text);
    OK(MPIX_Info_get_hex(info, "value", &back, sizeof back, &flag));
    CHECK(flag == 1 && back == v, "get_hex: flag %d value %llx", flag, back);
    OK(MPIX_Info_get_hex(info, "absent", &back, sizeof back, &flag));
    CHECK(flag == 0, "absent key: flag %d", flag);
    int small;
    EXPECT_ERR(MPIX_Info_get_hex(info, "value", &small, sizeof small, &flag), MPI_ERR_INFO_VALUE, "asked for");
    MPI_Info_set(info, "bad", "EFZZ");
    EXPECT_ERR(MPIX_Info_get_hex(info, "bad", &small, 2, &flag), MPI_ERR_INFO_VALUE, "invalid character");
    MPI_Info_set(info, "bad2", "[2");
    EXPECT_ERR(MPIX_Info_get_hex(info, "bad2", &small, 2, &flag), MPI_ERR_INFO_VALUE, "malformed");
    EXPECT_ERR(MPIX_Info_set_hex(info, "value", &v, -1), MPI_ERR_COUNT, "negative");
    EXPECT_ERR(MPIX_Info_set_hex(info, NULL, &v, 8), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Info_set_hex(info, "value", NULL, 8), MPI_ERR_ARG, "null pointer");
    char big[600];
    memset(big, 0xab, sizeof big);
    EXPECT_ERR(MPIX_Info_set_hex(info, "value", big, sizeof big), MPI_ERR_INFO_VALUE, "MPI_MAX_INFO_VAL");
    OK(MPIX_Info_set_hex(info, "value", big, 512)); /* exactly MPI_MAX_INFO_VAL characters */
    MPI_Info_free(&info);

    /* the class of an MPI error of MPICH's own is untouched by our MPI_Error_class */
    int cls = -1;
    MPI_Error_class(MPI_ERR_TRUNCATE, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE class %d", cls);

    /* errors go to the communicator's handler: MPI_COMM_WORLD is still usable */
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    return mpixtest_finish();
}

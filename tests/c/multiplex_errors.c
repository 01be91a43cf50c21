/* Errors of multiplex stream communicators, with MPI_ERRORS_RETURN: classes and readable messages.
 * Creation: negative count, invalid or freed stream in the array, null arguments, MPI_COMM_NULL (all
 * processes fail together when one passes bad arguments). Indexed calls: index out of range, no stream
 * attached at that index, MPIX_ANY_INDEX as a destination index, tag out of the multiplex range (and the
 * bound from MPIX_Comm_multiplex_tag_ub), bad
 * ranks, negative count, null request, a non-multiplex communicator, an error MPICH finds on a send (under
 * MPI_ERRORS_RETURN and under a handler function), truncation. Streams attached to a
 * multiplex communicator cannot be freed until it is. Run on 2 processes or more. */
#include "mpixtest.h"

static int handler_calls, handler_class;
static MPI_Comm handler_comm = MPI_COMM_NULL;
static void count_errors(MPI_Comm *comm, int *code, ...) {
    handler_calls++;
    handler_comm = *comm;
    MPI_Error_class(*code, &handler_class);
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    MPIX_Stream s[2];
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s[0]));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s[1]));
    MPI_Comm mx = MPI_COMM_NULL;

    /* creation errors; every process gets an error of the same class, the culprit its own message */
    if (rank == 0) EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, -1, s, &mx), MPI_ERR_COUNT, "negative");
    else EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, s, &mx), MPI_ERR_COUNT, "rank 0 passed invalid");
    CHECK(mx == MPI_COMM_NULL, "a communicator was created");
    MPIX_Stream bad[2] = {s[0], (MPIX_Stream)0x1234};
    if (rank == size - 1)
        EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, bad, &mx), MPIX_ERR_STREAM,
                   "array_of_streams[1]: 0x00001234 is not a valid stream handle");
    else
        EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, s, &mx), MPIX_ERR_STREAM, "passed invalid");
    MPIX_Stream gone;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &gone));
    MPIX_Stream gone_handle = gone;
    OK(MPIX_Stream_free(&gone));
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, &gone_handle, &mx), MPIX_ERR_STREAM,
               "has been freed");
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, NULL, &mx), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, s, NULL), MPI_ERR_ARG, "newcomm");
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_NULL, 1, s, &mx), MPI_ERR_COMM, "MPI_COMM_NULL");

    /* rank 0 attaches one stream, the others two: S = 2 */
    int n = rank == 0 ? 1 : 2;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, n, s, &mx));
    CHECK(mx != MPI_COMM_NULL, "no communicator");
    int x = 0;
    MPI_Request r;
    MPI_Status st;
    int peer = rank == 0 ? 1 : 0;

    /* attached streams cannot be freed */
    MPIX_Stream s0 = s[0];
    int rc = MPIX_Stream_free(&s0);
    CHECK(rc != MPI_SUCCESS && strstr(err_text(rc), "still attached"), "freeing an attached stream: %s", err_text(rc));

    /* indices */
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, 0, mx, n, 0), MPI_ERR_ARG, "source_stream_index");
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, 0, mx, -1, 0), MPI_ERR_ARG, "out of range");
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, 0, mx, 0, 2), MPI_ERR_ARG, "dest_stream_index 2 is out of range");
    if (rank == 1)
        EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, 0, 0, mx, 0, 1), MPIX_ERR_STREAM,
                   "rank 0 has no stream attached at index 1");
    EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, peer, 0, mx, 0, MPIX_ANY_INDEX, &st), MPI_ERR_ARG,
               "MPIX_ANY_INDEX is allowed only as the source_stream_index");
    EXPECT_ERR(MPIX_Stream_irecv(&x, 1, MPI_INT, peer, 0, mx, 0, n, &r), MPI_ERR_ARG, "dest_stream_index");
    EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, mx, 5, 0, &st), MPI_ERR_ARG, "source_stream_index 5");
    if (rank == 1)
        EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, 0, 0, mx, 1, 0, &st), MPIX_ERR_STREAM, "no stream attached");
    MPIX_Stream got;
    EXPECT_ERR(MPIX_Comm_get_stream(mx, n, &got), MPI_ERR_ARG, "out of range");

    /* tags: the multiplex range is MPI_TAG_UB shared among S = 2 source indices */
    int *ub, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    int max = (*ub - 1) / 2;
    /* the bound is queryable; on other communicators the query is an error */
    int queried = -1;
    OK(MPIX_Comm_multiplex_tag_ub(mx, &queried));
    CHECK(queried == max, "MPIX_Comm_multiplex_tag_ub: %d, expected %d", queried, max);
    EXPECT_ERR(MPIX_Comm_multiplex_tag_ub(MPI_COMM_WORLD, &queried), MPI_ERR_COMM, "not a multiplex");
    EXPECT_ERR(MPIX_Comm_multiplex_tag_ub(mx, NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, max + 1, mx, 0, 0), MPI_ERR_TAG, "tags run from 0 to");
    EXPECT_ERR(MPIX_Stream_isend(&x, 1, MPI_INT, peer, -3, mx, 0, 0, &r), MPI_ERR_TAG, "tag -3 is invalid");
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, MPI_ANY_TAG, mx, 0, 0), MPI_ERR_TAG, "invalid");
    EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, peer, max + 1, mx, 0, 0, &st), MPI_ERR_TAG, "tags run from 0 to");
    /* the largest tag works, as do wildcards */
    if (rank <= 1) {
        int y = -1;
        OK(MPIX_Stream_irecv(&y, 1, MPI_INT, peer, max, mx, MPIX_ANY_INDEX, 0, &r));
        x = 42;
        OK(MPIX_Stream_send(&x, 1, MPI_INT, peer, max, mx, 0, 0));
        OK(MPI_Wait(&r, &st));
        CHECK(y == 42 && st.MPI_TAG == max, "largest tag: %d, tag %d", y, st.MPI_TAG);
    }

    /* ranks, counts, pointers */
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, size, 0, mx, 0, 0), MPI_ERR_RANK, "not a rank");
    EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, -7, 0, mx, 0, 0, &st), MPI_ERR_RANK, "not a rank");
    EXPECT_ERR(MPIX_Stream_recv(&x, -1, MPI_INT, peer, 0, mx, 0, 0, &st), MPI_ERR_COUNT, "negative");
    EXPECT_ERR(MPIX_Stream_irecv(&x, 1, MPI_INT, peer, 0, mx, 0, 0, NULL), MPI_ERR_ARG, "request");

    /* An error MPICH finds itself, on the send's hidden communicator (a null datatype): returned
     * under MPI_ERRORS_RETURN, and through a handler function of the user's, set after creation,
     * called once with the multiplex communicator, then not after MPI_ERRORS_RETURN replaced it.
     * Then a valid send again. */
    EXPECT_ERR(MPIX_Stream_isend(&x, 1, MPI_DATATYPE_NULL, peer, 0, mx, 0, 0, &r), MPI_ERR_TYPE, "");
    MPI_Errhandler counting;
    OK(MPI_Comm_create_errhandler(count_errors, &counting));
    OK(MPI_Comm_set_errhandler(mx, counting));
    rc = MPIX_Stream_isend(&x, 1, MPI_DATATYPE_NULL, peer, 0, mx, 0, 0, &r);
    CHECK(rc != MPI_SUCCESS && handler_calls == 1 && handler_comm == mx && handler_class == MPI_ERR_TYPE,
          "MPICH's error under a handler function: rc %d, %d call(s), communicator %s, class %d", rc,
          handler_calls, handler_comm == mx ? "the multiplex one" : "another", handler_class);
    OK(MPI_Comm_set_errhandler(mx, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&counting));
    EXPECT_ERR(MPIX_Stream_isend(&x, 1, MPI_DATATYPE_NULL, peer, 0, mx, 0, 0, &r), MPI_ERR_TYPE, "");
    CHECK(handler_calls == 1, "the handler was called after MPI_ERRORS_RETURN replaced it");
    if (rank <= 1) {
        int y = -1;
        x = 7 + rank;
        OK(MPIX_Stream_irecv(&y, 1, MPI_INT, peer, 3, mx, 0, 0, &r));
        MPI_Request sr;
        OK(MPIX_Stream_isend(&x, 1, MPI_INT, peer, 3, mx, 0, 0, &sr));
        OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&r, &st));
        CHECK(y == 7 + peer && st.MPI_SOURCE == peer && st.MPI_TAG == 3, "after the errors: got %d from %d tag %d", y,
              st.MPI_SOURCE, st.MPI_TAG);
    }

    /* not a multiplex communicator */
    EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, 0, 0), MPI_ERR_COMM, "not a multiplex");
    MPI_Comm sc;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[1], &sc));
    EXPECT_ERR(MPIX_Stream_isend(&x, 1, MPI_INT, peer, 0, sc, 0, 0, &r), MPI_ERR_COMM, "single-stream");
    EXPECT_ERR(MPIX_Stream_recv(&x, 1, MPI_INT, peer, 0, MPI_COMM_NULL, 0, 0, &st), MPI_ERR_COMM, "MPI_COMM_NULL");
    OK(MPI_Comm_free(&sc));

    /* truncation: blocking reports MPI_ERR_TRUNCATE; nonblocking completes with an error */
    if (rank <= 1) {
        int big[4] = {1, 2, 3, 4}, small[2];
        OK(MPIX_Stream_isend(big, 4, MPI_INT, peer, 9, mx, 0, 0, &r));
        EXPECT_ERR(MPIX_Stream_recv(small, 2, MPI_INT, peer, 9, mx, 0, 0, &st), MPI_ERR_TRUNCATE, "");
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        MPI_Request rr;
        OK(MPIX_Stream_isend(big, 4, MPI_INT, peer, 10, mx, 0, 0, &r));
        OK(MPIX_Stream_irecv(small, 2, MPI_INT, peer, 10, mx, 0, 0, &rr));
        rc = MPI_Wait(&rr, &st);
        CHECK(rc != MPI_SUCCESS, "a truncated nonblocking receive succeeded");
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }

    OK(MPI_Barrier(mx));
    OK(MPI_Comm_free(&mx));
    OK(MPIX_Stream_free(&s[0]));
    OK(MPIX_Stream_free(&s[1]));
    return mpixtest_finish();
}

/* MPICH's asynchronous things (MPIX_Async_start, MPIX_Async_spawn; MPICH >= 4.3) given our stream
 * handles. Our handles look like MPICH's (0xbc000000 | i) without being MPICH's: passed through
 * unchanged they named another MPICH stream (or none). Now, on the native backend, the handle is
 * translated to the stream's native stream (a thing started on it completes under
 * MPIX_Stream_progress of that stream, whatever the two handles' indices); on the serial backend and on
 * an MPICH without asynchronous things the call is refused with a clear error, and an invalid handle is
 * MPIX_ERR_STREAM. MPIXTEST_ASYNC=run|refused says which is expected (run: refused as absent on a native
 * MPICH older than 4.3). */
#include "mpixtest.h"

#if !defined(MPICH_NUMVERSION) || MPICH_NUMVERSION < 40300000
/* This mpi.h has no asynchronous things: the prototypes of MPICH >= 4.3 (the thing is an opaque pointer). */
typedef void *MPIX_Async_thing;
typedef int(MPIX_Async_poll_function)(MPIX_Async_thing);
enum { MPIX_ASYNC_NOPROGRESS = 0, MPIX_ASYNC_DONE = 1 };
int MPIX_Async_start(MPIX_Async_poll_function *poll_fn, void *extra_state, MPIX_Stream stream);
int MPIX_Async_spawn(MPIX_Async_thing async_thing, MPIX_Async_poll_function *poll_fn, void *extra_state,
                     MPIX_Stream stream);
#endif

static volatile int polls = 0, done = 0;

static int poll_fn(MPIX_Async_thing thing) {
    (void)thing;
    if (++polls < 3) return MPIX_ASYNC_NOPROGRESS;
    done = 1;
    return MPIX_ASYNC_DONE;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *mode = getenv("MPIXTEST_ASYNC");
    int run = mode && strcmp(mode, "run") == 0;
    /* Our handles and MPICH's apart: streams 0, 1, 2; free 0 and 2; the next one is our slot 0,
     * while MPICH hands out the stream it freed last. */
    MPIX_Stream a, b, c, s;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &a));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &b));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &c));
    OK(MPIX_Stream_free(&a));
    OK(MPIX_Stream_free(&c));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));

    EXPECT_ERR(MPIX_Async_start(poll_fn, NULL, (MPIX_Stream)0xbc00002a), MPIX_ERR_STREAM, "0xbc00002a");
    if (run) {
        int rc = MPIX_Async_start(poll_fn, NULL, s);
        if (rc != MPI_SUCCESS && strstr(err_text(rc), "has no asynchronous things")) {
            /* A native MPICH older than 4.3 (the C table's native rows also run on 4.1.3 and 4.2.3). */
            MPIX_Stream_free(&s);
            MPIX_Stream_free(&b);
            return mpixtest_finish();
        }
        OK(rc);
        for (long i = 0; i < 100000000L && !done; i++) OK(MPIX_Stream_progress(s));
        CHECK(done, "the asynchronous thing on stream 0x%08x did not complete (%d polls)", (unsigned)s, polls);
    } else {
        EXPECT_ERR(MPIX_Async_start(poll_fn, NULL, s), MPI_ERR_OTHER, "MPIX_Async_start");
        EXPECT_ERR(MPIX_Async_spawn(NULL, poll_fn, NULL, s), MPI_ERR_OTHER, "MPIX_Async_spawn");
        CHECK(polls == 0, "a refused asynchronous thing was polled %d times", polls);
    }
    OK(MPIX_Stream_free(&s));
    OK(MPIX_Stream_free(&b));
    return mpixtest_finish();
}

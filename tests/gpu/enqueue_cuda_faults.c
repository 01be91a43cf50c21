/* CUDA queue failures give a clear error and nothing hangs or crashes, 2 ranks (others idle).
 *   - a stream destroyed mid-run: a receive is queued behind a gate, the CUDA stream is destroyed
 *     (the driver still runs the work already queued on it), the next enqueue on it fails with
 *     MPI_ERR_OTHER through the communicator's error handler, naming CUDA_ERROR_INVALID_CONTEXT (what
 *     an H200's driver answers; the stand-in too), and so does the one after it; the gate opens, the
 *     queued receive completes with the data, and the communicator and stream are freed without the
 *     library touching the stale handle again (on a released stream the stand-in faults, as a driver
 *     reading freed memory may);
 *   - a foreign handle: MPIX_Stream_create with a value that is no CUDA stream (0x1234) fails with
 *     an MPI error naming the driver's answer, on every rank, and nothing crashes;
 *   - a context error mid-run (only with the CPU stand-in, whose test hook cuStandinFailContext
 *     makes the context fail as after a GPU fault): a receive queued behind a gate can never start;
 *     the next enqueue call reports it (MPI_ERR_OTHER, "never started", the CUDA error's name), the
 *     communicator and stream are then freed (nothing pending), and MPI_Finalize returns.
 * Needs a CUDA driver: a GPU, or the CPU stand-in (tests/scripts/enqueue_cuda_standin.sh). */
#include "cudatest.h"
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void error_text(int rc, char *msg) {
    int len = 0;
    msg[0] = 0;
    MPI_Error_string(rc, msg, &len);
}

/* Retries MPI_Comm_free until the communicator's enqueued work is done (MPI_ERR_PENDING until
 * then); fails the test after 10 s. */
static void free_when_done(MPI_Comm *c) {
    double t0 = now();
    int rc;
    while ((rc = MPI_Comm_free(c)) != MPI_SUCCESS && now() - t0 < 10) usleep(1000);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_free still fails after %.0f s (rc %d)", now() - t0, rc);
}

static int handler_calls;
static void count_errors(MPI_Comm *c, int *code, ...) {
    (void)c, (void)code;
    handler_calls++;
}

static void destroyed_stream(void) {
    CUstream cs;
    MPIX_Stream s;
    MPI_Comm c;
    cuda_stream_comm(&cs, &s, &c);
    MPI_Errhandler counting;
    MPI_Comm_create_errhandler(count_errors, &counting);
    MPI_Comm_set_errhandler(c, counting);
    int *buf;
    CU(cu.MemHostAlloc((void **)&buf, 16 * sizeof(int), 1));
    for (int i = 0; i < 16; i++) buf[i] = -1;
    if (rank == 0) {
        volatile uint32_t *gate = gate_close(cs);
        OK(MPIX_Recv_enqueue(buf, 16, MPI_INT, 1, 3, c, MPI_STATUS_IGNORE));
        CU(cu.StreamDestroy(cs));
        int rc = MPIX_Send_enqueue(buf, 1, MPI_INT, 1, 4, c);
        char msg[MPI_MAX_ERROR_STRING];
        error_text(rc, msg);
        CHECK(rc != MPI_SUCCESS && strstr(msg, "CUDA_ERROR_INVALID_CONTEXT") && strstr(msg, "destroyed"),
              "enqueue on a destroyed stream: rc %d, \"%s\"", rc, msg);
        CHECK(handler_calls == 1, "the communicator's error handler was called %d times, not once", handler_calls);
        rc = MPIX_Recv_enqueue(buf, 1, MPI_INT, 1, 4, c, MPI_STATUS_IGNORE);
        error_text(rc, msg);
        CHECK(rc != MPI_SUCCESS && strstr(msg, "CUDA_ERROR_INVALID_CONTEXT"), "second enqueue on a destroyed stream: rc %d, \"%s\"",
              rc, msg);
        CHECK(handler_calls == 2, "the communicator's error handler was called %d times, not twice", handler_calls);
        MPI_Barrier(MPI_COMM_WORLD); /* rank 1 sends */
        gate_open(gate);
        free_when_done(&c);
        for (int i = 0; i < 16; i++) CHECK(buf[i] == 500 + i, "destroyed stream: received buf[%d] = %d", i, buf[i]);
        CU(cu.MemFreeHost((void *)gate));
    } else {
        if (rank == 1) {
            for (int i = 0; i < 16; i++) buf[i] = 500 + i;
            MPI_Send(buf, 16, MPI_INT, 0, 3, c); /* direct: rank 1 enqueued nothing on c */
        }
        MPI_Barrier(MPI_COMM_WORLD);
        OK(MPI_Comm_free(&c));
    }
    OK(MPIX_Stream_free(&s));
    MPI_Errhandler_free(&counting);
    if (rank != 0) CU(cu.StreamDestroy(cs));
    CU(cu.MemFreeHost(buf));
}

static void foreign_stream(void) {
    MPI_Info info;
    MPIX_Stream s = MPIX_STREAM_NULL;
    void *foreign = (void *)0x1234;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    OK(MPIX_Info_set_hex(info, "value", &foreign, sizeof foreign));
    int rc = MPIX_Stream_create(info, &s);
    MPI_Info_free(&info);
    char msg[MPI_MAX_ERROR_STRING];
    error_text(rc, msg);
    CHECK(rc != MPI_SUCCESS && strstr(msg, "not a CUDA stream"), "a foreign handle: rc %d, \"%s\"", rc, msg);
    if (rc == MPI_SUCCESS) OK(MPIX_Stream_free(&s));
}

static void context_error(void) {
    CUresult (*fail)(CUcontext, CUresult);
    *(void **)&fail = dlsym(cu.lib, "cuStandinFailContext");
    int have = fail != NULL, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (rank == 0) printf("context error: skipped (a real driver has no fault injection)\n");
        return;
    }
    CUstream cs;
    MPIX_Stream s;
    MPI_Comm c;
    cuda_stream_comm(&cs, &s, &c);
    static int buf[4];
    if (rank == 0) {
        gate_close(cs);
        OK(MPIX_Recv_enqueue(buf, 4, MPI_INT, 1, 9, c, MPI_STATUS_IGNORE)); /* never sent */
        CU(fail(ctx, 719 /* CUDA_ERROR_LAUNCH_FAILED */));
        /* The failure reaches the application at its next call on the stream. */
        double t0 = now();
        int rc;
        char msg[MPI_MAX_ERROR_STRING] = "";
        do {
            usleep(20000);
            rc = MPIX_Barrier_enqueue(c);
            error_text(rc, msg);
        } while (rc != MPI_SUCCESS && !strstr(msg, "never started") && now() - t0 < 10);
        CHECK(rc != MPI_SUCCESS && strstr(msg, "never started") && strstr(msg, "CUDA_ERROR_LAUNCH_FAILED"),
              "after a context error: rc %d, \"%s\"", rc, msg);
        CHECK(now() - t0 < 5, "the context error took %.1f s to be reported", now() - t0);
        rc = MPIX_Barrier_enqueue(c);
        error_text(rc, msg);
        CHECK(rc != MPI_SUCCESS && strstr(msg, "CUDA_ERROR_LAUNCH_FAILED"), "enqueue after a context error: rc %d, \"%s\"",
              rc, msg);
        free_when_done(&c);
    } else {
        OK(MPI_Comm_free(&c));
    }
    OK(MPIX_Stream_free(&s));
}

int main(int argc, char **argv) {
    cudatest_init(&argc, &argv);
    if (size >= 2) {
        destroyed_stream();
        foreign_stream();
        context_error(); /* last: the context is unusable afterwards */
    }
    return cudatest_finish();
}

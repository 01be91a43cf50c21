/* Enqueue errors (MPI_ERRORS_RETURN): enqueue on a communicator without a queue-backed stream,
 * requests of two streams in one Waitall_enqueue, requests that are not ours (and ours given to
 * MPI_Wait), freeing a communicator or stream while enqueued work is pending, a failed enqueued
 * operation reported later, stream types we refuse (CUDA without libcuda, HIP, malformed values),
 * enqueue on a multiplex stream communicator and (MPIXSTREAM_POLICY=explicit) on a policy stream. */
#include "mpixtest.h"
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

static MPIX_Stream typed_stream(const char *type, int *rc) {
    MPI_Info info;
    MPIX_Stream s = MPIX_STREAM_NULL;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", type);
    *rc = MPIX_Stream_create(info, &s);
    MPI_Info_free(&info);
    return s;
}

static MPIX_Stream host_stream(void) {
    int rc;
    MPIX_Stream s = typed_stream(MPIX_HOST_QUEUE_TYPE, &rc);
    CHECK(rc == MPI_SUCCESS, "host stream: %s", err_text(rc));
    return s;
}

static void sleep_cb(void *a) { usleep(*(int *)a); }

/* A stream communicator that returns errors (they are raised on it). */
static MPI_Comm stream_comm(MPI_Comm parent, MPIX_Stream s) {
    MPI_Comm c = MPI_COMM_NULL;
    OK(MPIX_Stream_comm_create(parent, s, &c));
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    return c;
}

static void stream_types(void) {
    int rc;
    /* CUDA stream: decoded first (a malformed value is an info error with or without CUDA). */
    MPI_Info info;
    MPIX_Stream s = MPIX_STREAM_NULL;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    EXPECT_ERR(MPIX_Stream_create(info, &s), MPI_ERR_INFO_VALUE, "needs key \"value\"");
    int four = 7;
    OK(MPIX_Info_set_hex(info, "value", &four, sizeof four));
    EXPECT_ERR(MPIX_Stream_create(info, &s), MPI_ERR_INFO_VALUE, "not an 8-byte stream handle");
    void *fake = (void *)0x1234;
    OK(MPIX_Info_set_hex(info, "value", &fake, sizeof fake));
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!cuda) {
        /* No CUDA here: a clear error naming the cause, no crash. */
        EXPECT_ERR(MPIX_Stream_create(info, &s), MPI_ERR_OTHER, "libcuda.so.1 cannot be loaded");
        EXPECT_ERR(MPIX_Stream_create(info, &s), MPI_ERR_OTHER, "CUDA streams need the CUDA driver");
    } else {
        /* With CUDA, 0x1234 is not a stream of ours: refused by the driver, not a crash. */
        int rc2 = MPIX_Stream_create(info, &s);
        CHECK(rc2 != MPI_SUCCESS, "a fake CUDA stream handle was accepted");
        dlclose(cuda);
    }
    CHECK(s == MPIX_STREAM_NULL, "stream set on failure");
    MPI_Info_free(&info);
    s = typed_stream("hipStream_t", &rc);
    EXPECT_ERR(rc, MPI_ERR_UNSUPPORTED_OPERATION, "HIP streams are not supported");
    s = typed_stream("sycl_queue", &rc);
    EXPECT_ERR(rc, MPI_ERR_INFO_VALUE, "is not a stream type");
    (void)s;
}

static void no_queue(void) {
    int v = 1;
    EXPECT_ERR(MPIX_Send_enqueue(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COMM, "has no local stream");
    MPI_Request r;
    EXPECT_ERR(MPIX_Irecv_enqueue(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &r), MPI_ERR_COMM, "has no local stream");
    EXPECT_ERR(MPIX_Barrier_enqueue(MPI_COMM_WORLD), MPI_ERR_COMM, "has no local stream");
    /* A stream without a queue (no info type): its communicators cannot enqueue either. */
    MPIX_Stream plain;
    MPI_Comm pc;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &plain));
    pc = stream_comm(MPI_COMM_WORLD, plain);
    EXPECT_ERR(MPIX_Allreduce_enqueue(&v, &v, 1, MPI_INT, MPI_SUM, pc), MPIX_ERR_STREAM, "has no queue");
    EXPECT_ERR(MPIX_Host_queue_synchronize(plain), MPIX_ERR_STREAM, "is not a host queue");
    int d = 0;
    EXPECT_ERR(MPIX_Host_queue_launch(plain, sleep_cb, &d), MPIX_ERR_STREAM, "is not a host queue");
    OK(MPI_Comm_free(&pc));
    OK(MPIX_Stream_free(&plain));
    /* A multiplex stream communicator: several local streams, no single queue. */
    MPIX_Stream ms[2];
    MPI_Comm mx;
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &ms[i]));
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, ms, &mx));
    MPI_Comm_set_errhandler(mx, MPI_ERRORS_RETURN);
    EXPECT_ERR(MPIX_Send_enqueue(&v, 1, MPI_INT, 0, 0, mx), MPI_ERR_COMM, "is a multiplex stream communicator");
    EXPECT_ERR(MPIX_Isend_enqueue(&v, 1, MPI_INT, 0, 0, mx, &r), MPI_ERR_COMM, "is a multiplex stream communicator");
    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_free(&ms[i]));
}

/* MPIXSTREAM_POLICY=explicit: a communicator's policy stream has no queue; the error says why (where the
 * policy gives no streams, MPICH 4.1: the communicator has none). */
static void policy_stream(void) {
    const char *p = getenv("MPIXSTREAM_POLICY");
    if (!p || strcmp(p, "explicit") != 0) return;
    int v = 1;
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    if (policy_gives_streams()) {
        EXPECT_ERR(MPIX_Send_enqueue(&v, 1, MPI_INT, 0, 0, d), MPIX_ERR_STREAM, "explicit endpoint policy");
        EXPECT_ERR(MPIX_Allreduce_enqueue(&v, &v, 1, MPI_INT, MPI_SUM, d), MPIX_ERR_STREAM, "has no queue");
    } else { /* MPICH 4.1 (mpixtest.h): the policy left the communicator implicit, without a stream. */
        EXPECT_ERR(MPIX_Send_enqueue(&v, 1, MPI_INT, 0, 0, d), MPI_ERR_COMM, "has no local stream");
    }
    OK(MPI_Comm_free(&d));
    if (rank == 0) printf("policy stream: checked\n");
}

static void requests(void) {
    MPIX_Stream s1 = host_stream(), s2 = host_stream();
    MPI_Comm c1, c2;
    c1 = stream_comm(MPI_COMM_WORLD, s1);
    c2 = stream_comm(MPI_COMM_WORLD, s2);
    int a = rank, b = -1, x = rank + 10, y = -1;
    MPI_Request r[2];
    OK(MPIX_Isend_enqueue(&a, 1, MPI_INT, rank, 1, c1, &r[0]));
    OK(MPIX_Irecv_enqueue(&b, 1, MPI_INT, rank, 1, c1, &r[1]));
    MPI_Request mixed[2] = {r[0], MPI_REQUEST_NULL};
    MPI_Request other;
    OK(MPIX_Isend_enqueue(&x, 1, MPI_INT, rank, 2, c2, &other));
    mixed[1] = other;
    EXPECT_ERR(MPIX_Waitall_enqueue(2, mixed, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST, "different streams");
    CHECK(mixed[0] == r[0] && mixed[1] == other, "a failed Waitall_enqueue must leave the requests");
    /* Our request given to MPI_Wait: MPICH refuses it as an invalid request (no crash). */
    MPI_Request copy = r[0];
    int rc = MPI_Wait(&copy, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "MPI_Wait accepted an enqueue request");
    if (rc != MPI_SUCCESS) CHECK(err_class(rc) == MPI_ERR_REQUEST, "MPI_Wait class %d", err_class(rc));
    /* An ordinary request given to Wait_enqueue. */
    MPI_Request plain;
    OK(MPI_Irecv(&y, 1, MPI_INT, rank, 3, MPI_COMM_WORLD, &plain));
    EXPECT_ERR(MPIX_Wait_enqueue(&plain, MPI_STATUS_IGNORE), MPI_ERR_REQUEST, "not a pending request of MPIX_Isend_enqueue");
    OK(MPI_Send(&x, 1, MPI_INT, rank, 3, MPI_COMM_WORLD));
    OK(MPI_Wait(&plain, MPI_STATUS_IGNORE));
    CHECK(y == x, "plain self message %d", y);

    OK(MPIX_Waitall_enqueue(2, r, MPI_STATUSES_IGNORE));
    /* Already waited for. */
    MPI_Request again = copy;
    EXPECT_ERR(MPIX_Wait_enqueue(&again, MPI_STATUS_IGNORE), MPI_ERR_REQUEST, "not a pending request");
    MPI_Request r3;
    OK(MPIX_Irecv_enqueue(&y, 1, MPI_INT, rank, 2, c2, &r3));
    MPI_Request both[2] = {other, r3};
    OK(MPIX_Waitall_enqueue(2, both, MPI_STATUSES_IGNORE));
    OK(MPIX_Host_queue_synchronize(s1));
    OK(MPIX_Host_queue_synchronize(s2));
    CHECK(b == rank && y == rank + 10, "self messages %d %d", b, y);

    /* The same request twice in one Waitall_enqueue is waited for once. */
    MPI_Request d1, r4;
    OK(MPIX_Isend_enqueue(&a, 1, MPI_INT, rank, 4, c1, &d1));
    OK(MPIX_Irecv_enqueue(&b, 1, MPI_INT, rank, 4, c1, &r4));
    MPI_Request twice[3] = {d1, d1, r4};
    OK(MPIX_Waitall_enqueue(3, twice, MPI_STATUSES_IGNORE));
    OK(MPIX_Host_queue_synchronize(s1));

    /* Bad arguments. */
    EXPECT_ERR(MPIX_Send_enqueue(&a, -1, MPI_INT, rank, 0, c1), MPI_ERR_COUNT, "negative");
    EXPECT_ERR(MPIX_Isend_enqueue(&a, 1, MPI_INT, rank, 0, c1, NULL), MPI_ERR_ARG, "null pointer");
    EXPECT_ERR(MPIX_Host_queue_launch(s1, NULL, NULL), MPI_ERR_ARG, "null pointer");
    /* Our engine drives the stream: no second progress thread. */
    EXPECT_ERR(MPIX_Start_progress_thread(s1), MPI_ERR_OTHER, "queue-backed");
    OK(MPIX_Stream_progress(s1));

    OK(MPI_Comm_free(&c1));
    OK(MPI_Comm_free(&c2));
    OK(MPIX_Stream_free(&s1));
    OK(MPIX_Stream_free(&s2));
}

static void pending(void) {
    int partner = rank ^ 1;
    if (partner >= size) partner = rank;
    MPIX_Stream s = host_stream();
    MPI_Comm c = stream_comm(MPI_COMM_WORLD, s);
    int in = -1, out = rank;
    MPI_Request r;
    OK(MPIX_Irecv_enqueue(&in, 1, MPI_INT, partner, 77, c, &r));
    /* Nobody has sent yet: the receive is pending. */
    MPI_Comm keep = c;
    EXPECT_ERR(MPI_Comm_free(&c), MPI_ERR_PENDING, "enqueued operation(s) not complete");
    CHECK(c == keep, "a refused MPI_Comm_free must leave the handle");
    EXPECT_ERR(MPIX_Stream_free(&s), MPI_ERR_PENDING, "operation(s) pending");
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPIX_Send_enqueue(&out, 1, MPI_INT, partner, 77, c));
    OK(MPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE));
    OK(MPIX_Host_queue_synchronize(s));
    CHECK(in == partner, "pending receive got %d", in);

    /* A host queue with an application callback still to run cannot be freed. */
    OK(MPI_Comm_free(&c));
    int delay = 300000;
    OK(MPIX_Host_queue_launch(s, sleep_cb, &delay));
    EXPECT_ERR(MPIX_Stream_free(&s), MPI_ERR_PENDING, "still has 1 item(s) to run");
    OK(MPIX_Host_queue_synchronize(s));
    OK(MPIX_Stream_free(&s));
}

/* A failed enqueued operation (truncation) is reported by the next synchronisation. */
static void async_failure(void) {
    MPIX_Stream s = host_stream();
    MPI_Comm c = stream_comm(MPI_COMM_SELF, s);
    int four[4] = {1, 2, 3, 4}, one = -1;
    MPI_Status st;
    MPI_Request r;
    OK(MPIX_Isend_enqueue(four, 4, MPI_INT, 0, 9, c, &r));
    OK(MPIX_Recv_enqueue(&one, 1, MPI_INT, 0, 9, c, &st));
    OK(MPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE));
    EXPECT_ERR(MPIX_Host_queue_synchronize(s), MPI_ERR_OTHER, "an earlier enqueued operation failed");
    CHECK(st.MPI_ERROR != MPI_SUCCESS, "status of the truncated receive has no error");
    OK(MPIX_Host_queue_synchronize(s));
    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&s));
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    stream_types();
    no_queue();
    policy_stream();
    requests();
    pending();
    async_failure();
    return mpixtest_finish();
}

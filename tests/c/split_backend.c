/* The split backend (Intel MPI's thread-split endpoints, MPIXSTREAM_BACKEND=split,
 * MPIXSTREAM_STREAMS=3): which endpoint each stream and communicator gets, and the rules that Intel's
 * model imposes, each checked. Run on Intel MPI only (tests/c/TESTS). Parts:
 *   1. T = 3 threads, each with a stream of its own and a stream communicator on it (made in the same
 *      order on every rank): each communicator's info says thread_id 1, 2, 3, the same on every rank;
 *      all threads at once run a ring of sends, MPI_Sendrecv, MPI_Probe/MPI_Mprobe, MPI_Iprobe,
 *      nonblocking sends and receives, MPI_Allreduce, MPI_Bcast and MPI_Barrier on their communicator,
 *      with MPIX_Stream_progress between, every value checked.
 *   2. The pool: a fourth stream is refused ("out of streams"); freed streams give their endpoints
 *      back, and a new stream takes the lowest (1).
 *   3. Different endpoints on different ranks (rank 0 attaches its second stream, the others their
 *      first): MPIX_Stream_comm_create fails on every rank with MPIX_ERR_STREAM and a message naming
 *      Intel's rule; no hang. A stream on some ranks and MPIX_STREAM_NULL on others: the same.
 *   4. Multiplex communicators with endpoints 1 and 2 taken: two indices (4 endpoints at 2 ranks, 6 at 4)
 *      fail on every rank with MPIX_ERR_STREAM naming the endpoints needed; an MPIX_STREAM_NULL entry
 *      the same; one index takes the free endpoint 3 and carries a self message and a ring; its
 *      MPI_Comm_dup fails (no endpoint left), its MPI_Comm_idup is refused (nonblocking); freed, it gives
 *      endpoint 3 back (the next stream's communicator is on 3 everywhere).
 *   5. Under MPIXSTREAM_POLICY=explicit: T plain dups of MPI_COMM_WORLD get distinct endpoints, the
 *      same on every rank (thread_id from MPI_Comm_get_info, allgathered), and T threads use them at
 *      once as in part 1; freed, their endpoints are free again for the next dups.
 *   6. Under MPIXSTREAM_POLICY=explicit, the agreement's edges: a fourth communicator while three hold
 *      the whole pool stays on endpoint 0 on every rank; an MPI_Comm_split in which rank 0 is not a
 *      member (MPI_UNDEFINED) gives rank 0's taken endpoint back, so the next dup gets the same
 *      endpoint everywhere; an MPI_Comm_create_group communicator stays on endpoint 0; traffic on each
 *      is checked. */
#include "mpixtest.h"
#include <pthread.h>

#define T 3
static int rank, size;
static MPI_Comm comms[T];
static MPIX_Stream streams[T];

static int thread_id_of(MPI_Comm c) {
    MPI_Info info;
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    OK(MPI_Comm_get_info(c, &info));
    MPI_Info_get(info, "thread_id", MPI_MAX_INFO_VAL, v, &flag);
    MPI_Info_free(&info);
    return flag ? atoi(v) : -1;
}

/* Every rank's thread_id of c equals `expected`. */
static void same_endpoint_everywhere(MPI_Comm c, int expected, const char *what) {
    int mine = thread_id_of(c), lo = 0, hi = 0;
    CHECK(mine == expected, "%s: thread_id %d, expected %d", what, mine, expected);
    MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: thread_id differs across ranks (%d..%d)", what, lo, hi);
}

static void *traffic(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm c = comms[t];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 200; i++) {
        int out = rank * 1000 + i, in = -1;
        MPI_Status st;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, right, i, &in, 1, MPI_INT, left, i, c, &st));
        CHECK(in == left * 1000 + i && st.MPI_SOURCE == left, "thread %d sendrecv %d: got %d", t, i, in);
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_INT, left, 7, c, &r[0]));
        OK(MPI_Isend(&out, 1, MPI_INT, right, 7, c, &r[1]));
        if (streams[t] != MPIX_STREAM_NULL) OK(MPIX_Stream_progress(streams[t]));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(in == left * 1000 + i, "thread %d isend/irecv %d: got %d", t, i, in);
    }
    int out = rank + t, in = -1, count = -1, flag = 0;
    MPI_Status st;
    MPI_Message msg;
    OK(MPI_Send(&out, 1, MPI_INT, right, 9, c));
    OK(MPI_Probe(left, 9, c, &st));
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == left && count == 1, "thread %d probe: source %d count %d", t, st.MPI_SOURCE, count);
    OK(MPI_Recv(&in, 1, MPI_INT, left, 9, c, MPI_STATUS_IGNORE));
    CHECK(in == left + t, "thread %d probe/recv got %d", t, in);
    OK(MPI_Send(&out, 1, MPI_INT, right, 10, c));
    OK(MPI_Mprobe(MPI_ANY_SOURCE, 10, c, &msg, &st));
    OK(MPI_Mrecv(&in, 1, MPI_INT, &msg, MPI_STATUS_IGNORE));
    CHECK(in == left + t, "thread %d mprobe/mrecv got %d", t, in);
    OK(MPI_Send(&out, 1, MPI_INT, right, 11, c));
    while (!flag) OK(MPI_Iprobe(left, 11, c, &flag, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&in, 1, MPI_INT, left, 11, c, MPI_STATUS_IGNORE));
    CHECK(in == left + t, "thread %d iprobe/recv got %d", t, in);
    for (int i = 0; i < 50; i++) {
        int sum = -1, root = i % size, b = rank == root ? 100 + i : -1;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == size * (size - 1) / 2, "thread %d allreduce %d: %d", t, i, sum);
        OK(MPI_Bcast(&b, 1, MPI_INT, root, c));
        CHECK(b == 100 + i, "thread %d bcast %d: %d", t, i, b);
        OK(MPI_Barrier(c));
    }
    return NULL;
}

static void run_threads(void) {
    pthread_t th[T];
    for (long t = 0; t < T; t++) pthread_create(&th[t], NULL, traffic, (void *)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    const char *policy = getenv("MPIXSTREAM_POLICY");
    int explicit_policy = policy && strcmp(policy, "explicit") == 0;

    /* 1. streams and stream communicators */
    for (int t = 0; t < T; t++) {
        OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[t]));
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[t], &comms[t]));
        char what[32];
        snprintf(what, sizeof what, "stream comm %d", t);
        same_endpoint_everywhere(comms[t], t + 1, what);
        MPIX_Stream got = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(comms[t], 0, &got));
        CHECK(got == streams[t], "stream comm %d: get_stream", t);
    }
    run_threads();

    /* 2. the pool */
    MPIX_Stream extra = MPIX_STREAM_NULL;
    EXPECT_ERR(MPIX_Stream_create(MPI_INFO_NULL, &extra), MPI_ERR_OTHER, "out of streams");
    for (int t = 0; t < T; t++) {
        OK(MPI_Comm_free(&comms[t]));
        OK(MPIX_Stream_free(&streams[t]));
    }
    MPIX_Stream a = MPIX_STREAM_NULL, b = MPIX_STREAM_NULL;
    MPI_Comm c = MPI_COMM_NULL;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &a));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &b));
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, a, &c));
    same_endpoint_everywhere(c, 1, "a freed endpoint taken again");
    OK(MPI_Comm_free(&c));

    /* 3. different endpoints on different ranks */
    c = MPI_COMM_NULL;
    EXPECT_ERR(MPIX_Stream_comm_create(MPI_COMM_WORLD, rank == 0 ? b : a, &c), MPIX_ERR_STREAM,
               "same endpoint");
    c = MPI_COMM_NULL;
    EXPECT_ERR(MPIX_Stream_comm_create(MPI_COMM_WORLD, rank == 0 ? a : MPIX_STREAM_NULL, &c), MPIX_ERR_STREAM,
               "same endpoint");
    /* MPIX_STREAM_NULL everywhere: a plain communicator on endpoint 0. */
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, &c));
    CHECK(thread_id_of(c) == -1, "MPIX_STREAM_NULL everywhere: thread_id %d, expected none", thread_id_of(c));
    OK(MPI_Comm_free(&c));

    /* 4. multiplex: endpoints 1 and 2 hold a and b, one is free */
    MPIX_Stream pair[2] = {a, b};
    c = MPI_COMM_NULL;
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, pair, &c), MPIX_ERR_STREAM,
               "thread-split endpoints free on every process");
    MPIX_Stream with_null[2] = {a, MPIX_STREAM_NULL};
    EXPECT_ERR(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, with_null, &c), MPIX_ERR_STREAM,
               "needs a stream");
    /* one index: one hidden communicator (D_0), on the free endpoint 3 */
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, pair, &c));
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    {
        int out = rank * 10 + 1, in = -1, self = -1;
        MPI_Status st;
        OK(MPIX_Stream_send(&out, 1, MPI_INT, rank, 5, c, 0, 0));
        OK(MPIX_Stream_recv(&self, 1, MPI_INT, rank, 5, c, 0, 0, &st));
        CHECK(self == out, "multiplex self message %d, expected %d", self, out);
        OK(MPIX_Stream_send(&out, 1, MPI_INT, (rank + 1) % size, 6, c, 0, 0));
        OK(MPIX_Stream_recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, 6, c, MPIX_ANY_INDEX, 0, &st));
        int left = (rank + size - 1) % size;
        CHECK(in == left * 10 + 1 && st.MPI_SOURCE == left, "multiplex ring: %d from %d", in, st.MPI_SOURCE);
    }
    MPI_Comm d = MPI_COMM_NULL;
    EXPECT_ERR(MPI_Comm_dup(c, &d), MPIX_ERR_STREAM, "thread-split endpoints free on every process");
    MPI_Request r = MPI_REQUEST_NULL;
    EXPECT_ERR(MPI_Comm_idup(c, &d, &r), MPI_ERR_UNSUPPORTED_OPERATION, "nonblocking dup");
    OK(MPI_Comm_free(&c));
    /* its endpoint is free again: the next stream takes endpoint 3 everywhere */
    MPIX_Stream third = MPIX_STREAM_NULL;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &third));
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, third, &c));
    same_endpoint_everywhere(c, 3, "the multiplex communicator's endpoint given back");
    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&third));
    OK(MPIX_Stream_free(&a));
    OK(MPIX_Stream_free(&b));

    /* 5. the explicit policy */
    if (explicit_policy) {
        for (int round = 0; round < 2; round++) {
            for (int t = 0; t < T; t++) {
                streams[t] = MPIX_STREAM_NULL;
                OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
                MPI_Comm_set_errhandler(comms[t], MPI_ERRORS_RETURN);
                char what[40];
                snprintf(what, sizeof what, "policy dup %d, round %d", t, round);
                same_endpoint_everywhere(comms[t], t + 1, what);
            }
            run_threads();
            for (int t = 0; t < T; t++) OK(MPI_Comm_free(&comms[t]));
        }
    }
    /* 6. the agreement's edges */
    if (explicit_policy && size > 1) {
        MPI_Comm full[T + 1];
        for (int t = 0; t <= T; t++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &full[t]));
        same_endpoint_everywhere(full[T], -1, "a dup beyond the pool");
        for (int t = 0; t <= T; t++) OK(MPI_Comm_free(&full[t]));
        MPI_Comm part = MPI_COMM_NULL, next = MPI_COMM_NULL;
        OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &part));
        CHECK((rank == 0) == (part == MPI_COMM_NULL), "split: rank %d got %s", rank, part == MPI_COMM_NULL ? "NULL" : "a communicator");
        if (part != MPI_COMM_NULL) {
            CHECK(thread_id_of(part) == 1, "split: thread_id %d, expected 1", thread_id_of(part));
            int sum = -1;
            OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, part));
            CHECK(sum == size * (size - 1) / 2, "split: allreduce %d", sum);
        }
        /* Rank 0 took endpoint 1 in the agreement and gave it back at once; the others give it back
         * with `part`: then endpoint 1 is free everywhere again (were rank 0's still taken, the next
         * dup would get 2). */
        if (part != MPI_COMM_NULL) OK(MPI_Comm_free(&part));
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &next));
        same_endpoint_everywhere(next, 1, "the dup after a split without rank 0");
        int sum = -1;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, next));
        CHECK(sum == size * (size - 1) / 2, "dup after split: allreduce %d", sum);
        OK(MPI_Comm_free(&next));
        MPI_Group world, pair;
        MPI_Comm grouped = MPI_COMM_NULL;
        int two[2] = {0, 1};
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 2, two, &pair);
        if (rank < 2) {
            OK(MPI_Comm_create_group(MPI_COMM_WORLD, pair, 5, &grouped));
            CHECK(thread_id_of(grouped) == -1, "create_group: thread_id %d, expected none", thread_id_of(grouped));
            int out = rank, in = -1;
            OK(MPI_Sendrecv(&out, 1, MPI_INT, 1 - rank, 0, &in, 1, MPI_INT, 1 - rank, 0, grouped, MPI_STATUS_IGNORE));
            CHECK(in == 1 - rank, "create_group: got %d", in);
            OK(MPI_Comm_free(&grouped));
        }
        MPI_Group_free(&pair);
        MPI_Group_free(&world);
    }
    return mpixtest_finish();
}

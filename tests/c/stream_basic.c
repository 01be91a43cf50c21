/* Streams and stream communicators used the conventional way: create/free, exhaustion of the pool,
 * stream communicators with some ranks passing MPIX_STREAM_NULL, point-to-point (blocking,
 * nonblocking, persistent) and collectives on them, inheritance by dup/dup_with_info/idup (not split),
 * and freeing in the right order. Pool size from MPIXSTREAM_STREAMS (the test's env). */
#include "mpixtest.h"

/* Native MPICH 5.0.2 hangs on persistent point-to-point over a native stream communicator, with or
 * without mpixstream (reproducer: tests/native_defects/; MPI_Sendrecv, the probes and nonblocking
 * collectives hang there too, and mpixstream routes around those). The native row of TESTS sets
 * MPIXTEST_NATIVE_DEFECTS=1 so that step is left out there; every other row runs it. */
static int native_defects;

static void traffic(MPI_Comm c, int tag_base) {
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* blocking ring */
    int out = rank * 100 + tag_base, in = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, right, tag_base, &in, 1, MPI_INT, left, tag_base, c, &st));
    CHECK(in == left * 100 + tag_base, "ring got %d from %d", in, left);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag_base, "status %d/%d", st.MPI_SOURCE, st.MPI_TAG);

    /* blocking probes, then the matched message */
    int pv = rank + 7, got = -1, count = -1;
    MPI_Message msg;
    OK(MPI_Send(&pv, 1, MPI_INT, right, tag_base + 4, c)); /* eager: no deadlock */
    OK(MPI_Probe(left, tag_base + 4, c, &st));
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == left && count == 1, "probe: source %d count %d", st.MPI_SOURCE, count);
    OK(MPI_Mprobe(MPI_ANY_SOURCE, tag_base + 4, c, &msg, &st));
    OK(MPI_Mrecv(&got, 1, MPI_INT, &msg, MPI_STATUS_IGNORE));
    CHECK(got == left + 7, "mprobe/mrecv got %d", got);
    /* a polling loop of nonblocking probes */
    int flag = 0;
    OK(MPI_Send(&pv, 1, MPI_INT, right, tag_base + 5, c));
    while (!flag) OK(MPI_Iprobe(left, tag_base + 5, c, &flag, MPI_STATUS_IGNORE));
    flag = 0;
    while (!flag) OK(MPI_Improbe(left, tag_base + 5, c, &flag, &msg, MPI_STATUS_IGNORE));
    OK(MPI_Mrecv(&got, 1, MPI_INT, &msg, MPI_STATUS_IGNORE));
    CHECK(got == left + 7, "improbe/mrecv got %d", got);

    /* nonblocking, 64 messages each way, in order */
    enum { N = 64 };
    int sbuf[N], rbuf[N];
    MPI_Request reqs[2 * N];
    for (int i = 0; i < N; i++) {
        sbuf[i] = rank * 1000 + i;
        OK(MPI_Irecv(&rbuf[i], 1, MPI_INT, left, tag_base + 1, c, &reqs[i]));
    }
    for (int i = 0; i < N; i++) OK(MPI_Isend(&sbuf[i], 1, MPI_INT, right, tag_base + 1, c, &reqs[N + i]));
    OK(MPI_Waitall(2 * N, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < N; i++) CHECK(rbuf[i] == left * 1000 + i, "nonblocking %d: %d", i, rbuf[i]);

    /* persistent */
    if (!native_defects) {
    MPI_Request pr[2];
    int pin = -1, pout;
    OK(MPI_Recv_init(&pin, 1, MPI_INT, left, tag_base + 2, c, &pr[0]));
    OK(MPI_Send_init(&pout, 1, MPI_INT, right, tag_base + 2, c, &pr[1]));
    for (int it = 0; it < 5; it++) {
        pout = rank + it;
        OK(MPI_Startall(2, pr));
        OK(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
        CHECK(pin == left + it, "persistent %d: %d", it, pin);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    }

    /* large message (rendezvous) */
    int big = 1 << 18;
    int *bs = malloc(big * sizeof(int)), *br = malloc(big * sizeof(int));
    for (int i = 0; i < big; i++) bs[i] = rank ^ i;
    OK(MPI_Sendrecv(bs, big, MPI_INT, right, tag_base + 3, br, big, MPI_INT, left, tag_base + 3, c, MPI_STATUS_IGNORE));
    int bad = 0;
    for (int i = 0; i < big; i++) bad += br[i] != (left ^ i);
    CHECK(bad == 0, "large message: %d wrong", bad);
    free(bs);
    free(br);

    /* collectives */
    int sum = 0;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size * (size - 1) / 2, "allreduce %d", sum);
    int root_val = rank == 0 ? 4242 : 0;
    OK(MPI_Bcast(&root_val, 1, MPI_INT, 0, c));
    CHECK(root_val == 4242, "bcast %d", root_val);
    int *a2a_s = malloc(size * sizeof(int)), *a2a_r = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) a2a_s[i] = rank * size + i;
    OK(MPI_Alltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, c));
    for (int i = 0; i < size; i++) CHECK(a2a_r[i] == i * size + rank, "alltoall[%d] %d", i, a2a_r[i]);
    free(a2a_s);
    free(a2a_r);
    MPI_Request br_req, ar_req[2];
    OK(MPI_Ibarrier(c, &br_req));
    OK(MPI_Wait(&br_req, MPI_STATUS_IGNORE));
    int isum = -1, ibc = rank == 0 ? 77 : 0;
    OK(MPI_Iallreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, c, &ar_req[0]));
    OK(MPI_Ibcast(&ibc, 1, MPI_INT, 0, c, &ar_req[1]));
    OK(MPI_Waitall(2, ar_req, MPI_STATUSES_IGNORE));
    CHECK(isum == size * (size - 1) / 2 && ibc == 77, "iallreduce %d ibcast %d", isum, ibc);
    int tflag = 0;
    OK(MPI_Ibarrier(c, &br_req));
    while (!tflag) OK(MPI_Test(&br_req, &tflag, MPI_STATUS_IGNORE));
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int pool = env_int("MPIXSTREAM_STREAMS", 8);
    native_defects = env_int("MPIXTEST_NATIVE_DEFECTS", 0);

    /* create / free / exhaustion / reuse */
    MPIX_Stream *all = malloc(sizeof(MPIX_Stream) * (pool + 1));
    for (int i = 0; i < pool; i++) {
        OK(MPIX_Stream_create(MPI_INFO_NULL, &all[i]));
        CHECK(all[i] != MPIX_STREAM_NULL, "stream %d is NULL", i);
        for (int j = 0; j < i; j++) CHECK(all[i] != all[j], "streams %d and %d share a handle", i, j);
    }
    int rc = MPIX_Stream_create(MPI_INFO_NULL, &all[pool]);
    CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_OTHER, "stream %d beyond the pool: rc %d", pool, rc);
    for (int i = 0; i < pool; i++) {
        OK(MPIX_Stream_free(&all[i]));
        CHECK(all[i] == MPIX_STREAM_NULL, "free did not reset the handle");
    }
    OK(MPIX_Stream_create(MPI_INFO_NULL, &all[0]));
    OK(MPIX_Stream_free(&all[0]));
    free(all);

    /* stream comm, odd ranks attach MPIX_STREAM_NULL */
    MPIX_Stream s = MPIX_STREAM_NULL;
    if (rank % 2 == 0) OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPI_Comm sc;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc));
    MPIX_Stream got = 0;
    OK(MPIX_Comm_get_stream(sc, 0, &got));
    CHECK(got == s, "get_stream %x, expected %x", got, s);
    traffic(sc, 10);

    /* inheritance: dup, dup_with_info, idup keep the stream; split does not */
    MPI_Comm d1, d2, d3, sp;
    MPI_Request ir;
    OK(MPI_Comm_dup(sc, &d1));
    OK(MPI_Comm_dup_with_info(sc, MPI_INFO_NULL, &d2));
    OK(MPI_Comm_idup(sc, &d3, &ir));
    OK(MPI_Wait(&ir, MPI_STATUS_IGNORE));
    OK(MPI_Comm_split(sc, 0, rank, &sp));
    OK(MPIX_Comm_get_stream(d1, 0, &got));
    CHECK(got == s, "dup: %x", got);
    OK(MPIX_Comm_get_stream(d2, 0, &got));
    CHECK(got == s, "dup_with_info: %x", got);
    OK(MPIX_Comm_get_stream(d3, 0, &got));
    CHECK(got == s, "idup: %x", got);
    OK(MPIX_Comm_get_stream(sp, 0, &got));
    /* Where the explicit policy gives streams (docs/policy.md), the split gets one of its pool, never
     * the parent's; elsewhere (implicit, MPICH 4.1) none. */
    if (policy_gives_streams())
        CHECK(s == MPIX_STREAM_NULL || got != s, "split inherited %x", got);
    else
        CHECK(got == MPIX_STREAM_NULL, "split inherited %x", got);
    traffic(d1, 20);
    traffic(d3, 30);
    traffic(sp, 40);

    /* a stream comm as the parent of another stream comm is a normal comm */
    MPIX_Stream s2 = MPIX_STREAM_NULL;
    MPI_Comm sc2;
    if (rank % 2 == 1 || size == 1) OK(MPIX_Stream_create(MPI_INFO_NULL, &s2));
    OK(MPIX_Stream_comm_create(sc, s2, &sc2));
    OK(MPIX_Comm_get_stream(sc2, 0, &got));
    CHECK(got == s2, "nested: %x", got);
    traffic(sc2, 50);

    /* free in order: the stream cannot go while attached */
    if (s != MPIX_STREAM_NULL) {
        rc = MPIX_Stream_free(&s);
        CHECK(rc != MPI_SUCCESS, "freed a stream still attached to 4 communicators");
    }
    MPI_Comm_free(&d1);
    MPI_Comm_free(&d2);
    MPI_Comm_free(&d3);
    MPI_Comm_free(&sp);
    MPI_Comm_free(&sc2);
    if (s2 != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&s2));
    if (s != MPIX_STREAM_NULL) {
        rc = MPIX_Stream_free(&s);
        CHECK(rc != MPI_SUCCESS, "freed a stream still attached to its communicator");
    }
    MPI_Comm_free(&sc);
    if (s != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&s));

    /* progress on a stream and on the NULL stream; a progress thread */
    MPIX_Stream ps;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &ps));
    OK(MPIX_Stream_progress(ps));
    OK(MPIX_Stream_progress(MPIX_STREAM_NULL));
    if (provided == MPI_THREAD_MULTIPLE) {
        OK(MPIX_Start_progress_thread(ps));
        rc = MPIX_Stream_free(&ps);
        CHECK(rc != MPI_SUCCESS, "freed a stream with a running progress thread");
        OK(MPIX_Stop_progress_thread(ps));
    }
    OK(MPIX_Stream_free(&ps));
    return mpixtest_finish();
}

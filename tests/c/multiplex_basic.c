/* Multiplex stream communicators, one-to-one and the API around them: creation with counts that
 * differ between processes (and zero streams on the last process when there are more than 2),
 * MPIX_STREAM_NULL entries, MPIX_Comm_get_stream, blocking / nonblocking / large-count indexed
 * send and receive between every pair of indices, statuses, wildcards (MPI_ANY_SOURCE, MPI_ANY_TAG,
 * MPIX_ANY_INDEX), matching order, receives posted out of order, unexpected messages, a large
 * (MPI_Imrecv) message, zero-length messages, MPI_PROC_NULL, cancel, MPI_Request_free of a pending
 * receive, MPI_Test polling, ordinary MPI calls on the multiplex communicator, dup and idup (both
 * multiplex), and freeing communicators and streams in order. */
#include "mpixtest.h"

static int rank, size;

/* Streams this process attaches: 2 or 3, index 1 MPIX_STREAM_NULL on even ranks, none on the last of
 * more than 2 processes. */
static int my_count(int r) {
    if (size > 2 && r == size - 1) return 0;
    return 2 + r % 2;
}

/* Barrier of ranks 0 and 1 only (ordinary traffic on the multiplex communicator). */
static void pair_sync(MPI_Comm c, int peer) {
    OK(MPI_Sendrecv(NULL, 0, MPI_INT, peer, 31000, NULL, 0, MPI_INT, peer, 31000, c, MPI_STATUS_IGNORE));
}

static void pairwise(MPI_Comm mx, int a, int b, int base) {
    /* every index of a to every index of b: blocking, specific matching */
    int na = my_count(a), nb = my_count(b);
    if (rank == a) {
        for (int si = 0; si < na; si++)
            for (int di = 0; di < nb; di++) {
                int msg[3] = {si, di, base + si * 10 + di};
                OK(MPIX_Stream_send(msg, 3, MPI_INT, b, base + si * 10 + di, mx, si, di));
            }
    } else if (rank == b) {
        /* receive in reverse order of sending: everything but the first goes through the queues */
        for (int si = na - 1; si >= 0; si--)
            for (int di = nb - 1; di >= 0; di--) {
                int msg[3] = {-1, -1, -1};
                MPI_Status st;
                OK(MPIX_Stream_recv(msg, 3, MPI_INT, a, base + si * 10 + di, mx, si, di, &st));
                CHECK(msg[0] == si && msg[1] == di && msg[2] == base + si * 10 + di, "pair %d->%d got %d %d %d", si,
                      di, msg[0], msg[1], msg[2]);
                int n = -1;
                MPI_Get_count(&st, MPI_INT, &n);
                CHECK(st.MPI_SOURCE == a && st.MPI_TAG == base + si * 10 + di && n == 3, "status %d %d %d",
                      st.MPI_SOURCE, st.MPI_TAG, n);
            }
    }
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int n = my_count(rank);
    MPIX_Stream streams[3];
    for (int i = 0; i < n; i++) {
        streams[i] = MPIX_STREAM_NULL;
        if (!(i == 1 && rank % 2 == 0)) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
    }
    MPI_Comm mx;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, n, streams, &mx));
    for (int i = 0; i < n; i++) {
        MPIX_Stream got = 0;
        OK(MPIX_Comm_get_stream(mx, i, &got));
        CHECK(got == streams[i], "get_stream(%d) = %x, expected %x", i, got, streams[i]);
    }
    MPIX_Stream got;
    EXPECT_ERR(MPIX_Comm_get_stream(mx, n, &got), MPI_ERR_ARG, "out of range");
    /* attached streams cannot be freed */
    if (n > 0) {
        MPIX_Stream s0 = streams[0];
        int rc = MPIX_Stream_free(&s0);
        CHECK(rc != MPI_SUCCESS, "freed a stream attached to a multiplex communicator");
    }

    /* ordinary traffic on the multiplex communicator, alongside indexed traffic with the same tags */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v = rank, w = -1, sum = 0;
    OK(MPI_Sendrecv(&v, 1, MPI_INT, right, 0, &w, 1, MPI_INT, left, 0, mx, MPI_STATUS_IGNORE));
    CHECK(w == left, "sendrecv on the multiplex comm: %d", w);
    OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, mx));
    CHECK(sum == size * (size - 1) / 2, "allreduce %d", sum);

    /* every pair of processes, every pair of indices, both directions */
    for (int a = 0; a < size; a++)
        for (int b = 0; b < size; b++)
            if (a != b) pairwise(mx, a, b, 100);
    OK(MPI_Barrier(mx));

    if (rank <= 1 && size >= 2) {
        int peer = 1 - rank;
        int np = my_count(peer);
        /* nonblocking both ways, large-count forms, all index pairs at once */
        int nreq = n * np;
        int *out = malloc(sizeof(int) * nreq), *in = malloc(sizeof(int) * nreq);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * nreq);
        MPI_Status *sts = malloc(sizeof(MPI_Status) * 2 * nreq);
        int k = 0;
        for (int di = 0; di < n; di++)
            for (int si = 0; si < np; si++, k++) {
                in[k] = -1;
                OK(MPIX_Stream_irecv_c(&in[k], 1, MPI_INT, peer, 7, mx, si, di, &reqs[k]));
            }
        k = 0;
        for (int si = 0; si < n; si++)
            for (int di = 0; di < np; di++, k++) {
                out[k] = 1000 * rank + 10 * si + di;
                OK(MPIX_Stream_isend_c(&out[k], 1, MPI_INT, peer, 7, mx, si, di, &reqs[nreq + k]));
            }
        OK(MPI_Waitall(2 * nreq, reqs, sts));
        k = 0;
        for (int di = 0; di < n; di++)
            for (int si = 0; si < np; si++, k++) {
                CHECK(in[k] == 1000 * peer + 10 * si + di, "irecv_c[%d,%d] = %d", si, di, in[k]);
                MPI_Count c = -1;
                MPI_Get_count_c(&sts[k], MPI_INT, &c);
                CHECK(sts[k].MPI_SOURCE == peer && sts[k].MPI_TAG == 7 && c == 1, "irecv status %d %d %lld",
                      sts[k].MPI_SOURCE, sts[k].MPI_TAG, (long long)c);
            }
        free(out);
        free(in);
        free(reqs);
        free(sts);

        /* blocking _c forms */
        if (rank == 0) {
            double d = 2.5;
            OK(MPIX_Stream_send_c(&d, 1, MPI_DOUBLE, 1, 3, mx, n - 1, 0));
        } else {
            double d = 0;
            MPI_Status st;
            OK(MPIX_Stream_recv_c(&d, 1, MPI_DOUBLE, 0, 3, mx, my_count(0) - 1, 0, &st));
            CHECK(d == 2.5 && st.MPI_TAG == 3 && st.MPI_SOURCE == 0, "recv_c %g", d);
        }

        /* wildcards and order: 40 messages from alternating source indices and tags to index 0,
         * received with ANY_SOURCE/ANY_TAG/ANY_INDEX and with ANY_INDEX + a given tag */
        enum { M = 40 };
        if (rank == 0) {
            for (int i = 0; i < M; i++) {
                int msg[2] = {i, i % 2};
                OK(MPIX_Stream_send(msg, 2, MPI_INT, 1, i % 3, mx, i % 2, 0));
            }
        } else {
            int seen[M];
            memset(seen, 0, sizeof seen);
            for (int i = 0; i < M; i++) {
                int msg[2];
                MPI_Status st;
                if (i % 4 == 3) {
                    /* the oldest message with tag 0, from any source index */
                    OK(MPIX_Stream_recv(msg, 2, MPI_INT, 0, 0, mx, MPIX_ANY_INDEX, 0, &st));
                    CHECK(st.MPI_TAG == 0 && msg[0] % 3 == 0, "tagged wildcard got %d (tag %d)", msg[0], st.MPI_TAG);
                    /* order: no older tag-0 message of the same source index is left */
                    for (int j = msg[1]; j < msg[0]; j += 2)
                        CHECK(j % 3 != 0 || seen[j], "tag 0, source index %d: got %d before %d", msg[1], msg[0], j);
                } else {
                    OK(MPIX_Stream_recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &st));
                    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == msg[0] % 3, "wildcard status %d %d for %d",
                          st.MPI_SOURCE, st.MPI_TAG, msg[0]);
                    /* order: a full wildcard gets the oldest message left of its source index */
                    for (int j = msg[1]; j < msg[0]; j += 2)
                        CHECK(seen[j], "source index %d: got %d before %d", msg[1], msg[0], j);
                }
                CHECK(!seen[msg[0]], "message %d received twice", msg[0]);
                seen[msg[0]] = 1;
            }
        }
        pair_sync(mx, peer);

        /* receives posted out of order; matched by tag and source index */
        if (rank == 1) {
            int a = -1, b = -1, c = -1;
            MPI_Request r[3];
            OK(MPIX_Stream_irecv(&a, 1, MPI_INT, 0, 2, mx, 0, 1, &r[0]));
            OK(MPIX_Stream_irecv(&b, 1, MPI_INT, 0, 1, mx, 1, 1, &r[1]));
            OK(MPIX_Stream_irecv(&c, 1, MPI_INT, 0, 1, mx, 0, 1, &r[2]));
            pair_sync(mx, peer);
            { MPI_Status sts3[3]; OK(MPI_Waitall(3, r, sts3)); }
            CHECK(a == 102 && b == 111 && c == 101, "out of order: %d %d %d", a, b, c);
        } else {
            pair_sync(mx, peer);
            int x = 101, y = 111, z = 102;
            OK(MPIX_Stream_send(&x, 1, MPI_INT, 1, 1, mx, 0, 1));
            OK(MPIX_Stream_send(&y, 1, MPI_INT, 1, 1, mx, 1, 1));
            OK(MPIX_Stream_send(&z, 1, MPI_INT, 1, 2, mx, 0, 1));
        }

        /* unexpected messages: all sent (and flushed by a handshake) before any receive is posted */
        if (rank == 0) {
            for (int i = 0; i < 10; i++) OK(MPIX_Stream_send(&i, 1, MPI_INT, 1, 50 + i % 2, mx, 0, 0));
            pair_sync(mx, peer);
        } else {
            pair_sync(mx, peer);
            MPI_Status st;
            int x, prev_odd = -1, prev_even = -1;
            for (int i = 0; i < 5; i++) {
                OK(MPIX_Stream_recv(&x, 1, MPI_INT, 0, 51, mx, 0, 0, &st));
                CHECK(x % 2 == 1 && x > prev_odd, "unexpected odd %d after %d", x, prev_odd);
                prev_odd = x;
            }
            for (int i = 0; i < 5; i++) {
                OK(MPIX_Stream_recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &st));
                CHECK(x % 2 == 0 && x > prev_even && st.MPI_TAG == 50, "unexpected even %d after %d", x, prev_even);
                prev_even = x;
            }
        }

        /* a large message (received with MPI_Imrecv) and a zero-length one, blocking and nonblocking */
        int big = 1 << 18;
        int *bb = malloc(sizeof(int) * big);
        if (rank == 0) {
            for (int i = 0; i < big; i++) bb[i] = i ^ 0x5a5a;
            OK(MPIX_Stream_send(bb, big, MPI_INT, 1, 9, mx, 0, np - 1));
            OK(MPIX_Stream_send(NULL, 0, MPI_INT, 1, 10, mx, 0, np - 1));
            OK(MPIX_Stream_send(bb, big, MPI_INT, 1, 11, mx, 0, np - 1));
        } else {
            MPI_Status st;
            memset(bb, 0, sizeof(int) * big);
            OK(MPIX_Stream_recv(bb, big, MPI_INT, 0, 9, mx, 0, n - 1, &st));
            int bad = 0, cnt = -1;
            for (int i = 0; i < big; i++) bad += bb[i] != (i ^ 0x5a5a);
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(bad == 0 && cnt == big, "large blocking: %d wrong, count %d", bad, cnt);
            OK(MPIX_Stream_recv(NULL, 0, MPI_INT, 0, 10, mx, 0, n - 1, &st));
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(cnt == 0 && st.MPI_TAG == 10, "zero-length: count %d tag %d", cnt, st.MPI_TAG);
            memset(bb, 0, sizeof(int) * big);
            MPI_Request r;
            OK(MPIX_Stream_irecv(bb, big, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, n - 1, &r));
            int flag = 0;
            while (!flag) OK(MPI_Test(&r, &flag, &st));
            bad = 0;
            for (int i = 0; i < big; i++) bad += bb[i] != (i ^ 0x5a5a);
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(bad == 0 && cnt == big && st.MPI_TAG == 11 && st.MPI_SOURCE == 0,
                  "large nonblocking: %d wrong, count %d, tag %d", bad, cnt, st.MPI_TAG);
        }
        free(bb);

        /* MPI_PROC_NULL */
        {
            int x = 5;
            MPI_Status st;
            MPI_Request r;
            OK(MPIX_Stream_send(&x, 1, MPI_INT, MPI_PROC_NULL, 1, mx, 0, 0));
            OK(MPIX_Stream_recv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, mx, 0, 0, &st));
            int cnt = -1;
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(st.MPI_SOURCE == MPI_PROC_NULL && cnt == 0 && x == 5, "PROC_NULL recv: source %d count %d",
                  st.MPI_SOURCE, cnt);
            OK(MPIX_Stream_irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, mx, 0, 0, &r));
            OK(MPI_Wait(&r, &st));
            CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL irecv: source %d", st.MPI_SOURCE);
            OK(MPIX_Stream_isend(&x, 1, MPI_INT, MPI_PROC_NULL, 1, mx, 0, 0, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }

        /* cancel of a receive that nothing matches; MPI_Request_free of a pending receive */
        if (rank == 1) {
            int x = -1, y = -1, z = -1;
            MPI_Request r;
            MPI_Status st;
            OK(MPIX_Stream_irecv(&x, 1, MPI_INT, 0, 999, mx, 0, 0, &r));
            OK(MPI_Cancel(&r));
            OK(MPI_Wait(&r, &st));
            int cancelled = 0;
            MPI_Test_cancelled(&st, &cancelled);
            CHECK(cancelled, "cancelled receive not reported as cancelled");
            OK(MPIX_Stream_irecv(&y, 1, MPI_INT, 0, 77, mx, 0, 0, &r));
            OK(MPI_Request_free(&r));
            pair_sync(mx, peer);
            OK(MPIX_Stream_recv(&z, 1, MPI_INT, 0, 77, mx, 0, 0, &st));
            CHECK(z == 2, "after a freed receive took the first message, got %d", z);
            pair_sync(mx, peer);
            CHECK(y == 1, "freed receive got %d", y);
        } else {
            pair_sync(mx, peer);
            int one = 1, two = 2;
            OK(MPIX_Stream_send(&one, 1, MPI_INT, 1, 77, mx, 0, 0));
            OK(MPIX_Stream_send(&two, 1, MPI_INT, 1, 77, mx, 0, 0));
            pair_sync(mx, peer);
        }
        /* cancel of a wildcard receive whose message had already arrived (it takes MPICH's own receive
         * of that message): either it completes with the message, not cancelled, or it is cancelled and
         * the message is still there for the next receive; never both, never neither */
        if (rank == 1) {
            int x = -1;
            MPI_Request r;
            MPI_Status st;
            pair_sync(mx, peer);
            pair_sync(mx, peer);
            OK(MPIX_Stream_irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 55, mx, MPIX_ANY_INDEX, 0, &r));
            OK(MPI_Cancel(&r));
            OK(MPI_Wait(&r, &st));
            int cancelled = 0;
            MPI_Test_cancelled(&st, &cancelled);
            if (cancelled) {
                OK(MPIX_Stream_recv(&x, 1, MPI_INT, 0, 55, mx, 0, 0, &st));
                CHECK(x == 55, "after a cancelled receive the message held %d", x);
            } else {
                CHECK(x == 55 && st.MPI_SOURCE == 0 && st.MPI_TAG == 55,
                      "a receive that was not cancelled got %d from %d tag %d", x, st.MPI_SOURCE, st.MPI_TAG);
            }
        } else {
            int v = 55;
            pair_sync(mx, peer);
            OK(MPIX_Stream_send(&v, 1, MPI_INT, 1, 55, mx, 0, 0));
            pair_sync(mx, peer);
        }
    }
    OK(MPI_Barrier(mx));

    /* a process without streams takes part but has no indices */
    if (n == 0) {
        int x = 0;
        EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, 0, 0, mx, 0, 0), MPI_ERR_ARG, "attached 0 stream");
    }
    if (rank == 0 && size > 2) {
        int x = 0;
        EXPECT_ERR(MPIX_Stream_send(&x, 1, MPI_INT, size - 1, 0, mx, 0, 0), MPIX_ERR_STREAM, "no stream attached");
    }

    /* dup: multiplex too, with its own matching (nothing crosses between the two) */
    MPI_Comm dup, idup;
    MPI_Request ir;
    OK(MPI_Comm_dup(mx, &dup));
    for (int i = 0; i < n; i++) {
        OK(MPIX_Comm_get_stream(dup, i, &got));
        CHECK(got == streams[i], "dup get_stream(%d) = %x", i, got);
    }
    if (rank <= 1 && size >= 2) {
        int peer = 1 - rank, x = 10 + rank, y = -1, z = -1;
        MPI_Request r[3];
        OK(MPIX_Stream_irecv(&y, 1, MPI_INT, peer, 4, mx, 0, 0, &r[0]));
        OK(MPIX_Stream_irecv(&z, 1, MPI_INT, peer, 4, dup, 0, 0, &r[1]));
        int x2 = 20 + rank;
        OK(MPIX_Stream_send(&x2, 1, MPI_INT, peer, 4, dup, 0, 0));
        OK(MPIX_Stream_isend(&x, 1, MPI_INT, peer, 4, mx, 0, 0, &r[2]));
        { MPI_Status sts3[3]; OK(MPI_Waitall(3, r, sts3)); }
        CHECK(y == 10 + peer && z == 20 + peer, "dup isolation: %d %d", y, z);
    }
    /* idup: multiplex too once its request completes (tests/c/multiplex_idup.c covers more) */
    OK(MPI_Comm_idup(mx, &idup, &ir));
    OK(MPI_Wait(&ir, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) {
        OK(MPIX_Comm_get_stream(idup, i, &got));
        CHECK(got == streams[i], "idup get_stream(%d) = %x", i, got);
    }
    if (n > 0) {
        int x = 40 + rank, y = -1;
        MPI_Request r;
        OK(MPIX_Stream_irecv(&y, 1, MPI_INT, rank, 3, idup, 0, 0, &r));
        OK(MPIX_Stream_send(&x, 1, MPI_INT, rank, 3, idup, 0, 0));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(y == 40 + rank, "idup send to self: %d", y);
    }

    OK(MPI_Comm_free(&idup));
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < n; i++)
        if (streams[i] != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&streams[i]));
    return mpixtest_finish();
}

/* MPI_Comm_idup and MPI_Comm_idup_with_info of a multiplex communicator are multiplex too (as
 * natively): once the request completes, MPIX_Comm_get_stream returns the parent's streams and indexed
 * traffic works between every pair of indices, isolated from the parent's. The idup never blocks its
 * caller: rank 0 waits for it before receiving a 4 MiB message (rendezvous) that rank 1 sends before
 * rank 1 waits for its own; ranks 0 and 1 start the idups of two multiplex communicators in opposite
 * orders and complete them with one MPI_Waitall; another pair completes through an MPI_Test loop.
 * With MPIXTEST_IDUP_FUNNELED=1 the program runs at MPI_THREAD_FUNNELED, where the idups are multiplex
 * too (made by nonblocking dups of the hidden communicators, shim/src/multiplex/idup.rs); there every
 * rank waits for the first idup before the rendezvous message (on the streams layout the dups of the
 * hidden stream communicators progress only in the waits and tests of the idup, as MPICH's own idup of
 * a stream communicator does: docs/multiplex.md). */
#include "mpixtest.h"
#include <stdlib.h>
#include <string.h>

#define NS 2
static int rank, size;

/* Every index of every process to every index of every other, on `c`, tags from `tag`; with the
 * same exchange running on `other` at once with the same tags, to show the two never match. */
static void all_pairs(MPI_Comm c, MPI_Comm other, int tag) {
    enum { MAXR = 4 * NS * NS * 2 };
    int out[MAXR], in[MAXR], in2[MAXR];
    MPI_Request r[4 * MAXR];
    int nr = 0, k = 0;
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank) continue;
        for (int si = 0; si < NS; si++)
            for (int di = 0; di < NS; di++, k++) {
                /* receive on my index di from peer's index si */
                in[k] = in2[k] = -1;
                OK(MPIX_Stream_irecv(&in[k], 1, MPI_INT, peer, tag, c, si, di, &r[nr++]));
                OK(MPIX_Stream_irecv(&in2[k], 1, MPI_INT, peer, tag, other, si, di, &r[nr++]));
            }
    }
    k = 0;
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank) continue;
        for (int si = 0; si < NS; si++)
            for (int di = 0; di < NS; di++, k++) {
                out[k] = rank * 100 + si * 10 + di;
                OK(MPIX_Stream_isend(&out[k], 1, MPI_INT, peer, tag, other, si, di, &r[nr++]));
                OK(MPIX_Stream_isend(&out[k], 1, MPI_INT, peer, tag, c, si, di, &r[nr++]));
            }
    }
    static MPI_Status st[4 * MAXR];
    OK(MPI_Waitall(nr, r, st));
    k = 0;
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank) continue;
        for (int si = 0; si < NS; si++)
            for (int di = 0; di < NS; di++, k++) {
                int want = peer * 100 + si * 10 + di; /* what the peer sent from its si to my di */
                CHECK(in[k] == want && in2[k] == want, "from %d(%d) to my %d: %d and %d, expected %d", peer, si, di,
                      in[k], in2[k], want);
            }
    }
}

static void expect_multiplex(MPI_Comm c, const MPIX_Stream *streams, const char *what) {
    for (int i = 0; i < NS; i++) {
        MPIX_Stream got = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(c, i, &got));
        CHECK(got == streams[i], "%s: get_stream(%d) = %x, expected %x", what, i, got, streams[i]);
    }
    int ub = 0;
    OK(MPIX_Comm_multiplex_tag_ub(c, &ub));
    CHECK(ub > 0, "%s: tag bound %d", what, ub);
}

int main(int argc, char **argv) {
    int provided, funneled = getenv("MPIXTEST_IDUP_FUNNELED") && atoi(getenv("MPIXTEST_IDUP_FUNNELED"));
    MPI_Init_thread(&argc, &argv, funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    MPIX_Stream streams[NS];
    for (int i = 0; i < NS; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
    MPI_Comm mx, mx2;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, NS, streams, &mx));
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, NS, streams, &mx2));
    MPI_Comm_set_errhandler(mx, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(mx2, MPI_ERRORS_RETURN);

    /* 1. idup; rank 0 waits for it before taking rank 1's rendezvous message */
    const int big = 1 << 20;
    int *buf = malloc(big * sizeof(int));
    MPI_Comm d1;
    MPI_Request r1;
    OK(MPI_Comm_idup(mx, &d1, &r1));
    if (funneled) OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
    if (rank == 0 && size > 1) {
        OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
        OK(MPI_Recv(buf, big, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(buf[0] == 1 && buf[big - 1] == big, "rendezvous data %d %d", buf[0], buf[big - 1]);
    } else if (rank == 1) {
        for (int i = 0; i < big; i++) buf[i] = i + 1;
        OK(MPI_Send(buf, big, MPI_INT, 0, 77, MPI_COMM_WORLD));
        OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
    }
    free(buf);

    {
        expect_multiplex(d1, streams, "idup");
        all_pairs(d1, mx, 5);

        /* 2. idups of two communicators started in opposite orders, one Waitall */
        MPI_Comm a, b;
        MPI_Request rr[2];
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "mpi_assert_no_any_tag", "false");
        if (rank % 2 == 0) {
            OK(MPI_Comm_idup(mx, &a, &rr[0]));
            OK(MPI_Comm_idup_with_info(mx2, info, &b, &rr[1]));
        } else {
            OK(MPI_Comm_idup_with_info(mx2, info, &b, &rr[1]));
            OK(MPI_Comm_idup(mx, &a, &rr[0]));
        }
        MPI_Status st[2];
        OK(MPI_Waitall(2, rr, st));
        MPI_Info_free(&info);
        expect_multiplex(a, streams, "idup (first)");
        expect_multiplex(b, streams, "idup_with_info (second)");
        all_pairs(a, b, 6);
        all_pairs(b, d1, 7);

        /* 3. an idup of an idup's result, completed through MPI_Test */
        MPI_Comm c;
        MPI_Request rc;
        OK(MPI_Comm_idup(a, &c, &rc));
        int flag = 0;
        long polls = 0;
        while (!flag) {
            OK(MPI_Test(&rc, &flag, MPI_STATUS_IGNORE));
            polls++;
        }
        CHECK(rc == MPI_REQUEST_NULL, "the completed idup request was not freed");
        expect_multiplex(c, streams, "idup of an idup");
        all_pairs(c, a, 8);
        if (rank == 0) printf("idup of an idup completed after %ld MPI_Test calls\n", polls);

        /* freeing the parent first is fine: the children keep their streams and hidden communicators */
        OK(MPI_Comm_free(&a));
        all_pairs(c, b, 9);
        OK(MPI_Comm_free(&c));
        OK(MPI_Comm_free(&b));
        OK(MPI_Comm_free(&d1));
    }
    OK(MPI_Comm_free(&mx2));
    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < NS; i++) OK(MPIX_Stream_free(&streams[i]));
    return mpixtest_finish();
}

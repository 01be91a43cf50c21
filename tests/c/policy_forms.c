/* The large-count (`_c`) forms and the less common nonblocking collectives on a communicator the explicit
 * policy made (an MPI_Comm_dup of MPI_COMM_WORLD; on MPICH >= 4.1 a native stream communicator), as
 * mpi4py 4 calls them: MPI_Sendrecv_c, MPI_Iallreduce_c, MPI_Iallgather_c, ... Native MPICH waits for
 * them with a progress that skips the stream's reserved VCI, so each hung there until the lean library
 * routed them like their plain forms (a hang reads as the test's timeout); MPI_Dist_graph_create, the
 * same. MPI_Sendrecv itself (routed as Irecv + Send + Wait) with a rendezvous-sized message and with
 * MPI_PROC_NULL. The dup of a periodic Cartesian communicator (a policy communicator with a topology):
 * nonblocking and persistent collectives, which MPICH >= 4.3 runs on the plain base, and their
 * neighbourhood forms, which run on a copy of the topology there (and the dup of a distributed graph).
 * The handler set after creation governs those collectives. Results are checked. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    long *all = malloc(sizeof(long) * size);
    MPI_Request r;
    MPI_Status st;
    enum { BIG = 1 << 16 }; /* 512 KiB of longs */
    long *big_out = malloc(sizeof(long) * BIG), *big_in = malloc(sizeof(long) * BIG);

    for (int round = 0; round < 20; round++) {
        /* MPI_Sendrecv_c around the ring. */
        long out = 1000L * round + rank, in = -1;
        OK(MPI_Sendrecv_c(&out, 1, MPI_LONG, peer, round, &in, 1, MPI_LONG, from, round, c, &st));
        CHECK(in == 1000L * round + from, "Sendrecv_c round %d: got %ld", round, in);
        CHECK(st.MPI_SOURCE == from && st.MPI_TAG == round, "Sendrecv_c status %d/%d", st.MPI_SOURCE, st.MPI_TAG);

        /* MPI_Sendrecv of a large message (past MPICH's eager limits: rendezvous) around the ring, and
         * one with MPI_PROC_NULL on both sides (an empty status). */
        for (int i = 0; i < BIG; i++) big_out[i] = (long)round * BIG + i + rank;
        OK(MPI_Sendrecv(big_out, BIG, MPI_LONG, peer, 100 + round, big_in, BIG, MPI_LONG, from, 100 + round, c, &st));
        int got = -1;
        OK(MPI_Get_count(&st, MPI_LONG, &got));
        CHECK(got == BIG && st.MPI_SOURCE == from, "large Sendrecv round %d: count %d from %d", round, got, st.MPI_SOURCE);
        for (int i = 0; i < BIG; i += 997)
            CHECK(big_in[i] == (long)round * BIG + i + from, "large Sendrecv round %d: [%d] = %ld", round, i, big_in[i]);
        OK(MPI_Sendrecv(&out, 1, MPI_LONG, MPI_PROC_NULL, 0, &in, 1, MPI_LONG, MPI_PROC_NULL, 0, c, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "Sendrecv with MPI_PROC_NULL: %d/%d",
              st.MPI_SOURCE, st.MPI_TAG);

        /* MPI_Iallreduce_c. */
        long sum = -1, mine = rank + round;
        OK(MPI_Iallreduce_c(&mine, &sum, 1, MPI_LONG, MPI_SUM, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(sum == (long)size * (size - 1) / 2 + (long)size * round, "Iallreduce_c round %d: %ld", round, sum);

        /* MPI_Iallgather_c. */
        for (int i = 0; i < size; i++) all[i] = -1;
        OK(MPI_Iallgather_c(&mine, 1, MPI_LONG, all, 1, MPI_LONG, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < size; i++) CHECK(all[i] == i + round, "Iallgather_c round %d: [%d] = %ld", round, i, all[i]);

        /* MPI_Ibcast_c, MPI_Ireduce_c, MPI_Ialltoall_c (already in the prototype list, unrouted). */
        long b = rank == 0 ? 77 + round : -1;
        OK(MPI_Ibcast_c(&b, 1, MPI_LONG, 0, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(b == 77 + round, "Ibcast_c round %d: %ld", round, b);
        long red = -1;
        OK(MPI_Ireduce_c(&mine, &red, 1, MPI_LONG, MPI_MAX, 0, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (rank == 0) CHECK(red == size - 1 + round, "Ireduce_c round %d: %ld", round, red);

        /* MPI_Ireduce_scatter (every rank gets one element: the sum of rank r's contributions). */
        long *contrib = malloc(sizeof(long) * size);
        int *counts = malloc(sizeof(int) * size);
        for (int i = 0; i < size; i++) { contrib[i] = rank * 10 + i; counts[i] = 1; }
        long part = -1;
        OK(MPI_Ireduce_scatter(contrib, &part, counts, MPI_LONG, MPI_SUM, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(part == 10L * size * (size - 1) / 2 + (long)size * rank, "Ireduce_scatter round %d: %ld", round, part);

        /* MPI_Ialltoallw: rank i sends rank*100+j to rank j. */
        int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
        MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * size);
        long *sendv = malloc(sizeof(long) * size), *recvv = malloc(sizeof(long) * size);
        for (int i = 0; i < size; i++) {
            sc[i] = 1; sd[i] = i * (int)sizeof(long); types[i] = MPI_LONG;
            sendv[i] = rank * 100 + i + round; recvv[i] = -1;
        }
        OK(MPI_Ialltoallw(sendv, sc, sd, types, recvv, sc, sd, types, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < size; i++)
            CHECK(recvv[i] == i * 100 + rank + round, "Ialltoallw round %d: [%d] = %ld", round, i, recvv[i]);

        /* MPI_Iscan_c. */
        long scan = -1;
        OK(MPI_Iscan_c(&mine, &scan, 1, MPI_LONG, MPI_SUM, c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(scan == (long)rank * (rank + 1) / 2 + (long)(rank + 1) * round, "Iscan_c round %d: %ld", round, scan);
        free(contrib); free(counts); free(sc); free(sd); free(types); free(sendv); free(recvv);
    }
    free(all);
    free(big_out);
    free(big_in);
    /* MPI_Dist_graph_create exchanges the graph: it hung on a native stream communicator (mpi4py's
     * testDistgraphcomm) until the lean library built it from a plain communicator of the same group. */
    MPI_Comm g;
    int src = rank, deg = 1, dst = peer;
    OK(MPI_Dist_graph_create(c, 1, &src, &deg, &dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g));
    int indeg = -1, outdeg = -1, weighted = -1;
    OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1, "Dist_graph_create: in %d out %d", indeg, outdeg);
    int in_nb = -1, out_nb = -1;
    OK(MPI_Dist_graph_neighbors(g, 1, &in_nb, MPI_UNWEIGHTED, 1, &out_nb, MPI_UNWEIGHTED));
    CHECK(in_nb == from && out_nb == peer, "Dist_graph neighbours %d/%d, expected %d/%d", in_nb, out_nb, from, peer);
    long got = -1, mine = 5000 + rank;
    OK(MPI_Neighbor_allgather(&mine, 1, MPI_LONG, &got, 1, MPI_LONG, g));
    CHECK(got == 5000 + from, "Neighbor_allgather on the graph: %ld", got);
    /* The policy's dup of the distributed graph: its base has a copy of the graph. */
    MPI_Comm gd;
    OK(MPI_Comm_dup(g, &gd));
    for (int round = 0; round < 5; round++) {
        long out = 6000 + 10 * round + rank, in = -1;
        OK(MPI_Ineighbor_allgather(&out, 1, MPI_LONG, &in, 1, MPI_LONG, gd, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(in == 6000 + 10 * round + from, "Ineighbor_allgather on the graph's dup, round %d: %ld", round, in);
    }
    OK(MPI_Comm_free(&gd));
    OK(MPI_Comm_free(&g));

    /* A Cartesian ring made from the policy communicator, reordered if MPICH wants to, and its dup. */
    MPI_Comm cart, ring;
    int dims = size, periodic = 1, topology = MPI_UNDEFINED;
    OK(MPI_Cart_create(c, 1, &dims, &periodic, 1, &cart));
    OK(MPI_Comm_dup(cart, &ring));
    OK(MPI_Topo_test(ring, &topology));
    CHECK(topology == MPI_CART, "the dup of a Cartesian communicator has topology %d", topology);
    int me = -1, left = -1, right = -1;
    OK(MPI_Comm_rank(ring, &me));
    OK(MPI_Cart_shift(ring, 0, 1, &left, &right));
    for (int round = 0; round < 10; round++) {
        long in = me + round, sum = -1, root_val = me == 1 % size ? 777 + round : -1;
        OK(MPI_Iallreduce(&in, &sum, 1, MPI_LONG, MPI_SUM, ring, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(sum == (long)size * (size - 1) / 2 + (long)size * round, "Cartesian Iallreduce round %d: %ld", round, sum);
        OK(MPI_Ibcast(&root_val, 1, MPI_LONG, 1 % size, ring, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(root_val == 777 + round, "Cartesian Ibcast round %d: %ld", round, root_val);
        long nb[2] = {-1, -1}, mine_nb = 100 * round + me;
        OK(MPI_Ineighbor_allgather(&mine_nb, 1, MPI_LONG, nb, 1, MPI_LONG, ring, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(nb[0] == 100 * round + left && nb[1] == 100 * round + right,
              "Cartesian Ineighbor_allgather round %d: %ld %ld (neighbours %d %d)", round, nb[0], nb[1], left, right);
    }
    long pin = -1, psum = -1, pnb[2] = {-1, -1};
    MPI_Request pr[2];
    OK(MPI_Allreduce_init(&pin, &psum, 1, MPI_LONG, MPI_SUM, ring, MPI_INFO_NULL, &pr[0]));
    OK(MPI_Neighbor_allgather_init(&pin, 1, MPI_LONG, pnb, 1, MPI_LONG, ring, MPI_INFO_NULL, &pr[1]));
    for (int round = 0; round < 5; round++) {
        pin = 10L * round + me;
        OK(MPI_Start(&pr[0]));
        OK(MPI_Wait(&pr[0], MPI_STATUS_IGNORE));
        CHECK(psum == 10L * round * size + (long)size * (size - 1) / 2, "Cartesian Allreduce_init round %d: %ld", round, psum);
        OK(MPI_Start(&pr[1]));
        OK(MPI_Wait(&pr[1], MPI_STATUS_IGNORE));
        CHECK(pnb[0] == 10L * round + left && pnb[1] == 10L * round + right,
              "Cartesian Neighbor_allgather_init round %d: %ld %ld", round, pnb[0], pnb[1]);
    }
    OK(MPI_Request_free(&pr[0]));
    OK(MPI_Request_free(&pr[1]));
    OK(MPI_Comm_free(&ring));
    OK(MPI_Comm_free(&cart));

    /* The handler set on the policy communicator after its creation governs its nonblocking and
     * persistent collectives too (on MPICH >= 4.3 they run on its base, which was made with the fatal
     * default): a negative count returns an error instead of aborting. */
    MPI_Comm h;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &h));
    OK(MPI_Comm_set_errhandler(h, MPI_ERRORS_RETURN));
    long hv = 1, hs = 0;
    MPI_Request hr = MPI_REQUEST_NULL;
    int hrc = MPI_Iallreduce(&hv, &hs, -1, MPI_LONG, MPI_SUM, h, &hr);
    CHECK(hrc != MPI_SUCCESS, "MPI_Iallreduce with count -1 succeeded");
    hrc = MPI_Allreduce_init(&hv, &hs, -1, MPI_LONG, MPI_SUM, h, MPI_INFO_NULL, &hr);
    CHECK(hrc != MPI_SUCCESS, "MPI_Allreduce_init with count -1 succeeded");
    OK(MPI_Iallreduce(&hv, &hs, 1, MPI_LONG, MPI_SUM, h, &hr));
    OK(MPI_Wait(&hr, MPI_STATUS_IGNORE));
    CHECK(hs == size, "MPI_Iallreduce after the errors: %ld", hs);
    OK(MPI_Comm_free(&h));
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

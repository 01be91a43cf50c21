/* A stream communicator some members attached no stream to (native MPICH allows MPIX_STREAM_NULL on any
 * member): every constructor of it is one collective that all members plan alike (shim/src/ctor_plan.rs),
 * under every policy. Rank 0 (and, with MPIXTEST_STREAM_RANKS=odd, the odd ranks instead) attaches a
 * stream, the others MPIX_STREAM_NULL; then each constructor of the stream communicator, and an
 * MPI_Allreduce and a ring exchange on its result:
 *   MPI_Comm_dup, MPI_Comm_dup_with_info, MPI_Comm_idup (waited for), MPI_Comm_split, MPI_Comm_split_type,
 *   MPI_Comm_create, MPI_Comm_create_group, MPI_Cart_create, MPI_Intercomm_create (two halves), and a dup
 *   of the dup.
 * Each member's MPIX_Comm_get_stream of a dup-like child is its own stream of the parent (natively a dup
 * keeps the parent's streams); a split's is the policy's (implicit: none). Under the explicit policy a
 * dup of this communicator hung: the members with a stream took MPICH's dup, the others the policy's
 * split, create and agreement (issue 37's second scenario). A hang reads as the test's timeout. */
#include "mpixtest.h"

static int rank, size;

static void use(MPI_Comm c, const char *what) {
    int csize, crank, one = 1, sum = 0;
    OK(MPI_Comm_size(c, &csize));
    OK(MPI_Comm_rank(c, &crank));
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == csize, "%s: allreduce gave %d, expected %d", what, sum, csize);
    int out = crank, in = -1, right = (crank + 1) % csize, left = (crank + csize - 1) % csize;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 5, &in, 1, MPI_INT, left, 5, c, MPI_STATUS_IGNORE));
    CHECK(in == left, "%s: ring received %d, expected %d", what, in, left);
}

/* The stream a dup-like child of the stream communicator must report here: this member's own. */
static void same_stream(MPI_Comm child, MPIX_Stream mine, const char *what) {
    MPIX_Stream got = 0;
    OK(MPIX_Comm_get_stream(child, 0, &got));
    CHECK(got == mine, "%s: MPIX_Comm_get_stream gave 0x%08x, expected this member's 0x%08x", what, (unsigned)got,
          (unsigned)mine);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *which = getenv("MPIXTEST_STREAM_RANKS");
    int attach = which && strcmp(which, "odd") == 0 ? rank % 2 == 1 : rank == 0;
    MPIX_Stream s = MPIX_STREAM_NULL;
    if (attach) OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPI_Comm sc, c;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc));
    same_stream(sc, s, "the stream communicator");
    use(sc, "the stream communicator");

    OK(MPI_Comm_dup(sc, &c));
    same_stream(c, s, "MPI_Comm_dup");
    use(c, "MPI_Comm_dup");
    MPI_Comm cc;
    OK(MPI_Comm_dup(c, &cc));
    same_stream(cc, s, "a dup of the dup");
    use(cc, "a dup of the dup");
    OK(MPI_Comm_free(&cc));
    OK(MPI_Comm_free(&c));

    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "false"));
    OK(MPI_Comm_dup_with_info(sc, info, &c));
    same_stream(c, s, "MPI_Comm_dup_with_info");
    use(c, "MPI_Comm_dup_with_info");
    OK(MPI_Comm_free(&c));
    OK(MPI_Info_free(&info));

    MPI_Request r;
    OK(MPI_Comm_idup(sc, &c, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    same_stream(c, s, "MPI_Comm_idup");
    use(c, "MPI_Comm_idup");
    OK(MPI_Comm_free(&c));

    OK(MPI_Comm_split(sc, rank % 2, rank, &c));
    use(c, "MPI_Comm_split");
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_split_type(sc, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c));
    use(c, "MPI_Comm_split_type");
    OK(MPI_Comm_free(&c));

    MPI_Group all, evens;
    OK(MPI_Comm_group(sc, &all));
    int n_even = (size + 1) / 2, ranks[64];
    for (int i = 0; i < n_even; i++) ranks[i] = 2 * i;
    OK(MPI_Group_incl(all, n_even, ranks, &evens));
    OK(MPI_Comm_create(sc, evens, &c));
    if (rank % 2 == 0) {
        use(c, "MPI_Comm_create");
        OK(MPI_Comm_free(&c));
        OK(MPI_Comm_create_group(sc, evens, 9, &c));
        use(c, "MPI_Comm_create_group");
        OK(MPI_Comm_free(&c));
    } else {
        CHECK(c == MPI_COMM_NULL, "MPI_Comm_create gave a non-member a communicator");
    }
    OK(MPI_Group_free(&evens));
    OK(MPI_Group_free(&all));

    int dims[1] = {size}, periods[1] = {1};
    OK(MPI_Cart_create(sc, 1, dims, periods, 0, &c));
    use(c, "MPI_Cart_create");
    OK(MPI_Comm_free(&c));

    if (size >= 2) {
        MPI_Comm half, inter;
        OK(MPI_Comm_split(sc, rank < size / 2, rank, &half));
        int remote_leader = rank < size / 2 ? size / 2 : 0;
        OK(MPI_Intercomm_create(half, 0, sc, remote_leader, 11, &inter));
        int one = 1, sum = 0, remote = 0;
        OK(MPI_Comm_remote_size(inter, &remote));
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, inter));
        CHECK(sum == remote, "MPI_Intercomm_create: allreduce gave %d, expected %d", sum, remote);
        OK(MPI_Comm_free(&inter));
        OK(MPI_Comm_free(&half));
    }

    OK(MPI_Comm_free(&sc));
    if (s != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&s));
    return mpixtest_finish();
}

/* Under the explicit policy, what a communicator's members must agree on is agreed when it is made, and
 * a communicator's record goes on every destruction path (shim/src/comms.rs).
 *
 * 1. Agreed routes. Run with MPIXSTREAM_STREAMS=1: every rank but the last splits off a communicator
 *    (taking its one stream), then every rank dups MPI_COMM_WORLD: only the last rank has a stream for
 *    the dup. Its nonblocking and persistent collectives must still run on the same communicator on
 *    every member (before: members with a stream ran them on the dup's base, the others on the dup
 *    itself, and MPI_Wait never returned; a hang reads as the test's timeout).
 * 2. MPI_Comm_disconnect gives the stream back as MPI_Comm_free does: with the pool of one stream, a dup
 *    made after a disconnected one still gets a stream, and an MPI_Comm_idup (which the policy leaves
 *    implicit) made right after the disconnect, typically on the same handle, has none (before: the
 *    disconnected communicator's entry stayed, and the idup was taken for it).
 * 3. A dup made after the free of another, whose handle MPICH may reuse at once, is its own
 *    communicator: it has a stream, and traffic on it is correct.
 * MPIXTEST_PARTS: a bit mask of the parts to run (default 7, all). */
#include "mpixtest.h"

/* Whether `c` has a local stream. */
static int has_stream(MPI_Comm c) {
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    return s != MPIX_STREAM_NULL;
}

/* MPI_Iallreduce, MPI_Ibarrier and a persistent MPI_Allreduce_init on `c`, results checked. */
static void collectives(MPI_Comm c, int count, int round) {
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    int *in = malloc(sizeof(int) * count), *out = malloc(sizeof(int) * count);
    for (int i = 0; i < count; i++) in[i] = rank + i + round;
    MPI_Request r;
    OK(MPI_Iallreduce(in, out, count, MPI_INT, MPI_SUM, c, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    int bad = 0;
    for (int i = 0; i < count; i++)
        if (out[i] != size * (size - 1) / 2 + size * (i + round)) bad++;
    CHECK(bad == 0, "round %d: %d of %d MPI_Iallreduce results wrong", round, bad, count);
    OK(MPI_Ibarrier(c, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
#if MPI_VERSION >= 4
    OK(MPI_Allreduce_init(in, out, count, MPI_INT, MPI_MAX, c, MPI_INFO_NULL, &r));
    for (int k = 0; k < 2; k++) {
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(out[count - 1] == size - 1 + count - 1 + round, "round %d: persistent max %d", round, out[count - 1]);
    }
    OK(MPI_Request_free(&r));
#endif
    free(in);
    free(out);
}

/* A ring exchange on `c`. */
static void ring(MPI_Comm c, int round) {
    int rank, size, got = -1;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, round, &got, 1, MPI_INT, (rank + size - 1) % size,
                    round, c, MPI_STATUS_IGNORE));
    CHECK(got == (rank + size - 1) % size, "round %d: ring received %d", round, got);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int streams = policy_gives_streams();
    int count = env_int("MPIXTEST_COUNT", 65536), parts = env_int("MPIXTEST_PARTS", 7);

    /* 1. Agreed routes. */
    MPI_Comm split, dup;
    if (!(parts & 1)) goto disconnect;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1 ? 0 : MPI_UNDEFINED, rank, &split));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    if (streams && size > 1) {
        if (split != MPI_COMM_NULL) CHECK(has_stream(split), "the split took the stream");
        CHECK(has_stream(dup) == (rank == size - 1), "dup: stream %d on rank %d", has_stream(dup), rank);
    }
    for (int round = 0; round < 3; round++) collectives(dup, count, round);
    ring(dup, 0);
    if (split != MPI_COMM_NULL) {
        collectives(split, 16, 0);
        OK(MPI_Comm_free(&split));
    }
    OK(MPI_Comm_free(&dup));

disconnect:
    /* 2. MPI_Comm_disconnect gives the stream back. */
    for (int round = 0; round < 3 && (parts & 2); round++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        if (streams) CHECK(has_stream(c), "round %d: the dup after a disconnect has no stream", round);
        ring(c, round);
        collectives(c, 16, round);
        MPI_Comm old = c;
        OK(MPI_Comm_disconnect(&c));
        CHECK(c == MPI_COMM_NULL, "disconnect left the handle");
        MPI_Request r;
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &c, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(!has_stream(c), "round %d: an idup (handle %s) has a stream", round, c == old ? "reused" : "new");
        ring(c, round);
        OK(MPI_Comm_free(&c));
    }

    /* 3. Handles reused after a free. */
    for (int round = 0; round < 50 && (parts & 4); round++) {
        MPI_Comm a, b;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        OK(MPI_Comm_free(&a));
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
        if (streams) CHECK(has_stream(b), "round %d: a dup after a free has no stream", round);
        ring(b, round);
        OK(MPI_Comm_free(&b));
    }
    return mpixtest_finish();
}

/* A correct program under MPIXSTREAM_CHECK=1: thread 1 runs nonblocking collectives (MPI_Ibarrier,
 * MPI_Iallreduce + MPI_Wait) on its own policy communicator, while thread 2 exchanges ordinary
 * point-to-point messages on MPI_COMM_WORLD (no stream). On native MPICH the lean library hands out each
 * such collective as a generalized request and completes the real (inner) one itself; the tools library
 * used to keep the inner request's entry forever, so when MPICH reused that handle for thread 2's
 * MPI_Isend, thread 2's MPI_Wait was charged to thread 1's communicator and the check aborted this
 * correct program ("used by two threads at once"). MPIXTEST_ROUNDS (default 1500) rounds per thread.
 * MPIXTEST_TOPOLOGY=1: thread 1's communicator is a dup of a periodic Cartesian ring, and each round
 * adds an MPI_Ineighbor_allgather (the policy's collectives of a communicator with a topology, which
 * MPICH >= 4.3 runs on its base, a copy of the topology, too). */
#include "mpixtest.h"
#include <pthread.h>

static int rank, size, rounds, topology;
static MPI_Comm mine;

static void *collectives(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        MPI_Request r;
        OK(MPI_Ibarrier(mine, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        int in = rank + i, sum = -1;
        OK(MPI_Iallreduce(&in, &sum, 1, MPI_INT, MPI_SUM, mine, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(sum == size * (size - 1) / 2 + size * i, "round %d: Iallreduce %d", i, sum);
        if (topology) {
            int left, right, got[2] = {-1, -1}, me = 1000 * i + rank;
            OK(MPI_Cart_shift(mine, 0, 1, &left, &right));
            OK(MPI_Ineighbor_allgather(&me, 1, MPI_INT, got, 1, MPI_INT, mine, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK(got[0] == 1000 * i + left && got[1] == 1000 * i + right, "round %d: Ineighbor_allgather %d %d", i,
                  got[0], got[1]);
        }
    }
    return NULL;
}

static void *point_to_point(void *arg) {
    (void)arg;
    int peer = rank ^ 1;
    if (peer >= size) return NULL;
    for (int i = 0; i < rounds; i++) {
        int out = i, in = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(&out, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        CHECK(in == i, "round %d: got %d", i, in);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    rounds = env_int("MPIXTEST_ROUNDS", 1500);
    topology = env_int("MPIXTEST_TOPOLOGY", 0);
    if (topology) {
        MPI_Comm cart;
        int dims = size, periodic = 1, kind = MPI_UNDEFINED;
        OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &periodic, 0, &cart));
        OK(MPI_Comm_dup(cart, &mine));
        OK(MPI_Comm_free(&cart));
        OK(MPI_Topo_test(mine, &kind));
        CHECK(kind == MPI_CART, "the dup of a Cartesian communicator has topology %d", kind);
    } else {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &mine));
    }
    pthread_t t1, t2;
    pthread_create(&t1, NULL, collectives, NULL);
    pthread_create(&t2, NULL, point_to_point, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    OK(MPI_Comm_free(&mine));
    return mpixtest_finish();
}

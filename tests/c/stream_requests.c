/* A request names its endpoint: the completion calls claim the reserved endpoint of every request they
 * are given by the pool bits MPICH writes into the request's handle (shim/src/streams.rs,
 * RequestPools), so the bits must name, on every MPICH the library runs on, the stream the operation
 * runs on. Sends and receives (MPI_Isend, MPI_Irecv, MPI_Issend, MPI_Imrecv after MPI_Improbe, a
 * persistent send's request; not a request MPICH handed out complete) on stream communicators of two streams (MPIX API) and on a communicator of
 * the explicit policy, where it gives streams, name their communicator's stream
 * (mpixstream_request_stream = mpixstream_comm_stream); those on MPI_COMM_WORLD name none. On the
 * serial backend nothing has a reserved endpoint: every request names none. */
#include "mpixtest.h"

int mpixstream_request_stream(MPI_Request request);
int mpixstream_comm_stream(MPI_Comm comm);

static int rank, size, peer, from;

/* What a request must name: `expect`, but none for a request MPICH handed out complete (a built-in
 * handle, as its MPI_Isend of a message that left at once gets: nothing more runs for it). */
static int named(MPI_Request r, int expect) { return ((unsigned)r >> 30) == 1 ? -1 : expect; }

static void check_requests(MPI_Comm c, const char *what, int expect) {
    int out = rank, in = -1, in2 = -1;
    MPI_Request r[3];
    OK(MPI_Irecv(&in, 1, MPI_INT, from, 1, c, &r[0]));
    OK(MPI_Isend(&out, 1, MPI_INT, peer, 1, c, &r[1]));
    OK(MPI_Issend(&out, 1, MPI_INT, peer, 2, c, &r[2]));
    const char *names[3] = {"MPI_Irecv", "MPI_Isend", "MPI_Issend"};
    for (int i = 0; i < 3; i++)
        CHECK(mpixstream_request_stream(r[i]) == named(r[i], expect), "%s: %s request 0x%08x names stream %d, expected %d",
              what, names[i], (unsigned)r[i], mpixstream_request_stream(r[i]), named(r[i], expect));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE)); /* the synchronous send matches the probe below */
    CHECK(in == from, "%s: received %d", what, in);
    MPI_Message m;
    MPI_Status st;
    int flag = 0;
    while (!flag) OK(MPI_Improbe(from, 2, c, &flag, &m, &st));
    CHECK(mpixstream_request_stream(m) == expect, "%s: matched message names stream %d, expected %d", what,
          mpixstream_request_stream(m), expect);
    MPI_Request mr;
    OK(MPI_Imrecv(&in2, 1, MPI_INT, &m, &mr));
    CHECK(mpixstream_request_stream(mr) == named(mr, expect), "%s: MPI_Imrecv names stream %d, expected %d", what,
          mpixstream_request_stream(mr), named(mr, expect));
    OK(MPI_Wait(&mr, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r[2], MPI_STATUS_IGNORE));
    CHECK(in2 == from, "%s: matched receive got %d", what, in2);
    MPI_Request ps, pr;
    OK(MPI_Send_init(&out, 1, MPI_INT, peer, 3, c, &ps));
    OK(MPI_Recv_init(&in, 1, MPI_INT, from, 3, c, &pr));
    for (int round = 0; round < 3; round++) {
        in = -1;
        OK(MPI_Start(&pr));
        OK(MPI_Start(&ps));
        MPI_Request both[2] = {pr, ps};
        OK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
        CHECK(in == from, "%s: persistent round %d received %d", what, round, in);
    }
    OK(MPI_Request_free(&ps));
    OK(MPI_Request_free(&pr));
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = (rank + 1) % size;
    from = (rank + size - 1) % size;
    int reserved = native_backend();
    MPIX_Stream s[2];
    MPI_Comm sc[2];
    for (int i = 0; i < 2; i++) {
        OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
        OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[i], &sc[i]));
    }
    check_requests(MPI_COMM_WORLD, "MPI_COMM_WORLD", -1);
    for (int i = 0; i < 2; i++) {
        int stream = mpixstream_comm_stream(sc[i]);
        CHECK(stream >= 0, "stream communicator %d has no stream", i);
        check_requests(sc[i], i == 0 ? "stream communicator 0" : "stream communicator 1", reserved ? stream : -1);
    }
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    int stream = mpixstream_comm_stream(d);
    if (policy_gives_streams()) CHECK(stream >= 0, "the policy communicator has no stream");
    check_requests(d, "policy communicator", reserved && stream >= 0 ? stream : -1);
    OK(MPI_Comm_free(&d));
    for (int i = 0; i < 2; i++) {
        OK(MPI_Comm_free(&sc[i]));
        OK(MPIX_Stream_free(&s[i]));
    }
    return mpixtest_finish();
}

/* MPI_Isendrecv and MPI_Isendrecv_replace on a communicator the explicit policy made (an MPI_Comm_dup of
 * MPI_COMM_WORLD; on MPICH >= 4.3 a native stream communicator): a ring (send right, receive from the
 * left) with contiguous buffers and a derived vector datatype, sizes from 0 to past the eager limit
 * (64 KiB), completed with MPI_Wait, an MPI_Test loop, MPI_Waitany, MPI_Waitall and an MPI_Testall loop;
 * peers that use plain MPI_Recv/MPI_Send; MPI_ANY_SOURCE/MPI_ANY_TAG, MPI_PROC_NULL, MPI_Cancel, and
 * MPI_Request_free before completion. Data and status (MPI_Get_count, MPI_SOURCE, MPI_TAG) are checked.
 * Native MPICH 5.0.2 completes both calls only through its global progress, which never turns the
 * stream's reserved VCI: each hung there (the test's timeout) until the lean library routed them as an
 * Irecv + Isend handed out as one generalized request polled with the stream's progress
 * (shim/src/native_fixes/sendrecv_requests.rs).
 * Where the calls go to MPICH's own (Debian's 4.0.2, or no policy), the status and the replace of a
 * vector are not checked: MPICH's Isendrecv receives with MPI_STATUS_IGNORE inside its schedule, so the
 * request's status is not the receive's (garbage source, tag and count on 4.0.2 and 5.0.2), and its
 * Isendrecv_replace sends the packed copy of the buffer with the user's datatype (a vector arrives
 * wrong); src/mpi/pt2pt/sendrecv.c, src/mpid/common/sched/mpidu_sched.c. The route has neither. */
#include "mpixtest.h"

static int rank, size, left, right;
static MPI_Comm c;
/* Whether the lean library routes the calls (a native stream communicator: the policy on MPICH >= 4.1
 * with the native backend); else MPICH's own calls run, whose status is not the receive's. */
static int routed;

/* Whether the MPICH underneath is >= 4.1 (native streams). */
static int mpich_41(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0;
    MPI_Get_library_version(version, &len);
    const char *v = strstr(version, "Version:");
    if (!v || sscanf(v + 8, " %d.%d", &major, &minor) != 2) return 0;
    return major > 4 || (major == 4 && minor >= 1);
}

static int value(int who, int round, int i) { return who * 1000003 + round * 7919 + i; }

/* Completes *r in one of five ways and returns its status in *st. */
static void complete(MPI_Request *r, int how, MPI_Status *st) {
    switch (how % 5) {
    case 0:
        OK(MPI_Wait(r, st));
        break;
    case 1: {
        int flag = 0;
        while (!flag) OK(MPI_Test(r, &flag, st));
        break;
    }
    case 2: {
        int idx = -1;
        OK(MPI_Waitany(1, r, &idx, st));
        CHECK(idx == 0, "Waitany index %d", idx);
        break;
    }
    case 3:
        OK(MPI_Waitall(1, r, st));
        break;
    default: {
        int flag = 0;
        while (!flag) OK(MPI_Testall(1, r, &flag, st));
        break;
    }
    }
    CHECK(*r == MPI_REQUEST_NULL, "completion %d left the request", how % 5);
}

static void check_status(const char *what, int n, const MPI_Status *st, MPI_Datatype t, int count, int source,
                         int tag) {
    if (!routed) return;
    int got = -1;
    OK(MPI_Get_count(st, t, &got));
    CHECK(got == count, "%s n=%d: MPI_Get_count %d, expected %d", what, n, got, count);
    CHECK(st->MPI_SOURCE == source, "%s n=%d: MPI_SOURCE %d, expected %d", what, n, st->MPI_SOURCE, source);
    CHECK(st->MPI_TAG == tag, "%s n=%d: MPI_TAG %d, expected %d", what, n, st->MPI_TAG, tag);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (policy_gives_streams()) CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    const char *backend = getenv("MPIXSTREAM_BACKEND");
    routed = s != MPIX_STREAM_NULL && mpich_41() && !(backend && strcmp(backend, "serial") == 0);
    if (rank == 0) printf("routed: %s\n", routed ? "yes" : "no (MPICH's own calls: status not checked)");
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    /* 80000 and 200000 bytes: past MPICH's eager limits (rendezvous). */
    const int sizes[] = {0, 1, 7, 4096, 20000, 50000};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const int max = 50000;
    int *a = malloc(sizeof(int) * 2 * max), *b = malloc(sizeof(int) * 2 * max);
    int how = 0;
    MPI_Status st;
    MPI_Request r;

    for (int k = 0; k < nsizes; k++) {
        int n = sizes[k];
        MPI_Datatype vec;
        OK(MPI_Type_vector(n, 1, 2, MPI_INT, &vec));
        OK(MPI_Type_commit(&vec));
        for (int round = 0; round < 3; round++, how++) {
            /* Contiguous, the tag naming the sender. */
            for (int i = 0; i < n; i++) a[i] = value(rank, round, i), b[i] = -1;
            OK(MPI_Isendrecv(a, n, MPI_INT, right, 10 + rank, b, n, MPI_INT, left, 10 + left, c, &r));
            complete(&r, how, &st);
            for (int i = 0; i < n; i++)
                if (b[i] != value(left, round, i)) {
                    CHECK(0, "Isendrecv n=%d round %d: [%d] = %d, expected %d", n, round, i, b[i],
                          value(left, round, i));
                    break;
                }
            check_status("Isendrecv", n, &st, MPI_INT, n, left, 10 + left);

            /* Any source, any tag: the status names them. */
            for (int i = 0; i < n; i++) a[i] = value(rank, round + 10, i), b[i] = -1;
            OK(MPI_Isendrecv(a, n, MPI_INT, right, 20 + rank, b, n, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &r));
            complete(&r, how + 1, &st);
            CHECK(n == 0 || (b[0] == value(left, round + 10, 0) && b[n - 1] == value(left, round + 10, n - 1)),
                  "Isendrecv any source n=%d: wrong data", n);
            check_status("Isendrecv any source", n, &st, MPI_INT, n, left, 20 + left);

            /* Sent contiguous, received as one vector (every other int): the gaps stay untouched. */
            for (int i = 0; i < n; i++) a[i] = value(rank, round + 20, i);
            for (int i = 0; i < 2 * n; i++) b[i] = -5;
            OK(MPI_Isendrecv(a, n, MPI_INT, right, 30, b, 1, vec, left, 30, c, &r));
            complete(&r, how + 2, &st);
            for (int i = 0; i < n; i++)
                if (b[2 * i] != value(left, round + 20, i) || (i + 1 < n && b[2 * i + 1] != -5)) {
                    CHECK(0, "Isendrecv into a vector n=%d: [%d] = %d", n, 2 * i, b[2 * i]);
                    break;
                }
            check_status("Isendrecv into a vector", n, &st, vec, n > 0 ? 1 : 0, left, 30);
            check_status("Isendrecv into a vector (ints)", n, &st, MPI_INT, n, left, 30);

            /* Replace, contiguous. */
            for (int i = 0; i < n; i++) a[i] = value(rank, round + 30, i);
            OK(MPI_Isendrecv_replace(a, n, MPI_INT, right, 40 + rank, left, 40 + left, c, &r));
            complete(&r, how + 3, &st);
            for (int i = 0; i < n; i++)
                if (a[i] != value(left, round + 30, i)) {
                    CHECK(0, "Isendrecv_replace n=%d: [%d] = %d, expected %d", n, i, a[i], value(left, round + 30, i));
                    break;
                }
            check_status("Isendrecv_replace", n, &st, MPI_INT, n, left, 40 + left);

            /* Replace, one vector: the gaps stay untouched. */
            if (routed) {
                for (int i = 0; i < 2 * n; i++) a[i] = (i % 2) ? -5 : value(rank, round + 40, i / 2);
                OK(MPI_Isendrecv_replace(a, 1, vec, right, 50, left, 50, c, &r));
                complete(&r, how + 4, &st);
                for (int i = 0; i < n; i++)
                    if (a[2 * i] != value(left, round + 40, i) || (i + 1 < n && a[2 * i + 1] != -5)) {
                        CHECK(0, "Isendrecv_replace of a vector n=%d: [%d] = %d", n, 2 * i, a[2 * i]);
                        break;
                    }
                check_status("Isendrecv_replace of a vector", n, &st, vec, n > 0 ? 1 : 0, left, 50);
            }

            /* Both at once, waited for together (MPI_Waitall, or an MPI_Testall loop). */
            MPI_Request two[2];
            MPI_Status sts[2];
            for (int i = 0; i < n; i++) a[i] = value(rank, round + 50, i), b[i] = value(rank, round + 60, i);
            int *c2 = malloc(sizeof(int) * (n + 1));
            OK(MPI_Isendrecv(a, n, MPI_INT, right, 60, c2, n, MPI_INT, left, 60, c, &two[0]));
            OK(MPI_Isendrecv_replace(b, n, MPI_INT, right, 61, left, 61, c, &two[1]));
            if (round % 2 == 0) {
                OK(MPI_Waitall(2, two, sts));
            } else {
                int flag = 0;
                while (!flag) OK(MPI_Testall(2, two, &flag, sts));
            }
            CHECK(n == 0 || (c2[n - 1] == value(left, round + 50, n - 1) && b[n - 1] == value(left, round + 60, n - 1)),
                  "two at once n=%d: wrong data", n);
            check_status("two at once (Isendrecv)", n, &sts[0], MPI_INT, n, left, 60);
            check_status("two at once (Isendrecv_replace)", n, &sts[1], MPI_INT, n, left, 61);
            free(c2);

            /* Peers with plain calls: odd ranks MPI_Recv from the left, then MPI_Send to the right (the
             * ring alternates: 2 and 4 ranks); even ranks one of the two calls. */
            for (int i = 0; i < n; i++) a[i] = value(rank, round + 70, i), b[i] = -1;
            if (rank % 2) {
                OK(MPI_Recv(b, n, MPI_INT, left, 70, c, &st));
                OK(MPI_Send(a, n, MPI_INT, right, 70, c));
                CHECK(n == 0 || b[n - 1] == value(left, round + 70, n - 1), "plain peer n=%d: wrong data", n);
            } else {
                if (round % 2)
                    OK(MPI_Isendrecv_replace(a, n, MPI_INT, right, 70, left, 70, c, &r));
                else
                    OK(MPI_Isendrecv(a, n, MPI_INT, right, 70, b, n, MPI_INT, left, 70, c, &r));
                complete(&r, how, &st);
                int *got = (round % 2) ? a : b;
                CHECK(n == 0 || (got[0] == value(left, round + 70, 0) && got[n - 1] == value(left, round + 70, n - 1)),
                      "with a plain peer n=%d: wrong data", n);
                check_status("with a plain peer", n, &st, MPI_INT, n, left, 70);
            }
        }
        OK(MPI_Type_free(&vec));
    }

    /* MPI_PROC_NULL: both ends null (not on Debian's MPICH 4.0.2: its own MPI_Isendrecv then sends to
     * MPI_PROC_NULL through UCX and crashes in ucp_tag_send_nbx, without the library too; 4.1 and later
     * complete it at once); a send only, a receive only (started together: a send alone may need its
     * receiver). */
    if (mpich_41()) {
        OK(MPI_Isendrecv(a, 4, MPI_INT, MPI_PROC_NULL, 80, b, 4, MPI_INT, MPI_PROC_NULL, 80, c, &r));
        complete(&r, 0, &st);
        check_status("Isendrecv with MPI_PROC_NULL", 4, &st, MPI_INT, 0, MPI_PROC_NULL, MPI_ANY_TAG);
    }
    {
        MPI_Request two[2];
        MPI_Status sts[2];
        for (int i = 0; i < 8; i++) a[i] = value(rank, 90, i), b[i] = value(rank, 91, i);
        OK(MPI_Isendrecv_replace(a, 8, MPI_INT, right, 81, MPI_PROC_NULL, 81, c, &two[0]));
        OK(MPI_Isendrecv_replace(b, 8, MPI_INT, MPI_PROC_NULL, 81, left, 81, c, &two[1]));
        OK(MPI_Waitall(2, two, sts));
        CHECK(a[7] == value(rank, 90, 7), "Isendrecv_replace from MPI_PROC_NULL changed the buffer");
        CHECK(b[7] == value(left, 90, 7), "Isendrecv_replace to MPI_PROC_NULL: %d, expected %d", b[7],
              value(left, 90, 7));
        check_status("Isendrecv_replace from MPI_PROC_NULL", 8, &sts[0], MPI_INT, 0, MPI_PROC_NULL, MPI_ANY_TAG);
        check_status("Isendrecv_replace to MPI_PROC_NULL", 8, &sts[1], MPI_INT, 8, left, 81);
    }

    /* MPI_Cancel: a receive nobody sends to (the send goes to MPI_PROC_NULL) is cancelled. */
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            OK(MPI_Isendrecv(a, 4, MPI_INT, MPI_PROC_NULL, 82, b, 4, MPI_INT, left, 82, c, &r));
        else
            OK(MPI_Isendrecv_replace(a, 4, MPI_INT, MPI_PROC_NULL, 82, left, 82, c, &r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        int cancelled = 0;
        OK(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled, "%s: the receive was not cancelled", k ? "Isendrecv_replace" : "Isendrecv");
    }

    /* MPI_Request_free before completion: the operations still complete, later (a later exchange on the
     * communicator receives after them, in order), and nothing hangs at MPI_Finalize. Their buffers
     * stay valid to the end: the application cannot know when a freed operation is done. Where the calls
     * are MPICH's own, not here: MPICH 4.0.2 and 4.1.3 refuse to free their MPI_Isendrecv's request ("The
     * supplied request was invalid (kind=10)", kind=11 on 4.1.3). */
    static int fsend[5][20000], frecv[5][20000], fx[5];
    if (routed) {
        for (int round = 0; round < 5; round++) {
            int n = round % 2 ? 20000 : 3, y = -1;
            for (int i = 0; i < n; i++) fsend[round][i] = value(rank, round + 100, i);
            OK(MPI_Isendrecv(fsend[round], n, MPI_INT, right, 83, frecv[round], n, MPI_INT, left, 83, c, &r));
            OK(MPI_Request_free(&r));
            CHECK(r == MPI_REQUEST_NULL, "MPI_Request_free left the request");
            fx[round] = rank;
            OK(MPI_Isendrecv_replace(&fx[round], 1, MPI_INT, right, 84, left, 84, c, &r));
            OK(MPI_Request_free(&r));
            OK(MPI_Isendrecv(&rank, 1, MPI_INT, right, 85, &y, 1, MPI_INT, left, 85, c, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK(y == left, "after freed requests: %d, expected %d", y, left);
        }
    }

    free(a);
    free(b);
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

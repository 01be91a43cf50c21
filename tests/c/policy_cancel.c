/* MPI_Cancel on a communicator the explicit policy made a stream communicator (an MPI_Comm_dup), 2
 * ranks or more (ranks beyond 1 only take part in the collectives). Native MPICH 5.0.2 crashes in
 * ucp_request_cancel when a send is cancelled on a stream communicator (tests/native_defects/
 * cancel_send.c); under the policy such a cancel is not passed to MPICH and the send completes normally
 * (docs/native-defects.md). Checked, for each way of sending:
 *  - nothing crashes or hangs;
 *  - MPI_Test_cancelled agrees with what happened: if it says cancelled, the receiver never gets the
 *    message; if not, the receiver gets it whole;
 *  - a receive that nothing matches is cancelled (MPI_Test_cancelled says so), also when its request
 *    handle is one a completed send had (MPICH reuses freed handles);
 *  - mpi4py's pattern: MPI_Issend to self, seen by MPI_Probe, cancelled, then received if the
 *    cancel failed.
 * Runs at MPI_THREAD_MULTIPLE, where the policy gives streams. */
#include "mpixtest.h"

int mpixstream_comm_notes_sends(MPI_Comm comm);

enum { SMALL = 8, LARGE = 1 << 18 /* ints: 1 MiB, past MPICH's eager limit */ };
static int *buf;

static void fill(int n, int seed) {
    for (int i = 0; i < n; i++) buf[i] = seed * 7919 + i;
}

/* Rank 0 sends n ints with `send` (Isend, Issend or a started persistent send) on tag `tag`, cancels
 * it, and waits; rank 1 posts its receive only after the cancel (a barrier), so that a cancel has
 * the chance to succeed, then learns the outcome and checks it. */
static void cancel_a_send(MPI_Comm c, int rank, const char *what, int n, int tag) {
    MPI_Request r = MPI_REQUEST_NULL, persistent = MPI_REQUEST_NULL;
    MPI_Status st;
    int cancelled = 0;
    if (rank == 0) {
        fill(n, tag);
        if (strcmp(what, "Issend") == 0) {
            OK(MPI_Issend(buf, n, MPI_INT, 1, tag, c, &r));
        } else if (strcmp(what, "Send_init") == 0) {
            OK(MPI_Send_init(buf, n, MPI_INT, 1, tag, c, &persistent));
            OK(MPI_Start(&persistent));
            r = persistent;
        } else {
            OK(MPI_Isend(buf, n, MPI_INT, 1, tag, c, &r));
        }
        OK(MPI_Cancel(&r));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &cancelled));
        if (persistent != MPI_REQUEST_NULL) OK(MPI_Request_free(&persistent));
        MPI_Send(&cancelled, 1, MPI_INT, 1, 999, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Request rr;
        memset(buf, 0xff, (size_t)n * sizeof(int));
        OK(MPI_Irecv(buf, n, MPI_INT, 0, tag, c, &rr));
        MPI_Recv(&cancelled, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (cancelled) {
            /* The message was cancelled: the receive must match nothing, and is cancelled in turn. */
            int flag = 1, got = 0;
            OK(MPI_Test(&rr, &got, &st));
            CHECK(!got, "%s of %d ints: cancelled, yet the receiver got a message", what, n);
            if (!got) {
                OK(MPI_Cancel(&rr));
                OK(MPI_Wait(&rr, &st));
                OK(MPI_Test_cancelled(&st, &flag));
                CHECK(flag, "%s of %d ints: the receive's cancel failed", what, n);
            }
        } else {
            /* Not cancelled: the message arrives, whole. */
            int count = -1, bad = 0;
            OK(MPI_Wait(&rr, &st));
            MPI_Get_count(&st, MPI_INT, &count);
            CHECK(count == n, "%s: received %d ints, sent %d", what, count, n);
            for (int i = 0; i < n && i < count; i++) bad += buf[i] != tag * 7919 + i;
            CHECK(bad == 0, "%s of %d ints: %d wrong values received", what, n, bad);
        }
        printf("%s of %d ints cancelled: %s\n", what, n, cancelled ? "yes" : "no (completed normally)");
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A receive nothing matches is cancelled. After each completed send (rank 0 to 1, received), rank 0
 * cancels a fresh receive: MPICH hands it the handle the send had (a synchronous send's: an eager
 * standard send completes at once with a built-in handle), and it must not be taken for a send. */
static void cancel_receives(MPI_Comm c, int rank, int rounds) {
    int reused = 0;
    for (int k = 0; k < rounds; k++) {
        MPI_Request s = MPI_REQUEST_NULL, r;
        MPI_Status st;
        int flag = 0, x = k;
        if (rank == 0) {
            OK(MPI_Issend(&x, 1, MPI_INT, 1, 500 + k, c, &s));
            MPI_Request sent = s;
            OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
            OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 777, c, &r));
            reused += r == sent;
        } else {
            if (rank == 1) OK(MPI_Recv(&x, 1, MPI_INT, 0, 500 + k, c, MPI_STATUS_IGNORE));
            OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 777, c, &r));
        }
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "round %d: a receive nothing matches was not cancelled", k);
    }
    if (rank == 0) {
        printf("receives cancelled after a send: %d of %d had the send's handle\n", reused, rounds);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* mpi4py's testProbeCancel: an MPI_Issend to self (of `n` ints; 0: of no data, as mpi4py's), seen by
 * MPI_Probe, cancelled; received when the cancel failed. MPICH 5.0.2 crashed there on a policy
 * communicator. */
static void cancel_to_self(MPI_Comm c, int rank, int n) {
    MPI_Request r;
    MPI_Status st;
    int flag = 0, cancelled = 0, x = 42 + rank, y = -1;
    OK(MPI_Issend(n ? &x : NULL, n, MPI_INT, rank, 123, c, &r));
    OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st));
    CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == 123, "probe: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
    OK(MPI_Cancel(&r));
    /* Not complete: get_status leaves the status alone, and an incomplete send is not cancelled (yet). */
    memset(&st, 0, sizeof st);
    OK(MPI_Request_get_status(r, &flag, &st));
    if (flag) OK(MPI_Test_cancelled(&st, &cancelled));
    if (!cancelled) {
        OK(MPI_Recv(n ? &y : NULL, n, MPI_INT, rank, 123, c, MPI_STATUS_IGNORE));
        if (n) CHECK(y == x, "to self: received %d, sent %d", y, x);
    }
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = malloc((size_t)LARGE * sizeof(int));
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (policy_gives_streams() && provided == MPI_THREAD_MULTIPLE)
        CHECK(s != MPIX_STREAM_NULL, "the policy communicator carries no stream");
    /* This program names MPI_Cancel: on a policy stream of the native backend its requests are noted
     * (tests/c/policy_no_cancel.c: a program that names none has nothing noted). */
    if (policy_gives_streams() && native_backend() && provided == MPI_THREAD_MULTIPLE)
        CHECK(mpixstream_comm_notes_sends(c) == 1, "the policy communicator's sends are not noted (%d)",
              mpixstream_comm_notes_sends(c));
    const char *sends[] = {"Isend", "Issend", "Send_init"};
    int tag = 1;
    for (int k = 0; k < 3; k++) {
        cancel_a_send(c, rank, sends[k], SMALL, tag++);
        cancel_a_send(c, rank, sends[k], LARGE, tag++);
    }
    cancel_receives(c, rank, 16);
    cancel_to_self(c, rank, 0);
    cancel_to_self(c, rank, 1);
    OK(MPI_Comm_free(&c));
    free(buf);
    return mpixtest_finish();
}

/* Reproducer attempt, WITHOUT mpixstream, of tests/c/stream_requests.c's abort on PyPI MPICH 4.1.3 over
 * ch4:ofi between hosts (2 simulated hosts x 2 ranks): "Assertion failed in ofi_events.h: vni_local ==
 * vni" in PMPI_Wait. The same pattern with MPICH's own MPIX stream API: two native streams
 * (MPIX_Stream_create) and their stream communicators of MPI_COMM_WORLD (MPIX_Stream_comm_create), a
 * ring (send to rank+1, receive from rank-1); on MPI_COMM_WORLD, each stream communicator and a plain
 * MPI_Comm_dup: MPI_Irecv, MPI_Isend, MPI_Issend, MPI_Waitall of the first two, MPI_Improbe of the
 * synchronous send, MPI_Imrecv and MPI_Wait of it and of the Issend, then 3 rounds of a persistent
 * send/receive pair. ROUNDS (argv[1], default 1) repeats the whole sequence.
 * Prints " No Errors" from rank 0 when every rank's checks passed.
 * Needs MPIR_CVAR_CH4_RESERVE_VCIS >= 2. Run: tests/mpich_builds/stream_requests_hosts.sh
 * Shows (2026-12-05, RESERVE_VCIS=8): 2 hosts x 2 ranks, 5 of 5 jobs abort with that assertion (ranks 0
 * and 2, whose ring neighbour is on the other host), in the MPI_Wait of the MPI_Imrecv on the first
 * stream communicator (TRACE=1; its named MPI_Irecv and MPI_Waitall complete); 1 + 1 ranks: 3 of 3
 * abort; the 4 ranks on one host (shared memory): 3 of 3 complete. docs/native-defects.md, "A matched
 * receive on a stream communicator over ch4:ofi between hosts". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, peer, from, errs, trace;

/* TRACE=1: each rank names on stderr the step it enters (where an abort happened). */
#define STEP(what, step) \
    do { if (trace) fprintf(stderr, "[rank %d] %s: %s\n", rank, what, step); } while (0)

#define OK(call)                                                                   \
    do {                                                                           \
        int rc_ = (call);                                                          \
        if (rc_ != MPI_SUCCESS) {                                                  \
            fprintf(stderr, "[rank %d] %s returned %d\n", rank, #call, rc_);       \
            errs++;                                                                \
        }                                                                          \
    } while (0)
#define CHECK(cond, what)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "[rank %d] check failed: %s (%s)\n", rank, #cond, what); \
            errs++;                                                                \
        }                                                                          \
    } while (0)

static void exchange(MPI_Comm c, const char *what) {
    int out = rank, in = -1, in2 = -1;
    MPI_Request r[3];
    OK(MPI_Irecv(&in, 1, MPI_INT, from, 1, c, &r[0]));
    OK(MPI_Isend(&out, 1, MPI_INT, peer, 1, c, &r[1]));
    OK(MPI_Issend(&out, 1, MPI_INT, peer, 2, c, &r[2]));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(in == from, what);
    MPI_Message m;
    MPI_Status st;
    int flag = 0;
    while (!flag) OK(MPI_Improbe(from, 2, c, &flag, &m, &st));
    MPI_Request mr;
    OK(MPI_Imrecv(&in2, 1, MPI_INT, &m, &mr));
    STEP(what, "MPI_Wait of the MPI_Imrecv");
    OK(MPI_Wait(&mr, MPI_STATUS_IGNORE));
    STEP(what, "MPI_Wait of the MPI_Issend");
    OK(MPI_Wait(&r[2], MPI_STATUS_IGNORE));
    CHECK(in2 == from, what);
    STEP(what, "persistent rounds");
    MPI_Request ps, pr;
    OK(MPI_Send_init(&out, 1, MPI_INT, peer, 3, c, &ps));
    OK(MPI_Recv_init(&in, 1, MPI_INT, from, 3, c, &pr));
    for (int round = 0; round < 3; round++) {
        in = -1;
        OK(MPI_Start(&pr));
        OK(MPI_Start(&ps));
        MPI_Request both[2] = {pr, ps};
        OK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
        CHECK(in == from, what);
    }
    OK(MPI_Request_free(&ps));
    OK(MPI_Request_free(&pr));
}

int main(int argc, char **argv) {
    int provided, rounds = argc > 1 ? atoi(argv[1]) : 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    trace = getenv("TRACE") != NULL;
    peer = (rank + 1) % size;
    from = (rank + size - 1) % size;
    for (int k = 0; k < rounds; k++) {
        MPIX_Stream s[2];
        MPI_Comm sc[2], d;
        for (int i = 0; i < 2; i++) {
            OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
            OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[i], &sc[i]));
        }
        exchange(MPI_COMM_WORLD, "MPI_COMM_WORLD");
        exchange(sc[0], "stream communicator 0");
        exchange(sc[1], "stream communicator 1");
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        exchange(d, "dup");
        OK(MPI_Comm_free(&d));
        for (int i = 0; i < 2; i++) {
            OK(MPI_Comm_free(&sc[i]));
            OK(MPIX_Stream_free(&s[i]));
        }
    }
    int total = 0;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return 0;
}

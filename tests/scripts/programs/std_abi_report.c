/* The report and the explicit policy on the MPI standard ABI (tests/scripts/abi_standard_report.sh),
 * built with `mpicc -mpi-abi -Iinclude`. Every rank pairs with rank ^ 1 (an even number of ranks):
 *   - two dups of MPI_COMM_WORLD, named "dup_a" and "dup_b": N ping-pongs of B bytes on each (dup_a
 *     with MPI_Send/MPI_Recv, dup_b with MPI_Isend/MPI_Irecv/MPI_Waitall), and one MPI_Barrier each;
 *   - a stream communicator "stream_comm" (MPIX_Stream_comm_create): N ping-pongs of B bytes;
 *   - a multiplex communicator "mx" of 2 streams per rank: N messages of B bytes from index 0 to the
 *     partner's index 1 (MPIX_Stream_send / MPIX_Stream_recv with the source index named) and N from
 *     index 1 to the partner's index 0 with MPIX_ANY_INDEX.
 * Prints, on rank 0, "stream dup_a: none|set", the same for dup_b, whether the two are distinct
 * ("dups distinct: yes|no"), "stream stream_comm: set", and "N=.. B=..". Expected traffic per rank:
 * dup_a and dup_b and stream_comm: N sent and N received, N*B bytes each way; mx: index 0 sends N and
 * receives N, index 1 the same. */
#include <mpi.h>
#include <mpix_stream_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Weak: the program runs with libmpixstream.so preloaded (no ABI library defines the MPIX functions). */
#pragma weak MPIX_Stream_create
#pragma weak MPIX_Stream_free
#pragma weak MPIX_Stream_comm_create
#pragma weak MPIX_Comm_get_stream
#pragma weak MPIX_Stream_comm_create_multiplex
#pragma weak MPIX_Stream_send
#pragma weak MPIX_Stream_recv

#define CHECK(call)                                                                              \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        if (rc_ != MPI_SUCCESS) {                                                                \
            fprintf(stderr, "FAILED: %s at line %d: %d\n", #call, __LINE__, rc_);                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
        }                                                                                        \
    } while (0)

static void pingpong(MPI_Comm comm, int rank, int n, int b, char *buf, int nonblocking) {
    int peer = rank ^ 1;
    for (int i = 0; i < n; i++) {
        if (nonblocking) {
            MPI_Request r[2];
            if (rank % 2 == 0) {
                CHECK(MPI_Isend(buf, b, MPI_BYTE, peer, i, comm, &r[0]));
                CHECK(MPI_Irecv(buf, b, MPI_BYTE, peer, i, comm, &r[1]));
            } else {
                CHECK(MPI_Irecv(buf, b, MPI_BYTE, peer, i, comm, &r[0]));
                CHECK(MPI_Isend(buf, b, MPI_BYTE, peer, i, comm, &r[1]));
            }
            CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        } else if (rank % 2 == 0) {
            CHECK(MPI_Send(buf, b, MPI_BYTE, peer, i, comm));
            CHECK(MPI_Recv(buf, b, MPI_BYTE, peer, i, comm, MPI_STATUS_IGNORE));
        } else {
            CHECK(MPI_Recv(buf, b, MPI_BYTE, peer, i, comm, MPI_STATUS_IGNORE));
            CHECK(MPI_Send(buf, b, MPI_BYTE, peer, i, comm));
        }
    }
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2) {
        if (rank == 0) fprintf(stderr, "FAILED: needs an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!MPIX_Stream_create) {
        if (rank == 0) fprintf(stderr, "FAILED: the MPIX stream API is not defined (libmpixstream.so not preloaded)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int n = getenv("STD_REPORT_N") ? atoi(getenv("STD_REPORT_N")) : 10;
    int b = getenv("STD_REPORT_B") ? atoi(getenv("STD_REPORT_B")) : 1000;
    char *buf = calloc(b > 0 ? b : 1, 1);
    int peer = rank ^ 1;

    MPI_Comm a, d;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_Comm_set_name(a, "dup_a");
    MPI_Comm_set_name(d, "dup_b");
    MPIX_Stream sa, sb;
    CHECK(MPIX_Comm_get_stream(a, 0, &sa));
    CHECK(MPIX_Comm_get_stream(d, 0, &sb));
    if (rank == 0) {
        printf("stream dup_a: %s\n", sa == MPIX_STREAM_NULL ? "none" : "set");
        printf("stream dup_b: %s\n", sb == MPIX_STREAM_NULL ? "none" : "set");
        printf("dups distinct: %s\n", sa != sb ? "yes" : "no");
    }
    pingpong(a, rank, n, b, buf, 0);
    pingpong(d, rank, n, b, buf, 1);
    CHECK(MPI_Barrier(a));
    CHECK(MPI_Barrier(d));

    MPIX_Stream s;
    MPI_Comm sc;
    CHECK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    CHECK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc));
    MPI_Comm_set_name(sc, "stream_comm");
    MPIX_Stream got;
    CHECK(MPIX_Comm_get_stream(sc, 0, &got));
    if (rank == 0) printf("stream stream_comm: %s\n", got == s ? "set" : "wrong");
    pingpong(sc, rank, n, b, buf, 0);

    MPIX_Stream ms[2];
    MPI_Comm mx;
    CHECK(MPIX_Stream_create(MPI_INFO_NULL, &ms[0]));
    CHECK(MPIX_Stream_create(MPI_INFO_NULL, &ms[1]));
    CHECK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, ms, &mx));
    MPI_Comm_set_name(mx, "mx");
    for (int i = 0; i < n; i++) {
        if (rank % 2 == 0) {
            CHECK(MPIX_Stream_send(buf, b, MPI_BYTE, peer, i, mx, 0, 1));
            CHECK(MPIX_Stream_recv(buf, b, MPI_BYTE, peer, i, mx, 1, 0, MPI_STATUS_IGNORE));
        } else {
            CHECK(MPIX_Stream_recv(buf, b, MPI_BYTE, peer, i, mx, 0, 1, MPI_STATUS_IGNORE));
            CHECK(MPIX_Stream_send(buf, b, MPI_BYTE, peer, i, mx, 1, 0));
        }
    }
    for (int i = 0; i < n; i++) {
        if (rank % 2 == 0) {
            CHECK(MPIX_Stream_send(buf, b, MPI_BYTE, peer, i, mx, 1, 0));
            CHECK(MPIX_Stream_recv(buf, b, MPI_BYTE, peer, i, mx, MPIX_ANY_INDEX, 1, MPI_STATUS_IGNORE));
        } else {
            CHECK(MPIX_Stream_recv(buf, b, MPI_BYTE, peer, i, mx, MPIX_ANY_INDEX, 0, MPI_STATUS_IGNORE));
            CHECK(MPIX_Stream_send(buf, b, MPI_BYTE, peer, i, mx, 0, 1));
        }
    }
    CHECK(MPI_Comm_free(&mx));
    CHECK(MPIX_Stream_free(&ms[0]));
    CHECK(MPIX_Stream_free(&ms[1]));
    CHECK(MPI_Comm_free(&sc));
    CHECK(MPIX_Stream_free(&s));
    CHECK(MPI_Comm_free(&a));
    CHECK(MPI_Comm_free(&d));
    if (rank == 0) printf("N=%d B=%d\nNo Errors\n", n, b);
    free(buf);
    MPI_Finalize();
    return 0;
}

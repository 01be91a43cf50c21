/* What the report must show of multiplex traffic and of persistent requests (tests/scripts/report_multiplex.sh).
 * 2 ranks, one thread each (MPI_THREAD_MULTIPLE: the multiplex idup and progress rules), a multiplex
 * communicator of 2 streams per rank:
 *   rank 0 sends A = 30 messages of 8 bytes from its index 0 to rank 1's index 1, and B = 50 of 16
 *   bytes from its index 1 to rank 1's index 0. Rank 1 takes index 1's with named blocking receives,
 *   named nonblocking ones and wildcard blocking ones (the direct path and the matching engine), and
 *   index 0's with 25 wildcard nonblocking receives posted before the messages exist (generalized
 *   requests, completed in MPI_Waitall) and 25 named blocking ones.
 * Then persistent requests on MPI_COMM_WORLD: rank 0 starts an MPI_Send_init request P = 12 times (6 with
 * MPI_Start, 6 with MPI_Startall), rank 1 an MPI_Recv_init request as often; both start an
 * MPI_Barrier_init request C = 5 times. Those P messages are MPI_COMM_WORLD's only point-to-point traffic.
 * Rank 0 prints "EXPECT ..." lines for the script and " No Errors" when every payload was right.
 * MPIXTEST_BAD=1 instead breaks the one-thread rule of an index on purpose (the check must catch it):
 * on rank 0 one thread blocks in a named receive on index 0 while another sends from index 0. */
#include <mpi.h>
#include "mpix_stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define A 30
#define B 50
#define P 12
#define C 5

static MPI_Comm mx;
static int errors;

static void check(int ok, const char *what, int k) {
    if (!ok) {
        errors++;
        fprintf(stderr, "report_multiplex: wrong %s at %d\n", what, k);
    }
}

static void *bad_sender(void *arg) {
    (void)arg;
    usleep(200000); /* the other thread is inside its receive by then */
    long v = 1;
    MPIX_Stream_send(&v, 1, MPI_LONG, 1, 0, mx, 0, 0);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_Stream s[2];
    for (int i = 0; i < 2; i++) MPIX_Stream_create(MPI_INFO_NULL, &s[i]);
    MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, s, &mx);
    MPI_Comm_set_errhandler(mx, MPI_ERRORS_RETURN);

    if (getenv("MPIXTEST_BAD") && atoi(getenv("MPIXTEST_BAD"))) {
        if (rank == 0) {
            pthread_t t;
            pthread_create(&t, NULL, bad_sender, NULL);
            long v;
            MPIX_Stream_recv(&v, 1, MPI_LONG, 1, 0, mx, 0, 0, MPI_STATUS_IGNORE);
            pthread_join(t, NULL);
        } else {
            long v;
            MPIX_Stream_recv(&v, 1, MPI_LONG, 0, 0, mx, 0, 0, MPI_STATUS_IGNORE);
            MPIX_Stream_send(&v, 1, MPI_LONG, 0, 0, mx, 0, 0);
        }
        MPI_Finalize();
        return 0;
    }

    long one[A], two[B][2];
    MPI_Status st;
    if (rank == 1) {
        /* index 0: wildcard receives posted before any message exists */
        MPI_Request rq[B / 2];
        for (int k = 0; k < B / 2; k++)
            MPIX_Stream_irecv(two[k], 2, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &rq[k]);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Waitall(B / 2, rq, MPI_STATUSES_IGNORE);
        for (int k = B / 2; k < B; k++) MPIX_Stream_recv(two[k], 2, MPI_LONG, 0, k, mx, 1, 0, &st);
        for (int k = 0; k < B; k++) check(two[k][0] == 1000 + k && two[k][1] == -k, "index 1 -> 0 payload", k);
        /* index 1: named blocking, named nonblocking, wildcard blocking */
        for (int k = 0; k < A; k++) {
            if (k < A / 3) {
                MPIX_Stream_recv(&one[k], 1, MPI_LONG, 0, k, mx, 0, 1, &st);
            } else if (k < 2 * A / 3) {
                MPI_Request r;
                MPIX_Stream_irecv(&one[k], 1, MPI_LONG, 0, k, mx, 0, 1, &r);
                MPI_Wait(&r, &st);
            } else {
                MPIX_Stream_recv(&one[k], 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 1, &st);
            }
            check(one[k] == k && st.MPI_TAG == k, "index 0 -> 1 message", k);
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int k = 0; k < B; k++) {
            two[k][0] = 1000 + k;
            two[k][1] = -k;
            MPIX_Stream_send(two[k], 2, MPI_LONG, 1, k, mx, 1, 0);
        }
        MPI_Request rq[A];
        for (int k = 0; k < A; k++) {
            one[k] = k;
            MPIX_Stream_isend(&one[k], 1, MPI_LONG, 1, k, mx, 0, 1, &rq[k]);
        }
        MPI_Waitall(A, rq, MPI_STATUSES_IGNORE);
    }

    /* persistent point-to-point and a persistent collective */
    long v = -1;
    MPI_Request pr, cr;
    if (rank == 0) MPI_Send_init(&v, 1, MPI_LONG, 1, 7, MPI_COMM_WORLD, &pr);
    else MPI_Recv_init(&v, 1, MPI_LONG, 0, 7, MPI_COMM_WORLD, &pr);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &cr);
    for (int k = 0; k < P; k++) {
        if (rank == 0) v = 500 + k;
        if (k % 2) MPI_Startall(1, &pr);
        else MPI_Start(&pr);
        MPI_Wait(&pr, &st);
        if (rank == 1) check(v == 500 + k, "persistent message", k);
    }
    for (int k = 0; k < C; k++) {
        MPI_Start(&cr);
        MPI_Wait(&cr, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&pr);
    MPI_Request_free(&cr);

    MPI_Comm_free(&mx);
    for (int i = 0; i < 2; i++) MPIX_Stream_free(&s[i]);
    int all;
    MPI_Reduce(&errors, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("EXPECT multiplex rank 0 index 0 sent %d %d\n", A, A * 8);
        printf("EXPECT multiplex rank 0 index 1 sent %d %d\n", B, B * 16);
        printf("EXPECT multiplex rank 1 index 1 received %d %d\n", A, A * 8);
        printf("EXPECT multiplex rank 1 index 0 received %d %d\n", B, B * 16);
        printf("EXPECT starts rank 0 send %d recv 0 collective %d\n", P, C);
        printf("EXPECT starts rank 1 send 0 recv %d collective %d\n", P, C);
        printf("EXPECT world rank 0 sent %d %d\n", P, P * 8);
        printf("EXPECT world rank 1 received %d %d\n", P, P * 8);
        if (all == 0) printf(" No Errors\n");
    }
    MPI_Finalize();
    return 0;
}

/* The process-wide bound on hidden communicators of multiplex communicators (docs/multiplex.md,
 * "Cost"). With 2 processes and S = 4 streams, a multiplex communicator on the streams' endpoints
 * needs 2S + S(S-1) = 20 hidden communicators: 51 fit within the bound of 1024, so of 56 made at once
 * the last 5 run on MPICH's implicit pool. Freeing 10 gives room back: one more is on the streams
 * again. Every communicator carries a message from index 0 to the peer's index 3 and back from 3 to 0,
 * data checked. Prints "EXPECT on_streams 52 pooled 5" (the report's multiplex counters per rank on
 * the native backend), then " No Errors". */
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <stdlib.h>

#define S 4
#define K 56

static int errors;

static void exchange(MPI_Comm mx, int rank, int round) {
    int peer = rank ^ 1, out = 1000 * round + rank, in = -1;
    if (rank == 0) {
        MPIX_Stream_send(&out, 1, MPI_INT, peer, round, mx, 0, 3);
        MPIX_Stream_recv(&in, 1, MPI_INT, peer, round, mx, 3, 0, MPI_STATUS_IGNORE);
    } else {
        MPIX_Stream_recv(&in, 1, MPI_INT, peer, round, mx, 0, 3, MPI_STATUS_IGNORE);
        MPIX_Stream_send(&out, 1, MPI_INT, peer, round, mx, 3, 0);
    }
    if (in != 1000 * round + peer) {
        printf("rank %d: communicator %d carried %d, expected %d\n", rank, round, in, 1000 * round + peer);
        errors++;
    }
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    MPIX_Stream s[S];
    for (int i = 0; i < S; i++) MPIX_Stream_create(MPI_INFO_NULL, &s[i]);
    MPI_Comm mx[K + 1];
    for (int k = 0; k < K; k++) {
        if (MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, S, s, &mx[k]) != MPI_SUCCESS) {
            printf("rank %d: creation %d failed\n", rank, k);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int k = 0; k < K; k++) exchange(mx[k], rank, k);
    for (int k = 0; k < 10; k++) MPI_Comm_free(&mx[k]);
    MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, S, s, &mx[K]);
    exchange(mx[K], rank, K);
    for (int k = 10; k <= K; k++) MPI_Comm_free(&mx[k]);
    for (int i = 0; i < S; i++) MPIX_Stream_free(&s[i]);
    if (rank == 0) printf("EXPECT on_streams 52 pooled 5\n");
    if (errors == 0 && rank == 0) printf(" No Errors\n");
    MPI_Finalize();
    return errors != 0;
}

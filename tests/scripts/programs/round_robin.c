/* MPICH's round robin over its implicit VCIs, every kind of communicator it counts
 * (tests/scripts/profile_round_robin.sh): with MPIR_CVAR_CH4_NUM_VCIS=N, communicator k below gets
 * MPICH's seq in brackets (its rank 0's count of communicators made from MPI_COMM_WORLD, internal ones
 * included) and runs on VCI seq % N:
 *   c0 MPI_Comm_dup [1]; a window on MPI_COMM_WORLD [2, its internal dup]; c1 MPI_Comm_dup [3];
 *   MPI_Comm_split_type SHARED [4, 5: a temporary split, then the node split; not used for traffic];
 *   c2 MPI_Comm_split [6]; c3 MPI_Comm_idup [7]; c4 MPI_Cart_create [8]; a dup of MPI_COMM_SELF [not
 *   counted]; c5 MPI_Comm_create [9]; c6 MPI_Comm_create_group [10]; c7 MPI_Comm_dup_with_info [11];
 *   MPI_Win_allocate [12]; c8 MPI_Comm_dup of c0 [13].
 * Then rank 0 sends 100 * (k + 1) messages on ck with MPI_Send (the round robin alone says where they go)
 * and rank 1 receives them with MPI_Irecv + MPI_Wait (the requests name their VCI too).
 * Prints "MESSAGES c0 100 c1 200 ..." and " No Errors" on rank 0. 2 ranks. */
#include <mpi.h>
#include <stdio.h>

#define NC 9

int main(int argc, char **argv) {
    int rank, size, provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "round_robin: 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm c[NC], node, self;
    MPI_Win win1, win2;
    MPI_Request req;
    MPI_Group group;
    int cell = 0, *base, dims[1] = {2}, periods[1] = {1};
    MPI_Comm_dup(MPI_COMM_WORLD, &c[0]);
    MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win1);
    MPI_Comm_dup(MPI_COMM_WORLD, &c[1]);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c[2]);
    MPI_Comm_idup(MPI_COMM_WORLD, &c[3], &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c[4]);
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    MPI_Comm_group(MPI_COMM_WORLD, &group);
    MPI_Comm_create(MPI_COMM_WORLD, group, &c[5]);
    MPI_Comm_create_group(MPI_COMM_WORLD, group, 7, &c[6]);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &c[7]);
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win2);
    MPI_Comm_dup(c[0], &c[8]);
    for (int k = 0; k < NC; k++) {
        for (int i = 0; i < 100 * (k + 1); i++) {
            long v = k * 1000 + i, got = -1;
            if (rank == 0) {
                MPI_Send(&v, 1, MPI_LONG, 1, i, c[k]);
            } else {
                MPI_Irecv(&got, 1, MPI_LONG, 0, i, c[k], &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                if (got != v) {
                    fprintf(stderr, "comm %d message %d: got %ld\n", k, i, got);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
            }
        }
    }
    MPI_Win_free(&win1);
    MPI_Win_free(&win2);
    MPI_Group_free(&group);
    MPI_Comm_free(&self);
    MPI_Comm_free(&node);
    for (int k = 0; k < NC; k++) MPI_Comm_free(&c[k]);
    if (rank == 0) {
        printf("MESSAGES");
        for (int k = 0; k < NC; k++) printf(" c%d %d", k, 100 * (k + 1));
        printf("\n");
    }
    MPI_Finalize();
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

/* MPI's progress rule on a native stream communicator, without mpixstream: rank 1 does passive-target
 * RMA (MPI_Win_lock, MPI_Fetch_and_op, MPI_Win_unlock) on a window of MPI_COMM_WORLD while rank 0 waits
 * in an MPI_Allreduce on a native stream communicator. MPICH (4.1 to 5.0.2) progresses only the stream's
 * reserved VCI in that wait, so rank 0 never serves the RMA and both wait for ever. Prints "completed"
 * when it gets through. mpixstream serves it where MPICH has MPIX_Async_start (>= 4.3), not on 4.1/4.2. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long base = 0, one = 1, old = -1;
    MPI_Win win;
    MPI_Win_create(&base, sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPIX_Stream s;
    MPI_Comm c;
    MPIX_Stream_create(MPI_INFO_NULL, &s);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c);
    if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c);
    printf("completed\n");
    fflush(stdout);
    MPI_Comm_free(&c);
    MPIX_Stream_free(&s);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}

/* MPI_Finalize over UCX's tcp between hosts (docs/native-defects.md): the C table's closing shape without
 * mpixstream. Every rank runs MPI_Init, an MPI_Alltoall and the table's verdict (an MPI_Allreduce, then
 * " No Errors" on rank 0), then MPI_Finalize, and prints "finalized RANK" after it. A job that printed
 * " No Errors" and not every "finalized" line hung in MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, errs = 0, total = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *out = malloc(sizeof(int) * size), *in = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++) out[i] = rank * 1000 + i;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) errs += in[i] != i * 1000 + rank;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf(" No Errors\n");
    fflush(stdout);
    free(out); free(in);
    MPI_Finalize();
    printf("finalized %d\n", rank);
    return total != 0;
}

/* MPI_Cancel of a synchronous send to self, after MPI_Probe has seen it, on a duplicate of
 * MPI_COMM_WORLD with 2 ranks: MPICH 5.0.2 (and Debian's 4.0.2) crash or hang in MPI_Cancel/MPI_Wait,
 * without mpixstream; on a duplicate of MPI_COMM_SELF, or with 1 rank, it completes. (mpi4py's
 * testProbeCancel runs this pattern.) Prints "ok" when it completes. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int rank; MPI_Comm_rank(c, &rank);
    int buf = 42, in = 0, flag = 0; MPI_Request r; MPI_Status st;
    MPI_Issend(&buf, 1, MPI_INT, rank, 3, c, &r);
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st);
    printf("probed src %d tag %d\n", st.MPI_SOURCE, st.MPI_TAG); fflush(stdout);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    printf("cancelled %d\n", flag); fflush(stdout);
    if (!flag) MPI_Recv(&in, 1, MPI_INT, rank, 3, c, MPI_STATUS_IGNORE);
    MPI_Comm_free(&c);
    MPI_Finalize();
    printf("ok\n");
    return 0;
}

/* Reproducer, WITHOUT mpixstream, of a defect of MPICH 5.0.2 over ch4:ofi (libfabric tcp): MPI_Comm_idup
 * of a native stream communicator never completes (MPI_Wait hangs on every rank); over ch4:ucx it
 * completes. Rank parity chooses who attaches a stream (all ranks by default; "half": even ranks
 * only, as tests/c/stream_basic.c does). Prints "completed" per rank. Run: tests/mpich_builds/run.sh */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int half = argc > 1 && strcmp(argv[1], "half") == 0;
    MPIX_Stream s = MPIX_STREAM_NULL;
    MPI_Comm sc, d;
    MPI_Request r;
    if (!half || rank % 2 == 0) MPIX_Stream_create(MPI_INFO_NULL, &s);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc);
    MPI_Comm_idup(sc, &d, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    printf("rank %d completed\n", rank);
    MPI_Comm_free(&d);
    MPI_Comm_free(&sc);
    if (s != MPIX_STREAM_NULL) MPIX_Stream_free(&s);
    MPI_Finalize();
    return 0;
}

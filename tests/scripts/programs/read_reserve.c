/* Prints, on rank 0, "reserve N": MPICH's reserved VCI pool (MPIR_CVAR_CH4_RESERVE_VCIS) as MPI_T reads
 * it after MPI_Init. A plain MPI program; built with -DUSES_STREAMS it also names MPIX_Stream_create
 * (never calls it), as a program that can create streams does. */
#include <mpi.h>
#include <stdio.h>

#ifdef USES_STREAMS
int (*volatile create_stream)(MPI_Info, MPIX_Stream *) = MPIX_Stream_create;
#endif

int main(int argc, char **argv) {
    int rank, provided, index, count, value = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("MPIR_CVAR_CH4_RESERVE_VCIS", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count);
        MPI_T_cvar_read(h, &value);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("reserve %d\n", value);
    MPI_Finalize();
    return 0;
}

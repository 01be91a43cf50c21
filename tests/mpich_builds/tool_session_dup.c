/* MPICH 4.0.3 (PyPI): after MPI_Init, a tool-interface session opened and closed (MPI_T_init_thread,
 * optionally one control variable read, MPI_T_finalize) makes the next MPI_Comm_dup segfault (strcmp on
 * a NULL name inside MPICH); Debian's 4.0.2 and 5.0.2 print "completed". Without mpixstream.
 *   tool_session_dup [read] */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int provided, index, count, value = -1;
    MPI_Comm dup;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (argc > 1 && MPI_T_cvar_get_index("MPIR_CVAR_CH4_NUM_VCIS", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count);
        MPI_T_cvar_read(h, &value);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    printf("completed\n");
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}

/* Without mpixstream: both ranks call the fatal handler (MPI_ERRORS_ARE_FATAL) of MPI_COMM_WORLD with an
 * error code of their own, at once (what tests/c/stream_fatal.c does through the library). mpiexec must
 * exit non-zero; MPICH 4.1.3's Hydra exits 0 in some runs (3 and 4 of 25 in two series), Debian 4.0.2's and 5.0.2's in
 * none of 25. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int level;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    int cls, code;
    MPI_Add_error_class(&cls);
    MPI_Add_error_code(cls, &code);
    MPI_Add_error_string(code, "MPIX_Stream_progress: 0x00001234 is not a valid stream handle");
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
    printf("still running after a fatal error\n");
    MPI_Finalize();
    return 0;
}

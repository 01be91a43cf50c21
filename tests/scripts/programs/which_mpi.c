/* Which MPI a job ran on: rank 0 prints the MPI library's version line and the launcher's proxy that
 * started it (the parent process: hydra_pmi_proxy of one MPICH's Hydra or another's), then whether a
 * stream communicator worked (MPIX_Stream_create .. MPIX_Stream_free, an allreduce on it), " No Errors"
 * or "errors". Built with MPICH 5's mpicc (its mpi.h declares the MPIX functions), or with any mpicc and
 * -DNO_MPIX. Used by tests/scripts/mpixrun_mpich_library.sh and mpixrun_options.sh. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, errs = 0, total = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifndef NO_MPIX
    MPIX_Stream s;
    MPI_Comm sc;
    int sum = 0;
    if (MPIX_Stream_create(MPI_INFO_NULL, &s) != MPI_SUCCESS) errs++;
    if (MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc) != MPI_SUCCESS) errs++;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sc);
    if (sum != size * (size - 1) / 2) errs++;
    MPI_Comm_free(&sc);
    if (MPIX_Stream_free(&s) != MPI_SUCCESS) errs++;
#endif
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING], link[64], proxy[4096] = "unknown";
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        snprintf(link, sizeof link, "/proc/%d/exe", (int)getppid());
        ssize_t n = readlink(link, proxy, sizeof proxy - 1);
        if (n > 0) proxy[n] = 0;
        printf("library: %s\nlauncher: %s\n", lib, proxy);
        for (int i = 1; i < argc; i++) printf("argument: %s\n", argv[i]);
        printf("%s\n", total ? "errors" : " No Errors");
    }
    MPI_Finalize();
    return total != 0;
}

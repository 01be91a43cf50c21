/* For tests/scripts/mpich_build_named.sh: rank 0 prints the MPICH version it was compiled against
 * (mpi.h's MPICH_VERSION; Intel MPI's I_MPI_VERSION) and the file of the MPI library loaded in the process (/proc/self/maps,
 * symbolic links resolved): what the banner and the report must name. */
#include <mpi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
#ifdef I_MPI_VERSION
        printf("compiled: Intel MPI %s\n", I_MPI_VERSION); /* its MPICH_VERSION is MPICH's it forked */
#else
        printf("compiled: MPICH %s\n", MPICH_VERSION);
#endif
        FILE *maps = fopen("/proc/self/maps", "r");
        char line[4096], real[PATH_MAX];
        while (maps && fgets(line, sizeof line, maps)) {
            char *path = strchr(line, '/');
            if (!path) continue;
            path[strcspn(path, "\n")] = 0;
            const char *base = strrchr(path, '/') + 1;
            if (strncmp(base, "libmpi.so", 9) == 0 || strncmp(base, "libmpich.so", 11) == 0) {
                printf("loaded: %s\n", realpath(path, real) ? real : path);
                break;
            }
        }
        if (maps) fclose(maps);
    }
    MPI_Finalize();
    return 0;
}

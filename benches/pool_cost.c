/* What MPICH's reserved VCIs cost a process (benches/pool_cost.sh): after MPI_Init and a barrier, rank 0
 * prints "shm BYTES rss KIB": the bytes of /dev/shm files it maps (MPICH's shared-memory segments, each
 * file's extent mapped) and its resident memory (VmRSS). Plain MPI: run it without the library, with
 * MPIR_CVAR_CH4_RESERVE_VCIS set. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char line[512], paths[64][256];
        unsigned long long extent[64];
        int n = 0;
        long long shm = 0, rss = -1;
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && fgets(line, sizeof line, f)) {
            /* Per /dev/shm file (some builds unlink theirs once mapped: "(deleted)"), the furthest byte
             * any of its mappings reaches: its size, as far as this process uses it. */
            unsigned long long lo, hi, off;
            char *path = strstr(line, "/dev/shm/");
            if (!path || sscanf(line, "%llx-%llx %*s %llx", &lo, &hi, &off) != 3) continue;
            path[strcspn(path, "\n")] = 0;
            int i = 0;
            while (i < n && strcmp(paths[i], path) != 0) i++;
            if (i == n) {
                if (n == 64) continue;
                snprintf(paths[n], sizeof paths[0], "%s", path);
                extent[n++] = 0;
            }
            if (off + (hi - lo) > extent[i]) extent[i] = off + (hi - lo);
        }
        if (f) fclose(f);
        for (int i = 0; i < n; i++) shm += extent[i];
        f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "VmRSS:", 6) == 0) sscanf(line + 6, "%lld", &rss);
        if (f) fclose(f);
        printf("shm %lld rss %lld\n", shm, rss);
    }
    MPI_Finalize();
    return 0;
}

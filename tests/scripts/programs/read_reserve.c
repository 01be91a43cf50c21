/* Prints, on rank 0, "reserve N": MPICH's reserved VCI pool (MPIR_CVAR_CH4_RESERVE_VCIS) as MPI_T reads
 * it after MPI_Init, then "provided L": the thread level MPI_Query_thread gives, and "threads T": the
 * threads of the process (/proc/self/status), which count the library's helper thread if it started.
 * A plain MPI program calling MPI_Init; built with -DLEVEL=MPI_THREAD_x it calls MPI_Init_thread with
 * that level instead; with -DUSES_STREAMS it also names MPIX_Stream_create, with -DUSES_DUP
 * MPI_Comm_dup (never calling either), as a program that can create streams or communicators does. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#ifdef USES_STREAMS
#include "mpix_stream.h"
int (*volatile create_stream)(MPI_Info, MPIX_Stream *) = MPIX_Stream_create;
#endif
#ifdef USES_DUP
int (*volatile dup_comm)(MPI_Comm, MPI_Comm *) = MPI_Comm_dup;
#endif

static int threads(void) {
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) sscanf(line + 8, "%d", &n);
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    int rank, provided, level = -1, index, count, value = -1;
#ifdef LEVEL
    MPI_Init_thread(&argc, &argv, LEVEL, &provided);
#else
    MPI_Init(&argc, &argv);
#endif
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Query_thread(&level);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("MPIR_CVAR_CH4_RESERVE_VCIS", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count);
        MPI_T_cvar_read(h, &value);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("reserve %d\nprovided %d\nthreads %d\n", value, level, threads());
    MPI_Finalize();
    return 0;
}

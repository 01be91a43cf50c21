/* A program that uses the MPIX Stream API, built against an installed mpixstream (pkg-config and CMake)
 * by tests/scripts/install_standalone.sh. Each rank makes a stream and a stream communicator over
 * MPI_COMM_WORLD, checks that the communicator carries that stream, and exchanges messages on it.
 * Prints the path of the libmpixstream.so it runs with (from /proc/self/maps), then " No Errors". */
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <string.h>

static void print_loaded_library(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "/libmpixstream.so")) {
            printf("loaded: %s", path);
            break;
        }
    }
    if (maps) fclose(maps);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, errors = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPIX_Stream stream = MPIX_STREAM_NULL, got = MPIX_STREAM_NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    if (MPIX_Stream_create(MPI_INFO_NULL, &stream) != MPI_SUCCESS || stream == MPIX_STREAM_NULL) {
        printf("rank %d: MPIX_Stream_create failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (MPIX_Stream_comm_create(MPI_COMM_WORLD, stream, &comm) != MPI_SUCCESS) {
        printf("rank %d: MPIX_Stream_comm_create failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (MPIX_Comm_get_stream(comm, 0, &got) != MPI_SUCCESS || got != stream) {
        printf("rank %d: MPIX_Comm_get_stream gave 0x%x, expected 0x%x\n", rank, (unsigned)got, (unsigned)stream);
        errors++;
    }
    /* A ring on the stream communicator. */
    for (int i = 0; i < 100; i++) {
        int out = rank * 1000 + i, in = -1, from = (rank + size - 1) % size;
        MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, i, &in, 1, MPI_INT, from, i, comm, MPI_STATUS_IGNORE);
        if (in != from * 1000 + i) errors++;
    }
    MPI_Comm_free(&comm);
    if (MPIX_Stream_free(&stream) != MPI_SUCCESS) errors++;
    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        print_loaded_library();
        printf(total ? "stream_user: %d errors\n" : " No Errors\n", total);
    }
    MPI_Finalize();
    return total != 0;
}

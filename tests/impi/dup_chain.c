/* A chain of MPI_Comm_dup in Intel MPI's thread-split mode, without the library
 * (tests/scripts/impi_dup_chain.sh): communicator l+1 is a dup of communicator l (l = 0 .. L-1, level 0
 * a dup of MPI_COMM_WORLD), each followed by an MPI_Allreduce on it. MODE=distinct: level l gets
 * thread_id l+1 (every communicator on an endpoint of its own, what the library's explicit policy
 * gives a dup of a policy communicator); MODE=inherit: level 0 gets thread_id 1 and every later level
 * keeps what MPI_Comm_dup copied from its parent (the same endpoint as its parent, what a dup of a stream
 * communicator is). Rank 0 prints "done" at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_thread_id(MPI_Comm c, int k) {
    MPI_Info info;
    char v[16];
    snprintf(v, sizeof v, "%d", k);
    MPI_Info_create(&info);
    MPI_Info_set(info, "thread_id", v);
    MPI_Comm_set_info(c, info);
    MPI_Info_free(&info);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, x = 1, y = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int levels = getenv("LEVELS") ? atoi(getenv("LEVELS")) : 3;
    int distinct = getenv("MODE") && strcmp(getenv("MODE"), "distinct") == 0;
    MPI_Comm c = MPI_COMM_WORLD, n;
    for (int l = 0; l < levels; l++) {
        MPI_Comm_dup(c, &n);
        if (l == 0 || distinct) set_thread_id(n, l + 1);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, n);
        c = n;
    }
    if (rank == 0) printf("done\n");
    MPI_Finalize();
    return 0;
}

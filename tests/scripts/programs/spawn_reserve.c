/* A parent and the child it spawns each read MPICH's reserved VCI pool (MPIR_CVAR_CH4_RESERVE_VCIS,
 * through MPI_T after MPI_Init); the parent (one rank) prints "parent reserve N" and, from the child over
 * the intercommunicator, "child reserve N". Both initialise at MPI_THREAD_MULTIPLE and name
 * MPI_Comm_dup, so the explicit policy would move their communicators. */
#include <mpi.h>
#include <stdio.h>

static int reserve(void) {
    int provided, index, count, value = -1;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("MPIR_CVAR_CH4_RESERVE_VCIS", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count);
        MPI_T_cvar_read(h, &value);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return value;
}

int main(int argc, char **argv) {
    int provided, mine, theirs = -1;
    MPI_Comm parent, child, dup;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    mine = reserve();
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, MPI_ERRCODES_IGNORE);
        MPI_Recv(&theirs, 1, MPI_INT, 0, 0, child, MPI_STATUS_IGNORE);
        printf("parent reserve %d\nchild reserve %d\n", mine, theirs);
        MPI_Comm_disconnect(&child);
    } else {
        MPI_Send(&mine, 1, MPI_INT, 0, 0, parent);
        MPI_Comm_disconnect(&parent);
    }
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}

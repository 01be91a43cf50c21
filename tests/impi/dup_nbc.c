/* What tests/c/enqueue_host.c's last part does on the split backend, without the library
 * (tests/scripts/impi_dup_chain.sh; docs/architecture.md section 8, "A dup that stays on its parent's
 * endpoint can hang"): in Intel MPI's thread-split mode, c is a dup of MPI_COMM_WORLD on endpoint 1
 * (thread_id=1), d an MPI_Comm_dup of c (Intel copies thread_id: endpoint 1, as a dup of a stream
 * communicator), thread_id=1 set on it again. ITERS rounds of MPI_Iallreduce on d, which the last rank
 * completes by polling MPI_Test with NAP_US-microsecond naps (as the library's host queue polls a late
 * operation) and the others with MPI_Wait, then MPI_Allreduce on c. TWIN=1 makes one more dup of
 * MPI_COMM_WORLD before c (context ids shift): the hang then goes away. Rank 0 prints "done".
 *   ITERS=50 NAP_US=50 TWIN=0 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int env(const char *name, int dflt) { return getenv(name) ? atoi(getenv(name)) : dflt; }

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
    int provided, rank, size, bad = 0, iters = env("ITERS", 50), nap = env("NAP_US", 50);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm twin = MPI_COMM_NULL, c, d;
    if (env("TWIN", 0)) MPI_Comm_dup(MPI_COMM_WORLD, &twin);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_thread_id(c, 1);
    MPI_Comm_dup(c, &d);
    set_thread_id(d, 1);
    for (int i = 0; i < iters; i++) {
        int x = rank + i, y = -1, z = -1, done = 0;
        MPI_Request r;
        MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_MAX, d, &r);
        if (rank == size - 1) {
            while (!done) {
                MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                if (!done && nap) usleep(nap);
            }
        } else {
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        MPI_Allreduce(&x, &z, 1, MPI_INT, MPI_MIN, c);
        bad += y != size - 1 + i || z != i;
    }
    if (bad) printf("rank %d: %d wrong results\n", rank, bad);
    if (rank == 0) printf("done\n");
    MPI_Comm_free(&d);
    MPI_Comm_free(&c);
    if (twin != MPI_COMM_NULL) MPI_Comm_free(&twin);
    MPI_Finalize();
    return 0;
}

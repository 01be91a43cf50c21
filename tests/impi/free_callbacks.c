/* Whether MPI_Comm_free runs a communicator's attribute delete callbacks before it returns, without
 * mpixstream (tests/c/stream_basic.c's row on Intel MPI across hosts: the library counts a stream
 * attached to a communicator until the delete callback of its record runs, and MPIX_Stream_free after
 * the MPI_Comm_free of 3 dups found the stream still attached to 3). Each rank makes 3 dups of
 * MPI_COMM_WORLD, each with an attribute whose delete callback counts, runs stream_basic's traffic on
 * each (a ring MPI_Sendrecv, an eager MPI_Send matched by MPI_Probe then MPI_Mprobe + MPI_Mrecv), frees
 * them, and prints how many callbacks ran before the last MPI_Comm_free returned ("rank R: 3 of 3
 * delete callbacks ran at MPI_Comm_free"), and after an MPI_Barrier. */
#include <mpi.h>
#include <stdio.h>

static int deleted;

static int count_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm; (void)keyval; (void)value; (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static void traffic(MPI_Comm c, int tag) {
    int rank, size, out, in = -1, got = -1;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    out = rank;
    MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &in, 1, MPI_INT, left, tag, c, MPI_STATUS_IGNORE);
    MPI_Send(&out, 1, MPI_INT, right, tag + 4, c);
    MPI_Probe(left, tag + 4, c, MPI_STATUS_IGNORE);
    MPI_Message msg;
    MPI_Mprobe(MPI_ANY_SOURCE, tag + 4, c, &msg, MPI_STATUS_IGNORE);
    MPI_Mrecv(&got, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    int provided, rank, key;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &key, NULL);
    MPI_Comm d[3];
    for (int i = 0; i < 3; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &d[i]);
        MPI_Comm_set_attr(d[i], key, &deleted);
    }
    for (int i = 0; i < 3; i++) traffic(d[i], 10 * (i + 2));
    for (int i = 0; i < 3; i++) MPI_Comm_free(&d[i]);
    int at_free = deleted;
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d: %d of 3 delete callbacks ran at MPI_Comm_free, %d after a barrier\n", rank, at_free, deleted);
    MPI_Comm_free_keyval(&key);
    MPI_Finalize();
    return 0;
}

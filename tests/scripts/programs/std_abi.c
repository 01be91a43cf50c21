/* A program built for the MPI-5 standard ABI (tests/scripts/abi_standard_passthrough.sh): compiled with
 * MPICH 5's `mpicc -mpi-abi` (mpi_abi.h, libmpi_abi.so.1: handles are pointers, constants not MPICH's).
 * It goes through every kind of call the library interposes: MPI_Init_thread, communicator
 * constructors (dup, split, idup) and MPI_Comm_free, keyvals and attributes, error handlers and
 * classes, blocking and nonblocking point-to-point with statuses, MPI_Sendrecv, the probes, persistent
 * requests, blocking and nonblocking collectives, completion calls; every result is checked. Then, where
 * a preloaded library defines it (declared weak here: mpi_abi.h has no MPIX API), MPIX_Stream_create
 * must make a stream (mpixstream's serial model on this ABI) and MPIX_Stream_free free it.
 * Rank 0 prints "MPIX_Stream_create: ..." and "No Errors" or "errors"; exit 1 on errors. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct mpixstream_stream *MPIX_Stream;
extern int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream) __attribute__((weak));
extern int MPIX_Stream_free(MPIX_Stream *stream) __attribute__((weak));

static int rank, errs;
#define CHECK(what, cond) \
    do { if (!(cond)) { fprintf(stderr, "rank %d: FAILED %s\n", rank, what); errs++; } } while (0)

static int deleted;
static int delete_fn(MPI_Comm c, int keyval, void *val, void *extra) {
    (void)c; (void)keyval; (void)extra;
    deleted += *(int *)val;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    MPI_Comm dup, split, idup;
    MPI_Request r;
    CHECK("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    /* The handle is a pointer with upper bits: an interposer that kept 32 bits of it would lose them. */
    CHECK("a communicator handle wider than 32 bits", (uintptr_t)dup > 0xffffffffu);
    CHECK("MPI_Comm_split", MPI_Comm_split(dup, rank % 2, -rank, &split) == MPI_SUCCESS);
    int srank = -1, ssize = -1;
    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    CHECK("split size", ssize == (size + 1 - rank % 2) / 2);
    CHECK("split rank (reversed keys)", srank == ssize - 1 - rank / 2);
    CHECK("MPI_Comm_idup", MPI_Comm_idup(dup, &idup, &r) == MPI_SUCCESS);
    CHECK("MPI_Wait (idup)", MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    int cmp = -1;
    MPI_Comm_compare(idup, MPI_COMM_WORLD, &cmp);
    CHECK("the idup is congruent to MPI_COMM_WORLD", cmp == MPI_CONGRUENT);

    /* Keyvals, attributes, error handlers and classes. */
    int keyval = MPI_KEYVAL_INVALID, one = 1;
    CHECK("MPI_Comm_create_keyval",
          MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &keyval, NULL) == MPI_SUCCESS);
    MPI_Comm_set_attr(idup, keyval, &one);
    CHECK("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(dup, &eh);
    CHECK("MPI_Comm_get_errhandler", eh == MPI_ERRORS_RETURN);
    int x = 0, cls = -1;
    int rc = MPI_Send(&x, 1, MPI_INT, size + 5, 0, dup);
    MPI_Error_class(rc, &cls);
    CHECK("an invalid rank is MPI_ERR_RANK", rc != MPI_SUCCESS && cls == MPI_ERR_RANK);

    /* Point-to-point: blocking, nonblocking with statuses, MPI_Sendrecv, probes, persistent. */
    int got = -1;
    if (rank % 2 == 0) {
        MPI_Send(&rank, 1, MPI_INT, next, 1, dup);
        MPI_Recv(&got, 1, MPI_INT, prev, 1, dup, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&got, 1, MPI_INT, prev, 1, dup, MPI_STATUS_IGNORE);
        MPI_Send(&rank, 1, MPI_INT, next, 1, dup);
    }
    CHECK("MPI_Send/MPI_Recv", got == prev);
    double out[64], in[64];
    for (int i = 0; i < 64; i++) out[i] = rank * 1000 + i;
    MPI_Request req[2];
    MPI_Status st[2];
    MPI_Irecv(in, 64, MPI_DOUBLE, prev, 2, dup, &req[0]);
    MPI_Isend(out, 64, MPI_DOUBLE, next, 2, dup, &req[1]);
    CHECK("MPI_Waitall", MPI_Waitall(2, req, st) == MPI_SUCCESS);
    CHECK("requests freed", req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL);
    CHECK("status source and tag", st[0].MPI_SOURCE == prev && st[0].MPI_TAG == 2);
    int n = -1;
    MPI_Get_count(&st[0], MPI_DOUBLE, &n);
    CHECK("MPI_Get_count", n == 64);
    int ok = 1;
    for (int i = 0; i < 64; i++) ok &= in[i] == prev * 1000 + i;
    CHECK("nonblocking payload", ok);
    got = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 4, &got, 1, MPI_INT, prev, 4, dup,
                 MPI_STATUS_IGNORE);
    CHECK("MPI_Sendrecv", got == prev);
    MPI_Isend(&rank, 1, MPI_INT, next, 5, idup, &r);
    MPI_Status ps;
    MPI_Probe(prev, 5, idup, &ps);
    CHECK("MPI_Probe", ps.MPI_SOURCE == prev && ps.MPI_TAG == 5);
    int flag = 0;
    while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 5, idup, &flag, &ps);
    MPI_Recv(&got, 1, MPI_INT, ps.MPI_SOURCE, 5, idup, MPI_STATUS_IGNORE);
    CHECK("MPI_Iprobe", got == prev);
    flag = 0;
    while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    CHECK("MPI_Test", r == MPI_REQUEST_NULL);
    MPI_Request pr[2];
    int psend = rank + 100, precv = -1;
    MPI_Recv_init(&precv, 1, MPI_INT, prev, 6, dup, &pr[0]);
    MPI_Send_init(&psend, 1, MPI_INT, next, 6, dup, &pr[1]);
    MPI_Startall(2, pr);
    MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
    CHECK("persistent requests", precv == prev + 100 && pr[0] != MPI_REQUEST_NULL);
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);

    /* Collectives: blocking, nonblocking, on the dup, the split and MPI_COMM_WORLD. */
    int sum = -1;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup);
    CHECK("MPI_Allreduce", sum == size * (size - 1) / 2);
    int root_val = rank == 0 ? 42 : 0;
    MPI_Bcast(&root_val, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK("MPI_Bcast", root_val == 42);
    int isum = -1, expect = 0;
    for (int q = rank % 2; q < size; q += 2) expect += q;
    MPI_Iallreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, split, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK("MPI_Iallreduce on the split", isum == expect);
    MPI_Ibarrier(idup, &r);
    int index = -1;
    CHECK("MPI_Ibarrier + MPI_Waitany", MPI_Waitany(1, &r, &index, MPI_STATUS_IGNORE) == MPI_SUCCESS && index == 0);

    /* Frees: the attribute's delete callback runs with the idup's free. */
    CHECK("MPI_Comm_free (idup)", MPI_Comm_free(&idup) == MPI_SUCCESS && idup == MPI_COMM_NULL);
    CHECK("the attribute's delete callback ran", deleted == 1);
    CHECK("MPI_Comm_free_keyval", MPI_Comm_free_keyval(&keyval) == MPI_SUCCESS && keyval == MPI_KEYVAL_INVALID);
    CHECK("MPI_Comm_free (split)", MPI_Comm_free(&split) == MPI_SUCCESS && split == MPI_COMM_NULL);
    CHECK("MPI_Comm_free (dup)", MPI_Comm_free(&dup) == MPI_SUCCESS && dup == MPI_COMM_NULL);

    /* The MPIX stream API, where a preloaded library defines it: a stream of the serial model
     * (tests/scripts/abi_standard_mpix.sh tests the API itself). */
    if (MPIX_Stream_create) {
        MPIX_Stream s = NULL;
        rc = MPIX_Stream_create(MPI_INFO_NULL, &s);
        if (rank == 0) printf("MPIX_Stream_create: %s\n", rc == MPI_SUCCESS && s != NULL ? "a stream" : "failed");
        CHECK("MPIX_Stream_create succeeds", rc == MPI_SUCCESS && s != NULL);
        CHECK("MPIX_Stream_free succeeds", MPIX_Stream_free && MPIX_Stream_free(&s) == MPI_SUCCESS && s == NULL);
    } else if (rank == 0) {
        printf("MPIX_Stream_create: not defined\n");
    }
    int total = -1;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", total == 0 ? "No Errors" : "errors");
    MPI_Finalize();
    return total != 0;
}

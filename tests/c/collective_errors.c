/* A local error before a collective fails every member together (issue: a bad stream on one rank used
 * to leave the others in MPICH's collective: a hang on Debian 4.0.2, "Message truncated" in the next
 * collective on MPICH 5.0.2). Each case: one rank passes bad input to MPIX_Stream_comm_create, every
 * rank gets an error (the culprit its own, the others one naming the culprit), and the next collectives
 * on the same communicator still match. Also: MPIX_Comm_get_stream on a garbage or freed communicator
 * is MPI_ERR_COMM. */
#include "mpixtest.h"

/* The collectives after a failed creation still pair up correctly. */
static void collectives_still_match(MPI_Comm comm, int size) {
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size, "allreduce after the failed creation gave %d, expected %d", sum, size);
    int value = 0, rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) value = 4242;
    OK(MPI_Bcast(&value, 1, MPI_INT, 0, comm));
    CHECK(value == 4242, "bcast after the failed creation gave %d", value);
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int culprit = size - 1;
    char needle[64];
    snprintf(needle, sizeof needle, "rank %d of the communicator", culprit);

    MPIX_Stream good, freed;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &good));
    OK(MPIX_Stream_create(MPI_INFO_NULL, &freed));
    MPIX_Stream stale = freed;
    OK(MPIX_Stream_free(&freed));

    /* 1. A freed stream on the last rank. */
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPIX_Stream_comm_create(MPI_COMM_WORLD, rank == culprit ? stale : good, &c);
    CHECK(rc != MPI_SUCCESS, "freed stream on rank %d: creation succeeded on rank %d", culprit, rank);
    if (rc != MPI_SUCCESS) {
        CHECK(err_class(rc) == MPIX_ERR_STREAM, "freed stream: class %d (%s)", err_class(rc), err_text(rc));
        if (rank == culprit)
            CHECK(strstr(err_text(rc), "has been freed"), "culprit's message: %s", err_text(rc));
        else
            CHECK(strstr(err_text(rc), needle), "peer's message lacks '%s': %s", needle, err_text(rc));
    }
    CHECK(c == MPI_COMM_NULL, "a communicator was created on rank %d", rank);
    collectives_still_match(MPI_COMM_WORLD, size);

    /* 2. A garbage handle on rank 0 only, on a duplicate of the world. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    rc = MPIX_Stream_comm_create(dup, rank == 0 ? (MPIX_Stream)0x1234 : good, &c);
    CHECK(rc != MPI_SUCCESS, "garbage stream on rank 0: creation succeeded on rank %d", rank);
    if (rc != MPI_SUCCESS && rank != 0)
        CHECK(strstr(err_text(rc), "rank 0 of the communicator"), "peer's message: %s", err_text(rc));
    collectives_still_match(dup, size);

    /* 3. A null newcomm on the last rank only. */
    rc = MPIX_Stream_comm_create(dup, good, rank == culprit ? NULL : &c);
    CHECK(rc != MPI_SUCCESS, "null newcomm on rank %d: creation succeeded on rank %d", culprit, rank);
    if (rc != MPI_SUCCESS) CHECK(err_class(rc) == MPI_ERR_ARG, "null newcomm: class %d", err_class(rc));
    collectives_still_match(dup, size);

    /* 4. All good: the creation works afterwards. */
    OK(MPIX_Stream_comm_create(dup, good, &c));
    collectives_still_match(c, size);
    OK(MPI_Comm_free(&c));

    /* 5. MPIX_Comm_get_stream on a garbage and on a freed communicator. */
    MPIX_Stream got = good;
    rc = MPIX_Comm_get_stream((MPI_Comm)0x1234, 0, &got);
    CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_COMM, "garbage communicator: rc %d class %d", rc,
          rc ? err_class(rc) : 0);
    MPI_Comm gone = dup;
    OK(MPI_Comm_free(&dup));
    rc = MPIX_Comm_get_stream(gone, 0, &got);
    CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_COMM, "freed communicator: rc %d class %d", rc,
          rc ? err_class(rc) : 0);

    OK(MPIX_Stream_free(&good));
    return mpixtest_finish();
}

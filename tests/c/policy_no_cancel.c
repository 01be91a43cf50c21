/* A program that names no MPI_Cancel under the explicit policy, 2 ranks or more: the policy's streams
 * note nothing about its requests (native_fixes::cancel: the send marks serve MPI_Cancel's route only,
 * and cost a load and a store in each nonblocking call), and it still works:
 *  - its MPI_Comm_dup is a policy stream (native backend: origin 2) whose requests are not noted
 *    (mpixstream_comm_notes_sends 0), where tests/c/policy_cancel.c, which names MPI_Cancel, gets 1;
 *  - a ring of MPI_Irecv + MPI_Isend + MPI_Waitall delivers every message, in order;
 *  - MPI_Cancel reached by dlsym (the name is a string here, not an import, so the scan at MPI_Init
 *    cannot see it) is passed to MPICH, as without the library: a receive nothing matches is cancelled.
 * Runs at MPI_THREAD_MULTIPLE, where the policy gives streams. */
#include "mpixtest.h"
#include <dlfcn.h>

int mpixstream_comm_notes_sends(MPI_Comm comm);
int mpixstream_comm_origin(MPI_Comm comm);

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    int streams = policy_gives_streams() && native_backend() && provided == MPI_THREAD_MULTIPLE;
    if (streams) {
        CHECK(mpixstream_comm_origin(c) == 2, "the dup is not a policy stream (origin %d)", mpixstream_comm_origin(c));
        CHECK(mpixstream_comm_notes_sends(c) == 0, "a program without MPI_Cancel has its requests noted (%d)",
              mpixstream_comm_notes_sends(c));
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 1000; i++) {
        MPI_Request q[2];
        long out = (long)rank * 100000 + i, in = -1;
        OK(MPI_Irecv(&in, 1, MPI_LONG, left, 5, c, &q[0]));
        OK(MPI_Isend(&out, 1, MPI_LONG, right, 5, c, &q[1]));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        if (in != (long)left * 100000 + i) {
            CHECK(0, "message %d from rank %d: got %ld", i, left, in);
            break;
        }
    }
    int (*cancel)(MPI_Request *) = (int (*)(MPI_Request *))dlsym(RTLD_DEFAULT, "MPI_Cancel");
    CHECK(cancel != NULL, "dlsym(MPI_Cancel): %s", dlerror());
    if (cancel) {
        MPI_Request r;
        MPI_Status st;
        int x = 0, flag = 0;
        OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 777, c, &r));
        OK(cancel(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "a receive nothing matches was not cancelled");
    }
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

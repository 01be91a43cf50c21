/* Windows and files of communicators the explicit policy made (MPI_Comm_dup of MPI_COMM_WORLD: on
 * MPICH >= 4.1 a native stream communicator). Native MPICH serves windows with waits that turn only
 * its implicit pool, so fences, locks and flushes on a window of such a communicator hung (MPICH's
 * rma/accfence2, rma/transpose* under the explicit policy); mpixstream makes windows and files on a
 * plain twin of the communicator (shim/src/native_fixes/plain_twin.rs). Every window kind (create, allocate,
 * allocate_shared, create_dynamic), every synchronisation (fence, passive lock with flush, PSCW) and
 * MPI-IO collective writes and reads; results checked. Also a communicator whose stream exists on one
 * rank only (rank 0 attaches MPIX_STREAM_NULL): every rank must still take the same path. */
#include "mpixtest.h"
#include <unistd.h>

static void ring_rma(MPI_Win win, long *mem, int rank, int size, const char *what) {
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    /* fence: put my rank into the next process's slot 0 */
    long v = 100 + rank;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(&v, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win));
    OK(MPI_Win_fence(0, win));
    CHECK(mem[0] == 100 + from, "%s fence: slot 0 = %ld, expected %d", what, mem[0], 100 + from);
    /* passive target: accumulate into the peer's slot 1, flush, get it back */
    OK(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
    long one = 1, got = -1;
    OK(MPI_Accumulate(&one, 1, MPI_LONG, peer, 1, 1, MPI_LONG, MPI_SUM, win));
    OK(MPI_Win_flush(peer, win));
    OK(MPI_Get(&got, 1, MPI_LONG, peer, 1, 1, MPI_LONG, win));
    OK(MPI_Win_unlock(peer, win));
    CHECK(got >= 1, "%s lock: slot 1 of %d = %ld", what, peer, got);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* PSCW: post to the previous process, start to the next */
    MPI_Group world, to, fromg;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &peer, &to);
    MPI_Group_incl(world, 1, &from, &fromg);
    OK(MPI_Win_post(fromg, 0, win));
    OK(MPI_Win_start(to, 0, win));
    long w = 200 + rank;
    OK(MPI_Put(&w, 1, MPI_LONG, peer, 2, 1, MPI_LONG, win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    CHECK(mem[2] == 200 + from, "%s PSCW: slot 2 = %ld, expected %d", what, mem[2], 200 + from);
    MPI_Group_free(&to);
    MPI_Group_free(&fromg);
    MPI_Group_free(&world);
}

static void windows_and_file(MPI_Comm c, int rank, int size, const char *what) {
    char name[128];
    long *mem;
    MPI_Win win;
    /* MPI_Win_create */
    mem = calloc(4, sizeof(long));
    OK(MPI_Win_create(mem, 4 * sizeof(long), sizeof(long), MPI_INFO_NULL, c, &win));
    snprintf(name, sizeof name, "%s Win_create", what);
    ring_rma(win, mem, rank, size, name);
    OK(MPI_Win_free(&win));
    free(mem);
    /* MPI_Win_allocate */
    OK(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, c, &mem, &win));
    memset(mem, 0, 4 * sizeof(long));
    snprintf(name, sizeof name, "%s Win_allocate", what);
    ring_rma(win, mem, rank, size, name);
    OK(MPI_Win_free(&win));
    /* MPI_Win_allocate_shared (one node) */
    OK(MPI_Win_allocate_shared(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, c, &mem, &win));
    memset(mem, 0, 4 * sizeof(long));
    snprintf(name, sizeof name, "%s Win_allocate_shared", what);
    ring_rma(win, mem, rank, size, name);
    OK(MPI_Win_free(&win));
    /* MPI_Win_create_dynamic + attach */
    mem = calloc(4, sizeof(long));
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, c, &win));
    OK(MPI_Win_attach(win, mem, 4 * sizeof(long)));
    MPI_Aint mine, theirs;
    MPI_Get_address(mem, &mine);
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    OK(MPI_Sendrecv(&mine, 1, MPI_AINT, from, 7, &theirs, 1, MPI_AINT, peer, 7, c, MPI_STATUS_IGNORE));
    long v = 300 + rank;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win));
    OK(MPI_Put(&v, 1, MPI_LONG, peer, theirs, 1, MPI_LONG, win));
    OK(MPI_Win_unlock(peer, win));
    OK(MPI_Barrier(c));
    CHECK(mem[0] == 300 + from, "%s dynamic: slot 0 = %ld, expected %d", what, mem[0], 300 + from);
    OK(MPI_Win_detach(win, mem));
    OK(MPI_Win_free(&win));
    free(mem);
    /* MPI-IO: every rank writes its block collectively, reads the next rank's block back */
    char path[256];
    snprintf(path, sizeof path, "/tmp/mpixstream-policy-file-%s.%d", what, (int)getppid());
    MPI_File fh;
    OK(MPI_File_open(c, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    long block[16], back[16];
    for (int i = 0; i < 16; i++) block[i] = 1000L * rank + i;
    OK(MPI_File_write_at_all(fh, (MPI_Offset)rank * sizeof block, block, 16, MPI_LONG, MPI_STATUS_IGNORE));
    OK(MPI_File_sync(fh));
    OK(MPI_Barrier(c));
    OK(MPI_File_sync(fh));
    OK(MPI_File_read_at_all(fh, (MPI_Offset)peer * sizeof back, back, 16, MPI_LONG, MPI_STATUS_IGNORE));
    for (int i = 0; i < 16; i++)
        CHECK(back[i] == 1000L * peer + i, "%s file: [%d] = %ld, expected %ld", what, i, back[i], 1000L * peer + i);
    OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    windows_and_file(c, rank, size, "dup");
    /* A stream communicator the program made, with a stream on every rank but rank 0. */
    MPIX_Stream s = MPIX_STREAM_NULL;
    if (rank != 0) OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPI_Comm mixed;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &mixed));
    windows_and_file(mixed, rank, size, "mixed");
    OK(MPI_Comm_free(&mixed));
    if (s != MPIX_STREAM_NULL) OK(MPIX_Stream_free(&s));
    OK(MPI_Comm_free(&c));
    return mpixtest_finish();
}

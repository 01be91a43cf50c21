/* N-to-1 on a multiplex communicator: every sender thread of every process (one thread per stream)
 * sends to one polling index (rank 0, index 0), whose thread receives with MPI_ANY_SOURCE,
 * MPI_ANY_TAG and MPIX_ANY_INDEX, blocking and in batches of nonblocking receives. Checks every
 * message arrives once, statuses match payloads, and each (process, source index) arrives in order.
 *   MPIXTEST_THREADS: sender threads per process (default 2); MPIXTEST_MESSAGES: per thread (2000). */
#include "mpixtest.h"
#include <pthread.h>

static int rank, size, nthreads, nmsg;
static MPI_Comm mx;

typedef struct {
    int index;
} sender_arg;

static void *sender(void *p) {
    int si = ((sender_arg *)p)->index;
    MPI_Request reqs[4];
    int bufs[4][3];
    for (int i = 0; i < nmsg; i++) {
        int msg[3] = {rank, si, i};
        if (i % 8 < 4) {
            OK(MPIX_Stream_send(msg, 3, MPI_INT, 0, i % 5, mx, si, 0));
        } else {
            /* four nonblocking in a row, then wait */
            int k = i % 8 - 4;
            memcpy(bufs[k], msg, sizeof msg);
            OK(MPIX_Stream_isend(bufs[k], 3, MPI_INT, 0, i % 5, mx, si, 0, &reqs[k]));
            if (k == 3) {
                MPI_Status sts[4];
                OK(MPI_Waitall(4, reqs, sts));
            }
        }
    }
    if (nmsg % 8 > 4) {
        MPI_Status sts[4];
        OK(MPI_Waitall(nmsg % 8 - 4, reqs, sts));
    }
    return NULL;
}

static void poller(void) {
    int senders = size * nthreads;
    long total = (long)senders * nmsg, got = 0;
    int *next = calloc(size * (nthreads + 1), sizeof(int));
    enum { BATCH = 16 };
    int bufs[BATCH][3];
    MPI_Request reqs[BATCH];
    MPI_Status sts[BATCH];
    while (got < total) {
        int n = 1;
        if ((got / 100) % 2 == 0) {
            /* blocking */
            OK(MPIX_Stream_recv(bufs[0], 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &sts[0]));
        } else {
            /* a batch of nonblocking receives, completed together; matched in posting order */
            n = total - got < BATCH ? (int)(total - got) : BATCH;
            for (int k = 0; k < n; k++)
                OK(MPIX_Stream_irecv(bufs[k], 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &reqs[k]));
            OK(MPI_Waitall(n, reqs, sts));
        }
        for (int k = 0; k < n; k++) {
            int src = bufs[k][0], si = bufs[k][1], seq = bufs[k][2];
            int cnt = -1;
            MPI_Get_count(&sts[k], MPI_INT, &cnt);
            CHECK(sts[k].MPI_SOURCE == src && sts[k].MPI_TAG == seq % 5 && cnt == 3, "status %d/%d/%d for %d,%d,%d",
                  sts[k].MPI_SOURCE, sts[k].MPI_TAG, cnt, src, si, seq);
            if (src < 0 || src >= size || si < 0 || si > nthreads) {
                CHECK(0, "bad payload %d %d %d", src, si, seq);
                continue;
            }
            int *nx = &next[src * (nthreads + 1) + si];
            CHECK(seq == *nx, "from rank %d index %d: message %d, expected %d", src, si, seq, *nx);
            *nx = seq + 1;
        }
        got += n;
    }
    for (int r = 0; r < size; r++)
        for (int t = 0; t < nthreads; t++) {
            int si = r == 0 ? t + 1 : t;
            CHECK(next[r * (nthreads + 1) + si] == nmsg, "rank %d index %d: %d of %d messages", r, si,
                  next[r * (nthreads + 1) + si], nmsg);
        }
    free(next);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(provided == MPI_THREAD_MULTIPLE, "no MPI_THREAD_MULTIPLE");
    nthreads = env_int("MPIXTEST_THREADS", 2);
    nmsg = env_int("MPIXTEST_MESSAGES", 2000);

    /* rank 0: index 0 is the poller, 1..T the senders; other ranks: 0..T-1 the senders */
    int count = rank == 0 ? nthreads + 1 : nthreads;
    MPIX_Stream *streams = malloc(sizeof(MPIX_Stream) * count);
    for (int i = 0; i < count; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &streams[i]));
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, count, streams, &mx));

    pthread_t th[64];
    sender_arg args[64];
    int first = rank == 0 ? 1 : 0;
    for (int t = 0; t < nthreads; t++) {
        args[t].index = first + t;
        pthread_create(&th[t], NULL, sender, &args[t]);
    }
    if (rank == 0) poller();
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);

    OK(MPI_Comm_free(&mx));
    for (int i = 0; i < count; i++) OK(MPIX_Stream_free(&streams[i]));
    free(streams);
    return mpixtest_finish();
}

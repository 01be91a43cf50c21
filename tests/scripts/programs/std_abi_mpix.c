/* The MPIX stream API for a program built for the MPI-5 standard ABI (tests/scripts/abi_standard_mpix.sh):
 * compiled with `mpicc -mpi-abi -Iinclude` against include/mpix_stream_abi.h, run with libmpixstream.so
 * preloaded. Every result is checked:
 *   - streams: pointer-wide handles, distinct, MPIX_Stream_free resets the handle;
 *   - a stream communicator per thread (MPI_THREAD_MULTIPLE, 3 threads), each carrying a ring of
 *     messages on its own thread, MPIX_Comm_get_stream naming the thread's stream, MPIX_Stream_progress;
 *     a dup of a stream communicator keeps the stream;
 *   - a multiplex communicator (counts 2 or 3 by rank, the last entry MPIX_STREAM_NULL on odd ranks):
 *     an indexed message between every (rank, index) pair in both directions, by isend/irecv and
 *     send/recv, values and statuses checked; MPI_ANY_SOURCE, MPI_ANY_TAG, MPIX_ANY_INDEX;
 *   - errors, each with its class and message: a freed stream (on every rank, and on rank 0 only: every
 *     rank fails together), out of streams, a bad index, an indexed call on a plain communicator, a
 *     stream still attached, the enqueue calls and queue-backed streams refused.
 * The MPIX functions are weak: without the library the program says so and fails. Rank 0 prints
 * "No Errors" or "errors"; exit 1 on errors. */
#include <mpi.h>
#include "mpix_stream_abi.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak MPIX_Stream_create
#pragma weak MPIX_Stream_free
#pragma weak MPIX_Stream_comm_create
#pragma weak MPIX_Comm_get_stream
#pragma weak MPIX_Stream_progress
#pragma weak MPIX_Stream_comm_create_multiplex
#pragma weak MPIX_Comm_multiplex_tag_ub
#pragma weak MPIX_Stream_send
#pragma weak MPIX_Stream_isend
#pragma weak MPIX_Stream_recv
#pragma weak MPIX_Stream_irecv
#pragma weak MPIX_Stream_send_c
#pragma weak MPIX_Stream_recv_c
#pragma weak MPIX_Send_enqueue
#pragma weak MPIX_Start_progress_thread

#define NTHREADS 3
static int rank, size, errs;
#define CHECK(what, cond)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "rank %d: FAILED %s (line %d)\n", rank, what, __LINE__); \
            __atomic_add_fetch(&errs, 1, __ATOMIC_RELAXED);                 \
        }                                                                   \
    } while (0)

/* rc must be an error of class cls whose string contains text. */
static void expect_error(const char *what, int rc, int cls, const char *text) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0, got = -1;
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: FAILED %s: succeeded\n", rank, what);
        errs++;
        return;
    }
    MPI_Error_class(rc, &got);
    MPI_Error_string(rc, msg, &len);
    if (got != cls || !strstr(msg, text)) {
        fprintf(stderr, "rank %d: FAILED %s: class %d (want %d), \"%s\" (want \"%s\")\n", rank, what, got, cls,
                msg, text);
        errs++;
    } else if (rank == 0) {
        printf("error ok: %s: class %d, \"%s\"\n", what, got, msg);
    }
}

struct thread_arg {
    MPI_Comm comm;
    MPIX_Stream stream;
    int id;
};

/* A ring on the thread's stream communicator: 20 rounds, each value checked. */
static void *ring(void *p) {
    struct thread_arg *a = p;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPIX_Stream s = MPIX_STREAM_NULL;
    CHECK("MPIX_Comm_get_stream (thread)", MPIX_Comm_get_stream(a->comm, 0, &s) == MPI_SUCCESS && s == a->stream);
    for (int round = 0; round < 20; round++) {
        int out = rank * 1000 + a->id * 100 + round, in = -1;
        MPI_Request r[2];
        MPI_Status st[2];
        MPI_Irecv(&in, 1, MPI_INT, prev, round, a->comm, &r[0]);
        MPI_Isend(&out, 1, MPI_INT, next, round, a->comm, &r[1]);
        int done = 0;
        while (!done) {
            CHECK("MPIX_Stream_progress", MPIX_Stream_progress(a->stream) == MPI_SUCCESS);
            MPI_Testall(2, r, &done, st);
        }
        CHECK("ring value", in == prev * 1000 + a->id * 100 + round);
        CHECK("ring status", st[0].MPI_SOURCE == prev && st[0].MPI_TAG == round);
    }
    return NULL;
}

/* The value of an indexed message. */
static int encode(int src, int si, int dst, int di) { return ((src * 16 + si) * 64 + dst) * 16 + di; }

static void multiplex(MPIX_Stream *streams) {
    int count = 2 + rank % 2;
    MPIX_Stream array[3] = {streams[0], streams[1], MPIX_STREAM_NULL};
    MPI_Comm mx;
    CHECK("MPIX_Stream_comm_create_multiplex",
          MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, count, array, &mx) == MPI_SUCCESS);
    CHECK("the multiplex communicator is pointer-wide", (uintptr_t)mx > 0xffffffffu);
    int *counts = malloc(size * sizeof(int));
    MPI_Allgather(&count, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++) {
        MPIX_Stream s = (MPIX_Stream)1;
        int rc = MPIX_Comm_get_stream(mx, i, &s);
        if (i < count) CHECK("MPIX_Comm_get_stream (multiplex)", rc == MPI_SUCCESS && s == array[i]);
    }
    int ub = -1;
    CHECK("MPIX_Comm_multiplex_tag_ub", MPIX_Comm_multiplex_tag_ub(mx, &ub) == MPI_SUCCESS && ub >= 32767);

    /* Every (source index, destination rank, destination index): isend; every (source rank, source index,
     * destination index): irecv on even destination indices, recv on odd ones. Tag: si * 10 + di. */
    int nsend = 0, nrecv = 0;
    for (int d = 0; d < size; d++) nsend += count * counts[d];
    for (int s = 0; s < size; s++) nrecv += counts[s] * count;
    MPI_Request *req = malloc((nsend + nrecv) * sizeof(MPI_Request));
    int *out = malloc(nsend * sizeof(int)), *in = malloc(nrecv * sizeof(int));
    int (*who)[3] = malloc(nrecv * sizeof(*who));
    int k = 0;
    for (int si = 0; si < count; si++)
        for (int d = 0; d < size; d++)
            for (int di = 0; di < counts[d]; di++, k++) {
                out[k] = encode(rank, si, d, di);
                CHECK("MPIX_Stream_isend",
                      MPIX_Stream_isend(&out[k], 1, MPI_INT, d, si * 10 + di, mx, si, di, &req[k]) == MPI_SUCCESS);
            }
    int nreq = k, r = 0;
    for (int di = 0; di < count; di += 2)
        for (int s = 0; s < size; s++)
            for (int si = 0; si < counts[s]; si++, r++) {
                who[r][0] = s, who[r][1] = si, who[r][2] = di;
                in[r] = -1;
                CHECK("MPIX_Stream_irecv",
                      MPIX_Stream_irecv(&in[r], 1, MPI_INT, s, si * 10 + di, mx, si, di, &req[nreq++]) == MPI_SUCCESS);
            }
    int blocking_from = r;
    for (int di = 1; di < count; di += 2)
        for (int s = 0; s < size; s++)
            for (int si = 0; si < counts[s]; si++, r++) {
                MPI_Status st;
                who[r][0] = s, who[r][1] = si, who[r][2] = di;
                in[r] = -1;
                CHECK("MPIX_Stream_recv",
                      MPIX_Stream_recv(&in[r], 1, MPI_INT, s, si * 10 + di, mx, si, di, &st) == MPI_SUCCESS);
                CHECK("MPIX_Stream_recv status", st.MPI_SOURCE == s && st.MPI_TAG == si * 10 + di);
            }
    MPI_Status *st = malloc(nreq * sizeof(MPI_Status));
    CHECK("MPI_Waitall (indexed)", MPI_Waitall(nreq, req, st) == MPI_SUCCESS);
    for (int i = 0; i < r; i++) {
        CHECK("indexed value", in[i] == encode(who[i][0], who[i][1], rank, who[i][2]));
        if (i < blocking_from) {
            MPI_Status *q = &st[k + i];
            CHECK("MPIX_Stream_irecv status", q->MPI_SOURCE == who[i][0] && q->MPI_TAG == who[i][1] * 10 + who[i][2]);
        }
    }

    /* Wildcards: each rank sends to index 0 of its next rank from each of its indices, tag 7; the next rank
     * receives them with MPI_ANY_SOURCE and MPIX_ANY_INDEX / MPI_ANY_TAG (blocking), then one by named index
     * with MPI_ANY_SOURCE (nonblocking). */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int si = 0; si < count; si++) {
        int v = encode(rank, si, next, 0);
        CHECK("MPIX_Stream_send", MPIX_Stream_send(&v, 1, MPI_INT, next, 7, mx, si, 0) == MPI_SUCCESS);
    }
    int seen = 0;
    for (int i = 0; i < counts[prev]; i++) {
        int v = -1;
        MPI_Status q;
        MPI_Count c = 0;
        CHECK("MPIX_Stream_recv (MPIX_ANY_INDEX, MPI_ANY_TAG)",
              MPIX_Stream_recv(&v, 1, MPI_INT, prev, MPI_ANY_TAG, mx, MPIX_ANY_INDEX, 0, &q) == MPI_SUCCESS);
        int si = v % (16 * 64 * 16) / (64 * 16);
        CHECK("MPIX_ANY_INDEX value", si >= 0 && si < counts[prev] && v == encode(prev, si, rank, 0));
        CHECK("MPIX_ANY_INDEX status", q.MPI_SOURCE == prev && q.MPI_TAG == 7);
        MPI_Get_elements_x(&q, MPI_INT, &c);
        CHECK("MPIX_ANY_INDEX count", c == 1);
        seen |= 1 << si;
    }
    CHECK("MPIX_ANY_INDEX received every index", seen == (1 << counts[prev]) - 1);
    MPI_Barrier(MPI_COMM_WORLD);
    {
        int v = 5000 + rank, got = -1;
        MPI_Request q[2];
        MPI_Status qs[2];
        MPIX_Stream_irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mx, 1, 0, &q[0]);
        MPIX_Stream_isend(&v, 1, MPI_INT, next, 9, mx, 1, 0, &q[1]);
        MPI_Waitall(2, q, qs);
        CHECK("MPI_ANY_SOURCE + named index (nonblocking)",
              got == 5000 + prev && qs[0].MPI_SOURCE == prev && qs[0].MPI_TAG == 9);
        long long big = 1LL << 40, gotbig = 0;
        MPIX_Stream_send_c(&big, 1, MPI_LONG_LONG, next, 11, mx, 0, 1);
        MPIX_Stream_recv_c(&gotbig, 1, MPI_LONG_LONG, prev, 11, mx, 0, 1, MPI_STATUS_IGNORE);
        CHECK("MPIX_Stream_send_c/recv_c", gotbig == big);
        MPI_Status ps;
        MPIX_Stream_recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, mx, 0, 0, &ps);
        CHECK("MPI_PROC_NULL", ps.MPI_SOURCE == MPI_PROC_NULL && ps.MPI_TAG == MPI_ANY_TAG);
    }

    /* Errors on the multiplex communicator. */
    int x = 0;
    MPI_Comm_set_errhandler(mx, MPI_ERRORS_RETURN);
    expect_error("a destination index out of range", MPIX_Stream_send(&x, 1, MPI_INT, next, 0, mx, 0, 5),
                 MPI_ERR_ARG, "dest_stream_index 5 is out of range");
    expect_error("a source index out of range", MPIX_Stream_send(&x, 1, MPI_INT, next, 0, mx, 3, 0), MPI_ERR_ARG,
                 "source_stream_index 3 is out of range: this process attached");
    expect_error("MPIX_Comm_get_stream index out of range", MPIX_Comm_get_stream(mx, 7, &array[2]), MPI_ERR_ARG,
                 "index 7 is out of range");
    expect_error("a bad rank", MPIX_Stream_send(&x, 1, MPI_INT, size, 0, mx, 0, 0), MPI_ERR_RANK,
                 "dest " );
    MPI_Request q;
    expect_error("MPIX_ANY_INDEX in MPIX_Stream_irecv",
                 MPIX_Stream_irecv(&x, 1, MPI_INT, prev, 0, mx, MPIX_ANY_INDEX, 0, &q),
                 MPI_ERR_UNSUPPORTED_OPERATION, "MPIX_ANY_INDEX in a nonblocking receive");
    expect_error("an indexed call on MPI_COMM_WORLD", MPIX_Stream_send(&x, 1, MPI_INT, next, 0, MPI_COMM_WORLD, 0, 0),
                 MPI_ERR_COMM, "not a multiplex stream communicator");
    expect_error("freeing a stream a communicator carries", MPIX_Stream_free(&streams[0]), MPI_ERR_OTHER,
                 "still attached to 1 communicator");
    CHECK("MPI_Comm_free (multiplex)", MPI_Comm_free(&mx) == MPI_SUCCESS);
    free(counts), free(req), free(out), free(in), free(who), free(st);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!MPIX_Stream_create || !MPIX_Stream_send || !MPIX_Send_enqueue) {
        if (rank == 0) printf("the MPIX stream API is not defined (is libmpixstream.so preloaded?)\nerrors\n");
        MPI_Finalize();
        return 1;
    }
    CHECK("MPI_THREAD_MULTIPLE", provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Streams. */
    MPIX_Stream streams[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        streams[i] = MPIX_STREAM_NULL;
        CHECK("MPIX_Stream_create", MPIX_Stream_create(MPI_INFO_NULL, &streams[i]) == MPI_SUCCESS);
        CHECK("a stream handle wider than 32 bits", (uintptr_t)streams[i] > 0xffffffffu);
        for (int j = 0; j < i; j++) CHECK("distinct streams", streams[i] != streams[j]);
    }

    /* A stream communicator per thread. */
    struct thread_arg args[NTHREADS];
    pthread_t tid[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i].id = i, args[i].stream = streams[i];
        CHECK("MPIX_Stream_comm_create",
              MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[i], &args[i].comm) == MPI_SUCCESS);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_create(&tid[i], NULL, ring, &args[i]);
    for (int i = 0; i < NTHREADS; i++) pthread_join(tid[i], NULL);
    MPIX_Stream s = (MPIX_Stream)1;
    CHECK("MPIX_Comm_get_stream (MPI_COMM_WORLD)",
          MPIX_Comm_get_stream(MPI_COMM_WORLD, 0, &s) == MPI_SUCCESS && s == MPIX_STREAM_NULL);
    CHECK("MPIX_Stream_progress (MPIX_STREAM_NULL)", MPIX_Stream_progress(MPIX_STREAM_NULL) == MPI_SUCCESS);
    MPI_Comm dup, plain;
    MPI_Comm_dup(args[0].comm, &dup);
    CHECK("a dup of a stream communicator keeps its stream",
          MPIX_Comm_get_stream(dup, 0, &s) == MPI_SUCCESS && s == streams[0]);
    CHECK("MPIX_Stream_comm_create (MPIX_STREAM_NULL)",
          MPIX_Stream_comm_create(dup, MPIX_STREAM_NULL, &plain) == MPI_SUCCESS);
    CHECK("... is a plain communicator", MPIX_Comm_get_stream(plain, 0, &s) == MPI_SUCCESS && s == MPIX_STREAM_NULL);
    expect_error("freeing a stream two communicators carry", MPIX_Stream_free(&streams[0]), MPI_ERR_OTHER,
                 "still attached to 2 communicator(s)");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&plain);
    expect_error("MPIX_Comm_get_stream index 1", MPIX_Comm_get_stream(args[1].comm, 1, &s), MPI_ERR_ARG,
                 "index 1 is out of range");
    for (int i = 0; i < NTHREADS; i++) CHECK("MPI_Comm_free (stream)", MPI_Comm_free(&args[i].comm) == MPI_SUCCESS);

    multiplex(streams);

    /* A freed stream: on every rank, then on rank 0 alone (every rank fails together). */
    MPIX_Stream gone = streams[2];
    CHECK("MPIX_Stream_free", MPIX_Stream_free(&streams[2]) == MPI_SUCCESS && streams[2] == MPIX_STREAM_NULL);
    MPI_Comm c = MPI_COMM_NULL;
    expect_error("a freed stream (MPIX_Stream_free)", MPIX_Stream_free(&gone), MPIX_ERR_STREAM, "has been freed");
    expect_error("a freed stream (MPIX_Stream_comm_create)", MPIX_Stream_comm_create(MPI_COMM_WORLD, gone, &c),
                 MPIX_ERR_STREAM, "has been freed");
    expect_error("a freed stream (MPIX_Stream_progress)", MPIX_Stream_progress(gone), MPIX_ERR_STREAM,
                 "has been freed");
    expect_error("rank 0 passed a freed stream",
                 MPIX_Stream_comm_create(MPI_COMM_WORLD, rank == 0 ? gone : streams[1], &c), MPIX_ERR_STREAM,
                 rank == 0 ? "has been freed" : "rank 0 of the communicator passed invalid arguments");
    CHECK("no communicator", c == MPI_COMM_NULL);
    expect_error("not a stream handle", MPIX_Stream_progress((MPIX_Stream)&c), MPIX_ERR_STREAM,
                 "is not a stream handle");

    /* Out of streams: the pool (MPIXSTREAM_STREAMS, default 8) has 6 left. */
    MPIX_Stream more[64];
    int made = 0, rc = MPI_SUCCESS;
    while (made < 64 && (rc = MPIX_Stream_create(MPI_INFO_NULL, &more[made])) == MPI_SUCCESS) made++;
    const char *pool = getenv("MPIXSTREAM_STREAMS");
    CHECK("the pool's size", made + 2 == (pool ? atoi(pool) : 8));
    expect_error("out of streams", rc, MPI_ERR_OTHER, "out of streams: all");
    while (made > 0) MPIX_Stream_free(&more[--made]);

    /* Refused on this ABI. */
    int x = 1;
    expect_error("MPIX_Send_enqueue", MPIX_Send_enqueue(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
                 MPI_ERR_UNSUPPORTED_OPERATION, "the enqueue API is not available");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "mpixstream_host_queue");
    MPIX_Stream qs = MPIX_STREAM_NULL;
    expect_error("a queue-backed stream", MPIX_Stream_create(info, &qs), MPI_ERR_UNSUPPORTED_OPERATION,
                 "asks for a queue-backed stream");
    MPI_Info_free(&info);
    expect_error("MPIX_Start_progress_thread", MPIX_Start_progress_thread(streams[0]), MPI_ERR_UNSUPPORTED_OPERATION,
                 "not available to a program built for the MPI standard ABI");

    for (int i = 0; i < 2; i++)
        CHECK("MPIX_Stream_free", MPIX_Stream_free(&streams[i]) == MPI_SUCCESS && streams[i] == MPIX_STREAM_NULL);
    int total = -1;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", total == 0 ? "No Errors" : "errors");
    MPI_Finalize();
    return total != 0;
}

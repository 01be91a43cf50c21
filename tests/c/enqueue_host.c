/* Enqueue on host queues (type=mpixstream_host_queue): ordering with the queue's own work (work
 * queued before a send runs before it, work queued after a receive sees the data, work queued after a
 * send runs after it completed), many operations in order (past the engine's ring of 4096),
 * Isend/Irecv_enqueue with Wait/Waitall_enqueue overlapping (a rendezvous exchange that deadlocks if
 * they were serialised), every collective's result, derived datatypes, the _c forms, a dup of the
 * stream communicator, and the paths of the driver claim: blocking operations run at once on the
 * enqueuing thread (a ping-pong, every value checked), one whose peer is late left to the worker
 * (the enqueue call returns at once, the worker completes it and what follows without a
 * synchronisation, a callback after it sees the data), synchronisation taking over from the worker. */
#include "mpixtest.h"
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int rank, size;

static MPIX_Stream host_stream(void) {
    MPI_Info info;
    MPIX_Stream s = MPIX_STREAM_NULL;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    OK(MPIX_Stream_create(info, &s));
    MPI_Info_free(&info);
    return s;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Host-queue callbacks. */
struct fill { int *p; int n; int base; int delay_us; };
static void fill_cb(void *a) {
    struct fill *f = a;
    if (f->delay_us) usleep(f->delay_us);
    for (int i = 0; i < f->n; i++) f->p[i] = f->base + i;
}
struct check { const int *p; int n; int base; int bad; };
static void check_cb(void *a) {
    struct check *c = a;
    c->bad = 0;
    for (int i = 0; i < c->n; i++) c->bad += c->p[i] != c->base + i;
}
struct stamp { double t; int delay_us; };
static void stamp_cb(void *a) {
    struct stamp *s = a;
    s->t = now();
    if (s->delay_us) usleep(s->delay_us);
}

static void ordering(MPIX_Stream s, MPI_Comm c) {
    int partner = rank ^ 1;
    if (partner >= size) return;
    enum { BIG = 1 << 18 };
    int *big = malloc(BIG * sizeof(int));
    int small = 0;
    if (rank % 2 == 0) {
        /* Filled by the queue 50 ms late: the sends must wait for it; the fills after the sends must
         * wait for them (the receiver must never see 7xxx). */
        struct fill f1 = {&small, 1, 42, 50000}, f2 = {big, BIG, 1000, 0};
        struct fill g1 = {&small, 1, 7000, 0}, g2 = {big, BIG, 7000, 0};
        OK(MPIX_Host_queue_launch(s, fill_cb, &f1));
        OK(MPIX_Host_queue_launch(s, fill_cb, &f2));
        OK(MPIX_Send_enqueue(&small, 1, MPI_INT, partner, 1, c));
        OK(MPIX_Send_enqueue(big, BIG, MPI_INT, partner, 2, c));
        OK(MPIX_Host_queue_launch(s, fill_cb, &g1));
        OK(MPIX_Host_queue_launch(s, fill_cb, &g2));
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(small == 7000 && big[BIG - 1] == 7000 + BIG - 1, "queue order after send");
    } else {
        MPI_Status st1, st2;
        struct check k1 = {&small, 1, 42, -1}, k2 = {big, BIG, 1000, -1};
        OK(MPIX_Recv_enqueue(&small, 1, MPI_INT, partner, 1, c, &st1));
        OK(MPIX_Host_queue_launch(s, check_cb, &k1));
        OK(MPIX_Recv_enqueue(big, BIG, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st2));
        OK(MPIX_Host_queue_launch(s, check_cb, &k2));
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(k1.bad == 0, "callback after Recv_enqueue saw %d (expected 42)", small);
        CHECK(k2.bad == 0, "callback after large Recv_enqueue saw %d wrong", k2.bad);
        CHECK(st1.MPI_SOURCE == partner && st1.MPI_TAG == 1, "status %d/%d", st1.MPI_SOURCE, st1.MPI_TAG);
        MPI_Count n = -1;
        MPI_Get_count_c(&st2, MPI_INT, &n);
        CHECK(st2.MPI_SOURCE == partner && st2.MPI_TAG == 2 && n == BIG, "status %d/%d/%lld",
              st2.MPI_SOURCE, st2.MPI_TAG, (long long)n);
    }
    free(big);
}

/* More operations than the engine's ring holds, same tag: MPI order must hold. */
static void many(MPIX_Stream s, MPI_Comm c) {
    int partner = rank ^ 1;
    if (partner >= size) return;
    enum { N = 5000 };
    int *v = malloc(N * sizeof(int));
    if (rank % 2 == 0) {
        for (int i = 0; i < N; i++) v[i] = i * 3;
        for (int i = 0; i < N; i++) OK(MPIX_Send_enqueue(&v[i], 1, MPI_INT, partner, 5, c));
    } else {
        for (int i = 0; i < N; i++) v[i] = -1;
        for (int i = 0; i < N; i++) OK(MPIX_Recv_enqueue(&v[i], 1, MPI_INT, partner, 5, c, MPI_STATUS_IGNORE));
    }
    OK(MPIX_Host_queue_synchronize(s));
    if (rank % 2) {
        int bad = 0;
        for (int i = 0; i < N; i++) bad += v[i] != i * 3;
        CHECK(bad == 0, "%d of %d messages out of order or missing", bad, N);
    }
    free(v);
}

/* Blocking operations on an empty queue run at once on the enqueuing thread; one that cannot
 * complete in time stays at the head of the queue for the worker. */
static void claim_paths(MPIX_Stream s, MPI_Comm c) {
    int partner = rank ^ 1;
    if (partner >= size) return;
    /* A ping-pong with nothing else queued: every round trip's value arrives, in order. */
    enum { N = 2000 };
    int *got = malloc(N * sizeof(int)), *sent = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        sent[i] = i * 7 + rank;
        got[i] = -1;
        if (rank % 2 == 0) {
            OK(MPIX_Send_enqueue(&sent[i], 1, MPI_INT, partner, 20, c));
            OK(MPIX_Recv_enqueue(&got[i], 1, MPI_INT, partner, 20, c, MPI_STATUS_IGNORE));
        } else {
            OK(MPIX_Recv_enqueue(&got[i], 1, MPI_INT, partner, 20, c, MPI_STATUS_IGNORE));
            OK(MPIX_Send_enqueue(&sent[i], 1, MPI_INT, partner, 20, c));
        }
    }
    OK(MPIX_Host_queue_synchronize(s));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += got[i] != i * 7 + partner;
    CHECK(bad == 0, "ping-pong: %d of %d values wrong", bad, N);
    free(got);
    free(sent);

    /* The peer is 200 ms late: the receive cannot complete at once; the call must return at once
     * anyway, and the worker completes it and the reply after it with no synchronisation (the
     * partner's plain MPI_Recv of "done" on MPI_COMM_WORLD needs the reply first). */
    int x = -1, reply = 0, done = 0;
    struct check k = {&x, 1, 4242, -1};
    if (rank % 2 == 0) {
        double t0 = now();
        OK(MPIX_Recv_enqueue(&x, 1, MPI_INT, partner, 21, c, MPI_STATUS_IGNORE));
        double dt = now() - t0;
        CHECK(dt < 0.1, "Recv_enqueue with a late peer took %.3f s (must not wait for the peer)", dt);
        OK(MPIX_Host_queue_launch(s, check_cb, &k));
        reply = 99;
        OK(MPIX_Send_enqueue(&reply, 1, MPI_INT, partner, 22, c));
        OK(MPI_Recv(&done, 1, MPI_INT, partner, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(done == 1, "done %d", done);
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(k.bad == 0, "callback after a late Recv_enqueue saw %d (expected 4242)", x);
    } else {
        usleep(200000);
        x = 4242;
        OK(MPIX_Send_enqueue(&x, 1, MPI_INT, partner, 21, c));
        OK(MPIX_Recv_enqueue(&reply, 1, MPI_INT, partner, 22, c, MPI_STATUS_IGNORE));
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(reply == 99, "reply %d", reply);
        done = 1;
        OK(MPI_Send(&done, 1, MPI_INT, partner, 23, MPI_COMM_WORLD));
    }
}

static void nonblocking(MPIX_Stream s, MPI_Comm c) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { BIG = 1 << 18 };
    /* Every rank sends a rendezvous-size message before receiving: only overlap completes this. */
    int *out = malloc(BIG * sizeof(int)), *in = malloc(BIG * sizeof(int));
    for (int i = 0; i < BIG; i++) out[i] = rank * 7 + i, in[i] = -1;
    MPI_Request r[2];
    MPI_Status st[2];
    OK(MPIX_Isend_enqueue(out, BIG, MPI_INT, right, 10, c, &r[0]));
    OK(MPIX_Irecv_enqueue(in, BIG, MPI_INT, left, 10, c, &r[1]));
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL, "requests");
    struct check k = {in, BIG, left * 7, -1};
    OK(MPIX_Waitall_enqueue(2, r, st));
    OK(MPIX_Host_queue_launch(s, check_cb, &k));
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Waitall_enqueue must null the requests");
    OK(MPIX_Host_queue_synchronize(s));
    CHECK(k.bad == 0, "Isend/Irecv exchange: %d wrong", k.bad);
    MPI_Count n = -1;
    MPI_Get_count_c(&st[1], MPI_INT, &n);
    CHECK(st[1].MPI_SOURCE == left && st[1].MPI_TAG == 10 && n == BIG, "waitall status %d/%d/%lld",
          st[1].MPI_SOURCE, st[1].MPI_TAG, (long long)n);

    /* Individual waits, in the other order, 8 messages each way on distinct tags, _c forms. */
    enum { M = 8 };
    int so[M], si[M];
    MPI_Request rs[M], rr[M];
    for (int i = 0; i < M; i++) {
        so[i] = rank * 100 + i;
        si[i] = -1;
        OK(MPIX_Irecv_enqueue_c(&si[i], 1, MPI_INT, left, 20 + i, c, &rr[i]));
    }
    for (int i = M - 1; i >= 0; i--) OK(MPIX_Isend_enqueue_c(&so[i], 1, MPI_INT, right, 20 + i, c, &rs[i]));
    MPI_Status one[M];
    for (int i = 0; i < M; i++) {
        OK(MPIX_Wait_enqueue(&rr[i], &one[i]));
        CHECK(rr[i] == MPI_REQUEST_NULL, "Wait_enqueue must null the request");
    }
    OK(MPIX_Waitall_enqueue(M, rs, MPI_STATUSES_IGNORE));
    OK(MPIX_Host_queue_synchronize(s));
    for (int i = 0; i < M; i++)
        CHECK(one[i].MPI_TAG == 20 + i && one[i].MPI_SOURCE == left, "Wait_enqueue status %d: %d/%d", i,
              one[i].MPI_SOURCE, one[i].MPI_TAG);
    for (int i = 0; i < M; i++) CHECK(si[i] == left * 100 + i, "tagged message %d: %d", i, si[i]);
    /* A null request is fine. */
    MPI_Request nul = MPI_REQUEST_NULL;
    OK(MPIX_Wait_enqueue(&nul, MPI_STATUS_IGNORE));
    free(out);
    free(in);
}

static void collectives(MPIX_Stream s, MPI_Comm c) {
    int v = rank + 1, sum = -1;
    OK(MPIX_Allreduce_enqueue(&v, &sum, 1, MPI_INT, MPI_SUM, c));
    double d[3] = {rank, -rank, 0.5 * rank};
    OK(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 3, MPI_DOUBLE, MPI_MAX, c));
    long long big[2] = {rank, 1}, bigsum[2] = {0, 0};
    OK(MPIX_Allreduce_enqueue_c(big, bigsum, 2, MPI_LONG_LONG, MPI_SUM, c));
    int b[10];
    int root = size - 1;
    for (int i = 0; i < 10; i++) b[i] = rank == root ? 500 + i : -1;
    OK(MPIX_Bcast_enqueue(b, 10, MPI_INT, root, c));
    int red = -1, rroot = 1 % size;
    OK(MPIX_Reduce_enqueue(&v, &red, 1, MPI_INT, MPI_PROD, rroot, c));
    int ag_in[2] = {rank * 10, rank * 10 + 1}, *ag = malloc(2 * size * sizeof(int));
    OK(MPIX_Allgather_enqueue(ag_in, 2, MPI_INT, ag, 2, MPI_INT, c));
    int *a2a_s = malloc(size * sizeof(int)), *a2a_r = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) a2a_s[i] = rank * 100 + i, a2a_r[i] = -1;
    OK(MPIX_Alltoall_enqueue(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, c));
    /* _c forms of the collectives beyond native. */
    int bc = rank == 0 ? 99 : 0, ag2[64], red2 = -1;
    OK(MPIX_Bcast_enqueue_c(&bc, 1, MPI_INT, 0, c));
    OK(MPIX_Allgather_enqueue_c(&rank, 1, MPI_INT, ag2, 1, MPI_INT, c));
    OK(MPIX_Reduce_enqueue_c(&v, &red2, 1, MPI_INT, MPI_SUM, 0, c));
    OK(MPIX_Host_queue_synchronize(s));

    CHECK(sum == size * (size + 1) / 2, "allreduce %d", sum);
    CHECK(d[0] == size - 1 && d[1] == 0 && d[2] == 0.5 * (size - 1), "allreduce in place %g %g %g", d[0], d[1], d[2]);
    CHECK(bigsum[0] == (long long)size * (size - 1) / 2 && bigsum[1] == size, "allreduce_c %lld %lld", bigsum[0], bigsum[1]);
    for (int i = 0; i < 10; i++) CHECK(b[i] == 500 + i, "bcast[%d] %d", i, b[i]);
    if (rank == rroot) {
        int f = 1;
        for (int i = 1; i <= size; i++) f *= i;
        CHECK(red == f, "reduce %d (expected %d)", red, f);
    }
    for (int i = 0; i < size; i++) CHECK(ag[2 * i] == i * 10 && ag[2 * i + 1] == i * 10 + 1, "allgather[%d]", i);
    for (int i = 0; i < size; i++) CHECK(a2a_r[i] == i * 100 + rank, "alltoall[%d] %d", i, a2a_r[i]);
    CHECK(bc == 99, "bcast_c %d", bc);
    for (int i = 0; i < size; i++) CHECK(ag2[i] == i, "allgather_c[%d] %d", i, ag2[i]);
    if (rank == 0) CHECK(red2 == size * (size + 1) / 2, "reduce_c %d", red2);
    free(ag);
    free(a2a_s);
    free(a2a_r);

    /* Barrier: rank 0's queue holds it back 200 ms; nobody's work after the barrier runs sooner. */
    struct stamp before = {0, rank == 0 ? 200000 : 0}, after = {0, 0};
    OK(MPIX_Host_queue_launch(s, stamp_cb, &before));
    OK(MPIX_Barrier_enqueue(c));
    OK(MPIX_Host_queue_launch(s, stamp_cb, &after));
    OK(MPIX_Host_queue_synchronize(s));
    double t0 = before.t + 0.2;
    MPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    CHECK(after.t >= t0 - 1e-3, "work after the barrier ran %.3f s before rank 0 reached it", t0 - after.t);
}

/* Derived datatypes: a strided vector sent, received contiguous; a vector broadcast. */
static void datatypes(MPIX_Stream s, MPI_Comm c) {
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int strided[12], packed[4];
    for (int i = 0; i < 12; i++) strided[i] = rank == 0 ? i : -1;
    int partner = rank ^ 1;
    if (partner < size) {
        if (rank % 2 == 0) OK(MPIX_Send_enqueue(strided, 1, vec, partner, 30, c));
        else OK(MPIX_Recv_enqueue(packed, 4, MPI_INT, partner, 30, c, MPI_STATUS_IGNORE));
    }
    OK(MPIX_Bcast_enqueue(strided, 1, vec, 0, c));
    OK(MPIX_Host_queue_synchronize(s));
    MPI_Type_free(&vec);
    if (partner < size && rank % 2 && rank == 1)
        for (int i = 0; i < 4; i++) CHECK(packed[i] == 3 * i, "vector recv[%d] %d", i, packed[i]);
    for (int i = 0; i < 12; i++) CHECK(strided[i] == (i % 3 == 0 ? i : (rank == 0 ? i : -1)), "vector bcast[%d] %d", i, strided[i]);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);

    MPIX_Stream s = host_stream();
    MPI_Comm c = MPI_COMM_NULL, dup = MPI_COMM_NULL;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    ordering(s, c);
    many(s, c);
    claim_paths(s, c);
    nonblocking(s, c);
    collectives(s, c);
    datatypes(s, c);

    /* A dup of the stream communicator carries the same stream, so it enqueues on the same queue.
     * MPIXTEST_STREAM_DUP=0 leaves this out: on Intel MPI's thread-split endpoints at 4 ranks, a
     * collective on a dup that stays on its parent's endpoint can hang in Intel MPI itself
     * (tests/impi/dup_nbc.c, docs/architecture.md section 8). */
    int x = rank, y = -1;
    if (env_int("MPIXTEST_STREAM_DUP", 1)) {
        OK(MPI_Comm_dup(c, &dup));
        OK(MPIX_Allreduce_enqueue(&x, &y, 1, MPI_INT, MPI_MAX, dup));
        OK(MPIX_Host_queue_synchronize(s));
        CHECK(y == size - 1, "allreduce on dup %d", y);
        OK(MPI_Comm_free(&dup));
    }

    /* The stream communicator is an ordinary communicator again once the queue is synchronised. */
    int z = -1;
    OK(MPI_Allreduce(&x, &z, 1, MPI_INT, MPI_MIN, c));
    CHECK(z == 0, "plain allreduce on the stream comm %d", z);

    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&s));
    return mpixtest_finish();
}

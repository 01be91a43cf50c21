/* Communicators threads meet on, and others, for the guided policy (tests/scripts/guided_policy.sh).
 * 2 ranks or more, MPI_THREAD_MULTIPLE. Made in this order on every rank:
 *   a = MPI_Comm_dup(MPI_COMM_WORLD)      world/dup:0    thread 0's
 *   b = MPI_Comm_dup(MPI_COMM_WORLD)      world/dup:1    thread 1's
 *   c = MPI_Comm_split(MPI_COMM_WORLD)    world/split:2  the main thread's alone
 *   d = MPI_Comm_dup(c)                   world/split:2/dup:0  the main thread's alone
 * The main thread ping-pongs on c and d between ranks 0 and 1 (nobody else is inside MPI then); then
 * threads 0 and 1 run ROUNDS rounds in which rank 1's two threads wait in MPI_Recv on a and b at the
 * same time until rank 0's threads send, HOLD_MS milliseconds after the round began: on one shared
 * endpoint they are inside it at once, so the profile selects a and b, and only them.
 * After the threads: an MPI_Comm_idup of MPI_COMM_WORLD (world/idup:3: numbered, never given an identity
 * of its own, so never selected nor "unseen"). GUIDED_EXTRA=1: one more MPI_Comm_split of MPI_COMM_WORLD
 * at the end (world/split:4), a constructor a profile made without it never saw. Prints " No Errors" on
 * rank 0. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 6, HOLD_MS = 20 };
static int rank;
static MPI_Comm comms[2];
static pthread_barrier_t round_start;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *body(void *arg) {
    int t = (int)(long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&round_start);
        int v = r * 2 + t;
        if (rank == 0) {
            sleep_ms(HOLD_MS);
            MPI_Send(&v, 1, MPI_INT, 1, t, comms[t]);
        } else if (rank == 1) {
            int got = -1;
            MPI_Recv(&got, 1, MPI_INT, 0, t, comms[t], MPI_STATUS_IGNORE);
            if (got != v) {
                fprintf(stderr, "thread %d round %d: got %d, expected %d\n", t, r, got, v);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    return NULL;
}

static void ping_pong(MPI_Comm comm, int n) {
    for (int i = 0; i < n; i++) {
        int v = i;
        if (rank == 0) {
            MPI_Send(&v, 1, MPI_INT, 1, 0, comm);
            MPI_Recv(&v, 1, MPI_INT, 1, 0, comm, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
            MPI_Send(&v, 1, MPI_INT, 0, 0, comm);
        }
    }
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "guided_select: 2 ranks or more, MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm c, d;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c);
    MPI_Comm_dup(c, &d);
    ping_pong(c, 20);
    ping_pong(d, 20);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_barrier_init(&round_start, NULL, 2);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, body, (void *)(long)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&round_start);
    MPI_Comm f;
    MPI_Request req;
    MPI_Comm_idup(MPI_COMM_WORLD, &f, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Barrier(f);
    MPI_Comm_free(&f);
    const char *extra = getenv("GUIDED_EXTRA");
    if (extra && atoi(extra) == 1) {
        MPI_Comm e;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &e);
        MPI_Barrier(e);
        MPI_Comm_free(&e);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&d);
    MPI_Comm_free(&c);
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[0]);
    if (rank == 0) printf(" No Errors\n");
    MPI_Finalize();
    return 0;
}

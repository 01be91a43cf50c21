/* A known overlap pattern for the contention profile (tests/scripts/profile_pattern.sh): 2 ranks, 2
 * threads each, MPI_THREAD_MULTIPLE. In each of ROUNDS rounds, thread t of rank 1 blocks in MPI_Recv on
 * its communicator until thread t of rank 0 sends, HOLD_MS milliseconds after the round began: each
 * receiving thread is inside MPI for about HOLD_MS per round.
 *   PROFILE_MODE=once   both threads of rank 1 wait at the same time: two threads inside MPI at once
 *                       for about HOLD_MS per round (on one endpoint where their communicators share one)
 *   PROFILE_MODE=turns  thread 1 receives only after thread 0's receive returned (a pthread handshake):
 *                       never two threads inside MPI at once, whatever the endpoints
 *   PROFILE_COMMS=dup      each thread on its own MPI_Comm_dup of MPI_COMM_WORLD (the paper's shape)
 *   PROFILE_COMMS=world    both threads on MPI_COMM_WORLD (tag = thread): one communicator, so explicit
 *                          endpoints cannot separate them
 *   PROFILE_COMMS=collide  thread 0's dup, then a window on MPI_COMM_WORLD (MPICH commits an internal dup
 *                          for it), then thread 1's dup: with MPIR_CVAR_CH4_NUM_VCIS=2 MPICH's round robin
 *                          puts both dups on VCI 1 (seq 1 and 3), one apart on its count
 * Prints "PATTERN mode=.. comms=.. rounds=.. hold_ms=.." and " No Errors" on rank 0. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, rounds = 8, hold_ms = 25, turns;
static MPI_Comm comms[2];
static pthread_barrier_t round_start;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn; /* in turns: which thread of rank 1 may receive now */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *body(void *arg) {
    int t = (int)(long)arg;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&round_start);
        int v = r * 2 + t;
        if (rank == 0) {
            /* In turns, thread 1's message leaves a hold after thread 0's. */
            sleep_ms(hold_ms * (turns ? t + 1 : 1));
            MPI_Send(&v, 1, MPI_INT, 1, t, comms[t]);
        } else {
            if (turns) {
                pthread_mutex_lock(&mu);
                while (turn != t) pthread_cond_wait(&cv, &mu);
                pthread_mutex_unlock(&mu);
            }
            int got = -1;
            MPI_Recv(&got, 1, MPI_INT, 0, t, comms[t], MPI_STATUS_IGNORE);
            if (got != v) {
                fprintf(stderr, "rank 1 thread %d round %d: got %d, expected %d\n", t, r, got, v);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            if (turns) {
                pthread_mutex_lock(&mu);
                turn = 1 - t;
                pthread_cond_broadcast(&cv);
                pthread_mutex_unlock(&mu);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = getenv("PROFILE_MODE") ? getenv("PROFILE_MODE") : "once";
    const char *kind = getenv("PROFILE_COMMS") ? getenv("PROFILE_COMMS") : "dup";
    if (getenv("PROFILE_ROUNDS")) rounds = atoi(getenv("PROFILE_ROUNDS"));
    if (getenv("PROFILE_HOLD_MS")) hold_ms = atoi(getenv("PROFILE_HOLD_MS"));
    turns = strcmp(mode, "turns") == 0;
    if (size != 2 || provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "profile_pattern: 2 ranks and MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Win win = MPI_WIN_NULL;
    int cell = 0;
    if (strcmp(kind, "world") == 0) {
        comms[0] = comms[1] = MPI_COMM_WORLD;
    } else {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
        if (strcmp(kind, "collide") == 0)
            MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    }
    pthread_barrier_init(&round_start, NULL, 2);
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, body, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&round_start);
    if (win != MPI_WIN_NULL) MPI_Win_free(&win);
    if (comms[0] != MPI_COMM_WORLD) {
        MPI_Comm_free(&comms[0]);
        MPI_Comm_free(&comms[1]);
    }
    if (rank == 0) printf("PATTERN mode=%s comms=%s rounds=%d hold_ms=%d\n", mode, kind, rounds, hold_ms);
    MPI_Finalize();
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

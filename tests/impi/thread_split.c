/* Intel MPI's thread-split endpoints (tests/impi/thread_split_probe.sh): T threads, each on its own
 * communicator. Thread t sends (t+1)*100 4-byte messages, tag t, from rank 0 to rank 1. The
 * communicators, by MODE:
 *   setinfo  a duplicate of MPI_COMM_WORLD whose info sets thread_id=t with MPI_Comm_set_info;
 *   dupinfo  the same with MPI_Comm_dup_with_info;
 *   plain    a plain duplicate (the endpoint is the library's explicit policy's choice);
 *   mpix     a stream communicator on a stream of its own (MPIX_Stream_create, MPIX_Stream_comm_create:
 *            the library's split backend; built with -DWITH_MPIX and linked to libmpixstream.so).
 * Rank 0 prints what MPI_Comm_get_info returns for thread_id on each communicator. */
#include <mpi.h>
#ifdef WITH_MPIX
#include "mpix_stream.h"
#else
typedef int MPIX_Stream;
#define MPIX_STREAM_NULL 0
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 3
static MPI_Comm comms[T];
static MPIX_Stream streams[T];
static int rank, errors;

static void *body(void *arg) {
    int t = (int)(long)arg, n = (t + 1) * 100, x = -1;
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(&i, 1, MPI_INT, 1, t, comms[t]);
        } else if (rank == 1) {
            MPI_Recv(&x, 1, MPI_INT, 0, t, comms[t], MPI_STATUS_IGNORE);
            if (x != i) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = getenv("MODE") ? getenv("MODE") : "setinfo";
    for (int t = 0; t < T; t++) {
        MPI_Info info;
        char v[16], got[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_create(&info);
        snprintf(v, sizeof v, "%d", t);
        MPI_Info_set(info, "thread_id", v);
        streams[t] = MPIX_STREAM_NULL;
        if (strcmp(mode, "dupinfo") == 0) {
            MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comms[t]);
        } else if (strcmp(mode, "plain") == 0) {
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
#ifdef WITH_MPIX
        } else if (strcmp(mode, "mpix") == 0) {
            if (MPIX_Stream_create(MPI_INFO_NULL, &streams[t]) != MPI_SUCCESS ||
                MPIX_Stream_comm_create(MPI_COMM_WORLD, streams[t], &comms[t]) != MPI_SUCCESS) {
                fprintf(stderr, "rank %d: no stream communicator %d\n", rank, t);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
#endif
        } else {
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
            MPI_Comm_set_info(comms[t], info);
        }
        MPI_Info_free(&info);
        MPI_Comm_get_info(comms[t], &info);
        MPI_Info_get(info, "thread_id", MPI_MAX_INFO_VAL, got, &flag);
        MPI_Info_free(&info);
        if (rank == 0) printf("comm %d: thread_id %s\n", t, flag ? got : "(none)");
    }
    pthread_t th[T];
    for (long t = 0; t < T; t++) pthread_create(&th[t], NULL, body, (void *)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++) {
        MPI_Comm_free(&comms[t]);
#ifdef WITH_MPIX
        if (streams[t] != MPIX_STREAM_NULL) MPIX_Stream_free(&streams[t]);
#endif
    }
    if (rank == 1) printf("rank 1: %d wrong values\n", errors);
    if (rank == 0) printf("provided %d\n", provided);
    MPI_Finalize();
    return errors != 0;
}

/* Traffic between hosts, one communicator per thread, for the proof on the wire (tests/scripts/hosts_wire.sh).
 * An unmodified program (MPI_Comm_dup per thread, no MPIX call): under MPIXSTREAM_POLICY=explicit each
 * dup is a stream communicator, under implicit it is not. The first half of the ranks sends to the
 * second half (rank r to rank r + size/2: another host when the job fills hosts in blocks): thread i
 * sends WIRE_MESSAGES*(i+1) messages of WIRE_BYTES bytes on its own communicator. Then the job holds,
 * every connection still open, until the file WIRE_DIR/go exists (rank 0 creates WIRE_DIR/ready when
 * all traffic has been received), so that the test can read the per-connection counters of each host.
 * Each rank writes WIRE_DIR/rank-R: its process id and host, to tell its connections from the others'. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T 3
static MPI_Comm comms[T];
static int rank, size, messages, bytes;

static void *run(void *arg) {
    int i = (int)(long)arg, n = messages * (i + 1), half = size / 2;
    char *buf = malloc(bytes);
    memset(buf, i + 1, bytes);
    for (int k = 0; k < n; k++) {
        if (rank < half) MPI_Send(buf, bytes, MPI_BYTE, rank + half, k, comms[i]);
        else MPI_Recv(buf, bytes, MPI_BYTE, rank - half, k, comms[i], MPI_STATUS_IGNORE);
    }
    free(buf);
    return NULL;
}

static void wait_for(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    while (access(path, F_OK) != 0) usleep(10000);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = getenv("WIRE_DIR");
    messages = getenv("WIRE_MESSAGES") ? atoi(getenv("WIRE_MESSAGES")) : 100;
    bytes = getenv("WIRE_BYTES") ? atoi(getenv("WIRE_BYTES")) : 1024;
    if (provided < MPI_THREAD_MULTIPLE || size % 2 || !dir) {
        if (rank == 0) fprintf(stderr, "wire_streams: needs MPI_THREAD_MULTIPLE, an even number of ranks and WIRE_DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096], host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d %s\n", (int)getpid(), host);
        fclose(f);
    }
    for (int i = 0; i < T; i++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
    pthread_t th[T];
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, run, (void *)(long)i);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/ready", dir);
        f = fopen(path, "w");
        if (f) fclose(f);
    }
    wait_for(dir, "go");
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < T; i++) MPI_Comm_free(&comms[i]);
    if (rank == 0) printf("wire_streams: %d ranks, %d threads, %d..%d messages of %d bytes per thread pair\n", size, T,
                          messages, messages * T, bytes);
    MPI_Finalize();
    return 0;
}

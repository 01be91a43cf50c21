/* An unmodified MPI program of the kind the explicit policy is for: MPI_THREAD_MULTIPLE, one
 * communicator per thread (MPI_Comm_dup of MPI_COMM_WORLD, made by the main thread in order), each used
 * by its thread only. Nothing in it knows about streams.
 *
 * Ranks pair up (0-1, 2-3, ...). Thread i of the even rank sends 50*(i+1) 8-byte messages (Isend,
 * windows of 16, Waitall) and one 256*(i+1)-byte message (Send; the peer takes it with Irecv+Wait) to
 * thread i of the odd rank, which answers with one 8-byte checksum (Send/Recv). Both sides check what
 * they got; every rank prints one RESULT line per thread, identical under any endpoint policy.
 *
 * Exact traffic per thread i and direction (tests/scripts/policy_report.sh compares it with the UCX
 * probe and the report): even->odd 50*(i+1)+1 messages, 400*(i+1)+256*(i+1) bytes; odd->even 1, 8 B.
 * Threads: PERCOMM_THREADS (default 3). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 16
static int rank, size, nthreads, errs;
static MPI_Comm comms[MAXT];
static char results[MAXT][160];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(int t, const char *what, long got, long want) {
    fprintf(stderr, "[rank %d thread %d] %s: got %ld, expected %ld\n", rank, t, what, got, want);
    pthread_mutex_lock(&lock);
    errs++;
    pthread_mutex_unlock(&lock);
}

static void *run(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm c = comms[t];
    int peer = rank ^ 1, n = 50 * (t + 1), big = 256 * (t + 1);
    long sum = 0, answer = 0;
    enum { W = 16 };
    long buf[W];
    MPI_Request req[W];
    char *blob = malloc(big);
    if (rank % 2 == 0) {
        for (int k = 0; k < n; k += W) {
            int m = n - k < W ? n - k : W;
            for (int j = 0; j < m; j++) {
                buf[j] = (long)(k + j) * (t + 1) + rank;
                sum += buf[j];
                MPI_Isend(&buf[j], 1, MPI_LONG, peer, k + j, c, &req[j]);
            }
            MPI_Waitall(m, req, MPI_STATUSES_IGNORE);
        }
        for (int j = 0; j < big; j++) blob[j] = (char)(j * 7 + t);
        MPI_Send(blob, big, MPI_BYTE, peer, 1000000, c);
        MPI_Recv(&answer, 1, MPI_LONG, peer, 1000001, c, MPI_STATUS_IGNORE);
        if (answer != sum + big) fail(t, "checksum from the peer", answer, sum + big);
    } else {
        for (int k = 0; k < n; k += W) {
            int m = n - k < W ? n - k : W;
            for (int j = 0; j < m; j++) MPI_Irecv(&buf[j], 1, MPI_LONG, peer, k + j, c, &req[j]);
            MPI_Waitall(m, req, MPI_STATUSES_IGNORE);
            for (int j = 0; j < m; j++) {
                long want = (long)(k + j) * (t + 1) + peer;
                if (buf[j] != want) fail(t, "message value", buf[j], want);
                sum += buf[j];
            }
        }
        /* Not MPI_Probe/MPI_Mprobe: on native MPICH 5.0.2 they hang on a stream communicator (see
         * docs/policy.md), so the explicit policy would turn this program into one that hangs. */
        MPI_Request r;
        MPI_Status st;
        int count = -1;
        MPI_Irecv(blob, big, MPI_BYTE, peer, 1000000, c, &r);
        MPI_Wait(&r, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (count != big) fail(t, "received size", count, big);
        for (int j = 0; j < big; j++)
            if (blob[j] != (char)(j * 7 + t)) { fail(t, "large message byte", blob[j], (char)(j * 7 + t)); break; }
        answer = sum + big;
        MPI_Send(&answer, 1, MPI_LONG, peer, 1000001, c);
    }
    free(blob);
    snprintf(results[t], sizeof results[t], "RESULT pair %d thread %d side %s messages %d sum %ld big %d",
             rank / 2, t, rank % 2 ? "recv" : "send", n, sum, big);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("PERCOMM_THREADS");
    nthreads = e && *e ? atoi(e) : 3;
    if (nthreads < 1 || nthreads > MAXT || size % 2 || provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "percomm: needs MPI_THREAD_MULTIPLE, an even number of ranks, 1..%d threads\n", MAXT);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int t = 0; t < nthreads; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[MAXT];
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, run, (void *)(long)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < nthreads; t++) MPI_Comm_free(&comms[t]);
    for (int t = 0; t < nthreads; t++) printf("%s\n", results[t]);
    fflush(stdout);
    int total = 0;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}

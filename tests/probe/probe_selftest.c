/*
 * Traffic generator for tests/probe/selftest.sh, using plain MPICH only.
 *
 *   probe_selftest streams K   3 native streams + 3 stream comms; rank 0 sends
 *                              K*(i+1) 8-byte messages on comm i to rank 1
 *                              (needs MPICH >= 4.1; K=0 measures the baseline)
 *   probe_selftest threads K   same traffic, but MPI_THREAD_MULTIPLE and one
 *                              thread per stream comm (stresses the probe's
 *                              thread safety the way real stream users will)
 *   probe_selftest plain K     K 8-byte messages on MPI_COMM_WORLD, 0 -> 1
 *   probe_selftest calls       one of each: eager send, 1 MiB send, ssend,
 *                              isend, probe+recv, mprobe+mrecv (on WORLD), to
 *                              learn which ucp_* call MPICH uses for each
 *
 * With UCXPROBE_VERBOSE=1 it prints markers on stderr so that the probe's
 * "worker created" lines can be placed relative to MPI calls.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTREAMS 3
static int rank, verbose;

static void mark(const char *what)
{
    if (verbose)
        fprintf(stderr, "selftest[rank %d]: %s\n", rank, what);
}

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "selftest[rank %d]: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void pingpong_one_way(MPI_Comm comm, int k)
{
    char buf[8] = {0};
    for (int j = 0; j < k; j++) {
        if (rank == 0)
            check(MPI_Send(buf, 8, MPI_BYTE, 1, j, comm), "MPI_Send");
        else if (rank == 1)
            check(MPI_Recv(buf, 8, MPI_BYTE, 0, j, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    }
}

struct job { MPI_Comm comm; int k; };

static void *thread_main(void *arg)
{
    struct job *j = arg;
    pingpong_one_way(j->comm, j->k);
    return NULL;
}

static void streams(int k, int threaded)
{
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40100000
    MPIX_Stream s[NSTREAMS];
    MPI_Comm c[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++)
        check(MPIX_Stream_create(MPI_INFO_NULL, &s[i]), "MPIX_Stream_create");
    mark("streams created");
    for (int i = 0; i < NSTREAMS; i++)
        check(MPIX_Stream_comm_create(MPI_COMM_WORLD, s[i], &c[i]), "MPIX_Stream_comm_create");
    mark("stream comms created");
    if (threaded) {
        pthread_t t[NSTREAMS];
        struct job j[NSTREAMS];
        for (int i = 0; i < NSTREAMS; i++) {
            j[i] = (struct job){c[i], k * (i + 1)};
            pthread_create(&t[i], NULL, thread_main, &j[i]);
        }
        for (int i = 0; i < NSTREAMS; i++)
            pthread_join(t[i], NULL);
        mark("threads done");
    } else {
        for (int i = 0; i < NSTREAMS; i++) {
            pingpong_one_way(c[i], k * (i + 1));
            mark("comm done");
        }
    }
    for (int i = 0; i < NSTREAMS; i++)
        check(MPI_Comm_free(&c[i]), "MPI_Comm_free");
    for (int i = 0; i < NSTREAMS; i++)
        check(MPIX_Stream_free(&s[i]), "MPIX_Stream_free");
    mark("streams freed");
#else
    (void)k, (void)threaded, (void)thread_main;
    fprintf(stderr, "selftest: this MPICH has no MPIX streams\n");
    MPI_Abort(MPI_COMM_WORLD, 3);
#endif
}

static void calls(void)
{
    enum { BIG = 1 << 20 };
    char *big = calloc(BIG, 1), small[8] = {0};
    MPI_Request r;
    MPI_Message m;
    MPI_Status st;
    if (rank == 0) {
        MPI_Send(small, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);     /* eager */
        MPI_Send(big, BIG, MPI_BYTE, 1, 2, MPI_COMM_WORLD);     /* rendezvous */
        MPI_Ssend(small, 8, MPI_BYTE, 1, 3, MPI_COMM_WORLD);    /* synchronous */
        MPI_Isend(small, 8, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Send(small, 8, MPI_BYTE, 1, 5, MPI_COMM_WORLD);     /* for probe */
        MPI_Send(small, 8, MPI_BYTE, 1, 6, MPI_COMM_WORLD);     /* for mprobe */
    } else if (rank == 1) {
        MPI_Recv(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(big, BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(small, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* a recv posted with a larger buffer: recv_bytes must count 8, not 64 */
        char roomy[64];
        MPI_Irecv(roomy, 64, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Probe(0, 5, MPI_COMM_WORLD, &st);
        MPI_Recv(small, 8, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Mprobe(0, 6, MPI_COMM_WORLD, &m, &st);
        MPI_Mrecv(small, 8, MPI_BYTE, &m, MPI_STATUS_IGNORE);
    }
    free(big);
}

int main(int argc, char **argv)
{
    const char *v = getenv("UCXPROBE_VERBOSE");
    verbose = v && *v && *v != '0';
    if (argc < 2) {
        fprintf(stderr, "usage: %s streams K | threads K | plain K | calls\n", argv[0]);
        return 1;
    }
    int k = argc > 2 ? atoi(argv[2]) : 0;
    int threaded = !strcmp(argv[1], "threads"), provided;
    MPI_Init_thread(&argc, &argv, threaded ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    if (provided < (threaded ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE)) {
        fprintf(stderr, "selftest: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mark("after MPI_Init");
    if (!strcmp(argv[1], "streams") || threaded)
        streams(k, threaded);
    else if (!strcmp(argv[1], "plain"))
        pingpong_one_way(MPI_COMM_WORLD, k);
    else if (!strcmp(argv[1], "calls"))
        calls();
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mark("before MPI_Finalize");
    MPI_Finalize();
    return 0;
}

/* Host-queue enqueue overhead per operation against the same MPI operation called directly, in the
 * same run, on the same stream communicator (2 ranks; extra ranks idle).
 *   pingpong   8-byte round trip: MPI_Send+MPI_Recv  vs  MPIX_Send_enqueue+MPIX_Recv_enqueue
 *              (the enqueued round trips are queued back to back, one synchronisation at the end)
 *   stream     8-byte messages one way, back to back: MPI_Send / MPI_Recv  vs  the _enqueue forms
 *   allreduce  8-byte MPI_Allreduce  vs  MPIX_Allreduce_enqueue, back to back
 * Each repetition times N operations of each kind, direct then enqueued; reported: per-operation
 * median over the repetitions (us) and the ratio enqueued/direct of the medians.
 * Usage: enqueue_overhead [N] [REPS] */
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { PINGPONG, STREAM, ALLREDUCE, KINDS };
static const char *names[KINDS] = {"pingpong (round trip)", "stream (per message)", "allreduce"};

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 2000, reps = argc > 2 ? atoi(argv[2]) : 11;
    if (size < 2 || provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "needs 2 ranks and MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    MPIX_Stream s;
    MPI_Comm world2, c;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &world2);
    if (rank >= 2) goto done;
    if (MPIX_Stream_create(info, &s) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
    MPIX_Stream_comm_create(world2, s, &c);
    int peer = 1 - rank;
    double *t[KINDS][2];
    for (int k = 0; k < KINDS; k++)
        for (int m = 0; m < 2; m++) t[k][m] = malloc(reps * sizeof(double));
    long long a = rank, b = 0;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int m = 0; m < 2; m++) { /* 0 direct, 1 enqueued */
            double t0;
            /* ping-pong */
            usleep(3000); /* our threads idle asleep: 'direct' measures MPI alone */
            MPI_Barrier(world2);
            t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                if (rank == 0) {
                    if (m) { MPIX_Send_enqueue(&a, 1, MPI_LONG_LONG, peer, 0, c); MPIX_Recv_enqueue(&b, 1, MPI_LONG_LONG, peer, 0, c, MPI_STATUS_IGNORE); }
                    else { MPI_Send(&a, 1, MPI_LONG_LONG, peer, 0, c); MPI_Recv(&b, 1, MPI_LONG_LONG, peer, 0, c, MPI_STATUS_IGNORE); }
                } else {
                    if (m) { MPIX_Recv_enqueue(&b, 1, MPI_LONG_LONG, peer, 0, c, MPI_STATUS_IGNORE); MPIX_Send_enqueue(&a, 1, MPI_LONG_LONG, peer, 0, c); }
                    else { MPI_Recv(&b, 1, MPI_LONG_LONG, peer, 0, c, MPI_STATUS_IGNORE); MPI_Send(&a, 1, MPI_LONG_LONG, peer, 0, c); }
                }
            }
            if (m) MPIX_Host_queue_synchronize(s);
            if (r >= 0) t[PINGPONG][m][r] = (MPI_Wtime() - t0) / n * 1e6;
            /* one-way stream */
            usleep(3000); /* our threads idle asleep: 'direct' measures MPI alone */
            MPI_Barrier(world2);
            t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                if (rank == 0) { if (m) MPIX_Send_enqueue(&a, 1, MPI_LONG_LONG, peer, 1, c); else MPI_Send(&a, 1, MPI_LONG_LONG, peer, 1, c); }
                else { if (m) MPIX_Recv_enqueue(&b, 1, MPI_LONG_LONG, peer, 1, c, MPI_STATUS_IGNORE); else MPI_Recv(&b, 1, MPI_LONG_LONG, peer, 1, c, MPI_STATUS_IGNORE); }
            }
            if (m) MPIX_Host_queue_synchronize(s);
            MPI_Barrier(world2);
            if (r >= 0) t[STREAM][m][r] = (MPI_Wtime() - t0) / n * 1e6;
            /* allreduce */
            usleep(3000); /* our threads idle asleep: 'direct' measures MPI alone */
            MPI_Barrier(world2);
            t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                if (m) MPIX_Allreduce_enqueue(&a, &b, 1, MPI_LONG_LONG, MPI_SUM, c);
                else MPI_Allreduce(&a, &b, 1, MPI_LONG_LONG, MPI_SUM, c);
            }
            if (m) MPIX_Host_queue_synchronize(s);
            if (r >= 0) t[ALLREDUCE][m][r] = (MPI_Wtime() - t0) / n * 1e6;
        }
    }
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        printf("# %s | N=%d ops x %d repetitions, medians per operation (us)\n", lib, n, reps);
        printf("%-24s %12s %12s %8s\n", "operation", "direct_us", "enqueue_us", "ratio");
        for (int k = 0; k < KINDS; k++) {
            double d = median(t[k][0], reps), e = median(t[k][1], reps);
            printf("%-24s %12.2f %12.2f %8.2f\n", names[k], d, e, e / d);
        }
    }
    MPI_Comm_free(&c);
    MPIX_Stream_free(&s);
    MPI_Comm_free(&world2);
done:
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}

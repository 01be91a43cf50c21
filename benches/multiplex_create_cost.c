/* Cost of making a multiplex stream communicator: every process attaches S streams to a multiplex
 * communicator of MPI_COMM_WORLD (N processes). Per repetition, the slowest process's time (MPI_MAX)
 * of MPIX_Stream_comm_create_multiplex and of MPI_Comm_free, beside MPI_Comm_dup of MPI_COMM_WORLD
 * (the reference: one MPICH communicator). Then KEEP multiplex communicators alive at once: the
 * growth of this process's resident memory (VmRSS) per communicator. Medians over REPS.
 * Usage: multiplex_create_cost S [REPS=15] [KEEP=8]
 * Rank 0 prints: RESULT ranks=N streams=S create_us=C free_us=F dup_us=D rss_kib_per_comm=R */
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXS 64
#define MAXR 101

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slowest process's time of one collective step, in microseconds. */
static double slowest(double t0, double t1) {
    double mine = (t1 - t0) * 1e6, max = 0;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int s = argc > 1 ? atoi(argv[1]) : 1;
    int reps = argc > 2 ? atoi(argv[2]) : 15;
    int keep = argc > 3 ? atoi(argv[3]) : 8;
    if (s < 1 || s > MAXS || reps < 1 || reps > MAXR || keep < 1 || keep > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    MPIX_Stream streams[MAXS];
    for (int i = 0; i < s; i++)
        if (MPIX_Stream_create(MPI_INFO_NULL, &streams[i]) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);

    double create[MAXR], freed[MAXR], dup[MAXR];
    MPI_Comm mx, d;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, s, streams, &mx) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        double c = slowest(t0, MPI_Wtime());
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Comm_free(&mx);
        double f = slowest(t0, MPI_Wtime());
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        double u = slowest(t0, MPI_Wtime());
        MPI_Comm_free(&d);
        if (r >= 0) create[r] = c, freed[r] = f, dup[r] = u;
    }

    /* memory: KEEP communicators alive at once (after one made and freed, so that MPICH's pools have
     * grown once already) */
    MPI_Comm kept[64];
    MPI_Barrier(MPI_COMM_WORLD);
    long before = rss_kib();
    for (int k = 0; k < keep; k++) MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, s, streams, &kept[k]);
    long after = rss_kib();
    for (int k = 0; k < keep; k++) MPI_Comm_free(&kept[k]);
    double per = (double)(after - before) / keep, most = 0;
    MPI_Reduce(&per, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0)
        printf("RESULT ranks=%d streams=%d create_us=%.1f free_us=%.1f dup_us=%.1f rss_kib_per_comm=%.0f\n", size, s,
               median(create, reps), median(freed, reps), median(dup, reps), most);
    for (int i = 0; i < s; i++) MPIX_Stream_free(&streams[i]);
    MPI_Finalize();
    return 0;
}

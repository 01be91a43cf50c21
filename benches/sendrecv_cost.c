/* Cost of MPI_Sendrecv on a communicator the program made (MPI_Comm_dup of MPI_COMM_WORLD) against
 * MPI_Sendrecv on MPI_COMM_WORLD, in one process, alternating blocks. Under MPIXSTREAM_POLICY=explicit
 * the dup is a native stream communicator (its Sendrecv is routed by mpixstream as Irecv + Isend +
 * Waitall on the stream's endpoint) and MPI_COMM_WORLD stays on MPICH's implicit pool; under implicit
 * both are on the implicit pool (the control: ratio 1). A third variant times the route's own calls,
 * Irecv + Isend + Waitall written out, on the dup. 2 ranks exchange MSG bytes.
 * Usage: sendrecv_cost [ROUNDS=200000] [MSG=8]
 * Rank 0 prints: RESULT dup_ns=X world_ns=Y manual_ns=Z ratio=X/Y (per exchange) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    int msg = argc > 2 ? atoi(argv[2]) : 8;
    if (size != 2 || msg < 0 || msg > (1 << 20)) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    char *out = calloc(msg + 1, 1), *in = calloc(msg + 1, 1);
    int peer = rank ^ 1;
    double spent[3] = {0, 0, 0};
    long calls[3] = {0, 0, 0};
    const long block = 256; /* exchanges per block; the variants alternate */
    for (long k = 0; k < rounds + 3 * block; k++) {
        int v = (int)((k / block) % 3); /* 0: dup, 1: MPI_COMM_WORLD, 2: Irecv + Isend + Waitall on dup */
        double t0 = now_ns();
        if (v == 2) {
            MPI_Request r[2];
            MPI_Irecv(in, msg, MPI_BYTE, peer, 0, dup, &r[0]);
            MPI_Isend(out, msg, MPI_BYTE, peer, 0, dup, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        } else {
            MPI_Sendrecv(out, msg, MPI_BYTE, peer, 0, in, msg, MPI_BYTE, peer, 0, v == 0 ? dup : MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        }
        if (k >= 3 * block) { /* the first block of each variant warms up */
            spent[v] += now_ns() - t0;
            calls[v]++;
        }
    }
    if (rank == 0) {
        double d = spent[0] / calls[0], w = spent[1] / calls[1], m = spent[2] / calls[2];
        printf("RESULT dup_ns=%.1f world_ns=%.1f manual_ns=%.1f ratio=%.4f\n", d, w, m, d / w);
    }
    MPI_Comm_free(&dup);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}

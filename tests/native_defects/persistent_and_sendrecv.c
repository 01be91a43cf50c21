/* Reproducer of defects of native MPICH 5.0.2 stream communicators, WITHOUT mpixstream:
 * operation 0 (MPI_Start on persistent requests), 1 (MPI_Startall), 5 (MPI_Sendrecv), the
 * nonblocking collectives 6 (MPI_Ibarrier) and 7 (MPI_Iallreduce), and the probes 8 (MPI_Probe) and
 * 9 (a loop of MPI_Iprobe), buffered sends 10 (MPI_Bsend waiting for buffer space), and the nonblocking
 * send-receives 11 (MPI_Isendrecv) and 12 (MPI_Isendrecv_replace) hang on a native stream communicator;
 * 2 (Sendrecv_replace), 3 (Irecv+Send) and 4 (Allreduce) complete. Under mpixstream, 5 to 12 complete
 * (shim/src/native_fixes/mod.rs; 10: shim/src/native_fixes/buffered/; 11, 12:
 * shim/src/native_fixes/sendrecv_requests.rs).
 * Run: tests/native_defects/run.sh */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int op = argc > 1 ? atoi(argv[1]) : 0;
    MPIX_Stream s;
    MPI_Comm sc;
    MPIX_Stream_create(MPI_INFO_NULL, &s);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc);
    int out = rank, in = -1, peer = 1 - rank;
    MPI_Request q[2];
    switch (op) {
    case 0:
        MPI_Recv_init(&in, 1, MPI_INT, peer, 0, sc, &q[0]);
        MPI_Send_init(&out, 1, MPI_INT, peer, 0, sc, &q[1]);
        MPI_Start(&q[0]);
        MPI_Start(&q[1]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        MPI_Wait(&q[1], MPI_STATUS_IGNORE);
        break;
    case 1:
        MPI_Recv_init(&in, 1, MPI_INT, peer, 0, sc, &q[0]);
        MPI_Send_init(&out, 1, MPI_INT, peer, 0, sc, &q[1]);
        MPI_Startall(2, q);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        break;
    case 2:
        in = rank;
        MPI_Sendrecv_replace(&in, 1, MPI_INT, peer, 0, peer, 0, sc, MPI_STATUS_IGNORE);
        break;
    case 3:
        MPI_Irecv(&in, 1, MPI_INT, peer, 0, sc, &q[0]);
        MPI_Send(&out, 1, MPI_INT, peer, 0, sc);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    case 4:
        MPI_Allreduce(&out, &in, 1, MPI_INT, MPI_SUM, sc);
        break;
    case 5:
        MPI_Sendrecv(&out, 1, MPI_INT, peer, 0, &in, 1, MPI_INT, peer, 0, sc, MPI_STATUS_IGNORE);
        break;
    case 6:
        MPI_Ibarrier(sc, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    case 7:
        MPI_Iallreduce(&out, &in, 1, MPI_INT, MPI_SUM, sc, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    case 8: {
        MPI_Send(&out, 1, MPI_INT, peer, 0, sc);
        MPI_Probe(peer, 0, sc, MPI_STATUS_IGNORE);
        MPI_Recv(&in, 1, MPI_INT, peer, 0, sc, MPI_STATUS_IGNORE);
        break;
    }
    case 10: { /* many buffered sends through a small buffer: MPI_Bsend waits for buffer space */
        static char bsend_buf[16 * (sizeof(int) + MPI_BSEND_OVERHEAD)];
        MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);
        for (int k = 0; k < 2000; k++) {
            if (rank == 0) MPI_Bsend(&out, 1, MPI_INT, 1, 0, sc);
            else MPI_Recv(&in, 1, MPI_INT, 0, 0, sc, MPI_STATUS_IGNORE);
        }
        void *b;
        int bs;
        MPI_Buffer_detach(&b, &bs);
        break;
    }
    case 11:
        MPI_Isendrecv(&out, 1, MPI_INT, peer, 0, &in, 1, MPI_INT, peer, 0, sc, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    case 12:
        in = rank;
        MPI_Isendrecv_replace(&in, 1, MPI_INT, peer, 0, peer, 0, sc, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    case 9: {
        int flag = 0;
        MPI_Send(&out, 1, MPI_INT, peer, 0, sc);
        while (!flag) MPI_Iprobe(peer, 0, sc, &flag, MPI_STATUS_IGNORE);
        MPI_Recv(&in, 1, MPI_INT, peer, 0, sc, MPI_STATUS_IGNORE);
        break;
    }
    }
    printf("operation %d rank %d completed (got %d)\n", op, rank, in);
    MPI_Finalize(); /* the communicator and stream are left to MPI_Finalize on purpose: short reproducer */
    return 0;
}

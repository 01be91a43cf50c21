/* Reproducer, WITHOUT mpixstream, of a defect of MPICH 5.0.2 over ch4:ucx: with more than one VCI
 * (MPIR_CVAR_CH4_RESERVE_VCIS >= 1 or MPIR_CVAR_CH4_NUM_VCIS >= 2), MPI_Init never returns when UCX
 * connects two processes over TCP (ranks on two hosts of a network without RDMA). MPICH's init flushes
 * every VCI's UCX worker and waits for the flushes with its global progress, which turns VCI 0's worker
 * only; a TCP endpoint's flush waits for its connection handshake, which the peer answers only when its
 * own worker of that VCI is progressed. Over shared memory (one host) or ch4:ofi it completes.
 * Prints "completed" per rank. Run: tests/mpich_builds/run.sh (needs scripts/hosts.sh) */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d completed\n", rank);
    MPI_Finalize();
    return 0;
}

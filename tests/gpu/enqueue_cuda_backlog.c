/* A backlog of enqueued receives behind one that waits for its peer, 2 ranks (others idle): the
 * shape of the 8-byte latency run that did not finish on an H200 with host functions
 * (MPIXSTREAM_CUDA_SYNC=hostfn), made deterministic. Rank 0 enqueues N receives at once; rank 1 sends
 * them only 300 ms later. With host functions the first receive's "wait for done" host function blocks
 * CUDA's callback thread; the launches behind it fill the driver's host-function queue, so rank 0's
 * enqueuing thread blocks inside cuLaunchHostFunc, keeping the context's driver lock. Any CUDA call of
 * the thread that completes the operations would then wait for that lock, and the operation it never
 * completes is the one the host function waits for: a deadlock (the run hits its timeout). The
 * library's driver thread makes no CUDA call, so the receives complete and the values arrive in order.
 * With stream memory operations the waits are the GPU's and nothing blocks the host.
 * Needs a CUDA driver: a GPU, or the CPU stand-in (tests/scripts/enqueue_cuda_standin.sh). */
#include "cudatest.h"

enum { N = 400 };

int main(int argc, char **argv) {
    cudatest_init(&argc, &argv);
    if (size >= 2 && rank < 2) {
        CUstream cs;
        MPIX_Stream s;
        MPI_Comm c;
        cuda_stream_comm(&cs, &s, &c);
        int *vals;
        CU(cu.MemHostAlloc((void **)&vals, N * sizeof(int), 1));
        for (int i = 0; i < N; i++) vals[i] = rank == 1 ? 1000 + i : -1;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (int i = 0; i < N; i++) OK(MPIX_Recv_enqueue(&vals[i], 1, MPI_INT, 1, 7, c, MPI_STATUS_IGNORE));
            CU(cu.StreamSynchronize(cs));
            int bad = 0;
            for (int i = 0; i < N; i++) bad += vals[i] != 1000 + i;
            CHECK(bad == 0, "%d of %d values wrong (first %d)", bad, N, vals[0]);
        } else {
            usleep(300000); /* rank 0's backlog builds up meanwhile */
            for (int i = 0; i < N; i++) MPI_Send(&vals[i], 1, MPI_INT, 0, 7, c); /* nothing enqueued here */
        }
        OK(MPI_Comm_free(&c));
        OK(MPIX_Stream_free(&s));
        CU(cu.StreamDestroy(cs));
        CU(cu.MemFreeHost(vals));
    }
    return cudatest_finish();
}

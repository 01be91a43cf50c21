/* Enqueue on a CUDA stream that is being captured into a CUDA graph, 2 ranks (others idle). Each
 * enqueued operation has a sequence number, fixed when it is queued, so a graph could only replay it
 * wrongly (run once, then pass without communicating): the enqueue must be refused at the call with a
 * clear error through the communicator's error handler (MPI_ERR_OTHER naming the capture), must leave
 * the capture valid (the library queries nothing on the capturing stream: a query would invalidate
 * it), and the queue must work as before once the capture ended. The application's own captured work
 * runs on each graph launch.
 * Needs a CUDA driver: a GPU, or the CPU stand-in (tests/scripts/enqueue_cuda_standin.sh). */
#include "cudatest.h"

static int handler_calls;
static void count_errors(MPI_Comm *c, int *code, ...) {
    (void)c, (void)code;
    handler_calls++;
}

int main(int argc, char **argv) {
    cudatest_init(&argc, &argv);
    CUresult (*begin)(CUstream, int), (*end)(CUstream, void **), (*instantiate)(void **, void *, unsigned long long),
        (*launch)(void *, CUstream);
    *(void **)&begin = dlsym(cu.lib, "cuStreamBeginCapture_v2");
    *(void **)&end = dlsym(cu.lib, "cuStreamEndCapture");
    *(void **)&instantiate = dlsym(cu.lib, "cuGraphInstantiateWithFlags");
    *(void **)&launch = dlsym(cu.lib, "cuGraphLaunch");
    if (!begin || !end || !instantiate || !launch) {
        fprintf(stderr, "libcuda has no stream capture\n");
        die(4);
    }
    if (size >= 2 && rank < 2) {
        CUstream cs;
        MPIX_Stream s;
        MPI_Comm c;
        cuda_stream_comm(&cs, &s, &c);
        MPI_Errhandler counting;
        MPI_Comm_create_errhandler(count_errors, &counting);
        MPI_Comm_set_errhandler(c, counting);
        CUdeviceptr d;
        int *h;
        CU(cu.MemAlloc(&d, 64 * sizeof(int)));
        CU(cu.MemHostAlloc((void **)&h, 64 * sizeof(int), 1));
        CU(begin(cs, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
        CU(cu.MemsetD32Async(d, 40 + rank, 64, cs));
        int peer = 1 - rank;
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0, rc = MPIX_Send_enqueue((void *)d, 64, MPI_INT, peer, 1, c);
        msg[0] = 0;
        MPI_Error_string(rc, msg, &len);
        CHECK(rc != MPI_SUCCESS && strstr(msg, "captur"), "enqueue while capturing: rc %d, \"%s\"", rc, msg);
        rc = MPIX_Allreduce_enqueue(MPI_IN_PLACE, (void *)d, 64, MPI_INT, MPI_SUM, c);
        CHECK(rc != MPI_SUCCESS, "a collective enqueued while capturing was accepted");
        CHECK(handler_calls == 2, "the communicator's error handler was called %d times, not twice", handler_calls);
        void *graph = NULL, *exec = NULL;
        CUresult r = end(cs, &graph);
        CHECK(r == 0 && graph, "cuStreamEndCapture after the refused enqueues: error %d (the capture was invalidated)", r);
        if (r == 0 && graph) {
            CU(instantiate(&exec, graph, 0));
            CU(cu.MemsetD32Async(d, 0, 64, cs));
            CU(launch(exec, cs));
            CU(launch(exec, cs));
            CU(cu.MemcpyDtoHAsync(h, d, 64 * sizeof(int), cs));
            CU(cu.StreamSynchronize(cs));
            CHECK(h[0] == 40 + rank && h[63] == 40 + rank, "the captured memset did not run on launch: %d", h[0]);
        }
        /* After the capture the queue works: an exchange through the stream. */
        CU(cu.MemsetD32Async(d, 100 + rank, 64, cs));
        if (rank == 0) {
            OK(MPIX_Send_enqueue((void *)d, 64, MPI_INT, peer, 2, c));
            OK(MPIX_Recv_enqueue((void *)d, 64, MPI_INT, peer, 3, c, MPI_STATUS_IGNORE));
        } else {
            OK(MPIX_Recv_enqueue((void *)d, 64, MPI_INT, peer, 2, c, MPI_STATUS_IGNORE));
            OK(MPIX_Send_enqueue((void *)d, 64, MPI_INT, peer, 3, c));
        }
        CU(cu.MemcpyDtoHAsync(h, d, 64 * sizeof(int), cs));
        CU(cu.StreamSynchronize(cs));
        CHECK(h[0] == 100 && h[63] == 100, "after the capture: rank %d holds %d, not 100", rank, h[0]);
        OK(MPI_Comm_free(&c));
        OK(MPIX_Stream_free(&s));
        MPI_Errhandler_free(&counting);
        CU(cu.StreamDestroy(cs));
        CU(cu.MemFreeHost(h));
        CU(cu.MemFree(d));
    }
    return cudatest_finish();
}

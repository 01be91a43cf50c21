/* Enqueue on CUDA streams (type=cudaStream_t) with device buffers, 2 ranks on one GPU. Run by
 * scripts/gpu_check.sh; needs an NVIDIA GPU. Uses only the CUDA driver API, loaded with dlopen, so
 * it compiles with a plain C compiler and MPICH's headers (no CUDA toolkit needed to build it).
 *   - ordering: the stream is held by a gate (cuStreamWaitValue32 on a host word) while a memset
 *     (42) and MPIX_Send_enqueue are queued behind it, then a memset (7) after the send; the receiver
 *     must see 42 only, and its copy queued after MPIX_Recv_enqueue must see the data;
 *   - Isend/Irecv_enqueue + Waitall_enqueue exchanging 4 MiB device buffers both ways;
 *   - every collective on device buffers, in place too; pinned host buffers on a CUDA stream;
 *   - latency (MPIXTEST_LATENCY=1): 8-byte device-buffer ping-pong, MPIX_Send/Recv_enqueue queued
 *     back to back vs cuMemcpyAsync + cuStreamSynchronize + MPI_Send/MPI_Recv; medians of 7 runs of
 *     MPIXTEST_LATENCY_ITERS round trips (default 1000).
 * Runs on a GPU (scripts/gpu_check.sh) and, in CI, on the CPU stand-in for the driver
 * (tests/cuda_standin, tests/scripts/enqueue_cuda_standin.sh).
 * Prints " No Errors" on success (MPICH test-suite convention). */
#include <mpi.h>
#include "mpix_stream.h"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(int *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, int);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, uint32_t, unsigned);
    CUresult (*LaunchHostFunc)(CUstream, void (*)(void *), void *);
    CUresult (*GetErrorName)(CUresult, const char **);
} cu;

static int rank, size, errs;

/* MPI_Abort, and make sure nothing runs after it. */
static void die(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "[rank %d] line %d: check failed: %s: ", rank, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            errs++;                                                                         \
        }                                                                                   \
    } while (0)
#define OK(call)                                                                            \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);                            \
    } while (0)
#define CU(call)                                                                            \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        if (r_ != 0) {                                                                      \
            const char *n_ = "?";                                                           \
            if (cu.GetErrorName) cu.GetErrorName(r_, &n_);                                  \
            fprintf(stderr, "[rank %d] line %d: %s failed: %s (%d)\n", rank, __LINE__, #call, n_, r_); \
            die(3);                                                   \
        }                                                                                   \
    } while (0)

static void load_cuda(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "no CUDA driver: %s\n", dlerror());
        die(4);
    }
#define SYM(field, name)                                                                    \
    do {                                                                                    \
        *(void **)&cu.field = dlsym(h, name);                                               \
        if (!cu.field) { fprintf(stderr, "libcuda has no %s\n", name); die(4); } \
    } while (0)
    SYM(Init, "cuInit");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemHostAlloc, "cuMemHostAlloc");
    SYM(MemFreeHost, "cuMemFreeHost");
    SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    SYM(MemsetD32Async, "cuMemsetD32Async");
    SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(StreamWaitValue32, "cuStreamWaitValue32_v2");
    SYM(LaunchHostFunc, "cuLaunchHostFunc");
    SYM(GetErrorName, "cuGetErrorName");
}

static CUstream stream;

/* n ints of device memory copied to a fresh host array (after everything queued so far). */
static int *fetch(CUdeviceptr d, size_t n) {
    int *h = malloc(n * sizeof(int));
    CU(cu.MemcpyDtoHAsync(h, d, n * sizeof(int), stream));
    CU(cu.StreamSynchronize(stream));
    return h;
}
static CUdeviceptr dalloc(size_t n, unsigned fill) {
    CUdeviceptr d;
    CU(cu.MemAlloc(&d, n * sizeof(int)));
    CU(cu.MemsetD32Async(d, fill, n, stream));
    return d;
}
static int count_not(const int *h, size_t n, int v) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != v;
    return bad;
}

/* A device without stream memory operations (CUDA_ERROR_NOT_SUPPORTED) holds the stream with a
 * host function that waits for the gate word instead. */
static void gate_wait(void *word) {
    while (!__atomic_load_n((volatile uint32_t *)word, __ATOMIC_ACQUIRE)) usleep(100);
}

static void ordering(MPI_Comm c) {
    enum { N = 1 << 20 }; /* 4 MiB: a rendezvous message */
    CUdeviceptr d = dalloc(N, 0);
    volatile uint32_t *gate;
    CUdeviceptr gate_dev;
    CU(cu.MemHostAlloc((void **)&gate, 64, 1 | 2)); /* portable | devicemap */
    *gate = 0;
    CU(cu.MemHostGetDevicePointer(&gate_dev, (void *)gate, 0));
    CU(cu.StreamSynchronize(stream));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CUresult r = cu.StreamWaitValue32(stream, gate_dev, 1, 0 /* GEQ */);
        if (r == 801 /* CUDA_ERROR_NOT_SUPPORTED */) CU(cu.LaunchHostFunc(stream, gate_wait, (void *)gate));
        else CU(r);
        CU(cu.MemsetD32Async(d, 42, N, stream));
        OK(MPIX_Send_enqueue((void *)d, N, MPI_INT, 1, 0, c));
        CU(cu.MemsetD32Async(d, 7, N, stream));
        usleep(200000); /* the stream is held: nothing may have been sent yet */
        __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
        CU(cu.StreamSynchronize(stream));
    } else if (rank == 1) {
        MPI_Status st;
        OK(MPIX_Recv_enqueue((void *)d, N, MPI_INT, 0, 0, c, &st));
        int *h = fetch(d, N);
        CHECK(count_not(h, N, 42) == 0, "receiver saw %d of %d wrong (first %d)", count_not(h, N, 42), N, h[0]);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 0, "status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
        free(h);
    }
    CU(cu.MemFreeHost((void *)gate));
    CU(cu.MemFree(d));
}

static void nonblocking(MPI_Comm c) {
    enum { N = 1 << 20 };
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    CUdeviceptr out = dalloc(N, 1000 + rank), in = dalloc(N, 0);
    MPI_Request r[2];
    MPI_Status st[2];
    OK(MPIX_Isend_enqueue((void *)out, N, MPI_INT, right, 5, c, &r[0]));
    OK(MPIX_Irecv_enqueue((void *)in, N, MPI_INT, left, 5, c, &r[1]));
    OK(MPIX_Waitall_enqueue(2, r, st));
    int *h = fetch(in, N);
    CHECK(count_not(h, N, 1000 + left) == 0, "Isend/Irecv exchange: %d wrong", count_not(h, N, 1000 + left));
    CHECK(st[1].MPI_SOURCE == left, "waitall status %d", st[1].MPI_SOURCE);
    free(h);
    CU(cu.MemFree(out));
    CU(cu.MemFree(in));
}

static void collectives(MPI_Comm c) {
    enum { N = 4096 };
    CUdeviceptr a = dalloc(N, rank + 1), b = dalloc(N, 0);
    OK(MPIX_Allreduce_enqueue((void *)a, (void *)b, N, MPI_INT, MPI_SUM, c));
    int *h = fetch(b, N);
    CHECK(count_not(h, N, size * (size + 1) / 2) == 0, "allreduce %d", h[0]);
    free(h);
    OK(MPIX_Allreduce_enqueue(MPI_IN_PLACE, (void *)a, N, MPI_INT, MPI_MAX, c));
    h = fetch(a, N);
    CHECK(count_not(h, N, size) == 0, "allreduce in place %d", h[0]);
    free(h);
    CUdeviceptr bc = dalloc(N, rank == size - 1 ? 77 : 0);
    OK(MPIX_Bcast_enqueue((void *)bc, N, MPI_INT, size - 1, c));
    h = fetch(bc, N);
    CHECK(count_not(h, N, 77) == 0, "bcast %d", h[0]);
    free(h);
    CUdeviceptr one = dalloc(1, rank + 1), red = dalloc(1, 0);
    OK(MPIX_Reduce_enqueue((void *)one, (void *)red, 1, MPI_INT, MPI_SUM, 0, c));
    h = fetch(red, 1);
    if (rank == 0) CHECK(h[0] == size * (size + 1) / 2, "reduce %d", h[0]);
    free(h);
    CUdeviceptr ag = dalloc(size, 0);
    OK(MPIX_Allgather_enqueue((void *)one, 1, MPI_INT, (void *)ag, 1, MPI_INT, c));
    h = fetch(ag, size);
    for (int i = 0; i < size; i++) CHECK(h[i] == i + 1, "allgather[%d] %d", i, h[i]);
    free(h);
    int *hs = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) hs[i] = rank * 100 + i;
    CUdeviceptr as = dalloc(size, 0), ar = dalloc(size, 0);
    CU(cu.MemcpyHtoDAsync(as, hs, size * sizeof(int), stream));
    OK(MPIX_Alltoall_enqueue((void *)as, 1, MPI_INT, (void *)ar, 1, MPI_INT, c));
    OK(MPIX_Barrier_enqueue(c));
    h = fetch(ar, size);
    for (int i = 0; i < size; i++) CHECK(h[i] == i * 100 + rank, "alltoall[%d] %d", i, h[i]);
    free(h);
    free(hs);
    /* Pinned host memory on a CUDA stream: passed to MPI directly (no staging). */
    int *pin;
    CU(cu.MemHostAlloc((void **)&pin, 64 * sizeof(int), 1));
    for (int i = 0; i < 64; i++) pin[i] = rank;
    OK(MPIX_Allreduce_enqueue(MPI_IN_PLACE, pin, 64, MPI_INT, MPI_SUM, c));
    CU(cu.StreamSynchronize(stream));
    CHECK(count_not(pin, 64, size * (size - 1) / 2) == 0, "pinned allreduce %d", pin[0]);
    CU(cu.MemFreeHost(pin));
    CUdeviceptr all[] = {a, b, bc, one, red, ag, as, ar};
    for (unsigned i = 0; i < sizeof all / sizeof *all; i++) CU(cu.MemFree(all[i]));
}

static int cmpd(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void latency(MPI_Comm c) {
    enum { REPS = 7 };
    const char *it = getenv("MPIXTEST_LATENCY_ITERS");
    const int ITERS = it && atoi(it) > 0 ? atoi(it) : 1000;
    CUdeviceptr d = dalloc(2, 0);
    long long *h;
    CU(cu.MemHostAlloc((void **)&h, 64, 1));
    CU(cu.StreamSynchronize(stream));
    double te[REPS], tb[REPS];
    int peer = 1 - rank;
    for (int r = -1; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < ITERS; i++) {
            if (rank == 0) {
                OK(MPIX_Send_enqueue((void *)d, 1, MPI_LONG_LONG, peer, 1, c));
                OK(MPIX_Recv_enqueue((void *)d, 1, MPI_LONG_LONG, peer, 1, c, MPI_STATUS_IGNORE));
            } else {
                OK(MPIX_Recv_enqueue((void *)d, 1, MPI_LONG_LONG, peer, 1, c, MPI_STATUS_IGNORE));
                OK(MPIX_Send_enqueue((void *)d, 1, MPI_LONG_LONG, peer, 1, c));
            }
        }
        CU(cu.StreamSynchronize(stream));
        double t1 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = MPI_Wtime();
        for (int i = 0; i < ITERS; i++) {
            if (rank == 0) {
                CU(cu.MemcpyDtoHAsync(h, d, 8, stream));
                CU(cu.StreamSynchronize(stream));
                MPI_Send(h, 1, MPI_LONG_LONG, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(h, 1, MPI_LONG_LONG, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CU(cu.MemcpyHtoDAsync(d, h, 8, stream));
            } else {
                MPI_Recv(h, 1, MPI_LONG_LONG, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CU(cu.MemcpyHtoDAsync(d, h, 8, stream));
                CU(cu.MemcpyDtoHAsync(h, d, 8, stream));
                CU(cu.StreamSynchronize(stream));
                MPI_Send(h, 1, MPI_LONG_LONG, peer, 2, MPI_COMM_WORLD);
            }
        }
        CU(cu.StreamSynchronize(stream));
        double t3 = MPI_Wtime();
        if (r >= 0) te[r] = (t1 - t0) / ITERS * 1e6, tb[r] = (t3 - t2) / ITERS * 1e6;
    }
    qsort(te, REPS, sizeof(double), cmpd);
    qsort(tb, REPS, sizeof(double), cmpd);
    if (rank == 0) {
        printf("latency: 8-byte device-buffer round trip, %d iterations x %d runs, medians\n", ITERS, REPS);
        printf("  MPIX_Send/Recv_enqueue on the CUDA stream:          %8.2f us\n", te[REPS / 2]);
        printf("  cuStreamSynchronize + MPI_Send/MPI_Recv (staged):   %8.2f us\n", tb[REPS / 2]);
        printf("  ratio enqueue/baseline:                             %8.2f\n", te[REPS / 2] / tb[REPS / 2]);
    }
    CU(cu.MemFreeHost(h));
    CU(cu.MemFree(d));
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    load_cuda();
    int dev;
    CUcontext ctx;
    CU(cu.Init(0));
    CU(cu.DeviceGet(&dev, 0));
    CU(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CU(cu.CtxSetCurrent(ctx));
    CU(cu.StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */));

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    OK(MPIX_Info_set_hex(info, "value", &stream, sizeof stream));
    MPIX_Stream s;
    int rc = MPIX_Stream_create(info, &s);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "[rank %d] MPIX_Stream_create(cudaStream_t): %s\n", rank, msg);
    }
    /* A refusal ends the run in order, not with MPI_Abort: mpiexec then drops an aborted rank's last
     * output in about one run of eight, and the refusal's message is what the test checks. */
    int refused = rc != MPI_SUCCESS, any = 0;
    MPI_Allreduce(&refused, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        fflush(stderr);
        MPI_Finalize();
        exit(5);
    }
    MPI_Info_free(&info);
    MPI_Comm c;
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    ordering(c);
    nonblocking(c);
    collectives(c);
    const char *lat = getenv("MPIXTEST_LATENCY");
    if (lat && atoi(lat) && size == 2) latency(c);
    CU(cu.StreamSynchronize(stream));
    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&s));
    CU(cu.StreamDestroy(stream));
    int total = 0;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}

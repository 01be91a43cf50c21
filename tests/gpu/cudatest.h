/* Shared by the CUDA enqueue tests in tests/gpu/: the CUDA driver API loaded with dlopen (no CUDA
 * toolkit needed to build), check macros, and the setup of a CUDA stream with an MPIX stream and
 * communicator on it. Works with a real driver and with the CPU stand-in (tests/cuda_standin). */
#ifndef CUDATEST_H
#define CUDATEST_H
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
#define CUDA_ERROR_NOT_SUPPORTED 801

static struct {
    void *lib;
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
static CUcontext ctx;

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
            die(3);                                                                         \
        }                                                                                   \
    } while (0)

static void load_cuda(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "no CUDA driver: %s\n", dlerror());
        die(4);
    }
    cu.lib = h;
#define SYM(field, name)                                                                    \
    do {                                                                                    \
        *(void **)&cu.field = dlsym(h, name);                                               \
        if (!cu.field) { fprintf(stderr, "libcuda has no %s\n", name); die(4); }            \
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
#undef SYM
}

/* MPI_Init_thread(MULTIPLE), errors returned, the driver loaded and a context current. */
static void cudatest_init(int *argc, char ***argv) {
    int provided, dev;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    load_cuda();
    CU(cu.Init(0));
    CU(cu.DeviceGet(&dev, 0));
    CU(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CU(cu.CtxSetCurrent(ctx));
}

/* A new CUDA stream, an MPIX stream on it and a stream communicator (errors returned). */
static void cuda_stream_comm(CUstream *cs, MPIX_Stream *s, MPI_Comm *c) {
    CU(cu.StreamCreate(cs, 1 /* CU_STREAM_NON_BLOCKING */));
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    OK(MPIX_Info_set_hex(info, "value", cs, sizeof *cs));
    int rc = MPIX_Stream_create(info, s);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "[rank %d] MPIX_Stream_create(cudaStream_t): %s\n", rank, msg);
        die(5);
    }
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, *s, c));
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
}

/* The stream waits for *word >= 1 (stream memory operation, or a host function where the device
 * has none). */
static void gate_wait_fn(void *word) {
    while (!__atomic_load_n((volatile uint32_t *)word, __ATOMIC_ACQUIRE)) usleep(100);
}
__attribute__((unused)) static volatile uint32_t *gate_close(CUstream cs) {
    volatile uint32_t *gate;
    CUdeviceptr dev;
    CU(cu.MemHostAlloc((void **)&gate, 64, 1 | 2)); /* portable | devicemap */
    *gate = 0;
    CU(cu.MemHostGetDevicePointer(&dev, (void *)gate, 0));
    CUresult r = cu.StreamWaitValue32(cs, dev, 1, 0 /* GEQ */);
    if (r == CUDA_ERROR_NOT_SUPPORTED) CU(cu.LaunchHostFunc(cs, gate_wait_fn, (void *)gate));
    else CU(r);
    return gate;
}
__attribute__((unused)) static void gate_open(volatile uint32_t *gate) { __atomic_store_n(gate, 1, __ATOMIC_RELEASE); }

static int cudatest_finish(void) {
    int total = 0;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
#endif

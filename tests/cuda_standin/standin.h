/* The CPU stand-in for libcuda (tests/cuda_standin): what its three files share. cuda_standin.c has
 * contexts, streams, memory and the stream memory operations; callbacks.c the host functions (one
 * callback thread per context, a bounded number launched and not returned); graphs.c stream capture
 * and graph launch. What it models and why: cuda_standin.c's head comment, docs/enqueue.md. */
#ifndef CUDA_STANDIN_H
#define CUDA_STANDIN_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void (*CUhostFn)(void *);

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
};

/* CUstreamCaptureStatus */
enum { CAPTURE_NONE = 0, CAPTURE_ACTIVE = 1, CAPTURE_INVALIDATED = 2 };

/* A host function whose stream reached it, waiting for the context's callback thread. */
struct hostcall {
    CUhostFn fn;
    void *arg;
    int done;
    struct hostcall *next;
};

struct ctx {
    int device;
    volatile CUresult sticky; /* a sticky error: every call in the context fails with it */
    /* The driver's lock of the context: every call on a stream or needing the context takes it for its
     * duration, and a launch waiting for a host-function slot keeps it (callbacks.c). */
    pthread_mutex_t api;
    /* The callback thread and its queue (callbacks.c). */
    pthread_mutex_t cb_lock;
    pthread_cond_t cb_work, cb_done, cb_slot;
    struct hostcall *cb_head, *cb_tail;
    int hostfns; /* host functions launched and not yet returned (or dropped) */
    int cb_started;
    pthread_t cb_thread;
};

enum cmd_kind { CMD_COPY, CMD_SET32, CMD_WRITE, CMD_WAIT, CMD_HOSTFN };
struct cmd {
    enum cmd_kind kind;
    void *dst;
    const void *src;
    size_t n;
    uint32_t value;
    unsigned flags;
    CUhostFn fn;
    void *arg;
    struct cmd *next;
};

struct stream {
    uint32_t magic;
    struct ctx *ctx;
    pthread_mutex_t lock;
    pthread_cond_t work, idle;
    struct cmd *head, *tail;
    int running;  /* the worker is executing a command */
    int syncing;  /* threads in cuStreamSynchronize (the stream is not released under them) */
    int capture;  /* CAPTURE_*; while ACTIVE, commands are recorded, not run (graphs.c) */
    struct cmd *cap_head, *cap_tail;
    pthread_t worker;
};

/* Internal entry points of cuda_standin.c used by the other files. */
CUresult enter_stream(void *h, struct stream **out); /* checks the handle; takes the context's api lock */
void leave(struct ctx *c);                            /* releases it */
CUresult push(struct stream *s, struct cmd c);       /* queues (or, capturing, records) a command */
struct cmd *copy_cmds(const struct cmd *head);       /* a copy of a command list (NULL on no memory) */
void free_cmds(struct cmd *head);

/* callbacks.c */
void run_host_fn(struct ctx *c, CUhostFn fn, void *arg); /* on the stream's worker: waits for the callback thread */
void release_host_fn_slot(struct ctx *c);                 /* a host function dropped unrun (sticky error) */
CUresult take_host_fn_slot(struct ctx *c);                /* a launch: waits for a slot, the api lock held */
void wake_launchers(struct ctx *c);                       /* after a sticky error */
#endif

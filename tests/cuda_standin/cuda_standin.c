/* A CPU stand-in for the part of the CUDA driver API that mpixstream (shim/src/enqueue/cuda.rs) and
 * the tests in tests/gpu/ call: same symbol names, signatures and error codes as libcuda.so.1, so the
 * library's normal probe (dlopen of libcuda.so.1, then cudarc's own search) finds it when its folder
 * is on LD_LIBRARY_PATH (given to those tests only). Built from this file, callbacks.c and graphs.c
 * by tests/scripts/enqueue_cuda_standin.sh.
 *
 * What it models (docs/enqueue.md, "CUDA without a GPU", says why, and what only a real GPU shows):
 *  - streams: one worker thread per stream runs its commands in order, asynchronously to the host
 *    (copies, memsets, stream memory operations, host functions); cuStreamQuery/Synchronize;
 *  - a destroyed stream as an NVIDIA H200's driver answered it: every call with its handle returns
 *    CUDA_ERROR_INVALID_CONTEXT while the work queued on it still runs (the driver documents that);
 *    once that work is done the stream's memory is released, and a call with the stale handle reads
 *    freed memory: here a segmentation fault (the page is made inaccessible), as a use after free in
 *    a driver may be. A handle value that was never a stream is CUDA_ERROR_INVALID_HANDLE;
 *  - device memory (cuMemAlloc): an address range the host cannot touch (mapped PROT_NONE: a host
 *    access is a segmentation fault, as it is on a GPU), backed by memory only the stream workers
 *    use; pinned host memory (cuMemHostAlloc), whose device pointer is its host address (unified
 *    addressing); cuPointerGetAttribute tells them apart and refuses pageable memory;
 *  - cuStreamWriteValue32/cuStreamWaitValue32 (GEQ, EQ, AND, NOR) on pinned or device words; with
 *    CUDA_STANDIN_NO_MEMOPS=1 both return CUDA_ERROR_NOT_SUPPORTED (a device without stream memory
 *    operations), which drives mpixstream's host-function fallback;
 *  - host functions as CUDA runs them (callbacks.c): ONE callback thread per context runs the host
 *    functions of every stream, in the order the streams reach them (the stream waits for its own);
 *    so a host function that waits for another stream's host function deadlocks, as on a GPU. At most
 *    64 are launched and not yet returned per context; a further launch blocks until one returns,
 *    holding the context's driver lock, so every other call on the context, from any thread, blocks
 *    behind it (CUDA: "any CUDA API call may block ... for contention for or unavailability of
 *    internal resources");
 *  - stream capture (graphs.c): cuStreamBeginCapture_v2 / cuStreamEndCapture / cuStreamIsCapturing;
 *    work queued on a capturing stream is recorded, not run; cuStreamQuery or cuStreamSynchronize of
 *    a capturing stream fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture;
 *    cuGraphInstantiateWithFlags and cuGraphLaunch replay the recording, on each launch;
 *  - contexts: a primary context per device, the current-context stack of each thread, and a sticky
 *    context error injected by the test hook cuStandinFailContext (not a CUDA symbol): after it,
 *    every call in the context returns that error and queued work (host functions too) is dropped,
 *    as after a GPU fault. */
#define _GNU_SOURCE
#include "standin.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { MEM_HOST = 1, MEM_DEVICE = 2 };                            /* CUmemorytype */
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8 }; /* CUpointer_attribute */
enum { WAIT_GEQ = 0, WAIT_EQ = 1, WAIT_AND = 2, WAIT_NOR = 3 };   /* CUstreamWaitValue_flags */
enum { HOSTALLOC_DEVICEMAP = 2 };
#define STREAM_MAGIC 0x5757c0deu

/* What the stream table knows of a handle, without reading the stream's memory. */
enum { LIVE, DESTROYED, RELEASED };
struct stream_entry {
    struct stream *s;
    int state;
};

struct alloc {
    uintptr_t base; /* the address the application sees */
    size_t size;
    int type;       /* MEM_HOST (pinned) or MEM_DEVICE */
    unsigned flags;
    void *backing;  /* device memory: where the bytes really are (only stream workers use it) */
    struct ctx *ctx;
};

static struct ctx primary = {
    .device = 0,
    .sticky = CUDA_SUCCESS,
    .api = PTHREAD_MUTEX_INITIALIZER,
    .cb_lock = PTHREAD_MUTEX_INITIALIZER,
    .cb_work = PTHREAD_COND_INITIALIZER,
    .cb_done = PTHREAD_COND_INITIALIZER,
    .cb_slot = PTHREAD_COND_INITIALIZER,
};
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static size_t nallocs, cap_allocs;
static struct stream_entry *streams;
static size_t nstreams, cap_streams;
static int initialised;

#define STACK 16
static __thread struct ctx *ctx_stack[STACK];
static __thread int ctx_depth;

static struct ctx *current(void) { return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL; }

static int memops_refused(void) {
    const char *v = getenv("CUDA_STANDIN_NO_MEMOPS");
    return v && *v && strcmp(v, "0") != 0;
}
/* ---- allocation table ---- */
static struct alloc *find_alloc(uintptr_t p) { /* table_lock held */
    for (size_t i = 0; i < nallocs; i++)
        if (p >= allocs[i].base && p < allocs[i].base + allocs[i].size) return &allocs[i];
    return NULL;
}
static int add_alloc(struct alloc a) {
    pthread_mutex_lock(&table_lock);
    if (nallocs == cap_allocs) {
        size_t c = cap_allocs ? 2 * cap_allocs : 64;
        struct alloc *n = realloc(allocs, c * sizeof *n);
        if (!n) { pthread_mutex_unlock(&table_lock); return 0; }
        allocs = n, cap_allocs = c;
    }
    allocs[nallocs++] = a;
    pthread_mutex_unlock(&table_lock);
    return 1;
}
static int remove_alloc(uintptr_t base, int type, struct alloc *out) {
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == base && allocs[i].type == type) {
            *out = allocs[i];
            allocs[i] = allocs[--nallocs];
            pthread_mutex_unlock(&table_lock);
            return 1;
        }
    pthread_mutex_unlock(&table_lock);
    return 0;
}
/* Where a stream worker reads or writes `n` bytes at address `p`: device memory is translated to its
 * backing; anything else (pinned or pageable host memory) is used as is. NULL: a device range overrun. */
static void *resolve(uintptr_t p, size_t n) {
    pthread_mutex_lock(&table_lock);
    struct alloc *a = find_alloc(p);
    void *r = (void *)p;
    if (a && a->type == MEM_DEVICE) r = p + n <= a->base + a->size ? (char *)a->backing + (p - a->base) : NULL;
    pthread_mutex_unlock(&table_lock);
    return r;
}

/* ---- streams ---- */
static struct stream_entry *find_stream(void *h) { /* table_lock held */
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].s == h) return &streams[i];
    return NULL;
}
static int wait_ok(uint32_t v, uint32_t want, unsigned flags) {
    switch (flags & 3) {
    case WAIT_GEQ: return (int32_t)(v - want) >= 0;
    case WAIT_EQ: return v == want;
    case WAIT_AND: return (v & want) != 0;
    default: return ~(v | want) != 0;
    }
}
static void pause_briefly(int *turns) {
    if (++*turns < 1000) { sched_yield(); return; }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}
static void run_cmd(struct stream *s, struct cmd *c) {
    switch (c->kind) {
    case CMD_COPY: memcpy(c->dst, c->src, c->n); break;
    case CMD_SET32:
        for (size_t i = 0; i < c->n; i++) ((uint32_t *)c->dst)[i] = c->value;
        break;
    case CMD_WRITE: __atomic_store_n((uint32_t *)c->dst, c->value, __ATOMIC_RELEASE); break;
    case CMD_WAIT: {
        int turns = 0;
        /* A sticky context error ends the wait (the GPU stops executing the context's work). */
        while (!wait_ok(__atomic_load_n((uint32_t *)c->dst, __ATOMIC_ACQUIRE), c->value, c->flags) &&
               s->ctx->sticky == CUDA_SUCCESS)
            pause_briefly(&turns);
        break;
    }
    case CMD_HOSTFN: run_host_fn(s->ctx, c->fn, c->arg); break;
    }
}
/* A destroyed stream whose work is done: its memory is released (made inaccessible, never reused, so
 * that a stale handle faults instead of reaching another stream). */
static void release_stream(struct stream *s) {
    pthread_mutex_lock(&s->lock);
    while (s->syncing) pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&table_lock);
    struct stream_entry *e = find_stream(s);
    if (e) e->state = RELEASED;
    pthread_mutex_unlock(&table_lock);
    mprotect(s, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE);
}
static void *worker(void *arg) {
    struct stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        int destroyed;
        pthread_mutex_lock(&table_lock);
        struct stream_entry *e = find_stream(s);
        destroyed = !e || e->state != LIVE;
        pthread_mutex_unlock(&table_lock);
        if (!s->head && destroyed) break; /* destroyed and drained: the resources go with the work */
        if (!s->head) { pthread_cond_wait(&s->work, &s->lock); continue; }
        struct cmd *c = s->head;
        s->head = c->next;
        if (!s->head) s->tail = NULL;
        s->running = 1;
        pthread_mutex_unlock(&s->lock);
        if (s->ctx->sticky == CUDA_SUCCESS) run_cmd(s, c);
        else if (c->kind == CMD_HOSTFN) release_host_fn_slot(s->ctx); /* after a fault: dropped */
        free(c);
        pthread_mutex_lock(&s->lock);
        s->running = 0;
        if (!s->head) pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->lock);
    release_stream(s);
    return NULL;
}

/* Checks the stream handle and its context and takes the context's api lock (`leave` releases it).
 * The legacy default stream (NULL) is refused: the tests and mpixstream use created streams. */
CUresult enter_stream(void *h, struct stream **out) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&table_lock);
    struct stream_entry *e = h ? find_stream(h) : NULL;
    int state = e ? e->state : -1;
    pthread_mutex_unlock(&table_lock);
    if (state < 0) return CUDA_ERROR_INVALID_HANDLE;
    struct stream *s = h;
    /* A driver reads the stream's memory: after its release, a fault. */
    if (*(volatile uint32_t *)&s->magic != STREAM_MAGIC || state == DESTROYED) return CUDA_ERROR_INVALID_CONTEXT;
    if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
    pthread_mutex_lock(&s->ctx->api);
    *out = s;
    return CUDA_SUCCESS;
}
void leave(struct ctx *c) { pthread_mutex_unlock(&c->api); }

CUresult push(struct stream *s, struct cmd c) {
    struct cmd *n = malloc(sizeof *n);
    if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
    *n = c;
    n->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->capture == CAPTURE_INVALIDATED) {
        pthread_mutex_unlock(&s->lock);
        free(n);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct cmd **head = s->capture ? &s->cap_head : &s->head, **tail = s->capture ? &s->cap_tail : &s->tail;
    if (*tail) (*tail)->next = n; else *head = n;
    *tail = n;
    if (!s->capture) pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}
struct cmd *copy_cmds(const struct cmd *head) {
    struct cmd *out = NULL, **at = &out;
    for (; head; head = head->next) {
        struct cmd *n = malloc(sizeof *n);
        if (!n) { free_cmds(out); return NULL; }
        *n = *head;
        n->next = NULL;
        *at = n;
        at = &n->next;
    }
    return out;
}
void free_cmds(struct cmd *head) {
    while (head) {
        struct cmd *next = head->next;
        free(head);
        head = next;
    }
}

/* ---- the API ---- */
CUresult cuInit(unsigned flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    initialised = 1;
    return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult e, const char **name) {
#define N(x) {x, #x}
    static const struct { CUresult e; const char *n; } names[] = {
        N(CUDA_SUCCESS), N(CUDA_ERROR_INVALID_VALUE), N(CUDA_ERROR_OUT_OF_MEMORY), N(CUDA_ERROR_NOT_INITIALIZED),
        N(CUDA_ERROR_INVALID_DEVICE), N(CUDA_ERROR_INVALID_CONTEXT), N(CUDA_ERROR_INVALID_HANDLE),
        N(CUDA_ERROR_ILLEGAL_STATE), N(CUDA_ERROR_NOT_READY), N(CUDA_ERROR_ILLEGAL_ADDRESS),
        N(CUDA_ERROR_LAUNCH_FAILED), N(CUDA_ERROR_NOT_SUPPORTED), N(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
        N(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),
    };
#undef N
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].e == e) { *name = names[i].n; return CUDA_SUCCESS; }
    *name = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &primary;
    return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(void *ctx) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) { if (ctx_depth > 0) ctx_depth--; return CUDA_SUCCESS; }
    if (ctx != &primary) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0) ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(void *ctx) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx != &primary) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == STACK) return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(void **ctx) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct ctx *c = ctx_stack[--ctx_depth];
    if (ctx) *ctx = c;
    return CUDA_SUCCESS;
}
/* Calls that need a current context get it here (with its sticky error) and take its api lock. */
static CUresult enter_ctx(struct ctx **out) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct ctx *c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky != CUDA_SUCCESS) return c->sticky;
    pthread_mutex_lock(&c->api);
    *out = c;
    return CUDA_SUCCESS;
}
#define LEAVE(c, r) do { leave(c); return (r); } while (0)

CUresult cuStreamCreate(void **out, unsigned flags) {
    (void)flags;
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    if (!out) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    _Static_assert(sizeof(struct stream) <= 4096, "a stream fits a page");
    struct stream *s = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY);
    memset(s, 0, sizeof *s);
    s->magic = STREAM_MAGIC;
    s->ctx = c;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_mutex_lock(&table_lock);
    if (nstreams == cap_streams) {
        size_t cap = cap_streams ? 2 * cap_streams : 16;
        struct stream_entry *n = realloc(streams, cap * sizeof *n);
        if (!n) { pthread_mutex_unlock(&table_lock); LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY); }
        streams = n, cap_streams = cap;
    }
    streams[nstreams++] = (struct stream_entry){s, LIVE}; /* kept after release: a stale handle is recognised */
    pthread_mutex_unlock(&table_lock);
    if (pthread_create(&s->worker, NULL, worker, s)) LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY);
    pthread_detach(s->worker);
    *out = s;
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuStreamDestroy_v2(void *h) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_INITIALIZED) return r;
    s = h;
    struct ctx *c = s->ctx;
    /* Under the stream's lock: its worker releases it only after taking that lock. */
    pthread_mutex_lock(&s->lock);
    pthread_mutex_lock(&table_lock);
    find_stream(s)->state = DESTROYED;
    pthread_mutex_unlock(&table_lock);
    pthread_cond_signal(&s->work); /* the worker finishes what is queued, then releases the stream */
    pthread_mutex_unlock(&s->lock);
    if (r == CUDA_SUCCESS) leave(c);
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(void *h, void **ctx) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (!ctx) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    *ctx = s->ctx;
    LEAVE(s->ctx, CUDA_SUCCESS);
}
/* Query and synchronize are not allowed on a capturing stream: they fail and invalidate the capture. */
static int capture_refused(struct stream *s) {
    pthread_mutex_lock(&s->lock);
    int capturing = s->capture != CAPTURE_NONE;
    if (capturing) s->capture = CAPTURE_INVALIDATED;
    pthread_mutex_unlock(&s->lock);
    return capturing;
}
CUresult cuStreamQuery(void *h) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (capture_refused(s)) LEAVE(s->ctx, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    pthread_mutex_lock(&s->lock);
    int busy = s->head || s->running;
    pthread_mutex_unlock(&s->lock);
    LEAVE(s->ctx, busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}
CUresult cuStreamSynchronize(void *h) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (capture_refused(s)) LEAVE(s->ctx, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    pthread_mutex_lock(&s->lock);
    s->syncing++;
    leave(s->ctx); /* the wait itself holds no driver lock */
    while ((s->head || s->running) && s->ctx->sticky == CUDA_SUCCESS) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->idle, &s->lock, &ts);
    }
    CUresult sticky = s->ctx->sticky;
    s->syncing--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return sticky;
}

CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n) {
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    if (!d || n == 0) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (n + page - 1) / page * page;
    void *addr = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *backing = calloc(1, n);
    if (addr == MAP_FAILED || !backing) { free(backing); LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY); }
    if (!add_alloc((struct alloc){(uintptr_t)addr, len, MEM_DEVICE, 0, backing, c})) LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY);
    *d = (uintptr_t)addr;
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuMemFree_v2(CUdeviceptr d) {
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    struct alloc a;
    if (!remove_alloc(d, MEM_DEVICE, &a)) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    munmap((void *)a.base, a.size);
    free(a.backing);
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    if (!p || n == 0 || (flags & ~7u)) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    void *m = NULL;
    if (posix_memalign(&m, 4096, n)) LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY);
    memset(m, 0, n);
    if (!add_alloc((struct alloc){(uintptr_t)m, n, MEM_HOST, flags, NULL, c})) LEAVE(c, CUDA_ERROR_OUT_OF_MEMORY);
    *p = m;
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuMemFreeHost(void *p) {
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    struct alloc a;
    if (!remove_alloc((uintptr_t)p, MEM_HOST, &a)) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    free(p);
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
    struct ctx *c = NULL;
    CUresult r = enter_ctx(&c);
    if (r) return r;
    if (!d || flags) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&table_lock);
    struct alloc *a = find_alloc((uintptr_t)p);
    int ok = a && a->type == MEM_HOST && (a->flags & HOSTALLOC_DEVICEMAP);
    pthread_mutex_unlock(&table_lock);
    if (!ok) LEAVE(c, CUDA_ERROR_INVALID_VALUE);
    *d = (uintptr_t)p; /* unified addressing */
    LEAVE(c, CUDA_SUCCESS);
}
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr p) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&table_lock);
    struct alloc *a = find_alloc(p);
    struct alloc copy = a ? *a : (struct alloc){0};
    pthread_mutex_unlock(&table_lock);
    if (!a) return CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know (pageable) */
    switch (attribute) {
    case ATTR_MEMORY_TYPE: *(unsigned *)data = copy.type; return CUDA_SUCCESS;
    case ATTR_IS_MANAGED: *(int *)data = 0; return CUDA_SUCCESS;
    case ATTR_CONTEXT: *(void **)data = copy.ctx; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult copy_async(void *h, uintptr_t dst, uintptr_t src, size_t n) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    void *d = resolve(dst, n), *sr = resolve(src, n);
    if (!d || !sr) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    LEAVE(s->ctx, push(s, (struct cmd){.kind = CMD_COPY, .dst = d, .src = sr, .n = n}));
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *h) { return copy_async(h, (uintptr_t)dst, src, n); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *h) { return copy_async(h, dst, (uintptr_t)src, n); }
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void *h) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    void *d = resolve(dst, n * 4);
    if (!d) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    LEAVE(s->ctx, push(s, (struct cmd){.kind = CMD_SET32, .dst = d, .n = n, .value = v}));
}
static CUresult memop(void *h, CUdeviceptr addr, uint32_t v, unsigned flags, enum cmd_kind kind) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (memops_refused()) LEAVE(s->ctx, CUDA_ERROR_NOT_SUPPORTED);
    if (addr % 4) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    void *d = resolve(addr, 4);
    if (!d) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    LEAVE(s->ctx, push(s, (struct cmd){.kind = kind, .dst = d, .value = v, .flags = flags}));
}
CUresult cuStreamWriteValue32_v2(void *h, CUdeviceptr addr, uint32_t v, unsigned flags) {
    return memop(h, addr, v, flags, CMD_WRITE);
}
CUresult cuStreamWaitValue32_v2(void *h, CUdeviceptr addr, uint32_t v, unsigned flags) {
    if (flags & ~3u & ~(1u << 30)) return CUDA_ERROR_INVALID_VALUE; /* FLUSH (1<<30) accepted */
    return memop(h, addr, v, flags, CMD_WAIT);
}
CUresult cuLaunchHostFunc(void *h, CUhostFn fn, void *arg) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (!fn) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&s->lock);
    int capturing = s->capture != CAPTURE_NONE;
    pthread_mutex_unlock(&s->lock);
    /* A recorded host function takes its slot when a graph launch queues it (graphs.c). */
    if (!capturing && (r = take_host_fn_slot(s->ctx)) != CUDA_SUCCESS) LEAVE(s->ctx, r);
    r = push(s, (struct cmd){.kind = CMD_HOSTFN, .fn = fn, .arg = arg});
    if (r != CUDA_SUCCESS && !capturing) release_host_fn_slot(s->ctx);
    LEAVE(s->ctx, r);
}

/* Test hook (not a CUDA symbol): the context suffers a sticky error `e`, as after a kernel fault. */
CUresult cuStandinFailContext(void *ctx, CUresult e) {
    if (ctx != &primary || e == CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    primary.sticky = e;
    wake_launchers(&primary);
    return CUDA_SUCCESS;
}

/* A CPU stand-in for the part of the CUDA driver API that mpixstream (shim/src/enqueue/cuda.rs) and
 * the tests in tests/gpu/ call: same symbol names, signatures and error codes as libcuda.so.1, so the
 * library's normal probe (dlopen of libcuda.so.1, then cudarc's own search) finds it when its folder
 * is on LD_LIBRARY_PATH (given to those tests only). Built by tests/scripts/enqueue_cuda_standin.sh.
 *
 * What it models (docs/enqueue.md lists what only a real GPU shows):
 *  - streams: one worker thread per stream runs its commands in order, asynchronously to the host
 *    (copies, memsets, stream memory operations, host functions); cuStreamQuery/Synchronize; a
 *    destroyed stream's handle is refused (CUDA_ERROR_INVALID_HANDLE) while work already queued on
 *    it still runs, as the driver documents;
 *  - device memory (cuMemAlloc): an address range the host cannot touch (mapped PROT_NONE: a host
 *    access is a segmentation fault, as it is on a GPU), backed by memory only the stream workers
 *    use; pinned host memory (cuMemHostAlloc), whose device pointer is its host address (unified
 *    addressing); cuPointerGetAttribute tells them apart and refuses pageable memory;
 *  - cuStreamWriteValue32/cuStreamWaitValue32 (GEQ, EQ, AND, NOR) on pinned or device words; with
 *    CUDA_STANDIN_NO_MEMOPS=1 both return CUDA_ERROR_NOT_SUPPORTED (a device without stream memory
 *    operations), which drives mpixstream's host-function fallback;
 *  - cuLaunchHostFunc, run by the stream's worker in order (the stream waits for it);
 *  - contexts: a primary context per device, the current-context stack of each thread, and a sticky
 *    context error injected by the test hook cuStandinFailContext (not a CUDA symbol): after it,
 *    every call in the context returns that error and queued work is dropped, as after a GPU fault. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

enum { MEM_HOST = 1, MEM_DEVICE = 2 };                            /* CUmemorytype */
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8 }; /* CUpointer_attribute */
enum { WAIT_GEQ = 0, WAIT_EQ = 1, WAIT_AND = 2, WAIT_NOR = 3 };   /* CUstreamWaitValue_flags */
enum { HOSTALLOC_DEVICEMAP = 2 };

struct ctx {
    int device;
    volatile CUresult sticky; /* a sticky error: every call in the context fails with it */
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
    int running; /* the worker is executing a command */
    int destroyed;
    pthread_t worker;
};
#define STREAM_MAGIC 0x5757c0deu

struct alloc {
    uintptr_t base; /* the address the application sees */
    size_t size;
    int type;       /* MEM_HOST (pinned) or MEM_DEVICE */
    unsigned flags;
    void *backing;  /* device memory: where the bytes really are (only stream workers use it) */
    struct ctx *ctx;
};

static struct ctx primary = {0, CUDA_SUCCESS};
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static size_t nallocs, cap_allocs;
static struct stream **streams;
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
static int stream_live(struct stream *s) { /* table_lock held */
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i] == s) return !s->destroyed;
    return 0;
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
    case CMD_HOSTFN: c->fn(c->arg); break;
    }
}
static void *worker(void *arg) {
    struct stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->destroyed) pthread_cond_wait(&s->work, &s->lock);
        if (!s->head) break; /* destroyed and drained: the resources go with the work, as in CUDA */
        struct cmd *c = s->head;
        s->head = c->next;
        if (!s->head) s->tail = NULL;
        s->running = 1;
        pthread_mutex_unlock(&s->lock);
        if (s->ctx->sticky == CUDA_SUCCESS) run_cmd(s, c); /* after a fault: dropped */
        free(c);
        pthread_mutex_lock(&s->lock);
        s->running = 0;
        if (!s->head) pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Checks the stream handle and its context; 0 for the legacy default stream (NULL) is refused: the
 * tests and mpixstream use created streams. */
static CUresult get_stream(void *h, struct stream **out) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct stream *s = h;
    pthread_mutex_lock(&table_lock);
    int live = s && stream_live(s);
    pthread_mutex_unlock(&table_lock);
    if (!live) return CUDA_ERROR_INVALID_HANDLE;
    if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
    *out = s;
    return CUDA_SUCCESS;
}
static CUresult push(struct stream *s, struct cmd c) {
    struct cmd *n = malloc(sizeof *n);
    if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
    *n = c;
    n->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = n; else s->head = n;
    s->tail = n;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

/* ---- the API ---- */
CUresult cuInit(unsigned flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    initialised = 1;
    return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult e, const char **name) {
    static const struct { CUresult e; const char *n; } names[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS"}, {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
        {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"}, {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
        {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"}, {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"}, {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"}, {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
        {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    };
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
/* Calls that need a current context get it here (with its sticky error). */
static CUresult need_ctx(struct ctx **out) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct ctx *c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky != CUDA_SUCCESS) return c->sticky;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(void **out, unsigned flags) {
    (void)flags;
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = STREAM_MAGIC;
    s->ctx = c;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pthread_create(&s->worker, NULL, worker, s)) { free(s); return CUDA_ERROR_OUT_OF_MEMORY; }
    pthread_detach(s->worker);
    pthread_mutex_lock(&table_lock);
    if (nstreams == cap_streams) {
        size_t cap = cap_streams ? 2 * cap_streams : 16;
        struct stream **n = realloc(streams, cap * sizeof *n);
        if (!n) { pthread_mutex_unlock(&table_lock); return CUDA_ERROR_OUT_OF_MEMORY; }
        streams = n, cap_streams = cap;
    }
    streams[nstreams++] = s; /* kept (marked destroyed) so that a stale handle is recognised */
    pthread_mutex_unlock(&table_lock);
    *out = s;
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(void *h) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_NOT_INITIALIZED) return r;
    s = h;
    pthread_mutex_lock(&table_lock);
    s->destroyed = 1;
    pthread_mutex_unlock(&table_lock);
    pthread_mutex_lock(&s->lock);
    pthread_cond_signal(&s->work); /* the worker finishes what is queued, then exits */
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(void *h, void **ctx) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r) return r;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = s->ctx;
    return CUDA_SUCCESS;
}
CUresult cuStreamQuery(void *h) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r) return r;
    pthread_mutex_lock(&s->lock);
    int busy = s->head || s->running;
    pthread_mutex_unlock(&s->lock);
    return busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(void *h) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r) return r;
    pthread_mutex_lock(&s->lock);
    while ((s->head || s->running) && s->ctx->sticky == CUDA_SUCCESS) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->idle, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return s->ctx->sticky;
}

CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n) {
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!d || n == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (n + page - 1) / page * page;
    void *addr = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *backing = calloc(1, n);
    if (addr == MAP_FAILED || !backing) { free(backing); return CUDA_ERROR_OUT_OF_MEMORY; }
    if (!add_alloc((struct alloc){(uintptr_t)addr, len, MEM_DEVICE, 0, backing, c})) return CUDA_ERROR_OUT_OF_MEMORY;
    *d = (uintptr_t)addr;
    return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr d) {
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    struct alloc a;
    if (!remove_alloc(d, MEM_DEVICE, &a)) return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)a.base, a.size);
    free(a.backing);
    return CUDA_SUCCESS;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!p || n == 0 || (flags & ~7u)) return CUDA_ERROR_INVALID_VALUE;
    void *m = NULL;
    if (posix_memalign(&m, 4096, n)) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0, n);
    if (!add_alloc((struct alloc){(uintptr_t)m, n, MEM_HOST, flags, NULL, c})) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = m;
    return CUDA_SUCCESS;
}
CUresult cuMemFreeHost(void *p) {
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    struct alloc a;
    if (!remove_alloc((uintptr_t)p, MEM_HOST, &a)) return CUDA_ERROR_INVALID_VALUE;
    free(p);
    return CUDA_SUCCESS;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
    struct ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!d || flags) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&table_lock);
    struct alloc *a = find_alloc((uintptr_t)p);
    int ok = a && a->type == MEM_HOST && (a->flags & HOSTALLOC_DEVICEMAP);
    pthread_mutex_unlock(&table_lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    *d = (uintptr_t)p; /* unified addressing */
    return CUDA_SUCCESS;
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
    CUresult r = get_stream(h, &s);
    if (r) return r;
    void *d = resolve(dst, n), *sr = resolve(src, n);
    if (!d || !sr) return CUDA_ERROR_INVALID_VALUE;
    return push(s, (struct cmd){.kind = CMD_COPY, .dst = d, .src = sr, .n = n});
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *h) { return copy_async(h, (uintptr_t)dst, src, n); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *h) { return copy_async(h, dst, (uintptr_t)src, n); }
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void *h) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r) return r;
    void *d = resolve(dst, n * 4);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    return push(s, (struct cmd){.kind = CMD_SET32, .dst = d, .n = n, .value = v});
}
static CUresult memop(void *h, CUdeviceptr addr, uint32_t v, unsigned flags, enum cmd_kind kind) {
    struct stream *s;
    CUresult r = get_stream(h, &s);
    if (r) return r;
    if (memops_refused()) return CUDA_ERROR_NOT_SUPPORTED;
    if (addr % 4) return CUDA_ERROR_INVALID_VALUE;
    void *d = resolve(addr, 4);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    return push(s, (struct cmd){.kind = kind, .dst = d, .value = v, .flags = flags});
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
    CUresult r = get_stream(h, &s);
    if (r) return r;
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    return push(s, (struct cmd){.kind = CMD_HOSTFN, .fn = fn, .arg = arg});
}

/* Test hook (not a CUDA symbol): the context suffers a sticky error `e`, as after a kernel fault. */
CUresult cuStandinFailContext(void *ctx, CUresult e) {
    if (ctx != &primary || e == CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    primary.sticky = e;
    return CUDA_SUCCESS;
}

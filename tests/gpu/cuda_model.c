/* The CUDA behaviour the stand-in (tests/cuda_standin) models, checked against whatever libcuda.so.1
 * loads: on the stand-in each is asserted (it must model what docs/enqueue.md says it does); on a GPU
 * the documented ones are asserted and the rest reported ("seen: ..."), to compare the model with the
 * driver whenever a GPU machine is lent (scripts/device_check.sh). No MPI. Prints " No Errors" or
 * " Found N errors".
 *   1. host functions of one stream run in launch order;
 *   2. host functions of two streams run on one callback thread;
 *   3. a host function that waits for another stream's host function deadlocks (it gives up after 1 s);
 *   4. with a host function blocked, how many more launches return, and whether a cuStreamQuery of
 *      another stream, from another thread, waits behind the blocked launch;
 *   5. a destroyed stream with work still queued: what a call with its handle returns;
 *   6. capture: work queued while capturing runs on each graph launch, not at capture; a
 *      cuStreamQuery of a capturing stream fails and invalidates the capture. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUstream;
static CUresult (*Init)(unsigned), (*DeviceGet)(int *, int), (*Retain)(void **, int), (*SetCurrent)(void *),
    (*Create)(CUstream *, unsigned), (*Destroy)(CUstream), (*Sync)(CUstream), (*Query)(CUstream),
    (*Launch)(CUstream, void (*)(void *), void *), (*Name)(CUresult, const char **), (*Begin)(CUstream, int),
    (*End)(CUstream, void **), (*IsCapturing)(CUstream, int *), (*Instantiate)(void **, void *, unsigned long long),
    (*GraphLaunch)(void *, CUstream);
static int standin, errs;
static void *ctx;

static const char *name(CUresult r) {
    const char *n = "?";
    Name(r, &n);
    return n ? n : "?";
}
#define CU(call) do { CUresult r_ = (call); if (r_) { printf("%s: %s\n", #call, name(r_)); exit(2); } } while (0)
/* Asserted on the stand-in (and, with `always`, on a GPU too); otherwise reported. */
static void expect(int always, int ok, const char *what, const char *seen) {
    if (ok) printf("  ok: %s\n", what);
    else if (standin || always) printf("  FAILED: %s (seen: %s)\n", what, seen), errs++;
    else printf("  seen on this driver: not %s (%s)\n", what, seen);
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int order[2], norder;
static void record(void *v) { order[norder++] = (int)(intptr_t)v; }
static pthread_t who[2];
static void whoami(void *v) { who[(intptr_t)v] = pthread_self(); }
static volatile int flag_b, b_ran_while_a_waited, gate;
static void wait_for_b(void *v) {
    (void)v;
    double t0 = now();
    while (!__atomic_load_n(&flag_b, __ATOMIC_ACQUIRE) && now() - t0 < 1.0) usleep(1000);
    b_ran_while_a_waited = __atomic_load_n(&flag_b, __ATOMIC_ACQUIRE);
}
static void set_b(void *v) { (void)v; __atomic_store_n(&flag_b, 1, __ATOMIC_RELEASE); }
static void hold(void *v) { (void)v; while (!__atomic_load_n(&gate, __ATOMIC_ACQUIRE)) usleep(200); }
static void nothing(void *v) { (void)v; }
static volatile int launched, queried;
static CUstream sa, sb;
static void *launcher(void *v) {
    (void)v;
    SetCurrent(ctx);
    for (int i = 0; i < 1000; i++) { if (Launch(sa, nothing, NULL)) break; __atomic_add_fetch(&launched, 1, __ATOMIC_RELEASE); }
    return NULL;
}
static void *querier(void *v) { (void)v; SetCurrent(ctx); Query(sb); __atomic_store_n(&queried, 1, __ATOMIC_RELEASE); return NULL; }
static volatile int runs;
static void count(void *v) { (void)v; __atomic_add_fetch(&runs, 1, __ATOMIC_RELEASE); }

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { printf("no libcuda.so.1: %s\n", dlerror()); return 2; }
#define SYM(v, s) do { *(void **)&v = dlsym(h, s); if (!v) { printf("libcuda has no %s\n", s); return 2; } } while (0)
    SYM(Init, "cuInit"); SYM(DeviceGet, "cuDeviceGet"); SYM(Retain, "cuDevicePrimaryCtxRetain");
    SYM(SetCurrent, "cuCtxSetCurrent"); SYM(Create, "cuStreamCreate"); SYM(Destroy, "cuStreamDestroy_v2");
    SYM(Sync, "cuStreamSynchronize"); SYM(Query, "cuStreamQuery"); SYM(Launch, "cuLaunchHostFunc");
    SYM(Name, "cuGetErrorName"); SYM(Begin, "cuStreamBeginCapture_v2"); SYM(End, "cuStreamEndCapture");
    SYM(IsCapturing, "cuStreamIsCapturing"); SYM(Instantiate, "cuGraphInstantiateWithFlags");
    SYM(GraphLaunch, "cuGraphLaunch");
    standin = dlsym(h, "cuStandinFailContext") != NULL;
    printf("driver: %s\n", standin ? "the CPU stand-in (every line asserted)" : "a real one (documented lines asserted)");
    int dev;
    char seen[128];
    CU(Init(0)); CU(DeviceGet(&dev, 0)); CU(Retain(&ctx, dev)); CU(SetCurrent(ctx));
    CU(Create(&sa, 1)); CU(Create(&sb, 1));

    CU(Launch(sa, record, (void *)1)); CU(Launch(sa, record, (void *)2)); CU(Sync(sa));
    snprintf(seen, sizeof seen, "%d then %d", order[0], order[1]);
    expect(1, norder == 2 && order[0] == 1 && order[1] == 2, "1. one stream's host functions run in launch order", seen);

    CU(Launch(sa, whoami, (void *)0)); CU(Sync(sa)); CU(Launch(sb, whoami, (void *)1)); CU(Sync(sb));
    expect(0, pthread_equal(who[0], who[1]), "2. two streams' host functions run on one thread", "two threads");

    CU(Launch(sa, wait_for_b, NULL));
    usleep(50000); /* stream a's host function is running */
    CU(Launch(sb, set_b, NULL)); CU(Sync(sa)); CU(Sync(sb));
    expect(0, !b_ran_while_a_waited, "3. a host function waiting for another stream's deadlocks", "the other ran");

    gate = 0;
    CU(Launch(sa, hold, NULL));
    pthread_t lt, qt;
    pthread_create(&lt, NULL, launcher, NULL);
    usleep(500000);
    int before = __atomic_load_n(&launched, __ATOMIC_ACQUIRE);
    pthread_create(&qt, NULL, querier, NULL);
    usleep(200000);
    int query_blocked = !__atomic_load_n(&queried, __ATOMIC_ACQUIRE);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    pthread_join(lt, NULL); pthread_join(qt, NULL); CU(Sync(sa));
    printf("  seen: with a host function blocked, %d more launches returned within 0.5 s; a query of another stream "
           "from another thread %s\n", before, query_blocked ? "waited behind the blocked launch" : "returned");
    snprintf(seen, sizeof seen, "%d launches, query %s", before, query_blocked ? "waited" : "returned");
    expect(0, before == 63 && query_blocked, "4. the 65th host function's launch blocks, and other calls behind it", seen);

    CUstream sc;
    gate = 0;
    CU(Create(&sc, 1)); CU(Launch(sc, hold, NULL)); CU(Destroy(sc));
    CUresult r = Query(sc);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    snprintf(seen, sizeof seen, "%s", name(r));
    printf("  seen: a call on a destroyed stream with work queued returns %s\n", seen);
    expect(0, r == 201, "5. a destroyed stream answers CUDA_ERROR_INVALID_CONTEXT (as an H200 did)", seen);
    usleep(100000); /* its work done, the handle is stale: never used again */

    int st = -1;
    void *g = NULL, *e = NULL;
    CU(Begin(sb, 0)); CU(IsCapturing(sb, &st)); CU(Launch(sb, count, NULL)); usleep(50000);
    int at_capture = runs;
    CU(End(sb, &g)); CU(Instantiate(&e, g, 0)); CU(GraphLaunch(e, sb)); CU(GraphLaunch(e, sb)); CU(Sync(sb));
    snprintf(seen, sizeof seen, "status %d, %d runs at capture, %d after two launches", st, at_capture, runs);
    expect(1, st == 1 && at_capture == 0 && runs == 2, "6. captured work runs on each graph launch, not at capture", seen);
    CU(Begin(sb, 0));
    r = Query(sb);
    CUresult ended = End(sb, &g);
    snprintf(seen, sizeof seen, "query %s, end %s", name(r), name(ended));
    expect(0, r == 900 && ended == 901, "6. a query of a capturing stream fails and invalidates the capture", seen);
    printf(errs ? " Found %d errors\n" : " No Errors\n", errs);
    return errs != 0;
}

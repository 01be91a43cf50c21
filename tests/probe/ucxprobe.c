/*
 * ucxprobe: test-only LD_PRELOAD interposer that counts UCX (UCP) traffic per
 * worker, so that tests can prove which MPICH VCI a message went through.
 *
 * Why this works: MPICH's ch4/ucx netmod creates one ucp_worker per VCI, in
 * VCI order, and calls the ucp_* entry points through the PLT of libmpi /
 * libmpich, so a preloaded definition wins and dlsym(RTLD_NEXT) reaches the
 * real UCX (Debian's 1.13 or the 1.20 bundled with PyPI MPICH 5).
 *
 *   worker index = creation order of ucp_worker_create (== VCI index)
 *   sends        = ucp_tag_send_nbx + ucp_tag_send_sync_nbx, counted on the
 *                  worker that owns the ep (ep -> worker from ucp_ep_create)
 *   recvs        = ucp_tag_recv_nbx + ucp_tag_msg_recv_nbx, on the worker given
 *   am_sends     = ucp_am_send_nbx + ucp_am_send_nb (MPICH's active messages)
 *
 * Output: only if UCXPROBE_DIR is set.  At exit (atexit, registered when the
 * first worker is created, so launcher processes that inherit LD_PRELOAD but
 * never touch UCX write nothing) one file UCXPROBE_DIR/probe.<host>.<pid>.txt.
 * UCXPROBE_VERBOSE=1 also logs worker/ep creation to stderr, which is how one
 * sees whether a VCI's worker is created at MPI_Init or lazily; =2 also logs
 * every counted operation.
 *
 * Only fields of ucp_request_param_t that exist since UCX 1.10 are read
 * (op_attr_mask, cb, datatype, user_data, recv_info); UCX keeps that layout
 * stable across 1.x, and the struct is copied only when no newer field bit
 * is set (see can_copy_param).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#define MAX_WORKERS 256        /* MPICH allows at most 64 VCIs */
#define EP_TABLE    (1u << 16) /* open addressing; eps = VCI pairs x peers */

typedef struct {
    _Atomic(ucp_worker_h) worker;
    atomic_ulong sends, send_bytes, ssends, recvs, recv_bytes, mrecvs;
    atomic_ulong am_sends, am_bytes, eps, generic_ops;
} wstat_t;

/* W[MAX_WORKERS] collects traffic on eps we never saw created ("worker=-1"). */
static wstat_t W[MAX_WORKERS + 1];
static atomic_int n_workers;
static int enabled = -1; /* UCXPROBE_DIR set? decided once */
static int verbose;
static atomic_flag exit_registered = ATOMIC_FLAG_INIT;

static struct {
    _Atomic(ucp_ep_h) key;
    atomic_int worker;
} ep_map[EP_TABLE];

static void write_report(void);

static int is_enabled(void)
{
    if (enabled < 0) {
        const char *d = getenv("UCXPROBE_DIR");
        const char *v = getenv("UCXPROBE_VERBOSE");
        verbose = v ? atoi(v) : 0;
        enabled = d && *d;
    }
    return enabled;
}

__attribute__((constructor)) static void probe_init(void) { is_enabled(); }

/* Resolve the real UCX symbol lazily (libucp may be dlopen'ed after us).  Racing
 * threads all store the same pointer, so the unsynchronised cache is benign. */
#define REAL(name)                                                              \
    static __typeof__(&name) real_##name;                                       \
    if (!real_##name) {                                                         \
        real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name);               \
        if (!real_##name) {                                                     \
            fprintf(stderr, "ucxprobe: cannot find %s\n", #name);               \
            abort();                                                            \
        }                                                                       \
    }

static int worker_index(ucp_worker_h w)
{
    /* Newest first: if an address is reused after destroy, the new one wins. */
    for (int i = atomic_load(&n_workers) - 1; i >= 0; i--)
        if (i < MAX_WORKERS && atomic_load(&W[i].worker) == w)
            return i;
    return MAX_WORKERS;
}

static size_t ep_slot(ucp_ep_h ep)
{
    uintptr_t h = (uintptr_t)ep;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (EP_TABLE - 1);
}

static void ep_insert(ucp_ep_h ep, int widx)
{
    for (size_t n = 0, s = ep_slot(ep); n < EP_TABLE; n++, s = (s + 1) & (EP_TABLE - 1)) {
        ucp_ep_h cur = atomic_load(&ep_map[s].key);
        if (cur == NULL &&
            atomic_compare_exchange_strong(&ep_map[s].key, &cur, ep))
            cur = ep;
        if (cur == ep) { /* new, or an address reused after ep close */
            atomic_store(&ep_map[s].worker, widx);
            return;
        }
    }
    fprintf(stderr, "ucxprobe: ep table full\n");
}

static wstat_t *ep_stat(ucp_ep_h ep)
{
    for (size_t n = 0, s = ep_slot(ep); n < EP_TABLE; n++, s = (s + 1) & (EP_TABLE - 1)) {
        ucp_ep_h cur = atomic_load(&ep_map[s].key);
        if (cur == ep)
            return &W[atomic_load(&ep_map[s].worker)];
        if (cur == NULL)
            break;
    }
    return &W[MAX_WORKERS];
}

/* Bytes described by (buffer, count, datatype).  Generic (non-contiguous,
 * pack-callback) datatypes have no size we can read: count 0 bytes and tally
 * the operation in generic_ops instead. */
static size_t dt_bytes(wstat_t *st, const void *buf, size_t count, ucp_datatype_t dt)
{
    switch (dt & UCP_DATATYPE_CLASS_MASK) {
    case UCP_DATATYPE_CONTIG:
        return count * (size_t)(dt >> UCP_DATATYPE_SHIFT);
    case UCP_DATATYPE_IOV: {
        size_t b = 0;
        for (size_t i = 0; i < count; i++)
            b += ((const ucp_dt_iov_t *)buf)[i].length;
        return b;
    }
    default:
        atomic_fetch_add(&st->generic_ops, 1);
        return 0;
    }
}

static ucp_datatype_t param_dt(const ucp_request_param_t *p)
{
    return (p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE)) ? p->datatype
                                                                : ucp_dt_make_contig(1);
}

/* ---- workers and endpoints ---------------------------------------------- */

ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t *params,
                               ucp_worker_h *worker_p)
{
    REAL(ucp_worker_create);
    ucs_status_t st = real_ucp_worker_create(context, params, worker_p);
    if (st != UCS_OK || !is_enabled())
        return st;
    int idx = atomic_fetch_add(&n_workers, 1);
    if (idx < MAX_WORKERS)
        atomic_store(&W[idx].worker, *worker_p);
    if (!atomic_flag_test_and_set(&exit_registered))
        atexit(write_report);
    if (verbose)
        fprintf(stderr, "ucxprobe[%d]: worker %d created (%p)\n", (int)getpid(), idx,
                (void *)*worker_p);
    return st;
}

ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params, ucp_ep_h *ep_p)
{
    REAL(ucp_ep_create);
    ucs_status_t st = real_ucp_ep_create(worker, params, ep_p);
    if (st != UCS_OK || !is_enabled())
        return st;
    int idx = worker_index(worker);
    ep_insert(*ep_p, idx);
    atomic_fetch_add(&W[idx].eps, 1);
    if (verbose)
        fprintf(stderr, "ucxprobe[%d]: ep %p on worker %d\n", (int)getpid(), (void *)*ep_p,
                idx == MAX_WORKERS ? -1 : idx);
    return st;
}

/* ---- sends: counted when posted, on the ep's worker ----------------------- */

static void count_send(ucp_ep_h ep, const void *buf, size_t count,
                       const ucp_request_param_t *param, int sync)
{
    wstat_t *s = ep_stat(ep);
    atomic_fetch_add(&s->sends, 1);
    atomic_fetch_add(&s->send_bytes, dt_bytes(s, buf, count, param_dt(param)));
    if (sync)
        atomic_fetch_add(&s->ssends, 1);
    if (verbose > 1)
        fprintf(stderr, "ucxprobe[%d]: %s worker %d count %zu\n", (int)getpid(),
                sync ? "tag_send_sync" : "tag_send", (int)(s - W), count);
}

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t *param)
{
    REAL(ucp_tag_send_nbx);
    if (is_enabled())
        count_send(ep, buffer, count, param, 0);
    return real_ucp_tag_send_nbx(ep, buffer, count, tag, param);
}

ucs_status_ptr_t ucp_tag_send_sync_nbx(ucp_ep_h ep, const void *buffer, size_t count,
                                       ucp_tag_t tag, const ucp_request_param_t *param)
{
    REAL(ucp_tag_send_sync_nbx);
    if (is_enabled())
        count_send(ep, buffer, count, param, 1);
    return real_ucp_tag_send_sync_nbx(ep, buffer, count, tag, param);
}

ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void *header,
                                 size_t header_length, const void *buffer, size_t count,
                                 const ucp_request_param_t *param)
{
    REAL(ucp_am_send_nbx);
    if (is_enabled()) {
        wstat_t *s = ep_stat(ep);
        atomic_fetch_add(&s->am_sends, 1);
        atomic_fetch_add(&s->am_bytes,
                         header_length + dt_bytes(s, buffer, count, param_dt(param)));
    }
    return real_ucp_am_send_nbx(ep, id, header, header_length, buffer, count, param);
}

/* Deprecated, but MPICH 4.0.x and 5.0.x both still link it. */
ucs_status_ptr_t ucp_am_send_nb(ucp_ep_h ep, uint16_t id, const void *buffer, size_t count,
                                ucp_datatype_t datatype, ucp_send_callback_t cb, unsigned flags)
{
    REAL(ucp_am_send_nb);
    if (is_enabled()) {
        wstat_t *s = ep_stat(ep);
        atomic_fetch_add(&s->am_sends, 1);
        atomic_fetch_add(&s->am_bytes, dt_bytes(s, buffer, count, datatype));
    }
    return real_ucp_am_send_nb(ep, id, buffer, count, datatype, cb, flags);
}

/* ---- receives: counted when posted; bytes = received length ------------------
 * The posted count is only the buffer's capacity, so when MPICH passes a
 * completion callback we chain our own in front of it to learn the real
 * length.  If the recv completes immediately (no request returned), the
 * callback never runs: use recv_info when given, else the capacity. */

typedef struct {
    ucp_tag_recv_nbx_callback_t cb;
    void *user_data;
    wstat_t *st;
} recv_ctx_t;

static void recv_done(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                      void *arg)
{
    recv_ctx_t c = *(recv_ctx_t *)arg;
    free(arg);
    if (status == UCS_OK && info)
        atomic_fetch_add(&c.st->recv_bytes, info->length);
    c.cb(request, status, info, c.user_data);
}

/* Copying a ucp_request_param_t of the header we compiled against is safe as
 * long as the caller set no field bit newer than memh (bit 8). */
static int can_copy_param(const ucp_request_param_t *p)
{
    return p && (p->op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) &&
           !(p->op_attr_mask & 0xfe00u);
}

static ucs_status_ptr_t counted_recv(ucp_worker_h worker, void *buffer, size_t count,
                                     const ucp_request_param_t *param, int mrecv,
                                     ucs_status_ptr_t (*call)(const ucp_request_param_t *,
                                                             void *),
                                     void *call_arg)
{
    wstat_t *s = &W[worker_index(worker)];
    atomic_fetch_add(&s->recvs, 1);
    if (mrecv)
        atomic_fetch_add(&s->mrecvs, 1);
    if (verbose > 1)
        fprintf(stderr, "ucxprobe[%d]: %s worker %d count %zu\n", (int)getpid(),
                mrecv ? "tag_msg_recv" : "tag_recv", (int)(s - W), count);
    size_t cap = dt_bytes(s, buffer, count, param_dt(param));

    recv_ctx_t *ctx = can_copy_param(param) ? malloc(sizeof *ctx) : NULL;
    if (!ctx) {
        ucs_status_ptr_t r = call(param, call_arg);
        if (!UCS_PTR_IS_ERR(r))
            atomic_fetch_add(&s->recv_bytes, cap); /* upper bound, best we know */
        return r;
    }
    ucp_request_param_t p = *param;
    ctx->cb = param->cb.recv;
    ctx->user_data = (param->op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA) ? param->user_data
                                                                         : NULL;
    ctx->st = s;
    p.cb.recv = recv_done;
    p.user_data = ctx;
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_USER_DATA;
    ucs_status_ptr_t r = call(&p, call_arg);
    if (!UCS_PTR_IS_PTR(r)) { /* completed at once or failed: no callback */
        free(ctx);
        if (r == NULL)
            atomic_fetch_add(&s->recv_bytes,
                             (p.op_attr_mask & UCP_OP_ATTR_FIELD_RECV_INFO) && !mrecv
                                 ? p.recv_info.tag_info->length
                                 : cap);
    }
    return r;
}

struct tag_recv_args { ucp_worker_h w; void *buf; size_t count; ucp_tag_t tag, mask; };
struct msg_recv_args { ucp_worker_h w; void *buf; size_t count; ucp_tag_message_h msg; };

static ucs_status_ptr_t call_tag_recv(const ucp_request_param_t *p, void *arg)
{
    struct tag_recv_args *a = arg;
    REAL(ucp_tag_recv_nbx);
    return real_ucp_tag_recv_nbx(a->w, a->buf, a->count, a->tag, a->mask, p);
}

static ucs_status_ptr_t call_msg_recv(const ucp_request_param_t *p, void *arg)
{
    struct msg_recv_args *a = arg;
    REAL(ucp_tag_msg_recv_nbx);
    return real_ucp_tag_msg_recv_nbx(a->w, a->buf, a->count, a->msg, p);
}

ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void *buffer, size_t count,
                                  ucp_tag_t tag, ucp_tag_t tag_mask,
                                  const ucp_request_param_t *param)
{
    struct tag_recv_args a = {worker, buffer, count, tag, tag_mask};
    if (!is_enabled())
        return call_tag_recv(param, &a);
    return counted_recv(worker, buffer, count, param, 0, call_tag_recv, &a);
}

ucs_status_ptr_t ucp_tag_msg_recv_nbx(ucp_worker_h worker, void *buffer, size_t count,
                                      ucp_tag_message_h message,
                                      const ucp_request_param_t *param)
{
    struct msg_recv_args a = {worker, buffer, count, message};
    if (!is_enabled())
        return call_msg_recv(param, &a);
    return counted_recv(worker, buffer, count, param, 1, call_msg_recv, &a);
}

/* ---- report --------------------------------------------------------------- */

static const char *rank_env(const char **which)
{
    static const char *names[] = {"PMI_RANK", "PMIX_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            *which = names[i];
            return v;
        }
    }
    *which = "none";
    return "-1";
}

static void write_stat(FILE *f, int idx, wstat_t *s)
{
    fprintf(f,
            "worker=%d sends=%lu send_bytes=%lu recvs=%lu recv_bytes=%lu eps=%lu"
            " ssends=%lu mrecvs=%lu am_sends=%lu am_bytes=%lu generic_ops=%lu\n",
            idx, atomic_load(&s->sends), atomic_load(&s->send_bytes), atomic_load(&s->recvs),
            atomic_load(&s->recv_bytes), atomic_load(&s->eps), atomic_load(&s->ssends),
            atomic_load(&s->mrecvs), atomic_load(&s->am_sends), atomic_load(&s->am_bytes),
            atomic_load(&s->generic_ops));
}

static void write_report(void)
{
    const char *dir = getenv("UCXPROBE_DIR");
    if (!dir || !*dir)
        return;
    char host[256] = "unknown", path[4096], tmp[4200];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/probe.%s.%d.txt", dir, host, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror("ucxprobe: cannot write report");
        return;
    }
    const char *which, *rank = rank_env(&which);
    int n = atomic_load(&n_workers);
    fprintf(f, "rank=%s rank_source=%s pid=%d host=%s workers=%d\n", rank, which,
            (int)getpid(), host, n);
    for (int i = 0; i < n && i < MAX_WORKERS; i++)
        write_stat(f, i, &W[i]);
    wstat_t *u = &W[MAX_WORKERS];
    if (atomic_load(&u->sends) || atomic_load(&u->am_sends) || atomic_load(&u->recvs))
        write_stat(f, -1, u);
    fclose(f);
    rename(tmp, path); /* readers never see a half-written report */
}

/* Stream capture and graph launch (the stand-in, tests/cuda_standin), as far as a linear recording:
 * between cuStreamBeginCapture_v2 and cuStreamEndCapture, work queued on the stream is recorded, not
 * run; cuStreamIsCapturing tells; cuStreamQuery/cuStreamSynchronize of a capturing stream fail with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture (cuda_standin.c), after which every
 * enqueue on it fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and cuStreamEndCapture returns that
 * error and no graph. cuGraphInstantiateWithFlags copies the recording; each cuGraphLaunch queues it
 * again on a stream (host functions take their slots then). */
#define _GNU_SOURCE
#include "standin.h"
#include <stdlib.h>

struct graph {
    struct cmd *cmds;
};

#define LEAVE(c, r) do { leave(c); return (r); } while (0)

CUresult cuStreamBeginCapture_v2(void *h, int mode) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (mode < 0 || mode > 2) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&s->lock);
    r = s->capture != CAPTURE_NONE ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) s->capture = CAPTURE_ACTIVE;
    pthread_mutex_unlock(&s->lock);
    LEAVE(s->ctx, r);
}
CUresult cuStreamIsCapturing(void *h, int *status) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (!status) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&s->lock);
    *status = s->capture;
    pthread_mutex_unlock(&s->lock);
    LEAVE(s->ctx, CUDA_SUCCESS);
}
CUresult cuStreamEndCapture(void *h, void **graph) {
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    if (!graph) LEAVE(s->ctx, CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&s->lock);
    int state = s->capture;
    struct cmd *cmds = s->cap_head;
    s->cap_head = s->cap_tail = NULL;
    s->capture = CAPTURE_NONE;
    pthread_mutex_unlock(&s->lock);
    *graph = NULL;
    if (state == CAPTURE_NONE) LEAVE(s->ctx, CUDA_ERROR_ILLEGAL_STATE);
    if (state == CAPTURE_INVALIDATED) { free_cmds(cmds); LEAVE(s->ctx, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED); }
    struct graph *g = malloc(sizeof *g);
    if (!g) { free_cmds(cmds); LEAVE(s->ctx, CUDA_ERROR_OUT_OF_MEMORY); }
    g->cmds = cmds;
    *graph = g;
    LEAVE(s->ctx, CUDA_SUCCESS);
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    (void)flags;
    if (!exec || !graph) return CUDA_ERROR_INVALID_VALUE;
    struct graph *g = graph, *e = malloc(sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->cmds = copy_cmds(g->cmds);
    if (g->cmds && !e->cmds) { free(e); return CUDA_ERROR_OUT_OF_MEMORY; }
    *exec = e;
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(void *exec, void *h) {
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    struct stream *s;
    CUresult r = enter_stream(h, &s);
    if (r) return r;
    for (const struct cmd *c = ((struct graph *)exec)->cmds; c && r == CUDA_SUCCESS; c = c->next) {
        if (c->kind == CMD_HOSTFN && (r = take_host_fn_slot(s->ctx)) != CUDA_SUCCESS) break;
        r = push(s, *c);
        if (r != CUDA_SUCCESS && c->kind == CMD_HOSTFN) release_host_fn_slot(s->ctx);
    }
    LEAVE(s->ctx, r);
}
static CUresult destroy(void *g) {
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    free_cmds(((struct graph *)g)->cmds);
    free(g);
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(void *exec) { return destroy(exec); }
CUresult cuGraphDestroy(void *graph) { return destroy(graph); }

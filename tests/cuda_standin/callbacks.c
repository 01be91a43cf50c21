/* Host functions as CUDA runs them (the stand-in, tests/cuda_standin): one callback thread per context
 * runs the host functions of every stream of the context, in the order the streams reach them; the
 * stream that reached one waits until it returned. So a host function that blocks holds the host
 * functions of every other stream of the process ("host functions without a mandated order, such as in
 * independent streams, execute in undefined order and may be serialized": CUDA's documentation of
 * cuLaunchHostFunc), and one that waits for another stream's host function deadlocks, as on a GPU.
 *
 * At most HOSTFN_SLOTS host functions per context are launched and not yet returned; a further launch
 * waits for one to return and, while it waits, keeps the context's driver lock, so every other driver
 * call on the context, from any thread and on any stream, waits behind it. (A real driver's queues are
 * finite and CUDA documents that any API call may block on the unavailability of internal resources;
 * the number is this model's, not a measurement: tests/gpu/cuda_model.c reports it on a GPU.) */
#define _GNU_SOURCE
#include "standin.h"
#include <stdlib.h>

#define HOSTFN_SLOTS 64

static void *callback_thread(void *arg) {
    struct ctx *c = arg;
    pthread_mutex_lock(&c->cb_lock);
    for (;;) {
        while (!c->cb_head) pthread_cond_wait(&c->cb_work, &c->cb_lock);
        struct hostcall *h = c->cb_head;
        c->cb_head = h->next;
        if (!c->cb_head) c->cb_tail = NULL;
        pthread_mutex_unlock(&c->cb_lock);
        /* Not called once the context has failed (cuLaunchHostFunc's documentation). */
        if (c->sticky == CUDA_SUCCESS) h->fn(h->arg);
        pthread_mutex_lock(&c->cb_lock);
        h->done = 1;
        c->hostfns--;
        pthread_cond_broadcast(&c->cb_done);
        pthread_cond_broadcast(&c->cb_slot);
    }
    return NULL;
}

/* The stream's worker reached a host function: hand it to the context's callback thread (started at
 * the first) and wait until it returned. */
void run_host_fn(struct ctx *c, CUhostFn fn, void *arg) {
    struct hostcall h = {fn, arg, 0, NULL};
    pthread_mutex_lock(&c->cb_lock);
    if (!c->cb_started) {
        if (pthread_create(&c->cb_thread, NULL, callback_thread, c) != 0) abort();
        pthread_detach(c->cb_thread);
        c->cb_started = 1;
    }
    if (c->cb_tail) c->cb_tail->next = &h; else c->cb_head = &h;
    c->cb_tail = &h;
    pthread_cond_signal(&c->cb_work);
    while (!h.done) pthread_cond_wait(&c->cb_done, &c->cb_lock);
    pthread_mutex_unlock(&c->cb_lock);
}

void release_host_fn_slot(struct ctx *c) {
    pthread_mutex_lock(&c->cb_lock);
    c->hostfns--;
    pthread_cond_broadcast(&c->cb_slot);
    pthread_mutex_unlock(&c->cb_lock);
}

/* A launch (its caller holds the context's api lock, and keeps it while this waits). */
CUresult take_host_fn_slot(struct ctx *c) {
    pthread_mutex_lock(&c->cb_lock);
    while (c->hostfns >= HOSTFN_SLOTS && c->sticky == CUDA_SUCCESS) pthread_cond_wait(&c->cb_slot, &c->cb_lock);
    CUresult r = c->sticky;
    if (r == CUDA_SUCCESS) c->hostfns++;
    pthread_mutex_unlock(&c->cb_lock);
    return r;
}

void wake_launchers(struct ctx *c) {
    pthread_mutex_lock(&c->cb_lock);
    pthread_cond_broadcast(&c->cb_slot);
    pthread_mutex_unlock(&c->cb_lock);
}

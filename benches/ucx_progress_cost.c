/* Instructions per ucp_worker_progress call, UCX alone and with libmpixstream.so preloaded (its
 * interposer outside MPI_Init: the pass-through every progress call of MPICH's ch4:ucx takes after
 * MPI_Init). One UCX context and worker, no peer: each call turns an idle worker. Counted with callgrind
 * over progress_loop (benches/ucx_progress_cost.sh).
 *   ucx_progress_cost N    -> N progress calls in progress_loop, after N/10 of warm-up */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

__attribute__((noinline)) unsigned progress_loop(ucp_worker_h w, long n)
{
    unsigned events = 0;
    for (long i = 0; i < n; i++)
        events += ucp_worker_progress(w);
    return events;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    ucp_params_t params;
    memset(&params, 0, sizeof params);
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h ctx;
    if (ucp_init(&params, NULL, &ctx) != UCS_OK) {
        fprintf(stderr, "ucp_init failed\n");
        return 1;
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    ucp_worker_h w;
    if (ucp_worker_create(ctx, &wp, &w) != UCS_OK) {
        fprintf(stderr, "ucp_worker_create failed\n");
        return 1;
    }
    unsigned events = progress_loop(w, n / 10);
    events += progress_loop(w, n);
    printf("%ld progress calls, %u events\n", n + n / 10, events);
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    return 0;
}

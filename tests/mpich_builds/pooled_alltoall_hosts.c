/* tests/c/multiplex_alltoall.c's traffic as mpixstream's pooled layout carries it (docs/multiplex.md:
 * the serial backend, and the native one on MPICH 4.1, whose indexed traffic runs on the implicit pool),
 * WITHOUT mpixstream: S dups of MPI_COMM_WORLD P_0..P_{S-1}, one per destination index; rank r runs
 * 2 + r % 2 threads ("indices"); thread i first posts an MPI_Isend of N 64-int messages to every index
 * j of every other rank, on P_j with tag (seq % 3) * S + i, then receives its own (P_i) with
 * MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG) + MPI_Mrecv, checking each (rank, source index) pair's
 * order, then waits for its sends. "now": each probed message received at once; "hold": as
 * mpixstream's matching engine did before it bounded the handles it holds, the first R messages of
 * every pair first (pairs in reverse order), every other message probed meanwhile held as its
 * MPI_Message, then the rest. 2026-12-05, 2 x 2 simulated hosts, N = 200: "now" completes, "hold" hangs
 * on MPICH 4.1.3, 5.0.2 over ofi and Intel MPI 2021.19 (completes with FI_TCP_MAX_SAVED=4096, and on
 * one host). Run: tests/mpich_builds/unexpected_hosts.sh.
 *   pooled_alltoall_hosts [N [now|hold]]   (default 200 now) rank 0 prints " No Errors" and the time */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
enum { LEN = 64, S = 3, R = 4 };
static int rank, size, nmsg, errors, hold;
static MPI_Comm pj[S];
static int count_of(int r) { return 2 + r % 2; }
static void *index_thread(void *p) {
    int me = (int)(long)p, targets = 0;
    for (int q = 0; q < size; q++)
        if (q != rank) targets += count_of(q);
    long nsend = (long)targets * nmsg, s = 0;
    int *sbuf = malloc(sizeof(int) * LEN * nsend);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * nsend);
    for (int seq = 0; seq < nmsg; seq++)
        for (int q = 0; q < size; q++)
            for (int dj = 0; q != rank && dj < count_of(q); dj++, s++) {
                int *b = &sbuf[s * LEN];
                b[0] = rank, b[1] = me, b[2] = seq;
                for (int k = 3; k < LEN; k++) b[k] = seq * 7 + k;
                MPI_Isend(b, LEN, MPI_INT, q, (seq % 3) * S + me, pj[dj], &sreq[s]);
            }
    int next[64][S] = {{0}}, in[LEN];
    /* "hold": the engine's order. First the first R messages of every (rank, source index) pair, pairs
     * in reverse order, each taken from the messages probed so far or probed for, the others kept as
     * matched-probe handles (MPI_Message), not received; then the rest, the held ones first. */
    long nheld = 0, got = 0;
    struct held { MPI_Message m; int src, tag; } *held = malloc(sizeof(struct held) * (nsend + 1));
    for (int q = size - 1; hold && q >= 0; q--)
        for (int si = count_of(q) - 1; q != rank && si >= 0; si--)
            for (int seq = 0; seq < R && seq < nmsg; seq++) {
                long h = 0;
                for (;; h++) {
                    if (h == nheld) { /* probe for one more */
                        int flag = 0;
                        MPI_Status st;
                        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, pj[me], &flag, &held[h].m, &st);
                        if (!flag) { h--; continue; }
                        held[h].src = st.MPI_SOURCE, held[h].tag = st.MPI_TAG, nheld++;
                    }
                    if (held[h].src == q && held[h].tag == (seq % 3) * S + si) break;
                }
                MPI_Mrecv(in, LEN, MPI_INT, &held[h].m, MPI_STATUS_IGNORE);
                if (in[0] != q || in[1] != si || in[2] != next[q][si]++) errors++;
                for (long k = h; k + 1 < nheld; k++) held[k] = held[k + 1];
                nheld--, got++;
            }
    for (long h = 0; h < nheld; h++, got++) {
        MPI_Mrecv(in, LEN, MPI_INT, &held[h].m, MPI_STATUS_IGNORE);
        int q = held[h].src, si = held[h].tag % S;
        if (in[0] != q || in[1] != si || in[2] != next[q][si]++) errors++;
    }
    free(held);
    while (got < nsend) { /* as many come in as go out: every pair carries N */
        int flag = 0;
        MPI_Message m;
        MPI_Status st;
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, pj[me], &flag, &m, &st);
        if (!flag) continue;
        MPI_Mrecv(in, LEN, MPI_INT, &m, MPI_STATUS_IGNORE);
        int q = st.MPI_SOURCE, si = st.MPI_TAG % S;
        if (in[0] != q || in[1] != si || in[2] != next[q][si]++ || st.MPI_TAG / S != in[2] % 3) errors++;
        got++;
    }
    MPI_Waitall((int)nsend, sreq, MPI_STATUSES_IGNORE);
    free(sbuf);
    free(sreq);
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    nmsg = argc > 1 ? atoi(argv[1]) : 200;
    hold = argc > 2 && argv[2][0] == 'h';
    if (provided != MPI_THREAD_MULTIPLE || size > 64) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int j = 0; j < S; j++) MPI_Comm_dup(MPI_COMM_WORLD, &pj[j]);
    double t = MPI_Wtime();
    pthread_t th[S];
    for (int i = 0; i < count_of(rank); i++) pthread_create(&th[i], NULL, index_thread, (void *)(long)i);
    for (int i = 0; i < count_of(rank); i++) pthread_join(th[i], NULL);
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s, %d messages per pair: %.2f s, %d errors\n%s\n", hold ? "hold" : "at once", nmsg, MPI_Wtime() - t, all, all ? "" : " No Errors");
    for (int j = 0; j < S; j++) MPI_Comm_free(&pj[j]);
    MPI_Finalize();
    return 0;
}

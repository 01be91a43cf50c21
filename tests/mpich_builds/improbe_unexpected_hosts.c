/* tests/c/multiplex_stress.c's traffic as mpixstream's serial backend carries it (the pooled layout,
 * docs/multiplex.md), WITHOUT mpixstream: S = 4 dups of MPI_COMM_WORLD P_0..P_3, one per destination
 * index, tag = user tag * S + source index; rank r has 2 + r % 3 indices. Each round every rank posts
 * BATCH (4096) MPI_Isends of 6 ints to random (other rank, source index, destination index, tag), the
 * test's own random streams, then receives what the others' replayed streams send it, then waits for
 * its sends and enters an MPI_Barrier on another dup. STYLE says how it receives, in the test's order
 * (sender by sender, message by message), one message on the destination index's P_j at a time:
 *   improbe  MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, P_j) polled until it finds one, then MPI_Mrecv:
 *            what the library's matching engine does for the test's full-wildcard blocking receives;
 *   recv     MPI_Recv(MPI_ANY_SOURCE, MPI_ANY_TAG, P_j);
 *   named    MPI_Recv(sender, MPI_ANY_TAG, P_j);
 *   sweep    whatever MPI_Improbe finds on any P_j, the four in turn, received at once (a control).
 * (The test changes its receive style from round to round; "improbe" is the library's path for its
 * first one, and a round of it is enough here.) COMMS (default 4) < 4 puts index j on P_{j % COMMS}.
 * 2026-12-05, Intel MPI 2021.19 (shm:ofi, MPICH 5.0.2's libfabric, tcp between hosts), 2 x 2 simulated
 * hosts, 250000 messages, 3 jobs each, 15 s limit: "sweep" completes 3 of 3 (0.5 s), "improbe" and "recv"
 * hang 3 of 3, "named" completes 3 of 3; "improbe" with FI_TCP_MAX_SAVED=1024 hangs 3 of 3, with 4096
 * completes 3 of 3 (the library's row the same). By hand, 1 job each, "recv": one host, and 1 + 1 hosts
 * (125000 messages) complete; 2 + 1, 3 + 1, and 2 x 2 with I_MPI_FABRICS=ofi (no shared memory) hang;
 * COMMS=1 completes, COMMS=2 hangs; one round of 1600 messages per rank (6400 in all) completes, of
 * 4096 (16384) hangs; "improbe" at 1 + 1 completes. While it hangs, each rank's sockets from the other
 * host hold 35 to 55 KB unread (`ss -tnp` in the host's namespace), as in the library's row.
 *   improbe_unexpected_hosts STYLE [MESSAGES [COMMS]]   MESSAGES in all (default 250000, the row's);
 *   rank 0 prints " No Errors". Run: tests/mpich_builds/improbe_unexpected_hosts.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KMAX = 4, S = 4, T = 8, BATCH = 4096, WORDS = 6 };
static int rank, size;

static int count_of(int r) { return 2 + r % 3; }

typedef struct {
    unsigned long long s;
} rng_t;
static unsigned long long next64(rng_t *r) { /* xorshift64*, as the test */
    unsigned long long x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
typedef struct {
    int dest, si, di, tag;
} choice_t;
static choice_t draw(rng_t *r, int src) {
    unsigned long long v = next64(r);
    choice_t c;
    c.dest = (src + 1 + (int)(v % (unsigned)(size - 1))) % size;
    v >>= 16;
    c.si = (int)(v % (unsigned)count_of(src));
    v >>= 8;
    c.di = (int)(v % (unsigned)count_of(c.dest));
    v >>= 8;
    c.tag = (int)(v % T);
    return c;
}

int main(int argc, char **argv) {
    int provided, errors = 0, all_errors = 0;
    const char *style = argc > 1 ? argv[1] : "improbe";
    long total = argc > 2 ? atol(argv[2]) : 250000;
    int comms = argc > 3 ? atoi(argv[3]) : S;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int improbe = !strcmp(style, "improbe"), sweep = !strcmp(style, "sweep"), named = !strcmp(style, "named");
    if (size < 2 || comms < 1 || comms > S || (!improbe && !sweep && !named && strcmp(style, "recv"))) {
        if (rank == 0)
            fprintf(stderr, "usage: improbe_unexpected_hosts improbe|recv|named|sweep [MESSAGES [COMMS]]"
                            " (2 or more ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm pj[S], ordinary;
    for (int j = 0; j < S; j++) MPI_Comm_dup(MPI_COMM_WORLD, &pj[j]);
    MPI_Comm_dup(MPI_COMM_WORLD, &ordinary);
    long per = total / size;
    double t0 = MPI_Wtime();
    rng_t mine = {0x9E3779B97F4A7C15ULL * (rank + 1)};
    rng_t *replay = malloc(sizeof(rng_t) * size);
    for (int q = 0; q < size; q++) replay[q].s = 0x9E3779B97F4A7C15ULL * (q + 1);
    int *sbuf = malloc(sizeof(int) * WORDS * BATCH), in[WORDS];
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * BATCH);
    choice_t *want = malloc(sizeof(choice_t) * BATCH * size);
    long rounds = (per + BATCH - 1) / BATCH, received = 0;
    for (long r = 0; r < rounds; r++) {
        long lo = r * BATCH, hi = lo + BATCH < per ? lo + BATCH : per;
        int ns = 0;
        for (long j = lo; j < hi; j++, ns++) {
            choice_t c = draw(&mine, rank);
            int *m = &sbuf[ns * WORDS];
            m[0] = rank, m[1] = c.si, m[2] = c.di, m[3] = c.tag, m[4] = (int)r, m[5] = ns;
            MPI_Isend(m, WORDS, MPI_INT, c.dest, c.tag * S + c.si, pj[c.di % comms], &sreq[ns]);
        }
        long nw = 0;
        for (int q = 0; q < size; q++)
            for (long j = lo; q != rank && j < hi; j++) {
                choice_t c = draw(&replay[q], q);
                if (c.dest == rank) {
                    c.dest = q; /* the sender */
                    want[nw++] = c;
                }
            }
        for (long k = 0; k < nw; k++) {
            MPI_Status st;
            MPI_Comm comm = pj[want[k].di % comms];
            if (improbe) {
                MPI_Message msg;
                int flag = 0;
                while (!flag) MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &st);
                MPI_Mrecv(in, WORDS, MPI_INT, &msg, MPI_STATUS_IGNORE);
            } else if (sweep) {
                MPI_Message msg;
                int flag = 0;
                for (int j = 0; !flag; j = (j + 1) % comms)
                    MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, pj[j], &flag, &msg, &st);
                MPI_Mrecv(in, WORDS, MPI_INT, &msg, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(in, WORDS, MPI_INT, named ? want[k].dest : MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st);
            }
            /* The envelope agrees with the payload, and the message was meant for this round. */
            if (in[0] != st.MPI_SOURCE || st.MPI_TAG != in[3] * S + in[1] || in[4] != r ||
                (!sweep && in[2] % comms != want[k].di % comms))
                errors++;
        }
        received += nw;
        MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE);
        MPI_Barrier(ordinary);
    }
    long all_received = 0;
    MPI_Allreduce(&received, &all_received, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s, %d communicators: %ld messages in %.2f s, %d errors\n", style, comms, all_received,
               MPI_Wtime() - t0, all_errors);
        if (all_errors == 0 && all_received == per * size) printf(" No Errors\n");
    }
    for (int j = 0; j < S; j++) MPI_Comm_free(&pj[j]);
    MPI_Comm_free(&ordinary);
    free(replay);
    free(sbuf);
    free(sreq);
    free(want);
    MPI_Finalize();
    return 0;
}

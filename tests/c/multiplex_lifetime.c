/* A multiplex communicator's record lives exactly as long as the communicator (shim/src/comms.rs):
 * 1. MPI_Comm_disconnect releases its streams as MPI_Comm_free does: MPIX_Stream_free of its streams
 *    succeeds afterwards (before: the disconnect went past the library, which still counted the streams
 *    as attached, and MPIX_Stream_free failed);
 * 2. traffic on a multiplex communicator made after the disconnect, which may get the same handle, is
 *    correct;
 * 3. creating and freeing a 2-index multiplex communicator in a loop has bounded memory: its resident
 *    growth over MPIXTEST_ROUNDS (default 3000) create/free pairs is within MPIXTEST_SLACK_KIB
 *    (default 1024) of what as many MPI_Comm_dup/free pairs grow (before: each record was leaked,
 *    3 MiB over 3000). */
#include "mpixtest.h"

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

static MPI_Comm make(MPIX_Stream *s) {
    MPI_Comm mx;
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, s, &mx));
    return mx;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = env_int("MPIXTEST_ROUNDS", 3000), slack = env_int("MPIXTEST_SLACK_KIB", 1024);

    /* 1 and 2. */
    for (int round = 0; round < 3; round++) {
        MPIX_Stream s[2];
        for (int i = 0; i < 2; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
        MPI_Comm mx = make(s);
        multiplex_ring(mx, round);
        OK(MPI_Comm_disconnect(&mx));
        CHECK(mx == MPI_COMM_NULL, "disconnect left the handle");
        for (int i = 0; i < 2; i++) OK(MPIX_Stream_free(&s[i]));
    }

    /* 3. */
    MPIX_Stream s[2];
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
    long growth[2];
    for (int variant = 0; variant < 2; variant++) {
        for (int round = 0; round < rounds + rounds / 10; round++) {
            if (round == rounds / 10) growth[variant] = rss_kib();
            MPI_Comm c;
            if (variant == 0) {
                OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            } else {
                c = make(s);
                if (round % 100 == 0) multiplex_ring(c, round);
            }
            OK(MPI_Comm_free(&c));
        }
        growth[variant] = rss_kib() - growth[variant];
    }
    if (rank == 0) printf("resident growth over %d rounds: dup %ld KiB, multiplex %ld KiB\n", rounds, growth[0], growth[1]);
    CHECK(growth[1] <= growth[0] + slack, "multiplex create/free grew %ld KiB, dup/free %ld KiB (slack %d)", growth[1],
          growth[0], slack);
    for (int i = 0; i < 2; i++) OK(MPIX_Stream_free(&s[i]));
    return mpixtest_finish();
}

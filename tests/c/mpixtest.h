/* Small helpers shared by the C test programs: checks that count failures and a closing verdict in
 * MPICH's test-suite convention (" No Errors" on rank 0 when every rank passed). */
#ifndef MPIXTEST_H
#define MPIXTEST_H
#include <mpi.h>
#include "mpix_stream.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mpixtest_errs = 0;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            int r_;                                                                        \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                            \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", r_, __FILE__, __LINE__, \
                    #cond);                                                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            mpixtest_errs++;                                                               \
        }                                                                                  \
    } while (0)

/* An error code's class and message. */
static inline int err_class(int code) { int c = -1; MPI_Error_class(code, &c); return c; }
static inline const char *err_text(int code) {
    static _Thread_local char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    s[0] = 0;
    MPI_Error_string(code, s, &len);
    return s;
}

/* MPI call expected to succeed; a failure says the code's message too (in a loop of runs it must say
 * what it was). */
#define OK(call)                                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d (%s)", #call, rc_,                       \
              rc_ == MPI_SUCCESS ? "" : err_text(rc_));                                    \
    } while (0)

/* Expects `call` to fail with `cls` and a message containing `needle`. */
#define EXPECT_ERR(call, cls, needle)                                                      \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        CHECK(rc_ != MPI_SUCCESS, "%s succeeded, expected an error", #call);               \
        if (rc_ != MPI_SUCCESS) {                                                          \
            CHECK(err_class(rc_) == (cls), "%s: class %d, expected %d (%s)", #call,        \
                  err_class(rc_), (cls), err_text(rc_));                                   \
            CHECK(strstr(err_text(rc_), (needle)) != NULL, "%s: message '%s' lacks '%s'",  \
                  #call, err_text(rc_), (needle));                                         \
        }                                                                                  \
    } while (0)

static inline int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Under MPIXSTREAM_POLICY=explicit (after MPI_Init*): whether the policy gives this process's new
 * communicators streams: at MPI_THREAD_MULTIPLE only. Not on a native MPICH without MPIX_Async_start (4.1, 4.2): the policy leaves
 * them implicit (shim/src/policy/progress_rule.rs, streams_served). */
static inline int policy_gives_streams(void) {
    const char *policy = getenv("MPIXSTREAM_POLICY"), *backend = getenv("MPIXSTREAM_BACKEND");
    if (!policy || strcmp(policy, "explicit") != 0) return 0;
    /* Below MPI_THREAD_MULTIPLE the policy is inert (shim/src/backend/demand.rs) for the tests that use
     * it: none of them names MPIX_Stream_create, the one exception. */
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) return 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    const char *v = strstr(version, "Version:");
    const char *number = v ? v + 8 + strspn(v + 8, " \t") : "";
    int v41 = strncmp(number, "4.1", 3) == 0, v42 = strncmp(number, "4.2", 3) == 0;
    int serial = backend && strcmp(backend, "serial") == 0;
    return serial || !(v41 || v42);
}

/* Whether the library runs the native backend (MPICH >= 4.1 with native streams, a program that can
 * create a stream, and not MPIXSTREAM_BACKEND=serial): then MPICH runs at MPI_THREAD_MULTIPLE
 * whatever the program asked (the progress helper's thread calls MPI). */
static inline int native_backend(void) {
    const char *backend = getenv("MPIXSTREAM_BACKEND");
    if (backend && strcmp(backend, "serial") == 0) return 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    const char *v = strstr(version, "MPICH Version:");
    if (!v || strstr(version, "Intel")) return 0;
    int major = 0, minor = 0;
    sscanf(v + 14, " %d.%d", &major, &minor);
    return major > 4 || (major == 4 && minor >= 1);
}

/* One message around a ring on a multiplex communicator of at least 2 indices: index 0 of each rank
 * sends its rank to index 1 of the next, tagged `round`. Checks that the receive, the send and the wait
 * succeed and that index 1 received the previous rank's number. */
static inline void multiplex_ring(MPI_Comm mx, int round) {
    int rank, size, got = -1;
    MPI_Comm_rank(mx, &rank);
    MPI_Comm_size(mx, &size);
    MPI_Request r;
    OK(MPIX_Stream_irecv(&got, 1, MPI_INT, (rank + size - 1) % size, round, mx, 0, 1, &r));
    OK(MPIX_Stream_send(&rank, 1, MPI_INT, (rank + 1) % size, round, mx, 0, 1));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(got == (rank + size - 1) % size, "round %d: received %d", round, got);
}

/* Collective verdict; returns the process exit code. */
static inline int mpixtest_finish(void) {
    int total = 0, rank;
    MPI_Allreduce(&mpixtest_errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        if (total == 0) printf(" No Errors\n");
        else printf(" Found %d errors\n", total);
        fflush(stdout);
    }
    MPI_Finalize();
    return total != 0;
}
#endif

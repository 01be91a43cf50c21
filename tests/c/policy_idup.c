/* MPI_Comm_idup of an explicit-policy communicator, used as MPICH's threads/comm/idup_nb uses it: the
 * children of one communicator handed to different threads at once, each thread communicating on its
 * own child while the main thread uses the parent. MPICH's idup copies a stream communicator's stream
 * into the child, so with children on the parent's (unlocked) reserved VCI this drove one VCI from
 * every thread: wrong data or a hang. The policy now makes the child on the implicit pool
 * (shim/src/policy/base.rs) and copies what MPICH's idup of the parent would copy.
 * Checks, on every rank:
 *   - each idup form gives a child with the parent's attributes (copy callback run once per child,
 *     MPI_COMM_NULL_COPY_FN and a callback that drops its value leave none), its error handler, and
 *     the hints the MPI library's own idup gives (MPICH: none of the parent's, Intel MPI: the
 *     parent's; idup_with_info's own); the delete callback
 *     runs once per child at its free;
 *   - MPIXTEST_IDUP_IMPLICIT=1 (native rows): the child has no stream while the parent has one;
 *   - NT threads, each on its own child, plus the main thread on the parent: ring exchanges and
 *     allreduces with checked values, all at once;
 *   - the idup does not block: rank 0 waits for it only after receiving a 4 MiB (rendezvous) message
 *     that rank 1 sends before it starts its own idup;
 *   - freeing the parent before its idup completes; a copy callback's error fails the idup on every
 *     rank;
 *   - an idup of the policy's dup of a Cartesian communicator keeps its topology (and, native rows,
 *     is off the parent's stream). */
#include "mpixtest.h"
#include <pthread.h>

#define NT 4
#define ITERS 2000

static int copies, drops, deletes;
static int value = 42, other = 7;
static MPI_Comm children[NT + 1];
static int rank, size;

static int copy_keep(MPI_Comm c, int kv, void *extra, void *in, void *out, int *flag) {
    (void)c, (void)kv, (void)extra;
    __atomic_add_fetch(&copies, 1, __ATOMIC_RELAXED);
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int copy_drop(MPI_Comm c, int kv, void *extra, void *in, void *out, int *flag) {
    (void)c, (void)kv, (void)extra, (void)in, (void)out;
    __atomic_add_fetch(&drops, 1, __ATOMIC_RELAXED);
    *flag = 0;
    return MPI_SUCCESS;
}
static int copy_fail(MPI_Comm c, int kv, void *extra, void *in, void *out, int *flag) {
    (void)c, (void)kv, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}
static int count_delete(MPI_Comm c, int kv, void *val, void *extra) {
    (void)c, (void)kv, (void)val, (void)extra;
    __atomic_add_fetch(&deletes, 1, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

/* Ring exchange and allreduce on `comm`, values checked; returns the errors found. */
static int exercise(MPI_Comm comm, int salt) {
    int errs = 0, right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < ITERS; i++) {
        int out = rank * 100000 + i + salt, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, right, i % 7, &in, 1, MPI_INT, left, i % 7, comm, MPI_STATUS_IGNORE);
        if (in != left * 100000 + i + salt) errs++;
        if (i % 100 == 0) {
            int sum = 0, one = i + salt;
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
            if (sum != size * (i + salt)) errs++;
        }
    }
    return errs;
}

static int thread_errs[NT];
static void *worker(void *arg) {
    int t = (int)(long)arg;
    thread_errs[t] = exercise(children[t], 1000 * (t + 1));
    return NULL;
}

static void expect_copied(MPI_Comm child, int kv_keep, int kv_null, int kv_drop, const char *what) {
    void *v = NULL;
    int found = 0;
    OK(MPI_Comm_get_attr(child, kv_keep, &v, &found));
    CHECK(found && v == &value, "%s: the copied attribute is %s", what, found ? "another value" : "missing");
    OK(MPI_Comm_get_attr(child, kv_null, &v, &found));
    CHECK(!found, "%s: an MPI_COMM_NULL_COPY_FN attribute was copied", what);
    OK(MPI_Comm_get_attr(child, kv_drop, &v, &found));
    CHECK(!found, "%s: an attribute whose callback dropped it was copied", what);
    MPI_Errhandler h;
    OK(MPI_Comm_get_errhandler(child, &h));
    CHECK(h == MPI_ERRORS_RETURN, "%s: the error handler is not the parent's", what);
    MPI_Errhandler_free(&h);
}

/* The value of `key` in `comm`'s info hints, or "" (no such hint). */
static const char *hint(MPI_Comm comm, const char *key, char *buf) {
    MPI_Info info;
    int flag = 0;
    buf[0] = 0;
    OK(MPI_Comm_get_info(comm, &info));
    MPI_Info_get(info, key, MPI_MAX_INFO_VAL, buf, &flag);
    if (!flag) buf[0] = 0;
    MPI_Info_free(&info);
    return buf;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        CHECK(0, "MPI_THREAD_MULTIPLE not provided");
        return mpixtest_finish();
    }
    int expect_implicit = env_int("MPIXTEST_IDUP_IMPLICIT", 0);

    int kv_keep, kv_null, kv_drop, kv_fail;
    OK(MPI_Comm_create_keyval(copy_keep, count_delete, &kv_keep, NULL));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &kv_null, NULL));
    OK(MPI_Comm_create_keyval(copy_drop, count_delete, &kv_drop, NULL));
    OK(MPI_Comm_create_keyval(copy_fail, MPI_COMM_NULL_DELETE_FN, &kv_fail, NULL));

    MPI_Comm parent;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &parent));
    OK(MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN));
    MPI_Info hints;
    MPI_Info_create(&hints);
    MPI_Info_set(hints, "mpi_assert_no_any_tag", "true");
    OK(MPI_Comm_set_info(parent, hints));
    MPI_Info_free(&hints);
    OK(MPI_Comm_set_attr(parent, kv_keep, &value));
    OK(MPI_Comm_set_attr(parent, kv_null, &other));
    OK(MPI_Comm_set_attr(parent, kv_drop, &other));

    /* Every idup form; the hints an idup gives are the MPI library's own idup's (MPICH copies none of
     * the parent's, Intel MPI copies them): those of an idup of a communicator that the policy leaves
     * to the library (an idup of MPI_COMM_WORLD) and that carries the same hint as the parent. */
    MPI_Comm plain_parent, plain;
    MPI_Request rp;
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &plain_parent, &rp));
    OK(MPI_Wait(&rp, MPI_STATUS_IGNORE));
    MPI_Info_create(&hints);
    MPI_Info_set(hints, "mpi_assert_no_any_tag", "true");
    OK(MPI_Comm_set_info(plain_parent, hints));
    MPI_Info_free(&hints);
    OK(MPI_Comm_idup(plain_parent, &plain, &rp));
    OK(MPI_Wait(&rp, MPI_STATUS_IGNORE));
    OK(MPI_Comm_free(&plain_parent));
    MPI_Request reqs[NT + 1];
    for (int t = 0; t < NT; t++) OK(MPI_Comm_idup(parent, &children[t], &reqs[t]));
    MPI_Info_create(&hints);
    MPI_Info_set(hints, "mpi_assert_no_any_source", "true");
    OK(MPI_Comm_idup_with_info(parent, hints, &children[NT], &reqs[NT]));
    MPI_Info_free(&hints);
    MPI_Status sts[NT + 1];
    OK(MPI_Waitall(NT + 1, reqs, sts));
    CHECK(copies == NT + 1, "%d copy callbacks for %d idups", copies, NT + 1);
    CHECK(drops == NT + 1, "%d dropping callbacks for %d idups", drops, NT + 1);
    char want[MPI_MAX_INFO_VAL + 1], got[MPI_MAX_INFO_VAL + 1], with[MPI_MAX_INFO_VAL + 1];
    hint(plain, "mpi_assert_no_any_tag", want);
    OK(MPI_Comm_free(&plain));
    for (int t = 0; t <= NT; t++) {
        char what[32];
        snprintf(what, sizeof what, "child %d", t);
        expect_copied(children[t], kv_keep, kv_null, kv_drop, what);
        CHECK(strcmp(hint(children[t], "mpi_assert_no_any_tag", got), want) == 0,
              "%s: hint mpi_assert_no_any_tag '%s', the MPI library's own idup has '%s'", what, got, want);
        int cmp;
        OK(MPI_Comm_compare(parent, children[t], &cmp));
        CHECK(cmp == MPI_CONGRUENT, "%s is not congruent with its parent (%d)", what, cmp);
    }
    CHECK(strcmp(hint(children[NT], "mpi_assert_no_any_source", with), "true") == 0,
          "MPI_Comm_idup_with_info: hint mpi_assert_no_any_source '%s', not the given 'true'", with);
    if (expect_implicit) {
        MPIX_Stream s = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(parent, 0, &s));
        CHECK(s != MPIX_STREAM_NULL || !policy_gives_streams(), "the policy attached no stream to the parent");
        for (int t = 0; t <= NT; t++) {
            OK(MPIX_Comm_get_stream(children[t], 0, &s));
            CHECK(s == MPIX_STREAM_NULL, "child %d shares a stream", t);
        }
    }

    /* The children of one communicator on different threads at once, the parent on this one. */
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    int main_errs = exercise(parent, 0);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    CHECK(main_errs == 0, "%d wrong values on the parent", main_errs);
    for (int t = 0; t < NT; t++) CHECK(thread_errs[t] == 0, "%d wrong values on child %d", thread_errs[t], t);

    deletes = 0;
    for (int t = 0; t <= NT; t++) OK(MPI_Comm_free(&children[t]));
    CHECK(deletes == NT + 1, "%d delete callbacks for %d freed children", deletes, NT + 1);

    /* The idup must not block: rank 1 sends a rendezvous message before it starts its idup; rank 0
     * starts its idup first and waits for it only after that message is in. */
    if (size >= 2 && rank < 2) {
        const int n = 1 << 20;
        int *big = malloc(sizeof(int) * n);
        MPI_Comm d;
        MPI_Request r;
        if (rank == 0) {
            OK(MPI_Comm_idup(parent, &d, &r));
            OK(MPI_Recv(big, n, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(big[n - 1] == n - 1, "wrong rendezvous data");
        } else {
            for (int i = 0; i < n; i++) big[i] = i;
            OK(MPI_Send(big, n, MPI_INT, 0, 5, MPI_COMM_WORLD));
            OK(MPI_Comm_idup(parent, &d, &r));
        }
        free(big);
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Comm_free(&d));
    } else if (size >= 2) {
        MPI_Comm d;
        MPI_Request r;
        OK(MPI_Comm_idup(parent, &d, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Comm_free(&d));
    }

    /* A parent freed before its idup completes. */
    MPI_Comm p2, e;
    MPI_Request r2;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &p2));
    OK(MPI_Comm_idup(p2, &e, &r2));
    OK(MPI_Comm_free(&p2));
    OK(MPI_Wait(&r2, MPI_STATUS_IGNORE));
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, e));
    CHECK(sum == size, "allreduce on the child of a freed parent gave %d", sum);
    OK(MPI_Comm_free(&e));

    /* A copy callback's error fails the idup, on every rank. */
    OK(MPI_Comm_set_attr(parent, kv_fail, &other));
    MPI_Comm f = MPI_COMM_NULL;
    MPI_Request rf = MPI_REQUEST_NULL;
    int rc = MPI_Comm_idup(parent, &f, &rf);
    CHECK(rc != MPI_SUCCESS, "MPI_Comm_idup succeeded though a copy callback failed");
    if (rc == MPI_SUCCESS) {
        MPI_Wait(&rf, MPI_STATUS_IGNORE);
        MPI_Comm_free(&f);
    }
    OK(MPI_Comm_delete_attr(parent, kv_fail));

    /* An idup of a communicator with a topology (the policy's dup of a Cartesian ring): the child keeps
     * the topology and the coordinates, and is off the parent's stream too. */
    MPI_Comm cart, ring, ring_child;
    MPI_Request rr;
    int dims = size, periodic = 1, kind = MPI_UNDEFINED, coord = -1, child_coord = -2, ring_sum = -1;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &periodic, 0, &cart));
    OK(MPI_Comm_dup(cart, &ring));
    OK(MPI_Comm_idup(ring, &ring_child, &rr));
    OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    OK(MPI_Topo_test(ring_child, &kind));
    CHECK(kind == MPI_CART, "the idup of a Cartesian communicator has topology %d", kind);
    OK(MPI_Cart_coords(ring, rank, 1, &coord));
    OK(MPI_Cart_coords(ring_child, rank, 1, &child_coord));
    CHECK(coord == child_coord, "coordinates %d in the idup, %d in its parent", child_coord, coord);
    if (expect_implicit) {
        MPIX_Stream s_ring = MPIX_STREAM_NULL, s_child = MPIX_STREAM_NULL;
        OK(MPIX_Comm_get_stream(ring, 0, &s_ring));
        OK(MPIX_Comm_get_stream(ring_child, 0, &s_child));
        CHECK((s_ring != MPIX_STREAM_NULL || !policy_gives_streams()) && s_child == MPIX_STREAM_NULL,
              "Cartesian parent's stream %s, its idup's %s (expected a stream and none)",
              s_ring != MPIX_STREAM_NULL ? "set" : "null", s_child != MPIX_STREAM_NULL ? "set" : "null");
    }
    OK(MPI_Allreduce(&rank, &ring_sum, 1, MPI_INT, MPI_SUM, ring_child));
    CHECK(ring_sum == size * (size - 1) / 2, "Allreduce on the Cartesian idup: %d", ring_sum);
    OK(MPI_Comm_free(&ring_child));
    OK(MPI_Comm_free(&ring));
    OK(MPI_Comm_free(&cart));

    OK(MPI_Comm_free(&parent));
    MPI_Comm_free_keyval(&kv_keep);
    MPI_Comm_free_keyval(&kv_null);
    MPI_Comm_free_keyval(&kv_drop);
    MPI_Comm_free_keyval(&kv_fail);
    return mpixtest_finish();
}

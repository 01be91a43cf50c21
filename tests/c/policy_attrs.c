/* The explicit policy's communicators behave like MPICH's own for attributes and info: a dup runs the
 * parent's attribute copy callback exactly once and no delete callback fires on a communicator the
 * application never saw (the policy used to dup, then make a stream communicator of the dup, which
 * copied attributes twice and deleted them from the hidden dup); MPI_Comm_dup_with_info's info reaches
 * the communicator the application receives. Run under MPIXSTREAM_POLICY=explicit (and without it:
 * the same counts hold for MPICH alone). */
#include "mpixtest.h"

static int copies = 0, deletes = 0;

static int copy_fn(MPI_Comm old, int kv, void *extra, void *in, void *out, int *flag) {
    (void)old; (void)kv; (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int failing_copy_fn(MPI_Comm old, int kv, void *extra, void *in, void *out, int *flag) {
    (void)old; (void)kv; (void)extra; (void)in; (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int delete_fn(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm; (void)kv; (void)val; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static void expect_attr(MPI_Comm c, int kv, void *want, const char *what) {
    void *v = NULL;
    int flag = 0;
    OK(MPI_Comm_get_attr(c, kv, &v, &flag));
    CHECK(flag && v == want, "%s: attribute flag %d value %p, expected %p", what, flag, v, want);
}

static void expect_info(MPI_Comm c, const char *key, const char *want, const char *what) {
    MPI_Info got;
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    OK(MPI_Comm_get_info(c, &got));
    OK(MPI_Info_get(got, key, MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && strcmp(value, want) == 0, "%s: info %s flag %d value '%s', expected '%s'", what, key,
          flag, value, want);
    MPI_Info_free(&got);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int streams = policy_gives_streams();
    int kv;
    static int value = 42;
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &kv, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &value));

    /* MPI_Comm_dup: one copy, no delete. */
    MPI_Comm a;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK(copies == 1 && deletes == 0, "MPI_Comm_dup: %d copies, %d deletes; expected 1 and 0", copies,
          deletes);
    expect_attr(a, kv, &value, "dup");
    MPIX_Stream s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(a, 0, &s));
    if (streams) CHECK(s != MPIX_STREAM_NULL, "the policy attached no stream to the dup");

    /* A dup of the policy communicator (which gets its own stream): one more copy, still no delete. */
    MPI_Comm b;
    OK(MPI_Comm_dup(a, &b));
    CHECK(copies == 2 && deletes == 0, "dup of a dup: %d copies, %d deletes; expected 2 and 0", copies,
          deletes);
    expect_attr(b, kv, &value, "dup of a dup");

    /* MPI_Comm_dup_with_info: one copy, no delete, and the info on the communicator we get. */
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    MPI_Comm c;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    CHECK(copies == 3 && deletes == 0, "MPI_Comm_dup_with_info: %d copies, %d deletes; expected 3 and 0",
          copies, deletes);
    expect_attr(c, kv, &value, "dup_with_info");
    expect_info(c, "mpi_assert_no_any_tag", "true", "dup_with_info");
    s = MPIX_STREAM_NULL;
    OK(MPIX_Comm_get_stream(c, 0, &s));
    if (streams) CHECK(s != MPIX_STREAM_NULL, "the policy attached no stream to dup_with_info");

    /* Split copies no attributes (MPI): no callback at all. */
    MPI_Comm d;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &d));
    CHECK(copies == 3 && deletes == 0, "MPI_Comm_split: %d copies, %d deletes; expected 3 and 0", copies,
          deletes);

    /* Traffic still flows on each. */
    MPI_Comm all[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        int sum = 0;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, all[i]));
        CHECK(sum == size * (size - 1) / 2, "communicator %d: allreduce %d", i, sum);
    }

    /* Freeing runs the delete callback once per communicator that carries the attribute. */
    OK(MPI_Comm_free(&a));
    OK(MPI_Comm_free(&b));
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_free(&d));
    CHECK(copies == 3 && deletes == 3, "after the frees: %d copies, %d deletes; expected 3 and 3", copies,
          deletes);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, kv));
    OK(MPI_Comm_free_keyval(&kv));
    MPI_Info_free(&info);
    /* MPI_Comm_dup(c, &c): the output aliases the input. The policy's direct dup once took the
     * caller's variable for a communicator made for the call and freed it: here the parent,
     * MPI_COMM_WORLD ("Cannot free permanent communicator", MPICH's coll tests under explicit). */
    MPI_Comm w = MPI_COMM_WORLD;
    OK(MPI_Comm_dup(w, &w));
    CHECK(w != MPI_COMM_WORLD, "the in-place dup returned MPI_COMM_WORLD");
    int one = 1, total = 0;
    OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, w));
    OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == size, "MPI_COMM_WORLD after the in-place dup: %d", total);
    OK(MPI_Comm_free(&w));
    /* A copy callback that fails makes the dup fail, and the new communicator is MPI_COMM_NULL (the
     * policy's direct dup once left the caller's variable as it was: MPICH's attr/attrerr). */
    int bad;
    OK(MPI_Comm_create_keyval(failing_copy_fn, MPI_COMM_NULL_DELETE_FN, &bad, NULL));
    MPI_Comm src, out = MPI_COMM_WORLD;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &src));
    OK(MPI_Comm_set_errhandler(src, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_attr(src, bad, &one));
    CHECK(MPI_Comm_dup(src, &out) != MPI_SUCCESS, "a dup whose copy callback fails succeeded");
    CHECK(out == MPI_COMM_NULL, "a failed dup returned a communicator, not MPI_COMM_NULL");
    OK(MPI_Comm_delete_attr(src, bad));
    OK(MPI_Comm_free(&src));
    OK(MPI_Comm_free_keyval(&bad));
    return mpixtest_finish();
}

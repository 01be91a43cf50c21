/* The library gives MPICH its pool sizes without touching the environment (setenv while other threads
 * may call getenv is a data race in C): after MPI_Init, MPIR_CVAR_CH4_RESERVE_VCIS is not in the
 * environment, and on an MPICH that has the variable (>= 4.1) MPI_T reads back MPIXSTREAM_STREAMS. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int want = env_int("MPIXSTREAM_STREAMS", 8);
    CHECK(getenv("MPIR_CVAR_CH4_RESERVE_VCIS") == NULL, "MPIR_CVAR_CH4_RESERVE_VCIS=%s was put into the environment",
          getenv("MPIR_CVAR_CH4_RESERVE_VCIS"));
    int provided, index, count;
    OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    if (MPI_T_cvar_get_index("MPIR_CVAR_CH4_RESERVE_VCIS", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        int value = -1;
        OK(MPI_T_cvar_handle_alloc(index, NULL, &h, &count));
        OK(MPI_T_cvar_read(h, &value));
        OK(MPI_T_cvar_handle_free(&h));
        CHECK(value == want, "MPIR_CVAR_CH4_RESERVE_VCIS reads %d, expected %d", value, want);
        /* And the pool is really that big: `want` streams can be created, the next one cannot. */
        MPIX_Stream s[64];
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        for (int i = 0; i < want; i++) OK(MPIX_Stream_create(MPI_INFO_NULL, &s[i]));
        MPIX_Stream extra;
        EXPECT_ERR(MPIX_Stream_create(MPI_INFO_NULL, &extra), MPI_ERR_OTHER, "out of streams");
        for (int i = 0; i < want; i++) OK(MPIX_Stream_free(&s[i]));
    }
    OK(MPI_T_finalize());
    return mpixtest_finish();
}

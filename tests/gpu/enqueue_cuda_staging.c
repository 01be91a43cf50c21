/* What only CUDA queues do: staging of device buffers through pinned memory (MPICH here is not
 * GPU-aware), 2 ranks (others idle).
 *   - every datatype shape: contiguous, vector, indexed with a non-zero true lower bound, struct
 *     with holes and a resized extent; sent and received between device buffers, and broadcast
 *     (MPICH's reductions take predefined types only). The receiver's buffer must hold exactly what MPI_Unpack of the same data
 *     gives: the datatype's elements, and the holes as the device had them (a staged receive with
 *     holes is copied in first, so its copy back does not overwrite them);
 *   - staging buffers are recycled only after the stream passed their copy back (the position
 *     word): a nonblocking receive completes, then a send is staged, then the receive is waited
 *     for; the receive's data must survive (a recycled buffer would have been overwritten by the
 *     send's copy in), 20 rounds.
 * Needs a CUDA driver: a GPU, or the CPU stand-in (tests/scripts/enqueue_cuda_standin.sh). */
#include "cudatest.h"

static CUstream cs;
#define SPAN 64 /* ints in every test buffer */

static CUdeviceptr dput(const int *h) {
    CUdeviceptr d;
    CU(cu.MemAlloc(&d, SPAN * sizeof(int)));
    CU(cu.MemcpyHtoDAsync(d, h, SPAN * sizeof(int), cs));
    return d;
}
static void dget_n(int *h, CUdeviceptr d, size_t n) {
    CU(cu.MemcpyDtoHAsync(h, d, n * sizeof(int), cs));
    CU(cu.StreamSynchronize(cs));
}
static void dget(int *h, CUdeviceptr d) { dget_n(h, d, SPAN); }
/* What receiving `count` x `dt` of src into dst (pre-filled) gives, computed on the host. */
static void expect(int *dst, const int *src, int count, MPI_Datatype dt) {
    char packed[SPAN * sizeof(int) * 2];
    int pos = 0;
    MPI_Pack(src, count, dt, packed, sizeof packed, &pos, MPI_COMM_SELF);
    int pos2 = 0;
    MPI_Unpack(packed, pos, &pos2, dst, count, dt, MPI_COMM_SELF);
}

struct shape {
    const char *name;
    MPI_Datatype dt;
    int count;
};

static void shapes(MPI_Comm c, struct shape *sh, int n) {
    int src[SPAN], fill[SPAN], want[SPAN], got[SPAN];
    for (int i = 0; i < SPAN; i++) src[i] = 1000 + i, fill[i] = -7 - i;
    for (int k = 0; k < n; k++) {
        /* point to point, rank 0 -> 1 */
        if (rank == 0) {
            CUdeviceptr d = dput(src);
            OK(MPIX_Send_enqueue((void *)d, sh[k].count, sh[k].dt, 1, k, c));
            CU(cu.StreamSynchronize(cs));
            CU(cu.MemFree(d));
        } else if (rank == 1) {
            CUdeviceptr d = dput(fill);
            MPI_Status st;
            OK(MPIX_Recv_enqueue((void *)d, sh[k].count, sh[k].dt, 0, k, c, &st));
            dget(got, d);
            memcpy(want, fill, sizeof want);
            expect(want, src, sh[k].count, sh[k].dt);
            int bad = 0, first = -1;
            for (int i = 0; i < SPAN; i++)
                if (got[i] != want[i]) { bad++; if (first < 0) first = i; }
            CHECK(bad == 0, "%s send/recv: %d ints wrong, first at %d: %d, expected %d", sh[k].name, bad, first,
                  first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == k, "%s status %d/%d", sh[k].name, st.MPI_SOURCE, st.MPI_TAG);
            CU(cu.MemFree(d));
        }
        /* broadcast from rank 0 */
        CUdeviceptr b = dput(rank == 0 ? src : fill);
        OK(MPIX_Bcast_enqueue((void *)b, sh[k].count, sh[k].dt, 0, c));
        dget(got, b);
        memcpy(want, rank == 0 ? src : fill, sizeof want);
        if (rank != 0) expect(want, src, sh[k].count, sh[k].dt);
        int bad = 0;
        for (int i = 0; i < SPAN; i++) bad += got[i] != want[i];
        CHECK(bad == 0, "%s bcast: %d ints wrong", sh[k].name, bad);
        CU(cu.MemFree(b));
    }
}

static void reuse_after_position(MPI_Comm c) {
    enum { N = 256 };
    int a[N], b[N];
    CUdeviceptr ra, sb, rb;
    CU(cu.MemAlloc(&ra, N * sizeof(int)));
    CU(cu.MemAlloc(&sb, N * sizeof(int)));
    CU(cu.MemAlloc(&rb, N * sizeof(int)));
    for (int round = 0; round < 20; round++) {
        if (rank == 0) {
            for (int i = 0; i < N; i++) a[i] = round * 10000 + i;
            CU(cu.MemcpyHtoDAsync(sb, a, sizeof a, cs));
            OK(MPIX_Send_enqueue((void *)sb, N, MPI_INT, 1, 100, c));
            CU(cu.StreamSynchronize(cs));
            MPI_Barrier(MPI_COMM_WORLD);
            OK(MPIX_Recv_enqueue((void *)rb, N, MPI_INT, 1, 101, c, MPI_STATUS_IGNORE));
            dget_n(b, rb, N);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += b[i] != -round;
            CHECK(bad == 0, "round %d: the send staged after the receive arrived wrong (%d ints)", round, bad);
        } else if (rank == 1) {
            MPI_Request r;
            OK(MPIX_Irecv_enqueue((void *)ra, N, MPI_INT, 0, 100, c, &r));
            CU(cu.StreamSynchronize(cs)); /* the stream is past "ready": the receive runs */
            MPI_Barrier(MPI_COMM_WORLD);  /* rank 0 sent */
            usleep(20000);                /* the receive is complete (done), its copy back not queued */
            for (int i = 0; i < N; i++) b[i] = -round;
            CU(cu.MemcpyHtoDAsync(sb, b, sizeof b, cs));
            OK(MPIX_Send_enqueue((void *)sb, N, MPI_INT, 0, 101, c)); /* stages an input now */
            OK(MPIX_Wait_enqueue(&r, MPI_STATUS_IGNORE));             /* queues the copy back */
            dget_n(a, ra, N);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += a[i] != round * 10000 + i;
            CHECK(bad == 0, "round %d: the nonblocking receive's data was overwritten (%d ints wrong, a[0]=%d)", round,
                  bad, a[0]);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    CU(cu.MemFree(ra));
    CU(cu.MemFree(sb));
    CU(cu.MemFree(rb));
}

int main(int argc, char **argv) {
    cudatest_init(&argc, &argv);
    MPIX_Stream s;
    MPI_Comm c;
    cuda_stream_comm(&cs, &s, &c);

    MPI_Datatype vec, idx, st, st_resized;
    MPI_Type_vector(3, 2, 5, MPI_INT, &vec);
    int bl[3] = {1, 3, 2}, disp[3] = {2, 6, 11}; /* true lower bound 8 bytes */
    MPI_Type_indexed(3, bl, disp, MPI_INT, &idx);
    /* struct { int a; (hole) ; int b[2] at byte 12 }, extent resized to 24 bytes */
    int sbl[2] = {1, 2};
    MPI_Aint sdisp[2] = {0, 12};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_INT};
    MPI_Type_create_struct(2, sbl, sdisp, stypes, &st);
    MPI_Type_create_resized(st, 0, 24, &st_resized);
    MPI_Type_free(&st);
    MPI_Datatype all[] = {vec, idx, st_resized};
    for (int i = 0; i < 3; i++) MPI_Type_commit(&all[i]);
    vec = all[0], idx = all[1], st_resized = all[2];
    struct shape sh[] = {
        {"contiguous", MPI_INT, 40},
        {"vector", vec, 1},
        {"vector x2", vec, 2},
        {"indexed (true lb 8)", idx, 2},
        {"struct with holes, resized", st_resized, 3},
    };
    if (size >= 2) {
        shapes(c, sh, sizeof sh / sizeof *sh);
        reuse_after_position(c);
    }
    CU(cu.StreamSynchronize(cs));
    for (int i = 0; i < 3; i++) MPI_Type_free(&all[i]);
    OK(MPI_Comm_free(&c));
    OK(MPIX_Stream_free(&s));
    CU(cu.StreamDestroy(cs));
    return cudatest_finish();
}

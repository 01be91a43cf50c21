/* Bad input for every MPIX entry point, with MPI_ERRORS_RETURN: each call must return an error whose
 * class is the expected one and whose MPI_Error_string names the entry point, and must neither hang
 * nor crash; afterwards the library and MPI still work. Calls after MPI_Finalize get MPI_ERR_OTHER.
 * (Calls before MPI_Init: stream_lifecycle.c; the fatal handler: stream_fatal.c, check_bad.c.) */
#include "mpixtest.h"

static int checked = 0;
/* Expects `call` to fail with class `cls`, and the message to name the function `fn`. */
#define BAD(cls, fn, call)                                                                         \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        checked++;                                                                                 \
        CHECK(rc_ != MPI_SUCCESS, "%s succeeded on bad input", #call);                             \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            CHECK(err_class(rc_) == (cls), "%s: class %d, expected %d (%s)", #call, err_class(rc_), \
                  (cls), err_text(rc_));                                                           \
            CHECK(strstr(err_text(rc_), fn) != NULL, "%s: message '%s' does not name %s", #call,    \
                  err_text(rc_), fn);                                                              \
        }                                                                                          \
    } while (0)

static void host_fn(void *arg) { (void)arg; }

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const MPIX_Stream bogus = 0x1234;
    MPIX_Stream freed, s, sq;
    MPI_Comm c, mc, plain;
    MPI_Request req;
    MPI_Status st;
    int buf[4] = {0}, flag;
    MPI_Count bigc = 1;

    OK(MPIX_Stream_create(MPI_INFO_NULL, &s));
    MPIX_Stream to_free;
    OK(MPIX_Stream_create(MPI_INFO_NULL, &to_free));
    freed = to_free; /* the handle stays stale: nothing else is created before its use below */
    OK(MPIX_Stream_free(&to_free));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    MPI_Comm_set_errhandler(plain, MPI_ERRORS_RETURN);

    /* streams */
    BAD(MPI_ERR_ARG, "MPIX_Stream_create", MPIX_Stream_create(MPI_INFO_NULL, NULL));
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "hipStream_t");
    MPIX_Stream tmp;
    int rc = MPIX_Stream_create(info, &tmp);
    CHECK(rc != MPI_SUCCESS && strstr(err_text(rc), "MPIX_Stream_create"), "hipStream_t: rc %d", rc);
    MPI_Info_set(info, "type", "cudaStream_t"); /* no value */
    rc = MPIX_Stream_create(info, &tmp);
    CHECK(rc != MPI_SUCCESS && strstr(err_text(rc), "MPIX_Stream_create"), "cudaStream_t without value: rc %d", rc);
    MPI_Info_free(&info);
    BAD(MPI_ERR_ARG, "MPIX_Stream_free", MPIX_Stream_free(NULL));
    MPIX_Stream b = bogus;
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_free", MPIX_Stream_free(&b));
    b = freed;
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_free", MPIX_Stream_free(&b));
    b = MPIX_STREAM_NULL;
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_free", MPIX_Stream_free(&b));
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_progress", MPIX_Stream_progress(bogus));
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_progress", MPIX_Stream_progress(freed));
    BAD(MPIX_ERR_STREAM, "MPIX_Start_progress_thread", MPIX_Start_progress_thread(bogus));
    BAD(MPIX_ERR_STREAM, "MPIX_Stop_progress_thread", MPIX_Stop_progress_thread(freed));

    /* stream communicators */
    BAD(MPI_ERR_ARG, "MPIX_Stream_comm_create", MPIX_Stream_comm_create(MPI_COMM_WORLD, s, NULL));
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_comm_create", MPIX_Stream_comm_create(MPI_COMM_WORLD, bogus, &c));
    BAD(MPIX_ERR_STREAM, "MPIX_Stream_comm_create", MPIX_Stream_comm_create(MPI_COMM_WORLD, freed, &c));
    BAD(MPI_ERR_COMM, "MPIX_Stream_comm_create", MPIX_Stream_comm_create(MPI_COMM_NULL, s, &c));
    BAD(MPI_ERR_ARG, "MPIX_Comm_get_stream", MPIX_Comm_get_stream(MPI_COMM_WORLD, 0, NULL));
    BAD(MPI_ERR_ARG, "MPIX_Comm_get_stream", MPIX_Comm_get_stream(MPI_COMM_WORLD, -1, &tmp));
    BAD(MPI_ERR_ARG, "MPIX_Comm_get_stream", MPIX_Comm_get_stream(MPI_COMM_WORLD, 1, &tmp));
    BAD(MPI_ERR_COMM, "MPIX_Comm_get_stream", MPIX_Comm_get_stream(MPI_COMM_NULL, 0, &tmp));

    /* multiplex */
    MPIX_Stream arr[2] = {s, bogus};
    BAD(MPI_ERR_COUNT, "MPIX_Stream_comm_create_multiplex", MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, -1, arr, &mc));
    BAD(MPI_ERR_ARG, "MPIX_Stream_comm_create_multiplex", MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 2, NULL, &mc));
    BAD(MPI_ERR_ARG, "MPIX_Stream_comm_create_multiplex", MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, arr, NULL));
    BAD(MPI_ERR_COMM, "MPIX_Stream_comm_create_multiplex", MPIX_Stream_comm_create_multiplex(MPI_COMM_NULL, 1, arr, &mc));
    OK(MPIX_Stream_comm_create_multiplex(MPI_COMM_WORLD, 1, arr, &mc));
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    int peer = (rank + 1) % size;
    BAD(MPI_ERR_COMM, "MPIX_Stream_send", MPIX_Stream_send(buf, 1, MPI_INT, peer, 0, plain, 0, 0));
    BAD(MPI_ERR_COMM, "MPIX_Stream_isend", MPIX_Stream_isend(buf, 1, MPI_INT, peer, 0, plain, 0, 0, &req));
    BAD(MPI_ERR_COMM, "MPIX_Stream_recv", MPIX_Stream_recv(buf, 1, MPI_INT, peer, 0, plain, 0, 0, &st));
    BAD(MPI_ERR_COMM, "MPIX_Stream_irecv", MPIX_Stream_irecv(buf, 1, MPI_INT, peer, 0, plain, 0, 0, &req));
    BAD(MPI_ERR_COMM, "MPIX_Stream_send_c", MPIX_Stream_send_c(buf, bigc, MPI_INT, peer, 0, plain, 0, 0));
    BAD(MPI_ERR_COMM, "MPIX_Stream_irecv_c", MPIX_Stream_irecv_c(buf, bigc, MPI_INT, peer, 0, plain, 0, 0, &req));
    BAD(MPI_ERR_ARG, "MPIX_Stream_send", MPIX_Stream_send(buf, 1, MPI_INT, peer, 0, mc, -1, 0));
    BAD(MPI_ERR_ARG, "MPIX_Stream_send", MPIX_Stream_send(buf, 1, MPI_INT, peer, 0, mc, 0, 5));
    BAD(MPI_ERR_ARG, "MPIX_Stream_isend", MPIX_Stream_isend(buf, 1, MPI_INT, peer, 0, mc, 1, 0, &req));
    BAD(MPI_ERR_ARG, "MPIX_Stream_recv", MPIX_Stream_recv(buf, 1, MPI_INT, peer, 0, mc, 0, -3, &st));
    BAD(MPI_ERR_ARG, "MPIX_Stream_irecv", MPIX_Stream_irecv(buf, 1, MPI_INT, peer, 0, mc, 7, 0, &req));
    BAD(MPI_ERR_ARG, "MPIX_Stream_isend", MPIX_Stream_isend(buf, 1, MPI_INT, peer, 0, mc, 0, 0, NULL));
    BAD(MPI_ERR_ARG, "MPIX_Stream_irecv", MPIX_Stream_irecv(buf, 1, MPI_INT, peer, 0, mc, 0, 0, NULL));
    BAD(MPI_ERR_COUNT, "MPIX_Stream_send", MPIX_Stream_send(buf, -1, MPI_INT, peer, 0, mc, 0, 0));
    BAD(MPI_ERR_COUNT, "MPIX_Stream_recv_c", MPIX_Stream_recv_c(buf, -5, MPI_INT, peer, 0, mc, 0, 0, &st));
    BAD(MPI_ERR_TAG, "MPIX_Stream_send", MPIX_Stream_send(buf, 1, MPI_INT, peer, -7, mc, 0, 0));
    BAD(MPI_ERR_RANK, "MPIX_Stream_send", MPIX_Stream_send(buf, 1, MPI_INT, size + 3, 0, mc, 0, 0));
    BAD(MPI_ERR_ARG, "MPIX_Comm_get_stream", MPIX_Comm_get_stream(mc, 1, &tmp));
    MPI_Comm_free(&mc);

    /* enqueue: on a communicator without a stream (MPI_ERR_COMM), on a stream without a queue
     * (MPIX_ERR_STREAM), bad requests */
    OK(MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c));
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    BAD(MPI_ERR_COMM, "MPIX_Send_enqueue", MPIX_Send_enqueue(buf, 1, MPI_INT, peer, 0, plain));
    BAD(MPIX_ERR_STREAM, "MPIX_Send_enqueue", MPIX_Send_enqueue(buf, 1, MPI_INT, peer, 0, c));
    BAD(MPIX_ERR_STREAM, "MPIX_Recv_enqueue", MPIX_Recv_enqueue(buf, 1, MPI_INT, peer, 0, c, &st));
    BAD(MPIX_ERR_STREAM, "MPIX_Isend_enqueue", MPIX_Isend_enqueue(buf, 1, MPI_INT, peer, 0, c, &req));
    BAD(MPIX_ERR_STREAM, "MPIX_Irecv_enqueue", MPIX_Irecv_enqueue(buf, 1, MPI_INT, peer, 0, c, &req));
    BAD(MPIX_ERR_STREAM, "MPIX_Allreduce_enqueue", MPIX_Allreduce_enqueue(buf, buf + 1, 1, MPI_INT, MPI_SUM, c));
    BAD(MPI_ERR_COMM, "MPIX_Barrier_enqueue", MPIX_Barrier_enqueue(plain));
    BAD(MPI_ERR_COMM, "MPIX_Bcast_enqueue", MPIX_Bcast_enqueue(buf, 1, MPI_INT, 0, plain));
    BAD(MPI_ERR_COMM, "MPIX_Reduce_enqueue", MPIX_Reduce_enqueue(buf, buf + 1, 1, MPI_INT, MPI_SUM, 0, plain));
    BAD(MPI_ERR_COMM, "MPIX_Allgather_enqueue", MPIX_Allgather_enqueue(buf, 1, MPI_INT, buf, 1, MPI_INT, plain));
    BAD(MPI_ERR_COMM, "MPIX_Alltoall_enqueue", MPIX_Alltoall_enqueue(buf, 1, MPI_INT, buf, 1, MPI_INT, plain));
    BAD(MPI_ERR_COMM, "MPIX_Send_enqueue_c", MPIX_Send_enqueue_c(buf, bigc, MPI_INT, peer, 0, plain));
    req = 0x1234;
    BAD(MPI_ERR_REQUEST, "MPIX_Wait_enqueue", MPIX_Wait_enqueue(&req, &st));
    BAD(MPI_ERR_ARG, "MPIX_Wait_enqueue", MPIX_Wait_enqueue(NULL, &st));
    MPI_Request reqs[2] = {0x1234, 0x5678};
    BAD(MPI_ERR_COUNT, "MPIX_Waitall_enqueue", MPIX_Waitall_enqueue(-1, reqs, MPI_STATUSES_IGNORE));
    BAD(MPI_ERR_REQUEST, "MPIX_Waitall_enqueue", MPIX_Waitall_enqueue(2, reqs, MPI_STATUSES_IGNORE));
    BAD(MPIX_ERR_STREAM, "MPIX_Host_queue_launch", MPIX_Host_queue_launch(s, host_fn, NULL));
    BAD(MPIX_ERR_STREAM, "MPIX_Host_queue_launch", MPIX_Host_queue_launch(bogus, host_fn, NULL));
    BAD(MPIX_ERR_STREAM, "MPIX_Host_queue_synchronize", MPIX_Host_queue_synchronize(freed));
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", MPIX_HOST_QUEUE_TYPE);
    OK(MPIX_Stream_create(info, &sq));
    MPI_Info_free(&info);
    BAD(MPI_ERR_ARG, "MPIX_Host_queue_launch", MPIX_Host_queue_launch(sq, NULL, NULL));
    OK(MPIX_Host_queue_synchronize(sq));
    OK(MPIX_Stream_free(&sq));
    MPI_Comm_free(&c);

    /* hex */
    BAD(MPI_ERR_ARG, "MPIX_Info_get_hex", MPIX_Info_get_hex(MPI_INFO_NULL, "k", buf, 4, NULL));
    BAD(MPI_ERR_COUNT, "MPIX_Info_get_hex", MPIX_Info_get_hex(MPI_INFO_NULL, "k", buf, -4, &flag));

    /* everything still works */
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, plain));
    CHECK(sum == size, "allreduce after the bad calls: %d", sum);
    OK(MPIX_Stream_free(&s));
    MPI_Comm_free(&plain);
    if (rank == 0) printf("%d bad calls checked\n", checked);

    int total = 0;
    MPI_Allreduce(&mpixtest_errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    /* after MPI_Finalize: refused with MPI_ERR_OTHER, no crash */
    int after[6] = {
        MPIX_Stream_create(MPI_INFO_NULL, &tmp),
        MPIX_Stream_send(buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, 0, 0),
        MPIX_Send_enqueue(buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        MPIX_Comm_get_stream(MPI_COMM_WORLD, 0, &tmp),
        MPIX_Host_queue_synchronize(bogus),
        MPIX_Info_set_hex(MPI_INFO_NULL, "k", buf, 4),
    };
    for (int i = 0; i < 6; i++)
        if (after[i] != MPI_ERR_OTHER) {
            fprintf(stderr, "[rank %d] call %d after MPI_Finalize returned %d\n", rank, i, after[i]);
            total++;
        }
    if (rank == 0) printf(total ? " Found %d errors\n" : " No Errors\n", total);
    return total != 0;
}

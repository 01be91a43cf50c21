/*
 * mpix_stream.h: the MPIX stream API as mpixstream provides it on every MPICH >= 4.0.
 *
 * Same ABI and prototypes as native MPICH >= 4.1 (typedef int MPIX_Stream, MPIX_STREAM_NULL 0x3c000000,
 * MPIX_ERR_STREAM = MPICH_ERR_FIRST_MPIX+6), so a program compiled against MPICH 5's mpi.h runs with
 * libmpixstream.so preloaded on an MPICH that lacks streams, and this header compiles together with an
 * mpi.h that already declares the API (redeclaring an identical prototype is valid C).
 * Include it after <mpi.h>.
 */
#ifndef MPIX_STREAM_H_INCLUDED
#define MPIX_STREAM_H_INCLUDED

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MPIX_STREAM_NULL
typedef int MPIX_Stream;
#define MPIX_STREAM_NULL ((MPIX_Stream)0x3c000000)
#endif

#ifndef MPIX_ERR_STREAM
#define MPIX_ERR_STREAM (100 + 6) /* MPICH_ERR_FIRST_MPIX + 6: invalid stream */
#endif

/* Streams: a local serial execution context with a dedicated endpoint from a finite pool. */
int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream);
int MPIX_Stream_free(MPIX_Stream *stream);
int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm);
int MPIX_Comm_get_stream(MPI_Comm comm, int idx, MPIX_Stream *stream);
int MPIX_Stream_progress(MPIX_Stream stream);
int MPIX_Start_progress_thread(MPIX_Stream stream);
int MPIX_Stop_progress_thread(MPIX_Stream stream);

/* Multiplex stream communicators: each process attaches count streams (counts may differ, entries may be
 * MPIX_STREAM_NULL); indexed point-to-point names a source and a destination stream index. Implemented
 * by mpixstream on every MPICH (never native MPICH's, which aborts in 5.0.2); see docs/multiplex.md.
 * Ordinary MPI calls on the new communicator behave as on its parent. */
int MPIX_Stream_comm_create_multiplex(MPI_Comm comm, int count, MPIX_Stream array_of_streams[],
                                      MPI_Comm *newcomm);
/* Ours: the largest tag indexed calls on multiplex communicator comm accept (MPI_TAG_UB divided by the
 * largest count of any process, as the source index travels in the tag on some hidden communicators). */
int MPIX_Comm_multiplex_tag_ub(MPI_Comm comm, int *tag_ub);
int MPIX_Stream_send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                     MPI_Comm comm, int source_stream_index, int dest_stream_index);
int MPIX_Stream_isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm, int source_stream_index, int dest_stream_index,
                      MPI_Request *request);
int MPIX_Stream_recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                     MPI_Comm comm, int source_stream_index, int dest_stream_index,
                     MPI_Status *status);
int MPIX_Stream_irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                      MPI_Comm comm, int source_stream_index, int dest_stream_index,
                      MPI_Request *request);
int MPIX_Stream_send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                       MPI_Comm comm, int source_stream_index, int dest_stream_index);
int MPIX_Stream_isend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                        MPI_Comm comm, int source_stream_index, int dest_stream_index,
                        MPI_Request *request);
int MPIX_Stream_recv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                       MPI_Comm comm, int source_stream_index, int dest_stream_index,
                       MPI_Status *status);
int MPIX_Stream_irecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm, int source_stream_index, int dest_stream_index,
                        MPI_Request *request);

/* Ours (native MPICH has none): as the source_stream_index of MPIX_Stream_recv/irecv(_c), accepts a
 * message from any source index; combines with MPI_ANY_SOURCE and MPI_ANY_TAG. The status reports the
 * source rank and the user's tag (MPI_Status has no field for the source index). */
#ifndef MPIX_ANY_INDEX
#define MPIX_ANY_INDEX (-1)
#endif

/* Binary info values, in native MPICH's text form. */
int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);
/* Ours: decodes a value written by MPIX_Info_set_hex into exactly value_size bytes; *flag = 0 if the
 * key is absent. */
int MPIX_Info_get_hex(MPI_Info info, const char *key, void *value, int value_size, int *flag);

/* Enqueue (docs/enqueue.md): operations queued on the execution queue of a communicator's local
 * stream, in order with the queue's other work. The stream must be queue-backed, created with info
 *   type=cudaStream_t          value = the cudaStream_t, written by MPIX_Info_set_hex (8 bytes), or
 *   type=mpixstream_host_queue a serial CPU work queue of ours (no value),
 * and the program initialised with MPI_THREAD_MULTIPLE (or MPIXSTREAM_THREAD_MULTIPLE=1 set).
 * The blocking forms make the queue wait for the operation; buffers, datatypes, ops and statuses must
 * stay valid until the queue has passed the operation. Requests of MPIX_Isend/Irecv_enqueue are ours:
 * valid only for MPIX_Wait_enqueue/MPIX_Waitall_enqueue (all requests of one call from one stream).
 * Prototypes identical to native MPICH 5 where it has the function. */
#define MPIX_HOST_QUEUE_TYPE "mpixstream_host_queue"
int MPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm);
int MPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                      MPI_Comm comm, MPI_Status *status);
int MPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                       MPI_Comm comm, MPI_Request *request);
int MPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                       MPI_Comm comm, MPI_Request *request);
int MPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status);
int MPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses);
int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm);
int MPIX_Send_enqueue_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                        MPI_Comm comm);
int MPIX_Recv_enqueue_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm, MPI_Status *status);
int MPIX_Isend_enqueue_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                         MPI_Comm comm, MPI_Request *request);
int MPIX_Irecv_enqueue_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                         MPI_Comm comm, MPI_Request *request);
int MPIX_Allreduce_enqueue_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
/* Ours (native MPICH has no enqueued form of these). */
int MPIX_Barrier_enqueue(MPI_Comm comm);
int MPIX_Bcast_enqueue(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPIX_Reduce_enqueue(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, int root, MPI_Comm comm);
int MPIX_Allgather_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPIX_Alltoall_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPIX_Bcast_enqueue_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root,
                         MPI_Comm comm);
int MPIX_Reduce_enqueue_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                          MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPIX_Allgather_enqueue_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                             void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                             MPI_Comm comm);
int MPIX_Alltoall_enqueue_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                            void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                            MPI_Comm comm);
/* Ours: the host queue of a stream created with type=mpixstream_host_queue.
 * MPIX_Host_queue_launch runs fn(arg) after everything queued before it, on the queue's worker
 * thread or on a thread synchronising the queue (fn must not call MPI on the stream's
 * communicators); MPIX_Host_queue_synchronize runs the queue's items on the calling thread until
 * everything queued so far has run, and reports a failed enqueued operation (MPI_ERR_OTHER). */
int MPIX_Host_queue_launch(MPIX_Stream stream, void (*fn)(void *), void *arg);
int MPIX_Host_queue_synchronize(MPIX_Stream stream);

#ifdef __cplusplus
}
#endif

#endif /* MPIX_STREAM_H_INCLUDED */

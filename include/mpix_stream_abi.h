/*
 * mpix_stream_abi.h: the MPIX stream API as mpixstream provides it to a program built for the MPI-5
 * standard ABI (MPICH 5's `mpicc -mpi-abi`: mpi_abi.h, libmpi_abi.so.1; handles are pointers).
 *
 * Include it after <mpi.h> (of an ABI build) or <mpi_abi.h>. No library of this ABI defines these
 * functions: link libmpixstream.so (`mpicc -mpi-abi app.c $(pkg-config --cflags --libs mpixstream)`, whose
 * --no-as-needed keeps it before libmpi_abi.so.1), or declare them weak and preload it (scripts/mpixrun). Same function
 * names and argument orders as mpix_stream.h; what differs is the ABI's:
 *   - MPIX_Stream is a pointer-sized handle, MPIX_STREAM_NULL the null pointer;
 *   - MPIX_ERR_STREAM is MPI_ERR_ARG (the standard ABI reserves no class for streams; the error's
 *     string names the stream);
 *   - the streams are on the serial model: functionally complete, but every stream shares the MPI
 *     library's endpoints (the library has no streams), so their traffic is serialised there;
 *   - MPIX_ANY_INDEX is accepted by MPIX_Stream_recv(_c) only (MPIX_Stream_irecv refuses it);
 *   - the enqueue calls, the host queues, queue-backed streams (info key "type"), the progress threads
 *     and MPIX_Info_set_hex/get_hex fail with MPI_ERR_UNSUPPORTED_OPERATION (declared so that a program
 *     written for both ABIs compiles);
 *   - a dup of a multiplex communicator is a plain communicator (a dup of a stream communicator keeps
 *     its stream).
 * See docs/architecture.md, section 7.
 */
#ifndef MPIX_STREAM_ABI_H_INCLUDED
#define MPIX_STREAM_ABI_H_INCLUDED

#include <mpi.h>

#if !defined(MPI_ABI_VERSION)
#error "mpix_stream_abi.h is for programs built for the MPI standard ABI (mpicc -mpi-abi); use mpix_stream.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct MPIX_Stream_impl *MPIX_Stream;
#define MPIX_STREAM_NULL ((MPIX_Stream)0)
#define MPIX_ERR_STREAM MPI_ERR_ARG
#define MPIX_ANY_INDEX (-1)

/* Streams: a local serial execution context (here on the library's shared endpoints), from a finite pool
 * (MPIXSTREAM_STREAMS, default 8). */
int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream);
int MPIX_Stream_free(MPIX_Stream *stream);
int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm);
int MPIX_Comm_get_stream(MPI_Comm comm, int idx, MPIX_Stream *stream);
int MPIX_Stream_progress(MPIX_Stream stream);
int MPIX_Start_progress_thread(MPIX_Stream stream);
int MPIX_Stop_progress_thread(MPIX_Stream stream);

/* Multiplex stream communicators: each process attaches count streams (counts may differ, entries may be
 * MPIX_STREAM_NULL; at most 16 on this ABI); indexed point-to-point names a source and a destination
 * stream index. Ordinary MPI calls on the new communicator behave as on its parent. */
int MPIX_Stream_comm_create_multiplex(MPI_Comm comm, int count, MPIX_Stream array_of_streams[],
                                      MPI_Comm *newcomm);
/* Ours: the largest tag indexed calls on multiplex communicator comm accept (on this ABI the parent's
 * MPI_TAG_UB: each pair of indices has its own hidden communicator, the tag travels unchanged). */
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

/* Binary info values (refused on this ABI). */
int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);
int MPIX_Info_get_hex(MPI_Info info, const char *key, void *value, int value_size, int *flag);

/* Enqueue: refused on this ABI (MPI_ERR_UNSUPPORTED_OPERATION); prototypes as in mpix_stream.h. */
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

#endif /* MPIX_STREAM_ABI_H_INCLUDED */

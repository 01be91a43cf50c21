/* A deliberate violation of the explicit policy's assertion: two threads of rank 0 use one communicator
 * at the same time (thread A blocks in MPI_Recv on it; thread B sends on it meanwhile). Legal MPI under
 * the implicit policy; under MPIXSTREAM_POLICY=explicit the communicator's stream is an endpoint MPICH
 * does not lock, and MPIXSTREAM_CHECK=1 must stop the job with a clear message before thread B enters
 * MPICH. If nothing catches it the program completes and prints " No Errors" (the test then fails). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static MPI_Comm c;
static volatile int a_started;

static void *thread_a(void *arg) {
    (void)arg;
    int v = 0;
    __atomic_store_n(&a_started, 1, __ATOMIC_RELEASE);
    MPI_Recv(&v, 1, MPI_INT, 1, 1, c, MPI_STATUS_IGNORE); /* rank 1 sends tag 1 only after tag 2 */
    return NULL;
}

static void *thread_b(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&a_started, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(300 * 1000); /* thread A is inside MPI_Recv by now */
    int v = 2;
    MPI_Send(&v, 1, MPI_INT, 1, 2, c);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    if (rank == 0) {
        pthread_t a, b;
        pthread_create(&a, NULL, thread_a, NULL);
        pthread_create(&b, NULL, thread_b, NULL);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (rank == 1) {
        int v = 0;
        MPI_Recv(&v, 1, MPI_INT, 0, 2, c, MPI_STATUS_IGNORE);
        MPI_Send(&v, 1, MPI_INT, 0, 1, c);
    }
    MPI_Comm_free(&c);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf(" No Errors\n");
    MPI_Finalize();
    return 0;
}

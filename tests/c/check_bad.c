/* A deliberate violation of the explicit policy's assertion: two threads of rank 0 use one communicator
 * at the same time (thread A blocks in MPI_Recv on it; thread B sends on it meanwhile). Legal MPI under
 * the implicit policy; under MPIXSTREAM_POLICY=explicit the communicator's stream is an endpoint MPICH
 * does not lock, and MPIXSTREAM_CHECK=1 must stop the job with a clear message before thread B enters
 * MPICH. If nothing catches it the program completes and prints " No Errors" (the test then fails).
 * MPIXTEST_B_IBARRIER=1: thread B starts with an MPI_Ibarrier on the communicator and waits for it, a
 * nonblocking collective, which the policy runs on the communicator's plain base on MPICH >= 4.3: the
 * check must catch it all the same. Rank 1 never joins it, so only the check at its entry (or in its
 * MPI_Wait) can end the job: uncaught, the job hangs until the harness's timeout and fails. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static MPI_Comm c;
static volatile int a_started;
static int b_ibarrier;

static void ibarrier(void) {
    MPI_Request r;
    MPI_Ibarrier(c, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

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
    if (b_ibarrier) ibarrier();
    int v = 2;
    MPI_Send(&v, 1, MPI_INT, 1, 2, c);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    b_ibarrier = getenv("MPIXTEST_B_IBARRIER") && atoi(getenv("MPIXTEST_B_IBARRIER"));
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

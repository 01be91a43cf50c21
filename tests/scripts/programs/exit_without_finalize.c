/* A program that ends without MPI_Finalize (as one does after an error of its own): MPI_Init_thread at
 * MPI_THREAD_MULTIPLE, one MPI_Comm_dup, a barrier, then, with an argument, a sleep of that many
 * seconds (a job to kill), and a return from main. */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int c, char **v) { int p; MPI_Init_thread(&c, &v, MPI_THREAD_MULTIPLE, &p); MPI_Comm d; MPI_Comm_dup(MPI_COMM_WORLD, &d); MPI_Barrier(d); if (c > 1) sleep(atoi(v[1])); return 0; }

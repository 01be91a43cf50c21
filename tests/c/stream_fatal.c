/* With the default handler (MPI_ERRORS_ARE_FATAL) an invalid stream aborts the job with our message.
 * The runner expects a non-zero exit and the message in the output. */
#include "mpixtest.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPIX_Stream bogus = 0x1234;
    MPIX_Stream_progress(bogus);
    printf("still running after a fatal error\n");
    MPI_Finalize();
    return 0;
}

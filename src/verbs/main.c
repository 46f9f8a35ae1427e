/* main.c: ftllm's entry point. MPI comes up first and goes down last; everything in between is
 * a verb (cli.c), so `main` stays a two-line story. One exception: after a process of the job
 * died (ULFM), the survivors end without MPI_Finalize, which can wait on the dead (comm.h). */
#include <mpi.h>

#include "ftllm/cli.h"
#include "ftllm/comm.h"
#include "ftllm/log.h"

int main(int argc, char **argv)
{
    int rank = 0;
    int provided = 0; /* asynchronous checkpoints write from a thread (ckpt.h checks the level) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    log_init(rank, FT_LOG_INFO);
    int rc = cli_main(argc, argv, MPI_COMM_WORLD);
    if (comm_ft_survived()) comm_ft_exit(rc);
    MPI_Finalize();
    return rc;
}

/* comm_select.c: which transport a CUDA job's ranks use for device buffers (comm.h): NCCL with
 * one GPU per rank, MPI with host staging otherwise; the choice agreed over the job. */
#include <stdio.h>

#include "comm_impl.h"

int comm_device_choice(int local_rank, int local_size, int ngpus, bool nccl_ok, int *device,
                       char *why, size_t whylen)
{
    why[0] = '\0';
    *device = -1;
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
        snprintf(why, whylen, "local rank %d of %d ranks on this node: inconsistent", local_rank,
                 local_size);
        return -1;
    }
    if (ngpus < 1) {
        snprintf(why, whylen, "no GPU on this node for its %d rank%s", local_size,
                 local_size == 1 ? "" : "s");
        return -1;
    }
    *device = local_rank % ngpus;
    if (local_size > ngpus) {
        snprintf(why, whylen, "%d ranks share %d GPU%s on this node (NCCL needs a GPU per rank): "
                 "MPI with host staging", local_size, ngpus, ngpus == 1 ? "" : "s");
        return FT_DEVCOMM_MPI_STAGED;
    }
    if (!nccl_ok) {
        snprintf(why, whylen, "NCCL is not available: MPI with host staging");
        return FT_DEVCOMM_MPI_STAGED;
    }
    return FT_DEVCOMM_NCCL;
}

FtDevComm comm_device_agree(FtComm *world, FtDevComm mine)
{
    int all = world ? comm_all_true(world, mine == FT_DEVCOMM_NCCL) : mine == FT_DEVCOMM_NCCL;
    return all ? FT_DEVCOMM_NCCL : FT_DEVCOMM_MPI_STAGED;
}

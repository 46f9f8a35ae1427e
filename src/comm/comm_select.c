/* comm_select.c: which transport a CUDA job's ranks use for device buffers (comm.h): NCCL with
 * one GPU per rank, MPI with host staging otherwise; the choice agreed over the job and resolved
 * against parallel.device_comm; the communicator that carries both (comm_create_routed). */
#include <stdio.h>
#include <string.h>

#include "ftllm/deck_keys.h"
#include "ftllm/log.h"

#include "comm_impl.h"

int comm_device_choice(const unsigned char *uuid, int local_rank, int local_size, bool nccl_ok,
                       char *why, size_t whylen)
{
    why[0] = '\0';
    if (!uuid || local_size < 1 || local_rank < 0 || local_rank >= local_size) {
        snprintf(why, whylen, "local rank %d of %d ranks on this node: inconsistent", local_rank,
                 local_size);
        return -1;
    }
    int others = 0;
    for (int q = 0; q < local_size; q++)
        others += q != local_rank && !memcmp(uuid + 16 * q, uuid + 16 * local_rank, 16);
    if (others) {
        snprintf(why, whylen, "this rank shares its GPU with %d other rank%s on its node (NCCL "
                 "needs a GPU per rank)", others, others == 1 ? "" : "s");
        return FT_DEVCOMM_MPI_STAGED;
    }
    if (!nccl_ok) {
        snprintf(why, whylen, "NCCL is not available here");
        return FT_DEVCOMM_MPI_STAGED;
    }
    return FT_DEVCOMM_NCCL;
}

FtDevComm comm_device_agree(FtComm *world, FtDevComm mine)
{
    int all = world ? comm_all_true(world, mine == FT_DEVCOMM_NCCL) : mine == FT_DEVCOMM_NCCL;
    return all ? FT_DEVCOMM_NCCL : FT_DEVCOMM_MPI_STAGED;
}

/* ---- NCCL beside MPI (comm_create_routed) ---- */

static FtDeviceTransport g_transport; /* NULL: NCCL */

void comm_set_device_transport(FtDeviceTransport fn) { g_transport = fn; }

FtComm *comm_create_routed(MPI_Comm comm, const char *name, const FtCommStager *st, void *stream,
                           char *err, size_t errlen)
{
    FT_ASSERT(st && st->is_device);
    char dname[48];
    snprintf(dname, sizeof dname, "%s.device", name);
    FtComm *dev = g_transport ? g_transport(comm, dname, stream, err, errlen)
                              : comm_create_nccl(comm, dname, stream, err, errlen);
    if (!dev) return NULL; /* the transports agree on failure over comm */
    FtComm *c = comm_create_staged(comm, name, st);
    c->dev = dev;
    c->dev_st = *st;
    return c;
}

int comm_device_pick(int want, int nranks, bool ulfm, bool spare, FtDevComm agreed,
                     const char *why_not, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (want == FT_DEVCOMM_KEY_MPI) return FT_DEVCOMM_MPI_STAGED;
    const char *no = NULL;
    if (ulfm)
        no = "the job runs under ULFM, and a failed rank would hang NCCL";
    else if (agreed != FT_DEVCOMM_NCCL)
        no = why_not && why_not[0] ? why_not : "another rank cannot use NCCL";
    if (want == FT_DEVCOMM_KEY_NCCL) {
        if (!no) {
            snprintf(msg, msglen, "collectives on device buffers over NCCL, the rest over MPI "
                                  "with host staging (parallel.device_comm = nccl)");
            return FT_DEVCOMM_NCCL;
        }
        snprintf(msg, msglen, "parallel.device_comm = nccl: %s (HINT: parallel.device_comm = "
                              "auto or mpi)", no);
        return -1;
    }
    if (nranks < 2) no = "one rank: nothing to communicate"; /* the reason that matters first */
    if (!no && spare)
        no = "SPARe (spare.r, spare.spares) rebuilds the communicators when a replica fails, "
             "not yet run over NCCL (parallel.device_comm = nccl asks for it)";
    if (no) {
        snprintf(msg, msglen, "device buffers over MPI with host staging: %s", no);
        return FT_DEVCOMM_MPI_STAGED;
    }
    snprintf(msg, msglen, "collectives on device buffers over NCCL, the rest over MPI with host "
                          "staging (parallel.device_comm = auto)");
    return FT_DEVCOMM_NCCL;
}

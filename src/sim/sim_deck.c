/* sim_deck.c: cluster decks for `optimize` and `simulate`: loading and the conversion of the
 * deck's [cluster] section into the models' structs.
 *
 * A cluster deck describes a what-if cluster, not this job, so the job's own rank count must not
 * be checked against the deck's [parallel] layout: rank 0 loads the deck with deck_load() on
 * MPI_COMM_SELF (reading, parsing, overrides and every check as for `train`, with a job of one
 * rank) and broadcasts the verdict and the resolved configuration to the other ranks. */
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/log.h"
#include "ftllm/sim.h"

int sim_deck_load(FtConfig *cfg, const char *path, int nover, char **over, MPI_Comm comm, char *err,
                  size_t errlen)
{
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    int rc = 0;
    if (rank == 0) rc = deck_load(cfg, path, nover, over, MPI_COMM_SELF, err, errlen);
    FT_CHECK_MPI(MPI_Bcast(&rc, 1, MPI_INT, 0, comm));
    FT_CHECK_MPI(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, comm));
    char *text = rank == 0 ? cfg->text : NULL;
    FT_CHECK_MPI(MPI_Bcast(cfg, (int)sizeof *cfg, MPI_BYTE, 0, comm));
    cfg->text = text;
    if (rank != 0) cfg->text_len = 0;
    return rc;
}

void sim_cluster_from_cfg(const FtConfig *cfg, FtCluster *c)
{
    const struct ft_cfg_cluster *k = &cfg->cluster;
    memset(c, 0, sizeof *c);
    c->gpus = k->gpus;
    c->gpus_per_replica = k->gpus_per_replica;
    c->gpu_mtbf = k->gpu_mtbf_h * 3600.0;
    c->law = k->failure_law;
    c->weibull_shape = k->weibull_shape;
    c->restart = k->restart_s;
    c->ckpt = k->checkpoint_s;
    c->step = k->step_s;
    c->steps = (double)k->steps;
    c->latency = k->detect_latency_s;
}

void sim_sparing_from_cfg(const FtConfig *cfg, int R, int I, FtSparing *s)
{
    const struct ft_cfg_cluster *k = &cfg->cluster;
    memset(s, 0, sizeof *s);
    s->B = (int)k->zones;
    s->L = (int)k->blocks_per_zone;
    s->K = (int)k->trays_per_block - I;
    s->R = R, s->I = I;
    s->gpus_per_tray = (int)k->gpus_per_tray;
    s->tray_mtbf = k->tray_mtbf_h, s->tray_mttr = k->tray_mttr_h;
    s->rack_mtbf = k->rack_mtbf_h, s->rack_mttr = k->rack_mttr_h;
    s->ckpt = k->checkpoint_s, s->restart = k->restart_s;
    s->interval = 0;
    s->law = k->failure_law;
    s->shape = k->weibull_shape;
    s->horizon = k->sparing_horizon_h;
}

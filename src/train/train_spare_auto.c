/* train_spare_auto.c: spare.r = auto, the redundancy the analytic optimizer recommends for this
 * job (train.h: train_spare_auto).
 *
 * Key decisions:
 *  - Before the first step: r decides which shards each replica stacks from step 1 (the trainer,
 *    the gradient sync and the controller are built for it), so nothing of this run can be
 *    measured yet. The step time is cluster.step_s and the checkpoint cost cluster.checkpoint_s
 *    (checkpoint.interval = auto measures them instead: it can wait for the first steps).
 *  - The equivalent cluster: the deck's [cluster] section with N = parallel.dp replicas of
 *    cluster.gpus_per_replica GPUs (cluster.gpus is replaced by dp x that) and the run's length
 *    train.steps (cluster.steps is replaced); failure law, MTBF, restart, detection latency and
 *    cluster.r_max as given. The choice is `ftllm optimize`'s recommendation for that deck
 *    (analytic_optimize + analytic_best_policy): SPARe's r when SPARe wins, 1 when checkpoints
 *    alone win (a failure is then a wipe-out: r = 1), SPARe's best r when plain replication
 *    wins (training runs SPARe, which masks at least what replication of the same r masks).
 *    Clamped to 1..dp; dp = 1 is r = 1 without asking.
 *  - Agreement: rank 0 decides, the verdict, r and any error are broadcast (every rank applies
 *    the same r; the optimizer's Monte Carlo fallback for a large N is seeded, but one decision
 *    needs no argument about floating point).
 *  - Resume (checkpoint.resume set): rank 0 reads spare.r and parallel.dp from the resolved
 *    configuration in the checkpoint it will resume from. Same dp and a SPARe r there: that r is
 *    kept (the run goes on as it was; a changed train.steps or [cluster] could move the
 *    optimizer's choice, said in the line). Otherwise the new choice, and the line says why the
 *    checkpoint's r was not kept. A checkpoint that cannot be found or read here is left to the
 *    resume itself, which reports it.
 *  - The number replaces `auto` in the configuration, so the resolved deck (<checkpoint.dir>/
 *    <run.name>.deck.ini) and every checkpoint's /config/resolved hold the r chosen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"
#include "ftllm/ckpt.h"
#include "ftllm/deck.h"
#include "ftllm/log.h"
#include "ftllm/sim.h"
#include "ftllm/train.h"

static const char *g_pol[FT_POL_NPOL] = {"checkpoints alone", "replication", "SPARe"};

/* The optimizer's r for this job; 0 with `why` filled, or -1 with err. */
static int choose(const FtConfig *cfg, int *r, char *why, size_t whylen, char *err, size_t errlen)
{
    long long dp = cfg->parallel.dp;
    if (dp == 1) {
        *r = 1;
        snprintf(why, whylen, "parallel.dp = 1: one replica holds the one shard");
        return 0;
    }
    FtCluster c;
    sim_cluster_from_cfg(cfg, &c);
    c.gpus = dp * c.gpus_per_replica;
    c.steps = (double)cfg->train.steps;
    int r_max = (int)(cfg->cluster.r_max < dp ? cfg->cluster.r_max : dp);
    FtPlan best[FT_POL_NPOL];
    if (analytic_optimize(&c, r_max, best, NULL)) {
        snprintf(err, errlen, "%s: spare.r = auto: the optimizer has no feasible plan for N = "
                              "parallel.dp = %lld replicas with this deck's [cluster] keys (HINT: "
                              "check cluster.*, or give spare.r a number)", cfg->path, dp);
        return -1;
    }
    int win = analytic_best_policy(best);
    int pick = win == FT_POL_CKPT ? 1 : best[FT_POL_SPARE].r;
    if (pick < 1) pick = 1;
    if (pick > dp) pick = (int)dp;
    const FtPlan *ch = pick == 1 ? &best[FT_POL_CKPT] : &best[FT_POL_SPARE];
    const FtPlan *one = &best[FT_POL_CKPT];
    *r = pick;
    snprintf(why, whylen, "`ftllm optimize` recommends %s%s for N = parallel.dp = %lld replicas "
                          "of cluster.gpus_per_replica = %lld GPUs, MTBF %g h each, step "
                          "cluster.step_s = %g s, %lld steps: predicted time-to-train %.4g s, "
                          "goodput %.4f vs %.4g s, %.4f with r = 1",
             g_pol[win], win == FT_POL_REP ? " (training runs SPARe's best r)" : "", dp,
             c.gpus_per_replica, cfg->cluster.gpu_mtbf_h, c.step, cfg->train.steps, ch->ttt,
             ch->goodput, one->ttt, one->goodput);
    return 0;
}

/* Rank 0, resume: spare.r and parallel.dp of the checkpoint the run will resume from. 0 when
 * read, -1 when there is none to read here (the resume reports its own errors). */
static int checkpoint_r(const FtConfig *cfg, long long *ck_r, long long *ck_dp, char *file,
                        size_t filelen)
{
    char err[FT_DECK_ERR_MAX];
    if (!strcmp(cfg->checkpoint.resume, "auto")) {
        long long step = 0;
        if (ckpt_find_latest(cfg->checkpoint.dir, cfg->run.name, MPI_COMM_SELF, file, filelen,
                             &step, err, sizeof err) != 1)
            return -1;
    } else {
        snprintf(file, filelen, "%s", cfg->checkpoint.resume);
    }
    FtCkptFile *f = ckpt_open(file, MPI_COMM_SELF, err, sizeof err);
    if (!f) return -1;
    char *text = NULL;
    int rc = ckpt_read_text(f, CKPT_DS_CONFIG, &text, err, sizeof err);
    ckpt_close(f);
    if (rc) return -1;
    FtConfig ck;
    rc = deck_defaults(&ck, err, sizeof err) ||
         deck_parse(&ck, file, text, strlen(text), err, sizeof err) ? -1 : 0;
    free(text);
    if (!rc) *ck_r = ck.spare.r, *ck_dp = ck.parallel.dp;
    deck_free(&ck);
    return rc;
}

int train_spare_auto(FtConfig *cfg, MPI_Comm comm, char *err, size_t errlen)
{
    if (cfg->spare.r != FT_AUTO) return 0;
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    int msg[2] = {0, 0}; /* rc, r */
    if (rank == 0) {
        char why[768] = "";
        int r = 0;
        msg[0] = choose(cfg, &r, why, sizeof why, err, errlen);
        msg[1] = r;
        char file[CKPT_PATH_MAX] = "";
        long long ck_r = 0, ck_dp = 0;
        if (!msg[0] && cfg->checkpoint.resume[0] &&
            !checkpoint_r(cfg, &ck_r, &ck_dp, file, sizeof file)) {
            if (ck_dp == cfg->parallel.dp && ck_r >= 1 && ck_r <= cfg->parallel.dp) {
                msg[1] = (int)ck_r;
                if (ck_r == r)
                    log_info("spare.r = auto: r = %d, as in %s: %s", r, file, why);
                else
                    log_info("spare.r = auto: r = %lld, kept from %s (same parallel.dp = %lld); "
                             "for this deck the optimizer would choose r = %d: %s", ck_r, file,
                             ck_dp, r, why);
            } else if (ck_dp != cfg->parallel.dp) {
                log_info("spare.r = auto: r = %d, not the r = %lld of %s: parallel.dp changed "
                         "from %lld to %lld; %s", r, ck_r, file, ck_dp, cfg->parallel.dp, why);
            } else {
                log_info("spare.r = auto: r = %d, not the r = %lld of %s (SPARe was off there): "
                         "%s", r, ck_r, file, why);
            }
        } else if (!msg[0]) {
            log_info("spare.r = auto: r = %d: %s", r, why);
        }
    }
    FT_CHECK_MPI(MPI_Bcast(msg, 2, MPI_INT, 0, comm));
    if (msg[0]) {
        FT_CHECK_MPI(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, comm));
        return -1;
    }
    cfg->spare.r = msg[1];
    return 0;
}

/* verb_optimize.c: `ftllm optimize DECK [section.key=value ...]`: recommends the redundancy r,
 * the checkpoint interval and the spares for the cluster in the deck's [cluster] section, from
 * the analytic models (analytic.h), and prints every alternative's predicted time-to-train and
 * goodput in tables a person can read. Every rank computes the same numbers (deterministic);
 * rank 0 prints them. `ftllm simulate` checks the predictions with the discrete-event simulator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"
#include "ftllm/cli.h"
#include "ftllm/deck.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"
#include "ftllm/sim.h"

static const char *g_pol_name[FT_POL_NPOL] = {"ckpt only", "replication", "SPARe"};

#define P0(...)                                                                                \
    do {                                                                                       \
        if (rank == 0) printf(__VA_ARGS__);                                                    \
    } while (0)

static void print_plan_row(int rank, const FtPlan *p, double step, const char *mark)
{
    P0("  %-12s %3d %10.1f %9.2f %6.3f %10.0f %8.1f %9.2f %8.3f %7.3f %s\n", g_pol_name[p->policy],
       p->r, p->mu, p->epoch / 3600.0, p->depth, p->interval / step, p->interval / 60.0,
       p->ttt / 86400.0, p->goodput, p->avail, mark);
}

static void print_head(int rank)
{
    P0("  %-12s %3s %10s %9s %6s %10s %8s %9s %8s %7s\n", "policy", "r", "fail/epoch", "epoch(h)",
       "depth", "ckpt/steps", "(min)", "TTT(days)", "goodput", "avail");
}

/* The sparing study (zones > 0): for each I, the best R by CETT. */
static void sparing_study(int rank, const FtConfig *cfg)
{
    const struct ft_cfg_cluster *k = &cfg->cluster;
    int I_lo = 0, I_hi = (int)(k->trays_per_block - 1 < 8 ? k->trays_per_block - 1 : 8);
    if (k->spare_trays != FT_AUTO) I_hi = (int)k->spare_trays;
    int maxR = (int)k->blocks_per_zone;
    P0("\nsparing (Meta model): %lld zones x %lld blocks x %lld trays of %lld GPUs; tray MTBF %g h, "
       "MTTR %g h; rack MTBF %g h, MTTR %g h; checkpoint %g s, restart %g s\n",
       k->zones, k->blocks_per_zone, k->trays_per_block, k->gpus_per_tray, k->tray_mtbf_h,
       k->tray_mttr_h, k->rack_mtbf_h, k->rack_mttr_h, k->checkpoint_s, k->restart_s);
    P0("  %11s %11s %8s %8s %8s %7s %7s %7s %10s\n", "spare trays", "spare blks", "P(block)",
       "unblkd", "run eff", "util", "ckpt(s)", "CETT", "work(GPUs)");
    double best0 = -1, best = -1;
    int bestI = 0, bestR = 0;
    for (int I = I_lo; I <= I_hi; I++) {
        if (k->spare_trays != FT_AUTO && I != 0 && I != k->spare_trays) continue;
        FtSparing s;
        sim_sparing_from_cfg(cfg, 0, I, &s);
        FtSparingResult res;
        int R;
        if (k->spare_blocks != FT_AUTO) {
            R = (int)k->spare_blocks;
            s.R = R;
            char err[256];
            if (analytic_sparing(&s, &res, err, sizeof err)) continue;
        } else {
            R = analytic_sparing_best_R(&s, maxR, &res);
        }
        P0("  %11d %11d %8.4f %8.4f %8.4f %7.4f %7.0f %7.4f %10.0f\n", I, R, res.p_block, res.avail,
           res.run_eff, res.util, res.interval, res.cett, res.work);
        /* strategies compete per provisioned GPU (a fixed hardware budget): CETT */
        if (I == 0) best0 = res.cett;
        if (res.cett > best) best = res.cett, bestI = I, bestR = R;
    }
    P0("recommended spares: %d intra-block spare tray%s per block, %d spare block%s per zone",
       bestI, bestI == 1 ? "" : "s", bestR, bestR == 1 ? "" : "s");
    if (bestI > 0 && best0 > 0) P0(": %.3fx the work (CETT, per provisioned GPU) of the best strategy without intra-block spares\n", best / best0);
    else P0("\n");
}

int verb_optimize(int argc, char **argv, MPI_Comm comm)
{
    if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=')) {
        cli_error(comm, "usage: ftllm optimize DECK [section.key=value ...]  (a cluster deck; "
                        "see inputs/cluster-*.ini and ftllm help deck)");
        return FT_EXIT_USAGE;
    }
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX] = "";
    if (sim_deck_load(&cfg, argv[1], argc - 2, argv + 2, comm, err, sizeof err)) {
        cli_error(comm, err);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    log_init(rank, cfg.run.log_level);
    FtCluster c;
    sim_cluster_from_cfg(&cfg, &c);
    int N = cluster_groups(&c);
    int r_max = (int)(cfg.cluster.r_max < N ? cfg.cluster.r_max : N);
    double W = c.steps * c.step;
    P0("ftllm %s optimize: %s\n", FTLLM_VERSION, cfg.path);
    P0("cluster: %lld GPUs = %d replicas of %lld; GPU MTBF %g h (%s) -> system MTBF %.2f min, "
       "replica MTBF %.1f h\n",
       c.gpus, N, c.gpus_per_replica, cfg.cluster.gpu_mtbf_h,
       c.law == FT_LAW_WEIBULL ? "Weibull" : "exponential", c.gpu_mtbf / c.gpus / 60.0,
       c.gpu_mtbf / c.gpus_per_replica / 3600.0);
    if (c.law == FT_LAW_WEIBULL)
        P0("  (Weibull shape %g: the optimizer uses the mean failure rate; `simulate` draws the "
           "law itself)\n", c.weibull_shape);
    P0("run: %.0f steps x %g s = %.1f days failure-free; checkpoint %g s, restart %g s, detection "
       "latency %g s\n\n", c.steps, c.step, W / 86400.0, c.ckpt, c.restart, c.latency);

    FtPlan best[FT_POL_NPOL];
    FtPlan *all = calloc((size_t)FT_POL_NPOL * r_max, sizeof *all);
    if (!all) FT_DIE("out of memory");
    if (analytic_optimize(&c, r_max, best, all)) {
        cli_error(comm, "ftllm optimize: the cluster has no feasible plan (check cluster.*)");
        free(all);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    int win = FT_POL_CKPT;
    for (int p = 0; p < FT_POL_NPOL; p++)
        if (best[p].r && best[p].ttt < best[win].ttt) win = p;

    P0("every alternative (predicted; depth = mean stack depth, the compute overhead):\n");
    print_head(rank);
    print_plan_row(rank, &best[FT_POL_CKPT], c.step, win == FT_POL_CKPT ? "<- best" : "");
    for (int p = FT_POL_REP; p <= FT_POL_SPARE; p++)
        for (int r = 2; r <= r_max; r++) {
            FtPlan *pl = &all[p * r_max + r - 1];
            if (!isfinite(pl->ttt)) continue;
            print_plan_row(rank, pl, c.step,
                           best[p].r == r ? (p == win ? "<- best" : "<- best of policy") : "");
        }

    FtPlan *b = &best[win];
    int rstar = analytic_rstar_paper(N);
    double lam = 1.0 / b->epoch;
    P0("\nrecommended: %s r = %d, checkpoint every %.0f steps (%.1f min of work); predicted "
       "time-to-train %.2f days, goodput %.3f, availability %.3f\n",
       g_pol_name[win], b->r, b->interval / c.step, b->interval / 60.0, b->ttt / 86400.0,
       b->goodput, b->avail);
    for (int p = 0; p < FT_POL_NPOL; p++)
        if (p != win && best[p].r)
            P0("  vs the best %s (r = %d): %.2f days, %.1f%% %s\n", g_pol_name[p], best[p].r,
               best[p].ttt / 86400.0, 100.0 * fabs(1.0 - b->ttt / best[p].ttt),
               b->ttt <= best[p].ttt ? "less time" : "more time");
    P0("why: a wipe-out every %.2f h of compute on average (%.1f failures per epoch), mean depth "
       "%.3f; the interval minimizes the expected time of checkpoints + lost work + restarts "
       "(Young %.0f s, Daly %.0f s for that wipe-out rate, in wall time)\n",
       b->epoch / 3600.0, b->mu, b->depth, analytic_young(c.ckpt, 1.0 / lam),
       analytic_daly(c.ckpt, 1.0 / lam));
    if (c.latency > 0) {
        int keep = 1;
        analytic_ckpt_latency(c.ckpt, lam, c.restart, c.latency, &keep);
        P0("detection latency %g s: keep the last %d checkpoints (a failure found late rolls back "
           "past the newest); expected extra waste %.3f%%\n", c.latency, keep, 100.0 * lam * c.latency);
    }
    P0("paper's r* = floor(log2 N + 0.833) = %d for N = %d", rstar, N);
    if (rstar <= N && N <= 20000) {
        double ex = analytic_mu_exact(N, rstar), cf = analytic_mu_closed(N, rstar);
        P0("; at r*, mu exact %.1f vs closed form %.1f (%+.2f%%)", ex, cf, 100.0 * (cf / ex - 1));
    }
    P0("\n");
    if (cfg.cluster.zones > 0) sparing_study(rank, &cfg);
    if (rank == 0) fflush(stdout);
    free(all);
    deck_free(&cfg);
    return FT_EXIT_OK;
}

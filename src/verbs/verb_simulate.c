/* verb_simulate.c: `ftllm simulate DECK [section.key=value ...]`: discrete-event simulation of
 * the whole training run of the deck's [cluster] (sim.h), for one policy or each policy at the
 * optimizer's r and interval (or the deck's cluster.r / cluster.interval), with confidence
 * intervals over cluster.trials independent runs spread over the MPI ranks. The analytic
 * prediction is printed beside each result. With cluster.zones > 0 the sparing model is
 * simulated too (composite process) against its closed form. Results do not depend on the number
 * of ranks (each trial is seeded from run.seed and its index). */
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

#define Z95 1.96

static const char *g_pol_key[FT_POL_NPOL] = {"ckpt", "replication", "spare"};

static int cluster_fn(int trial, double *out, void *ctx)
{
    return sim_cluster_trial(ctx, trial, out);
}

static int sparing_fn(int trial, double *out, void *ctx)
{
    return sim_sparing_trial(ctx, trial, out);
}

static FtStat col(const double *all, int n, int nout, int j, double *buf)
{
    for (int i = 0; i < n; i++) buf[i] = all[(size_t)i * nout + j];
    return stat_of(buf, n, Z95);
}

int verb_simulate(int argc, char **argv, MPI_Comm comm)
{
    if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=')) {
        cli_error(comm, "usage: ftllm simulate DECK [section.key=value ...]  (a cluster deck; "
                        "see inputs/cluster-*.ini and ftllm help deck)");
        return FT_EXIT_USAGE;
    }
    int rank = 0, nranks = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX] = "";
    if (sim_deck_load(&cfg, argv[1], argc - 2, argv + 2, comm, err, sizeof err)) {
        cli_error(comm, err);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    log_init(rank, cfg.run.log_level);
    const struct ft_cfg_cluster *k = &cfg.cluster;
    FtCluster c;
    sim_cluster_from_cfg(&cfg, &c);
    int N = cluster_groups(&c), trials = (int)k->trials, rc = FT_EXIT_OK;
    int r_max = (int)(k->r_max < N ? k->r_max : N);
    FtPlan best[FT_POL_NPOL];
    if (analytic_optimize(&c, r_max, best, NULL)) {
        cli_error(comm, "ftllm simulate: the cluster has no feasible plan (check cluster.*)");
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    double W = c.steps * c.step;
    if (rank == 0) {
        printf("ftllm %s simulate: %s, %d trials over %d rank%s, seed %lld\n", FTLLM_VERSION,
               cfg.path, trials, nranks, nranks == 1 ? "" : "s", cfg.run.seed);
        printf("cluster: %lld GPUs = %d replicas; GPU MTBF %g h (%s); %.1f days failure-free; "
               "checkpoint %g s, restart %g s\n",
               c.gpus, N, k->gpu_mtbf_h, c.law == FT_LAW_WEIBULL ? "Weibull" : "exponential",
               W / 86400.0, c.ckpt, c.restart);
        printf("%-12s %3s %8s | %-19s %9s | %-15s %-15s %9s %9s %8s\n", "policy", "r", "ckpt/stp",
               "TTT days (95% CI)", "predicted", "availability", "depth", "failures", "masked",
               "restarts");
    }
    double *all = malloc((size_t)trials * SIM_NOUT * sizeof *all), *buf = malloc((size_t)trials * sizeof *buf);
    if (!all || !buf) FT_DIE("out of memory for %d trials", trials);
    double ttt_of[FT_POL_NPOL] = {0};
    for (int p = 0; p < FT_POL_NPOL; p++) {
        if (k->policy != 3 && k->policy != p) continue;
        int r = k->r != FT_AUTO ? (int)k->r : best[p].r;
        if (p == FT_POL_CKPT) r = 1;
        double interval = k->interval != FT_AUTO ? (double)k->interval * c.step : 0;
        FtPlan pred;
        if (analytic_plan(&c, p, r, interval, &pred)) {
            char msg[256];
            snprintf(msg, sizeof msg, "ftllm simulate: no plan for %s at r = %d", g_pol_key[p], r);
            cli_error(comm, msg);
            rc = FT_EXIT_USAGE;
            break;
        }
        FtSimSpec s = {.c = c, .policy = p, .r = r, .interval = pred.interval,
                       .seed = (uint64_t)cfg.run.seed * 31u + (uint64_t)p, .log = NULL};
        if (k->event_log[0] && rank == 0) {
            char path[FT_DECK_STR_MAX + 32];
            snprintf(path, sizeof path, "%s-%s.csv", k->event_log, g_pol_key[p]);
            s.log = fopen(path, "w");
            if (!s.log) log_warn("cannot write the event log %s; going on without it", path);
        }
        int bad = sim_trials(comm, trials, SIM_NOUT, cluster_fn, &s, all);
        if (s.log) fclose(s.log);
        if (bad) {
            cli_error(comm, "ftllm simulate: a trial failed (invalid cluster parameters?)");
            rc = FT_EXIT_USAGE;
            break;
        }
        FtStat t = col(all, trials, SIM_NOUT, SIM_TTT, buf), a = col(all, trials, SIM_NOUT, SIM_AVAIL, buf),
               d = col(all, trials, SIM_NOUT, SIM_DEPTH, buf), f = col(all, trials, SIM_NOUT, SIM_FAILURES, buf),
               m = col(all, trials, SIM_NOUT, SIM_MASKED, buf), re = col(all, trials, SIM_NOUT, SIM_RESTARTS, buf);
        ttt_of[p] = t.mean;
        if (rank == 0)
            printf("%-12s %3d %8.0f | %8.2f +- %-7.2f %9.2f | %.4f +- %-6.4f %.3f +- %-6.3f %9.0f %9.0f "
                   "%8.1f\n",
                   g_pol_key[p], r, pred.interval / c.step, t.mean / 86400, t.half / 86400,
                   pred.ttt / 86400, a.mean, a.half, d.mean, d.half, f.mean, m.mean, re.mean);
    }
    if (rc == FT_EXIT_OK && rank == 0 && k->policy == 3 && ttt_of[FT_POL_REP] > 0 && ttt_of[FT_POL_SPARE] > 0)
        printf("SPARe + checkpoint vs replication + checkpoint: %.1f%% %s time-to-train (simulated)\n",
               100 * fabs(1 - ttt_of[FT_POL_SPARE] / ttt_of[FT_POL_REP]),
               ttt_of[FT_POL_SPARE] <= ttt_of[FT_POL_REP] ? "less" : "more");
    if (rc == FT_EXIT_OK && k->zones > 0) {
        int I = k->spare_trays != FT_AUTO ? (int)k->spare_trays : 0;
        FtSparing sp;
        FtSparingResult res;
        int bestI = I, bestR = 0;
        double bw = -1;
        for (int i = (k->spare_trays != FT_AUTO ? I : 0);
             i <= (k->spare_trays != FT_AUTO ? I : (k->trays_per_block - 1 < 8 ? (int)k->trays_per_block - 1 : 8)); i++) {
            sim_sparing_from_cfg(&cfg, 0, i, &sp);
            int R = k->spare_blocks != FT_AUTO ? (int)k->spare_blocks
                                               : analytic_sparing_best_R(&sp, (int)k->blocks_per_zone, &res);
            sp.R = R;
            if (analytic_sparing(&sp, &res, err, sizeof err)) continue;
            if (res.cett > bw) bw = res.cett, bestI = i, bestR = R;
        }
        sim_sparing_from_cfg(&cfg, bestR, bestI, &sp);
        analytic_sparing(&sp, &res, err, sizeof err);
        sp.interval = res.interval;
        FtSparingSim ss = {.s = sp, .horizon = k->sparing_horizon_h, .seed = (uint64_t)cfg.run.seed * 31u + 7};
        double *sall = malloc((size_t)trials * SPS_NOUT * sizeof *sall);
        if (!sall) FT_DIE("out of memory");
        if (sim_trials(comm, trials, SPS_NOUT, sparing_fn, &ss, sall) == 0 && rank == 0) {
            FtStat ce = col(sall, trials, SPS_NOUT, SPS_CETT, buf), av = col(sall, trials, SPS_NOUT, SPS_AVAIL, buf);
            printf("sparing: %d spare trays/block, %d spare blocks/zone: CETT %.4f +- %.4f (analytic "
                   "%.4f, %+.2f%%), not blocked %.4f (analytic %.4f)\n",
                   bestI, bestR, ce.mean, ce.half, res.cett, 100 * (ce.mean / res.cett - 1), av.mean,
                   res.avail);
        }
        free(sall);
    }
    if (rank == 0) fflush(stdout);
    free(all), free(buf);
    deck_free(&cfg);
    return rc;
}

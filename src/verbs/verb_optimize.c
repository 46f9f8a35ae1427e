/* verb_optimize.c: `ftllm optimize DECK [--verify] [section.key=value ...]`: recommends the
 * redundancy r, the checkpoint interval and the spares for the cluster in the deck's [cluster]
 * section, from the analytic models (analytic.h: the failure law's renewal density over the
 * run, the epochs of each policy, the checkpoint pieces), and prints every alternative's
 * predicted time-to-train and goodput in tables a person can read, and what a growing interval
 * would buy. Every rank computes the same numbers (deterministic); rank 0 prints them. With
 * --verify (or cluster.verify = true) the recommendation and its neighbours (r -+ 1 at their own
 * best intervals, the interval x0.8 and x1.25) are simulated, cluster.trials runs each over the
 * ranks with the same seeds, and a verdict says whether the recommendation is the simulated best
 * within the 95% confidence intervals (exit code 1 when a neighbour is better beyond them).
 * `ftllm simulate` checks any point with the discrete-event simulator. */
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

/* What the failure law does over the run: the group rate at a few times against the mean. */
static void print_law(int rank, const FtFailModel *m, const FtPlan *best)
{
    const FtCluster *c = &m->c;
    if (c->law != FT_LAW_WEIBULL) {
        P0("failure law: exponential: a constant failure rate over the run\n\n");
        return;
    }
    double T = best[FT_POL_CKPT].ttt;
    for (int p = 0; p < FT_POL_NPOL; p++)
        if (best[p].r && best[p].ttt < T) T = best[p].ttt;
    double mean_rate = (double)c->gpus / c->gpu_mtbf * 3600;
    P0("failure law: Weibull shape %g per GPU, every GPU new at the start and replaced by a new one: "
       "system failures per hour (mean-rate %.1f):", c->weibull_shape, mean_rate);
    const double at[4] = {3600, 86400, 0.1 * T, T};
    const char *nm[4] = {"1st hour", "1st day", "10% of the run", "end"};
    for (int i = 0; i < 4; i++) {
        double t0 = i < 2 ? 0 : at[i] * 0.95, t1 = at[i];
        P0(" %s %.1f%s", nm[i], analytic_group_rate(m, t0, t1) * cluster_groups(c) * 3600, i < 3 ? "," : "");
    }
    P0("; over the best plan's %.0f days %.1f (renewal function error < %.1e failures per GPU)\n\n",
       T / 86400, analytic_group_rate(m, 0, T) * cluster_groups(c) * 3600, m->gpu.err);
}

/* What an interval that starts short and grows would buy over the recommended fixed one. */
static void print_sched(int rank, const FtFailModel *m, const FtPlan *b)
{
    if (m->c.law != FT_LAW_WEIBULL || m->c.weibull_shape == 1.0) return;
    FtPlan s;
    if (analytic_plan_sched(m, b, &s)) return;
    double gain = 1 - s.ttt / b->ttt;
    P0("a growing interval (%.0f steps at the start, %.0f at the end: the local optimum x %.2f of the "
       "failure rate at each time) would take %.2f days: %.3f%% %s; %s\n",
       s.sched.tau[0] / m->c.step, s.sched.tau[s.sched.n - 1] / m->c.step, s.sched_scale, s.ttt / 86400,
       100 * fabs(gain), gain >= 0 ? "less" : "more",
       gain > 0.005 ? "worth considering" : "not worth a schedule (the fixed interval is recommended)");
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
    if (k->failure_law == FT_LAW_WEIBULL)
        P0("  up times Weibull k = %g, every part new at the start and after each repair (spares "
           "burn in while idle); CETT averaged over the first %g h\n",
           k->weibull_shape, k->sparing_horizon_h);
    else
        P0("  up times exponential, parts in their steady state\n");
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
    /* the ratio to the row without intra-block spares (0 trays), unless that row does next to no
     * work (a ratio of billions says nothing) */
    const char *base = k->spare_blocks != FT_AUTO ? "the same spare blocks" : "the best strategy";
    if (bestI > 0 && best0 > 1e-3 * best)
        P0(": %.3fx the work (CETT, per provisioned GPU) of %s without intra-block spares\n",
           best / best0, base);
    else if (bestI > 0 && best0 >= 0) /* best0 < 0: that row could not be computed */
        P0(": without intra-block spares (%s) the cluster does next to no work (CETT %.2g)\n",
           base, best0);
    else P0("\n");
}

#define Z95 1.96

static int verify_fn(int trial, double *out, void *ctx) { return sim_cluster_trial(ctx, trial, out); }

/* Simulated TTT of one plan (trials over comm, seed shared by every candidate) into x[trials]. */
static FtStat verify_sim(MPI_Comm comm, const FtCluster *c, const FtPlan *p, int trials, uint64_t seed,
                         double *all, double *x)
{
    FtSimSpec s = {.c = *c, .policy = p->policy, .r = p->r, .interval = p->interval, .seed = seed};
    if (sim_trials(comm, trials, SIM_NOUT, verify_fn, &s, all)) FT_DIE("a verification trial failed");
    for (int i = 0; i < trials; i++) x[i] = all[(size_t)i * SIM_NOUT + SIM_TTT];
    return stat_of(x, trials, Z95);
}

/* --verify: the recommendation and its neighbours (r within [1, r_max]), simulated. Returns 1
 * when a neighbour is better beyond the confidence intervals (its interval entirely below the
 * recommendation's), else 0. The paired difference (same seeds) is printed too: it resolves differences far below
 * the intervals, which near an optimum are real but too small to matter. */
static int verify(int rank, MPI_Comm comm, const FtFailModel *m, const FtPlan *rec, int r_max, int trials,
                  uint64_t seed)
{
    FtPlan cand[5];
    const char *what[5];
    int n = 0;
    cand[n] = *rec, what[n++] = "recommended";
    for (int d = -1; d <= 1; d += 2) {
        int pol = rec->policy, r = rec->r + d;
        if (pol == FT_POL_CKPT) {
            if (d < 0) continue;
            pol = FT_POL_SPARE, r = 2; /* one more replica of each shard */
        }
        if (r < 1 || r > r_max || analytic_fail_plan(m, pol, r, 0, &cand[n])) continue;
        what[n++] = d < 0 ? "r - 1" : "r + 1";
    }
    const double f[2] = {0.8, 1.25};
    for (int k = 0; k < 2; k++)
        if (analytic_fail_plan(m, rec->policy, rec->r, rec->interval * f[k], &cand[n]) == 0)
            what[n++] = k ? "interval x1.25" : "interval x0.8";
    double *all = malloc((size_t)trials * SIM_NOUT * sizeof *all), *x0 = malloc((size_t)trials * sizeof *x0);
    double *x = malloc((size_t)trials * sizeof *x), *d = malloc((size_t)trials * sizeof *d);
    if (!all || !x0 || !x || !d) FT_DIE("out of memory for %d trials", trials);
    const double step = m->c.step;
    P0("\nverify: %d simulated runs per candidate (same seeds), 95%% confidence intervals\n", trials);
    P0("  %-15s %-12s %3s %10s | %10s | %-21s | %s\n", "candidate", "policy", "r", "ckpt/steps",
       "predicted", "simulated TTT (days)", "simulated vs recommended (paired)");
    int beaten = 0, best = 0;
    double best_mean = 0;
    FtStat rec_st = {0};
    for (int k = 0; k < n; k++) {
        FtStat st = verify_sim(comm, &m->c, &cand[k], trials, seed, all, k ? x : x0);
        if (k == 0) best_mean = st.mean, rec_st = st;
        char diff[128] = "";
        if (k > 0) {
            for (int i = 0; i < trials; i++) d[i] = x[i] - x0[i];
            FtStat sd = stat_of(d, trials, Z95);
            int better = st.mean + st.half < rec_st.mean - rec_st.half;
            beaten |= better;
            snprintf(diff, sizeof diff, "%+7.3f%% +- %.3f%%%s", 100 * sd.mean / rec_st.mean,
                     100 * sd.half / rec_st.mean, better ? "  <- better beyond the intervals" : "");
            if (st.mean < best_mean) best_mean = st.mean, best = k;
        }
        P0("  %-15s %-12s %3d %10.0f | %10.2f | %9.2f +- %-8.2f | %s\n", what[k], g_pol_name[cand[k].policy],
           cand[k].r, cand[k].interval / step, cand[k].ttt / 86400, st.mean / 86400, st.half / 86400, diff);
    }
    if (beaten)
        P0("verify: NOT confirmed: a neighbour (%s) is better than the recommendation beyond the confidence "
           "interval\n", what[best]);
    else
        P0("verify: confirmed: no neighbour is better than the recommendation beyond the 95%% confidence "
           "intervals%s\n", best ? " (the lowest simulated mean is a neighbour's, within them)" : "");
    free(all), free(x0), free(x), free(d);
    return beaten;
}

/* Takes --verify out of argv; returns whether it was there. */
static int take_flag(int *argc, char **argv, const char *flag)
{
    int found = 0, j = 0;
    for (int i = 0; i < *argc; i++) {
        if (i >= 2 && !strcmp(argv[i], flag)) found = 1;
        else argv[j++] = argv[i];
    }
    *argc = j;
    return found;
}

int verb_optimize(int argc, char **argv, MPI_Comm comm)
{
    int want_verify = take_flag(&argc, argv, "--verify");
    if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=')) {
        cli_error(comm, "usage: ftllm optimize DECK [--verify] [section.key=value ...]  (a cluster deck; "
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
    P0("run: %.0f steps x %g s = %.1f days failure-free; checkpoint %g s, restart %g s, detection "
       "latency %g s\n", c.steps, c.step, W / 86400.0, c.ckpt, c.restart, c.latency);

    FtFailModel fm;
    FtPlan best[FT_POL_NPOL];
    FtPlan *all = calloc((size_t)FT_POL_NPOL * r_max, sizeof *all);
    if (!all) FT_DIE("out of memory");
    if (analytic_fail_init(&fm, &c) || analytic_fail_optimize(&fm, r_max, best, all)) {
        cli_error(comm, "ftllm optimize: the cluster has no feasible plan (check cluster.*)");
        analytic_fail_free(&fm);
        free(all);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    print_law(rank, &fm, best);
    int win = analytic_best_policy(best);

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
    print_sched(rank, &fm, b);
    int rc = FT_EXIT_OK;
    if (want_verify || cfg.cluster.verify)
        rc = verify(rank, comm, &fm, b, r_max, (int)cfg.cluster.trials, (uint64_t)cfg.run.seed * 31u + 11u)
                 ? FT_EXIT_FAILED : FT_EXIT_OK;
    if (cfg.cluster.zones > 0) sparing_study(rank, &cfg);
    if (rank == 0) fflush(stdout);
    analytic_fail_free(&fm);
    free(all);
    deck_free(&cfg);
    return rc;
}

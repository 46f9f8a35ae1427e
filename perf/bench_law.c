/* bench_law.c: the time-to-train model against the simulator under both failure laws.
 *
 *   mpiexec -n 2 build/release/perf/bench_law [grid|600k|sched|sparing|all] [half-width] [trials]
 *
 * grid: the settings of test_sim's law grid (and more), each policy at the optimizer's r and
 *   interval: predicted vs simulated TTT, trials picked from a pilot's variance so the 99.9%
 *   half-width is the target (default 0.5%).
 * 600k: inputs/cluster-spare600k.ini's cluster (exponential and Weibull 0.8), policies at the
 *   points of perf/README.md's table.
 * sched: a growing checkpoint interval against the best fixed one, predicted and simulated
 *   (paired: the same seeds).
 * sparing: inputs/cluster-meta-sparing.ini's cluster (Meta's spares) under the exponential law and
 *   Weibull 1.0 / 0.8 / 0.7: the recommended spares and the best without intra-block spares,
 *   predicted CETT (the law's model; the stationary model; the law's model without the burn-in
 *   of idle spares) beside the simulated one (trials: the third argument, default 20). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftllm/analytic.h"
#include "ftllm/sim.h"

#define Z 3.29

static int fn(int trial, double *out, void *ctx) { return sim_cluster_trial(ctx, trial, out); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static FtStat sim_ttt(FtSimSpec *s, int n, double *avail)
{
    double *all = malloc((size_t)n * SIM_NOUT * sizeof *all), *x = malloc((size_t)n * sizeof *x);
    sim_trials(MPI_COMM_WORLD, n, SIM_NOUT, fn, s, all);
    double a = 0;
    for (int i = 0; i < n; i++) x[i] = all[i * SIM_NOUT + SIM_TTT], a += all[i * SIM_NOUT + SIM_AVAIL];
    FtStat st = stat_of(x, n, Z);
    if (avail) *avail = a / n;
    free(all), free(x);
    return st;
}

static FtStat sim_auto(FtSimSpec *s, double target, int lo, int hi, int *n_out)
{
    FtStat st = sim_ttt(s, lo, NULL);
    double n = pow(Z * st.sd / (target * st.mean), 2);
    int nn = n < lo ? lo : n > hi ? hi : (int)ceil(n);
    if (nn > lo) st = sim_ttt(s, nn, NULL);
    *n_out = nn;
    return st;
}

struct setting {
    const char *name;
    int N, G, law;
    double k, sys_mtbf_min, restart_min, ckpt_s, step_s, steps;
};

static const char *pol_name[] = {"ckpt", "rep", "spare"};

static void grid(int rank, double target)
{
    const struct setting g[] = {
        {"A", 200, 4, FT_LAW_EXP, 1.0, 5, 60, 60, 10, 30000},
        {"B", 1000, 2, FT_LAW_WEIBULL, 0.7, 5, 30, 60, 10, 60000},
        {"C", 200, 8, FT_LAW_WEIBULL, 0.8, 30, 10, 30, 10, 100000},
        {"D", 1000, 1, FT_LAW_WEIBULL, 1.0, 120, 60, 120, 30, 100000},
        {"E", 200, 2, FT_LAW_WEIBULL, 0.7, 120, 20, 60, 30, 100000},
        {"F", 1000, 4, FT_LAW_WEIBULL, 0.8, 15, 45, 60, 10, 100000},
        {"G", 200, 1, FT_LAW_EXP, 1.0, 60, 10, 60, 10, 100000},
        {"H", 1000, 8, FT_LAW_WEIBULL, 0.7, 60, 60, 60, 10, 200000},
        {"I", 200, 1, FT_LAW_WEIBULL, 0.7, 60, 30, 60, 10, 100000},
        {"J", 1000, 1, FT_LAW_WEIBULL, 0.7, 5, 60, 60, 10, 30000},
        {"K", 200, 1, FT_LAW_WEIBULL, 0.8, 5, 10, 60, 10, 30000},
    };
    int only = getenv("FT_ONLY") ? getenv("FT_ONLY")[0] : 0;
    for (int i = 0; i < (int)(sizeof g / sizeof g[0]); i++) {
        if (only && g[i].name[0] != only) continue;
        FtCluster c = {.gpus = (long long)g[i].N * g[i].G, .gpus_per_replica = g[i].G,
                       .gpu_mtbf = g[i].sys_mtbf_min * 60.0 * g[i].N * g[i].G, .law = g[i].law,
                       .weibull_shape = g[i].k, .restart = g[i].restart_min * 60, .ckpt = g[i].ckpt_s,
                       .step = g[i].step_s, .steps = g[i].steps};
        FtFailModel m;
        FtPlan best[FT_POL_NPOL], all[FT_POL_NPOL * 8];
        if (analytic_fail_init(&m, &c) || analytic_fail_optimize(&m, 8, best, all)) {
            if (rank == 0) printf("%s: no plan\n", g[i].name);
            continue;
        }
        for (int p = 1; p < FT_POL_NPOL; p++) /* replication and SPARe: the best r >= 2 */
            for (int r = 2; r <= 8; r++)
                if (best[p].r < 2 || all[p * 8 + r - 1].ttt < best[p].ttt) best[p] = all[p * 8 + r - 1];
        for (int p = 0; p < FT_POL_NPOL; p++) {
            FtSimSpec s = {.c = c, .policy = p, .r = best[p].r, .interval = best[p].interval, .seed = 7 + i};
            int n;
            double t0 = now_s();
            FtStat st = sim_auto(&s, target, 40, 100000, &n);
            double dt = now_s() - t0;
            if (rank == 0)
                printf("%s N=%4d G=%d %s k=%.1f MTBF %3.0f min R %2.0f min W/life %.3f | %-5s r=%2d tau %6.0f | "
                       "pred %10.1f h sim %10.1f +- %6.1f (%5d trials, %5.1f s) err %+6.2f%% TTT/life %.2f\n",
                       g[i].name, g[i].N, g[i].G, g[i].law ? "wb " : "exp", g[i].k, g[i].sys_mtbf_min,
                       g[i].restart_min, c.steps * c.step / c.gpu_mtbf, pol_name[p], best[p].r,
                       best[p].interval, best[p].ttt / 3600, st.mean / 3600, st.half / 3600, n, dt,
                       100 * (best[p].ttt / st.mean - 1), st.mean / c.gpu_mtbf);
            fflush(stdout);
        }
        analytic_fail_free(&m);
    }
}

static FtCluster cluster_600k(int law)
{
    return (FtCluster){.gpus = 600000, .gpus_per_replica = 600, .gpu_mtbf = 50000 * 3600.0, .law = law,
                       .weibull_shape = 0.8, .restart = 3600, .ckpt = 60, .step = 10, .steps = 777600};
}

/* inputs/cluster-spare600k.ini under both laws: each policy at its best r, SPARe also at r* = 10
 * and r = 20, replication at r = 10; predicted vs simulated */
static void spare600k(int rank, int trials)
{
    for (int law = 0; law < 2; law++) {
        FtCluster c = cluster_600k(law);
        FtFailModel m;
        FtPlan best[FT_POL_NPOL];
        double t0 = now_s();
        if (analytic_fail_init(&m, &c) || analytic_fail_optimize(&m, 20, best, NULL)) return;
        if (rank == 0) printf("600k %s: optimizer %.1f s\n", law ? "Weibull 0.8" : "exponential", now_s() - t0);
        FtPlan pts[6];
        int np = 0;
        for (int p = 0; p < FT_POL_NPOL; p++) pts[np++] = best[p];
        if (analytic_fail_plan(&m, FT_POL_SPARE, 10, 0, &pts[np]) == 0) np++;
        if (analytic_fail_plan(&m, FT_POL_SPARE, 20, 0, &pts[np]) == 0) np++;
        if (analytic_fail_plan(&m, FT_POL_REP, 10, 0, &pts[np]) == 0) np++;
        for (int k = 0; k < np; k++) {
            FtSimSpec s = {.c = c, .policy = pts[k].policy, .r = pts[k].r, .interval = pts[k].interval, .seed = 2026 + k};
            int n = pts[k].policy == FT_POL_CKPT ? (trials < 10 ? trials : 10) : trials;
            double av;
            t0 = now_s();
            FtStat st = sim_ttt(&s, n, &av);
            if (rank == 0)
                printf("600k %-11s %-5s r=%2d interval %4.0f steps | simulated %8.2f +- %5.2f days (%3d trials, 99.9%%, "
                       "%5.1f s) predicted %8.2f (%+.2f%%) | avail sim %.3f pred %.3f\n",
                       law ? "Weibull 0.8" : "exponential", pol_name[pts[k].policy], pts[k].r,
                       pts[k].interval / c.step, st.mean / 86400, st.half / 86400, n, now_s() - t0,
                       pts[k].ttt / 86400, 100 * (pts[k].ttt / st.mean - 1), av, pts[k].avail);
            fflush(stdout);
        }
        analytic_fail_free(&m);
    }
}

/* a growing interval against the best fixed one: predicted, and simulated with the same seeds
 * (paired: the failures do not depend on the interval, so the difference is precise) */
static void sched_one(int rank, const char *name, FtCluster c, int policy, int rmax, int trials)
{
    FtFailModel m;
    FtPlan best[FT_POL_NPOL], sch;
    if (analytic_fail_init(&m, &c) || analytic_fail_optimize(&m, rmax, best, NULL)) return;
    FtPlan *f = &best[policy];
    if (analytic_plan_sched(&m, f, &sch)) return;
    FtSimSpec a = {.c = c, .policy = policy, .r = f->r, .interval = f->interval, .seed = 77};
    FtSimSpec b = a;
    b.sched = &sch.sched;
    double *x = malloc((size_t)trials * SIM_NOUT * sizeof *x), *y = malloc((size_t)trials * SIM_NOUT * sizeof *y);
    double *d = malloc((size_t)trials * sizeof *d), *ta = malloc((size_t)trials * sizeof *ta);
    sim_trials(MPI_COMM_WORLD, trials, SIM_NOUT, fn, &a, x);
    sim_trials(MPI_COMM_WORLD, trials, SIM_NOUT, fn, &b, y);
    for (int i = 0; i < trials; i++) ta[i] = x[i * SIM_NOUT + SIM_TTT], d[i] = ta[i] - y[i * SIM_NOUT + SIM_TTT];
    FtStat sa = stat_of(ta, trials, Z), sd = stat_of(d, trials, Z);
    if (rank == 0)
        printf("%-28s %-5s r=%2d: fixed %5.0f s -> %.0f..%.0f s (x %.3f of the local optimum) | predicted gain "
               "%.3f%% | simulated gain %.3f%% +- %.3f%% (paired, %d trials, 99.9%%; fixed TTT %.1f h)\n",
               name, pol_name[policy], f->r, f->interval, sch.sched.tau[0], sch.sched.tau[sch.sched.n - 1],
               sch.sched_scale, 100 * (1 - sch.ttt / f->ttt), 100 * sd.mean / sa.mean, 100 * sd.half / sa.mean,
               trials, sa.mean / 3600);
    fflush(stdout);
    free(x), free(y), free(d), free(ta);
    analytic_fail_free(&m);
}

static void sched(int rank, int trials)
{
    FtCluster g4 = {.gpus = 8000, .gpus_per_replica = 8, .gpu_mtbf = 60 * 60.0 * 8000, .law = FT_LAW_WEIBULL,
                    .weibull_shape = 0.7, .restart = 3600, .ckpt = 60, .step = 10, .steps = 200000};
    sched_one(rank, "grid 7 (1000 x 8, Weibull 0.7)", g4, FT_POL_CKPT, 6, 4 * trials);
    sched_one(rank, "grid 7 (1000 x 8, Weibull 0.7)", g4, FT_POL_SPARE, 6, 4 * trials);
    FtCluster c = cluster_600k(FT_LAW_WEIBULL);
    sched_one(rank, "600k (Weibull 0.8)", c, FT_POL_SPARE, 10, trials);
    sched_one(rank, "600k (Weibull 0.8)", c, FT_POL_REP, 10, trials);
    sched_one(rank, "600k (Weibull 0.8)", c, FT_POL_CKPT, 10, trials < 8 ? trials : 8);
}

static int sparing_fn(int trial, double *out, void *ctx)
{
    return sim_sparing_trial(ctx, trial, out);
}

/* The Meta deck's cluster: 4 zones x 256 blocks x 18 trays of 4 GPUs (values in perf/README.md). */
static FtSparing meta_sparing(int law, double shape, int I)
{
    return (FtSparing){.B = 4, .L = 256, .K = 18 - I, .I = I, .gpus_per_tray = 4,
                       .tray_mtbf = 12000, .tray_mttr = 24, .rack_mtbf = 50000, .rack_mttr = 24,
                       .ckpt = 250, .restart = 600, .law = law, .shape = shape, .horizon = 20000};
}

static void sparing(int rank, int trials)
{
    const struct {
        int law;
        double shape;
    } laws[] = {
        {FT_LAW_EXP, 1}, {FT_LAW_WEIBULL, 1.0}, {FT_LAW_WEIBULL, 0.8}, {FT_LAW_WEIBULL, 0.7}};
    for (int l = 0; l < 4; l++) {
        double t0 = now_s();
        FtSparing best[9];
        FtSparingResult res[9];
        int bi = 0;
        for (int I = 0; I <= 8; I++) {
            best[I] = meta_sparing(laws[l].law, laws[l].shape, I);
            best[I].R = analytic_sparing_best_R(&best[I], best[I].L, &res[I]);
            if (res[I].cett > res[bi].cett) bi = I;
        }
        double t_opt = now_s() - t0;
        const int pts[2] = {bi, 0};
        for (int k = 0; k < (bi ? 2 : 1); k++) {
            FtSparing s = best[pts[k]], x = s;
            FtSparingResult st_res, pop_res;
            char err[256];
            x.law = FT_LAW_EXP;
            analytic_sparing(&x, &st_res, err, sizeof err);
            x = s, x.pop_rate = 1;
            analytic_sparing(&x, &pop_res, err, sizeof err);
            FtSparingSim ss = {.s = s, .horizon = s.horizon, .seed = 4242 + (uint64_t)k};
            ss.s.interval = res[pts[k]].interval;
            double *all = malloc((size_t)trials * SPS_NOUT * sizeof *all),
                   *y = malloc((size_t)trials * sizeof *y);
            t0 = now_s();
            sim_trials(MPI_COMM_WORLD, trials, SPS_NOUT, sparing_fn, &ss, all);
            double intr = 0;
            for (int i = 0; i < trials; i++)
                y[i] = all[i * SPS_NOUT + SPS_CETT], intr += all[i * SPS_NOUT + SPS_INTERRUPTS];
            FtStat st = stat_of(y, trials, Z);
            if (rank == 0)
                printf("sparing %-11s %.1f %s I=%d R=%2d every %4.0f s | simulated CETT %.4f +- "
                       "%.4f (%d trials, 99.9%%, %.0f s) predicted %.4f (%+.2f%%), stationary %.4f "
                       "(%+.2f%%), without burn-in %.4f (%+.2f%%) | "
                       "interrupts/h sim %.3f pred %.3f | optimizer %.1f s\n",
                       laws[l].law ? "Weibull" : "exponential", laws[l].shape,
                       k ? "no-intra" : "best    ", pts[k], s.R, res[pts[k]].interval, st.mean,
                       st.half, trials, now_s() - t0, res[pts[k]].cett,
                       100 * (res[pts[k]].cett / st.mean - 1), st_res.cett,
                       100 * (st_res.cett / st.mean - 1), pop_res.cett,
                       100 * (pop_res.cett / st.mean - 1), intr / trials / s.horizon,
                       res[pts[k]].lam * 3600 * res[pts[k]].avail, t_opt);
            fflush(stdout);
            free(all), free(y);
        }
        if (rank == 0 && bi)
            printf("sparing %-11s %.1f: best I=%d R=%d gives %.3fx the CETT of the best without "
                   "intra-block spares (I=0 R=%d), predicted\n",
                   laws[l].law ? "Weibull" : "exponential", laws[l].shape, bi, best[bi].R,
                   res[bi].cett / res[0].cett, best[0].R);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *what = argc > 1 ? argv[1] : "grid";
    double target = argc > 2 ? atof(argv[2]) : 0.005;
    if (!strcmp(what, "grid") || !strcmp(what, "all")) grid(rank, target);
    if (!strcmp(what, "600k") || !strcmp(what, "all")) spare600k(rank, argc > 3 ? atoi(argv[3]) : 100);
    if (!strcmp(what, "sched") || !strcmp(what, "all")) sched(rank, argc > 3 ? atoi(argv[3]) : 100);
    if (!strcmp(what, "sparing") || !strcmp(what, "all"))
        sparing(rank, argc > 3 ? atoi(argv[3]) : 20);
    MPI_Finalize();
    return 0;
}

/* test_sim.c: the simulators against the analytic models, statistically honestly.
 *
 * Verdict of a comparison (sim mean +- half-width at 99.9%, z = 3.29, against the exact value):
 *   inconclusive (a failure) when the half-width exceeds the tolerance: too few trials to judge;
 *   fail when |mean - exact| exceeds the half-width or the tolerance; pass otherwise.
 * Trial counts come from a pilot's variance, so that the half-width is half the tolerance.
 * Tolerances are the papers': 1.13% (failures tolerated), 0.60% (overhead), 1% (sparing CETT).
 * Trials are spread over the ranks and seeded from (seed, trial): the same numbers on any rank
 * count, which test_rank_independent checks directly.
 * ft-test: ranks 1 2 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/analytic.h"
#include "ftllm/sim.h"

#define Z 3.29
enum { V_PASS, V_FAIL, V_INCONCLUSIVE };

static int verdict(FtStat s, double exact, double tol)
{
    if (!(s.half <= tol * fabs(exact))) return V_INCONCLUSIVE;
    double d = fabs(s.mean - exact);
    return d <= s.half && d <= tol * fabs(exact) ? V_PASS : V_FAIL;
}

/* trials so that the half-width is target (relative) given a pilot's sd/mean */
static int trials_for(FtStat pilot, double target, int lo, int hi)
{
    double n = pow(Z * pilot.sd / (target * fabs(pilot.mean)), 2);
    return n < lo ? lo : n > hi ? hi : (int)ceil(n);
}

struct ring_ctx {
    int N, r;
    uint64_t seed;
};
static int ring_fn(int trial, double *out, void *ctx)
{
    struct ring_ctx *c = ctx;
    return sim_ring_trial(c->N, c->r, c->seed, trial, out);
}

/* mean failures to wipe-out and mean depth from n ring epochs */
static void ring_stats(struct ring_ctx *c, int n, FtStat *mu, FtStat *S)
{
    double *all = malloc((size_t)n * SIM_RING_NOUT * sizeof *all);
    double *T = malloc((size_t)n * sizeof *T), *D = malloc((size_t)n * sizeof *D);
    assert_all(all && T && D && sim_trials(ft_test_comm(), n, SIM_RING_NOUT, ring_fn, c, all) == 0);
    for (int i = 0; i < n; i++) T[i] = all[i * SIM_RING_NOUT], D[i] = all[i * SIM_RING_NOUT + 1];
    *mu = stat_of(T, n, Z);
    *S = stat_ratio(D, T, n, Z);
    free(all), free(T), free(D);
}

static void test_ring_vs_exact(void **state)
{
    (void)state;
    const int Ns[] = {200, 600, 1000};
    const double tol_mu = 0.0113, tol_S = 0.0060;
    for (int a = 0; a < 3; a++)
        for (int r = 2; r <= 4; r++) {
            struct ring_ctx c = {Ns[a], r, 1000u + 10u * (uint64_t)a + (uint64_t)r};
            FtSpareEpoch e;
            assert_all(analytic_spare_epoch(c.N, r, 1e12, &e) == 0);
            FtStat mu, S;
            ring_stats(&c, 400, &mu, &S);
            int n = trials_for(mu, tol_mu / 2, 400, 400000);
            int nS = trials_for(S, tol_S / 2, 400, 400000);
            if (nS > n) n = nS;
            ring_stats(&c, n, &mu, &S);
            int vm = verdict(mu, e.mu, tol_mu), vs = verdict(S, e.S, tol_S);
            if (ft_test_rank() == 0)
                printf("N=%4d r=%d trials %6d: mu sim %.3f +- %.3f exact %.3f (%+.3f%%) | S sim %.5f +- %.5f "
                       "exact %.5f (%+.3f%%) | closed-form mu %.3f\n",
                       c.N, r, n, mu.mean, mu.half, e.mu, 100 * (mu.mean / e.mu - 1), S.mean, S.half,
                       e.S, 100 * (S.mean / e.S - 1), analytic_mu_closed(c.N, r));
            assert_all(vm == V_PASS);
            assert_all(vs == V_PASS);
        }
}

/* The same comparison with deliberately too few trials must not pass. */
static void test_too_few_trials_fail(void **state)
{
    (void)state;
    struct ring_ctx c = {600, 3, 77};
    FtSpareEpoch e;
    assert_all(analytic_spare_epoch(c.N, c.r, 1e12, &e) == 0);
    FtStat mu, S;
    ring_stats(&c, 40, &mu, &S);
    assert_all(verdict(mu, e.mu, 0.0113) != V_PASS);
    assert_all(verdict(S, e.S, 0.0060) != V_PASS);
    /* and a wrong "exact" value is caught once there are enough trials */
    ring_stats(&c, 20000, &mu, &S);
    assert_all(verdict(mu, e.mu, 0.0113) == V_PASS);
    assert_all(verdict(mu, e.mu * 1.03, 0.0113) == V_FAIL);
}

static int sparing_fn(int trial, double *out, void *ctx) { return sim_sparing_trial(ctx, trial, out); }

static void test_sparing_vs_analytic(void **state)
{
    (void)state;
    /* a grid of small, failure-heavy settings, so that every term of CETT matters */
    const FtSparing grid[] = {
        {.B = 2, .L = 12, .K = 6, .R = 2, .I = 1, .gpus_per_tray = 4, .tray_mtbf = 300,
         .tray_mttr = 20, .rack_mtbf = 3000, .rack_mttr = 50, .ckpt = 250, .restart = 600},
        {.B = 3, .L = 8, .K = 4, .R = 2, .I = 0, .gpus_per_tray = 4, .tray_mtbf = 1500,
         .tray_mttr = 30, .rack_mtbf = 4000, .rack_mttr = 20, .ckpt = 120, .restart = 900},
        {.B = 1, .L = 16, .K = 8, .R = 3, .I = 2, .gpus_per_tray = 8, .tray_mtbf = 500,
         .tray_mttr = 60, .rack_mtbf = 5000, .rack_mttr = 100, .ckpt = 300, .restart = 300},
        {.B = 2, .L = 10, .K = 5, .R = 0, .I = 1, .gpus_per_tray = 4, .tray_mtbf = 800,
         .tray_mttr = 10, .rack_mtbf = 4000, .rack_mttr = 10, .ckpt = 60, .restart = 1200},
    };
    for (int i = 0; i < (int)(sizeof grid / sizeof grid[0]); i++) {
        FtSparingResult a;
        char err[256];
        assert_all(analytic_sparing(&grid[i], &a, err, sizeof err) == 0);
        FtSparingSim ss = {.s = grid[i], .horizon = 20000, .seed = 500u + (uint64_t)i};
        ss.s.interval = a.interval;
        int n = 16;
        double *all = malloc((size_t)400 * SPS_NOUT * sizeof *all), *x = malloc(400 * sizeof *x);
        FtStat s;
        for (int pass = 0; pass < 2; pass++) {
            assert_all(sim_trials(ft_test_comm(), n, SPS_NOUT, sparing_fn, &ss, all) == 0);
            for (int j = 0; j < n; j++) x[j] = all[j * SPS_NOUT + SPS_CETT];
            s = stat_of(x, n, Z);
            if (pass == 0) n = trials_for(s, 0.005, 16, 400);
        }
        if (ft_test_rank() == 0)
            printf("sparing grid %d: %d trials, CETT sim %.5f +- %.5f, analytic %.5f (%+.3f%%); avail %.4f, "
                   "run eff %.4f\n", i, n, s.mean, s.half, a.cett, 100 * (s.mean / a.cett - 1), a.avail, a.run_eff);
        assert_all(verdict(s, a.cett, 0.01) == V_PASS);
        free(all), free(x);
    }
}

struct ck_ctx {
    FtSimSpec s;
};
static int cluster_fn(int trial, double *out, void *ctx) { return sim_cluster_trial(ctx, trial, out); }

static FtStat ttt_stat(FtSimSpec *s, int n)
{
    double *all = malloc((size_t)n * SIM_NOUT * sizeof *all), *x = malloc((size_t)n * sizeof *x);
    assert_all(sim_trials(ft_test_comm(), n, SIM_NOUT, cluster_fn, s, all) == 0);
    for (int j = 0; j < n; j++) x[j] = all[j * SIM_NOUT + SIM_TTT];
    FtStat st = stat_of(x, n, Z);
    free(all), free(x);
    return st;
}

/* Checkpoint-only with exponential failures is the exact Poisson model: the simulated mean
 * time-to-train matches analytic_ckpt_time at every interval of a brute-force scan, and the best
 * scanned interval's time is within the noise of Daly's. */
static void test_young_daly_vs_sim(void **state)
{
    (void)state;
    FtCluster c = {.gpus = 800, .gpus_per_replica = 8, .gpu_mtbf = 800 * 3600.0, .restart = 300,
                   .ckpt = 60, .step = 1, .steps = 2 * 86400};
    double lam = 1.0 / 3600, M = 3600;
    double daly = round(analytic_daly(c.ckpt, M)), young = round(analytic_young(c.ckpt, M));
    const double f[] = {0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0};
    double best = INFINITY, best_tau = 0, at_daly = 0, half_daly = 0;
    for (int i = 0; i < 7; i++) {
        FtSimSpec s = {.c = c, .policy = FT_POL_CKPT, .r = 1, .interval = round(f[i] * daly), .seed = 42};
        FtStat st = ttt_stat(&s, 200);
        int n = trials_for(st, 0.0025, 200, 20000);
        st = ttt_stat(&s, n);
        double ex = analytic_ckpt_time(c.steps * c.step, s.interval, c.ckpt, lam, c.restart);
        if (ft_test_rank() == 0)
            printf("tau %5.0f s (%.2f x Daly): %5d trials, TTT sim %.1f +- %.1f s, exact %.1f (%+.3f%%)\n",
                   s.interval, f[i], n, st.mean, st.half, ex, 100 * (st.mean / ex - 1));
        assert_all(verdict(st, ex, 0.01) == V_PASS);
        if (st.mean < best) best = st.mean, best_tau = s.interval;
        if (f[i] == 1.0) at_daly = st.mean, half_daly = st.half;
    }
    if (ft_test_rank() == 0)
        printf("Young %.0f s, Daly %.0f s, numeric %.0f s; best scanned %.0f s\n", young, daly,
               analytic_ckpt_opt(c.ckpt, lam), best_tau);
    assert_all(at_daly <= best + 2 * half_daly);
    assert_all(best_tau >= 0.5 * daly && best_tau <= 2 * daly);
}

/* sim_trials gives every rank the bytes a serial loop gives, whatever the rank count. */
static void test_rank_independent(void **state)
{
    (void)state;
    FtCluster c = {.gpus = 4000, .gpus_per_replica = 20, .gpu_mtbf = 4000 * 600.0, .law = FT_LAW_WEIBULL,
                   .weibull_shape = 0.7, .restart = 600, .ckpt = 30, .step = 5, .steps = 20000};
    FtSimSpec s = {.c = c, .policy = FT_POL_SPARE, .r = 4, .interval = 2000, .seed = 9};
    const int n = 10;
    double all[10 * SIM_NOUT], ser[10 * SIM_NOUT];
    assert_all(sim_trials(ft_test_comm(), n, SIM_NOUT, cluster_fn, &s, all) == 0);
    for (int i = 0; i < n; i++) assert_all(sim_cluster_trial(&s, i, ser + i * SIM_NOUT) == 0);
    assert_all(memcmp(all, ser, sizeof all) == 0);
    assert_all(ft_same_bytes(all, sizeof all));
    /* SPARe at r = 1 is checkpoint-only, trial by trial */
    FtSimSpec a = s, b = s;
    a.r = 1, b.policy = FT_POL_CKPT;
    double oa[SIM_NOUT], ob[SIM_NOUT];
    assert_all(sim_cluster_trial(&a, 3, oa) == 0 && sim_cluster_trial(&b, 3, ob) == 0);
    assert_all(memcmp(oa, ob, sizeof oa) == 0);
    /* a masked failure never restarts: failures = masked + restarts */
    assert_all(fabs(all[SIM_FAILURES] - all[SIM_MASKED] - all[SIM_RESTARTS]) < 0.5);
}

FT_TEST_MAIN(cmocka_unit_test(test_ring_vs_exact), cmocka_unit_test(test_too_few_trials_fail),
             cmocka_unit_test(test_sparing_vs_analytic), cmocka_unit_test(test_young_daly_vs_sim),
             cmocka_unit_test(test_rank_independent))

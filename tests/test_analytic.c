/* test_analytic.c: the analytic models against brute force on small cases (every subset of
 * failed groups enumerated), and the formulas against each other.
 * ft-test: ranks 1 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/analytic.h"
#include "ftllm/sim.h"

/* Hall's condition checked over every set of shard types (N <= 14): the least capacity d such
 * that every set X of shards has |X| <= d * |alive holders of X|. Independent of the ring
 * argument in analytic_spare.c. */
static int depth_brute(const unsigned char *dead, int N, int r)
{
    for (int d = 1; d <= r; d++) {
        int ok = 1;
        for (unsigned X = 1; X < (1u << N) && ok; X++) {
            unsigned holders = 0;
            for (int j = 0; j < N; j++)
                if (X >> j & 1)
                    for (int i = 0; i < r; i++) holders |= 1u << ((j - i + N) % N);
            int nh = 0, nx = __builtin_popcount(X);
            for (int g = 0; g < N; g++) nh += (holders >> g & 1) && !dead[g];
            if (nx > d * nh) ok = 0;
        }
        if (ok) return d;
    }
    return r + 1;
}

static void test_depth_vs_hall(void **state)
{
    (void)state;
    int checked = 0;
    for (int N = 3; N <= 11; N += 2) {
        for (int r = 1; r <= 4 && r <= N; r++) {
            unsigned char dead[16];
            for (unsigned m = 0; m < (1u << N); m += (N > 9 ? 7 : 1)) {
                for (int g = 0; g < N; g++) dead[g] = m >> g & 1;
                int b = depth_brute(dead, N, r), a = analytic_depth(dead, N, r);
                if (a != b) fprintf(stderr, "N=%d r=%d mask=%x: kadane %d, hall %d\n", N, r, m, a, b);
                assert_int_equal(a, b);
                checked++;
            }
        }
    }
    assert_true(checked > 2000);
}

/* The incremental oracle follows analytic_depth() along random failure orders. */
static void test_oracle_incremental(void **state)
{
    (void)state;
    const int N = 60;
    for (int r = 2; r <= 6; r++) {
        FtDepthOracle o;
        assert_int_equal(depth_oracle_init(&o, N, r), 0);
        for (int trial = 0; trial < 30; trial++) {
            FtRng g;
            rng_seed(&g, 99, (uint64_t)(trial + 100 * r));
            int perm[60];
            for (int i = 0; i < N; i++) perm[i] = i;
            depth_oracle_reset(&o);
            for (int k = 0; k < N; k++) {
                int j = k + (int)rng_below(&g, (uint64_t)(N - k)), x = perm[j];
                perm[j] = perm[k], perm[k] = x;
                int d = depth_oracle_fail(&o, x);
                assert_int_equal(d, analytic_depth(o.dead, N, r));
                if (d > r) break;
            }
        }
        depth_oracle_free(&o);
    }
}

/* Every k-subset of N groups: P(T > k) and E[d_k; T > k], against the counting formulas. */
static void test_survival_and_S_enumerated(void **state)
{
    (void)state;
    const int Ns[] = {8, 9, 12};
    for (int a = 0; a < 3; a++) {
        int N = Ns[a];
        for (int r = 1; r <= 5; r++) {
            double cnt[20] = {0}, live[20] = {0}, dsum[20] = {0}, rlive[20] = {0};
            unsigned char dead[16];
            for (unsigned m = 0; m < (1u << N); m++) {
                int k = __builtin_popcount(m);
                for (int g = 0; g < N; g++) dead[g] = m >> g & 1;
                int d = analytic_depth(dead, N, r);
                cnt[k]++;
                if (d <= r) live[k]++, dsum[k] += d;
                int n = N / r, ok = 1; /* replication: a set fully failed? */
                for (int s = 0; s < n && ok; s++) {
                    int all = 1;
                    for (int i = 0; i < r; i++) all &= dead[s * r + i];
                    ok = !all;
                }
                /* replication counts only the n r groups in use: restrict to masks inside them */
                if (!(m >> (n * r))) rlive[k] += ok;
            }
            double p[20], q[20];
            assert_int_equal(analytic_spare_survival(N, r, p), 0);
            assert_int_equal(analytic_rep_survival(N, r, q), 0);
            double mu = 0, Sd = 0;
            for (int k = 0; k < N; k++) {
                assert_true(fabs(p[k] - live[k] / cnt[k]) < 1e-12);
                int M = (N / r) * r;
                if (k <= M) {
                    double c = 1;
                    for (int i = 0; i < k; i++) c = c * (M - i) / (i + 1);
                    assert_true(fabs(q[k] - rlive[k] / c) < 1e-12);
                }
                mu += live[k] / cnt[k];
                Sd += dsum[k] / cnt[k];
            }
            assert_true(fabs(analytic_mu_exact(N, r) - mu) < 1e-10);
            FtSpareEpoch e;
            assert_int_equal(analytic_spare_epoch(N, r, 1e12, &e), 0);
            if (fabs(e.S - Sd / mu) > 1e-10)
                fprintf(stderr, "N=%d r=%d: S transfer %.12f, enumerated %.12f\n", N, r, e.S, Sd / mu);
            assert_true(fabs(e.S - Sd / mu) < 1e-10);
        }
    }
}

/* The closed form is the large-N limit: the gap to the exact mean shrinks with N; printed for
 * perf/README.md (not tuned away). */
static void test_closed_form_gap(void **state)
{
    (void)state;
    for (int r = 2; r <= 4; r++) {
        double prev = 1;
        for (int N = 200; N <= 1000; N += 400) {
            double ex = analytic_mu_exact(N, r), cf = analytic_mu_closed(N, r);
            double gap = fabs(cf / ex - 1);
            printf("mu(N=%d, r=%d): exact %.3f, closed form %.3f, gap %.2f%%\n", N, r, ex, cf, 100 * gap);
            assert_true(gap < 0.10 && gap < prev);
            prev = gap;
        }
    }
    assert_true(fabs(analytic_mu_closed(1000, 1) - 1) < 1e-12);
    assert_int_equal(analytic_rstar_paper(1000), 10);
    assert_int_equal(analytic_rstar_paper(200), 8);
    assert_true(fabs(analytic_mu_exact(50, 1) - 1) < 1e-12);
}

/* Daly's interval is the numeric optimum's approximation: within 2% for C << M; Young's within
 * the first order; and the exact model's expected time is flat near the optimum. */
static void test_young_daly(void **state)
{
    (void)state;
    const double M[] = {600, 3600, 36000}, C[] = {10, 60, 300};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double opt = analytic_ckpt_opt(C[j], 1 / M[i]), d = analytic_daly(C[j], M[i]);
            double y = analytic_young(C[j], M[i]);
            double x = C[j] / (2 * M[i]);
            assert_true(fabs(d / opt - 1) < 0.02 + x);
            assert_true(fabs(y / opt - 1) < 0.05 + 2 * sqrt(x));
            double W = 1e6, lam = 1 / M[i];
            double t_opt = analytic_ckpt_time(W, opt, C[j], lam, 100);
            assert_true(t_opt <= analytic_ckpt_time(W, 0.5 * opt, C[j], lam, 100));
            assert_true(t_opt <= analytic_ckpt_time(W, 2 * opt, C[j], lam, 100));
        }
    /* the segment model's ends: no work takes no time, failures or not; without failures, the
     * work itself; with them, (e^(lam x) - 1)(1/lam + D) (random mutant R06 of seed 6,
     * tests/mutants/random_sample.md: an empty segment took a second) */
    assert_true(analytic_segment_time(0, 1e-3, 600) == 0);
    assert_true(analytic_segment_time(-5, 1e-3, 600) == 0);
    assert_true(analytic_segment_time(0, 0, 600) == 0 && analytic_segment_time(42, 0, 600) == 42);
    assert_true(fabs(analytic_segment_time(1000, 1e-3, 600) / (expm1(1.0) * 1600) - 1) < 1e-12);
    assert_true(analytic_ckpt_time(0, 100, 10, 1e-3, 600) == 0);
    int keep = 0;
    double t = analytic_ckpt_latency(60, 1 / 3600.0, 300, 1000, &keep);
    assert_true(fabs(t - analytic_ckpt_opt(60, 1 / 3600.0)) < 1e-9);
    assert_int_equal(keep, (int)ceil(1000 / t) + 1);
    assert_true(analytic_waste(t, 60, 1 / 3600.0, 300, 1000) > analytic_waste(t, 60, 1 / 3600.0, 300, 0));
}

static void test_sparing_model(void **state)
{
    (void)state;
    FtSparing s = {.B = 4, .L = 256, .K = 18, .R = 8, .I = 0, .gpus_per_tray = 4, .tray_mtbf = 5000,
                   .tray_mttr = 72, .rack_mtbf = 50000, .rack_mttr = 24, .ckpt = 250, .restart = 600};
    FtSparingResult a, b;
    char err[256];
    assert_int_equal(analytic_sparing(&s, &a, err, sizeof err), 0);
    assert_true(a.cett > 0 && a.cett < 1 && a.avail > 0 && a.avail <= 1);
    s.R = 300;
    assert_int_equal(analytic_sparing(&s, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than"));
    s.R = s.L; /* as many spare blocks as blocks in use: allowed */
    assert_int_equal(analytic_sparing(&s, &b, err, sizeof err), 0);
    assert_true(fabs(b.util - 0.5) < 1e-12);
    s.R = 8;
    /* with repairs instantaneous and no spares every block is usable: avail = 1 */
    s.tray_mttr = s.rack_mttr = 0;
    s.R = 0;
    assert_int_equal(analytic_sparing(&s, &b, err, sizeof err), 0);
    assert_true(fabs(b.avail - 1) < 1e-12 && fabs(b.util - 1) < 1e-12);
    /* best R is a maximum of CETT over R */
    s.tray_mttr = 72, s.rack_mttr = 24;
    FtSparingResult best;
    int R = analytic_sparing_best_R(&s, 64, &best);
    for (int x = 0; x <= 64; x++) {
        s.R = x;
        analytic_sparing(&s, &b, err, sizeof err);
        assert_true(b.cett <= best.cett + 1e-15);
    }
    assert_true(R >= 0 && R <= 64);
}

/* Weibull walls with epochs of thousands of pieces (SPARe r = 18 on the 600k-GPU cluster, free
 * checkpoints: an epoch of 60 h against one-step pieces). With checkpoints free a shorter
 * interval only loses less work per wipe-out, so the time to train cannot fall as the interval
 * grows, and spans well under 1% from 1 to 50 steps (95 wipe-outs of at most 50 steps at depth
 * 3). Between two walls a state's attempt time was interpolated with the earlier wall's last
 * value where that wall's chain had ended (a ratio of two numbers near 0): 345, 254, 178, 153
 * days at 1, 2, 3, 6 steps and 60-second checkpoints' intervals jumping with r (440 steps at
 * r = 18, 320 at 19). Now the walls are weighted by their survival (mix_state). The run also
 * no slower than any with 60-second checkpoints. */
static void test_long_epochs(void **state)
{
    (void)state;
    FtCluster c = {.gpus = 600000, .gpus_per_replica = 600, .gpu_mtbf = 50000 * 3600.0,
                   .law = FT_LAW_WEIBULL, .weibull_shape = 0.8, .restart = 3600, .ckpt = 0,
                   .step = 10, .steps = 777600};
    FtFailModel m;
    assert_int_equal(analytic_fail_init(&m, &c), 0);
    const int steps[] = {1, 2, 3, 6, 10, 20, 50};
    double ttt[7];
    for (int k = 0; k < 7; k++) {
        FtPlan p;
        assert_int_equal(analytic_fail_plan(&m, FT_POL_SPARE, 18, steps[k] * c.step, &p), 0);
        ttt[k] = p.ttt;
        printf("r = 18, free checkpoints every %d steps: %.3f days\n", steps[k], ttt[k] / 86400);
        /* relative 1e-6: a bound on rounding, not on the model (neighbours differ by 3e-5) */
        if (k) assert_true(ttt[k] >= ttt[k - 1] * (1 - 1e-6));
    }
    assert_true(ttt[6] < ttt[0] * 1.01);
    analytic_fail_free(&m);
    FtCluster c60 = c;
    c60.ckpt = 60;
    assert_int_equal(analytic_fail_init(&m, &c60), 0);
    for (int k = 4; k < 7; k++) {
        FtPlan p;
        assert_int_equal(analytic_fail_plan(&m, FT_POL_SPARE, 18, steps[k] * c.step, &p), 0);
        assert_true(p.ttt > ttt[0]);
    }
    analytic_fail_free(&m);
}

/* Sweeps of the interval where the model had failed (found by scanning ttt over intervals for
 * bumps, 2026-12-05):
 * - a 10-day run of 1000 groups of 8 GPUs (exponential, 1-second checkpoints, SPARe r = 10:
 *   2.8 wipe-outs in the run) is its transient, and its time falls as the checkpoints get
 *   rarer; ending the transient on a budget of work alone gave 23.44, 23.59, 23.56, 23.18,
 *   23.46 days at 2-6 steps;
 * - new Weibull-0.6 GPUs on the 600k cluster, 600-second checkpoints, SPARe r = 20: next to the
 *   first hours' wall, where a piece almost never completes (E0 5e9 s), E0 interpolated
 *   linearly made the second piece 12 years (4620 days at 512 steps against 283 at 480 and
 *   544); now the mixture's first-piece probability and attempt time are interpolated. */
static void test_interval_sweeps(void **state)
{
    (void)state;
    FtCluster c = {.gpus = 8000, .gpus_per_replica = 8, .gpu_mtbf = 2000 * 3600.0, .restart = 3600,
                   .ckpt = 1, .step = 10, .steps = 86400};
    FtFailModel m;
    assert_int_equal(analytic_fail_init(&m, &c), 0);
    double prev = INFINITY;
    for (int st = 2; st <= 8; st++) {
        FtPlan p;
        assert_int_equal(analytic_fail_plan(&m, FT_POL_SPARE, 10, st * c.step, &p), 0);
        printf("8000 GPUs, 10 days, r = 10, every %d steps: %.3f days\n", st, p.ttt / 86400);
        assert_true(p.ttt <= prev * (1 + 1e-6)); /* rounding only: neighbours differ by 1e-3 */
        prev = p.ttt;
    }
    analytic_fail_free(&m);
    FtCluster w = {.gpus = 600000, .gpus_per_replica = 600, .gpu_mtbf = 50000 * 3600.0,
                   .law = FT_LAW_WEIBULL, .weibull_shape = 0.6, .restart = 3600, .ckpt = 600,
                   .step = 10, .steps = 777600};
    assert_int_equal(analytic_fail_init(&m, &w), 0);
    double lo = INFINITY, hi = 0;
    for (int st = 480; st <= 544; st += 32) {
        FtPlan p;
        assert_int_equal(analytic_fail_plan(&m, FT_POL_SPARE, 20, st * w.step, &p), 0);
        printf("600k GPUs, Weibull 0.6, r = 20, every %d steps: %.3f days\n", st, p.ttt / 86400);
        lo = fmin(lo, p.ttt), hi = fmax(hi, p.ttt);
    }
    assert_true(hi < lo * 1.01);
    analytic_fail_free(&m);
}

static void test_optimizer(void **state)
{
    (void)state;
    /* 600k GPUs, 5-minute system MTBF, 60-minute restart: replication and SPARe beat checkpoints
     * alone; at r = 1 every policy is the same plan */
    FtCluster c = {.gpus = 600000, .gpus_per_replica = 600, .gpu_mtbf = 50000 * 3600.0,
                   .restart = 3600, .ckpt = 60, .step = 10, .steps = 777600};
    FtPlan best[FT_POL_NPOL], a, b;
    assert_int_equal(analytic_optimize(&c, 6, best, NULL), 0);
    assert_true(best[FT_POL_SPARE].ttt < best[FT_POL_CKPT].ttt);
    assert_true(best[FT_POL_REP].ttt < best[FT_POL_CKPT].ttt);
    assert_int_equal(analytic_plan(&c, FT_POL_SPARE, 1, 0, &a), 0);
    assert_int_equal(analytic_plan(&c, FT_POL_CKPT, 1, 0, &b), 0);
    assert_true(a.ttt == b.ttt);
    /* a run that never ends (600k GPUs of 1-hour MTBF: 167 failures a second, so no 10-second
     * step survives): no plan, for a chosen interval or the optimum (random mutant R05 of seed
     * 6, tests/mutants/random_sample.md: the failure returned 0 with an infinite ttt) */
    FtCluster never = c;
    never.gpu_mtbf = 3600.0;
    FtPlan nv;
    assert_int_equal(analytic_plan(&never, FT_POL_CKPT, 1, 0, &nv), -1);
    assert_int_equal(analytic_plan(&never, FT_POL_CKPT, 1, 600, &nv), -1);
    assert_int_equal(analytic_plan(&never, FT_POL_SPARE, 2, 0, &nv), -1);
    /* free checkpoints (cluster.checkpoint_s = 0, which the deck allows): checkpoint every
     * step in every segment of the growing schedule, and within two steps for the fixed
     * interval (its golden-section search over [1, 8] steps never evaluates the bracket's
     * end; trying that end too changed e2e/spare_auto's extreme cluster, where a one-step
     * SPARe plan of 62 million days then beat replication); the run no slower than with
     * 60-second checkpoints (seed 7's R12: a local optimum of 0 was taken as "no
     * checkpoints", the whole run, and this cluster got no plan) */
    {
        FtCluster fc = c;
        fc.ckpt = 0;
        FtFailModel fm;
        FtPlan f1, fs;
        assert_int_equal(analytic_fail_init(&fm, &fc), 0);
        assert_int_equal(analytic_fail_plan(&fm, FT_POL_CKPT, 1, 0, &f1), 0);
        assert_int_equal(analytic_plan_sched(&fm, &f1, &fs), 0);
        printf("free checkpoints: fixed interval %g s (ttt %g), growing %g .. %g s (ttt %g); "
               "60 s checkpoints: ttt %g\n", f1.interval, f1.ttt, fs.sched.tau[0],
               fs.sched.tau[fs.sched.n - 1], fs.ttt, b.ttt);
        assert_true(f1.interval <= 2 * fc.step && f1.ttt <= b.ttt);
        for (int i = 0; i < fs.sched.n; i++) assert_true(fs.sched.tau[i] == fc.step);
        analytic_fail_free(&fm);
    }
    /* the chosen interval is a local optimum of the model */
    FtPlan lo, hi;
    FtPlan *p = &best[FT_POL_SPARE];
    analytic_plan(&c, FT_POL_SPARE, p->r, p->interval * 0.7, &lo);
    analytic_plan(&c, FT_POL_SPARE, p->r, p->interval * 1.4, &hi);
    assert_true(p->ttt <= lo.ttt && p->ttt <= hi.ttt);
    /* the recommended policy (optimize, train's spare.r = auto): the least time-to-train */
    int win = analytic_best_policy(best);
    for (int q = 0; q < FT_POL_NPOL; q++) assert_true(best[win].ttt <= best[q].ttt);
    assert_int_not_equal(win, FT_POL_CKPT);
    /* ties go to the lower policy, and a policy with no plan (r = 0) never wins */
    FtPlan t[FT_POL_NPOL] = {{.r = 1, .ttt = 5}, {.r = 2, .ttt = 5}, {.r = 0, .ttt = 1}};
    assert_int_equal(analytic_best_policy(t), FT_POL_CKPT);
    t[FT_POL_SPARE].r = 3;
    assert_int_equal(analytic_best_policy(t), FT_POL_SPARE);
    /* failures negligible (a 2-step run on 32 GPUs of MTBF 1e9 h): every r predicts the same
     * time-to-train to rounding, and the smallest r wins (no stacked shards for nothing) */
    FtCluster q = {.gpus = 32, .gpus_per_replica = 8, .gpu_mtbf = 1e9 * 3600.0, .restart = 3600,
                   .ckpt = 60, .step = 10, .steps = 2};
    FtPlan all[FT_POL_NPOL * 4];
    assert_int_equal(analytic_optimize(&q, 4, best, all), 0);
    assert_int_equal(best[FT_POL_SPARE].r, 1);
    assert_int_equal(best[FT_POL_REP].r, 1);
    /* the table: every r of SPARe and replication, checkpoint-only at r = 1 only */
    for (int r = 1; r <= 4; r++) {
        assert_true(isfinite(all[FT_POL_SPARE * 4 + r - 1].ttt) && all[FT_POL_SPARE * 4 + r - 1].r == r);
        assert_true(r == 1 ? isfinite(all[FT_POL_CKPT * 4].ttt) : isinf(all[FT_POL_CKPT * 4 + r - 1].ttt));
    }
}

/* ---- the failure process ------------------------------------------------------------------ */

/* Renewals of one slot in [0, t] by Monte Carlo (Weibull lifetimes, replaced at once). */
static void renewal_mc(double shape, double mean, const double *t, int nt, int n, double *m, double *half)
{
    double scale = mean / tgamma(1 + 1 / shape);
    for (int j = 0; j < nt; j++) {
        FtRng g;
        rng_seed(&g, 4242, (uint64_t)j);
        double s = 0, q = 0;
        for (int i = 0; i < n; i++) {
            double x = 0;
            int c = -1;
            while (x <= t[j]) x += rng_weibull(&g, shape, scale), c++;
            s += c, q += (double)c * c;
        }
        m[j] = s / n;
        half[j] = 3.29 * sqrt((q / n - m[j] * m[j]) / n);
    }
}

/* The renewal function: exact for the exponential (a linear M), against a Monte Carlo count for
 * decreasing and increasing hazards, the error bound honest against a 4x finer solve, and the
 * long-run asymptote t/mean + (cv^2 - 1)/2. */
static void test_renewal(void **state)
{
    (void)state;
    const double mean = 1000;
    FtRenewal rn;
    /* Weibull shape 1 through the solver: M = t / mean at every grid point */
    assert_int_equal(renewal_init(&rn, FT_LAW_WEIBULL, 1.0, mean, 50 * mean, 2048), 0);
    for (int i = 0; i <= rn.tab[0].n; i += 97) {
        double t = i * rn.tab[0].h;
        assert_true(fabs(renewal_M(&rn, t) - t / mean) <= 1e-9 * (1 + t / mean));
    }
    assert_true(rn.err < 1e-9);
    renewal_free(&rn);
    const double shapes[] = {0.7, 0.8, 2.0};
    const double ts[] = {0.02 * mean, 0.3 * mean, 2.5 * mean};
    for (int a = 0; a < 3; a++) {
        double k = shapes[a];
        assert_int_equal(renewal_init(&rn, FT_LAW_WEIBULL, k, mean, 4 * mean, 4096), 0);
        double mc[3], half[3];
        renewal_mc(k, mean, ts, 3, 100000, mc, half);
        for (int j = 0; j < 3; j++) {
            double M = renewal_M(&rn, ts[j]);
            printf("renewal shape %.1f t = %.2f mean: M %.6f, Monte Carlo %.6f +- %.6f\n", k, ts[j] / mean, M,
                   mc[j], half[j]);
            assert_true(fabs(M - mc[j]) <= half[j]);
        }
        /* the error bound against a 4x finer solve, on the coarse grid's points */
        FtRenewal fine;
        assert_int_equal(renewal_init(&fine, FT_LAW_WEIBULL, k, mean, 4 * mean, 16384), 0);
        double worst = 0;
        for (int i = 0; i <= rn.tab[0].n; i++) {
            double t = i * rn.tab[0].h;
            worst = fmax(worst, fabs(renewal_M(&rn, t) - renewal_M(&fine, t)));
        }
        printf("renewal shape %.1f: 4096 cells, error bound %.3g, distance to 16384 cells %.3g (bound there %.3g)\n",
               k, rn.err, worst, fine.err);
        assert_true(worst <= rn.err && rn.err < 1e-3);
        renewal_free(&fine);
        renewal_free(&rn);
        /* far out: the asymptote, from the coarse table */
        assert_int_equal(renewal_init(&rn, FT_LAW_WEIBULL, k, mean, 0.1 * mean, 4096), 0);
        double g1 = tgamma(1 + 1 / k), g2 = tgamma(1 + 2 / k), cv2 = g2 / (g1 * g1) - 1;
        double t = 30 * mean, lim = t / mean + (cv2 - 1) / 2;
        assert_true(fabs(renewal_M(&rn, t) - lim) < 2e-3);
        /* past the coarse table (40 means): the long-run rate 1 / mean */
        for (t = 45 * mean; t < 200 * mean; t *= 2)
            assert_true(fabs(renewal_M(&rn, t) - (t / mean + (cv2 - 1) / 2)) < 2e-3);
        renewal_free(&rn);
    }
}

/* An epoch in operational time: the uniformized curve integrates to the counts' up_units and
 * throughput, is e^(-M theta) for checkpoint-only, and matches a Monte Carlo of the ring with
 * exponential waits. */
static void test_epoch_curve(void **state)
{
    (void)state;
    FtEpochStages st;
    FtEpochCurve c;
    FtSpareEpoch e;
    const int N = 200;
    assert_int_equal(epoch_stages_alloc(&st, N), 0);
    st.M = N, st.K = 0, st.alive[0] = 1, st.inv_depth[0] = 1;
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    assert_true(fabs(c.up_units * N - 1) < 1e-12);
    for (double x = 0; x <= 10; x += 0.37) assert_true(fabs(epoch_curve_S(&c, x / N) / exp(-x) - 1) < 1e-3);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
    assert_int_equal(analytic_rep_stages(N, 2, &e, &st), 0);
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    assert_true(fabs(c.up_units / e.up_units - 1) < 1e-9 && fabs(c.thr / e.thr_time - 1) < 1e-9);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
    /* replication with groups left over (N = 50, r = 3: 48 in use): the stages are those of the
     * groups in use, so the curve still integrates to the epoch's up_units */
    assert_int_equal(analytic_rep_stages(50, 3, &e, &st), 0);
    assert_int_equal(st.M, 48);
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    assert_true(fabs(c.up_units / e.up_units - 1) < 1e-9 && fabs(c.thr / e.thr_time - 1) < 1e-9);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
    const int r = 3;
    assert_int_equal(analytic_spare_stages(N, r, 1e12, &e, &st), 0);
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    assert_true(fabs(c.up_units / e.up_units - 1) < 1e-9 && fabs(c.thr / e.thr_time - 1) < 1e-9);
    /* Monte Carlo: random failure order, waits Exp(N - k), until r consecutive are down */
    FtDepthOracle o;
    assert_int_equal(depth_oracle_init(&o, N, r), 0);
    const int n = 20000;
    const double th[3] = {0.5 * e.up_units, e.up_units, 2 * e.up_units};
    double cnt[3] = {0}, sum = 0, sq = 0;
    int perm[200];
    for (int i = 0; i < n; i++) {
        FtRng g;
        rng_seed(&g, 31337, (uint64_t)i);
        depth_oracle_reset(&o);
        for (int j = 0; j < N; j++) perm[j] = j;
        double t = 0;
        for (int k = 0; k < N; k++) {
            t += rng_exp(&g, 1.0 / (N - k));
            int j = k + (int)rng_below(&g, (uint64_t)(N - k)), x = perm[j];
            perm[j] = perm[k], perm[k] = x;
            if (depth_oracle_fail(&o, x) > r) break;
        }
        for (int j = 0; j < 3; j++) cnt[j] += t > th[j];
        sum += t, sq += t * t;
    }
    double mean = sum / n, hm = 3.29 * sqrt((sq / n - mean * mean) / n);
    printf("epoch N=%d r=%d: mean %.5f (Monte Carlo %.5f +- %.5f)", N, r, c.up_units, mean, hm);
    assert_true(fabs(mean - c.up_units) <= hm);
    for (int j = 0; j < 3; j++) {
        double p = cnt[j] / n, hp = 3.29 * sqrt(p * (1 - p) / n) + 1e-4, S = epoch_curve_S(&c, th[j]);
        printf("; P(> %.1f mean) %.4f (%.4f +- %.4f)", th[j] / e.up_units, S, p, hp);
        assert_true(fabs(S - p) <= hp);
    }
    printf("\n");
    depth_oracle_free(&o);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
}

/* The replacement correction: none for memoryless laws; with shape < 1 the new GPUs of a restart
 * fail early, so the epoch's throughput falls (fewer minutes at depth 1), and the correction
 * fades as more GPUs share a group's rate (a new GPU is a smaller part of it). */
static void test_epoch_real(void **state)
{
    (void)state;
    FtEpochStages st;
    FtEpochCurve c;
    FtSpareEpoch e;
    const int N = 200;
    assert_int_equal(analytic_spare_stages(N, 2, 1e12, &e, &st), 0);
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    FtRenewal ex, w1;
    const double lam = 1.0 / 3600 / N, mean_gpu = 4 / lam; /* 4 GPUs per group */
    assert_int_equal(renewal_init(&ex, FT_LAW_EXP, 1, mean_gpu, 1e7, 64), 0);
    assert_int_equal(renewal_init(&w1, FT_LAW_WEIBULL, 1.0, mean_gpu, 1e7, 64), 0);
    double up, work, up1, work1;
    assert_int_equal(epoch_real(&c, &ex, lam, 1800, &up, &work), 0);
    assert_int_equal(epoch_real(&c, &w1, lam, 1800, &up1, &work1), 0);
    assert_true(fabs(up * lam / c.up_units - 1) < 1e-12 && fabs(work / up / c.thr - 1) < 1e-12);
    assert_true(up1 == up && work1 == work);
    double prev = INFINITY;
    for (int G = 1; G <= 256; G *= 4) {
        FtRenewal wb;
        assert_int_equal(renewal_init(&wb, FT_LAW_WEIBULL, 0.7, G / lam, 1e7, 64), 0);
        assert_int_equal(epoch_real(&c, &wb, lam, 1800, &up1, &work1), 0);
        double rho = up1 / up, th = work1 / up1 / c.thr;
        printf("Weibull 0.7, %3d GPUs per group: epoch x %.4f, throughput x %.4f\n", G, rho, th);
        assert_true(th < 1 && fabs(rho - 1) + (1 - th) < prev);
        prev = fabs(rho - 1) + (1 - th);
        renewal_free(&wb);
    }
    assert_true(prev < 0.01);
    renewal_free(&ex), renewal_free(&w1);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
}

/* A part with repairs (renewal_alt): instant repairs give the renewal function through the same
 * solve; exponential up times give the two-state Markov chain's closed forms; and the sparing
 * model under the law: shape 1 over a long horizon is the stationary (exponential) model, bad
 * parameters are refused. */
static void test_renewal_alt(void **state)
{
    (void)state;
    const int n = 2048;
    double *Phi = malloc((n + 1) * sizeof *Phi), *Dn = malloc((n + 1) * sizeof *Dn);
    assert_non_null(Phi);
    assert_non_null(Dn);
    const double mean = 1000, H = 8000;
    FtRenewal rn;
    assert_int_equal(renewal_init(&rn, FT_LAW_WEIBULL, 0.7, mean, H, n), 0);
    assert_int_equal(renewal_alt(FT_LAW_WEIBULL, 0.7, mean, 0, H, n, Phi, Dn), 0);
    for (int i = 0; i < n; i++) { /* (at H itself renewal_M reads its coarse table) */
        assert_true(fabs(Phi[i] - renewal_M(&rn, i * H / n)) <= 1e-12 * (1 + Phi[i]));
        assert_true(Dn[i] == 0);
    }
    renewal_free(&rn);
    /* exponential up (mean m), exponential repair (mu): P(down) = d (1 - e^(-c t)) with
     * d = mu / (m + mu), c = 1/m + 1/mu; failures = int P(up) / m */
    const double m = 1000, mu = 50, c = 1 / m + 1 / mu, d = mu / (m + mu);
    double worst = 0;
    for (int law = 0; law < 2; law++) {
        assert_int_equal(renewal_alt(law ? FT_LAW_WEIBULL : FT_LAW_EXP, 1.0, m, mu, H, n, Phi, Dn),
                         0);
        for (int i = 0; i <= n; i++) {
            double t = i * H / n, D = d * -expm1(-c * t),
                   P = ((1 - d) * t + d * -expm1(-c * t) / c) / m;
            worst = fmax(worst, fmax(fabs(Dn[i] - D), fabs(Phi[i] - P) / (1 + P)));
        }
    }
    printf("renewal_alt: exponential up and repair, largest error %.2e\n", worst);
    assert_true(worst < 1e-5);
    free(Phi), free(Dn);

    FtSparing s = {.B = 2, .L = 12, .K = 6, .R = 2, .I = 1, .gpus_per_tray = 4, .tray_mtbf = 300,
                   .tray_mttr = 20, .rack_mtbf = 3000, .rack_mttr = 50, .ckpt = 250, .restart = 600};
    FtSparingResult ex, wb;
    char err[256];
    assert_int_equal(analytic_sparing(&s, &ex, err, sizeof err), 0);
    s.law = FT_LAW_WEIBULL, s.shape = 1.0, s.horizon = 5e4;
    assert_int_equal(analytic_sparing(&s, &wb, err, sizeof err), 0);
    printf("sparing: Weibull shape 1 over 5e4 h: CETT %.5f, stationary %.5f; interrupts %.5f vs "
           "%.5f per h\n",
           wb.cett, ex.cett, wb.lam * 3600, ex.lam * 3600);
    assert_true(fabs(wb.cett / ex.cett - 1) < 1e-3 && fabs(wb.avail / ex.avail - 1) < 1e-3);
    assert_true(fabs(wb.lam / ex.lam - 1) < 1e-3);
    s.horizon = 0;
    assert_int_equal(analytic_sparing(&s, &wb, err, sizeof err), -1);
    assert_non_null(strstr(err, "horizon"));
}

/* The checkpoint formulas' contracts (analytic.h): Daly's interval is M once C >= 2M; a run
 * takes no checkpoint after its last piece (failure-free: W plus one C per full piece before the
 * last); the first-order waste is least at Young's interval and grows by lam x delta with the
 * detection latency. */
static void test_ckpt_formulas(void **state)
{
    (void)state;
    const double M = 1000;
    assert_true(analytic_daly(2 * M, M) == M && analytic_daly(3 * M, M) == M);
    assert_true(analytic_daly(1.9 * M, M) < M);
    assert_true(fabs(analytic_ckpt_time(10000, 1000, 60, 0, 300) - (10000 + 9 * 60)) < 1e-9);
    assert_true(fabs(analytic_ckpt_time(10500, 1000, 60, 0, 300) - (10500 + 10 * 60)) < 1e-9);
    assert_true(fabs(analytic_ckpt_time(800, 1000, 60, 0, 300) - 800) < 1e-9);
    const double C = 60, lam = 1 / 3600.0, D = 300, y = analytic_young(C, 1 / lam);
    for (double f = 1.02; f < 1.5; f *= 1.1) {
        assert_true(analytic_waste(y, C, lam, D, 0) < analytic_waste(y * f, C, lam, D, 0));
        assert_true(analytic_waste(y, C, lam, D, 0) < analytic_waste(y / f, C, lam, D, 0));
    }
    double dw = analytic_waste(y, C, lam, D, 500) - analytic_waste(y, C, lam, D, 0);
    assert_true(fabs(dw - lam * 500) < 1e-12);
}

/* The time-to-train model where it is exact (analytic.h: checkpoint-only, exponential law: the
 * Poisson model of analytic_ckpt.c): the plan's time against analytic_ckpt_time at fixed
 * intervals (to the model's tables, 2e-4: measured 3-8e-5; runs of 33 and 280 mean times between
 * failures, the longer one settling into the stationary piece chain), its expected wipe-outs
 * against the Poisson count (e^(lam x) - 1 per piece of x seconds, the last piece's included),
 * its availability against the restarts' share of that time; a run shorter than the optimal
 * interval takes no checkpoint; and a detection latency costs what the same extra restart time
 * costs. */
static void test_plan_poisson(void **state)
{
    (void)state;
    FtCluster c = {.gpus = 800, .gpus_per_replica = 8, .gpu_mtbf = 800 * 3600.0, .restart = 300,
                   .ckpt = 60, .step = 10, .steps = 12000};
    const double lam = 1.0 / 3600, taus[] = {600, 1200, 2000, 4000, 1200};
    for (int i = 0; i < 5; i++) {
        FtCluster cw = c;
        if (i == 4) cw.steps = 100000;
        const double W = cw.steps * cw.step;
        FtPlan p;
        assert_int_equal(analytic_plan(&cw, FT_POL_CKPT, 1, taus[i], &p), 0);
        double n = ceil(W / taus[i]), last = W - (n - 1) * taus[i];
        double ex = analytic_ckpt_time(W, taus[i], c.ckpt, lam, c.restart);
        double wo = (n - 1) * expm1(lam * (taus[i] + c.ckpt)) + expm1(lam * last);
        printf("checkpoint every %.0f s: time-to-train %.1f s (exact %.1f, %+.1e), wipe-outs %.3f (exact %.3f, "
               "%+.1e), availability %.5f (exact %.5f)\n", p.interval, p.ttt, ex, p.ttt / ex - 1, p.wipeouts, wo,
               p.wipeouts / wo - 1, p.avail, 1 - wo * c.restart / ex);
        assert_true(p.interval == taus[i]);
        assert_true(fabs(p.ttt / ex - 1) < 2e-4);
        assert_true(fabs(p.wipeouts / wo - 1) < 1e-3);
        assert_true(fabs(p.avail - (1 - wo * c.restart / ex)) < 1e-4);
    }
    /* 1000 s of work, lam W = 0.1, optimal interval (Young: sqrt(2 C / lam) = 2450 s) longer
     * than the run: one piece, no checkpoint */
    FtCluster q = {.gpus = 32, .gpus_per_replica = 8, .gpu_mtbf = 32 * 1e4, .restart = 600, .ckpt = 300,
                   .step = 10, .steps = 100};
    FtPlan s;
    assert_int_equal(analytic_plan(&q, FT_POL_CKPT, 1, 0, &s), 0);
    assert_true(s.interval == 1000);
    assert_true(fabs(s.ttt / analytic_segment_time(1000, 1e-4, 600) - 1) < 1e-4);
    assert_true(fabs(s.wipeouts / expm1(0.1) - 1) < 1e-3);
    /* latency: part of every wipe-out's downtime, like the restart */
    for (int pol = FT_POL_CKPT; pol <= FT_POL_SPARE; pol += FT_POL_SPARE) {
        FtPlan a, b;
        FtCluster cl = c, cr = c;
        cl.latency = 200, cr.restart += 200;
        assert_int_equal(analytic_plan(&cl, pol, 2, 1200, &a), 0);
        assert_int_equal(analytic_plan(&cr, pol, 2, 1200, &b), 0);
        assert_true(fabs(a.ttt / b.ttt - 1) < 1e-12 && fabs(a.wipeouts / b.wipeouts - 1) < 1e-12);
        /* ... but not restart time: the availability (time not spent in restarts) is higher */
        assert_true(a.wipeouts > 0 && a.avail > b.avail);
    }
    /* an interval is whole steps, at least one: a third of a step is one step */
    FtPlan one;
    assert_int_equal(analytic_plan(&c, FT_POL_CKPT, 1, c.step / 3, &one), 0);
    assert_true(one.interval == c.step && isfinite(one.ttt));
}

/* The incremental oracle on every dead set of small rings (failures in ascending order of the
 * group index, and from the middle of the ring around), against analytic_depth at every step:
 * covers the boundary states that random orders on a large ring rarely reach (t (N - k) = N
 * exactly, e.g. every other group down), and the wipe-out test against r consecutive failed
 * groups around the failed one, counted directly. */
static void test_oracle_exhaustive(void **state)
{
    (void)state;
    int checked = 0;
    for (int N = 4; N <= 12; N++)
        for (int r = 2; r <= 4 && r <= N; r++) {
            FtDepthOracle o;
            assert_int_equal(depth_oracle_init(&o, N, r), 0);
            for (unsigned m = 1; m < (1u << N); m++)
                for (int start = 0; start < N; start += N / 2) {
                    depth_oracle_reset(&o);
                    for (int i = 0; i < N; i++) {
                        int g = (start + i) % N;
                        if (!(m >> g & 1)) continue;
                        int d = depth_oracle_fail(&o, g);
                        assert_int_equal(d, analytic_depth(o.dead, N, r));
                        int run = 0; /* r consecutive failed groups through g */
                        for (int a = g - r + 1; a <= g && !run; a++) {
                            int all = 1;
                            for (int b = a; b < a + r; b++) all &= o.dead[(b + N) % N] != 0;
                            run = all;
                        }
                        assert_int_equal(depth_oracle_run_at(&o, g), run);
                        checked++;
                        if (d > r) break;
                    }
                }
            depth_oracle_free(&o);
        }
    assert_true(checked > 100000);
}

/* The optimizer's fallback when the exact count is too costly (sim_spare_stages_mc): its stages
 * against the exact ones on a small ring, within 99.9% intervals of their own trial counts
 * (P(T > k) binomial; E[1/d_k | T > k] from the epochs alive at k, 1/d_k within [0, 1/2] for
 * k >= 1 so its standard deviation is at most 1/4), and the epoch statistics within 1%. */
static void test_stages_mc(void **state)
{
    (void)state;
    const int N = 40, r = 3, n = 20000;
    FtSpareEpoch e, m;
    FtEpochStages se, sm;
    assert_int_equal(analytic_spare_stages(N, r, 1e12, &e, &se), 0);
    assert_int_equal(sim_spare_stages_mc(N, r, n, 77, &m, &sm), 0);
    assert_int_equal(m.exact, 0);
    int checked = 0;
    for (int k = 0; k <= se.K; k++) {
        double p = se.alive[k];
        if (p < 0.01) continue;
        assert_true(fabs(sm.alive[k] - p) <= 3.29 * sqrt(p * (1 - p) / n) + 1e-12);
        assert_true(fabs(sm.inv_depth[k] - se.inv_depth[k]) <= 3.29 * 0.25 / sqrt(p * n) + 1e-12);
        checked++;
    }
    assert_true(checked > 10);
    assert_true(fabs(m.mu / e.mu - 1) < 0.01 && fabs(m.S / e.S - 1) < 0.01);
    assert_true(fabs(m.thr_time / e.thr_time - 1) < 0.01);
    assert_true(fabs(m.up_units / e.up_units - 1) < 0.01);
    epoch_stages_free(&se), epoch_stages_free(&sm);
}

/* The replacement correction against its definition: when the GPUs that failed in every past
 * cycle (length L) all start new at its end, the first u seconds of an epoch hold
 * theta(u) = lam_g L sum_{j>=0} (F(jL + u) - F(jL)) of operational time (cohort j born j cycles
 * ago). analytic_epoch.c sums the cohorts j >= 1 by Euler-Maclaurin; here they are summed one by
 * one, the epoch integrated on a finer grid and L iterated to convergence: the mean up-time agrees
 * to 5e-4 (measured: 1e-4), against a correction of 2-5%. */
static double cohort_F(const FtRenewal *g, double x)
{
    return x <= 0 ? 0 : -expm1(-pow(x / g->scale, g->shape));
}

static double cohort_theta(const FtRenewal *g, double lam, double L, double u)
{
    double s = 0;
    for (int j = 0; j < 1000000; j++) {
        double d = cohort_F(g, j * L + u) - cohort_F(g, j * L);
        s += d;
        if (j > 0 && d < 1e-15 * s) break;
    }
    return lam * L * s;
}

static double cohort_up(const FtEpochCurve *c, const FtRenewal *g, double lam, double restart)
{
    const double th_end = (c->n - 1) * c->dth;
    const int n = 1000; /* Simpson on log u */
    double L = c->up_units / lam + restart, up = 0;
    for (int it = 0; it < 30; it++) {
        double lo = log(1e-10 * th_end / lam), hi = log(4 * th_end / lam), h = (hi - lo) / n, s = 0;
        for (int i = 0; i <= n; i++) {
            double u = exp(lo + i * h);
            double wi = i == 0 || i == n ? 1 : i & 1 ? 4 : 2;
            s += wi * epoch_curve_S(c, cohort_theta(g, lam, L, u)) * u;
        }
        up = s * h / 3 + exp(lo);
        if (fabs(up + restart - L) < 1e-9 * L) break;
        L = up + restart;
    }
    return up;
}

static void test_epoch_cohorts(void **state)
{
    (void)state;
    FtEpochStages st;
    FtEpochCurve c;
    FtSpareEpoch e;
    const int N = 200;
    const double lam = 1.0 / 3600 / N;
    assert_int_equal(analytic_spare_stages(N, 2, 1e12, &e, &st), 0);
    assert_int_equal(epoch_curve_init(&c, &st), 0);
    FtRenewal wb;
    /* one GPU per group: the largest correction */
    assert_int_equal(renewal_init(&wb, FT_LAW_WEIBULL, 0.7, 1 / lam, 1e7, 64), 0);
    const double restarts[2] = {1800, 36000};
    for (int i = 0; i < 2; i++) {
        double up, work, ref = cohort_up(&c, &wb, lam, restarts[i]);
        assert_int_equal(epoch_real(&c, &wb, lam, restarts[i], &up, &work), 0);
        printf("replacement correction, restart %.0f s: epoch %.1f s (cohorts one by one %.1f, %+.1e; "
               "uncorrected %.1f)\n", restarts[i], up, ref, up / ref - 1, c.up_units / lam);
        assert_true(fabs(up / ref - 1) < 5e-4);
    }
    renewal_free(&wb);
    epoch_curve_free(&c);
    epoch_stages_free(&st);
}

FT_TEST_MAIN(cmocka_unit_test(test_depth_vs_hall), cmocka_unit_test(test_oracle_incremental),
             cmocka_unit_test(test_survival_and_S_enumerated),
             cmocka_unit_test(test_closed_form_gap), cmocka_unit_test(test_young_daly),
             cmocka_unit_test(test_sparing_model), cmocka_unit_test(test_optimizer), cmocka_unit_test(test_long_epochs), cmocka_unit_test(test_interval_sweeps),
             cmocka_unit_test(test_renewal), cmocka_unit_test(test_epoch_curve),
             cmocka_unit_test(test_epoch_real), cmocka_unit_test(test_renewal_alt),
             cmocka_unit_test(test_ckpt_formulas), cmocka_unit_test(test_plan_poisson),
             cmocka_unit_test(test_oracle_exhaustive), cmocka_unit_test(test_stages_mc),
             cmocka_unit_test(test_epoch_cohorts))

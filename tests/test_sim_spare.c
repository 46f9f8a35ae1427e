/* test_sim_spare.c: the cluster simulator itself (sim_cluster_trial) under SPARe and plain
 * replication with r > 1, against the failure law and the exact ring model, statistically.
 *
 * Each trial runs with the CSV event log on (the trial is number 0 of its own seed, the one the
 * simulator logs), and the log is read back event by event:
 *  - failures per simulated time: every group failure ("masked" or "wipeout") over the group-
 *    seconds in service (groups in use minus those down, summed over the time outside
 *    restarts), against the law's rate gpus_per_replica / gpu_mtbf (exponential law: a Poisson
 *    process per group in service, so failures / exposure is its estimator);
 *  - per failure epoch (a restart to the next wipe-out): T = failures up to and including the
 *    wipe-out and sum_{k<T} d_k (d_0 the depth after the restart, d_k the depth the log gives
 *    after the k-th masked failure), against analytic's exact mu and S (analytic_spare_epoch,
 *    analytic_rep_epoch). Only the first K epochs of each trial count, and the run is long
 *    enough that every trial has them (checked): the epoch cut off by the end of the run is
 *    shorter than average, and dropping it would bias T low.
 * Verdicts as in test_sim.c: mean +- half-width at 99.9% (z = 3.29), trial counts from a pilot so
 * that the half-width is half the tolerance; tolerances 1.13% (mu) and 0.60% (S) as there, 1% for
 * the rate. A simulator with the wrong failure rate under one policy, a wrong wipe-out rule or a
 * wrong depth fails here even where it stays self-consistent.
 * ft-test: ranks 1 2 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/analytic.h"
#include "ftllm/sim.h"

#include "sim_verdict.h"

/* Per-trial outputs read from the log. */
enum { O_FAIL, O_EXPOSURE, O_T, O_D, O_EPOCHS, O_CHECK, O_NOUT };

struct ctx {
    FtSimSpec s;
    int K;         /* epochs per trial that count */
    int M;         /* groups in use */
    double depth0; /* depth with no failed group */
};

/* Reads one trial's log. Returns 0, or -1 when the log does not parse. */
static int read_log(const struct ctx *c, const char *log, double *out)
{
    const char *p = strchr(log, '\n'); /* header */
    double t_prev = 0, exposure = 0, nfail = 0, T = 0, D = 0, sumT = 0, sumD = 0;
    int down = 0, restarting = 0, epochs = 0;
    double depth = c->depth0;
    D = depth; /* d_0 */
    while (p && *++p) {
        double t, dep, work;
        int g, n = 0;
        char ev[16];
        if (sscanf(p, "%lf,%15[^,],%d,%lf,%lf%n", &t, ev, &g, &dep, &work, &n) != 5) return -1;
        p = strchr(p, '\n');
        if (!restarting) exposure += (double)(c->M - down) * (t - t_prev);
        t_prev = t;
        if (!strcmp(ev, "masked")) {
            nfail++, down++, T++;
            D += dep; /* the depth with T failed groups */
        } else if (!strcmp(ev, "wipeout")) {
            nfail++, T++;
            if (epochs < c->K) sumT += T, sumD += D;
            epochs++;
            restarting = 1;
        } else if (!strcmp(ev, "restarted")) {
            restarting = 0, down = 0, T = 0, D = dep;
        } else if (strcmp(ev, "checkpoint") && strcmp(ev, "done")) {
            return -1;
        }
    }
    out[O_FAIL] = nfail;
    out[O_EXPOSURE] = exposure;
    out[O_T] = sumT;
    out[O_D] = sumD;
    out[O_EPOCHS] = epochs;
    return 0;
}

static int trial_fn(int trial, double *out, void *arg)
{
    const struct ctx *c = arg;
    FtSimSpec s = c->s;
    s.seed = c->s.seed * 1000003u + (uint64_t)trial; /* trial 0 of its own seed: logged */
    char *buf = NULL;
    size_t len = 0;
    s.log = open_memstream(&buf, &len);
    if (!s.log) return -1;
    double res[SIM_NOUT];
    int rc = sim_cluster_trial(&s, 0, res);
    fclose(s.log);
    if (!rc) rc = read_log(c, buf, out);
    free(buf);
    /* the log agrees with the trial's own counts */
    out[O_CHECK] = !rc && out[O_FAIL] == res[SIM_FAILURES] && out[O_EPOCHS] == res[SIM_RESTARTS];
    return rc;
}

/* n trials; returns the outputs (n x O_NOUT, malloc'ed) */
static double *run_trials(struct ctx *c, int n)
{
    double *all = malloc((size_t)n * O_NOUT * sizeof *all);
    assert_all(all && sim_trials(ft_test_comm(), n, O_NOUT, trial_fn, c, all) == 0);
    return all;
}

struct stats {
    FtStat rate, mu, S;
    int ok; /* every trial: log consistent, at least K epochs */
};

static struct stats stats_of(const struct ctx *c, const double *all, int n)
{
    double *x = malloc((size_t)n * 4 * sizeof *x), *fail = x, *expo = x + n, *T = x + 2 * n,
           *D = x + 3 * n;
    struct stats st = {.ok = 1};
    assert_non_null(x);
    for (int i = 0; i < n; i++) {
        const double *o = all + (size_t)i * O_NOUT;
        fail[i] = o[O_FAIL], expo[i] = o[O_EXPOSURE], T[i] = o[O_T] / c->K, D[i] = o[O_D];
        st.ok &= o[O_CHECK] == 1 && o[O_EPOCHS] >= c->K;
    }
    st.rate = stat_ratio(fail, expo, n, Z);
    st.mu = stat_of(T, n, Z);
    for (int i = 0; i < n; i++) T[i] *= c->K;
    st.S = stat_ratio(D, T, n, Z);
    free(x);
    return st;
}

/* One policy at one (N, r): pilot, then enough trials for every verdict. */
static void check_policy(int policy, int N, int r, uint64_t seed)
{
    const double tol_rate = 0.01, tol_mu = 0.0113, tol_S = 0.0060;
    FtSpareEpoch e;
    if (policy == FT_POL_SPARE) assert_all(analytic_spare_epoch(N, r, 1e12, &e) == 0);
    else assert_all(analytic_rep_epoch(N, r, &e) == 0);
    const double per = 8, mtbf = 5e5; /* GPUs per group, GPU MTBF (s) */
    double lam = per / mtbf, epoch_s = e.up_units / lam;
    struct ctx c = {.K = 20, .M = policy == FT_POL_REP ? (N / r) * r : N,
                    .depth0 = policy == FT_POL_REP ? (double)N / (N / r) : 1.0};
    /* a run of about 2K mean epochs of wall time (work at depth0 per wall second, slower after
     * failures), a checkpoint per tenth of an epoch, a restart of a hundredth */
    c.s = (FtSimSpec){.c = {.gpus = (long long)(N * per), .gpus_per_replica = (long long)per,
                            .gpu_mtbf = mtbf, .law = FT_LAW_EXP, .restart = 0.01 * epoch_s,
                            .ckpt = 0.02 * epoch_s, .step = 1, .steps = ceil(2.0 * c.K * epoch_s / c.depth0)},
                      .policy = policy, .r = r, .interval = round(0.1 * epoch_s), .seed = seed};
    int n = 64;
    double *all = run_trials(&c, n);
    struct stats st = stats_of(&c, all, n);
    free(all);
    int nm = trials_for(st.mu, tol_mu / 2, 64, 20000), ns = trials_for(st.S, tol_S / 2, 64, 20000),
        nr = trials_for(st.rate, tol_rate / 2, 64, 20000);
    n = nm > ns ? nm : ns;
    n = n > nr ? n : nr;
    all = run_trials(&c, n);
    st = stats_of(&c, all, n);
    free(all);
    int vr = verdict(st.rate, lam, tol_rate), vm = verdict(st.mu, e.mu, tol_mu),
        vs = verdict(st.S, e.S, tol_S);
    if (ft_test_rank() == 0)
        printf("%s N=%d r=%d, %d trials x %d epochs: failures/group-s %.4e +- %.1e, law %.4e "
               "(%+.3f%%) | mu %.3f +- %.3f, exact %.3f (%+.3f%%) | S %.5f +- %.5f, exact %.5f "
               "(%+.3f%%)%s\n",
               policy == FT_POL_SPARE ? "SPARe" : "replication", N, r, n, c.K, st.rate.mean,
               st.rate.half, lam, 100 * (st.rate.mean / lam - 1), st.mu.mean, st.mu.half, e.mu,
               100 * (st.mu.mean / e.mu - 1), st.S.mean, st.S.half, e.S,
               100 * (st.S.mean / e.S - 1), st.ok ? "" : "; LOG INCONSISTENT OR TOO FEW EPOCHS");
    assert_all(st.ok);
    assert_all(vr == V_PASS);
    assert_all(vm == V_PASS);
    /* replication's depth is one constant, which the log prints to 4 digits */
    assert_all(policy == FT_POL_REP ? fabs(st.S.mean / e.S - 1) <= 5e-4 : vs == V_PASS);
}

static void test_spare_r2(void **state)
{
    (void)state;
    check_policy(FT_POL_SPARE, 64, 2, 11);
}

static void test_spare_r3(void **state)
{
    (void)state;
    check_policy(FT_POL_SPARE, 48, 3, 12);
}

static void test_replication_r2(void **state)
{
    (void)state;
    check_policy(FT_POL_REP, 64, 2, 13);
}

static void test_replication_r3(void **state)
{
    (void)state;
    check_policy(FT_POL_REP, 50, 3, 14); /* 16 sets of 3, 2 groups unused */
}

FT_TEST_MAIN(cmocka_unit_test(test_spare_r2), cmocka_unit_test(test_spare_r3),
             cmocka_unit_test(test_replication_r2), cmocka_unit_test(test_replication_r3))

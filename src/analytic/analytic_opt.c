/* analytic_opt.c: the joint optimizer: expected time-to-train of a cluster under each policy,
 * minimized over the redundancy r and the checkpoint interval (fixed, or growing over the run).
 *
 * Model (assumptions listed in analytic.h). A policy at r has, from the ring / replication
 * counts, a mean epoch up-time of up_units / lam_g (lam_g = the failure rate of one group in
 * use, up_units = sum_k P(T > k) / (M - k)) and a time-averaged throughput thr (1/depth for
 * SPARe, floor(N/r)/N for replication, 1 for checkpoint-only). Wipe-outs are a Poisson process of
 * rate lam_w = lam_g / up_units during compute; the run is W/thr seconds of compute cut into
 * pieces of tau/thr, each followed by a checkpoint C (not the last), and a piece of x seconds
 * of compute costs (e^(lam_w (x + C)) - 1)(1/lam_w + D) (analytic_segment_time).
 *
 * The failure law enters through lam_g(t) = gpus_per_replica * m(t), m the renewal density of
 * one GPU slot (analytic_renewal.c): every GPU starts new at t = 0 and a failed GPU is replaced
 * by a new one. With the exponential law m = 1/gpu_mtbf and the sum over pieces is exact for
 * that model. With Weibull the rate changes over the run (shape < 1: high at the start, falling
 * towards 1/gpu_mtbf as the slots' ages spread), and the run is integrated piece by piece in wall
 * time: a piece starting at t costs the segment time at the rate averaged over the piece's own
 * expected span [t, t + P] (a fixed point, two iterations), and runs of identical pieces are
 * taken in batches whose span is at most BATCH_FRAC of the elapsed time (the rate changes by a
 * fraction ~BATCH_FRAC over a batch, so the error of the batching is second order in it).
 * Quasi-static: each piece sees the steady state of its own rate, which holds when the rate
 * changes little over an epoch plus a restart; the first minutes of a run of new GPUs break it,
 * at a cost of a few pieces out of thousands. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define EXACT_MAX_OPS 6e7
#define MC_TRIALS 600
#define BATCH_FRAC 0.004
#define RENEWAL_CELLS 4096

int cluster_groups(const FtCluster *c)
{
    if (c->gpus_per_replica < 1) return 0;
    long long n = c->gpus / c->gpus_per_replica;
    return n > 1000000000LL ? 1000000000 : (int)n;
}

int analytic_fail_init(FtFailModel *m, const FtCluster *c)
{
    memset(m, 0, sizeof *m);
    m->c = *c;
    m->N = cluster_groups(c);
    if (m->N < 1 || !(c->gpu_mtbf > 0) || !(c->step > 0) || !(c->steps > 0)) return -1;
    /* the fine table covers a generous bound on the longest run the optimizer looks at: three
     * times checkpoint-only's expected time at the mean rate (beyond it, a coarse table) */
    double W = c->steps * c->step, lam = (double)c->gpus / c->gpu_mtbf;
    double tau = analytic_ckpt_opt(c->ckpt, lam);
    double est = analytic_ckpt_time(W, isfinite(tau) && tau > 0 ? tau : W, c->ckpt, lam, c->restart + c->latency);
    if (!isfinite(est) || est > 1e30) est = 1e30;
    return renewal_init(&m->gpu, c->law, c->weibull_shape, c->gpu_mtbf, fmax(3 * est, W), RENEWAL_CELLS);
}

void analytic_fail_free(FtFailModel *m) { renewal_free(&m->gpu); }

double analytic_group_rate(const FtFailModel *m, double t0, double t1)
{
    return (double)m->c.gpus_per_replica * renewal_rate(&m->gpu, t0, t1);
}

/* ---- one policy at one r: the rate-free part -------------------------------------------------- */

#define NCORR 20

struct pol {
    int policy, r;
    double thr;      /* work per second of compute */
    double up_units; /* mean epoch up-time x lam_g */
    double mu, depth;
    int exact;
    FtEpochCurve curve;
    /* the epoch in wall time against the rate-free one, at times t[i] of the run (log-spaced;
     * Weibull only): up = up_units / lam_g x rho[i], throughput thr_t[i] */
    int nc;
    double lt[NCORR], rho[NCORR], thr_t[NCORR];
};

static int pol_init(const FtFailModel *m, int policy, int r, struct pol *p)
{
    int N = m->N;
    memset(p, 0, sizeof *p);
    if (r < 1 || r > N) return -1;
    if (policy == FT_POL_CKPT) r = 1;
    FtSpareEpoch ep;
    FtEpochStages st;
    if (r == 1) {
        ep = (FtSpareEpoch){.N = N, .r = 1, .mu = 1, .S = 1, .S_time = 1, .thr_time = 1,
                            .up_units = 1.0 / N, .exact = 1};
        if (epoch_stages_alloc(&st, N)) return -1;
        st.M = N, st.K = 0, st.alive[0] = 1, st.inv_depth[0] = 1;
    } else if (policy == FT_POL_REP) {
        if (analytic_rep_stages(N, r, &ep, &st)) return -1;
    } else {
        if (analytic_spare_stages(N, r, EXACT_MAX_OPS, &ep, &st) &&
            sim_spare_stages_mc(N, r, MC_TRIALS, 0x5eedULL + (uint64_t)r, &ep, &st))
            return -1;
    }
    int rc = epoch_curve_init(&p->curve, &st);
    epoch_stages_free(&st);
    if (rc) return -1;
    p->policy = policy, p->r = r, p->thr = ep.thr_time, p->up_units = ep.up_units;
    p->mu = ep.mu, p->depth = ep.S, p->exact = ep.exact;
    return 0;
}

static void pol_free(struct pol *p) { epoch_curve_free(&p->curve); }

/* The aligned-replacement correction at NCORR times up to t_end (analytic_epoch.c). */
static void pol_correct(const FtFailModel *m, struct pol *p, double t_end)
{
    p->nc = 0;
    if (m->gpu.law != FT_LAW_WEIBULL || !(t_end > 0) || !isfinite(t_end)) return;
    const double D = m->c.restart + m->c.latency;
    for (int i = 0; i < NCORR; i++) {
        double t = t_end * ldexp(1.0, i - NCORR + 1);
        double lam = analytic_group_rate(m, t, t * 1.05);
        double up, work;
        if (epoch_real(&p->curve, &m->gpu, lam, D, &up, &work)) {
            p->nc = 0;
            return;
        }
        p->lt[i] = log(t);
        p->rho[i] = up / (p->up_units / lam);
        p->thr_t[i] = work / up;
    }
    p->nc = NCORR;
}

/* rho and the throughput at wall time t */
static void pol_at(const struct pol *p, double t, double *rho, double *thr)
{
    *rho = 1, *thr = p->thr;
    if (p->nc == 0) return;
    double x = t > 0 ? log(t) : -INFINITY;
    if (x <= p->lt[0]) {
        *rho = p->rho[0], *thr = p->thr_t[0];
        return;
    }
    if (x >= p->lt[p->nc - 1]) {
        *rho = p->rho[p->nc - 1], *thr = p->thr_t[p->nc - 1];
        return;
    }
    int i = 0;
    while (x > p->lt[i + 1]) i++;
    double f = (x - p->lt[i]) / (p->lt[i + 1] - p->lt[i]);
    *rho = (1 - f) * p->rho[i] + f * p->rho[i + 1];
    *thr = (1 - f) * p->thr_t[i] + f * p->thr_t[i + 1];
}

static double wipe_rate(const FtFailModel *m, const struct pol *p, double t0, double t1)
{
    double rho, thr;
    pol_at(p, t0, &rho, &thr);
    return analytic_group_rate(m, t0, t1) / (p->up_units * rho);
}

/* ---- the run, piece by piece ------------------------------------------------------------------ */

struct run_out {
    double ttt, wipeouts, pieces;
};

static double sched_tau(const FtSched *s, double t, int *i)
{
    while (*i + 1 < s->n && t >= s->t[*i + 1]) (*i)++;
    return s->tau[*i];
}

/* Expected wall time of `x` work plus a checkpoint c starting at t, at the rate averaged over
 * the span of nb such pieces; *lw gets that wipe-out rate. */
static double piece_at(const FtFailModel *m, const struct pol *p, double t, double x, double c, int nb,
                       double *lw)
{
    const double D = m->c.restart + m->c.latency;
    double rho, thr;
    pol_at(p, t, &rho, &thr);
    double span = (x / thr + c) * nb, P = 0;
    for (int it = 0; it < 3; it++) {
        *lw = wipe_rate(m, p, t, t + span);
        P = analytic_segment_time(x / thr + c, *lw, D);
        if (!isfinite(P)) return INFINITY;
        span = P * nb;
    }
    return P;
}

static int run_model(const FtFailModel *m, const struct pol *p, const FtSched *s, struct run_out *o)
{
    const double W = m->c.steps * m->c.step, C = m->c.ckpt;
    double t = 0, w = 0, nw = 0, npieces = 0, lw;
    int si = 0;
    memset(o, 0, sizeof *o);
    for (;;) {
        double tau = sched_tau(s, t, &si), rem = W - w;
        if (!(tau > 0)) return -1;
        if (rem <= tau * (1 + 1e-12)) { /* the last piece: no checkpoint after it */
            double P = piece_at(m, p, t, rem, 0, 1, &lw), rho, thr;
            pol_at(p, t, &rho, &thr);
            t += P, nw += expm1(lw * rem / thr), npieces++;
            break;
        }
        double nfull = ceil(rem / tau - 1e-12) - 1; /* full pieces before the last */
        double P1 = piece_at(m, p, t, tau, C, 1, &lw);
        if (!isfinite(P1)) return -1;
        double nb = fmin(nfull, fmax(1, floor(BATCH_FRAC * t / P1)));
        if (si + 1 < s->n) nb = fmin(nb, fmax(1, ceil((s->t[si + 1] - t) / P1)));
        if (nb > 1) P1 = piece_at(m, p, t, tau, C, (int)fmin(nb, 1e9), &lw);
        if (!isfinite(P1) || t > 1e300) return -1;
        double rho, thr;
        pol_at(p, t, &rho, &thr);
        t += nb * P1, w += nb * tau, npieces += nb;
        nw += nb * expm1(lw * (tau / thr + C));
    }
    o->ttt = t, o->wipeouts = nw, o->pieces = npieces;
    return isfinite(t) ? 0 : -1;
}

static void plan_fill(const FtFailModel *m, const struct pol *p, const struct run_out *o, FtPlan *out)
{
    out->policy = p->policy, out->r = p->r;
    out->mu = p->mu;
    out->depth = p->r == 1 ? 1.0 : p->depth;
    out->ttt = o->ttt;
    /* the epoch at the run's mean group rate */
    double lam = analytic_group_rate(m, 0, o->ttt);
    out->epoch = p->up_units / lam;
    out->goodput = m->c.steps * m->c.step / o->ttt;
    out->avail = 1.0 - o->wipeouts * m->c.restart / o->ttt;
    out->wipeouts = o->wipeouts;
    out->exact = p->exact;
}

static double round_steps(const FtFailModel *m, double tau)
{
    return fmax(m->c.step, round(tau / m->c.step) * m->c.step);
}

static double ttt_fixed(const FtFailModel *m, const struct pol *p, double tau)
{
    FtSched s = {.n = 1, .t = {0}, .tau = {round_steps(m, tau)}};
    struct run_out o;
    return run_model(m, p, &s, &o) ? INFINITY : o.ttt;
}

/* golden section on log(tau) of f over [lo, hi] */
static double golden(double (*f)(const FtFailModel *, const struct pol *, double, const void *),
                     const FtFailModel *m, const struct pol *p, const void *ctx, double lo, double hi)
{
    const double g = 0.6180339887498949;
    lo = log(lo), hi = log(hi);
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = f(m, p, exp(a), ctx), fb = f(m, p, exp(b), ctx);
    for (int it = 0; it < 60 && hi - lo > 1e-4; it++) {
        if (fa < fb) {
            hi = b, b = a, fb = fa;
            a = hi - g * (hi - lo);
            fa = f(m, p, exp(a), ctx);
        } else {
            lo = a, a = b, fa = fb;
            b = lo + g * (hi - lo);
            fb = f(m, p, exp(b), ctx);
        }
    }
    return exp(fa < fb ? a : b);
}

static double f_fixed(const FtFailModel *m, const struct pol *p, double tau, const void *ctx)
{
    (void)ctx;
    return ttt_fixed(m, p, tau);
}

/* the locally optimal interval (work seconds) for the wipe-out rate around wall time t */
static double tau_local(const FtFailModel *m, const struct pol *p, double t0, double t1)
{
    double lw = wipe_rate(m, p, t0, t1), rho, thr;
    pol_at(p, t0, &rho, &thr);
    return thr * analytic_ckpt_opt(m->c.ckpt, lw);
}

static int plan_fixed(const FtFailModel *m, struct pol *p, double interval, FtPlan *out)
{
    const double W = m->c.steps * m->c.step;
    double tau = interval;
    /* the replacement correction over a generous span of the run */
    double t_guess = ttt_fixed(m, p, tau > 0 ? tau : fmin(W, tau_local(m, p, 0, W)));
    pol_correct(m, p, 2 * (isfinite(t_guess) ? t_guess : W));
    if (!(tau > 0)) {
        /* bracket around the interval that is optimal at the run's mean rate */
        double t_est = ttt_fixed(m, p, fmin(W, tau_local(m, p, 0, W)));
        if (!isfinite(t_est)) t_est = W;
        double t0 = fmin(W, tau_local(m, p, 0, t_est));
        if (!isfinite(t0) || !(t0 > 0)) t0 = W;
        double lo = fmax(m->c.step, t0 / 8), hi = fmin(W, t0 * 8);
        tau = lo < hi ? golden(f_fixed, m, p, NULL, lo, hi) : fmin(W, lo);
    }
    tau = fmin(round_steps(m, tau), round_steps(m, W));
    FtSched s = {.n = 1, .t = {0}, .tau = {tau}};
    struct run_out o;
    if (run_model(m, p, &s, &o)) return -1;
    plan_fill(m, p, &o, out);
    out->interval = tau;
    out->sched = s;
    return 0;
}

int analytic_fail_plan(const FtFailModel *m, int policy, int r, double interval, FtPlan *out)
{
    memset(out, 0, sizeof *out);
    struct pol p;
    if (pol_init(m, policy, r, &p)) return -1;
    int rc = plan_fixed(m, &p, interval, out) || !isfinite(out->ttt) ? -1 : 0;
    pol_free(&p);
    return rc;
}

int analytic_plan(const FtCluster *c, int policy, int r, double interval, FtPlan *out)
{
    FtFailModel m;
    memset(out, 0, sizeof *out);
    if (analytic_fail_init(&m, c)) return -1;
    int rc = analytic_fail_plan(&m, policy, r, interval, out);
    analytic_fail_free(&m);
    return rc;
}

/* ---- a growing interval ---------------------------------------------------------------------- */

/* The schedule scale x tau_local on FT_SCHED_MAX wall-time segments of geometric widths up to
 * t_end: segment i covers [t_end 2^(i - n + 1), t_end 2^(i - n + 2)) (the first from 0), its
 * interval is the local optimum at the segment's rate. */
static void sched_build(const FtFailModel *m, const struct pol *p, double t_end, double scale, FtSched *s)
{
    const double W = m->c.steps * m->c.step;
    int n = FT_SCHED_MAX;
    s->n = n;
    for (int i = 0; i < n; i++) {
        double a = i == 0 ? 0 : t_end * ldexp(1.0, i - n + 1), b = t_end * ldexp(1.0, i - n + 2);
        if (i == n - 1) b = 4 * t_end;
        double tau = scale * tau_local(m, p, a, b);
        if (!isfinite(tau) || !(tau > 0)) tau = W;
        s->t[i] = a;
        s->tau[i] = fmin(round_steps(m, tau), round_steps(m, W));
    }
}

struct sched_ctx {
    double t_end;
};

static double f_sched(const FtFailModel *m, const struct pol *p, double scale, const void *ctx)
{
    const struct sched_ctx *x = ctx;
    FtSched s;
    sched_build(m, p, x->t_end, scale, &s);
    struct run_out o;
    return run_model(m, p, &s, &o) ? INFINITY : o.ttt;
}

int analytic_plan_sched(const FtFailModel *m, const FtPlan *fixed, FtPlan *out)
{
    struct pol p;
    memset(out, 0, sizeof *out);
    if (pol_init(m, fixed->policy, fixed->r, &p)) return -1;
    pol_correct(m, &p, 2 * fixed->ttt);
    struct sched_ctx x = {.t_end = fixed->ttt};
    double scale = golden(f_sched, m, &p, &x, 0.5, 2.0);
    FtSched s;
    sched_build(m, &p, x.t_end, scale, &s);
    struct run_out o;
    int rc = run_model(m, &p, &s, &o);
    if (!rc) plan_fill(m, &p, &o, out);
    pol_free(&p);
    if (rc) return -1;
    out->sched = s;
    out->interval = s.tau[s.n - 1];
    out->sched_scale = scale;
    return 0;
}

int analytic_optimize(const FtCluster *c, int r_max, FtPlan *best, FtPlan *all)
{
    FtFailModel m;
    if (analytic_fail_init(&m, c)) return -1;
    int rc = analytic_fail_optimize(&m, r_max, best, all);
    analytic_fail_free(&m);
    return rc;
}

int analytic_fail_optimize(const FtFailModel *m, int r_max, FtPlan *best, FtPlan *all)
{
    int N = m->N;
    if (N < 1) return -1;
    if (r_max > N) r_max = N;
    for (int p = 0; p < FT_POL_NPOL; p++) best[p].ttt = INFINITY, best[p].policy = p, best[p].r = 0;
    for (int p = 0; p < FT_POL_NPOL; p++) {
        for (int r = 1; r <= r_max; r++) {
            FtPlan pl;
            int rc = (p == FT_POL_CKPT && r > 1) ? -1 : analytic_fail_plan(m, p, r, 0, &pl);
            if (all) {
                if (rc) memset(&all[p * r_max + r - 1], 0, sizeof pl), all[p * r_max + r - 1].ttt = INFINITY;
                else all[p * r_max + r - 1] = pl;
            }
            if (!rc && pl.ttt < best[p].ttt) best[p] = pl;
        }
    }
    return best[FT_POL_CKPT].r ? 0 : -1;
}

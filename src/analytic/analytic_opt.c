/* analytic_opt.c: the joint optimizer: expected time-to-train of a cluster under each policy,
 * minimized over the redundancy r and the checkpoint interval (fixed, or growing over the run).
 *
 * Model (assumptions listed in analytic.h). A policy at r gives, from the ring / replication
 * counts, the distribution of an epoch (restart to wipe-out) against the time since its start
 * and the mean throughput of an epoch still up at that time (analytic_epoch.c: uniformized
 * stages, the failure law's rate and the simulator's replacement rule). Work is checkpointed
 * after every tau seconds of it (C seconds per checkpoint, none after the last piece), and a
 * wipe-out loses the piece in progress and costs D = restart + detection latency.
 *
 * The piece chain. Let u_0 = 0 and u_{j+1} = the time since the restart at which a piece started
 * at u_j is done (its work at the epoch's throughput, then C). A piece starts at u_j ("state
 * j") or, after a wipe-out, at u_0; the next piece starts in state j + 1 when this one needed no
 * retry, else in state 1. With S(u) = P(epoch up-time > u), IS = int S:
 *   p_j = S(u_{j+1}) / S(u_j)                       (no wipe-out during the piece)
 *   E_0' = (IS(u_1) + (1 - p_0) D) / p_0            (a piece from the start of an epoch)
 *   E_j = (IS(u_{j+1}) - IS(u_j)) / S(u_j) + (1 - p_j)(D + E_0')
 * States j >= 1 recur with weights S(u_j) (a renewal at each state 1), so a piece takes
 * T = sum_{j>=1} S(u_j) E_j / sum_{j>=1} S(u_j) on average, and the run's expected time is the
 * sum over its pieces (linearity), T each, the last one without its checkpoint, plus the start's
 * bias (the first pieces begin fresh epochs: sum_i (q_i . E - T) over the chain from state 0).
 * With a constant hazard (checkpoint-only, exponential) S = e^(-lam u), p_j = e^(-lam (tau + C))
 * and T = (e^(lam (tau + C)) - 1)(1/lam + D): the exact model of analytic_ckpt.c. With r > 1 the
 * epoch's hazard grows with its age (no wipe-out before r failures) and T uses it, rather than a
 * Poisson process of wipe-outs.
 *
 * Over the run. The law enters through lam_g(t) = gpus_per_replica * m(t), m the renewal density
 * of one GPU slot (analytic_renewal.c). With the exponential law it is constant and the sum above
 * is the whole run. With Weibull the epoch is tabulated at NCORR wall times t_i (log-spaced up to
 * twice the run's length) and the run is integrated in wall time: pieces are taken in batches
 * whose span is at most BATCH_FRAC of the elapsed time, each at T interpolated in log t at the
 * batch's midpoint (predictor-corrector). Quasi-static: each piece sees the steady state of its
 * own rate, which holds when the rate changes little over an epoch plus a restart; the first
 * minutes of a run of new GPUs break it, at a cost of a few pieces out of thousands. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define EXACT_MAX_OPS 6e7
#define MC_TRIALS 600
#define BATCH_FRAC 0.004
#define RENEWAL_CELLS 4096
#define NCORR 20
#define JMAX 200000 /* states of the piece chain */

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

struct pol {
    int policy, r;
    double thr;      /* time-averaged throughput of an epoch (rate-free) */
    double up_units; /* mean epoch up-time x lam_g (rate-free) */
    double mu, depth;
    int exact;
    FtEpochCurve curve;
    int nw;           /* epochs in wall time: one (memoryless law) or NCORR at times e^lt[i] */
    double lt[NCORR];
    FtEpochWall wall[NCORR];
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

static void pol_walls_free(struct pol *p)
{
    for (int i = 0; i < p->nw; i++) epoch_wall_free(&p->wall[i]);
    p->nw = 0;
}

static void pol_free(struct pol *p)
{
    pol_walls_free(p);
    epoch_curve_free(&p->curve);
}

static int law_memoryless(const FtFailModel *m)
{
    return m->gpu.law != FT_LAW_WEIBULL || m->gpu.shape == 1.0;
}

/* The epochs in wall time over a run of about t_end (one when the rate is constant). */
static int pol_walls(const FtFailModel *m, struct pol *p, double t_end)
{
    pol_walls_free(p);
    const double D = m->c.restart + m->c.latency;
    int n = law_memoryless(m) ? 1 : NCORR;
    if (!(t_end > 0) || !isfinite(t_end)) t_end = m->c.steps * m->c.step;
    for (int i = 0; i < n; i++) {
        double t = t_end * ldexp(1.0, i - n + 1);
        double lam = n == 1 ? analytic_group_rate(m, 0, 1) : analytic_group_rate(m, t, t * 1.05);
        if (epoch_wall_init(&p->wall[i], &p->curve, &m->gpu, lam, D)) {
            pol_walls_free(p);
            return -1;
        }
        p->lt[i] = log(t);
        p->nw = i + 1;
    }
    return 0;
}

/* ---- the piece chain on one epoch ------------------------------------------------------------- */

struct chain {
    double T;      /* stationary expected time of a piece (tau of work + C) */
    double T_last; /* the same for the last piece (x_last of work, no checkpoint) */
    double fails;  /* expected wipe-outs per piece */
    double bias;   /* sum over the pieces of a run started fresh of (expected time - T) */
};

/* the time since the restart at which a piece started at u is done */
static double piece_end(const FtEpochWall *w, double u, double x, double c)
{
    return epoch_wall_inv(w, w->W, epoch_wall_at(w, w->W, u) + x) + c;
}

/* One piece from state u: no-retry probability, expected time of the attempt. */
static void attempt(const FtEpochWall *w, double u, double x, double c, double *p, double *att, double *S0)
{
    double S = epoch_wall_at(w, w->S, u), v = piece_end(w, u, x, c);
    *S0 = S;
    if (!(S > 0)) {
        *p = 0, *att = 0;
        return;
    }
    *p = epoch_wall_at(w, w->S, v) / S;
    *att = (epoch_wall_at(w, w->IS, v) - epoch_wall_at(w, w->IS, u)) / S;
}

static int chain_eval(const FtEpochWall *w, double x, double c, double D, double x_last, int want_bias,
                      struct chain *o)
{
    memset(o, 0, sizeof *o);
    double p0, a0, s0, pl0, al0;
    attempt(w, 0, x, c, &p0, &a0, &s0);
    attempt(w, 0, x_last, 0, &pl0, &al0, &s0);
    if (!(p0 > 0) || !(pl0 > 0)) {
        o->T = o->T_last = INFINITY;
        return -1;
    }
    double E0 = (a0 + (1 - p0) * D) / p0, El0 = (al0 + (1 - pl0) * D) / pl0;
    long double sw = 0, sT = 0, sL = 0, sF = 0;
    double u = piece_end(w, 0, x, c), *pj = NULL, *Ej = NULL;
    int cap = 0, J = 0;
    if (want_bias) {
        cap = 1024;
        pj = malloc((size_t)cap * sizeof *pj), Ej = malloc((size_t)cap * sizeof *Ej);
        if (!pj || !Ej) want_bias = 0;
        else pj[0] = p0, Ej[0] = a0 + (1 - p0) * (D + E0), J = 1;
    }
    for (int j = 1; j < JMAX; j++) {
        double p, a, S, pl, al;
        attempt(w, u, x, c, &p, &a, &S);
        if (!(S > 1e-16)) break;
        attempt(w, u, x_last, 0, &pl, &al, &S);
        double E = a + (1 - p) * (D + E0);
        sw += S, sT += S * E, sF += S * (1 - p) / p0;
        sL += S * (al + (1 - pl) * (D + El0));
        if (want_bias) {
            if (J == cap) {
                cap *= 2;
                double *a2 = realloc(pj, (size_t)cap * sizeof *pj), *b2 = realloc(Ej, (size_t)cap * sizeof *Ej);
                if (a2) pj = a2;
                if (b2) Ej = b2;
                if (!a2 || !b2) want_bias = 0;
            }
            if (want_bias) pj[J] = p, Ej[J] = E, J++;
        }
        u = piece_end(w, u, x, c);
        if (!isfinite(u)) break;
    }
    if (!(sw > 0)) { /* no piece survives a full state: a piece never completes after the first */
        free(pj), free(Ej);
        o->T = o->T_last = INFINITY;
        return -1;
    }
    o->T = (double)(sT / sw), o->T_last = (double)(sL / sw), o->fails = (double)(sF / sw);
    if (want_bias) { /* the chain from state 0: q_{i+1}(j+1) = q_i(j) p_j, the rest to state 1 */
        double *q = calloc((size_t)J + 1, sizeof *q), *q2 = calloc((size_t)J + 1, sizeof *q2);
        if (q && q2) {
            q[0] = 1;
            long double b = 0;
            for (int i = 0; i < 50 * J + 1000; i++) {
                long double cost = 0, reset = 0;
                for (int j = 0; j < J; j++) cost += q[j] * Ej[j];
                b += cost - o->T;
                if (fabsl(cost - o->T) < 1e-13 * o->T && i > J) break;
                memset(q2, 0, ((size_t)J + 1) * sizeof *q2);
                for (int j = 0; j < J; j++) {
                    double stay = j == 0 ? 0 : q[j] * pj[j];
                    if (j + 1 < J) q2[j + 1] += stay;
                    reset += q[j] - stay;
                }
                q2[1] += (double)reset;
                double *t = q;
                q = q2, q2 = t;
            }
            o->bias = (double)b;
        }
        free(q), free(q2);
    }
    free(pj), free(Ej);
    return 0;
}

/* ---- the run ---------------------------------------------------------------------------------- */

struct run_out {
    double ttt, wipeouts, pieces;
};

static double sched_tau(const FtSched *s, double t, int *i)
{
    while (*i + 1 < s->n && t >= s->t[*i + 1]) (*i)++;
    return s->tau[*i];
}

/* chains of every wall at one interval (a small cache: schedules use few intervals) */
struct tau_cache {
    int n;
    double tau[FT_SCHED_MAX];
    struct chain ch[FT_SCHED_MAX][NCORR];
};

static const struct chain *chains_for(const FtFailModel *m, const struct pol *p, struct tau_cache *tc,
                                      double tau)
{
    for (int k = 0; k < tc->n; k++)
        if (tc->tau[k] == tau) return tc->ch[k];
    if (tc->n == FT_SCHED_MAX) tc->n = 0;
    int k = tc->n++;
    tc->tau[k] = tau;
    const double D = m->c.restart + m->c.latency;
    for (int i = 0; i < p->nw; i++)
        if (chain_eval(&p->wall[i], tau, m->c.ckpt, D, tau, 0, &tc->ch[k][i])) {
            tc->n--;
            return NULL;
        }
    return tc->ch[k];
}

/* a chain quantity at wall time t: interpolated in log t between the walls */
static void chain_at(const struct pol *p, const struct chain *ch, double t, struct chain *o)
{
    if (p->nw == 1) {
        *o = ch[0];
        return;
    }
    double x = t > 0 ? log(t) : -INFINITY;
    int i = 0;
    if (x <= p->lt[0]) {
        *o = ch[0];
        return;
    }
    if (x >= p->lt[p->nw - 1]) {
        *o = ch[p->nw - 1];
        return;
    }
    while (x > p->lt[i + 1]) i++;
    double f = (x - p->lt[i]) / (p->lt[i + 1] - p->lt[i]);
    o->T = (1 - f) * ch[i].T + f * ch[i + 1].T;
    o->T_last = (1 - f) * ch[i].T_last + f * ch[i + 1].T_last;
    o->fails = (1 - f) * ch[i].fails + f * ch[i + 1].fails;
}

/* the wall nearest to wall time t */
static const FtEpochWall *wall_near(const struct pol *p, double t)
{
    int i = 0;
    double x = t > 0 ? log(t) : -INFINITY;
    while (i + 1 < p->nw && fabs(p->lt[i + 1] - x) < fabs(p->lt[i] - x)) i++;
    return &p->wall[i];
}

static int run_model(const FtFailModel *m, const struct pol *p, const FtSched *s, double bias,
                     struct run_out *o)
{
    const double W = m->c.steps * m->c.step;
    double t = 0, w = 0, nw = 0, npieces = 0;
    int si = 0;
    struct tau_cache *tc = malloc(sizeof *tc);
    if (!tc) return -1;
    tc->n = 0;
    memset(o, 0, sizeof *o);
    int rc = -1;
    for (;;) {
        double tau = sched_tau(s, t, &si), rem = W - w;
        if (!(tau > 0)) goto out;
        double nfull = ceil(rem / tau - 1e-12) - 1; /* full pieces before the last */
        double x_last = rem - nfull * tau;
        if (nfull < 1) { /* the last piece: no checkpoint after it */
            struct chain cl;
            if (chain_eval(wall_near(p, t), tau, m->c.ckpt, m->c.restart + m->c.latency, x_last, 0, &cl))
                goto out;
            t += cl.T_last, npieces++;
            nw += cl.fails * x_last / tau; /* about */
            break;
        }
        const struct chain *ch = chains_for(m, p, tc, tau);
        if (!ch) goto out;
        struct chain c1, c2;
        chain_at(p, ch, t, &c1);
        double nb = p->nw == 1 ? nfull : fmin(nfull, fmax(1, floor(BATCH_FRAC * t / c1.T)));
        if (si + 1 < s->n) nb = fmin(nb, fmax(1, ceil((s->t[si + 1] - t) / c1.T)));
        chain_at(p, ch, t + 0.5 * nb * c1.T, &c2);
        if (!isfinite(c2.T) || t > 1e300) goto out;
        t += nb * c2.T, w += nb * tau, npieces += nb;
        nw += nb * c2.fails;
    }
    o->ttt = t + bias, o->wipeouts = nw, o->pieces = npieces;
    rc = isfinite(o->ttt) ? 0 : -1;
out:
    free(tc);
    return rc;
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
    return run_model(m, p, &s, 0, &o) ? INFINITY : o.ttt;
}

/* golden section on log(x) of f over [lo, hi] */
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

/* the interval (work seconds) that is optimal for the wipe-outs around wall time t, taken as
 * Poisson at the epoch's mean rate (a starting point and the schedule's shape) */
static double tau_local(const FtFailModel *m, const struct pol *p, double t)
{
    const FtEpochWall *w = wall_near(p, t);
    double thr = w->IA[w->n - 1] / w->up;
    return thr * analytic_ckpt_opt(m->c.ckpt, 1.0 / w->up);
}

/* the start's bias at the interval tau, from the wall of the first cycles */
static double start_bias(const FtFailModel *m, const struct pol *p, double tau)
{
    const double D = m->c.restart + m->c.latency;
    const FtEpochWall *w = wall_near(p, 3 * (p->wall[0].up + D));
    struct chain ch;
    if (chain_eval(w, tau, m->c.ckpt, D, tau, 1, &ch)) return 0;
    return ch.bias;
}

static int plan_fixed(const FtFailModel *m, struct pol *p, double interval, FtPlan *out)
{
    const double W = m->c.steps * m->c.step;
    double tau = interval;
    /* the epochs over a generous span of the run: twice a first estimate of its length */
    if (pol_walls(m, p, 4 * W)) return -1;
    double t_guess = ttt_fixed(m, p, tau > 0 ? tau : fmin(W, tau_local(m, p, W)));
    if (pol_walls(m, p, 2 * (isfinite(t_guess) ? t_guess : W))) return -1;
    if (!(tau > 0)) {
        double t0 = fmin(W, tau_local(m, p, t_guess));
        if (!isfinite(t0) || !(t0 > 0)) t0 = W;
        double lo = fmax(m->c.step, t0 / 8), hi = fmin(W, t0 * 8);
        tau = lo < hi ? golden(f_fixed, m, p, NULL, lo, hi) : fmin(W, lo);
    }
    tau = fmin(round_steps(m, tau), round_steps(m, W));
    FtSched s = {.n = 1, .t = {0}, .tau = {tau}};
    struct run_out o;
    if (run_model(m, p, &s, start_bias(m, p, tau), &o)) return -1;
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
 * interval is the local optimum at the segment's geometric middle. */
static void sched_build(const FtFailModel *m, const struct pol *p, double t_end, double scale, FtSched *s)
{
    const double W = m->c.steps * m->c.step;
    int n = FT_SCHED_MAX;
    s->n = n;
    for (int i = 0; i < n; i++) {
        double a = i == 0 ? 0 : t_end * ldexp(1.0, i - n + 1);
        double tau = scale * tau_local(m, p, t_end * ldexp(1.0, i - n + 1) * M_SQRT2);
        if (!isfinite(tau) || !(tau > 0)) tau = W;
        s->t[i] = a;
        s->tau[i] = fmin(round_steps(m, tau), round_steps(m, W));
    }
}

struct sched_ctx {
    double t_end, bias;
};

static double f_sched(const FtFailModel *m, const struct pol *p, double scale, const void *ctx)
{
    const struct sched_ctx *x = ctx;
    FtSched s;
    sched_build(m, p, x->t_end, scale, &s);
    struct run_out o;
    return run_model(m, p, &s, x->bias, &o) ? INFINITY : o.ttt;
}

int analytic_plan_sched(const FtFailModel *m, const FtPlan *fixed, FtPlan *out)
{
    struct pol p;
    memset(out, 0, sizeof *out);
    if (pol_init(m, fixed->policy, fixed->r, &p)) return -1;
    int rc = -1;
    if (pol_walls(m, &p, 2 * fixed->ttt)) goto out;
    struct sched_ctx x = {.t_end = fixed->ttt};
    double scale = golden(f_sched, m, &p, &x, 0.5, 2.0);
    FtSched s;
    sched_build(m, &p, x.t_end, scale, &s);
    x.bias = start_bias(m, &p, s.tau[0]);
    struct run_out o;
    if (run_model(m, &p, &s, x.bias, &o)) goto out;
    plan_fill(m, &p, &o, out);
    out->sched = s;
    out->interval = s.tau[s.n - 1];
    out->sched_scale = scale;
    rc = 0;
out:
    pol_free(&p);
    return rc;
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

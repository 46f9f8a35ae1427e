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
 * States j >= 1 recur with weights S(u_j) (a renewal at each state 1), so in the long run a
 * piece takes T = sum_{j>=1} S(u_j) E_j / sum_{j>=1} S(u_j) on average. The run's expected time
 * is the sum over its pieces (linearity): from the start, the distribution q_i of piece i's state
 * is followed exactly (q_1 = state 0; piece i costs q_i . E) until it is within 1e-3 (total
 * variation) of the stationary weights (or has spent its budget: TRANSIENT_WORK), then every
 * piece costs T; the last piece has no checkpoint (its own E from the states).
 * With a constant hazard (checkpoint-only, exponential) S = e^(-lam u), p_j = e^(-lam (tau + C))
 * and T = (e^(lam (tau + C)) - 1)(1/lam + D): the exact model of analytic_ckpt.c. With r > 1 the
 * epoch's hazard grows with its age (no wipe-out before r failures) and T uses it, rather than a
 * Poisson process of wipe-outs.
 *
 * Over the run. The law enters through lam_g(t) = gpus_per_replica * m(t), m the renewal density
 * of one GPU slot (analytic_renewal.c). With the exponential law it is constant and the chain
 * above is the whole run. With Weibull the epoch is tabulated at NCORR wall times t_i a factor
 * of 2 apart (up to the model's t_span) and the chain's quantities are interpolated in log t: a
 * piece of the start is evaluated at the middle of its own span (E = cost(t + E/2), solved by
 * bisection while the rate changes within a piece, as in the first minutes of new GPUs), later
 * pieces go in batches whose span is at most BATCH_FRAC of the elapsed time, at T interpolated
 * at the batch's middle. Quasi-static: each piece sees the steady state of its own rate. Between
 * two walls a state's survival is interpolated and its conditional times (an attempt's, a
 * piece's) are the two walls' weighted by their survival there (mix_state). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define EXACT_MAX_OPS 6e7
#define MC_TRIALS 600
#define BATCH_FRAC 0.004
#define RENEWAL_CELLS 4096
#define NCORR 24
#define JMAX 20000 /* states of the piece chain */
/* The transient may stop short of settling once it has taken TRANSIENT_WORK state updates and
 * the run has seen TRANSIENT_WIPES wipe-outs: by then its start is forgotten but for the lag of
 * the state distribution behind a drifting failure rate (L1 0.004 on the 600k-GPU cluster, where
 * the whole transient weighs 0.05% of the run or less), and an epoch of thousands of one-step
 * pieces would take minutes to settle. A run of a few epochs keeps it to the end (stopping by
 * work alone moved a 10-day run of 1.3 wipe-outs by 4%). */
#define TRANSIENT_WORK 4e7
#define TRANSIENT_WIPES 4

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
    tau = !isfinite(tau) ? W : tau > 0 ? tau : c->step; /* 0: free checkpoints, every step */
    double est = analytic_ckpt_time(W, tau, c->ckpt, lam, c->restart + c->latency);
    if (!isfinite(est) || est > 1e30) est = 1e30;
    m->t_span = fmin(2 * fmax(est, W), 1e3 * W); /* the plans' epochs are tabulated up to here */
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

/* The epochs in wall time at NCORR times up to t_span (log-spaced by 2: from a fraction of a
 * cycle to beyond the longest plan's run; one when the rate is constant). */
static int pol_walls(const FtFailModel *m, struct pol *p)
{
    pol_walls_free(p);
    const double D = m->c.restart + m->c.latency;
    int n = law_memoryless(m) ? 1 : NCORR;
    double t_end = m->t_span;
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

/* The chain of one wall at one interval: states j = 0..J-1 (a piece starting at u_j since the
 * restart), no-retry probabilities p_j, expected times E_j (retries included), stationary weights
 * S(u_j) of the states j >= 1, and the stationary mean time and wipe-outs per piece. */
struct chain {
    int J, cut;
    int longc; /* more states than JMAX: the first JMAX kept, T and fails from all of them */
    double *u, *p, *E, *S, *A; /* A: the attempt's expected time, E = A + (1 - p)(D + E0) */
    double E0;  /* E_0': a piece from the start of an epoch, retries included */
    double T, fails;
};

static void chain_free(struct chain *c)
{
    free(c->u), free(c->p), free(c->E), free(c->S), free(c->A);
    memset(c, 0, sizeof *c);
}

/* the time since the restart at which a piece started at u is done */
static double piece_end(const FtEpochWall *w, double u, double x, double c)
{
    return epoch_wall_inv(w, w->W, epoch_wall_at(w, w->W, u) + x) + c;
}

/* One piece from state u: no-retry probability, expected time of the attempt; S(u) in *S0. */
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

static int chain_push(struct chain *c, int *cap, double u, double p, double E, double S, double att)
{
    if (c->J == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        double **arr[5] = {&c->u, &c->p, &c->E, &c->A, &c->S};
        for (int k = 0; k < 5; k++) {
            double *x = realloc(*arr[k], (size_t)nc * sizeof *x);
            if (!x) return -1;
            *arr[k] = x;
        }
        *cap = nc;
    }
    c->u[c->J] = u, c->p[c->J] = p, c->E[c->J] = E, c->S[c->J] = S, c->A[c->J] = att, c->J++;
    return 0;
}

/* jcap: the run's pieces + 1; states past it are never visited, and a chain cut there (cut = 1)
 * has no stationary regime for the run to reach. A chain with more states than JMAX (an epoch of
 * tens of thousands of pieces: checkpoints that cost next to nothing) keeps the first JMAX and
 * sums T and fails over all of them (longc = 1); the run takes it stationary from the start
 * (a run of about one epoch, whose start matters, comes out a little slow: 1000 x 8 GPUs for 10
 * days, SPARe r = 20, 1-second checkpoints: 28.2 days at 2 steps against 26.8 at 4; keeping the
 * last state for the states beyond it instead understated the wipe-outs, whose hazard grows
 * with the epoch's age, by far more). */
static int chain_build(const FtEpochWall *w, double x, double c, double D, int jcap, struct chain *o)
{
    memset(o, 0, sizeof *o);
    int cap = 0;
    double p0, a0, s0;
    attempt(w, 0, x, c, &p0, &a0, &s0);
    if (!(p0 > 0)) { /* a piece never completes at this wall's rate: infinite time */
        if (chain_push(o, &cap, 0, 0, INFINITY, 1, 0) || chain_push(o, &cap, 0, 0, INFINITY, 1e-300, 0)) goto fail;
        o->E0 = o->T = INFINITY, o->fails = INFINITY;
        return 0;
    }
    o->E0 = (a0 + (1 - p0) * D) / p0;
    if (chain_push(o, &cap, 0, p0, a0 + (1 - p0) * (D + o->E0), 1, a0)) goto fail;
    long double sw = 0, sT = 0, sF = 0;
    double u = piece_end(w, 0, x, c);
    for (int j = 1; isfinite(u); j++) {
        if (j >= jcap) {
            o->cut = 1;
            break;
        }
        double p, a, S;
        attempt(w, u, x, c, &p, &a, &S);
        if (!(S > 1e-16) && j > 1) break;
        if (!(S > 1e-300)) S = 1e-300, p = 0, a = 0; /* state 1 is always there: a retry leads to it */
        double E = a + (1 - p) * (D + o->E0);
        if (j >= JMAX) o->longc = 1;
        else if (chain_push(o, &cap, u, p, E, S, a)) goto fail;
        sw += S, sT += S * E, sF += S * (1 - p) / p0;
        u = piece_end(w, u, x, c);
    }
    if (!(sw > 0)) goto fail; /* no piece gets past the first state: the interval is too long */
    o->T = (double)(sT / sw), o->fails = (double)(sF / sw);
    return 0;
fail:
    chain_free(o);
    return -1;
}

/* The last piece (x of work, no checkpoint) from each state of c: expected time into El[j] and
 * expected wipe-outs into Fl[j] (the attempt's, then (1 - p_0) / p_0 for the retries from the
 * start of an epoch). */
static int chain_last(const FtEpochWall *w, const struct chain *c, double x, double D, double *El,
                      double *Fl)
{
    double p0, a0, s0;
    attempt(w, 0, x, 0, &p0, &a0, &s0);
    if (!(p0 > 0)) return -1;
    double E0 = (a0 + (1 - p0) * D) / p0;
    for (int j = 0; j < c->J; j++) {
        double p, a, S;
        attempt(w, c->u[j], x, 0, &p, &a, &S);
        El[j] = S > 0 ? a + (1 - p) * (D + E0) : E0;
        Fl[j] = S > 0 ? (1 - p) / p0 : (1 - p0) / p0;
    }
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

/* the chains of every wall at the intervals a run uses (a schedule uses few) */
struct tau_cache {
    int n, nw, jcap;
    double tau[FT_SCHED_MAX];
    struct chain ch[FT_SCHED_MAX][NCORR];
};

static void cache_free(struct tau_cache *tc)
{
    for (int k = 0; k < tc->n; k++)
        for (int i = 0; i < tc->nw; i++) chain_free(&tc->ch[k][i]);
    tc->n = 0;
}

static const struct chain *chains_for(const FtFailModel *m, const struct pol *p, struct tau_cache *tc,
                                      double tau)
{
    for (int k = 0; k < tc->n; k++)
        if (tc->tau[k] == tau) return tc->ch[k];
    if (tc->n == FT_SCHED_MAX) return NULL;
    int k = tc->n;
    const double D = m->c.restart + m->c.latency;
    for (int i = 0; i < p->nw; i++)
        if (chain_build(&p->wall[i], tau, m->c.ckpt, D, tc->jcap, &tc->ch[k][i])) {
            for (int j = 0; j < i; j++) chain_free(&tc->ch[k][j]);
            return NULL;
        }
    tc->tau[k] = tau, tc->n++;
    return tc->ch[k];
}

/* the bracketing walls of wall time t and the weight of the upper one */
static int wall_pair(const struct pol *p, double t, double *f)
{
    *f = 0;
    if (p->nw == 1) return 0;
    double x = t > 0 ? log(t) : -INFINITY;
    if (x <= p->lt[0]) return 0;
    if (x >= p->lt[p->nw - 1]) {
        *f = 1;
        return p->nw - 2;
    }
    int i = 0;
    while (x > p->lt[i + 1]) i++;
    *f = (x - p->lt[i]) / (p->lt[i + 1] - p->lt[i]);
    return i;
}

/* the wall nearest to wall time t */
static const FtEpochWall *wall_near(const struct pol *p, double t)
{
    double f;
    int i = wall_pair(p, t, &f);
    return &p->wall[p->nw == 1 ? 0 : (f < 0.5 ? i : i + 1)];
}

/* a state's value between two walls; past a chain's last state (mass below 1e-16 of it) its
 * last value, or `beyond` for the stationary weights */
static double lerp_state(const struct chain *a, const struct chain *b, const double *ya, const double *yb,
                         double f, int j, double beyond)
{
    double va = j < a->J ? ya[j] : isnan(beyond) ? ya[a->J - 1] : beyond;
    double vb = j < b->J ? yb[j] : isnan(beyond) ? yb[b->J - 1] : beyond;
    if (f == 0) return va;
    if (f == 1) return vb;
    return (1 - f) * va + f * vb;
}

/* A state's conditional quantity (an attempt's time, a piece's expected time) between two walls:
 * the walls weighted by their survival at the state, as for the two walls' mixture, whose survival
 * is the interpolated S. Where one wall's chain has ended (its survival below 1e-16) the other's
 * value alone; the last value of the ended chain, taken as it stands, is an attempt from a state
 * that wall never reaches (its time a ratio of two numbers near 0) and made pieces of a long
 * epoch (thousands of one-step pieces) cost almost nothing. */
static double mix_state(const struct chain *a, const struct chain *b, const double *ya, const double *yb,
                        double f, int j)
{
    double wa = j < a->J ? (1 - f) * a->S[j] : 0, wb = j < b->J ? f * b->S[j] : 0;
    if (!(wa + wb > 0)) return lerp_state(a, b, ya, yb, f, j, NAN);
    return ((wa > 0 ? wa * ya[j] : 0) + (wb > 0 ? wb * yb[j] : 0)) / (wa + wb);
}

/* sum_j q_j E_j at wall time t (walls interpolated) */
static double q_cost(const struct pol *p, const struct chain *ch, const double *q, int J, double t)
{
    double f;
    int i = wall_pair(p, t, &f);
    const struct chain *a = &ch[i], *b = &ch[p->nw == 1 ? 0 : i + 1];
    long double e = 0;
    for (int j = 0; j < J; j++)
        if (q[j] > 0) e += q[j] * mix_state(a, b, a->E, b->E, f, j);
    return (double)e;
}

/* The time at which a piece starting at t from the states q is evaluated: its span's middle,
 * E = cost(t + E/2) solved for E (by bisection where the rate changes within the piece, as at
 * the start of a run of new GPUs); returns t + E/2. */
static double piece_time(const struct pol *p, const struct chain *ch, const double *q, int J, double t)
{
    if (p->nw == 1) return t;
    double E = q_cost(p, ch, q, J, t), E2 = E;
    for (int it = 0; it < 4 && isfinite(E); it++) {
        E2 = q_cost(p, ch, q, J, t + 0.5 * E);
        if (fabs(E2 - E) < 1e-3 * E) return t + 0.5 * E2;
        E = E2;
    }
    double lo = 0, hi = isfinite(E2) && E2 > 0 ? E2 : 1;
    for (int k = 0; k < 200 && !(hi - q_cost(p, ch, q, J, t + 0.5 * hi) > 0); k++) hi *= 2;
    for (int k = 0; k < 60; k++) {
        double mid = 0.5 * (lo + hi);
        if (mid - q_cost(p, ch, q, J, t + 0.5 * mid) > 0) hi = mid;
        else lo = mid;
    }
    return t + 0.5 * hi;
}

/* The run from its start, piece by piece while the state distribution q (over the chain's
 * states, interpolated between the two walls around the current time) settles, then in batches
 * at the stationary time per piece. */
static int run_model(const FtFailModel *m, const struct pol *p, const FtSched *s, struct run_out *o)
{
    const double W = m->c.steps * m->c.step, D = m->c.restart + m->c.latency;
    double t = 0, w = 0, nw = 0, npieces = 0;
    int si = 0, rc = -1, transient = 1, J = 0, jq = 1, ntr = 0;
    double e_prev = INFINITY, trwork = 0; /* q[j] = 0 for j >= jq; trwork: states updated */
    struct tau_cache *tc = calloc(1, sizeof *tc);
    double *q = NULL, *q2 = NULL, *El = NULL, *El2 = NULL, *Pi = NULL, *Ei = NULL, *Si = NULL;
    double cf = -1, zs = 0;
    int ci = -1, cJ = 0;
    const struct chain *cch = NULL;
    if (!tc) return -1;
    tc->nw = p->nw;
    /* the most pieces the run can have (the smallest interval it uses) */
    double tmin = INFINITY;
    for (int k = 0; k < s->n; k++) tmin = fmin(tmin, s->tau[k]);
    tc->jcap = (int)fmin(INT_MAX, ceil(W / tmin) + 2);
    memset(o, 0, sizeof *o);
    for (;;) {
        double tau = sched_tau(s, t, &si), rem = W - w;
        if (!(tau > 0)) goto out;
        const struct chain *ch = chains_for(m, p, tc, tau);
        if (!ch) goto out;
        double f;
        int i = wall_pair(p, t, &f), i2 = p->nw == 1 ? 0 : i + 1;
        const struct chain *a = &ch[i], *b = &ch[i2];
        int Jn = a->J > b->J ? a->J : b->J;
        if (Jn > J) { /* state vectors grow with the chains */
            double *nq = realloc(q, (size_t)(Jn + 1) * sizeof *q), *nq2 = realloc(q2, (size_t)(Jn + 1) * sizeof *q2);
            if (nq) q = nq;
            if (nq2) q2 = nq2;
            if (!nq || !nq2) goto out;
            for (int j = J; j <= Jn; j++) q[j] = (j == 0 && J == 0) ? 1 : 0;
            J = Jn;
        }
        /* stationary from here on: a chain too long to keep, or the transient's budget spent (an
         * epoch of thousands of pieces: one-step checkpoints) */
        if (transient && (a->longc || b->longc || (trwork > TRANSIENT_WORK && nw > TRANSIENT_WIPES)))
            transient = 0;
        int last = rem <= tau * (1 + 1e-12);
        if (last) { /* no checkpoint after it: from the current state distribution */
            /* El, El2: times from the states of a, b; their second halves the wipe-outs */
            double *ne = realloc(El, 2 * (size_t)J * sizeof *El),
                   *ne2 = realloc(El2, 2 * (size_t)J * sizeof *El2);
            if (ne) El = ne;
            if (ne2) El2 = ne2;
            if (!ne || !ne2 || chain_last(&p->wall[i], a, rem, D, El, El + J) ||
                chain_last(&p->wall[i2], b, rem, D, El2, El2 + J))
                goto out;
            long double e = 0, fl = 0, z = 0;
            for (int j = transient ? 0 : 1; j < J && (!transient || j < jq); j++) {
                double wj = transient ? q[j] : lerp_state(a, b, a->S, b->S, f, j, 0);
                e += wj * mix_state(a, b, El, El2, f, j), z += wj;
                fl += wj * mix_state(a, b, El + J, El2 + J, f, j);
            }
            if (!(z > 0)) goto out;
            t += (double)(e / z), nw += (double)(fl / z), npieces++;
            break;
        }
        if (transient) { /* one piece from q, at the rate of its own span */
            /* the time the piece is evaluated at: its middle (solved only while the rate
             * changes within a piece, early in the run) */
            double tm = t > 200 * e_prev ? t + 0.5 * e_prev : piece_time(p, ch, q, jq < J ? jq : J, t);
            if (!isfinite(tm)) goto out;
            i = wall_pair(p, tm, &f), i2 = p->nw == 1 ? 0 : i + 1;
            a = &ch[i], b = &ch[i2];
            /* the states between the two walls (refreshed when the time has moved on) */
            if (i != ci || fabs(f - cf) > 0.02 || J != cJ || ch != cch) {
                double *n1 = realloc(Pi, (size_t)J * sizeof *Pi), *n2 = realloc(Ei, (size_t)J * sizeof *Ei),
                       *n3 = realloc(Si, (size_t)J * sizeof *Si);
                if (n1) Pi = n1;
                if (n2) Ei = n2;
                if (n3) Si = n3;
                if (!n1 || !n2 || !n3) goto out;
                /* between two walls: the survival S(u_j) and the attempt times interpolated, the
                 * no-retry probabilities from S (interpolating them would shorten the epoch) */
                zs = 0;
                /* E0 of the two walls' mixture: its first piece's success probability and
                 * attempt time interpolated (as S is), not E0 itself, which is 1/p0 and spans
                 * orders of magnitude next to a wall where pieces (almost) never complete (a
                 * linear E0 made one piece of Weibull-0.6 GPUs' first hours 12 years) */
                double p0 = (1 - f) * a->p[0] + f * b->p[0], a0 = (1 - f) * a->A[0] + f * b->A[0];
                double E0 = p0 > 0 ? (a0 + (1 - p0) * D) / p0 : INFINITY;
                if (f == 0) E0 = a->E0;
                if (f == 1) E0 = b->E0;
                for (int j = 0; j < J; j++) {
                    Si[j] = lerp_state(a, b, a->S, b->S, f, j, 0);
                    if (j > 0) zs += Si[j];
                }
                for (int j = 0; j < J; j++) {
                    double Ai = mix_state(a, b, a->A, b->A, f, j);
                    Pi[j] = j + 1 < J && Si[j] > 0 ? Si[j + 1] / Si[j] : 0;
                    if (!(Pi[j] <= 1)) Pi[j] = Pi[j] > 1 ? 1 : 0;
                    Ei[j] = Ai + (1 - Pi[j]) * (D + E0);
                }
                ci = i, cf = f, cJ = J, cch = ch;
            }
            long double e = 0, fl = 0, dist = 1, reset = 0;
            int jn = jq < J ? jq : J;
            trwork += jn;
            for (int j = 0; j < jn; j++)
                if (q[j] > 0) e += q[j] * Ei[j], fl += q[j] * (1 - Pi[j]) / Pi[0];
            /* the next piece's state: j + 1 without a retry, else 1 */
            memset(q2, 0, (size_t)(J + 1) * sizeof *q2);
            for (int j = 0; j < jn; j++) {
                double stay = j == 0 ? 0 : q[j] * Pi[j];
                if (j + 1 < J) q2[j + 1] = stay;
                else reset += stay; /* beyond the chain: negligible mass */
                reset += q[j] - stay;
            }
            q2[1] += (double)reset;
            jq = jn + 1;
            if (ntr % 8 == 7) {
                dist = 0;
                for (int j = 1; j < J; j++) dist += fabsl(q2[j] - Si[j] / zs);
            }
            double *tq = q;
            q = q2, q2 = tq;
            if (!isfinite((double)e)) goto out;
            t += (double)e, w += tau, npieces++, nw += (double)fl, ntr++, e_prev = (double)e;
            if (dist < 1e-3 && !a->cut && !b->cut) transient = 0; /* settled: batches from here */
            continue;
        }
        double nfull = ceil(rem / tau - 1e-12) - 1; /* full pieces before the last */
        double T1 = (1 - f) * a->T + f * b->T;
        double nb = p->nw == 1 ? nfull : fmin(nfull, fmax(1, floor(BATCH_FRAC * t / T1)));
        if (si + 1 < s->n) nb = fmin(nb, fmax(1, ceil((s->t[si + 1] - t) / T1)));
        int j2 = wall_pair(p, t + 0.5 * nb * T1, &f);
        const struct chain *a2 = &ch[j2], *b2 = &ch[p->nw == 1 ? 0 : j2 + 1];
        double T2 = (1 - f) * a2->T + f * b2->T, F2 = (1 - f) * a2->fails + f * b2->fails;
        if (!isfinite(T2) || t > 1e300) goto out;
        t += nb * T2, w += nb * tau, npieces += nb, nw += nb * F2;
    }
    o->ttt = t, o->wipeouts = nw, o->pieces = npieces;
    rc = isfinite(o->ttt) ? 0 : -1;
out:
    cache_free(tc);
    free(tc), free(q), free(q2), free(El), free(El2), free(Pi), free(Ei), free(Si);
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

/* The searches below evaluate schedules rounded to whole steps, so near one step (free or cheap
 * checkpoints) most of their probes are a schedule already evaluated: run_model once per
 * distinct schedule of one search (a run of one-step pieces costs seconds). */
#define MEMO_MAX 48
struct memo {
    int n;
    FtSched s[MEMO_MAX];
    struct run_out o[MEMO_MAX];
    int rc[MEMO_MAX];
};

static int sched_same(const FtSched *a, const FtSched *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->t[i] != b->t[i] || a->tau[i] != b->tau[i]) return 0;
    return 1;
}

static int run_memo(const FtFailModel *m, const struct pol *p, struct memo *c, const FtSched *s,
                    struct run_out *o)
{
    for (int k = 0; c && k < c->n; k++)
        if (sched_same(&c->s[k], s)) {
            *o = c->o[k];
            return c->rc[k];
        }
    int rc = run_model(m, p, s, o);
    if (c && c->n < MEMO_MAX) c->s[c->n] = *s, c->o[c->n] = *o, c->rc[c->n] = rc, c->n++;
    return rc;
}

static double ttt_fixed(const FtFailModel *m, const struct pol *p, struct memo *c, double tau)
{
    FtSched s = {.n = 1, .t = {0}, .tau = {round_steps(m, tau)}};
    struct run_out o;
    return run_memo(m, p, c, &s, &o) ? INFINITY : o.ttt;
}

/* golden section on log(x) of f over [lo, hi] */
static double golden(double (*f)(const FtFailModel *, const struct pol *, double, void *),
                     const FtFailModel *m, const struct pol *p, void *ctx, double lo, double hi)
{
    const double g = 0.6180339887498949;
    lo = log(lo), hi = log(hi);
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = f(m, p, exp(a), ctx), fb = f(m, p, exp(b), ctx);
    for (int it = 0; it < 60 && hi - lo > 5e-3; it++) {
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

static double f_fixed(const FtFailModel *m, const struct pol *p, double tau, void *ctx)
{
    return ttt_fixed(m, p, ctx, tau);
}

/* the interval (work seconds) that is optimal for the wipe-outs around wall time t, taken as
 * Poisson at the epoch's mean rate (a starting point and the schedule's shape) */
static double tau_local(const FtFailModel *m, const struct pol *p, double t)
{
    const FtEpochWall *w = wall_near(p, t);
    double thr = w->IA[w->n - 1] / w->up;
    return thr * analytic_ckpt_opt(m->c.ckpt, 1.0 / w->up);
}

/* A local optimum as an interval: infinite (no failures) or not a number is the whole run, no
 * checkpoint; 0 (checkpoints cost nothing: analytic_ckpt_opt) is one step, a checkpoint after
 * every step. */
static double local_or_ends(const FtFailModel *m, double tau)
{
    return tau > 0 && isfinite(tau) ? tau : tau == 0 ? m->c.step : m->c.steps * m->c.step;
}

static int plan_fixed(const FtFailModel *m, struct pol *p, double interval, FtPlan *out)
{
    const double W = m->c.steps * m->c.step;
    double tau = interval;
    if (pol_walls(m, p)) return -1;
    struct memo *c = calloc(1, sizeof *c); /* no memo (out of memory): every probe evaluated */
    double t_guess = ttt_fixed(m, p, c, tau > 0 ? tau : fmin(W, tau_local(m, p, W)));
    if (!isfinite(t_guess)) t_guess = W;
    if (!(tau > 0)) {
        double t0 = fmin(W, tau_local(m, p, t_guess));
        t0 = local_or_ends(m, t0);
        double lo = fmax(m->c.step, t0 / 8), hi = fmin(W, t0 * 8);
        tau = lo < hi ? golden(f_fixed, m, p, c, lo, hi) : fmin(W, lo);
        /* the bracket's end at the whole run too (a run shorter than the optimal interval is
         * best without checkpoints, which the search approaches but does not reach) */
        if (hi >= W && ttt_fixed(m, p, c, W) < ttt_fixed(m, p, c, tau)) tau = W;
    }
    tau = fmin(round_steps(m, tau), round_steps(m, W));
    FtSched s = {.n = 1, .t = {0}, .tau = {tau}};
    struct run_out o;
    int rc = run_memo(m, p, c, &s, &o);
    free(c);
    if (rc) return -1;
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
        double mid = t_end * ldexp(1.0, i - n + 1) * M_SQRT2;
        double tau = local_or_ends(m, scale * tau_local(m, p, mid));
        s->t[i] = a;
        s->tau[i] = fmin(round_steps(m, tau), round_steps(m, W));
    }
}

struct sched_ctx {
    double t_end;
    struct memo *c;
};

static double f_sched(const FtFailModel *m, const struct pol *p, double scale, void *ctx)
{
    struct sched_ctx *x = ctx;
    FtSched s;
    sched_build(m, p, x->t_end, scale, &s);
    struct run_out o;
    return run_memo(m, p, x->c, &s, &o) ? INFINITY : o.ttt;
}

int analytic_plan_sched(const FtFailModel *m, const FtPlan *fixed, FtPlan *out)
{
    struct pol p;
    memset(out, 0, sizeof *out);
    if (pol_init(m, fixed->policy, fixed->r, &p)) return -1;
    int rc = -1;
    if (pol_walls(m, &p)) goto out;
    struct sched_ctx x = {.t_end = fixed->ttt, .c = calloc(1, sizeof *x.c)};
    double scale = golden(f_sched, m, &p, &x, 0.5, 2.0);
    FtSched s;
    sched_build(m, &p, x.t_end, scale, &s);
    struct run_out o;
    int bad = run_memo(m, &p, x.c, &s, &o);
    free(x.c);
    if (bad) goto out;
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

#define FT_OPT_TIE_REL 1e-6

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
            /* a larger r must be better by more than one part per million: below that the
             * difference is rounding or a failure too unlikely to matter, and the smaller r
             * (less memory, no stacked shards to feed) wins the tie */
            if (!rc && pl.ttt < best[p].ttt * (1 - FT_OPT_TIE_REL)) best[p] = pl;
        }
    }
    return best[FT_POL_CKPT].r ? 0 : -1;
}

int analytic_best_policy(const FtPlan *best)
{
    int win = FT_POL_CKPT;
    for (int p = 0; p < FT_POL_NPOL; p++)
        if (best[p].r && best[p].ttt < best[win].ttt) win = p;
    return win;
}

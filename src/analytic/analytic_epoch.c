/* analytic_epoch.c: a failure epoch in time, and what the simulator's replacement rule does to it.
 *
 * Operational time. With every group in use failing at rate 1 (time theta = lam_g t), an epoch
 * is the stage chain of analytic_spare.c: stage k (k groups down) ends at rate M - k, and the
 * failure that ends it wipes out with probability 1 - alive[k+1]/alive[k]. Uniformized at rate
 * M (a step from stage k is a failure with probability (M - k)/M, else nothing), the chain's
 * state after j steps is a vector v_j (support k <= j), and
 *   S(theta) = P(epoch > theta)           = sum_j Pois(j; M theta) s_j,  s_j = sum_k v_j[k],
 *   A(theta) = E[1/d(theta); epoch > theta] = sum_j Pois(j; M theta) a_j,  a_j = sum_k v_j[k] / d_k,
 * (exact; tabulated on a theta grid). int S = up_units, int A / int S = the time-averaged
 * throughput: the rate-free epoch statistics of analytic_spare.c again, now as distributions.
 *
 * Aligned replacement. The simulator replaces every GPU that failed during a cycle (an epoch and
 * its restart, length L) at the end of the restart, so the b = n m L new GPUs of a cycle all
 * start at the beginning of the next epoch (n GPUs in use, m the renewal density). The renewal
 * density m(t) of the failure model spreads those births evenly over time, and the failures of
 * births made during the current epoch onto the groups still up. The expected excess of group
 * failures in the first u seconds of an epoch is then
 *   b F(u) - n m (IF(L + u) - IF(L)),   IF(x) = int_0^x F,  F = the law of a new GPU's life
 * (the births of the last cycle, at age 0 instead of spread over [0, L], minus what the model
 * counts from births during [0, u] that the simulator has not made yet). The older cohorts,
 * born at the ends of earlier cycles (ages L, 2L, ...) rather than spread, add
 * sum_{j>=1} [L g(jL) - int_{jL}^{(j+1)L} g], g(w) = F(w + u) - F(w), a Riemann sum's error:
 * (L/2) g(L) - (L^2/12) g'(L) by Euler-Maclaurin (checked against the sum to 0.1%). As an excess
 * of operational time (over the M groups, each at lam_g = n m / M):
 *   theta(u) = lam_g (u + L F(u) - (IF(L + u) - IF(L)) + L/2 g(L) - L^2/12 g'(L)),
 * and the epoch in wall time has E[up] = int_0^inf S(theta(u)) du and E[int 1/d] = int A(theta(u))
 * du, with L = E[up] + restart solved by iteration. With shape < 1 new GPUs fail early: the first
 * stages of an epoch are shorter (fewer failures at depth 1 for SPARe, more wipe-outs for
 * checkpoint-only). For the exponential law the replacement time does not matter (theta =
 * lam_g u exactly). It is first order: the correction treats the excess as spread over the groups
 * in proportion, and the later cycles' births (aged one or more cycles) as the model has them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define CURVE_POINTS 2048
#define U_POINTS 800 /* Simpson on log u, an even count of intervals */
#define WALL_POINTS 1201

/* sum_j Pois(j; mu) x[j] and the same for y, j < n: weights by recurrence from the mode */
static void pois_sum2(const double *x, const double *y, int n, double mu, double *sx, double *sy)
{
    if (mu <= 0) {
        *sx = x[0], *sy = y[0];
        return;
    }
    double sd = sqrt(mu);
    int lo = (int)fmax(0, floor(mu - 12 * sd - 20)), hi = (int)fmin(n - 1, ceil(mu + 12 * sd + 20));
    int md = (int)fmin(fmax(floor(mu), lo), hi);
    double w0 = exp(md * log(mu) - mu - lgamma(md + 1.0)), ax = 0, ay = 0, w = w0;
    for (int j = md; j <= hi; j++) {
        ax += w * x[j], ay += w * y[j];
        w *= mu / (j + 1);
    }
    w = w0;
    for (int j = md - 1; j >= lo; j--) {
        w *= (j + 1) / mu;
        ax += w * x[j], ay += w * y[j];
    }
    *sx = ax, *sy = ay;
}

int epoch_curve_init(FtEpochCurve *c, const FtEpochStages *st)
{
    memset(c, 0, sizeof *c);
    int M = st->M, K = st->K;
    if (M < 1 || K < 0 || K >= M + 1 || !(st->alive[0] > 0)) return -1;
    c->M = M;
    c->single = K == 0;
    /* uniformized steps until the alive mass is negligible */
    int cap = 1024;
    double *s = malloc((size_t)cap * sizeof *s), *a = malloc((size_t)cap * sizeof *a);
    double *v = calloc((size_t)K + 2, sizeof *v);
    if (!s || !a || !v) goto fail;
    v[0] = 1;
    int n = 0;
    for (;;) {
        double sum = 0, sa = 0;
        for (int k = 0; k <= K; k++) sum += v[k], sa += v[k] * st->inv_depth[k];
        if (n == cap) {
            cap *= 2;
            double *s2 = realloc(s, (size_t)cap * sizeof *s), *a2 = realloc(a, (size_t)cap * sizeof *a);
            if (!s2 || !a2) {
                s = s2 ? s2 : s, a = a2 ? a2 : a;
                goto fail;
            }
            s = s2, a = a2;
        }
        s[n] = sum, a[n] = sa, n++;
        if (sum < 1e-14 || n > 50000000) break;
        for (int k = K; k >= 0; k--) { /* one step, in place from the top */
            double stay = v[k] * k / M;
            double in = k > 0 ? v[k - 1] * (double)(M - k + 1) / M * (st->alive[k] / st->alive[k - 1]) : 0;
            v[k] = stay + (k > 0 ? in : 0);
        }
    }
    free(v);
    v = NULL;
    /* theta grid up to where the Poisson mean reaches the last step */
    c->n = CURVE_POINTS;
    c->dth = (n + 12 * sqrt((double)n) + 40) / M / (CURVE_POINTS - 1);
    c->S = malloc((size_t)CURVE_POINTS * sizeof *c->S);
    c->A = malloc((size_t)CURVE_POINTS * sizeof *c->A);
    if (!c->S || !c->A) goto fail;
    long double us = 0, ua = 0;
    for (int j = 0; j < n; j++) us += s[j], ua += a[j];
    c->up_units = (double)(us / M);
    c->thr = (double)(ua / us);
    for (int i = 0; i < CURVE_POINTS; i++) {
        pois_sum2(s, a, n, M * i * c->dth, &c->S[i], &c->A[i]);
    }
    free(s), free(a);
    return 0;
fail:
    free(s), free(a), free(v);
    epoch_curve_free(c);
    return -1;
}

void epoch_curve_free(FtEpochCurve *c)
{
    free(c->S), free(c->A);
    c->S = c->A = NULL;
}

static double curve_at(const FtEpochCurve *c, const double *y, double theta)
{
    if (c->single) return y[0] * exp(-c->M * fmax(theta, 0)); /* checkpoint-only: exact */
    double x = theta / c->dth;
    if (x <= 0) return y[0];
    if (x >= c->n - 1) return 0;
    int i = (int)x;
    double f = x - i;
    return (1 - f) * y[i] + f * y[i + 1];
}

double epoch_curve_S(const FtEpochCurve *c, double theta) { return curve_at(c, c->S, theta); }
double epoch_curve_A(const FtEpochCurve *c, double theta) { return curve_at(c, c->A, theta); }

/* ---- aligned replacement -------------------------------------------------------------------- */

/* Regularized lower incomplete gamma P(a, z): series below a + 1, continued fraction above. */
static double gamma_p(double a, double z)
{
    if (z <= 0) return 0;
    double lg = a * log(z) - z - lgamma(a);
    if (z < a + 1) {
        double ap = a, sum = 1 / a, del = sum;
        for (int i = 0; i < 1000; i++) {
            ap += 1, del *= z / ap, sum += del;
            if (fabs(del) < fabs(sum) * 1e-16) break;
        }
        return sum * exp(lg);
    }
    double b = z + 1 - a, cc = 1 / 1e-300, d = 1 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        cc = b + an / cc;
        if (fabs(cc) < 1e-300) cc = 1e-300;
        d = 1 / d;
        double del = d * cc;
        h *= del;
        if (fabs(del - 1) < 1e-16) break;
    }
    return 1 - exp(lg) * h;
}

/* F and IF = int_0^x F of a new GPU's Weibull life */
static double wb_F(const FtRenewal *g, double x)
{
    return x <= 0 ? 0 : -expm1(-pow(x / g->scale, g->shape));
}

static double wb_IF(const FtRenewal *g, double x)
{
    if (x <= 0) return 0;
    double k = g->shape, z = pow(x / g->scale, k);
    if (z < 0.5) { /* x sum_{j>=1} (-1)^(j+1) z^j / (j! (j k + 1)) */
        double term = 1, s = 0;
        for (int j = 1; j < 80; j++) {
            term *= z / j;
            double add = term / (j * k + 1) * (j & 1 ? 1 : -1);
            s += add;
            if (fabs(add) < 1e-17 * fabs(s)) break;
        }
        return x * s;
    }
    return x - g->scale / k * tgamma(1 / k) * gamma_p(1 / k, z);
}

static double wb_f(const FtRenewal *g, double x)
{
    if (x <= 0) return 0;
    double z = pow(x / g->scale, g->shape);
    return g->shape / x * z * exp(-z);
}

static double theta_of(const FtRenewal *g, double lam_g, double L, double u)
{
    double j0 = L * wb_F(g, u) - (wb_IF(g, L + u) - wb_IF(g, L));
    double j1 = L / 2 * (wb_F(g, L + u) - wb_F(g, L)) - L * L / 12 * (wb_f(g, L + u) - wb_f(g, L));
    return lam_g * (u + j0 + j1);
}

/* int_0^inf of S(theta(u)) and A(theta(u)) du by Simpson on log u */
static void integrate(const FtEpochCurve *c, const FtRenewal *g, double lam_g, double L, double *up,
                      double *work)
{
    double th_end = (c->n - 1) * c->dth;
    double u_hi = 4 * th_end / lam_g, u_lo = 1e-10 * th_end / lam_g;
    double x0 = log(u_lo), x1 = log(u_hi), hx = (x1 - x0) / U_POINTS;
    long double su = 0, sw = 0;
    for (int i = 0; i <= U_POINTS; i++) {
        double u = exp(x0 + i * hx), th = theta_of(g, lam_g, L, u);
        double w = (i == 0 || i == U_POINTS) ? 1 : (i & 1 ? 4 : 2);
        su += w * epoch_curve_S(c, th) * u;
        sw += w * epoch_curve_A(c, th) * u;
    }
    /* [0, u_lo]: the epoch is alive there with probability ~1 */
    *up = (double)(su * hx / 3) + u_lo;
    *work = (double)(sw * hx / 3) + u_lo * c->A[0];
}

static int memoryless(const FtRenewal *gpu) { return gpu->law != FT_LAW_WEIBULL || gpu->shape == 1.0; }

/* the cycle length L = E[up] + restart, by iteration */
static double cycle_length(const FtEpochCurve *c, const FtRenewal *gpu, double lam_g, double restart)
{
    double up = c->up_units / lam_g, work, L = up + restart;
    if (memoryless(gpu)) return L;
    for (int it = 0; it < 4; it++) {
        integrate(c, gpu, lam_g, L, &up, &work);
        double L2 = up + restart;
        if (fabs(L2 - L) < 1e-9 * L) break;
        L = L2;
    }
    return L;
}

int epoch_real(const FtEpochCurve *c, const FtRenewal *gpu, double lam_g, double restart, double *up,
               double *work)
{
    if (!(lam_g > 0)) return -1;
    if (memoryless(gpu)) { /* no correction */
        *up = c->up_units / lam_g, *work = c->thr * *up;
        return 0;
    }
    double L = cycle_length(c, gpu, lam_g, restart);
    integrate(c, gpu, lam_g, L, up, work);
    return isfinite(*up) && *up > 0 ? 0 : -1;
}

int epoch_wall_init(FtEpochWall *w, const FtEpochCurve *c, const FtRenewal *gpu, double lam_g, double restart)
{
    memset(w, 0, sizeof *w);
    if (!(lam_g > 0)) return -1;
    int n = WALL_POINTS;
    w->n = n;
    w->lam = lam_g;
    w->L = cycle_length(c, gpu, lam_g, restart);
    w->u = malloc((size_t)n * sizeof *w->u), w->S = malloc((size_t)n * sizeof *w->S);
    w->IS = malloc((size_t)n * sizeof *w->IS), w->IA = malloc((size_t)n * sizeof *w->IA);
    w->W = malloc((size_t)n * sizeof *w->W);
    if (!w->u || !w->S || !w->IS || !w->IA || !w->W) {
        epoch_wall_free(w);
        return -1;
    }
    double th_end = (c->single ? 60.0 / c->M : (c->n - 1) * c->dth);
    double u_hi = 4 * th_end / lam_g, u_lo = 1e-10 * th_end / lam_g;
    double x0 = log(u_lo), hx = (log(u_hi) - x0) / (n - 2);
    int ml = memoryless(gpu);
    double a_prev = c->single ? c->A[0] : c->A[0], s_prev = 1, r_prev = a_prev;
    w->u[0] = 0, w->S[0] = 1, w->IS[0] = w->IA[0] = w->W[0] = 0;
    for (int i = 1; i < n; i++) {
        double u = exp(x0 + (i - 1) * hx);
        double th = ml ? lam_g * u : theta_of(gpu, lam_g, w->L, u);
        double S = epoch_curve_S(c, th), A = epoch_curve_A(c, th);
        double rr = S > 1e-250 ? A / S : r_prev; /* work rate of an epoch alive at u */
        double du = u - w->u[i - 1];
        w->u[i] = u, w->S[i] = S;
        w->IS[i] = w->IS[i - 1] + 0.5 * (S + s_prev) * du;
        w->IA[i] = w->IA[i - 1] + 0.5 * (A + a_prev) * du;
        w->W[i] = w->W[i - 1] + 0.5 * (rr + r_prev) * du;
        s_prev = S, a_prev = A, r_prev = rr;
    }
    w->up = w->IS[n - 1];
    return isfinite(w->up) && w->up > 0 ? 0 : -1;
}

void epoch_wall_free(FtEpochWall *w)
{
    free(w->u), free(w->S), free(w->IS), free(w->IA), free(w->W);
    memset(w, 0, sizeof *w);
}

/* index i with u[i] <= x < u[i+1] (clamped) */
static int wall_find(const double *y, int n, double x)
{
    int lo = 0, hi = n - 1;
    if (x <= y[0]) return 0;
    if (x >= y[n - 1]) return n - 2;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (y[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

double epoch_wall_at(const FtEpochWall *w, const double *y, double u)
{
    if (u >= w->u[w->n - 1]) return y == w->S ? 0 : y[w->n - 1];
    int i = wall_find(w->u, w->n, u);
    double f = (u - w->u[i]) / (w->u[i + 1] - w->u[i]);
    return (1 - f) * y[i] + f * y[i + 1];
}

double epoch_wall_inv(const FtEpochWall *w, const double *y, double v)
{
    if (v >= y[w->n - 1]) { /* beyond the table: continue at the last slope */
        double sl = (y[w->n - 1] - y[w->n - 2]) / (w->u[w->n - 1] - w->u[w->n - 2]);
        return w->u[w->n - 1] + (sl > 0 ? (v - y[w->n - 1]) / sl : INFINITY);
    }
    int i = wall_find(y, w->n, v);
    double d = y[i + 1] - y[i];
    return w->u[i] + (d > 0 ? (v - y[i]) / d : 0) * (w->u[i + 1] - w->u[i]);
}

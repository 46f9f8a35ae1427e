/* analytic_renewal.c: the renewal function of one GPU slot whose GPU is replaced by a new one at
 * every failure (lifetimes iid, exponential or Weibull), computed on a grid.
 *
 * M(t) = E[failures in [0, t]] solves the renewal equation M(t) = F(t) + int_0^t M(t - s) dF(s).
 * Exponential: M(t) = t / mean exactly. Weibull: no closed form, so product integration on
 * t_i = i h: on each cell [t_{j-1}, t_j] of the convolution M(t_n - s) is taken linear in s and
 * integrated exactly against dF (weights from int F ds over the cell), which is second order
 * for a smooth M and exact for a linear one (the exponential law), and needs no density, so the
 * singular Weibull density at 0 (shape < 1) costs nothing:
 *   M_n = F_n + sum_{j=1}^{n} (a_j M_{n-j+1} + b_j M_{n-j}),
 *   b_j = F_j - I_j / h,  a_j = I_j / h - F_{j-1},  I_j = int_{t_{j-1}}^{t_j} F(s) ds,
 * an O(n^2) lower-triangular solve (the j = 1 term holds M_n: divide by 1 - a_1). I_j comes from
 * a series for the first cell (F ~ (s/lambda)^k there) and 8-point Gauss-Legendre elsewhere.
 * Between grid points M = F + R with R = M - F (the second and later renewals, smooth:
 * ~ t^(2k) at 0) interpolated linearly and F exact, so a coarse grid stays accurate near 0.
 * Two tables: a fine one over [0, tfine] (the runs the optimizer looks at) and, when tfine is
 * shorter, a coarse one over RENEWAL_MAX_MEANS lifetimes; beyond that M grows at the long-run
 * rate 1/mean (the renewal theorem: the density has settled by then for the shapes of interest).
 * The error is measured, not assumed: the same solve on the half grid (2h) gives err = max
 * |M_h - M_2h| over the common points, an upper bound of the fine grid's error for any
 * convergence order >= 1 (test_analytic checks it against a 4x finer solve and the values
 * against a Monte Carlo count; the relative error of M is below 1e-4 from 1% of a lifetime on,
 * 4096 cells, shapes 0.7-2).
 * renewal_alt: the same solve for a part that is down for an exponential repair after each
 * failure (Meta's sparing model): failures Phi(t) = F(t) + int_0^t Psi(t - s) dF(s) with Psi the
 * repairs completed, Psi = Phi - Down and Down' = Phi' - Down / mttr integrated exactly over a cell
 * with failures at a constant rate, so each step is one linear equation in Phi_m. mttr = 0 gives
 * the renewal function. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define RENEWAL_MAX_MEANS 40.0

static double wb_scale(double shape, double mean) { return mean / tgamma(1.0 + 1.0 / shape); }

static double cdf(const FtRenewal *rn, double t)
{
    if (t <= 0) return 0;
    if (rn->law != FT_LAW_WEIBULL) return -expm1(-t / rn->mean);
    return -expm1(-pow(t / rn->scale, rn->shape));
}

/* int_0^h F(s) ds for h small against the scale: F = 1 - e^(-x), x = (s/lambda)^k, termwise:
 * h * sum_{j>=1} (-1)^(j+1) x_h^j / (j! (j k + 1)), an alternating series (x_h < 1 here). */
static double int_cdf_first(const FtRenewal *rn, double h)
{
    double x = pow(h / rn->scale, rn->shape), term = 1, s = 0;
    for (int j = 1; j < 60; j++) {
        term *= x / j;
        double add = term / (j * rn->shape + 1) * (j & 1 ? 1 : -1);
        s += add;
        if (fabs(add) < 1e-17 * fabs(s)) break;
    }
    return h * s;
}

static double int_cdf_gl(const FtRenewal *rn, double a, double b)
{
    static const double x[4] = {0.1834346424956498, 0.5255324099163290, 0.7966664774136267,
                                0.9602898564975363};
    static const double w[4] = {0.3626837833783620, 0.3137066458778873, 0.2223810344533745,
                                0.1012285362903763};
    double c = 0.5 * (a + b), d = 0.5 * (b - a), s = 0;
    for (int i = 0; i < 4; i++) s += w[i] * (cdf(rn, c - d * x[i]) + cdf(rn, c + d * x[i]));
    return d * s;
}

/* F at the grid points and the product-integration weights a_j, b_j (j = 1..n). NULL when out
 * of memory, else F (one allocation holding the three arrays). */
static double *weights(const FtRenewal *rn, int n, double h, double **a, double **b)
{
    double *F = malloc(3 * ((size_t)n + 1) * sizeof *F);
    if (!F) return NULL;
    *a = F + n + 1, *b = F + 2 * ((size_t)n + 1);
    for (int i = 0; i <= n; i++) F[i] = cdf(rn, i * h);
    for (int j = 1; j <= n; j++) {
        double I = (j == 1 && rn->law == FT_LAW_WEIBULL && pow(h / rn->scale, rn->shape) < 0.5)
                       ? int_cdf_first(rn, h)
                       : int_cdf_gl(rn, (j - 1) * h, j * h);
        (*b)[j] = F[j] - I / h;
        (*a)[j] = I / h - F[j - 1];
    }
    return F;
}

/* The solve on n cells of width h into M[0..n]. */
static int solve(const FtRenewal *rn, int n, double h, double *M)
{
    double *a, *b, *F = weights(rn, n, h, &a, &b);
    if (!F) return -1;
    M[0] = 0;
    for (int m = 1; m <= n; m++) {
        double s = F[m] + b[1] * M[m - 1];
        for (int j = 2; j <= m; j++) s += a[j] * M[m - j + 1] + b[j] * M[m - j];
        M[m] = s / (1.0 - a[1]);
    }
    free(F);
    return 0;
}

/* One table over [0, tmax]: R[i] = M(t_i) - F(t_i); err from the half grid. */
static int table_build(FtRenewal *rn, struct ft_renewal_tab *tb, double tmax, int n)
{
    if (n % 2) n++;
    tb->n = n;
    tb->h = tmax / n;
    double *M = malloc(((size_t)n + 1) * sizeof *M), *M2 = malloc(((size_t)n / 2 + 1) * sizeof *M2);
    tb->R = malloc(((size_t)n + 1) * sizeof *tb->R);
    if (!M || !M2 || !tb->R || solve(rn, n, tb->h, M) || solve(rn, n / 2, 2 * tb->h, M2)) {
        free(M), free(M2);
        return -1;
    }
    for (int i = 0; i <= n / 2; i++) rn->err = fmax(rn->err, fabs(M[2 * i] - M2[i]));
    for (int i = 0; i <= n; i++) tb->R[i] = M[i] - cdf(rn, i * tb->h);
    tb->M_end = M[n];
    free(M), free(M2);
    return 0;
}

int renewal_init(FtRenewal *rn, int law, double shape, double mean, double tfine, int n)
{
    memset(rn, 0, sizeof *rn);
    if (!(mean > 0) || !(tfine > 0) || n < 2) return -1;
    rn->law = law == FT_LAW_WEIBULL ? FT_LAW_WEIBULL : FT_LAW_EXP;
    rn->shape = rn->law == FT_LAW_WEIBULL ? shape : 1.0;
    rn->mean = mean;
    if (rn->law == FT_LAW_EXP) return 0; /* M(t) = t / mean, nothing to tabulate */
    if (!(shape > 0)) return -1;
    rn->scale = wb_scale(rn->shape, mean);
    double tall = RENEWAL_MAX_MEANS * mean;
    rn->ntab = tfine < 0.5 * tall ? 2 : 1;
    if (table_build(rn, &rn->tab[0], fmin(tfine, tall), n) ||
        (rn->ntab == 2 && table_build(rn, &rn->tab[1], tall, n))) {
        renewal_free(rn);
        return -1;
    }
    return 0;
}

void renewal_free(FtRenewal *rn)
{
    for (int i = 0; i < 2; i++) free(rn->tab[i].R), rn->tab[i].R = NULL;
}

double renewal_M(const FtRenewal *rn, double t)
{
    if (t <= 0) return 0;
    if (rn->law == FT_LAW_EXP) return t / rn->mean;
    const struct ft_renewal_tab *tb = &rn->tab[0];
    if (t >= tb->n * tb->h && rn->ntab == 2) tb = &rn->tab[1];
    double tend = tb->n * tb->h;
    if (t >= tend) return tb->M_end + (t - tend) / rn->mean;
    double x = t / tb->h;
    int i = (int)x;
    if (i >= tb->n) i = tb->n - 1;
    double f = x - i;
    return cdf(rn, t) + (1 - f) * tb->R[i] + f * tb->R[i + 1];
}

double renewal_rate(const FtRenewal *rn, double t0, double t1)
{
    if (rn->law == FT_LAW_EXP) return 1.0 / rn->mean;
    if (t1 <= t0) {
        double d = 1e-6 * fmax(t0, rn->tab[0].h);
        t0 = fmax(0, t0 - d), t1 = t0 + 2 * d;
    }
    return (renewal_M(rn, t1) - renewal_M(rn, t0)) / (t1 - t0);
}

int renewal_alt(int law, double shape, double mean, double mttr, double tmax, int n, double *Phi,
                double *Down)
{
    FtRenewal rn = {.law = law == FT_LAW_WEIBULL ? FT_LAW_WEIBULL : FT_LAW_EXP, .mean = mean};
    if (!(mean > 0) || !(tmax > 0) || n < 1 || !(mttr >= 0)) return -1;
    rn.shape = rn.law == FT_LAW_WEIBULL ? shape : 1.0;
    if (!(rn.shape > 0)) return -1;
    rn.scale = wb_scale(rn.shape, mean);
    double h = tmax / n, *a, *b, *F = weights(&rn, n, h, &a, &b);
    double *Psi = malloc(((size_t)n + 1) * sizeof *Psi);
    if (!F || !Psi) {
        free(F), free(Psi);
        return -1;
    }
    /* repairs over a cell where failures arrive at a constant rate: D_m = E D_{m-1} + g dPhi */
    double E = mttr > 0 ? exp(-h / mttr) : 0, g = mttr > 0 ? -expm1(-h / mttr) * mttr / h : 0;
    Phi[0] = Psi[0] = Down[0] = 0;
    for (int m = 1; m <= n; m++) {
        double d = g * Phi[m - 1] - E * Down[m - 1]; /* Psi_m = (1 - g) Phi_m + d */
        double s = F[m] + a[1] * d + b[1] * Psi[m - 1];
        for (int j = 2; j <= m; j++)
            s += a[j] * Psi[m - j + 1] + b[j] * Psi[m - j];
        Phi[m] = s / (1.0 - a[1] * (1 - g));
        Psi[m] = (1 - g) * Phi[m] + d;
        Down[m] = Phi[m] - Psi[m];
    }
    free(F), free(Psi);
    return 0;
}

/* analytic_sparing.c: the sparing goodput (CETT) model after Meta's "Sparing Strategies"
 * (PAPERS.md section 3), reconstructed from its description; the equations are ours.
 *
 * Hardware: B sparing zones, each with L + R compute blocks (L in use, R inter-block spares);
 * each block has K + I trays (K in use, I intra-block spares) and one rack (its scale-up domain
 * and power). Every tray alternates up (mean tray_mtbf) and in repair (mean tray_mttr); every
 * rack alike (rack_mtbf, rack_mttr); all independent, spares included (hot spares, one repair
 * crew per failed part). A block is usable when its rack is up and at least K of its trays are.
 *   a_t = mtbf_t / (mtbf_t + mttr_t),   a_r = mtbf_r / (mtbf_r + mttr_r)
 *   p_b = a_r * P(Binomial(K + I, a_t) >= K)
 *   avail = P(Binomial(L + R, p_b) >= L)^B          (fraction of time the job is not blocked)
 * These are exact stationary probabilities of the alternating renewal processes, whatever the
 * repair-time law (insensitivity), because parts are independent.
 *
 * Job: synchronous; it runs while every zone has L usable blocks; every failure of a part in use
 * (K trays of each of the B L blocks in use, and those blocks' racks) interrupts it: the work
 * since the last checkpoint is lost and a restart of `restart` seconds follows (a failure
 * during the restart starts it over). Failures of idle spares do not interrupt. In-use parts are
 * up and memoryless, so while not blocked interrupts are Poisson at
 *   lam = B L (K / mtbf_t + 1 / mtbf_r),
 * and one checkpoint interval (tau of work + ckpt) costs, in running time,
 *   E = e^(lam restart) (e^(lam (tau + ckpt)) - 1) / lam,
 * so run_eff = tau / E. Blocked periods begin only at interrupts (an idle spare failing cannot
 * leave a zone short), so they add wall time without changing the running-time picture.
 *   util = L K / ((L + R)(K + I))          (GPUs doing work over GPUs provisioned)
 *   CETT = avail * run_eff * util,  work = CETT * B (L + R)(K + I) gpus_per_tray.
 * The composite-process simulator (sim_sparing.c) checks this within 1% in the tests.
 *
 * Weibull up times (law = FT_LAW_WEIBULL, every part new at t = 0 and new again after a repair):
 * no steady state over a run of hardware life, so the quantities above become functions of the
 * time t since the parts were new, averaged over the horizon H:
 *   A(t) = P(a part is up at t), Phi(t) = its expected failures by t (renewal_alt: the
 *          alternating renewal process, Weibull up, exponential repair), per class (tray, rack);
 *   p_b(t), avail(t) as above with a_t, a_r replaced by A_t(t), A_r(t): still exact, because
 *          each part's up/down process is independent of the others and of its use;
 *   lam(t) = B L (K h_t(t) + h_r(t)), h the failure rate of a part in use: not the average up
 *          part's Phi' / A, because idle spares burn in before they are used (inuse_rates);
 *   CETT = util (1/H) int_0^H avail(t) tau / E(lam(t)) dt   (one fixed interval tau; the
 *          optimal one maximizes this integral).
 * The integral runs over intervals of the tabulated grid (short ones where the rates change
 * fast, at the start), each with its mean A and its mean rate of an up part. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

/* P(Binomial(n, p) >= m), in logs. */
static double binom_tail(int n, double p, int m)
{
    if (m <= 0) return 1.0;
    if (m > n) return 0.0;
    if (p >= 1.0) return 1.0;
    if (p <= 0.0) return 0.0;
    long double s = 0, lp = logl(p), lq = log1pl(-(long double)p);
    for (int j = m; j <= n; j++)
        s += expl(lgammal(n + 1.0L) - lgammal(j + 1.0L) - lgammal(n - j + 1.0L) + j * lp + (n - j) * lq);
    return s > 1 ? 1.0 : (double)s;
}

/* The time-varying part processes over the horizon (Weibull): per class ([0] rack, [1] tray) on
 * n cells of width h, Phi = failures of one part by t, Dn = P(down at t), ch[j] = the law's
 * cumulative hazard from age j h to (j + 1) h and sv[j] = e^(-ch[j]) the survival. The CETT
 * integral runs over nq intervals (cells end[q - 1]..end[q]) of width w (hours), with the mean
 * P(up) a and the mean failures per up-hour hz_pop of a part. */
#define LAW_CELLS 4096
#define NQ_MAX    160
struct law_tab {
    int n, nq, end[NQ_MAX];
    double h, w[NQ_MAX], a[2][NQ_MAX], hz_pop[2][NQ_MAX];
    double *Phi[2], *Dn[2], *sv[2], *ch[2];
};

static void law_tab_free(struct law_tab *lt)
{
    for (int c = 0; c < 2; c++)
        free(lt->Phi[c]), free(lt->Dn[c]), free(lt->sv[c]), free(lt->ch[c]);
}

static int law_tab_init(const FtSparing *s, struct law_tab *lt)
{
    const int n = LAW_CELLS;
    memset(lt, 0, sizeof *lt);
    lt->n = n;
    lt->h = s->horizon / n;
    /* interval ends (cells): 16 single cells, then widths growing by 1/4 up to n / 64 */
    int c = 0;
    double wd = 1;
    while (c < n && lt->nq < NQ_MAX) {
        int step = (int)wd;
        if (c + step > n) step = n - c;
        c += step, lt->end[lt->nq++] = c;
        if (c >= 16) wd = fmin(wd * 1.25, n / 64.0);
    }
    if (c < n) return -1;
    for (int cls = 0; cls < 2; cls++) {
        double mtbf = cls ? s->tray_mtbf : s->rack_mtbf, mttr = cls ? s->tray_mttr : s->rack_mttr;
        double *Phi = lt->Phi[cls] = malloc(((size_t)n + 1) * sizeof *Phi);
        double *Dn = lt->Dn[cls] = malloc(((size_t)n + 1) * sizeof *Dn);
        double *sv = lt->sv[cls] = malloc(((size_t)n + 1) * sizeof *sv);
        double *ch = lt->ch[cls] = malloc(((size_t)n + 1) * sizeof *ch);
        if (!Phi || !Dn || !sv || !ch ||
            renewal_alt(s->law, s->shape, mtbf, mttr, s->horizon, n, Phi, Dn)) {
            law_tab_free(lt);
            return -1;
        }
        double k = s->law == FT_LAW_WEIBULL ? s->shape : 1.0, sc = mtbf / tgamma(1.0 + 1.0 / k);
        for (int j = 0; j <= n; j++) {
            ch[j] = pow((j + 1) * lt->h / sc, k) - pow(j * lt->h / sc, k);
            sv[j] = exp(-ch[j]);
        }
        for (int q = 0, i0 = 0; q < lt->nq; i0 = lt->end[q++]) {
            double up = 0; /* int A over the interval, trapezoid on the grid */
            for (int i = i0; i < lt->end[q]; i++)
                up += 1 - 0.5 * (Dn[i] + Dn[i + 1]);
            lt->w[q] = (lt->end[q] - i0) * lt->h;
            lt->a[cls][q] = up * lt->h / lt->w[q];
            lt->hz_pop[cls][q] = up > 0 ? (Phi[lt->end[q]] - Phi[i0]) / (up * lt->h) : 0;
        }
    }
    return 0;
}

/* Failures of the parts in use, per part in use and hour, per interval of lt, into hz[2][nq].
 * Parts are not used at random: a repaired part comes back as an idle spare (a tray of its block,
 * or in a spare block) and is put to use only when a part in use fails, so with shape < 1 it
 * burns in while idle, and the parts in use fail less often than the average part (measured: up to
 * 13% less). A mean-field model of that, stepped over the grid for each class:
 *   fresh f(t, a): idle up parts never used since their birth (t = 0 or a repair), by age a;
 *     born at the class's repair rate, leaving by failure (the law's hazard at age a) and by use;
 *   use: every part that enters use is drawn at random from the idle up parts (N A(t) - U of
 *     them, U = parts in use); per failure in use, one tray enters (an intra-block spare, with
 *     probability qI = P(an idle up tray in the block | usable)) or K (a spare block, 1 - qI),
 *     and a rack enters with every block swap (rack failures in use, tray failures without qI);
 *   veterans (idle up parts that were in use: the other trays of a swapped block) fail like the
 *     parts in use, so in-use failures = (N Phi' - fresh failures) U / (U + veterans).
 * Exponential up times (shape 1) give the population rate, as they should. 0 or -1. */
static int inuse_rates(const FtSparing *s, const struct law_tab *lt, double hz[2][NQ_MAX])
{
    const int n = lt->n;
    const double N[2] = {(double)s->B * (s->L + s->R),
                         (double)s->B * (s->L + s->R) * (s->K + s->I)};
    const double U[2] = {(double)s->B * s->L, (double)s->B * s->L * s->K};
    double *f[2] = {calloc((size_t)n + 2, sizeof(double)), calloc((size_t)n + 2, sizeof(double))};
    if (!f[0] || !f[1]) {
        free(f[0]), free(f[1]);
        return -1;
    }
    f[0][0] = N[0] - U[0], f[1][0] = N[1] - U[1];
    double acc[2] = {0, 0}, ff[2], F[2]; /* fresh failures over the next cell, fresh parts */
    for (int c = 0; c < 2; c++)
        ff[c] = f[c][0] * -log(lt->sv[c][0]), F[c] = f[c][0];
    int q = 0;
    double qI = 0;
    for (int m = 1; m <= n; m++) {
        double lam[2], up[2];
        if (m == 1 || m - 1 == lt->end[q - 1]) { /* per interval: P(an idle up tray | usable) */
            double t0 = binom_tail(s->K + s->I, lt->a[1][q], s->K);
            qI = t0 > 0 ? binom_tail(s->K + s->I, lt->a[1][q], s->K + 1) / t0 : 0;
        }
        for (int c = 0; c < 2; c++) {
            up[c] = N[c] * (1 - 0.5 * (lt->Dn[c][m - 1] + lt->Dn[c][m]));
            double V = fmax(0, up[c] - U[c] - F[c]);
            lam[c] =
                fmax(0, N[c] * (lt->Phi[c][m] - lt->Phi[c][m - 1]) - ff[c]) * U[c] / (U[c] + V);
            acc[c] += lam[c];
        }
        const double e[2] = {lam[0] + lam[1] * (1 - qI),
                             lam[1] * (qI + s->K * (1 - qI)) + s->K * lam[0]};
        for (int c = 0; c < 2; c++) { /* age by one cell, then the cell's births */
            double idle = up[c] - U[c], x = idle > 0 ? exp(-e[c] / idle) : 0, *fc = f[c];
            const double *sv = lt->sv[c], *ch = lt->ch[c];
            double sf = 0, sF = 0;
            for (int j = m - 1; j >= 0; j--) {
                double v = fc[j] * sv[j] * x;
                fc[j + 1] = v, sf += v * ch[j + 1], sF += v;
            }
            fc[0] = N[c] * (lt->Phi[c][m] - lt->Phi[c][m - 1] - (lt->Dn[c][m] - lt->Dn[c][m - 1])) *
                    sqrt(x);
            ff[c] = sf + fc[0] * ch[0], F[c] = sF + fc[0];
        }
        if (m == lt->end[q]) {
            for (int c = 0; c < 2; c++)
                hz[c][q] = acc[c] / (U[c] * lt->w[q]), acc[c] = 0;
            q++;
        }
    }
    free(f[0]), free(f[1]);
    return 0;
}

/* Mean running-time cost of one piece (tau of work + ckpt) at interrupt rate lam (per second). */
static double piece_cost(double lam, double tau, double ckpt, double restart)
{
    if (!(lam > 0)) return tau + ckpt;
    return exp(lam * restart) * expm1(lam * (tau + ckpt)) / lam;
}

/* Work per second of the horizon (CETT / util) at interval tau, given per-interval avail, lam. */
static double law_work(const struct law_tab *lt, const double *av, const double *lam, double tau,
                       const FtSparing *s)
{
    double sum = 0, H = 0;
    for (int q = 0; q < lt->nq; q++) {
        H += lt->w[q];
        sum += lt->w[q] * av[q] * tau / piece_cost(lam[q], tau, s->ckpt, s->restart);
    }
    return sum / H;
}

/* CETT under the law: the parts in use fail at the rate of inuse_rates' mean-field model, or
 * (s->pop_rate, for comparison) at the rate of the average up part. 0 or -1. */
static int sparing_law(const FtSparing *s, const struct law_tab *lt, FtSparingResult *out)
{
    double av[NQ_MAX], lam[NQ_MAX], hz[2][NQ_MAX], H = 0, pb = 0, avail = 0, lam_run = 0;
    if (!s->pop_rate && inuse_rates(s, lt, hz)) return -1;
    if (s->pop_rate) memcpy(hz, lt->hz_pop, sizeof hz);
    for (int q = 0; q < lt->nq; q++) {
        double p = lt->a[0][q] * binom_tail(s->K + s->I, lt->a[1][q], s->K);
        av[q] = pow(binom_tail(s->L + s->R, p, s->L), s->B);
        lam[q] = (double)s->B * s->L * (s->K * hz[1][q] + hz[0][q]) / 3600.0;
        H += lt->w[q], pb += lt->w[q] * p, avail += lt->w[q] * av[q];
        lam_run += lt->w[q] * av[q] * lam[q];
    }
    out->p_block = pb / H;
    out->avail = avail / H;
    out->lam = avail > 0 ? lam_run / avail : 0;
    double tau = s->interval;
    if (!(tau > 0)) { /* golden section on log tau around the optimum at the mean rate */
        double t0 = analytic_ckpt_opt(s->ckpt, out->lam);
        double lo = log(t0) - log(20.0), hi = log(t0) + log(20.0), g = 0.5 * (sqrt(5.0) - 1);
        double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
        double f1 = law_work(lt, av, lam, exp(x1), s), f2 = law_work(lt, av, lam, exp(x2), s);
        for (int it = 0; it < 60 && hi - lo > 1e-7; it++) {
            if (f1 > f2) {
                hi = x2, x2 = x1, f2 = f1, x1 = hi - g * (hi - lo);
                f1 = law_work(lt, av, lam, exp(x1), s);
            } else {
                lo = x1, x1 = x2, f1 = f2, x2 = lo + g * (hi - lo);
                f2 = law_work(lt, av, lam, exp(x2), s);
            }
        }
        tau = exp(0.5 * (lo + hi));
    }
    out->interval = tau;
    double work = law_work(lt, av, lam, tau, s);
    out->run_eff = out->avail > 0 ? work / out->avail : 0;
    out->util = (double)s->L * s->K / ((double)(s->L + s->R) * (s->K + s->I));
    out->cett = work * out->util;
    out->work = out->cett * s->B * (double)(s->L + s->R) * (s->K + s->I) * s->gpus_per_tray;
    return 0;
}

static int sparing_check(const FtSparing *s, char *err, size_t errlen)
{
    if (s->B < 1 || s->L < 1 || s->K < 1 || s->R < 0 || s->I < 0 || s->gpus_per_tray < 1) {
        snprintf(err, errlen, "sparing: zones, blocks and trays must be >= 1 and spares >= 0");
        return -1;
    }
    if (!(s->tray_mtbf > 0) || !(s->rack_mtbf > 0) || !(s->tray_mttr >= 0) || !(s->rack_mttr >= 0)) {
        snprintf(err, errlen, "sparing: MTBFs must be > 0 and repair times >= 0");
        return -1;
    }
    if (s->R > s->L) {
        snprintf(err, errlen, "sparing: %d spare blocks per zone is more than the %d blocks in use", s->R, s->L);
        return -1;
    }
    if (s->law == FT_LAW_WEIBULL && (!(s->shape > 0) || !(s->horizon > 0))) {
        snprintf(err, errlen, "sparing: the Weibull law needs a shape > 0 and a horizon > 0 hours");
        return -1;
    }
    return 0;
}

int analytic_sparing(const FtSparing *s, FtSparingResult *out, char *err, size_t errlen)
{
    if (sparing_check(s, err, errlen)) return -1;
    if (s->law == FT_LAW_WEIBULL) {
        struct law_tab *lt = malloc(sizeof *lt);
        int rc = -1;
        if (lt && law_tab_init(s, lt) == 0) {
            rc = sparing_law(s, lt, out);
            law_tab_free(lt);
        }
        free(lt);
        if (rc) snprintf(err, errlen, "sparing: out of memory");
        return rc;
    }
    double at = s->tray_mtbf / (s->tray_mtbf + s->tray_mttr);
    double ar = s->rack_mtbf / (s->rack_mtbf + s->rack_mttr);
    out->p_block = ar * binom_tail(s->K + s->I, at, s->K);
    out->avail = pow(binom_tail(s->L + s->R, out->p_block, s->L), s->B);
    out->lam = (double)s->B * s->L * (s->K / s->tray_mtbf + 1.0 / s->rack_mtbf) / 3600.0;
    double tau = s->interval > 0 ? s->interval : analytic_ckpt_opt(s->ckpt, out->lam);
    out->interval = tau;
    double E = exp(out->lam * s->restart) * expm1(out->lam * (tau + s->ckpt)) / out->lam;
    out->run_eff = tau / E;
    out->util = (double)s->L * s->K / ((double)(s->L + s->R) * (s->K + s->I));
    out->cett = out->avail * out->run_eff * out->util;
    out->work = out->cett * s->B * (double)(s->L + s->R) * (s->K + s->I) * s->gpus_per_tray;
    return 0;
}

/* Weibull: from the best R of the stationary (exponential) model, a climb with the law's model
 * to the nearest maximum (CETT is unimodal in R: spares raise avail and lower util). */
static int best_R_law(const FtSparing *s, const struct law_tab *lt, int max_R, FtSparingResult *out)
{
    FtSparing t = *s;
    FtSparingResult res;
    t.law = FT_LAW_EXP;
    int best = analytic_sparing_best_R(&t, max_R, &res);
    t = *s, t.R = best;
    if (sparing_law(&t, lt, out)) return 0;
    for (int dir = -1; dir <= 1; dir += 2)
        for (int R = best + dir; R >= 0 && R <= max_R && R <= s->L; R += dir) {
            t.R = R;
            if (sparing_law(&t, lt, &res) || !(res.cett > out->cett)) break;
            *out = res, best = R;
        }
    return best;
}

int analytic_sparing_best_R(const FtSparing *s, int max_R, FtSparingResult *out)
{
    FtSparing t = *s;
    int best = 0;
    double bc = -1;
    char err[128];
    if (s->law == FT_LAW_WEIBULL) { /* the part processes do not depend on R: tabulated once */
        t.R = 0;
        struct law_tab *lt = malloc(sizeof *lt);
        if (!lt || sparing_check(&t, err, sizeof err) || law_tab_init(s, lt)) {
            free(lt);
            return 0;
        }
        best = best_R_law(s, lt, max_R, out);
        law_tab_free(lt);
        free(lt);
        return best;
    }
    for (int R = 0; R <= max_R && R <= s->L; R++) {
        t.R = R;
        FtSparingResult res;
        if (analytic_sparing(&t, &res, err, sizeof err)) continue;
        if (res.cett > bc) bc = res.cett, best = R, *out = res;
    }
    return best;
}

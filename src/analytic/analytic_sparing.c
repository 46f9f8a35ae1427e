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
 * The composite-process simulator (sim_sparing.c) checks this within 1% in the tests. */
#include <math.h>
#include <stdio.h>

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

int analytic_sparing(const FtSparing *s, FtSparingResult *out, char *err, size_t errlen)
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

int analytic_sparing_best_R(const FtSparing *s, int max_R, FtSparingResult *out)
{
    FtSparing t = *s;
    int best = 0;
    double bc = -1;
    char err[128];
    for (int R = 0; R <= max_R && R <= s->L; R++) {
        t.R = R;
        FtSparingResult res;
        if (analytic_sparing(&t, &res, err, sizeof err)) continue;
        if (res.cett > bc) bc = res.cett, best = R, *out = res;
    }
    return best;
}

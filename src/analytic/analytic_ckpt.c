/* analytic_ckpt.c: checkpoint intervals and expected times.
 *
 * The exact model: failures are Poisson with rate lam while the job computes or checkpoints;
 * each failure loses the current attempt (work since the last completed checkpoint, and a
 * checkpoint in progress) and costs a non-interruptible downtime D (the global restart).
 * Completing x seconds of uninterrupted time then takes (e^(lam x) - 1)(1/lam + D) on average
 * (renewal argument: E = E[min(X, x)] + P(X < x)(D + E), X ~ Exp(lam)). A run of W seconds of
 * work with a checkpoint after every tau of work (none after the last piece) is a sum of such
 * pieces. Young's sqrt(2CM) and Daly's higher-order interval approximate the optimum of that
 * sum; analytic_ckpt_opt() finds it numerically.
 *
 * Detection latency (DMR deferred checks): a failure that is noticed delta after it happened
 * must roll back past every checkpoint taken in that delta. For a failure at a uniform phase u
 * of the interval the loss is u + tau * ceil((delta - u) / tau)^+, whose mean is tau/2 + delta:
 * the waste grows by lam * delta but its derivative in tau does not change, so the optimal
 * interval is the latency-free one; what changes is how many checkpoints to keep
 * (ceil(delta / tau) + 1) and the expected waste. */
#include <math.h>

#include "ftllm/analytic.h"

double analytic_young(double C, double M) { return sqrt(2.0 * C * M); }

double analytic_daly(double C, double M)
{
    if (C >= 2.0 * M) return M;
    double x = C / (2.0 * M);
    return sqrt(2.0 * C * M) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - C;
}

double analytic_segment_time(double x, double lam, double D)
{
    if (x <= 0) return 0;
    if (lam <= 0) return x;
    return expm1(lam * x) * (1.0 / lam + D);
}

double analytic_ckpt_time(double W, double tau, double C, double lam, double D)
{
    if (W <= 0) return 0;
    if (tau <= 0 || tau >= W) return analytic_segment_time(W, lam, D);
    double n = ceil(W / tau - 1e-12);
    double last = W - (n - 1) * tau;
    return (n - 1) * analytic_segment_time(tau + C, lam, D) + analytic_segment_time(last, lam, D);
}

static double rate_of(double tau, double C, double lam) { return expm1(lam * (tau + C)) / tau; }

double analytic_ckpt_opt(double C, double lam)
{
    if (lam <= 0) return INFINITY;
    if (C <= 0) return 0;
    /* golden section on log(tau); the rate is unimodal in tau */
    double lo = log(1e-6 * fmin(C, 1.0 / lam)), hi = log(1e3 / lam + 1e3 * C);
    const double g = 0.6180339887498949;
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = rate_of(exp(a), C, lam), fb = rate_of(exp(b), C, lam);
    for (int it = 0; it < 200 && hi - lo > 1e-10; it++) {
        if (fa < fb) {
            hi = b, b = a, fb = fa;
            a = hi - g * (hi - lo);
            fa = rate_of(exp(a), C, lam);
        } else {
            lo = a, a = b, fa = fb;
            b = lo + g * (hi - lo);
            fb = rate_of(exp(b), C, lam);
        }
    }
    return exp(0.5 * (lo + hi));
}

double analytic_waste(double tau, double C, double lam, double D, double delta)
{
    if (tau <= 0) return INFINITY;
    return C / tau + lam * (tau / 2.0 + delta + D);
}

double analytic_ckpt_latency(double C, double lam, double D, double delta, int *keep)
{
    (void)D;
    double tau = analytic_ckpt_opt(C, lam);
    if (keep) {
        double k = delta > 0 && isfinite(tau) && tau > 0 ? ceil(delta / tau) + 1 : 1;
        *keep = k > 1e9 ? 1000000000 : (int)k;
    }
    return tau;
}

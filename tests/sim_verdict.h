/* sim_verdict.h: the statistical verdict the simulator tests share (test_sim, test_sim_spare):
 * a Monte Carlo estimate against an exact value, at z = 3.29 (two-sided 99.9%). PASS: the
 * confidence half-width is within the tolerance and the difference within both; FAIL: the
 * half-width is narrow enough but the difference is not; INCONCLUSIVE: too few trials. */
#ifndef FTLLM_TESTS_SIM_VERDICT_H
#define FTLLM_TESTS_SIM_VERDICT_H

#include <math.h>

#include "ftllm/sim.h"

#define Z 3.29
enum { V_PASS, V_FAIL, V_INCONCLUSIVE };

static inline int verdict(FtStat s, double exact, double tol)
{
    if (!(s.half <= tol * fabs(exact))) return V_INCONCLUSIVE;
    double d = fabs(s.mean - exact);
    return d <= s.half && d <= tol * fabs(exact) ? V_PASS : V_FAIL;
}

/* trials so that the half-width is target (relative) given a pilot's sd/mean, in [lo, hi] */
static inline int trials_for(FtStat pilot, double target, int lo, int hi)
{
    double n = pow(Z * pilot.sd / (target * fabs(pilot.mean)), 2);
    return n < lo ? lo : n > hi ? hi : (int)ceil(n);
}

#endif

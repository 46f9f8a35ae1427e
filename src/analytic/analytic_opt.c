/* analytic_opt.c: the joint optimizer: expected time-to-train of a cluster under each policy,
 * minimized over the redundancy r and the checkpoint interval.
 *
 * Model. N = gpus / gpus_per_replica groups; a group fails at rate lam_g = gpus_per_replica /
 * gpu_mtbf (Weibull laws use the same mean rate here; the simulator draws the real law). A
 * policy's failure epoch (from a restart to the wipe-out that forces the next one) has a mean
 * up-time epoch = sum_k P(T > k) / ((N - k) lam_g) and a time-averaged throughput thr (1/depth
 * for SPARe, floor(N/r)/N for replication, 1 for checkpoint-only). Wipe-outs are then treated
 * as a Poisson process of rate 1/epoch during compute (exact for checkpoint-only with
 * exponential failures; for r > 1 the epoch's hazard rises with its age, which the simulator
 * captures and this does not), and the run is W/thr seconds of compute cut by checkpoints
 * every tau/thr: ttt = analytic_ckpt_time(W/thr, tau/thr, C, 1/epoch, restart + latency).
 * The interval minimizing that is found numerically (analytic_ckpt_opt). */
#include <math.h>
#include <string.h>

#include "ftllm/analytic.h"

#define EXACT_MAX_OPS 6e7
#define MC_TRIALS 600

int cluster_groups(const FtCluster *c)
{
    if (c->gpus_per_replica < 1) return 0;
    long long n = c->gpus / c->gpus_per_replica;
    return n > 1000000000LL ? 1000000000 : (int)n;
}

int analytic_plan(const FtCluster *c, int policy, int r, double interval, FtPlan *out)
{
    memset(out, 0, sizeof *out);
    int N = cluster_groups(c);
    if (N < 1 || !(c->gpu_mtbf > 0) || !(c->step > 0) || r < 1 || r > N) return -1;
    double lam_g = (double)c->gpus_per_replica / c->gpu_mtbf;
    FtSpareEpoch ep;
    if (policy == FT_POL_CKPT) r = 1;
    if (r == 1) {
        ep = (FtSpareEpoch){.N = N, .r = 1, .mu = 1, .S = 1, .S_time = 1, .thr_time = 1,
                            .up_units = 1.0 / N, .exact = 1};
    } else if (policy == FT_POL_REP) {
        if (analytic_rep_epoch(N, r, &ep)) return -1;
    } else {
        if (analytic_spare_epoch(N, r, EXACT_MAX_OPS, &ep) &&
            sim_spare_epoch_mc(N, r, MC_TRIALS, 0x5eedULL + (uint64_t)r, &ep))
            return -1;
    }
    double epoch = ep.up_units / lam_g, lam = 1.0 / epoch, thr = ep.thr_time;
    double W = c->steps * c->step, D = c->restart + c->latency;
    double tau_wall = interval > 0 ? interval / thr : analytic_ckpt_opt(c->ckpt, lam);
    if (!isfinite(tau_wall) || tau_wall > W / thr) tau_wall = W / thr;
    /* round to whole steps of work */
    double tau = tau_wall * thr;
    tau = fmax(c->step, round(tau / c->step) * c->step);
    tau_wall = tau / thr;
    double ttt = analytic_ckpt_time(W / thr, tau_wall, c->ckpt, lam, D);
    /* expected failures of the model: sum over pieces of e^(lam x) - 1 */
    double n = ceil(W / tau - 1e-12), last = W / thr - (n - 1) * tau_wall;
    double nfail = (n - 1) * expm1(lam * (tau_wall + c->ckpt)) + expm1(lam * last);
    out->policy = policy, out->r = r;
    out->interval = tau;
    out->mu = ep.mu;
    out->epoch = epoch;
    out->depth = r == 1 ? 1.0 : (policy == FT_POL_REP ? ep.S : ep.S);
    out->ttt = ttt;
    out->goodput = W / ttt;
    out->avail = 1.0 - nfail * c->restart / ttt;
    out->exact = ep.exact;
    return isfinite(ttt) ? 0 : -1;
}

int analytic_optimize(const FtCluster *c, int r_max, FtPlan *best, FtPlan *all)
{
    int N = cluster_groups(c);
    if (N < 1) return -1;
    if (r_max > N) r_max = N;
    for (int p = 0; p < FT_POL_NPOL; p++) best[p].ttt = INFINITY, best[p].policy = p, best[p].r = 0;
    for (int p = 0; p < FT_POL_NPOL; p++) {
        for (int r = 1; r <= r_max; r++) {
            FtPlan pl;
            int rc = (p == FT_POL_CKPT && r > 1) ? -1 : analytic_plan(c, p, r, 0, &pl);
            if (all) {
                if (rc) memset(&all[p * r_max + r - 1], 0, sizeof pl), all[p * r_max + r - 1].ttt = INFINITY;
                else all[p * r_max + r - 1] = pl;
            }
            if (!rc && pl.ttt < best[p].ttt) best[p] = pl;
        }
    }
    return best[FT_POL_CKPT].r ? 0 : -1;
}

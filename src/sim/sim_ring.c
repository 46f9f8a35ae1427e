/* sim_ring.c: Monte Carlo of the SPARe ring model, independent of the counting in
 * analytic_spare.c: groups fail in a uniformly random order (a partial Fisher-Yates shuffle of
 * the trial's own stream) until r consecutive groups are down; after each failure the depth
 * oracle gives the stack depth. It is the simulator's side of the mu(N, r) / S(N, r) tests and
 * the fallback of the optimizer when the exact count is too costly. */
#include <stdlib.h>

#include "ftllm/analytic.h"
#include "ftllm/sim.h"

/* One epoch into out (SIM_RING_NOUT sums); per stage k, alive[k] += 1 and inv[k] += 1/d_k when
 * they are not NULL. */
static int ring_epoch(FtDepthOracle *o, int *perm, FtRng *g, double *out, double *alive, double *inv)
{
    int N = o->N;
    for (int i = 0; i < N; i++) perm[i] = i;
    depth_oracle_reset(o);
    double T = 0, sd = 0, su = 0, sdu = 0, sinv = 0;
    int d = 1;
    for (int k = 0; k < N; k++) {
        /* state k (k failed, no wipe-out yet) at depth d lasts one interval */
        double w = 1.0 / (N - k);
        T += 1, sd += d, su += w, sdu += d * w, sinv += w / d;
        if (alive) alive[k] += 1, inv[k] += 1.0 / d;
        int j = k + (int)rng_below(g, (uint64_t)(N - k));
        int x = perm[j];
        perm[j] = perm[k], perm[k] = x;
        d = depth_oracle_fail(o, x);
        if (d > o->r) break;
    }
    out[0] = T, out[1] = sd, out[2] = su, out[3] = sdu, out[4] = sinv;
    return 0;
}

int sim_ring_trial(int N, int r, uint64_t seed, int trial, double *out)
{
    FtDepthOracle o;
    if (depth_oracle_init(&o, N, r)) return -1;
    int *perm = malloc((size_t)N * sizeof *perm);
    if (!perm) {
        depth_oracle_free(&o);
        return -1;
    }
    FtRng g;
    rng_seed(&g, seed, (uint64_t)trial);
    ring_epoch(&o, perm, &g, out, NULL, NULL);
    free(perm);
    depth_oracle_free(&o);
    return 0;
}

static int epoch_mc(int N, int r, int trials, uint64_t seed, FtSpareEpoch *out, FtEpochStages *st)
{
    FtDepthOracle o;
    if (trials < 1 || depth_oracle_init(&o, N, r)) return -1;
    int *perm = malloc((size_t)N * sizeof *perm);
    if (!perm) {
        depth_oracle_free(&o);
        return -1;
    }
    long double T = 0, sd = 0, su = 0, sdu = 0, sinv = 0;
    for (int t = 0; t < trials; t++) {
        FtRng g;
        double x[SIM_RING_NOUT];
        rng_seed(&g, seed, (uint64_t)t);
        ring_epoch(&o, perm, &g, x, st ? st->alive : NULL, st ? st->inv_depth : NULL);
        T += x[0], sd += x[1], su += x[2], sdu += x[3], sinv += x[4];
    }
    free(perm);
    depth_oracle_free(&o);
    out->N = N, out->r = r;
    out->mu = (double)(T / trials);
    out->S = (double)(sd / T);
    out->S_time = (double)(sdu / su);
    out->thr_time = (double)(sinv / su);
    out->up_units = (double)(su / trials);
    out->exact = 0;
    if (st) { /* sums -> P(T > k) and E[1/d_k | T > k] */
        st->M = N, st->K = 0;
        for (int k = 0; k < N; k++)
            if (st->alive[k] > 0) {
                st->inv_depth[k] /= st->alive[k];
                st->alive[k] /= trials;
                st->K = k;
            }
    }
    return 0;
}

int sim_spare_stages_mc(int N, int r, int trials, uint64_t seed, FtSpareEpoch *out, FtEpochStages *st)
{
    if (N < 1 || epoch_stages_alloc(st, N)) return -1;
    if (epoch_mc(N, r, trials, seed, out, st)) {
        epoch_stages_free(st);
        return -1;
    }
    return 0;
}

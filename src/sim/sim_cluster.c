/* sim_cluster.c: one trial of a whole training run on a cluster (model in sim.h).
 *
 * The run is a state machine over three phases (compute, checkpoint, restart) driven by one
 * event queue of group failures. Between events the work advances at the policy's throughput
 * (1/depth), so a trial costs O(failures x (log N + r log N)) whatever the run's length: a
 * 90-day run of 600k GPUs is about 26k failures.
 * Time-weighted depth (the compute overhead) is accumulated over compute time only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "ftllm/sim.h"

enum { PH_COMPUTE, PH_CKPT };

struct trial {
    const FtSimSpec *s;
    FtRng g;
    FtHeap h;
    FtDepthOracle o;
    int N, r, policy, M; /* M: groups in use (replication uses floor(N/r) r) */
    int G;               /* clocks per group: 1 (group-level, exponential) or its GPUs (Weibull) */
    int *cnt;            /* replication: failed per set */
    unsigned char *down; /* per group: out until the restart */
    int *failed;         /* clocks that failed since the restart (to renew) */
    int nfailed;
    double mean_life, wb_scale, wb_shape;
};

static double draw_life(struct trial *t)
{
    if (t->s->c.law == FT_LAW_WEIBULL) return rng_weibull(&t->g, t->wb_shape, t->wb_scale);
    return rng_exp(&t->g, t->mean_life);
}

/* The work of a piece that starts at `now`: the schedule's segment, or the fixed interval. */
static double piece_interval(const FtSimSpec *s, double now, int *si, double W)
{
    if (s->sched && s->sched->n > 0) {
        while (*si + 1 < s->sched->n && now >= s->sched->t[*si + 1]) (*si)++;
        return s->sched->tau[*si] > 0 ? s->sched->tau[*si] : W;
    }
    return s->interval > 0 ? s->interval : W;
}

static void log_ev(FILE *f, double t, const char *what, int g, double depth, double work)
{
    if (f) fprintf(f, "%.3f,%s,%d,%.4g,%.3f\n", t, what, g, depth, work);
}

int sim_cluster_trial(const FtSimSpec *s, int trial, double *out)
{
    struct trial t;
    memset(&t, 0, sizeof t);
    t.s = s;
    t.N = cluster_groups(&s->c);
    t.policy = s->policy;
    t.r = s->policy == FT_POL_CKPT ? 1 : s->r;
    if (t.N < 1 || t.r < 1 || t.r > t.N) return -1;
    t.M = s->policy == FT_POL_REP ? (t.N / t.r) * t.r : t.N;
    /* Exponential: one memoryless clock per group (rate g / MTBF) is exact. Weibull: one clock
     * per GPU, so that replacing a failed GPU does not make its whole group new. */
    t.G = s->c.law == FT_LAW_WEIBULL ? (int)s->c.gpus_per_replica : 1;
    double g_per = (double)s->c.gpus_per_replica;
    t.mean_life = s->c.gpu_mtbf / g_per;
    t.wb_shape = s->c.weibull_shape > 0 ? s->c.weibull_shape : 1.0;
    t.wb_scale = s->c.gpu_mtbf / tgamma(1.0 + 1.0 / t.wb_shape);
    rng_seed(&t.g, s->seed, (uint64_t)trial);
    int rc = -1;
    long long nclk = (long long)t.M * t.G;
    if (nclk > 2000000000LL || heap_init(&t.h, (int)nclk)) return -1;
    t.failed = malloc((size_t)nclk * sizeof *t.failed);
    t.down = calloc((size_t)t.N, 1);
    t.cnt = calloc((size_t)t.N / (size_t)t.r + 1, sizeof *t.cnt);
    if (!t.failed || !t.cnt || !t.down) goto out;
    if (t.policy == FT_POL_SPARE && t.r > 1 && depth_oracle_init(&t.o, t.N, t.r)) goto out;
    FILE *lf = trial == 0 ? s->log : NULL;
    if (lf) fprintf(lf, "time_s,event,group,depth,work_s\n");

    for (int i = 0; i < (int)nclk; i++) heap_set(&t.h, i, draw_life(&t));
    const double W = s->c.steps * s->c.step, C = s->c.ckpt, R = s->c.restart + s->c.latency;
    int si = 0; /* schedule segment */
    double tau = piece_interval(s, 0, &si, W);
    double now = 0, committed = 0, pending = 0, ckpt_end = 0;
    double downtime = 0, compute_time = 0, depth_time = 0;
    double nfail = 0, nmasked = 0, nrestart = 0, lost = 0, nckpt = 0, events = 0;
    double slow = t.policy == FT_POL_REP ? (double)t.N / (t.N / t.r) : 1.0; /* wall per work */
    int phase = PH_COMPUTE, depth = 1;
    for (;;) {
        double tf = heap_top_time(&t.h);
        if (phase == PH_COMPUTE) {
            double target = fmin(tau, W - committed); /* work of this piece */
            double need = (target - pending) * slow;
            if (now + need <= tf) {
                compute_time += need, depth_time += need * slow;
                now += need, pending = target;
                if (committed + pending >= W * (1 - 1e-15)) {
                    committed = W;
                    log_ev(lf, now, "done", -1, slow, committed);
                    break;
                }
                phase = PH_CKPT, ckpt_end = now + C;
                continue;
            }
            compute_time += tf - now, depth_time += (tf - now) * slow;
            pending += (tf - now) / slow;
            now = tf;
        } else {
            if (ckpt_end <= tf) {
                now = ckpt_end;
                committed += pending, pending = 0, nckpt++;
                log_ev(lf, now, "checkpoint", -1, slow, committed);
                phase = PH_COMPUTE;
                tau = piece_interval(s, now, &si, W);
                continue;
            }
            now = tf;
        }
        /* clock x fails at `now`; its group g goes down unless it already is */
        int x = heap_top(&t.h), g = x / t.G;
        heap_remove(&t.h, x);
        events++;
        t.failed[t.nfailed++] = x;
        if (t.down[g]) continue; /* a GPU of a group already out: replaced at the restart */
        t.down[g] = 1;
        nfail++;
        int wipe = 1;
        if (t.r > 1 && t.policy == FT_POL_REP) {
            wipe = ++t.cnt[g / t.r] >= t.r;
        } else if (t.r > 1 && t.policy == FT_POL_SPARE) {
            depth = depth_oracle_fail(&t.o, g);
            wipe = depth > t.r;
            if (!wipe) slow = depth;
        }
        if (!wipe) {
            nmasked++;
            log_ev(lf, now, "masked", g, slow, committed + pending);
            continue;
        }
        /* wipe-out: lose the piece in progress (and a checkpoint being written), restart,
         * replace every failed GPU (group) */
        nrestart++;
        lost += pending;
        log_ev(lf, now, "wipeout", g, slow, committed);
        pending = 0, phase = PH_COMPUTE;
        double back = now + R;
        downtime += R;
        for (int i = 0; i < t.nfailed; i++) heap_set(&t.h, t.failed[i], back + draw_life(&t));
        t.nfailed = 0;
        memset(t.down, 0, (size_t)t.N);
        while (heap_top_time(&t.h) < back) { /* failures inside the restart are absorbed */
            int y = heap_top(&t.h);
            heap_set(&t.h, y, back + draw_life(&t));
            events++;
        }
        if (t.policy == FT_POL_REP) memset(t.cnt, 0, ((size_t)t.N / (size_t)t.r + 1) * sizeof *t.cnt);
        if (t.policy == FT_POL_SPARE && t.r > 1) depth_oracle_reset(&t.o);
        depth = 1;
        if (t.policy == FT_POL_SPARE) slow = 1.0;
        now = back;
        tau = piece_interval(s, now, &si, W);
        log_ev(lf, now, "restarted", -1, slow, committed);
    }
    out[SIM_TTT] = now;
    out[SIM_AVAIL] = now > 0 ? 1.0 - downtime / now : 1.0;
    out[SIM_DEPTH] = compute_time > 0 ? depth_time / compute_time : 1.0;
    out[SIM_FAILURES] = nfail;
    out[SIM_MASKED] = nmasked;
    out[SIM_RESTARTS] = nrestart;
    out[SIM_LOST] = lost;
    out[SIM_CKPTS] = nckpt;
    out[SIM_EVENTS] = events;
    rc = 0;
out:
    if (t.policy == FT_POL_SPARE && t.r > 1) depth_oracle_free(&t.o);
    free(t.failed), free(t.cnt), free(t.down);
    heap_free(&t.h);
    return rc;
}

/* sim_sparing.c: composite-process simulator of the sparing model (analytic_sparing.c): every
 * tray and rack alternates up / in repair with exponential times, blocks are put in and out of
 * use explicitly, and a synchronous job runs, checkpoints, is interrupted and restarts on top.
 * It shares no equation with the analytic model: the CETT it measures (work done over the
 * horizon times L K / ((L+R)(K+I))) checks the closed form.
 *
 * Rules: a zone keeps L blocks in use when it can; a block in use has K trays in use. A failed
 * in-use tray is replaced by an idle up tray of the same block if there is one (intra-block
 * spare), else the block leaves use and the zone takes the first usable idle block (inter-block
 * spare); a repaired part may make a block usable again, and a zone short of blocks takes it.
 * The job runs while every zone has L blocks in use; a failure of an in-use part while it runs
 * interrupts it (the piece since the last checkpoint is lost, a restart follows; a failure during
 * the restart starts it over). The job starts with a restart.
 * Failure law (FtSparing.law): exponential up times, and parts start in their stationary state (up
 * with probability mtbf / (mtbf + mttr)), so there is no warm-up bias; Weibull up times (shape
 * FtSparing.shape, the same mean), every part up and new at t = 0 and new again after each repair
 * (shape < 1: infant mortality at the start and after every repair). Repair times are
 * exponential under both laws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/sim.h"

enum { J_RESTART, J_COMPUTE, J_CKPT };

struct sps {
    const FtSparing *p;
    int nb, nt;               /* blocks, trays */
    unsigned char *up, *tin;  /* per part: up; per tray: in use */
    unsigned char *bin;       /* per block: in use */
    int *ups, *zin;           /* per block: up trays; per zone: blocks in use */
    int full;                 /* zones with L blocks in use */
};

static int usable(const struct sps *s, int b)
{
    return s->up[s->nt + b] && s->ups[b] >= s->p->K;
}

static void assign(struct sps *s, int b)
{
    int KI = s->p->K + s->p->I, n = 0;
    s->bin[b] = 1;
    for (int i = 0; i < KI && n < s->p->K; i++) {
        int tr = b * KI + i;
        if (s->up[tr]) s->tin[tr] = 1, n++;
    }
    int z = b / (s->p->L + s->p->R);
    if (++s->zin[z] == s->p->L) s->full++;
}

static void release(struct sps *s, int b)
{
    int KI = s->p->K + s->p->I;
    s->bin[b] = 0;
    for (int i = 0; i < KI; i++) s->tin[b * KI + i] = 0;
    int z = b / (s->p->L + s->p->R);
    if (s->zin[z]-- == s->p->L) s->full--;
}

static void fill(struct sps *s, int z)
{
    int LR = s->p->L + s->p->R;
    for (int j = 0; j < LR && s->zin[z] < s->p->L; j++) {
        int b = z * LR + j;
        if (!s->bin[b] && usable(s, b)) assign(s, b);
    }
}

/* The up time of a part that starts new (exponential: memoryless, drawn as before). */
static double up_time(FtRng *g, const FtSparing *p, int tray, const double wb_scale[2])
{
    if (p->law == FT_LAW_WEIBULL) return rng_weibull(g, p->shape, wb_scale[tray]);
    return rng_exp(g, tray ? p->tray_mtbf : p->rack_mtbf);
}

int sim_sparing_trial(const FtSparingSim *ss, int trial, double *out)
{
    const FtSparing *p = &ss->s;
    struct sps s;
    memset(&s, 0, sizeof s);
    s.p = p;
    int LR = p->L + p->R, KI = p->K + p->I;
    s.nb = p->B * LR;
    s.nt = s.nb * KI;
    int nparts = s.nt + s.nb, rc = -1;
    FtHeap h;
    if (heap_init(&h, nparts)) return -1;
    s.up = calloc((size_t)nparts, 1);
    s.tin = calloc((size_t)s.nt, 1);
    s.bin = calloc((size_t)s.nb, 1);
    s.ups = calloc((size_t)s.nb, sizeof *s.ups);
    s.zin = calloc((size_t)p->B, sizeof *s.zin);
    if (!s.up || !s.tin || !s.bin || !s.ups || !s.zin) goto out;
    FtRng g;
    rng_seed(&g, ss->seed, (uint64_t)trial);
    const double at = p->tray_mtbf / (p->tray_mtbf + p->tray_mttr);
    const double ar = p->rack_mtbf / (p->rack_mtbf + p->rack_mttr);
    const int wb = p->law == FT_LAW_WEIBULL;
    if (wb && !(p->shape > 0)) goto out;
    const double gk = wb ? tgamma(1.0 + 1.0 / p->shape) : 1.0;
    const double wb_scale[2] = {p->rack_mtbf / gk, p->tray_mtbf / gk}; /* [tray?] */
    for (int i = 0; wb && i < nparts; i++) { /* every part up and new */
        s.up[i] = 1;
        if (i < s.nt) s.ups[i / KI]++;
        heap_set(&h, i, up_time(&g, p, i < s.nt, wb_scale));
    }
    for (int i = 0; !wb && i < nparts; i++) {
        int tray = i < s.nt;
        double a = tray ? at : ar, mtbf = tray ? p->tray_mtbf : p->rack_mtbf,
               mttr = tray ? p->tray_mttr : p->rack_mttr;
        s.up[i] = rng_uniform(&g) < a;
        if (tray && s.up[i]) s.ups[i / KI]++;
        double d = s.up[i] ? rng_exp(&g, mtbf) : (mttr > 0 ? rng_exp(&g, mttr) : 0);
        heap_set(&h, i, d);
    }
    for (int z = 0; z < p->B; z++) fill(&s, z);
    /* the job, in hours */
    const double tau = p->interval / 3600.0, C = p->ckpt / 3600.0, D = p->restart / 3600.0;
    int phase = J_RESTART;
    double rem = D, pending = 0, work = 0, now = 0, run_time = 0, interrupts = 0, events = 0;
    const double H = ss->horizon;
    while (now < H) {
        double tn = fmin(heap_top_time(&h), H);
        if (s.full == p->B) { /* runnable: advance the job by tn - now */
            double dt = tn - now;
            run_time += dt;
            while (dt > 0) {
                if (phase == J_RESTART || phase == J_CKPT) {
                    double x = fmin(dt, rem);
                    rem -= x, dt -= x;
                    if (rem <= 0) {
                        if (phase == J_CKPT) work += pending, pending = 0;
                        phase = J_COMPUTE;
                    }
                } else {
                    double x = fmin(dt, tau - pending);
                    pending += x, dt -= x;
                    if (pending >= tau) phase = J_CKPT, rem = C;
                }
            }
        }
        now = tn;
        if (now >= H) break;
        int id = heap_top(&h);
        events++;
        int tray = id < s.nt, b = tray ? id / KI : id - s.nt, z = b / LR;
        int running = s.full == p->B; /* running or restarting */
        if (s.up[id]) { /* a failure */
            s.up[id] = 0;
            int hit = 0;
            if (tray) {
                s.ups[b]--;
                if (s.tin[id]) {
                    s.tin[id] = 0;
                    hit = 1;
                    int j;
                    for (j = 0; j < KI; j++) {
                        int t2 = b * KI + j;
                        if (s.up[t2] && !s.tin[t2]) break;
                    }
                    if (j < KI) s.tin[b * KI + j] = 1; /* intra-block spare */
                    else release(&s, b), fill(&s, z); /* inter-block spare, if any */
                }
            } else if (s.bin[b]) {
                hit = 1;
                release(&s, b);
                fill(&s, z);
            }
            if (hit) { /* blocked jobs are already waiting for a restart */
                phase = J_RESTART, rem = D, pending = 0;
                interrupts += running;
            }
            heap_set(&h, id, now + (tray ? (p->tray_mttr > 0 ? rng_exp(&g, p->tray_mttr) : 0)
                                         : (p->rack_mttr > 0 ? rng_exp(&g, p->rack_mttr) : 0)));
        } else { /* a repair */
            s.up[id] = 1;
            if (tray) s.ups[b]++;
            if (!s.bin[b] && s.zin[z] < p->L && usable(&s, b)) assign(&s, b);
            heap_set(&h, id, now + up_time(&g, p, tray, wb_scale));
        }
    }
    work += pending;
    double util = (double)p->L * p->K / ((double)LR * KI);
    out[SPS_CETT] = work / H * util;
    out[SPS_AVAIL] = run_time / H;
    out[SPS_INTERRUPTS] = interrupts;
    out[SPS_EVENTS] = events;
    rc = 0;
out:
    free(s.up), free(s.tin), free(s.bin), free(s.ups), free(s.zin);
    heap_free(&h);
    return rc;
}

/* sim_core.c: the simulator's building blocks: random numbers, the event queue, statistics and
 * the spreading of trials over MPI ranks.
 *
 * RNG: counter-based. Output i of stream (seed, stream) is mix(key + i * W), where key is
 * mix(seed) combined with mix(stream), W is an odd Weyl increment and mix is a 64-bit
 * xor-shift-multiply finalizer (two multiply/xor-shift rounds). Any trial's stream can be
 * produced on any rank in any order, which makes results independent of the rank count.
 * Uniforms take the top 53 bits and are shifted off zero, so logs never see 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "ftllm/sim.h"

#define WEYL 0x9E3779B97F4A7C15ULL

static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 31;
    z *= 0x7FB5D329728EA185ULL;
    z ^= z >> 27;
    z *= 0x81DADEF4BC2DD44DULL;
    z ^= z >> 33;
    return z;
}

void rng_seed(FtRng *g, uint64_t seed, uint64_t stream)
{
    g->key = mix64(seed * WEYL + 0x243F6A8885A308D3ULL) ^ mix64(~stream * 0xD1342543DE82EF95ULL);
    g->ctr = 0;
}

uint64_t rng_next(FtRng *g) { return mix64(g->key + (++g->ctr) * WEYL); }

double rng_uniform(FtRng *g) { return ((rng_next(g) >> 11) + 0.5) * 0x1.0p-53; }

uint64_t rng_below(FtRng *g, uint64_t n)
{
    /* rejection from the top of the range: exact uniform */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(g);
    while (x >= lim);
    return x % n;
}

double rng_exp(FtRng *g, double mean) { return -mean * log(rng_uniform(g)); }

double rng_weibull(FtRng *g, double shape, double scale)
{
    return scale * pow(-log(rng_uniform(g)), 1.0 / shape);
}

/* ---- heap ------------------------------------------------------------------------------------ */

int heap_init(FtHeap *h, int cap)
{
    memset(h, 0, sizeof *h);
    h->cap = cap;
    h->id = malloc((size_t)cap * sizeof *h->id);
    h->pos = malloc((size_t)cap * sizeof *h->pos);
    h->t = malloc((size_t)cap * sizeof *h->t);
    if (!h->id || !h->pos || !h->t) {
        heap_free(h);
        return -1;
    }
    for (int i = 0; i < cap; i++) h->pos[i] = -1;
    return 0;
}

void heap_free(FtHeap *h)
{
    free(h->id), free(h->pos), free(h->t);
    memset(h, 0, sizeof *h);
}

/* ties broken by id, so the order is deterministic */
static inline int before(const FtHeap *h, int a, int b)
{
    return h->t[a] < h->t[b] || (h->t[a] == h->t[b] && a < b);
}

static void sift_up(FtHeap *h, int i)
{
    int x = h->id[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!before(h, x, h->id[p])) break;
        h->id[i] = h->id[p], h->pos[h->id[i]] = i;
        i = p;
    }
    h->id[i] = x, h->pos[x] = i;
}

static void sift_down(FtHeap *h, int i)
{
    int x = h->id[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(h, h->id[c + 1], h->id[c])) c++;
        if (!before(h, h->id[c], x)) break;
        h->id[i] = h->id[c], h->pos[h->id[i]] = i;
        i = c;
    }
    h->id[i] = x, h->pos[x] = i;
}

void heap_set(FtHeap *h, int id, double t)
{
    FT_ASSERT(id >= 0 && id < h->cap);
    if (h->pos[id] < 0) {
        h->t[id] = t;
        h->id[h->n] = id, h->pos[id] = h->n;
        sift_up(h, h->n++);
        return;
    }
    double old = h->t[id];
    h->t[id] = t;
    if (t < old) sift_up(h, h->pos[id]);
    else sift_down(h, h->pos[id]);
}

void heap_remove(FtHeap *h, int id)
{
    int i = h->pos[id];
    if (i < 0) return;
    h->pos[id] = -1;
    if (--h->n == i) return;
    int x = h->id[h->n];
    h->id[i] = x, h->pos[x] = i;
    sift_up(h, i);
    sift_down(h, h->pos[x]);
}

/* ---- statistics ----------------------------------------------------------------------------- */

FtStat stat_of(const double *x, int n, double z)
{
    FtStat s = {0, 0, 0, n};
    if (n < 1) return s;
    long double m = 0, q = 0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
    s.mean = (double)m;
    s.sd = n > 1 ? (double)sqrtl(q / (n - 1)) : 0;
    s.half = n > 1 ? z * s.sd / sqrt(n) : INFINITY;
    return s;
}

FtStat stat_ratio(const double *x, const double *y, int n, double z)
{
    FtStat s = {0, 0, 0, n};
    if (n < 1) return s;
    long double sx = 0, sy = 0;
    for (int i = 0; i < n; i++) sx += x[i], sy += y[i];
    double R = (double)(sx / sy), my = (double)(sy / n);
    long double q = 0;
    for (int i = 0; i < n; i++) {
        double e = x[i] - R * y[i];
        q += (long double)e * e;
    }
    s.mean = R;
    s.sd = n > 1 ? (double)sqrtl(q / (n - 1)) / my : 0;
    s.half = n > 1 ? z * s.sd / sqrt(n) : INFINITY;
    return s;
}

int sim_trials(MPI_Comm comm, int ntrials, int nout, FtTrialFn fn, void *ctx, double *out_all)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t n = (size_t)ntrials * nout;
    double *mine = calloc(n ? n : 1, sizeof *mine);
    if (!mine) FT_DIE("out of memory for %d trials", ntrials);
    int bad = 0;
    for (int t = rank; t < ntrials; t += size)
        if (fn(t, mine + (size_t)t * nout, ctx)) bad = 1;
    int anybad = 0;
    FT_CHECK_MPI(MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, comm));
    /* one non-zero contributor per slot: the sum is exact, the same on every rank */
    for (size_t off = 0; off < n; off += 1 << 24) {
        int cnt = (int)(n - off < (1 << 24) ? n - off : (1 << 24));
        FT_CHECK_MPI(MPI_Allreduce(mine + off, out_all + off, cnt, MPI_DOUBLE, MPI_SUM, comm));
    }
    free(mine);
    return anybad ? -1 : 0;
}

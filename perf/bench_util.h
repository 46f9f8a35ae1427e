/* bench_util.h: what the training benchmarks share (header-only: each bench is one file).
 *   bench_synth_fetch  an FtBatchSource fetch of seeded random tokens (ctx: int dims[2] = T, V):
 *                      any sequence number gives the same tokens, no data files needed
 *   bench_median       the median of v[0..n) (sorts v in place) */
#ifndef FTLLM_BENCH_UTIL_H
#define FTLLM_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "ftllm/model.h"

static inline void bench_synth_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    const int *dims = ctx; /* T, V */
    uint64_t s = first * 2654435761u + 1;
    for (int i = 0; i < B * dims[0]; i++) {
        in[i] = (int)(model_rng_next(&s) % (uint64_t)dims[1]);
        tg[i] = (int)(model_rng_next(&s) % (uint64_t)dims[1]);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif

/* ops_moe_expert.cu: MOE_EXPERT (ops.h), the grouped matmul: rows come in blocks (source group
 * g, local expert e), block (g, e) multiplied by expert e's weights. The block sizes (counts,
 * G El ints) live on the device; they are copied to the host (a small wait on the stream) and
 * each block is one cuBLAS GEMM, in block order, as on the CPU. Backward accumulates dw and db
 * of each expert over its blocks in block order onto the earlier sum.
 * Not yet: a grouped GEMM that reads the counts on the device (no host round trip). */
#include "ops_cuda.h"

/* The counts on the host; dies when they do not fit the R rows (as the CPU does). */
static const int *expert_counts(CudaCtx *cx, const FtOpCall *c, long long G, long long El,
                                long long R, long long *total)
{
    const int *counts = cuda_ints_to_host(cx, (const int *)c->in[3], (size_t)(G * El));
    long long t = 0;
    for (long long b = 0; b < G * El; b++) {
        FT_ASSERT(counts[b] >= 0);
        t += counts[b];
    }
    if (t > R) FT_DIE("moe expert: %lld rows routed to this rank, buffer holds %lld", t, R);
    *total = t;
    return counts;
}

void cuda_moe_expert_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *x = (const float *)c->in[0], *w = (const float *)c->in[1],
                *b = (const float *)c->in[2];
    float *y = (float *)c->out[0];
    long long R = c->d[0], C = c->d[1], OC = c->d[2], El = c->d[3], G = (long long)c->x[0];
    long long total, r0 = 0;
    const int *counts = expert_counts(cx, c, G, El, R, &total);
    for (long long g = 0; g < G; g++)
        for (long long e = 0; e < El; e++) {
            long long n = counts[g * El + e];
            if (n) {
                if (b) cuda_rows_fill(cx, y + r0 * OC, b + e * OC, n, OC);
                cuda_gemm_xwt(cx, x + r0 * C, w + e * OC * C, y + r0 * OC, n, C, OC,
                              b ? 1.0f : 0.0f);
            }
            r0 += n;
        }
    if (R > total)
        CUDA_CHECK(cudaMemsetAsync(y + total * OC, 0, sizeof(float) * (size_t)((R - total) * OC),
                                   cx->stream));
}

void cuda_moe_expert_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *dy = (const float *)c->in[0], *x = (const float *)c->in[1],
                *w = (const float *)c->in[2];
    float *dx = (float *)c->out[0], *dw = (float *)c->out[1], *db = (float *)c->out[2];
    long long R = c->d[0], C = c->d[1], OC = c->d[2], El = c->d[3], G = (long long)c->x[0];
    cuda_init_from(cx, dw, (const float *)c->in[4], (size_t)(El * OC * C));
    if (db) cuda_init_from(cx, db, (const float *)c->in[5], (size_t)(El * OC));
    long long total, r0 = 0;
    const int *counts = expert_counts(cx, c, G, El, R, &total);
    for (long long g = 0; g < G; g++)
        for (long long e = 0; e < El; e++) {
            long long n = counts[g * El + e];
            if (n) {
                cuda_gemm_bwd(cx, dy + r0 * OC, x + r0 * C, w + e * OC * C,
                              dx ? dx + r0 * C : NULL, dw + e * OC * C, n, C, OC, 1.0f);
                if (db) cuda_colsum(cx, db + e * OC, db + e * OC, dy + r0 * OC, n, OC);
            }
            r0 += n;
        }
    if (dx && R > total)
        CUDA_CHECK(cudaMemsetAsync(dx + total * C, 0, sizeof(float) * (size_t)((R - total) * C),
                                   cx->stream));
}

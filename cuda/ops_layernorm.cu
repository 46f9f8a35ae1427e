/* ops_layernorm.cu: LAYERNORM (ops.h). One warp per row (LN_ROWS rows a block): the row's mean,
 * variance and backward sums are accumulated in double (as on the CPU), each lane over the
 * columns lane, lane + 32, ..., then summed over the warp by a butterfly of shuffles (every lane
 * gets the same bits: each step adds the same two values, in either order), with no block
 * barrier. Until 2026-12-04 a block of FT_CUDA_NT threads took a row and reduced in its fixed
 * tree (bench_ops on the H200: the forward at 3.2x and the backward at 3.5x its byte floor,
 * 7 ms of a GPT-2 124M step; the block's barriers, for 3 columns a thread). dw and db sum over
 * rows: per-chunk partial sums (FT_CUDA_ROWS_CHUNK rows, each one thread's loop in row order)
 * added in chunk order onto the earlier sum (colsum.cu). */
#include "ops_cuda.h"

#define LN_ROWS 8 /* rows of a block, one a warp */

/* the sum over the warp's lanes, the same bits in every lane */
template <typename T> __device__ __forceinline__ T warp_allsum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void __launch_bounds__(32 * LN_ROWS)
layernorm_fwd_kernel(float *y, float *mean, float *rstd, const float *x, const float *w,
                     const float *b, long long N, long long C)
{
    long long n = blockIdx.x * (long long)LN_ROWS + (threadIdx.x >> 5);
    if (n >= N) return; /* the whole warp: no block barrier below */
    int lane = threadIdx.x & 31;
    const float *xr = x + n * C;
    double s = 0;
    for (long long i = lane; i < C; i += 32) s += xr[i];
    s = warp_allsum(s);
    float m = (float)(s / C);
    double v = 0;
    for (long long i = lane; i < C; i += 32) {
        float d = xr[i] - m;
        v += (double)d * d;
    }
    v = warp_allsum(v);
    float rs = (float)(1.0 / sqrt(v / C + 1e-5));
    float *yr = y + n * C;
    for (long long i = lane; i < C; i += 32) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
    if (lane == 0) mean[n] = m, rstd[n] = rs;
}

static unsigned ln_blocks(long long N) { return (unsigned)((N + LN_ROWS - 1) / LN_ROWS); }

void cuda_layernorm_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long N = c->d[0], C = c->d[1];
    if (N == 0) return;
    layernorm_fwd_kernel<<<ln_blocks(N), 32 * LN_ROWS, 0, cx->stream>>>(
        (float *)c->out[0], (float *)c->out[1], (float *)c->out[2], (const float *)c->in[0],
        (const float *)c->in[1], (const float *)c->in[2], N, C);
    CUDA_LAUNCHED();
}

/* dx = dres + rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)), dnorm = dy w */
__global__ void __launch_bounds__(32 * LN_ROWS)
layernorm_bwd_dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                        const float *mean, const float *rstd, const float *dres, long long N,
                        long long C)
{
    long long n = blockIdx.x * (long long)LN_ROWS + (threadIdx.x >> 5);
    if (n >= N) return;
    int lane = threadIdx.x & 31;
    const float *g = dy + n * C, *xr = x + n * C;
    float m = mean[n], rs = rstd[n];
    double s1 = 0, s2 = 0;
    for (long long i = lane; i < C; i += 32) {
        float xh = (xr[i] - m) * rs, dn = g[i] * w[i];
        s1 += dn;
        s2 += (double)dn * xh;
    }
    s1 = warp_allsum(s1);
    s2 = warp_allsum(s2);
    float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
    float *o = dx + n * C;
    const float *r = dres ? dres + n * C : NULL;
    for (long long i = lane; i < C; i += 32) {
        float xh = (xr[i] - m) * rs;
        float v = rs * (g[i] * w[i] - m1 - xh * m2);
        o[i] = r ? r[i] + v : v;
    }
}

#define LN_COL_NT 128

/* partial sums of chunk k (blockIdx.x): pw[k, i] = sum dy xhat, pb[k, i] = sum dy */
__global__ void layernorm_bwd_part_kernel(float *pw, float *pb, const float *dy, const float *x,
                                          const float *mean, const float *rstd, long long N,
                                          long long C)
{
    long long k = blockIdx.x, i = blockIdx.y * (long long)LN_COL_NT + threadIdx.x;
    if (i >= C) return;
    long long n0 = k * FT_CUDA_ROWS_CHUNK;
    long long n1 = n0 + FT_CUDA_ROWS_CHUNK < N ? n0 + FT_CUDA_ROWS_CHUNK : N;
    float sw = 0.0f, sb = 0.0f;
    for (long long n = n0; n < n1; n++) {
        float g = dy[n * C + i];
        sw += g * ((x[n * C + i] - mean[n]) * rstd[n]);
        sb += g;
    }
    pw[k * C + i] = sw;
    pb[k * C + i] = sb;
}

void cuda_layernorm_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *dy = (const float *)c->in[0], *x = (const float *)c->in[1],
                *w = (const float *)c->in[2], *mean = (const float *)c->in[3],
                *rstd = (const float *)c->in[4], *dres = (const float *)c->in[5],
                *dw_prev = (const float *)c->in[6], *db_prev = (const float *)c->in[7];
    float *dx = (float *)c->out[0], *dw = (float *)c->out[1], *db = (float *)c->out[2];
    long long N = c->d[0], C = c->d[1];
    FT_ASSERT(dw != dw_prev && db != db_prev);
    if (N > 0) {
        layernorm_bwd_dx_kernel<<<ln_blocks(N), 32 * LN_ROWS, 0, cx->stream>>>(dx, dy, x, w, mean,
                                                                               rstd, dres, N, C);
        CUDA_LAUNCHED();
    }
    if (C == 0) return;
    long long nchunk = (N + FT_CUDA_ROWS_CHUNK - 1) / FT_CUDA_ROWS_CHUNK;
    size_t pbytes = cuda_align(sizeof(float) * (size_t)((nchunk ? nchunk : 1) * C));
    char *s = (char *)cuda_scratch(cx, 2 * pbytes);
    float *pw = (float *)s, *pb = (float *)(s + pbytes);
    if (nchunk) {
        dim3 grid((unsigned)nchunk, (unsigned)((C + LN_COL_NT - 1) / LN_COL_NT));
        layernorm_bwd_part_kernel<<<grid, LN_COL_NT, 0, cx->stream>>>(pw, pb, dy, x, mean, rstd,
                                                                      N, C);
        CUDA_LAUNCHED();
    }
    cuda_colsum_finish(cx, dw, dw_prev, pw, nchunk, C);
    cuda_colsum_finish(cx, db, db_prev, pb, nchunk, C);
}

/* ops_attention_flash.cu: ATTENTION (ops.h) tiled, flash-attention style, for head sizes 32 and
 * 64, in fp32: the scores never leave the chip. Chosen with FTLLM_CUDA_ATTENTION=flash in the
 * environment (ops_attention.cu); the per-row kernels stay the default until this one has
 * been measured on a GPU (written and compiled without one).
 *
 * One thread per row, 64 rows per block, tiles of 64 rows of the other operand in shared memory
 * (read by every thread at the same address: broadcasts). Each sum runs in one thread in a
 * fixed order, and no two threads write the same element: no atomics, the same bits from run to
 * run and on either stream, whatever the GPU's SM count.
 *  - Forward (a block of queries): over the key tiles up to the diagonal, the online softmax
 *    (running maximum m, running sum l, the output rescaled when m grows); y = acc / l and
 *    lse = m + log(l).
 *  - Backward, three kernels, every probability recomputed as exp(q.k scale - lse):
 *    dq (a block of queries): D_t = sum_t2 p (dy_t . v_t2) in a first pass over the key tiles
 *    (kept for the two others), then dq_t = scale sum_t2 p (dy_t . v_t2 - D_t) k_t2;
 *    dv (a block of keys): dv_t2 = sum_{t >= t2} p dy_t;
 *    dk (a block of keys): dk_t2 = scale sum_{t >= t2} p (dy_t . v_t2 - D_t) q_t.
 *    dk and dv are separate kernels so that a thread holds two rows of HS floats, not four. */
#include "ops_cuda.h"

#include <stdlib.h>

#include "attention_flash_rows.h" /* a thread's work on a tile (shared with tests/test_flash_rows.c) */
#include <string.h>

#define FL_B 64 /* rows per block, and rows per tile of the other operand */

/* The rows of (b, h): q at base + t row, k at + C, v at + 2C. */
#define QKV_BASE(qkv, b, h, T, C, HS) ((qkv) + (size_t)(b) * (T) * 3 * (C) + (size_t)(h) * (HS))

/* Loads rows [r0, r0 + n) of a row-major matrix (rows `stride` floats apart, HS wide from p) into
 * tile, coalesced along the row; every thread of the block takes part. */
template <int HS>
__device__ __forceinline__ void load_tile(float (*tile)[HS], const float *p, size_t stride,
                                          int r0, int n)
{
    for (int e = threadIdx.x; e < n * HS; e += FL_B) {
        int r = e / HS, col = e % HS;
        tile[r][col] = p[(size_t)(r0 + r) * stride + col];
    }
}

template <int HS>
__global__ void __launch_bounds__(FL_B)
flash_fwd_kernel(float *y, float *lse, const float *qkv, int T, int C, int NH, float scale)
{
    __shared__ float ks[FL_B][HS], vs[FL_B][HS];
    int b = blockIdx.z, h = blockIdx.y, t = blockIdx.x * FL_B + threadIdx.x;
    bool live = t < T;
    size_t row = 3 * (size_t)C;
    const float *base = QKV_BASE(qkv, b, h, T, C, HS);
    float q[HS], acc[HS];
#pragma unroll
    for (int i = 0; i < HS; i++) q[i] = live ? base[(size_t)t * row + i] : 0.0f, acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int kend = fl_key_end(T, blockIdx.x * FL_B, FL_B); /* keys [0, kend) reach these rows */
    for (int k0 = 0; k0 < kend; k0 += FL_B) {
        int nk = min(FL_B, kend - k0);
        load_tile<HS>(ks, base + C, row, k0, nk);
        load_tile<HS>(vs, base + 2 * C, row, k0, nk);
        __syncthreads();
        if (live) fl_fwd_tile(q, acc, &m, &l, &ks[0][0], &vs[0][0], fl_keys_seen(t, k0, nk), HS,
                              scale);
        __syncthreads();
    }
    if (!live) return;
    float inv = 1.0f / l, *o = y + ((size_t)b * T + t) * C + (size_t)h * HS;
#pragma unroll
    for (int i = 0; i < HS; i++) o[i] = acc[i] * inv;
    lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

/* dq and D (a block of queries). */
template <int HS>
__global__ void __launch_bounds__(FL_B)
flash_bwd_dq_kernel(float *dqkv, float *D, const float *dy, const float *qkv, const float *lse,
                    int T, int C, int NH, float scale)
{
    __shared__ float ks[FL_B][HS], vs[FL_B][HS];
    int b = blockIdx.z, h = blockIdx.y, t = blockIdx.x * FL_B + threadIdx.x;
    bool live = t < T;
    size_t row = 3 * (size_t)C;
    const float *base = QKV_BASE(qkv, b, h, T, C, HS);
    const float *gr = dy + ((size_t)b * T + (live ? t : 0)) * C + (size_t)h * HS;
    float q[HS], g[HS], dq[HS];
#pragma unroll
    for (int i = 0; i < HS; i++)
        q[i] = live ? base[(size_t)t * row + i] : 0.0f, g[i] = live ? gr[i] : 0.0f, dq[i] = 0.0f;
    float lt = live ? lse[((size_t)b * NH + h) * T + t] : 0.0f, d = 0.0f;
    int kend = fl_key_end(T, blockIdx.x * FL_B, FL_B);
    for (int pass = 0; pass < 2; pass++) {
        double dsum = 0;
        for (int k0 = 0; k0 < kend; k0 += FL_B) {
            int nk = min(FL_B, kend - k0);
            load_tile<HS>(ks, base + C, row, k0, nk);
            load_tile<HS>(vs, base + 2 * C, row, k0, nk);
            __syncthreads();
            if (live)
                fl_dq_tile(pass, q, g, dq, &dsum, d, lt, &ks[0][0], &vs[0][0],
                           fl_keys_seen(t, k0, nk), HS, scale);
            __syncthreads();
        }
        if (pass == 0) d = (float)dsum;
    }
    if (!live) return;
    D[((size_t)b * NH + h) * T + t] = d;
    float *o = dqkv + ((size_t)b * T + t) * row + (size_t)h * HS;
#pragma unroll
    for (int i = 0; i < HS; i++) o[i] = scale * dq[i];
}

/* dv (want_dk false) or dk (true) of a block of keys: over the query tiles from the block's
 * own on (a query sees the keys at or before it). */
template <int HS, bool DK>
__global__ void __launch_bounds__(FL_B)
flash_bwd_kv_kernel(float *dqkv, const float *D, const float *dy, const float *qkv,
                    const float *lse, int T, int C, int NH, float scale)
{
    __shared__ float qs[FL_B][HS], gs[FL_B][HS], ls[FL_B], ds_[FL_B];
    int b = blockIdx.z, h = blockIdx.y, t2 = blockIdx.x * FL_B + threadIdx.x;
    bool live = t2 < T;
    size_t row = 3 * (size_t)C;
    const float *base = QKV_BASE(qkv, b, h, T, C, HS);
    const float *gb = dy + (size_t)b * T * C + (size_t)h * HS;
    const float *lb = lse + ((size_t)b * NH + h) * T, *db = D + ((size_t)b * NH + h) * T;
    float k[HS], v[HS], acc[HS];
#pragma unroll
    for (int i = 0; i < HS; i++) {
        k[i] = live ? base[(size_t)t2 * row + C + i] : 0.0f;
        v[i] = live && DK ? base[(size_t)t2 * row + 2 * C + i] : 0.0f;
        acc[i] = 0.0f;
    }
    for (int q0 = blockIdx.x * FL_B; q0 < T; q0 += FL_B) {
        int nq = min(FL_B, T - q0);
        load_tile<HS>(qs, base, row, q0, nq);
        load_tile<HS>(gs, gb, (size_t)C, q0, nq);
        if ((int)threadIdx.x < nq)
            ls[threadIdx.x] = lb[q0 + threadIdx.x], ds_[threadIdx.x] = db[q0 + threadIdx.x];
        __syncthreads();
        if (live)
            fl_kv_tile(DK, k, v, acc, &qs[0][0], &gs[0][0], ls, ds_, fl_first_query(t2, q0), nq,
                       HS, scale);
        __syncthreads();
    }
    if (!live) return;
    float *o = dqkv + ((size_t)b * T + t2) * row + (size_t)(DK ? C : 2 * C) + (size_t)h * HS;
#pragma unroll
    for (int i = 0; i < HS; i++) o[i] = DK ? scale * acc[i] : acc[i];
}

template <int HS> static void flash_fwd(CudaCtx *cx, const FtOpCall *c, int B, int T, int C,
                                        int NH, float scale)
{
    dim3 grid((unsigned)((T + FL_B - 1) / FL_B), (unsigned)NH, (unsigned)B);
    flash_fwd_kernel<HS><<<grid, FL_B, 0, cx->stream>>>((float *)c->out[0], (float *)c->out[1],
                                                       (const float *)c->in[0], T, C, NH, scale);
    CUDA_LAUNCHED();
}

template <int HS> static void flash_bwd(CudaCtx *cx, const FtOpCall *c, int B, int T, int C,
                                        int NH, float scale)
{
    const float *dy = (const float *)c->in[0], *qkv = (const float *)c->in[1],
                *lse = (const float *)c->in[2];
    float *dqkv = (float *)c->out[0];
    float *D = (float *)cuda_scratch(cx, sizeof(float) * (size_t)B * NH * T);
    dim3 grid((unsigned)((T + FL_B - 1) / FL_B), (unsigned)NH, (unsigned)B);
    flash_bwd_dq_kernel<HS><<<grid, FL_B, 0, cx->stream>>>(dqkv, D, dy, qkv, lse, T, C, NH, scale);
    CUDA_LAUNCHED();
    flash_bwd_kv_kernel<HS, false><<<grid, FL_B, 0, cx->stream>>>(dqkv, D, dy, qkv, lse, T, C, NH,
                                                                   scale);
    CUDA_LAUNCHED();
    flash_bwd_kv_kernel<HS, true><<<grid, FL_B, 0, cx->stream>>>(dqkv, D, dy, qkv, lse, T, C, NH,
                                                                  scale);
    CUDA_LAUNCHED();
}

/* The shapes these kernels take: head size 32 or 64, sizes that fit an int. */
static bool flash_fits(long long B, long long T, long long C, long long NH)
{
    long long HS = C / NH;
    return (HS == 32 || HS == 64) && B < 65536 && NH < 65536 && T * 3 * C < (1LL << 31);
}

/* The tiled kernels for c (fwd: the forward, else the backward) when they are chosen and the
 * shape fits; false: not run. */
static bool flash_run(const FtOpCall *c, bool fwd)
{
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    if (!cuda_attention_is("flash") || !flash_fits(B, T, C, NH)) return false;
    float scale = (float)(1.0 / sqrt((double)(C / NH)));
    void (*run)(CudaCtx *, const FtOpCall *, int, int, int, int, float) =
        C / NH == 32 ? (fwd ? flash_fwd<32> : flash_bwd<32>)
                     : (fwd ? flash_fwd<64> : flash_bwd<64>);
    run(cuda_ctx(c), c, (int)B, (int)T, (int)C, (int)NH, scale);
    return true;
}

bool cuda_attention_flash_fwd(const FtOpCall *c) { return flash_run(c, true); }
bool cuda_attention_flash_bwd(const FtOpCall *c) { return flash_run(c, false); }

/* ops_attention_tc.cu: ATTENTION (ops.h) on the tensor cores with the scores on chip, flash-
 * attention 2's structure, for run.precision = bf16 and head sizes 16, 32 and 64. Chosen with
 * FTLLM_CUDA_ATTENTION=tc (ops_attention.cu); under fp32, or another head size, the batched
 * GEMMs of ops_attention_gemm.cu run instead. Written and tested on ftllm's CUDA emulator
 * (cuda/emu: its mma follows the PTX ISA's fragment layouts); not yet run on a GPU.
 *
 * Every product is mma.sync m16n8k16 (mma_bf16.cuh): bf16 operands, fp32 accumulation. The
 * operands are rounded where the batched-GEMM path rounds them (q, k, v and dy into their
 * copies; the probabilities before P V and dV = P^T dy; dS before dq and dk), so both paths
 * make the same bf16 approximation of the fp32 op and differ by fp32 summation order and by
 * P: here the forward rounds exp(s - running max) before its rescaling, there the normalized
 * row. The op's fp32 q, k, v and dy are rounded once per call into bf16 copies in its
 * scratch, which the tiles then load 16 bytes a thread (a tile needed both ways is read once
 * and transposed in shared memory: each backward product then has 128 FLOPs per byte read
 * from L2 rather than 64). Blocks of 4 warps; each warp owns 16
 * rows of its block's 64 and works along tiles of 64 rows of the other operand, held in shared
 * memory as bf16 (rows padded by 8 elements, so the fragment loads of a warp hit 32 different
 * banks). Causal: only tiles at or below the
 * diagonal are visited; the diagonal tile and the rows past T are masked.
 *  - Forward (a block of queries, the longest rows first): S = Q K^T, the online softmax in
 *    base 2 (scores times scale log2 e; running maximum m and sum l per row, reduced over the
 *    row's four lanes with two shuffles), O += P V; y = O / l, lse = (m + log2 l) ln 2.
 *  - Backward, two kernels, P recomputed as exp2(s scale log2 e - lse log2 e):
 *    dq (a block of queries): a first pass over the key tiles for D = rowsum(P o dP), dP =
 *    dy V^T (ops.h gives the backward no y), then dS = P o (dP - D) and dq = scale dS K;
 *    dk and dv (a block of keys, over the query tiles from the diagonal on): S^T = K Q^T,
 *    dv += P^T dy, dP^T = V dy^T, dk += scale dS^T Q, with D from the dq kernel.
 * No atomics, every sum in a fixed order: the same bits from run to run and on the checker
 * stream, whatever the GPU. */
#include "ops_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "mma_bf16.cuh"

#define TC_ROWS 64 /* rows of a block (4 warps of 16), and of a tile of the other operand */
#define TC_NT 128  /* threads of a block */
#define TC_LD (TC_ROWS + 8) /* a transposed tile's row: TC_ROWS elements and the padding */

typedef __nv_bfloat16 bf16;

/* 8 bf16: what one thread moves at a time (a 16-byte load or store; the shared tiles are
 * declared alignas(16), their rows 16-byte multiples) */
struct alignas(16) TcChunk {
    uint32_t w[4];
};

/* rows [r0, r0 + 64) of a bf16 matrix of T rows (`stride` elements apart, HS wide from p; rows
 * start 16-byte aligned: tc_fits) into s, zeros past T; every thread of the block takes part.
 * A row's chunks go to consecutive threads: the global loads coalesce, and the 8 threads of a
 * quarter warp store one row's 128 bytes (no bank conflict). */
template <int HS>
__device__ __forceinline__ void tc_rows(bf16 (*s)[HS + 8], const bf16 *p, size_t stride, int r0,
                                        int T)
{
    enum { CH = HS / 8 }; /* chunks a row */
    for (int e = threadIdx.x; e < TC_ROWS * CH; e += TC_NT) {
        int r = e / CH, c = e % CH * 8;
        TcChunk v = {{0u, 0u, 0u, 0u}};
        if (r0 + r < T) v = *(const TcChunk *)(p + (size_t)(r0 + r) * stride + c);
        *(TcChunk *)&s[r][c] = v;
    }
}

/* the same rows transposed: s[c][r]. Here consecutive threads take consecutive rows of one
 * chunk column, so that their 2-byte stores fill consecutive words of s's rows. */
template <int HS>
__device__ __forceinline__ void tc_cols(bf16 (*s)[TC_LD], const bf16 *p, size_t stride, int r0,
                                        int T)
{
    for (int e = threadIdx.x; e < TC_ROWS * (HS / 8); e += TC_NT) {
        int r = e % TC_ROWS, c = e / TC_ROWS * 8;
        TcChunk v = {{0u, 0u, 0u, 0u}};
        if (r0 + r < T) v = *(const TcChunk *)(p + (size_t)(r0 + r) * stride + c);
        const bf16 *h = (const bf16 *)&v;
#pragma unroll
        for (int j = 0; j < 8; j++) s[c + j][r] = h[j];
    }
}

/* t = s transposed (t[c][r] = s[r][c]), from one shared tile to another: a tile the block has
 * loaded and also needs transposed is read from global memory once. A thread reads 8 columns
 * of a row (16 bytes: a quarter warp's 8 reads hit 32 banks) and stores them down a column of
 * t, consecutive threads at consecutive rows (consecutive 2-byte slots). */
template <int HS>
__device__ __forceinline__ void tc_transpose(bf16 (*t)[TC_LD], const bf16 (*s)[HS + 8])
{
    for (int e = threadIdx.x; e < TC_ROWS * (HS / 8); e += TC_NT) {
        int r = e % TC_ROWS, c = e / TC_ROWS * 8;
        TcChunk v = *(const TcChunk *)&s[r][c];
        const bf16 *h = (const bf16 *)&v;
#pragma unroll
        for (int j = 0; j < 8; j++) t[c + j][r] = h[j];
    }
}

/* acc[n] (n < 8: 16 rows x 64 columns) = A B over HS / 16 k-steps, A the warp's fragments a,
 * B's column j row j of s (a tile of 64 rows) */
template <int HS>
__device__ __forceinline__ void tc_times_rows(float acc[8][4], const uint32_t a[HS / 16][4],
                                              const bf16 (*s)[HS + 8])
{
#pragma unroll
    for (int n = 0; n < 8; n++) {
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            uint32_t bb[2];
            tc_load_b(bb, s, 8 * n, 16 * kk);
            tc_mma(acc[n], a[kk], bb);
        }
    }
}

/* out[n] (n < HS / 8) += P B, P the 16 x 64 accumulators p rounded to bf16 (tc_c_to_a), B's
 * column j row j of t (a transposed tile) */
template <int HS>
__device__ __forceinline__ void tc_acc_times_cols(float out[HS / 8][4], const float p[8][4],
                                                  const bf16 (*t)[TC_LD])
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t pa[4];
        tc_c_to_a(pa, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            uint32_t bb[2];
            tc_load_b(bb, t, 8 * n, 16 * kk);
            tc_mma(out[n], pa, bb);
        }
    }
}

/* the sum of v over the four lanes that hold a row's accumulators (lanes 4g .. 4g+3) */
__device__ __forceinline__ float tc_row_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float tc_row_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/* The rows of (b, h): q at base + t row, k at + C, v at + 2C. */
#define TC_BASE(qkv, b, h, T, C, HS) ((qkv) + (size_t)(b) * (T) * 3 * (C) + (size_t)(h) * (HS))

template <int HS>
__global__ void __launch_bounds__(TC_NT)
tc_fwd_kernel(float *y, float *lse, const bf16 *qkv, int T, int C, int NH, float scale2)
{
    enum { KS = HS / 16, NT = HS / 8 };
    alignas(16) __shared__ bf16 qs[TC_ROWS][HS + 8], ks[TC_ROWS][HS + 8], vt[HS][TC_LD];
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_ROWS;
    int w = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    size_t row = 3 * (size_t)C;
    const bf16 *base = TC_BASE(qkv, b, h, T, C, HS);
    tc_rows<HS>(qs, base, row, q0, T);
    __syncthreads();
    uint32_t qa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) tc_load_a(qa[kk], qs, 16 * w, 16 * kk);
    float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    int r[2] = {q0 + 16 * w + g, q0 + 16 * w + g + 8};
    int kend = min(T, q0 + TC_ROWS); /* keys [0, kend) reach this block's rows */
    for (int k0 = 0; k0 < kend; k0 += TC_ROWS) {
        __syncthreads(); /* the last tile's readers are done */
        tc_rows<HS>(ks, base + C, row, k0, T);
        tc_cols<HS>(vt, base + 2 * C, row, k0, T);
        __syncthreads();
        float s[8][4];
        tc_times_rows<HS>(s, qa, ks);
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int key = k0 + 8 * n + 2 * t + (i & 1);
                float v = key > r[i >> 1] || key >= T ? -INFINITY : s[n][i] * scale2;
                s[n][i] = v;
                mx[i >> 1] = fmaxf(mx[i >> 1], v);
            }
        float sub[2], alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 2; j++) {
            mx[j] = tc_row_max(mx[j]);
            sub[j] = mx[j] == -INFINITY ? 0.0f : mx[j]; /* a row with nothing unmasked yet */
            alpha[j] = exp2f(m[j] - sub[j]);
            m[j] = mx[j];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float p = exp2f(s[n][i] - sub[i >> 1]);
                s[n][i] = p;
                rs[i >> 1] += p;
            }
        l[0] = l[0] * alpha[0] + rs[0], l[1] = l[1] * alpha[1] + rs[1];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) o[n][i] *= alpha[i >> 1];
        tc_acc_times_cols<HS>(o, s, vt);
    }
    l[0] = tc_row_sum(l[0]), l[1] = tc_row_sum(l[1]);
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (r[i >> 1] < T)
                y[((size_t)b * T + r[i >> 1]) * C + (size_t)h * HS + 8 * n + 2 * t + (i & 1)] =
                    o[n][i] / l[i >> 1];
    for (int j = 0; j < 2; j++)
        if (t == 0 && r[j] < T)
            lse[((size_t)b * NH + h) * T + r[j]] = (m[j] + log2f(l[j])) * 0.69314718055994531f;
}

/* dq and D (a block of queries, the longest rows first) */
template <int HS>
__global__ void __launch_bounds__(TC_NT)
tc_dq_kernel(float *dqkv, float *D, const bf16 *dy, const bf16 *qkv, const float *lse, int T,
             int C, int NH, float scale, float scale2)
{
    enum { KS = HS / 16, NT = HS / 8 };
    alignas(16) __shared__ bf16 ks[TC_ROWS][HS + 8], vs[TC_ROWS][HS + 8], kt[HS][TC_LD];
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_ROWS;
    int w = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    size_t row = 3 * (size_t)C;
    const bf16 *base = TC_BASE(qkv, b, h, T, C, HS);
    const bf16 *gb = dy + (size_t)b * T * C + (size_t)h * HS;
    tc_rows<HS>(ks, base, row, q0, T); /* q and dy of the block's rows, through the tiles */
    tc_rows<HS>(vs, gb, (size_t)C, q0, T);
    __syncthreads();
    uint32_t qa[KS][4], ga[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
        tc_load_a(qa[kk], ks, 16 * w, 16 * kk), tc_load_a(ga[kk], vs, 16 * w, 16 * kk);
    int r[2] = {q0 + 16 * w + g, q0 + 16 * w + g + 8};
    const float log2e = 1.4426950408889634f;
    float l2[2], d[2] = {0.0f, 0.0f}, dq[NT][4];
    for (int j = 0; j < 2; j++)
        l2[j] = r[j] < T ? lse[((size_t)b * NH + h) * T + r[j]] * log2e : 0.0f;
#pragma unroll
    for (int n = 0; n < NT; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    int kend = min(T, q0 + TC_ROWS);
    for (int pass = 0; pass < 2; pass++) {
        for (int k0 = 0; k0 < kend; k0 += TC_ROWS) {
            __syncthreads();
            tc_rows<HS>(ks, base + C, row, k0, T);
            tc_rows<HS>(vs, base + 2 * C, row, k0, T);
            __syncthreads();
            if (pass) { /* kt from ks: k read from global memory once */
                tc_transpose<HS>(kt, ks);
                __syncthreads();
            }
            float s[8][4], dp[8][4];
            tc_times_rows<HS>(s, qa, ks);
            tc_times_rows<HS>(dp, ga, vs);
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int key = k0 + 8 * n + 2 * t + (i & 1), j = i >> 1;
                    float p = key > r[j] || key >= T ? 0.0f : exp2f(s[n][i] * scale2 - l2[j]);
                    if (pass == 0)
                        d[j] += p * dp[n][i];
                    else
                        s[n][i] = p * (dp[n][i] - d[j]); /* dS */
                }
            if (pass) tc_acc_times_cols<HS>(dq, s, kt);
        }
        if (pass == 0) d[0] = tc_row_sum(d[0]), d[1] = tc_row_sum(d[1]);
    }
    for (int j = 0; j < 2; j++)
        if (t == 0 && r[j] < T) D[((size_t)b * NH + h) * T + r[j]] = d[j];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (r[i >> 1] < T)
                dqkv[((size_t)b * T + r[i >> 1]) * row + (size_t)h * HS + 8 * n + 2 * t +
                     (i & 1)] = scale * dq[n][i];
}

/* dk and dv (a block of keys, over the query tiles from the block's own on) */
template <int HS>
__global__ void __launch_bounds__(TC_NT)
tc_dkv_kernel(float *dqkv, const float *D, const bf16 *dy, const bf16 *qkv, const float *lse,
              int T, int C, int NH, float scale, float scale2)
{
    enum { KS = HS / 16, NT = HS / 8 };
    alignas(16) __shared__ bf16 qs[TC_ROWS][HS + 8], gs[TC_ROWS][HS + 8], qt[HS][TC_LD],
        gt[HS][TC_LD];
    __shared__ float ls[TC_ROWS], ds[TC_ROWS];
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * TC_ROWS;
    int w = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    size_t row = 3 * (size_t)C;
    const bf16 *base = TC_BASE(qkv, b, h, T, C, HS);
    const bf16 *gb = dy + (size_t)b * T * C + (size_t)h * HS;
    const float *lb = lse + ((size_t)b * NH + h) * T, *db = D + ((size_t)b * NH + h) * T;
    tc_rows<HS>(qs, base + C, row, k0, T); /* k and v of the block's rows, through the tiles */
    tc_rows<HS>(gs, base + 2 * C, row, k0, T);
    __syncthreads();
    uint32_t ka[KS][4], va[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
        tc_load_a(ka[kk], qs, 16 * w, 16 * kk), tc_load_a(va[kk], gs, 16 * w, 16 * kk);
    int kr[2] = {k0 + 16 * w + g, k0 + 16 * w + g + 8};
    const float log2e = 1.4426950408889634f;
    float dk[NT][4], dv[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk[n][i] = dv[n][i] = 0.0f;
    for (int q0 = k0; q0 < T; q0 += TC_ROWS) {
        __syncthreads();
        tc_rows<HS>(qs, base, row, q0, T);
        tc_rows<HS>(gs, gb, (size_t)C, q0, T);
        for (int i = threadIdx.x; i < TC_ROWS; i += TC_NT) {
            bool in = q0 + i < T;
            ls[i] = in ? lb[q0 + i] * log2e : 0.0f;
            ds[i] = in ? db[q0 + i] : 0.0f;
        }
        __syncthreads();
        tc_transpose<HS>(qt, qs); /* q and dy read from global memory once */
        tc_transpose<HS>(gt, gs);
        __syncthreads();
        float st[8][4]; /* S^T, then P^T: this warp's 16 keys x the tile's 64 queries */
        tc_times_rows<HS>(st, ka, qs);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int qc = 8 * n + 2 * t + (i & 1), q = q0 + qc;
                st[n][i] = q < kr[i >> 1] || q >= T ? 0.0f : exp2f(st[n][i] * scale2 - ls[qc]);
            }
        tc_acc_times_cols<HS>(dv, st, gt); /* dv += P^T dy */
        float dp[8][4]; /* dP^T = V dy^T, then dS^T, a tile at a time (tc_times_rows and a loop
                         * after it: 238 registers at head size 64, against 175 this way) */
#pragma unroll
        for (int n = 0; n < 8; n++) {
            dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t bb[2];
                tc_load_b(bb, gs, 8 * n, 16 * kk);
                tc_mma(dp[n], va[kk], bb);
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
                dp[n][i] = st[n][i] * (dp[n][i] - ds[8 * n + 2 * t + (i & 1)]);
        }
        tc_acc_times_cols<HS>(dk, dp, qt); /* dk += dS^T q */
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int kr_ = kr[i >> 1];
            if (kr_ >= T) continue;
            float *o = dqkv + ((size_t)b * T + kr_) * row + (size_t)h * HS + 8 * n + 2 * t +
                       (i & 1);
            o[C] = scale * dk[n][i];
            o[2 * C] = dv[n][i];
        }
}

/* The shapes these kernels take: bf16, head size 16, 32 or 64 (so C is a multiple of 16 and
 * every row of the bf16 copies starts 16-byte aligned), sizes that fit an int. */
static bool tc_fits(const CudaCtx *cx, long long B, long long T, long long C, long long NH)
{
    long long HS = C / NH;
    return cx->bf16 && (HS == 16 || HS == 32 || HS == 64) && B < 65536 && NH < 65536 &&
           T * 3 * C < (1LL << 31);
}

/* The op's scratch: bf16 copies of qkv and (backward) dy, rounded once here rather than in
 * every tile that reads them (the same values: round to nearest even either way), then D. */
static void tc_carve(CudaCtx *cx, size_t nqkv, size_t ndy, size_t nd, bf16 **qkv16, bf16 **dy16,
                     float **D)
{
    size_t a = cuda_align(sizeof(bf16) * nqkv), b = cuda_align(sizeof(bf16) * ndy);
    char *s = (char *)cuda_scratch(cx, a + b + sizeof(float) * nd);
    *qkv16 = (bf16 *)s, *dy16 = ndy ? (bf16 *)(s + a) : NULL;
    *D = nd ? (float *)(s + a + b) : NULL;
}

template <int HS> static void tc_fwd(CudaCtx *cx, const FtOpCall *c, int B, int T, int C, int NH)
{
    float scale2 = (float)(1.4426950408889634 / sqrt((double)HS));
    size_t nqkv = (size_t)B * T * 3 * C;
    bf16 *qkv16, *dy16;
    float *D;
    tc_carve(cx, nqkv, 0, 0, &qkv16, &dy16, &D);
    cuda_to_bf16(cx, qkv16, (const float *)c->in[0], nqkv);
    dim3 grid((unsigned)((T + TC_ROWS - 1) / TC_ROWS), (unsigned)NH, (unsigned)B);
    tc_fwd_kernel<HS><<<grid, TC_NT, 0, cx->stream>>>((float *)c->out[0], (float *)c->out[1],
                                                      qkv16, T, C, NH, scale2);
    CUDA_LAUNCHED();
}

template <int HS> static void tc_bwd(CudaCtx *cx, const FtOpCall *c, int B, int T, int C, int NH)
{
    const float *lse = (const float *)c->in[2];
    float *dqkv = (float *)c->out[0];
    float scale = (float)(1.0 / sqrt((double)HS));
    float scale2 = (float)(1.4426950408889634 / sqrt((double)HS));
    size_t nqkv = (size_t)B * T * 3 * C, ndy = (size_t)B * T * C;
    bf16 *qkv16, *dy16;
    float *D;
    tc_carve(cx, nqkv, ndy, (size_t)B * NH * T, &qkv16, &dy16, &D);
    cuda_to_bf16(cx, dy16, (const float *)c->in[0], ndy);
    cuda_to_bf16(cx, qkv16, (const float *)c->in[1], nqkv);
    dim3 grid((unsigned)((T + TC_ROWS - 1) / TC_ROWS), (unsigned)NH, (unsigned)B);
    tc_dq_kernel<HS><<<grid, TC_NT, 0, cx->stream>>>(dqkv, D, dy16, qkv16, lse, T, C, NH, scale,
                                                     scale2);
    CUDA_LAUNCHED();
    tc_dkv_kernel<HS><<<grid, TC_NT, 0, cx->stream>>>(dqkv, D, dy16, qkv16, lse, T, C, NH, scale,
                                                      scale2);
    CUDA_LAUNCHED();
}

/* The tensor-core kernels for c (fwd: the forward, else the backward) when they are chosen
 * and the shape fits; false: not run. */
static bool tc_run(const FtOpCall *c, bool fwd)
{
    CudaCtx *cx = cuda_ctx(c);
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    if (!cuda_attention_is("tc") || !tc_fits(cx, B, T, C, NH)) return false;
    void (*run)(CudaCtx *, const FtOpCall *, int, int, int, int) =
        C / NH == 16   ? (fwd ? tc_fwd<16> : tc_bwd<16>)
        : C / NH == 32 ? (fwd ? tc_fwd<32> : tc_bwd<32>)
                       : (fwd ? tc_fwd<64> : tc_bwd<64>);
    run(cx, c, (int)B, (int)T, (int)C, (int)NH);
    return true;
}

bool cuda_attention_tc_fwd(const FtOpCall *c) { return tc_run(c, true); }
bool cuda_attention_tc_bwd(const FtOpCall *c) { return tc_run(c, false); }

/* ops_attention.cu: ATTENTION (ops.h), causal multi-head, the straightforward version (chosen
 * with FTLLM_CUDA_ATTENTION=rows; the default is gemm, below): one
 * block per query row (b, h, t), dot products one thread each, the softmax in the block. The op
 * keeps no T x T matrix between its passes (lse, as on the CPU); these kernels still use one in
 * the op's scratch while they run.
 *
 * Forward: scores q_t . k_t2 * scale for t2 <= t are written into the scratch row, then the
 * row's maximum, exp (expf), the sum in double (fixed tree), lse = max + log(sum), and the
 * normalization; y_t = sum over t2 of att[t, t2] v_t2, one thread per channel, t2 in order.
 * Backward: a first kernel writes, per row, the probabilities att[t, t2] = exp(s - lse_t) again
 * and r[t, t2] = att (dy_t . v_t2 - sum_t2 att dy_t . v_t2), both into scratch (2 B NH T T
 * floats); a second writes row t's slices of dq, dk and dv, one thread per channel, each a
 * sequential sum: dq_t = s sum_{t2<=t} r[t,t2] k_t2, dk_t = s sum_{t3>=t} r[t3,t] q_t3,
 * dv_t = sum_{t3>=t} att[t3,t] dy_t3. No two threads write the same element, so there are no
 * atomics; every slice of dqkv is written.
 * FTLLM_CUDA_ATTENTION=flash runs the tiled kernels of ops_attention_flash.cu instead (head
 * sizes 32 and 64), which keep the scores on chip; tc, the tensor-core tiles of
 * ops_attention_tc.cu under bf16 (not yet measured); gemm, the default (unset), the cuBLAS batched
 * GEMMs of ops_attention_gemm.cu (tensor cores under run.precision = bf16): on the H200
 * (2026-12-04, GPT-2 124M, B 16, T 1024, bf16) a step took 122 ms with them, 246 ms with the
 * tiled kernels and 1249 ms with these (perf/README.md). */
#include "ops_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *attention_chosen(void)
{
    static const char *chosen; /* FTLLM_CUDA_ATTENTION, read once ("gemm" when unset) */
    if (!chosen) {
        const char *e = getenv("FTLLM_CUDA_ATTENTION");
        chosen = e && *e ? e : "gemm";
    }
    return chosen;
}

bool cuda_attention_is(const char *kernel) { return !strcmp(attention_chosen(), kernel); }

const char *cuda_attention_check(void)
{
    static char why[160];
    const char *k = attention_chosen();
    if (!strcmp(k, "gemm") || !strcmp(k, "tc") || !strcmp(k, "flash") || !strcmp(k, "rows"))
        return NULL;
    snprintf(why, sizeof why,
             "FTLLM_CUDA_ATTENTION=%.60s: expected gemm (the default), tc, flash or rows", k);
    return why;
}

/* (b, h, t) of a row block: blockIdx.x = t, y = h, z = b */
__global__ void __launch_bounds__(FT_CUDA_NT)
attention_fwd_kernel(float *y, float *lse, float *att, const float *qkv, long long T,
                     long long C, long long NH, float scale)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, HS = C / NH;
    const float *q = qkv + (b * T + t) * 3 * C + h * HS;
    float *a = att + ((b * NH + h) * T + t) * T;
    float mx = -INFINITY;
    for (long long t2 = threadIdx.x; t2 <= t; t2 += FT_CUDA_NT) {
        const float *k = qkv + (b * T + t2) * 3 * C + C + h * HS;
        float s = 0.0f;
        for (long long i = 0; i < HS; i++) s += q[i] * k[i];
        s *= scale;
        a[t2] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_max(mx);
    double sum = 0;
    for (long long t2 = threadIdx.x; t2 <= t; t2 += FT_CUDA_NT) {
        float e = expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) lse[(b * NH + h) * T + t] = mx + (float)log(sum);
    float inv = (float)(1.0 / sum);
    for (long long t2 = threadIdx.x; t2 <= t; t2 += FT_CUDA_NT) a[t2] *= inv;
    __syncthreads(); /* the row is read by every thread below */
    float *o = y + (b * T + t) * C + h * HS;
    const float *v = qkv + b * T * 3 * C + 2 * C + h * HS; /* v of position 0 */
    for (long long i = threadIdx.x; i < HS; i += FT_CUDA_NT) {
        float acc = 0.0f;
        for (long long t2 = 0; t2 <= t; t2++) acc += a[t2] * v[t2 * 3 * C + i];
        o[i] = acc;
    }
}

void cuda_attention_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    FT_ASSERT(NH > 0 && C % NH == 0 && NH < 65536 && B < 65536);
    if (B * T * NH == 0 || cuda_attention_flash_fwd(c) || cuda_attention_tc_fwd(c) ||
        cuda_attention_gemm_fwd(c)) return;
    float scale = (float)(1.0 / sqrt((double)(C / NH)));
    float *att = (float *)cuda_scratch(cx, sizeof(float) * (size_t)(B * NH * T * T));
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    attention_fwd_kernel<<<grid, FT_CUDA_NT, 0, cx->stream>>>(
        (float *)c->out[0], (float *)c->out[1], att, (const float *)c->in[0], T, C, NH, scale);
    CUDA_LAUNCHED();
}

/* att[t, t2] = exp(q_t . k_t2 scale - lse_t) for t2 <= t (0 above), and
 * r[t, t2] = att[t, t2] (dy_t . v_t2 - dsum), dsum = sum_t2 att[t, t2] (dy_t . v_t2) */
__global__ void __launch_bounds__(FT_CUDA_NT)
attention_bwd_rows_kernel(float *r, float *att, const float *dy, const float *qkv,
                          const float *lse, long long T, long long C, long long NH, float scale)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, HS = C / NH;
    const float *g = dy + (b * T + t) * C + h * HS;
    const float *q = qkv + (b * T + t) * 3 * C + h * HS;
    float *a = att + ((b * NH + h) * T + t) * T;
    float *rr = r + ((b * NH + h) * T + t) * T;
    float l = lse[(b * NH + h) * T + t];
    double dsum = 0;
    for (long long t2 = threadIdx.x; t2 < T; t2 += FT_CUDA_NT) {
        if (t2 > t) {
            a[t2] = 0.0f;
            continue;
        }
        const float *k = qkv + (b * T + t2) * 3 * C + C + h * HS;
        const float *v = k + C;
        float qk = 0.0f, s = 0.0f;
        for (long long i = 0; i < HS; i++) qk += q[i] * k[i];
        float p = expf(qk * scale - l);
        for (long long i = 0; i < HS; i++) s += g[i] * v[i];
        a[t2] = p;
        rr[t2] = s;
        dsum += (double)p * s;
    }
    dsum = block_sum(dsum);
    for (long long t2 = threadIdx.x; t2 <= t; t2 += FT_CUDA_NT)
        rr[t2] = a[t2] * (rr[t2] - (float)dsum);
}

#define ATT_COL_NT 64

__global__ void __launch_bounds__(ATT_COL_NT)
attention_bwd_qkv_kernel(float *dqkv, const float *r, const float *dy, const float *qkv,
                         const float *att, long long T, long long C, long long NH, float scale)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, HS = C / NH;
    const float *rb = r + (b * NH + h) * T * T, *ab = att + (b * NH + h) * T * T;
    const float *qkv_b = qkv + b * T * 3 * C + h * HS;
    float *dq = dqkv + (b * T + t) * 3 * C + h * HS, *dk = dq + C, *dv = dq + 2 * C;
    for (long long i = threadIdx.x; i < HS; i += ATT_COL_NT) {
        float sq = 0.0f, sk = 0.0f, sv = 0.0f;
        for (long long t2 = 0; t2 <= t; t2++) sq += rb[t * T + t2] * qkv_b[t2 * 3 * C + C + i];
        for (long long t3 = t; t3 < T; t3++) {
            sk += rb[t3 * T + t] * qkv_b[t3 * 3 * C + i];
            sv += ab[t3 * T + t] * dy[(b * T + t3) * C + h * HS + i];
        }
        dq[i] = scale * sq;
        dk[i] = scale * sk;
        dv[i] = sv;
    }
}

void cuda_attention_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *dy = (const float *)c->in[0], *qkv = (const float *)c->in[1],
                *lse = (const float *)c->in[2];
    float *dqkv = (float *)c->out[0];
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    FT_ASSERT(NH > 0 && C % NH == 0 && NH < 65536 && B < 65536);
    if (B * T * NH == 0 || cuda_attention_flash_bwd(c) || cuda_attention_tc_bwd(c) ||
        cuda_attention_gemm_bwd(c)) return;
    float scale = (float)(1.0 / sqrt((double)(C / NH)));
    size_t tt = (size_t)(B * NH * T * T);
    float *r = (float *)cuda_scratch(cx, 2 * sizeof(float) * tt), *att = r + tt;
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    attention_bwd_rows_kernel<<<grid, FT_CUDA_NT, 0, cx->stream>>>(r, att, dy, qkv, lse, T, C,
                                                                   NH, scale);
    CUDA_LAUNCHED();
    attention_bwd_qkv_kernel<<<grid, ATT_COL_NT, 0, cx->stream>>>(dqkv, r, dy, qkv, att, T, C,
                                                                  NH, scale);
    CUDA_LAUNCHED();
}

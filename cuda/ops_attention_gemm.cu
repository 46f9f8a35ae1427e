/* ops_attention_gemm.cu: ATTENTION (ops.h) as cuBLAS strided-batched GEMMs with row kernels
 * between them, the CPU op's fast path (ops_cpu.c) on the GPU: the default since it was
 * measured on the H200 (2026-12-04: a GPT-2 124M step 122 ms, against 1249 ms with the per-row
 * kernels of ops_attention.cu, FTLLM_CUDA_ATTENTION=rows, and 246 with the tiled ones, =flash).
 *
 * The products, their column-major descriptors and the row arithmetic are in
 * attention_gemm_plan.h (tests/test_attention_gemm.c runs them on the CPU against the CPU op).
 * The products go to the tensor cores: under run.precision = bf16 their operands are bf16
 * copies (the forward's qkv, the probabilities, dy, dS; rounded to nearest even) with fp32
 * accumulation and fp32 results, as gemm.cu's; under fp32, pedantic sgemm (no TF32).
 * The full T x T product is computed and the causal part kept (as on the CPU); S, P, dP and dS
 * live in the op's scratch (B NH T^2 floats each, two at a time), nothing between passes but lse.
 * Under bf16 the row kernels write only the bf16 copies the next products read (P, dS) and take
 * exp again where it was stored before (bitwise the same results; 2026-12-04: T x T fp32 writes
 * per layer cut from seven, one of them half, to three, the GEMMs' S twice and dP; predicted
 * 7-8 ms of a 122 ms GPT-2 124M step on the H200, not yet measured).
 *
 * Deterministic: one cuBLAS call per batch row b over its NH heads (the handle's fixed
 * workspace, no atomics), and row kernels of one block per row whose maximum and sums run over
 * block_max / block_sum's fixed trees (the sums in double, as the CPU's). */
#include "ops_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "attention_gemm_plan.h" /* the GEMM descriptors and the row arithmetic */

/* The fp32 buffers of one call (enum ag_buf), and their bf16 copies under run.precision = bf16
 * (NULL where a GEMM never reads the buffer). */
typedef struct ag_bufs {
    float *f[6];
    __nv_bfloat16 *h[6];
} AgBufs;

static void run_gemm(CudaCtx *cx, const AgGemm *g, const AgBufs *bf, long long B)
{
    const float zero = 0.0f;
    cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (long long b = 0; b < B; b++) {
        float *C = bf->f[g->c] + g->c_off + b * g->c_row;
        if (!cx->bf16) {
            const float *A = bf->f[g->a] + g->a_off + b * g->a_row;
            const float *Bm = bf->f[g->b] + g->b_off + b * g->b_row;
            CUBLAS_CHECK(cublasSgemmStridedBatched(cx->blas, ta, tb, g->m, g->n, g->k, &g->alpha,
                                                   A, g->lda, g->sa, Bm, g->ldb, g->sb, &zero, C,
                                                   g->ldc, g->sc, g->batch));
            continue;
        }
        FT_ASSERT(bf->h[g->a] && bf->h[g->b]);
        const __nv_bfloat16 *A = bf->h[g->a] + g->a_off + b * g->a_row;
        const __nv_bfloat16 *Bm = bf->h[g->b] + g->b_off + b * g->b_row;
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            cx->blas, ta, tb, g->m, g->n, g->k, &g->alpha, A, CUDA_R_16BF, g->lda, g->sa, Bm,
            CUDA_R_16BF, g->ldb, g->sb, &zero, C, CUDA_R_32F, g->ldc, g->sc, g->batch,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

/* ---- the row kernels: blockIdx.x = t, y = h, z = b; row r of (b, h) at ((b NH + h) T + t) T */

/* ag_softmax_row: the scaled scores of row t into probabilities (zeros above t), and lse. */
__global__ void __launch_bounds__(FT_CUDA_NT)
ag_softmax_kernel(float *p, __nv_bfloat16 *p16, float *lse, long long T, long long NH)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row = (b * NH + h) * T + t;
    float *r = p + row * T;
    float mx = -INFINITY;
    for (long long j = threadIdx.x; j <= t; j += FT_CUDA_NT) mx = fmaxf(mx, r[j]);
    mx = block_max(mx);
    double sum = 0;
    for (long long j = threadIdx.x; j <= t; j += FT_CUDA_NT) sum += expf(r[j] - mx);
    sum = block_sum(sum);
    float inv = (float)(1.0 / sum);
    /* exp again rather than stored and read back (the same float: expf is deterministic), and
     * under bf16 only the copy the P V product reads: one write of T x T bf16 instead of three
     * fp32 passes */
    for (long long j = threadIdx.x; j < T; j += FT_CUDA_NT) {
        float v = j <= t ? expf(r[j] - mx) * inv : 0.0f;
        if (p16) p16[row * T + j] = __float2bfloat16_rn(v);
        else r[j] = v;
    }
    if (threadIdx.x == 0) lse[row] = mx + (float)log(sum);
}

/* ag_prob_row: the probabilities again, exp(s - lse) (zeros above t); under bf16 into p16 alone,
 * the scores left in place for ag_dsoftmax_kernel, which takes exp(s - lse) again from them. */
__global__ void __launch_bounds__(FT_CUDA_NT)
ag_prob_kernel(float *p, __nv_bfloat16 *p16, const float *lse, long long T, long long NH)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row = (b * NH + h) * T + t;
    float *r = p + row * T, l = lse[row];
    for (long long j = threadIdx.x; j < T; j += FT_CUDA_NT) {
        float v = j <= t ? expf(r[j] - l) : 0.0f;
        if (p16) p16[row * T + j] = __float2bfloat16_rn(v);
        else r[j] = v;
    }
}

/* ag_dsoftmax_row: dS = P (dP - sum P dP), in place over dP (zeros above t). Under bf16 (ds16)
 * p holds the scaled scores, P is exp(s - lse) again (the bits ag_prob_kernel gives), and dS
 * goes to ds16 alone (the dQ and dK products read only it): two fewer T x T fp32 writes. */
__global__ void __launch_bounds__(FT_CUDA_NT)
ag_dsoftmax_kernel(const float *p, const float *lse, float *dp, __nv_bfloat16 *ds16, long long T,
                   long long NH)
{
    long long t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row = (b * NH + h) * T + t;
    const float *pr = p + row * T;
    float *r = dp + row * T, l = lse[row];
    double d = 0;
    for (long long j = threadIdx.x; j <= t; j += FT_CUDA_NT)
        d += (double)(ds16 ? expf(pr[j] - l) : pr[j]) * r[j];
    d = block_sum(d);
    for (long long j = threadIdx.x; j < T; j += FT_CUDA_NT) {
        float v = j <= t ? (ds16 ? expf(pr[j] - l) : pr[j]) * (r[j] - (float)d) : 0.0f;
        if (ds16) ds16[row * T + j] = __float2bfloat16_rn(v);
        else r[j] = v;
    }
}

/* Carves the op's scratch: n32 fp32 T x T buffers, and under bf16 n16 bf16 ones and the bf16
 * copies of nio inputs of nio_elems[i] floats; returns the pieces in order. */
static void carve(CudaCtx *cx, size_t tt, int n32, int n16, const size_t *io, int nio, float **f,
                  __nv_bfloat16 **h)
{
    size_t bytes = 0, off[8];
    int k = 0;
    for (int i = 0; i < n32; i++, k++) off[k] = bytes, bytes += cuda_align(sizeof(float) * tt);
    for (int i = 0; cx->bf16 && i < n16; i++, k++)
        off[k] = bytes, bytes += cuda_align(sizeof(__nv_bfloat16) * tt);
    for (int i = 0; cx->bf16 && i < nio; i++, k++)
        off[k] = bytes, bytes += cuda_align(sizeof(__nv_bfloat16) * io[i]);
    char *s = (char *)cuda_scratch(cx, bytes);
    for (int i = 0; i < n32; i++) f[i] = (float *)(s + off[i]);
    for (int i = 0; i < n16 + nio; i++) h[i] = cx->bf16 ? (__nv_bfloat16 *)(s + off[n32 + i]) : NULL;
}

bool cuda_attention_gemm_fwd(const FtOpCall *c)
{
    if (!cuda_attention_is("gemm") && !cuda_attention_is("tc")) return false;
    CudaCtx *cx = cuda_ctx(c);
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    AgShape s = ag_shape(T, C, NH);
    float scale = (float)(1.0 / sqrt((double)s.HS));
    size_t tt = (size_t)(B * NH * T * T), io[1] = {(size_t)(B * T * 3 * C)};
    float *f[1];
    __nv_bfloat16 *h[2] = {NULL, NULL}; /* P16, qkv16 */
    carve(cx, tt, 1, 1, io, 1, f, h);
    AgBufs bf;
    memset(&bf, 0, sizeof bf);
    bf.f[AG_QKV] = (float *)c->in[0], bf.f[AG_Y] = (float *)c->out[0], bf.f[AG_P] = f[0];
    bf.h[AG_P] = h[0], bf.h[AG_QKV] = h[1];
    if (cx->bf16) cuda_to_bf16(cx, bf.h[AG_QKV], bf.f[AG_QKV], io[0]);
    AgGemm g = ag_scores(&s, scale);
    run_gemm(cx, &g, &bf, B);
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    ag_softmax_kernel<<<grid, FT_CUDA_NT, 0, cx->stream>>>(f[0], h[0], (float *)c->out[1], T, NH);
    CUDA_LAUNCHED();
    g = ag_out(&s);
    run_gemm(cx, &g, &bf, B);
    return true;
}

bool cuda_attention_gemm_bwd(const FtOpCall *c)
{
    if (!cuda_attention_is("gemm") && !cuda_attention_is("tc")) return false;
    CudaCtx *cx = cuda_ctx(c);
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    AgShape s = ag_shape(T, C, NH);
    float scale = (float)(1.0 / sqrt((double)s.HS));
    size_t tt = (size_t)(B * NH * T * T), io[2] = {(size_t)(B * T * 3 * C), (size_t)(B * T * C)};
    float *f[2];
    __nv_bfloat16 *h[4] = {NULL, NULL, NULL, NULL}; /* P16, dS16, qkv16, dy16 */
    carve(cx, tt, 2, 2, io, 2, f, h);
    AgBufs bf;
    memset(&bf, 0, sizeof bf);
    bf.f[AG_DY] = (float *)c->in[0], bf.f[AG_QKV] = (float *)c->in[1];
    bf.f[AG_DQKV] = (float *)c->out[0], bf.f[AG_P] = f[0], bf.f[AG_DS] = f[1];
    bf.h[AG_P] = h[0], bf.h[AG_DS] = h[1], bf.h[AG_QKV] = h[2], bf.h[AG_DY] = h[3];
    if (cx->bf16) {
        cuda_to_bf16(cx, bf.h[AG_QKV], bf.f[AG_QKV], io[0]);
        cuda_to_bf16(cx, bf.h[AG_DY], bf.f[AG_DY], io[1]);
    }
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    AgGemm g = ag_scores(&s, scale);
    run_gemm(cx, &g, &bf, B);
    ag_prob_kernel<<<grid, FT_CUDA_NT, 0, cx->stream>>>(f[0], h[0], (const float *)c->in[2], T,
                                                         NH);
    CUDA_LAUNCHED();
    g = ag_dp(&s);
    run_gemm(cx, &g, &bf, B);
    ag_dsoftmax_kernel<<<grid, FT_CUDA_NT, 0, cx->stream>>>(f[0], (const float *)c->in[2], f[1],
                                                             h[1], T, NH);
    CUDA_LAUNCHED();
    g = ag_dv(&s);
    run_gemm(cx, &g, &bf, B);
    g = ag_dq(&s, scale);
    run_gemm(cx, &g, &bf, B);
    g = ag_dk(&s, scale);
    run_gemm(cx, &g, &bf, B);
    return true;
}

/* gemm.cu: row-major GEMMs in ops.h's layouts through cuBLAS's column-major sgemm, and the two
 * small fills a matmul needs (bias rows, a gradient's start from its earlier sum).
 *
 * A row-major (r, c) matrix is cuBLAS's column-major (c, r) matrix with leading dimension c, so
 * each product below is computed transposed: y^T = w x^T, dx^T = w^T dy^T, dw^T = x^T dy.
 *
 * run.precision = bf16 (CudaCtx.bf16): both operands are rounded to bf16 (round to nearest
 * even) into the context's own GEMM workspace, and cublasGemmEx multiplies them with fp32
 * accumulation (CUBLAS_COMPUTE_32F) into the fp32 output, beta onto its fp32 earlier sum: the
 * autocast recipe for GEMMs, with fp32 master weights, optimizer state and activations. The
 * handle's math mode is then the default one (tensor cores; pedantic mode may refuse them
 * for bf16), with the same fixed workspace and no atomics: still bitwise reproducible on one
 * stream, and the checker's handle makes the same choices. A matmul's backward
 * (cuda_gemm_bwd) rounds dy once for both of its products (the same bits as two roundings). */
#include "ops_cuda.h"

#include <cuda_bf16.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" void cuda_set_precision(void *ctx, int precision)
{
    CudaCtx *cxs[2] = {(CudaCtx *)ctx, ((CudaCtx *)ctx)->checker};
    for (int i = 0; i < 2; i++) {
        CudaCtx *cx = cxs[i];
        if (!cx) continue;
        cx->bf16 = precision == FT_PRECISION_BF16;
        CUBLAS_CHECK(cublasSetMathMode(cx->blas, cx->bf16 ? CUBLAS_DEFAULT_MATH
                                                          : CUBLAS_PEDANTIC_MATH));
    }
}

static __global__ void to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

/* four at a time: a 16-byte load and an 8-byte store a thread (the rounding is the same) */
struct alignas(16) Floats4 {
    float v[4];
};
struct alignas(8) Bf16x4 {
    __nv_bfloat16 h[4];
};
static __global__ void to_bf16_x4_kernel(Bf16x4 *dst, const Floats4 *src, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        Floats4 f = src[i];
        Bf16x4 o;
#pragma unroll
        for (int j = 0; j < 4; j++) o.h[j] = __float2bfloat16_rn(f.v[j]);
        dst[i] = o;
    }
}

void cuda_to_bf16(CudaCtx *cx, __nv_bfloat16 *dst, const float *src, size_t n)
{
    if (!n) return;
    /* whole groups of four where both ends are aligned for them (the GEMM workspace always
     * is; an operand inside an activation arena may not be), the rest one at a time */
    size_t n4 = (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0 ? n / 4 : 0;
    if (n4) {
        to_bf16_x4_kernel<<<cuda_blocks((long long)n4, 256), 256, 0, cx->stream>>>(
            (Bf16x4 *)dst, (const Floats4 *)src, n4);
        CUDA_LAUNCHED();
    }
    if (n > 4 * n4) {
        size_t r = n - 4 * n4;
        to_bf16_kernel<<<cuda_blocks((long long)r, 256), 256, 0, cx->stream>>>(dst + 4 * n4,
                                                                                src + 4 * n4, r);
        CUDA_LAUNCHED();
    }
}

/* cx's GEMM workspace, at least bytes long (grown after a stream wait: no GEMM still reads the
 * old one). */
static char *gemm_ws(CudaCtx *cx, size_t bytes)
{
    if (bytes > cx->gemm_ws_bytes) {
        CUDA_CHECK(cudaStreamSynchronize(cx->stream)); /* no GEMM still reads the old one */
        if (cx->gemm_ws) CUDA_CHECK(cudaFree(cx->gemm_ws));
        cx->gemm_ws = NULL, cx->gemm_ws_bytes = 0;
        size_t n = cuda_align(bytes + bytes / 4);
        cudaError_t e = cudaMalloc(&cx->gemm_ws, n);
        if (e != cudaSuccess)
            FT_DIE("cuda: no memory for %zu bytes of bf16 GEMM operands: %s", n,
                   cudaGetErrorString(e));
        cx->gemm_ws_bytes = n;
    }
    return (char *)cx->gemm_ws;
}

/* bf16 copies of a (na floats) and b (nb floats) in cx's GEMM workspace. */
static void operands_bf16(CudaCtx *cx, const float *a, size_t na, const float *b, size_t nb,
                          __nv_bfloat16 **a16, __nv_bfloat16 **b16)
{
    size_t off = cuda_align(sizeof(__nv_bfloat16) * na);
    char *ws = gemm_ws(cx, off + sizeof(__nv_bfloat16) * nb);
    *a16 = (__nv_bfloat16 *)ws;
    *b16 = (__nv_bfloat16 *)(ws + off);
    cuda_to_bf16(cx, *a16, a, na);
    cuda_to_bf16(cx, *b16, b, nb);
}

/* C = op(A) op(B) + beta C, column-major, on operands already in cx's precision: floats
 * (sgemm), or bf16 copies under run.precision = bf16 (GemmEx, fp32 accumulation and output). */
static void gemm_on(CudaCtx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    const float one = 1.0f;
    if (!cx->bf16)
        CUBLAS_CHECK(cublasSgemm(cx->blas, ta, tb, m, n, k, &one, (const float *)A, lda,
                                 (const float *)B, ldb, &beta, C, ldc));
    else
        CUBLAS_CHECK(cublasGemmEx(cx->blas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B,
                                  CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* C (m, n; ldc) = op(A) op(B) + beta C, column-major, A holding na and B nb floats: sgemm in
 * fp32, GemmEx on bf16 copies under run.precision = bf16. */
static void gemm(CudaCtx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 const float *A, int lda, size_t na, const float *B, int ldb, size_t nb,
                 float beta, float *C, int ldc)
{
    if (!cx->bf16) {
        gemm_on(cx, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    __nv_bfloat16 *a16, *b16;
    operands_bf16(cx, A, na, B, nb, &a16, &b16);
    gemm_on(cx, ta, tb, m, n, k, a16, lda, b16, ldb, beta, C, ldc);
}

static int as_int(long long v, const char *what)
{
    if (v < 0 || v > INT_MAX) FT_DIE("cuda gemm: %s = %lld does not fit cuBLAS's int", what, v);
    return (int)v;
}

void cuda_gemm_xwt(CudaCtx *cx, const float *x, const float *w, float *y, long long N,
                   long long C, long long OC, float beta)
{
    int n = as_int(N, "N"), k = as_int(C, "C"), m = as_int(OC, "OC");
    if (!n || !m) return;
    gemm(cx, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, w, k, (size_t)(OC * C), x, k, (size_t)(N * C),
         beta, y, m);
}

/* ---- y = x w^T + b with the bias in cuBLASLt's epilogue (run.precision = bf16) ------------- *
 * The GEMM writes y once, with b added to each row as it does: no fill of y with b before and
 * no read of it by a beta-1 GEMM (on the H200 a 124M step's forward matmuls took 13 ms, about a
 * third of it those two passes over y; not yet measured with this). The descriptors and the
 * heuristic's algorithm are made once per shape and kept (the heuristic gives the same choice
 * for the same arguments, on the checker's handle too: the same bits on either stream). Where
 * cuBLASLt has no algorithm, refuses a call, or y or b is not 16-byte aligned, the fill and
 * GemmEx run instead. */
#define LT_PLANS 64 /* shapes kept per context (a model has a handful) */

typedef struct lt_plan {
    int m, n, k;
    bool ok; /* false: no algorithm (the fill and GemmEx instead) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} LtPlan;

#define LT_TRY(call) if ((call) != CUBLAS_STATUS_SUCCESS) return p

static LtPlan *lt_plan(CudaCtx *cx, int m, int n, int k)
{
    for (int i = 0; i < cx->lt_nplans; i++) {
        LtPlan *q = &cx->lt_plans[i];
        if (q->m == m && q->n == n && q->k == k) return q;
    }
    if (!cx->lt_plans) {
        cx->lt_plans = (LtPlan *)calloc(LT_PLANS, sizeof(LtPlan));
        FT_ASSERT(cx->lt_plans);
    }
    if (cx->lt_nplans == LT_PLANS) return NULL;
    LtPlan *p = &cx->lt_plans[cx->lt_nplans++];
    p->m = m, p->n = n, p->k = k, p->ok = false;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bias_type = CUDA_R_32F;
    LT_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof bias_type));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, (uint64_t)k, (uint64_t)m, k)); /* w */
    LT_TRY(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, (uint64_t)k, (uint64_t)n, k)); /* x^T */
    LT_TRY(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, (uint64_t)m, (uint64_t)n, m));  /* y^T */
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = cx->blas_ws_bytes;
    uint32_t align = 16;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &align, sizeof align) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &align, sizeof align) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoGetHeuristic(cx->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &res,
                                       &got) == CUBLAS_STATUS_SUCCESS &&
        got > 0)
        p->algo = res.algo, p->ok = true;
    cublasLtMatmulPreferenceDestroy(pref);
    return p;
}

/* FTLLM_CUDA_LT (read once): unset or 1, the bias epilogue where it can run; 0, never (the fill
 * and GemmEx: a measurement aid, perf/gpu/run.sh times the matmuls both ways) */
static const char *lt_env(void)
{
    static const char *v;
    if (!v) {
        const char *e = getenv("FTLLM_CUDA_LT");
        v = e && *e ? e : "1";
    }
    return v;
}

bool cuda_lt_on(void) { return !strcmp(lt_env(), "1"); }

const char *cuda_lt_check(void)
{
    static char why[120];
    if (!strcmp(lt_env(), "0") || !strcmp(lt_env(), "1")) return NULL;
    snprintf(why, sizeof why, "FTLLM_CUDA_LT=%.40s: expected 1 (the default) or 0", lt_env());
    return why;
}

/* y^T (m, n) = w^T-as-stored (k, m)^T x^T (k, n) + b on cuBLASLt; false: not run */
static bool lt_bias(CudaCtx *cx, const float *x, const float *w, const float *b, float *y, int n,
                    int k, int m)
{
    if (!cx->bf16 || !cx->lt || !k || (uintptr_t)y % 16 || (uintptr_t)b % 16 || !cuda_lt_on())
        return false;
    LtPlan *p = lt_plan(cx, m, n, k);
    if (!p || !p->ok) return false;
    if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b) !=
        CUBLAS_STATUS_SUCCESS)
        return p->ok = false, false;
    __nv_bfloat16 *w16, *x16;
    operands_bf16(cx, w, (size_t)m * k, x, (size_t)n * k, &w16, &x16);
    const float one = 1.0f, zero = 0.0f;
    if (cublasLtMatmul(cx->lt, p->desc, &one, w16, p->a, x16, p->b, &zero, y, p->c, y, p->c,
                       &p->algo, cx->blas_ws, cx->blas_ws_bytes, cx->stream) !=
        CUBLAS_STATUS_SUCCESS)
        return p->ok = false, false; /* refused at the call: nothing was queued */
    return true;
}

void cuda_gemm_xwt_bias(CudaCtx *cx, const float *x, const float *w, const float *b, float *y,
                        long long N, long long C, long long OC)
{
    int n = as_int(N, "N"), k = as_int(C, "C"), m = as_int(OC, "OC");
    if (!n || !m) return;
    if (b && lt_bias(cx, x, w, b, y, n, k, m)) return;
    if (b) cuda_rows_fill(cx, y, b, N, OC);
    cuda_gemm_xwt(cx, x, w, y, N, C, OC, b ? 1.0f : 0.0f);
}

void cuda_gemm_dytx(CudaCtx *cx, const float *dy, const float *x, float *dw, long long N,
                    long long C, long long OC, float beta)
{
    int k = as_int(N, "N"), m = as_int(C, "C"), n = as_int(OC, "OC");
    if (!m || !n) return;
    gemm(cx, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, x, m, (size_t)(N * C), dy, n, (size_t)(N * OC),
         beta, dw, m);
}

/* both products of a matmul's backward (ops_cuda.h): dx = dy w and dw = beta dw + dy^T x, as
 * column-major dx^T = w^T dy^T and dw^T = x^T dy; under bf16 each operand is rounded once */
void cuda_gemm_bwd(CudaCtx *cx, const float *dy, const float *x, const float *w, float *dx,
                   float *dw, long long N, long long C, long long OC, float beta)
{
    int n = as_int(N, "N"), c = as_int(C, "C"), oc = as_int(OC, "OC");
    bool do_dx = dx && n && c, do_dw = dw && c && oc;
    if (!do_dx && !do_dw) return;
    const void *dyp = dy, *wp = w, *xp = x; /* the operands in cx's precision */
    if (cx->bf16) {
        size_t ndy = (size_t)(N * OC), nw = do_dx ? (size_t)(OC * C) : 0,
               nx = do_dw ? (size_t)(N * C) : 0, s = sizeof(__nv_bfloat16);
        size_t ow = cuda_align(s * ndy), ox = ow + cuda_align(s * nw);
        char *ws = gemm_ws(cx, ox + s * nx);
        __nv_bfloat16 *dy16 = (__nv_bfloat16 *)ws, *w16 = (__nv_bfloat16 *)(ws + ow),
                      *x16 = (__nv_bfloat16 *)(ws + ox);
        cuda_to_bf16(cx, dy16, dy, ndy);
        cuda_to_bf16(cx, w16, w, nw);
        cuda_to_bf16(cx, x16, x, nx);
        dyp = dy16, wp = w16, xp = x16;
    }
    if (do_dx) gemm_on(cx, CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, wp, c, dyp, oc, 0.0f, dx, c);
    if (do_dw) gemm_on(cx, CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, xp, c, dyp, oc, beta, dw, c);
}

/* x: columns, y: rows, each in a grid-stride loop (the bias value read once per column, no
 * index division per element: 1.4 G elements a GPT-2 124M step) */
__global__ void rows_fill_kernel(float *y, const float *b, long long N, long long OC)
{
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < OC;
         c += (long long)gridDim.x * blockDim.x) {
        float v = b[c];
        for (long long r = blockIdx.y; r < N; r += gridDim.y) y[r * OC + c] = v;
    }
}

void cuda_rows_fill(CudaCtx *cx, float *y, const float *b, long long N, long long OC)
{
    if (N * OC == 0) return;
    dim3 grid(cuda_blocks(OC, 256), (unsigned)(N < 2048 ? N : 2048));
    rows_fill_kernel<<<grid, 256, 0, cx->stream>>>(y, b, N, OC);
    CUDA_LAUNCHED();
}

void cuda_init_from(CudaCtx *cx, float *dst, const float *src, size_t n)
{
    FT_ASSERT(dst != src || !n);
    if (!n) return;
    if (src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToDevice,
                                   cx->stream));
    else
        CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(float) * n, cx->stream));
}

/* ops_matmul.cu: MATMUL (ops.h): y = x w^T + b through cuBLAS (gemm.cu: under bf16 the bias in
 * cuBLASLt's epilogue); backward dx = dy w,
 * dw = prev + dy^T x (cuBLAS, beta 1 onto the earlier sum; both products in cuda_gemm_bwd, which
 * rounds dy to bf16 once under run.precision = bf16), db = prev + column sums of dy (colsum.cu,
 * fixed chunks: no atomics). */
#include "ops_cuda.h"

void cuda_matmul_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *x = (const float *)c->in[0], *w = (const float *)c->in[1],
                *b = (const float *)c->in[2];
    float *y = (float *)c->out[0];
    long long N = c->d[0], C = c->d[1], OC = c->d[2];
    cuda_gemm_xwt_bias(cx, x, w, b, y, N, C, OC);
}

void cuda_matmul_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *dy = (const float *)c->in[0], *x = (const float *)c->in[1],
                *w = (const float *)c->in[2], *dw_prev = (const float *)c->in[3],
                *db_prev = (const float *)c->in[4];
    float *dx = (float *)c->out[0], *dw = (float *)c->out[1], *db = (float *)c->out[2];
    long long N = c->d[0], C = c->d[1], OC = c->d[2];
    FT_ASSERT(!dw || (dw != dw_prev && (!db || db != db_prev)));
    /* dw NULL: dx only (a tied LM head: its dW is the encoder backward's) */
    if (dw && dw_prev) cuda_init_from(cx, dw, dw_prev, (size_t)(OC * C));
    cuda_gemm_bwd(cx, dy, x, w, dx, dw, N, C, OC, dw_prev ? 1.0f : 0.0f);
    if (dw && db) cuda_colsum(cx, db, db_prev, dy, N, OC);
}

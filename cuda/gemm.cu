/* gemm.cu: row-major GEMMs in ops.h's layouts through cuBLAS's column-major sgemm, and the two
 * small fills a matmul needs (bias rows, a gradient's start from its earlier sum).
 *
 * A row-major (r, c) matrix is cuBLAS's column-major (c, r) matrix with leading dimension c, so
 * each product below is computed transposed: y^T = w x^T, dx^T = w^T dy^T, dw^T = x^T dy. */
#include "ops_cuda.h"

#include <limits.h>

static int as_int(long long v, const char *what)
{
    if (v < 0 || v > INT_MAX) FT_DIE("cuda gemm: %s = %lld does not fit cuBLAS's int", what, v);
    return (int)v;
}

void cuda_gemm_xwt(CudaCtx *cx, const float *x, const float *w, float *y, long long N,
                   long long C, long long OC, float beta)
{
    const float one = 1.0f;
    int n = as_int(N, "N"), k = as_int(C, "C"), m = as_int(OC, "OC");
    if (!n || !m) return;
    CUBLAS_CHECK(cublasSgemm(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, k, x, k,
                             &beta, y, m));
}

void cuda_gemm_dyw(CudaCtx *cx, const float *dy, const float *w, float *dx, long long N,
                   long long C, long long OC)
{
    const float one = 1.0f, zero = 0.0f;
    int n = as_int(N, "N"), m = as_int(C, "C"), k = as_int(OC, "OC");
    if (!n || !m) return;
    CUBLAS_CHECK(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, w, m, dy, k,
                             &zero, dx, m));
}

void cuda_gemm_dytx(CudaCtx *cx, const float *dy, const float *x, float *dw, long long N,
                    long long C, long long OC, float beta)
{
    const float one = 1.0f;
    int k = as_int(N, "N"), m = as_int(C, "C"), n = as_int(OC, "OC");
    if (!m || !n) return;
    CUBLAS_CHECK(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, x, m, dy, n,
                             &beta, dw, m));
}

__global__ void rows_fill_kernel(float *y, const float *b, long long N, long long OC)
{
    long long n = N * OC;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = b[i % OC];
}

void cuda_rows_fill(CudaCtx *cx, float *y, const float *b, long long N, long long OC)
{
    if (N * OC == 0) return;
    rows_fill_kernel<<<cuda_blocks(N * OC, 256), 256, 0, cx->stream>>>(y, b, N, OC);
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

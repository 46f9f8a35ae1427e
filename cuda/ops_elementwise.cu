/* ops_elementwise.cu: GELU (tanh approximation, with the CPU's polynomial tanh, so the bits
 * match ops_cpu.c) and RESIDUAL (ops.h): grid-stride loops, one element per thread. */
#include "ops_cuda.h"

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define EW_NT 256

#define FOR_EACH(i, n)                                                                         \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n);              \
         i += (long long)gridDim.x * blockDim.x)

__global__ void gelu_fwd_kernel(float *y, const float *x, long long n)
{
    FOR_EACH(i, n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanh_poly(GELU_S * (v + 0.044715f * v * v * v)));
    }
}

__global__ void gelu_bwd_kernel(float *dx, const float *dy, const float *x, long long n)
{
    FOR_EACH(i, n) {
        float v = x[i];
        float u = GELU_S * (v + 0.044715f * v * v * v);
        float th = tanh_poly(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) +
                  0.5f * v * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = g * dy[i];
    }
}

__global__ void residual_fwd_kernel(float *y, const float *a, const float *b, long long n)
{
    FOR_EACH(i, n) y[i] = a[i] + b[i];
}

__global__ void residual_bwd_kernel(float *da, float *db, const float *dy, long long n)
{
    FOR_EACH(i, n) {
        da[i] = dy[i];
        db[i] = dy[i];
    }
}

void cuda_gelu_fwd(const FtOpCall *c)
{
    long long n = c->d[0];
    if (n <= 0) return;
    gelu_fwd_kernel<<<cuda_blocks(n, EW_NT), EW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], n);
    CUDA_LAUNCHED();
}

void cuda_gelu_bwd(const FtOpCall *c)
{
    long long n = c->d[0];
    if (n <= 0) return;
    gelu_bwd_kernel<<<cuda_blocks(n, EW_NT), EW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const float *)c->in[1], n);
    CUDA_LAUNCHED();
}

void cuda_residual_fwd(const FtOpCall *c)
{
    long long n = c->d[0];
    if (n <= 0) return;
    residual_fwd_kernel<<<cuda_blocks(n, EW_NT), EW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const float *)c->in[1], n);
    CUDA_LAUNCHED();
}

void cuda_residual_bwd(const FtOpCall *c)
{
    long long n = c->d[0];
    if (n <= 0) return;
    residual_bwd_kernel<<<cuda_blocks(n, EW_NT), EW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (float *)c->out[1], (const float *)c->in[0], n);
    CUDA_LAUNCHED();
}

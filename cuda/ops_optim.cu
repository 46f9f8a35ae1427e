/* ops_optim.cu: GRADNORM and ADAMW (ops.h).
 * GRADNORM: the CPU's fixed chunks of FT_OPS_CHUNK elements, one block each, its sum of squares
 * in double in the block's fixed tree; then one thread adds the chunk sums in chunk order.
 * ADAMW: the CPU's scalar loop, operation for operation (IEEE division and square root, no
 * contraction), so the new parameters and moments have the CPU's bits. */
#include "ops_cuda.h"

__global__ void __launch_bounds__(FT_CUDA_NT)
gradnorm_part_kernel(double *part, const float *g, long long n)
{
    long long k = blockIdx.x, lo = k * FT_OPS_CHUNK;
    long long hi = lo + FT_OPS_CHUNK < n ? lo + FT_OPS_CHUNK : n;
    double s = 0;
    for (long long i = lo + threadIdx.x; i < hi; i += FT_CUDA_NT) s += (double)g[i] * g[i];
    s = block_sum(s);
    if (threadIdx.x == 0) part[k] = s;
}

__global__ void gradnorm_total_kernel(double *out, const double *part, long long nch)
{
    double total = 0;
    for (long long k = 0; k < nch; k++) total += part[k];
    out[0] = total;
}

void cuda_gradnorm_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long n = c->d[0], nch = (n + FT_OPS_CHUNK - 1) / FT_OPS_CHUNK;
    double *part = (double *)cuda_scratch(cx, sizeof(double) * (size_t)(nch > 0 ? nch : 1));
    if (nch > 0) {
        gradnorm_part_kernel<<<(unsigned)nch, FT_CUDA_NT, 0, cx->stream>>>(
            part, (const float *)c->in[0], n);
        CUDA_LAUNCHED();
    }
    gradnorm_total_kernel<<<1, 1, 0, cx->stream>>>((double *)c->out[0], part, nch);
    CUDA_LAUNCHED();
}

struct AdamwArgs {
    float lr, b1, b2, eps, wd, bc1, bc2, gs;
};

__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, const float *p0,
                             const float *m0, const float *v0, long long n, AdamwArgs a)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float gi = g[i] * a.gs;
        float mi = a.b1 * m0[i] + (1.0f - a.b1) * gi;
        float vi = a.b2 * v0[i] + ((1.0f - a.b2) * gi) * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p0[i] - a.lr * (mi / a.bc1 / (sqrtf(vi / a.bc2) + a.eps) + a.wd * p0[i]);
    }
}

void cuda_adamw_fwd(const FtOpCall *c)
{
    long long n = c->d[0];
    FT_ASSERT(c->out[0] != c->in[1] && c->out[1] != c->in[2] && c->out[2] != c->in[3]);
    if (n <= 0) return;
    AdamwArgs a = {(float)c->x[0], (float)c->x[1], (float)c->x[2], (float)c->x[3],
                   (float)c->x[4], (float)c->x[5], (float)c->x[6], (float)c->x[7]};
    adamw_kernel<<<cuda_blocks(n, 256), 256, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (float *)c->out[1], (float *)c->out[2], (const float *)c->in[0],
        (const float *)c->in[1], (const float *)c->in[2], (const float *)c->in[3], n, a);
    CUDA_LAUNCHED();
}

/* ops_moe_rows.cu: MOE_DISPATCH and MOE_COMBINE (ops.h): moving token rows to and from the
 * packed expert-major buffer. Every kept choice owns one packed row (routing gives each a
 * distinct row), so scatters write disjoint rows; sums over a token's K choices run in choice
 * order in one thread, as on the CPU. Unused packed rows are zeroed first. */
#include "ops_cuda.h"

#define ROW_NT 128

/* counts[e] = kept choices of e, one block per expert */
__global__ void __launch_bounds__(FT_CUDA_NT)
dispatch_counts_kernel(int *counts, const int *expert, const int *row, long long NK)
{
    int e = blockIdx.x, cnt = 0;
    for (long long i = threadIdx.x; i < NK; i += FT_CUDA_NT) cnt += row[i] >= 0 && expert[i] == e;
    cnt = block_sum(cnt);
    if (threadIdx.x == 0) counts[e] = cnt;
}

/* one block per choice i: xs[row[i]] = x[i / K] */
__global__ void dispatch_rows_kernel(float *xs, const float *x, const int *row, long long C,
                                     long long K)
{
    long long i = blockIdx.x;
    int r = row[i];
    if (r < 0) return;
    for (long long ch = threadIdx.x; ch < C; ch += ROW_NT)
        xs[(long long)r * C + ch] = x[(i / K) * C + ch];
}

void cuda_moe_dispatch_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *x = (const float *)c->in[0];
    const int *expert = (const int *)c->in[1], *row = (const int *)c->in[2];
    float *xs = (float *)c->out[0];
    int *counts = (int *)c->out[1];
    long long N = c->d[0], C = c->d[1], K = c->d[2], E = c->d[3];
    FT_ASSERT(E >= 1 && E < 65536);
    CUDA_CHECK(cudaMemsetAsync(xs, 0, sizeof(float) * (size_t)(N * K * C), cx->stream));
    dispatch_counts_kernel<<<(unsigned)E, FT_CUDA_NT, 0, cx->stream>>>(counts, expert, row, N * K);
    CUDA_LAUNCHED();
    if (N * K == 0) return;
    dispatch_rows_kernel<<<(unsigned)(N * K), ROW_NT, 0, cx->stream>>>(xs, x, row, C, K);
    CUDA_LAUNCHED();
}

/* dx[n] = dadd[n] (or 0) + the rows of n's kept choices, in choice order; one block per token */
__global__ void dispatch_bwd_kernel(float *dx, const float *dxs, const int *row, const float *dadd,
                                    long long C, long long K)
{
    long long n = blockIdx.x;
    for (long long ch = threadIdx.x; ch < C; ch += ROW_NT) {
        float o = dadd ? dadd[n * C + ch] : 0.0f;
        for (long long j = 0; j < K; j++) {
            int r = row[n * K + j];
            if (r >= 0) o += dxs[(long long)r * C + ch];
        }
        dx[n * C + ch] = o;
    }
}

void cuda_moe_dispatch_bwd(const FtOpCall *c)
{
    long long N = c->d[0], C = c->d[1], K = c->d[2];
    if (N <= 0) return;
    dispatch_bwd_kernel<<<(unsigned)N, ROW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const int *)c->in[1],
        (const float *)c->in[2], C, K);
    CUDA_LAUNCHED();
}

/* y[n] = sum over n's kept choices of gate yr[row], in choice order; one block per token */
__global__ void combine_fwd_kernel(float *y, const float *yr, const float *gate, const int *row,
                                   long long C, long long K)
{
    long long n = blockIdx.x;
    for (long long ch = threadIdx.x; ch < C; ch += ROW_NT) {
        float o = 0.0f;
        for (long long j = 0; j < K; j++) {
            int r = row[n * K + j];
            if (r >= 0) o += gate[n * K + j] * yr[(long long)r * C + ch];
        }
        y[n * C + ch] = o;
    }
}

void cuda_moe_combine_fwd(const FtOpCall *c)
{
    long long N = c->d[0], C = c->d[1], K = c->d[2];
    if (N <= 0) return;
    combine_fwd_kernel<<<(unsigned)N, ROW_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const float *)c->in[1],
        (const int *)c->in[2], C, K);
    CUDA_LAUNCHED();
}

/* one block of FT_CUDA_NT per choice (n, j): dyr[row] = gate dy[n], dgate = dy[n] . yr[row] in
 * double (fixed tree); a dropped choice gets dgate 0 (its packed row stays zero) */
__global__ void __launch_bounds__(FT_CUDA_NT)
combine_bwd_kernel(float *dyr, float *dgate, const float *dy, const float *yr, const float *gate,
                   const int *row, long long C, long long K)
{
    long long i = blockIdx.x, n = i / K;
    int r = row[i];
    if (r < 0) {
        if (threadIdx.x == 0) dgate[i] = 0.0f;
        return;
    }
    const float *g = dy + n * C, *v = yr + (long long)r * C;
    float *o = dyr + (long long)r * C, gj = gate[i];
    double dot = 0;
    for (long long ch = threadIdx.x; ch < C; ch += FT_CUDA_NT) {
        o[ch] = gj * g[ch];
        dot += (double)g[ch] * v[ch];
    }
    dot = block_sum(dot);
    if (threadIdx.x == 0) dgate[i] = (float)dot;
}

void cuda_moe_combine_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long N = c->d[0], C = c->d[1], K = c->d[2];
    float *dyr = (float *)c->out[0];
    CUDA_CHECK(cudaMemsetAsync(dyr, 0, sizeof(float) * (size_t)(N * K * C), cx->stream));
    if (N * K == 0) return;
    combine_bwd_kernel<<<(unsigned)(N * K), FT_CUDA_NT, 0, cx->stream>>>(
        dyr, (float *)c->out[1], (const float *)c->in[0], (const float *)c->in[1],
        (const float *)c->in[2], (const int *)c->in[3], C, K);
    CUDA_LAUNCHED();
}

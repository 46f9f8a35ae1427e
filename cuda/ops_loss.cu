/* ops_loss.cu: CROSSENT (softmax + cross-entropy over the first V of Vp columns) and LOSSMEAN
 * (ops.h). One block of FT_CUDA_NT threads per row: the maximum, exp with the CPU's polynomial,
 * the sum in double (fixed tree), probabilities, zeros in the padding; the loss in double.
 * A target outside [0, V) (the data module rejects such files) gives a NaN loss: a kernel
 * cannot stop the run, a NaN loss does (train.c stops on a non-finite loss). */
#include "ops_cuda.h"

__global__ void __launch_bounds__(FT_CUDA_NT)
crossent_fwd_kernel(float *probs, float *losses, const float *logits, const int *tgt,
                    long long V, long long Vp)
{
    long long n = blockIdx.x;
    const float *l = logits + n * Vp;
    float *p = probs + n * Vp;
    float mx = -INFINITY;
    for (long long v = threadIdx.x; v < V; v += FT_CUDA_NT) mx = fmaxf(mx, l[v]);
    mx = block_max(mx);
    double sum = 0;
    for (long long v = threadIdx.x; v < V; v += FT_CUDA_NT) sum += exp_poly(l[v] - mx);
    sum = block_sum(sum);
    float inv = (float)(1.0 / sum);
    /* exp again rather than stored and read back (the same float): three passes over the row's
     * memory instead of five (its logits are 3.3 GB a GPT-2 124M step) */
    for (long long v = threadIdx.x; v < Vp; v += FT_CUDA_NT)
        p[v] = v < V ? exp_poly(l[v] - mx) * inv : 0.0f;
    if (threadIdx.x == 0) {
        int t = tgt[n];
        losses[n] = t >= 0 && t < V ? (float)(log(sum) - (double)(l[t] - mx)) : nanf("");
    }
}

void cuda_crossent_fwd(const FtOpCall *c)
{
    long long N = c->d[0], V = c->d[1], Vp = c->d[2];
    if (N <= 0) return;
    crossent_fwd_kernel<<<(unsigned)N, FT_CUDA_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (float *)c->out[1], (const float *)c->in[0], (const int *)c->in[1],
        V, Vp);
    CUDA_LAUNCHED();
}

/* dlogits = s (probs - onehot(target)), zeros in the padding */
__global__ void crossent_bwd_kernel(float *dl, const float *probs, const int *tgt, long long V,
                                    long long Vp, float s)
{
    long long n = blockIdx.x;
    const float *p = probs + n * Vp;
    float *o = dl + n * Vp;
    int t = tgt[n];
    for (long long v = threadIdx.x; v < Vp; v += blockDim.x)
        o[v] = v >= V ? 0.0f : v == t ? s * (p[v] - 1.0f) : s * p[v];
}

void cuda_crossent_bwd(const FtOpCall *c)
{
    long long N = c->d[0], V = c->d[1], Vp = c->d[2];
    if (N <= 0) return;
    crossent_bwd_kernel<<<(unsigned)N, FT_CUDA_NT, 0, cuda_ctx(c)->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const int *)c->in[1], V, Vp,
        (float)c->x[0]);
    CUDA_LAUNCHED();
}

/* loss = mean of the N losses, summed in double in one block's fixed tree */
__global__ void __launch_bounds__(FT_CUDA_NT)
lossmean_kernel(float *out, const float *l, long long N)
{
    double s = 0;
    for (long long i = threadIdx.x; i < N; i += FT_CUDA_NT) s += l[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = (float)(s / N);
}

void cuda_lossmean_fwd(const FtOpCall *c)
{
    lossmean_kernel<<<1, FT_CUDA_NT, 0, cuda_ctx(c)->stream>>>((float *)c->out[0],
                                                               (const float *)c->in[0], c->d[0]);
    CUDA_LAUNCHED();
}

/* ops_loss.cu: CROSSENT (softmax + cross-entropy over the first V of Vp columns) and LOSSMEAN
 * (ops.h). One block of FT_CUDA_NT threads per row: the maximum, exp with the CPU's polynomial,
 * the sum in double (fixed tree), probabilities, zeros in the padding; the loss in double.
 * Where the row fits in shared memory (GPT-2's vocabulary does on an H100 or H200) it is read
 * from device memory once (crossent_fwd_smem_kernel), otherwise three times; the same bytes.
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

/* The same op with the row in shared memory, where its V floats fit (GPT-2's 50257 take 196 KiB
 * of an H100's or H200's 227): the logits are read from device memory once instead of three
 * times, in 16-byte pieces, and each exp is kept there between the sum and the probabilities.
 * Every thread owns the same columns as in crossent_fwd_kernel, so the sum runs in the same
 * tree over the same floats: the two kernels write the same bytes (test_gpu_ops runs both). One
 * block per SM at this size, so the load keeps eight pieces a thread in flight. The host checks
 * that rows start 16-byte aligned. */
__global__ void __launch_bounds__(FT_CUDA_NT)
crossent_fwd_smem_kernel(float *probs, float *losses, const float *logits, const int *tgt,
                         long long V, long long Vp)
{
    FT_DYN_SHARED(float, row);
    long long n = blockIdx.x, V4 = V / 4;
    const float *l = logits + n * Vp;
    const float4 *l4 = (const float4 *)l;
    float4 *r4 = (float4 *)row;
    float mx = -INFINITY;
#pragma unroll 8
    for (long long i = threadIdx.x; i < V4; i += FT_CUDA_NT) {
        float4 a = l4[i];
        r4[i] = a;
        mx = fmaxf(mx, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    for (long long v = 4 * V4 + threadIdx.x; v < V; v += FT_CUDA_NT) {
        row[v] = l[v];
        mx = fmaxf(mx, row[v]);
    }
    mx = block_max(mx); /* its barriers also make every thread's part of the row visible */
    double sum = 0;
    for (long long v = threadIdx.x; v < V; v += FT_CUDA_NT) {
        float e = exp_poly(row[v] - mx);
        row[v] = e;
        sum += e;
    }
    sum = block_sum(sum); /* and its barriers every thread's exps */
    float inv = (float)(1.0 / sum);
    float4 *p4 = (float4 *)(probs + n * Vp);
    for (long long i = threadIdx.x; i < Vp / 4; i += FT_CUDA_NT) {
        long long v = 4 * i;
        float4 q;
        q.x = v < V ? row[v] * inv : 0.0f;
        q.y = v + 1 < V ? row[v + 1] * inv : 0.0f;
        q.z = v + 2 < V ? row[v + 2] * inv : 0.0f;
        q.w = v + 3 < V ? row[v + 3] * inv : 0.0f;
        p4[i] = q;
    }
    if (threadIdx.x == 0) {
        int t = tgt[n];
        losses[n] = t >= 0 && t < V ? (float)(log(sum) - (double)(l[t] - mx)) : nanf("");
    }
}

/* The most dynamic shared memory crossent_fwd_smem_kernel may take on this device: its opt-in
 * limit less 1 KiB for block_max's and block_sum's static arrays (under 400 bytes). Asked once
 * per process (ftllm drives one device per rank). */
static size_t crossent_smem_max(const CudaCtx *cx)
{
    static long long max = -1;
    if (max < 0) {
        int optin = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          cx->device));
        max = optin - 1024 > 0 ? optin - 1024 : 0;
        if (max > 48 * 1024)
            CUDA_CHECK(cudaFuncSetAttribute(crossent_fwd_smem_kernel,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max));
    }
    return (size_t)max;
}

void cuda_crossent_fwd(const FtOpCall *c)
{
    long long N = c->d[0], V = c->d[1], Vp = c->d[2];
    if (N <= 0) return;
    CudaCtx *cx = cuda_ctx(c);
    size_t smem = (size_t)(V + 3) / 4 * 16;
    if (Vp % 4 == 0 && Vp >= V && ((uintptr_t)c->in[0] & 15) == 0 &&
        ((uintptr_t)c->out[0] & 15) == 0 && smem <= crossent_smem_max(cx))
        crossent_fwd_smem_kernel<<<(unsigned)N, FT_CUDA_NT, smem, cx->stream>>>(
            (float *)c->out[0], (float *)c->out[1], (const float *)c->in[0],
            (const int *)c->in[1], V, Vp);
    else
        crossent_fwd_kernel<<<(unsigned)N, FT_CUDA_NT, 0, cx->stream>>>(
            (float *)c->out[0], (float *)c->out[1], (const float *)c->in[0],
            (const int *)c->in[1], V, Vp);
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

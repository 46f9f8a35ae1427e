/* ops_encoder.cu: ENCODER (ops.h): x[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; backward into the
 * token and position tables without atomics.
 *
 * Backward: the (b, t) positions are sorted by token with CUB's stable radix sort (token as
 * key, position as value), so each token's positions form one segment in position order. One
 * block per segment start adds the segment's rows of dx onto dwte's row, position by position,
 * from the earlier sum: the CPU's order, so dwte has the CPU's bits. dwpe[t] = prev + dx[b, t]
 * over b in order, also the CPU's order. Rows of dwte no token hit are the earlier sum. */
#include "ops_cuda.h"

#include <cub/device/device_radix_sort.cuh>

__global__ void encoder_fwd_kernel(float *x, const int *tok, const float *wte, const float *wpe,
                                   long long BT, long long T, long long C)
{
    long long n = BT * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long bt = i / C, ch = i % C;
        x[i] = wte[(long long)tok[bt] * C + ch] + wpe[(bt % T) * C + ch];
    }
}

void cuda_encoder_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long B = c->d[0], T = c->d[1], C = c->d[2];
    if (B * T * C == 0) return;
    encoder_fwd_kernel<<<cuda_blocks(B * T * C, 256), 256, 0, cx->stream>>>(
        (float *)c->out[0], (const int *)c->in[0], (const float *)c->in[1],
        (const float *)c->in[2], B * T, T, C);
    CUDA_LAUNCHED();
}

__global__ void iota_kernel(int *v, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        v[i] = (int)i;
}

/* One block per sorted position s; only a segment's first position does work: dwte[v] (the
 * earlier sum, already copied there) += dx rows of the segment, in position order. */
__global__ void encoder_bwd_wte_kernel(float *dwte, const float *dx, const int *key,
                                       const int *pos, long long n, long long C)
{
    long long s = blockIdx.x;
    if (s >= n || (s > 0 && key[s] == key[s - 1])) return;
    int v = key[s];
    for (long long ch = threadIdx.x; ch < C; ch += blockDim.x) {
        float acc = dwte[(long long)v * C + ch];
        for (long long s2 = s; s2 < n && key[s2] == v; s2++) acc += dx[(long long)pos[s2] * C + ch];
        dwte[(long long)v * C + ch] = acc;
    }
}

/* dwpe[t, ch] = prev + sum over b of dx[b, t, ch], b in order; rows t >= T keep the prev. */
__global__ void encoder_bwd_wpe_kernel(float *dwpe, const float *dx, long long B, long long T,
                                       long long C)
{
    long long n = T * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (long long b = 0; b < B; b++) acc += dx[b * T * C + i];
        dwpe[i] = acc;
    }
}

void cuda_encoder_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *dx = (const float *)c->in[0];
    const int *tok = (const int *)c->in[1];
    float *dwte = (float *)c->out[0], *dwpe = (float *)c->out[1];
    long long B = c->d[0], T = c->d[1], C = c->d[2], Vp = (long long)c->x[0],
              maxT = (long long)c->x[1], N = B * T;
    FT_ASSERT(Vp >= 1 && maxT >= T && N < 2147483647LL);
    cuda_init_from(cx, dwte, (const float *)c->in[2], (size_t)(Vp * C));
    cuda_init_from(cx, dwpe, (const float *)c->in[3], (size_t)(maxT * C));
    if (c->in[4]) /* the tied LM head's part of dwte (ops.h): dlogits^T lnf */
        cuda_gemm_dytx(cx, (const float *)c->in[4], (const float *)c->in[5], dwte, N, C, Vp, 1.0f);
    if (N == 0 || C == 0) return;
    /* scratch: sorted keys, positions in, positions sorted, CUB's temporaries */
    size_t cub_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, cub_bytes, (const int *)NULL, (int *)NULL,
                                               (const int *)NULL, (int *)NULL, (int)N, 0,
                                               32, cx->stream));
    size_t ib = cuda_align(sizeof(int) * (size_t)N);
    char *s = (char *)cuda_scratch(cx, 3 * ib + cub_bytes);
    int *key = (int *)s, *pos_in = (int *)(s + ib), *pos = (int *)(s + 2 * ib);
    iota_kernel<<<cuda_blocks(N, 256), 256, 0, cx->stream>>>(pos_in, N);
    CUDA_LAUNCHED();
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s + 3 * ib, cub_bytes, tok, key, pos_in, pos,
                                               (int)N, 0, 32, cx->stream));
    encoder_bwd_wte_kernel<<<(unsigned)N, 128, 0, cx->stream>>>(dwte, dx, key, pos, N, C);
    CUDA_LAUNCHED();
    encoder_bwd_wpe_kernel<<<cuda_blocks(T * C, 256), 256, 0, cx->stream>>>(dwpe, dx, B, T, C);
    CUDA_LAUNCHED();
}

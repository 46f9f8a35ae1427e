/* ops_moe_route.cu: MOE_ROUTE (ops.h): softmax, top-K, capacity, packed rows and the
 * load-balance loss, and its backward.
 *
 * Forward, in three kernels:
 *  1. one thread per token: the softmax (the CPU's polynomial exp, the sum in double in expert
 *     order) and the top K by logit (ties to the lower index): the CPU's loops, the CPU's bits;
 *  2. one block per expert e: walks the N K choices in the capacity order (choice j of every
 *     token, then j + 1) in tiles, numbering e's choices with an integer block scan; the first
 *     cap keep their number as a position, later ones get -1. Also the number of choices of e
 *     (f_e, before capacity) and the sum of e's probabilities over tokens (double, fixed tree);
 *  3. one block: the experts' row offsets (kept counts in expert order), positions turned into
 *     packed rows, and aux = coef E sum_e f_e / (N K) P_e / N, summed in expert order.
 * Backward: choices per expert counted by one block per expert (integers: exact), then one
 * thread per token as on the CPU. */
#include "ops_cuda.h"

__global__ void route_topk_kernel(float *probs, int *expert, float *gate, const float *lg,
                                  long long N, long long E, long long K)
{
    for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < N;
         n += (long long)gridDim.x * blockDim.x) {
        const float *l = lg + n * E;
        float *p = probs + n * E, mx = -INFINITY;
        for (long long e = 0; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (long long e = 0; e < E; e++) {
            p[e] = exp_poly(l[e] - mx);
            sum += p[e];
        }
        float inv = (float)(1.0 / sum);
        for (long long e = 0; e < E; e++) p[e] *= inv;
        for (long long j = 0; j < K; j++) {
            long long best = -1;
            for (long long e = 0; e < E; e++) {
                int taken = 0;
                for (long long i = 0; i < j; i++) taken |= expert[n * K + i] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = e;
            }
            expert[n * K + j] = (int)best;
            gate[n * K + j] = p[best];
        }
    }
}

/* Exclusive scan of one int per thread over the block, in a fixed order; returns the thread's
 * prefix and sets *total. */
__device__ int block_scan_excl(int v, int *total)
{
    __shared__ int warp_tot[FT_CUDA_NT / 32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads(); /* an earlier call's readers are done with warp_tot */
    if (lane == 31) warp_tot[w] = x;
    __syncthreads();
    int before = 0, all = 0;
    for (int i = 0; i < FT_CUDA_NT / 32; i++) {
        before += i < w ? warp_tot[i] : 0;
        all += warp_tot[i];
    }
    *total = all;
    return before + x - v;
}

/* One block per expert e: row[i] = e's position among its choices (capacity order) or -1;
 * kept[e] = min(choices, cap), picks[e] = choices, psum[e] = sum over tokens of probs[n, e]. */
__global__ void __launch_bounds__(FT_CUDA_NT)
route_capacity_kernel(int *row, int *kept, int *picks, double *psum, const int *expert,
                      const float *probs, long long N, long long E, long long K, long long cap)
{
    int e = blockIdx.x;
    long long base = 0;
    for (long long i0 = 0; i0 < N * K; i0 += FT_CUDA_NT) {
        long long i = i0 + threadIdx.x; /* capacity order: i = j N + n */
        long long j = i / N, n = i % N, at = n * K + j;
        int mine = i < N * K && expert[at] == e, tile;
        int pos = block_scan_excl(mine, &tile);
        if (mine) row[at] = base + pos < cap ? (int)(base + pos) : -1;
        base += tile;
    }
    double s = 0;
    for (long long n = threadIdx.x; n < N; n += FT_CUDA_NT) s += probs[n * E + e];
    s = block_sum(s);
    if (threadIdx.x == 0) {
        kept[e] = (int)(base < cap ? base : cap);
        picks[e] = (int)base;
        psum[e] = s;
    }
}

/* One block: offsets, packed rows, the auxiliary loss. */
__global__ void route_finish_kernel(int *row, float *aux, const int *expert, const int *kept,
                                    const int *picks, const double *psum, long long *off,
                                    long long N, long long E, long long K, double coef)
{
    if (threadIdx.x == 0) {
        double a = 0;
        long long o = 0;
        for (long long e = 0; e < E; e++) {
            off[e] = o;
            o += kept[e];
            a += (double)picks[e] / (double)(N * K) * (psum[e] / (double)N);
        }
        aux[0] = (float)(coef * (double)E * a);
    }
    __syncthreads();
    for (long long i = threadIdx.x; i < N * K; i += blockDim.x)
        if (row[i] >= 0) row[i] += (int)off[expert[i]];
}

void cuda_moe_route_fwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    const float *lg = (const float *)c->in[0];
    float *probs = (float *)c->out[0], *gate = (float *)c->out[2], *aux = (float *)c->out[4];
    int *expert = (int *)c->out[1], *row = (int *)c->out[3];
    long long N = c->d[0], E = c->d[1], K = c->d[2], cap = c->d[3];
    FT_ASSERT(K >= 1 && K <= E && cap >= 1 && E < 65536 && N * K < 2147483647LL);
    size_t ib = cuda_align(sizeof(int) * (size_t)E), db = cuda_align(sizeof(double) * (size_t)E);
    char *s = (char *)cuda_scratch(cx, 2 * ib + 2 * db);
    int *kept = (int *)s, *picks = (int *)(s + ib);
    double *psum = (double *)(s + 2 * ib);
    long long *off = (long long *)(s + 2 * ib + db);
    if (N > 0) {
        route_topk_kernel<<<cuda_blocks(N, 128), 128, 0, cx->stream>>>(probs, expert, gate, lg, N,
                                                                       E, K);
        CUDA_LAUNCHED();
    }
    route_capacity_kernel<<<(unsigned)E, FT_CUDA_NT, 0, cx->stream>>>(row, kept, picks, psum,
                                                                      expert, probs, N, E, K, cap);
    CUDA_LAUNCHED();
    route_finish_kernel<<<1, FT_CUDA_NT, 0, cx->stream>>>(row, aux, expert, kept, picks, psum,
                                                          off, N, E, K, c->x[0]);
    CUDA_LAUNCHED();
}

/* fa[e] = (choices of e) s, counted by one block per expert */
__global__ void __launch_bounds__(FT_CUDA_NT)
route_bwd_count_kernel(double *fa, const int *expert, long long NK, double s)
{
    int e = blockIdx.x, cnt = 0;
    for (long long i = threadIdx.x; i < NK; i += FT_CUDA_NT) cnt += expert[i] == e;
    cnt = block_sum(cnt);
    if (threadIdx.x == 0) fa[e] = (double)cnt * s;
}

__global__ void route_bwd_kernel(float *dl, const float *dgate, const float *probs,
                                 const int *expert, const double *fa, long long N, long long E,
                                 long long K)
{
    for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < N;
         n += (long long)gridDim.x * blockDim.x) {
        const float *p = probs + n * E;
        float *o = dl + n * E;
        for (long long e = 0; e < E; e++) o[e] = (float)fa[e];
        for (long long j = 0; j < K; j++) o[expert[n * K + j]] += dgate[n * K + j];
        double dot = 0;
        for (long long e = 0; e < E; e++) dot += (double)p[e] * o[e];
        for (long long e = 0; e < E; e++) o[e] = p[e] * (o[e] - (float)dot);
    }
}

void cuda_moe_route_bwd(const FtOpCall *c)
{
    CudaCtx *cx = cuda_ctx(c);
    long long N = c->d[0], E = c->d[1], K = c->d[2];
    FT_ASSERT(E >= 1 && E < 65536);
    double s = c->x[0] * c->x[1] * (double)E / ((double)(N * K) * (double)N);
    double *fa = (double *)cuda_scratch(cx, sizeof(double) * (size_t)E);
    route_bwd_count_kernel<<<(unsigned)E, FT_CUDA_NT, 0, cx->stream>>>(
        fa, (const int *)c->in[2], N * K, s);
    CUDA_LAUNCHED();
    if (N <= 0) return;
    route_bwd_kernel<<<cuda_blocks(N, 128), 128, 0, cx->stream>>>(
        (float *)c->out[0], (const float *)c->in[0], (const float *)c->in[1],
        (const int *)c->in[2], fa, N, E, K);
    CUDA_LAUNCHED();
}

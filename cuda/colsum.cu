/* colsum.cu: sums over the rows of a row-major matrix, per column, without atomics and in an
 * order fixed by the shape alone: rows are cut into chunks of FT_CUDA_ROWS_CHUNK, each chunk's
 * partial sum is one thread's sequential loop, then one thread per column adds the partial
 * sums in chunk order onto the base (the gradient's earlier sum). The CPU adds the rows one by
 * one in row order instead, so results agree to rounding, not to the bit. */
#include "ops_cuda.h"

#define COL_NT 128

/* part[k, c] = sum of src[n, c] over the rows n of chunk k (blockIdx.x), in row order */
__global__ void colsum_part_kernel(float *part, const float *src, long long N, long long C)
{
    long long k = blockIdx.x, c = blockIdx.y * (long long)COL_NT + threadIdx.x;
    if (c >= C) return;
    long long n0 = k * FT_CUDA_ROWS_CHUNK;
    long long n1 = n0 + FT_CUDA_ROWS_CHUNK < N ? n0 + FT_CUDA_ROWS_CHUNK : N;
    float s = 0.0f;
    for (long long n = n0; n < n1; n++) s += src[n * C + c];
    part[k * C + c] = s;
}

__global__ void colsum_finish_kernel(float *dst, const float *base, const float *part,
                                     long long nchunk, long long C)
{
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < C;
         c += (long long)gridDim.x * blockDim.x) {
        float s = base ? base[c] : 0.0f;
        for (long long k = 0; k < nchunk; k++) s += part[k * C + c];
        dst[c] = s;
    }
}

void cuda_colsum_finish(CudaCtx *cx, float *dst, const float *base, const float *part,
                        long long nchunk, long long C)
{
    if (C <= 0) return;
    colsum_finish_kernel<<<cuda_blocks(C, COL_NT), COL_NT, 0, cx->stream>>>(dst, base, part,
                                                                            nchunk, C);
    CUDA_LAUNCHED();
}

void cuda_colsum(CudaCtx *cx, float *dst, const float *base, const float *src, long long N,
                 long long C)
{
    if (C <= 0) return;
    long long nchunk = (N + FT_CUDA_ROWS_CHUNK - 1) / FT_CUDA_ROWS_CHUNK;
    float *part = (float *)cuda_scratch(cx, sizeof(float) * (size_t)((nchunk ? nchunk : 1) * C));
    if (nchunk) {
        dim3 grid((unsigned)nchunk, (unsigned)((C + COL_NT - 1) / COL_NT));
        colsum_part_kernel<<<grid, COL_NT, 0, cx->stream>>>(part, src, N, C);
        CUDA_LAUNCHED();
    }
    cuda_colsum_finish(cx, dst, base, part, nchunk, C);
}

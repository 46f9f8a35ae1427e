/* dmr_cuda.cu: DMR's device side for the CUDA backend (backend.h: checker_run, equal,
 * fingerprint), so DMR (src/ft/dmr.c) checks outputs where they live.
 *
 * Key decisions:
 *  - The checker is a second CudaCtx: its own stream, cuBLAS handle with its own fixed workspace
 *    (pedantic fp32, no atomics) and its own op scratch, so an op re-run there takes the same
 *    code paths with the same workspace size and reproduces the primary's bytes, while sharing
 *    no temporary with the primary. checker_run orders it between the primary's work with two
 *    events (the checker waits for what the primary launched so far, the primary's next work
 *    waits for the checker): no host synchronisation.
 *  - fingerprint is fingerprint.h's (the very inline terms the CPU uses): per-thread 64-bit
 *    sums of word x key over a grid-stride loop, a block's fixed-tree sum, then one 64-bit
 *    integer atomicAdd per block. Integer addition mod 2^64 is associative and commutative, so
 *    the value does not depend on the order (no float is ever summed). Words are read by the
 *    pointer's alignment (4, 2 or 1 bytes), so a bf16 tensor at any element offset works.
 *  - equal: one flag word, set by any thread that sees a differing word (all write 1: the race
 *    is benign); 4-byte words when both pointers and the length allow, bytes otherwise.
 *  - Both answers come back through a pinned word pair and one stream synchronisation;
 *    mark_differs and fingerprint_into write into the caller's device words instead and do not
 *    wait (DMR reads a step's answers once, at its agreement). */
#include "cuda_common.cuh"

#include <stdint.h>
#include <string.h>

#include "ftllm/fingerprint.h"

void cuda_dmr_init(CudaCtx *cx, CudaCtx *checker)
{
    cx->checker = checker;
    CUDA_CHECK(cudaEventCreateWithFlags(&cx->ev_to_checker, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&cx->ev_from_checker, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc((void **)&cx->res_dev, 4 * sizeof(unsigned)));
    CUDA_CHECK(cudaMallocHost((void **)&cx->res_host, 4 * sizeof(unsigned)));
}

void cuda_checker_run(void *ctx, FtOpFn fn, FtOpCall *c)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    FT_ASSERT(cx->checker);
    CUDA_CHECK(cudaEventRecord(cx->ev_to_checker, cx->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cx->checker->stream, cx->ev_to_checker, 0));
    c->ctx = cx->checker;
    fn(c);
    c->ctx = cx;
    CUDA_CHECK(cudaEventRecord(cx->ev_from_checker, cx->checker->stream));
    CUDA_CHECK(cudaStreamWaitEvent(cx->stream, cx->ev_from_checker, 0));
}

/* ---- equal ------------------------------------------------------------------------------- */

template <typename W>
__global__ void differs_kernel(const W *a, const W *b, size_t n, unsigned *flag)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (a[i] != b[i]) {
            *flag = 1u;
            return;
        }
}

int cuda_equal(void *ctx, const void *a, const void *b, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!bytes || a == b) return 1;
    CUDA_CHECK(cudaMemsetAsync(cx->res_dev, 0, sizeof(unsigned), cx->stream));
    if ((((uintptr_t)a | (uintptr_t)b | bytes) & 3) == 0) {
        size_t n = bytes / 4;
        differs_kernel<uint32_t><<<cuda_blocks((long long)n, 256), 256, 0, cx->stream>>>(
            (const uint32_t *)a, (const uint32_t *)b, n, cx->res_dev);
    } else {
        differs_kernel<uint8_t><<<cuda_blocks((long long)bytes, 256), 256, 0, cx->stream>>>(
            (const uint8_t *)a, (const uint8_t *)b, bytes, cx->res_dev);
    }
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpyAsync(cx->res_host, cx->res_dev, sizeof(unsigned),
                               cudaMemcpyDeviceToHost, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return cx->res_host[0] == 0;
}

/* mark_differs: equal's kernel into the caller's flag, no wait (backend.h) */
void cuda_mark_differs(void *ctx, const void *a, const void *b, size_t bytes, unsigned *flag)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!bytes || a == b) return;
    if ((((uintptr_t)a | (uintptr_t)b | bytes) & 3) == 0) {
        size_t n = bytes / 4;
        differs_kernel<uint32_t><<<cuda_blocks((long long)n, 256), 256, 0, cx->stream>>>(
            (const uint32_t *)a, (const uint32_t *)b, n, flag);
    } else {
        differs_kernel<uint8_t><<<cuda_blocks((long long)bytes, 256), 256, 0, cx->stream>>>(
            (const uint8_t *)a, (const uint8_t *)b, bytes, flag);
    }
    CUDA_LAUNCHED();
}

/* ---- fingerprint ----------------------------------------------------------------------------- */

/* Word i of the buffer (i < bytes / 4) from A-byte aligned memory: one 4-byte load, two 2-byte
 * loads or four bytes (little-endian, as fingerprint.h reads it). */
template <int A> __device__ __forceinline__ uint32_t fp_word(const unsigned char *p, size_t i)
{
    if (A == 4) return ((const uint32_t *)p)[i];
    if (A == 2) {
        const uint16_t *q = (const uint16_t *)p + 2 * i;
        return (uint32_t)q[0] | (uint32_t)q[1] << 16;
    }
    const unsigned char *q = p + 4 * i;
    return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}

/* fingerprint.h's sum: the key table in shared memory, per-thread 64-bit sums over a
 * grid-stride loop, a block's fixed-tree sum, one 64-bit integer atomicAdd per block (sums mod
 * 2^64 in any order are the same); block 0 adds the tail word and the length term. */
template <int A>
__global__ void __launch_bounds__(FT_CUDA_NT)
    fingerprint_kernel(const unsigned char *p, size_t bytes, unsigned long long *slot)
{
    __shared__ uint32_t tab[FT_FP_BLOCK];
    for (unsigned j = threadIdx.x; j < FT_FP_BLOCK; j += blockDim.x) tab[j] = ft_fp_tab(j);
    __syncthreads();
    size_t full = bytes / 4;
    uint64_t s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < full;
         i += (size_t)gridDim.x * blockDim.x)
        s += (uint64_t)fp_word<A>(p, i) * (tab[i % FT_FP_BLOCK] ^ ft_fp_hkey(i / FT_FP_BLOCK));
    s = block_sum<uint64_t>(s);
    if (threadIdx.x == 0) {
        if (blockIdx.x == 0) {
            if (bytes % 4) s += ft_fp_term(full, ft_fp_tail(p + 4 * full, bytes));
            s += ft_fp_len(bytes);
        }
        atomicAdd(slot, (unsigned long long)s); /* integers mod 2^64: any order */
    }
}

/* The fingerprint of the bytes at p into *slot (device memory, 8-byte aligned), on cx's
 * stream, no wait. */
static void fingerprint_launch(CudaCtx *cx, const void *p, size_t bytes, uint64_t *slot)
{
    static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit atomics");
    unsigned long long *s = (unsigned long long *)slot;
    CUDA_CHECK(cudaMemsetAsync(s, 0, sizeof *s, cx->stream));
    if (!bytes) return;
    const unsigned char *b = (const unsigned char *)p;
    /* about 16 words per thread, so the key table each block builds (4 entries per thread)
     * stays a small part of its work */
    unsigned nb = cuda_blocks((long long)(bytes / 64 + 1), FT_CUDA_NT);
    if ((uintptr_t)p % 4 == 0)
        fingerprint_kernel<4><<<nb, FT_CUDA_NT, 0, cx->stream>>>(b, bytes, s);
    else if ((uintptr_t)p % 2 == 0)
        fingerprint_kernel<2><<<nb, FT_CUDA_NT, 0, cx->stream>>>(b, bytes, s);
    else
        fingerprint_kernel<1><<<nb, FT_CUDA_NT, 0, cx->stream>>>(b, bytes, s);
    CUDA_LAUNCHED();
}

uint64_t cuda_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!n) return 0;
    fingerprint_launch(cx, p, esize * n, (uint64_t *)cx->res_dev);
    CUDA_CHECK(cudaMemcpyAsync(cx->res_host, cx->res_dev, sizeof(uint64_t),
                               cudaMemcpyDeviceToHost, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    uint64_t v;
    memcpy(&v, cx->res_host, sizeof v);
    return v;
}

/* fingerprint_into (backend.h): the value into *slot (device memory), no wait */
void cuda_fingerprint_into(void *ctx, const void *p, size_t esize, size_t n, uint64_t *slot)
{
    fingerprint_launch((CudaCtx *)ctx, p, esize * n, slot);
}

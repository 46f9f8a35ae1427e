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
 *  - fingerprint is the sum32x2 checksum (checksum.h's ckpt_term, the very function the CPU
 *    uses): per-thread lane sums over a grid-stride loop, a block's fixed-tree sum, then one
 *    32-bit integer atomicAdd per block and lane. Integer addition mod 2^32 is associative and
 *    commutative, so the value does not depend on the order (no float is ever summed).
 *  - equal: one flag word, set by any thread that sees a differing word (all write 1: the race
 *    is benign); 4-byte words when both pointers and the length allow, bytes otherwise.
 *  - Both answers come back through a pinned word pair and one stream synchronisation;
 *    mark_differs and fingerprint_into write into the caller's device words instead and do not
 *    wait (DMR reads a step's answers once, at its agreement). */
#include "cuda_common.cuh"

#include <stdint.h>

#include "ftllm/checksum.h"

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

template <typename W>
__global__ void __launch_bounds__(FT_CUDA_NT)
    fingerprint_kernel(const W *p, size_t n, unsigned *lanes)
{
    uint32_t lo = 0, hi = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t t = ckpt_term(i, (uint64_t)p[i], sizeof(W));
        lo += (uint32_t)t;
        hi += (uint32_t)(t >> 32);
    }
    lo = block_sum<uint32_t>(lo);
    hi = block_sum<uint32_t>(hi);
    if (threadIdx.x == 0) {
        atomicAdd(&lanes[0], lo); /* integers mod 2^32: any order gives the same sum */
        atomicAdd(&lanes[1], hi);
    }
}

/* The fingerprint of n esize-byte elements at p into lanes[0..1] (device memory: low and high
 * 32 bits, the uint64_t's own layout on a little-endian GPU), on cx's stream, no wait. */
static void fingerprint_launch(CudaCtx *cx, const void *p, size_t esize, size_t n,
                               unsigned *lanes)
{
    if ((uintptr_t)p % esize)
        FT_DIE("cuda fingerprint: %zu-byte elements at a misaligned address", esize);
    CUDA_CHECK(cudaMemsetAsync(lanes, 0, 2 * sizeof(unsigned), cx->stream));
    if (!n) return;
    unsigned nb = cuda_blocks((long long)n, FT_CUDA_NT);
    switch (esize) {
    case 1:
        fingerprint_kernel<uint8_t><<<nb, FT_CUDA_NT, 0, cx->stream>>>((const uint8_t *)p, n,
                                                                       lanes);
        break;
    case 2:
        fingerprint_kernel<uint16_t><<<nb, FT_CUDA_NT, 0, cx->stream>>>((const uint16_t *)p, n,
                                                                        lanes);
        break;
    case 4:
        fingerprint_kernel<uint32_t><<<nb, FT_CUDA_NT, 0, cx->stream>>>((const uint32_t *)p, n,
                                                                        lanes);
        break;
    case 8:
        fingerprint_kernel<uint64_t><<<nb, FT_CUDA_NT, 0, cx->stream>>>((const uint64_t *)p, n,
                                                                        lanes);
        break;
    default: FT_DIE("cuda fingerprint: element size %zu (expected 1, 2, 4 or 8)", esize);
    }
    CUDA_LAUNCHED();
}

uint64_t cuda_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!n) return 0;
    fingerprint_launch(cx, p, esize, n, cx->res_dev);
    CUDA_CHECK(cudaMemcpyAsync(cx->res_host, cx->res_dev, 2 * sizeof(unsigned),
                               cudaMemcpyDeviceToHost, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return (uint64_t)cx->res_host[1] << 32 | cx->res_host[0];
}

/* fingerprint_into (backend.h): the value into *slot (device memory), no wait */
void cuda_fingerprint_into(void *ctx, const void *p, size_t esize, size_t n, uint64_t *slot)
{
    static_assert(sizeof(uint64_t) == 2 * sizeof(unsigned), "two 32-bit lanes per slot");
    fingerprint_launch((CudaCtx *)ctx, p, esize, n, (unsigned *)slot);
}

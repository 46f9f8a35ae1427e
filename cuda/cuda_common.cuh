/* cuda_common.cuh: what the CUDA backend's files share (C++ only, never included from C): the
 * context every op receives, error checks that die through log.h, launch sizes, deterministic
 * block reductions, and the CPU's exp/tanh polynomials.
 *
 * Determinism (ops.h): no floating-point atomics anywhere. A reduction inside a block is a fixed
 * tree over a compile-time block size (FT_CUDA_NT threads: every row kernel is launched with
 * exactly that many); a sum over rows of a matrix is cut into chunks of FT_CUDA_ROWS_CHUNK rows
 * whose partial sums are then added in chunk order (colsum.cu). Grid sizes only decide which
 * thread does which element, never an order of additions, so no result depends on the GPU's
 * SM count. All files are compiled with --fmad=false (Makefile): no multiply-add contraction,
 * so elementwise kernels written in the CPU's operation order give the CPU's bits. */
#ifndef FTLLM_CUDA_COMMON_CUH
#define FTLLM_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

/* log.h declares its fatal functions with C11's _Noreturn, which C++ spells [[noreturn]]. */
#define _Noreturn [[noreturn]]
extern "C" {
#include "ftllm/backend.h"
#include "ftllm/deck_keys.h"
#include "ftllm/log.h"
#include "ftllm/ops.h"
}
#undef _Noreturn

/* The backend's context (FtBackend.ctx, FtOpCall.ctx). One stream: ops and copies run in the
 * order they were issued, so the scratch buffer can be shared by every op. */
typedef struct cuda_ctx {
    int device;
    cudaStream_t stream;  /* every op and copy of this backend runs on it */
    cublasHandle_t blas;  /* bound to stream, with its own fixed workspace (deterministic) */
    cublasLtHandle_t lt;  /* cuBLASLt: a matmul's bias in its GEMM's epilogue (gemm.cu) */
    struct lt_plan *lt_plans; /* its descriptors and algorithm per GEMM shape (gemm.cu) */
    int lt_nplans;
    void *blas_ws;
    size_t blas_ws_bytes;
    void *scratch;        /* one op's temporaries (sort buffers, partial sums); grows */
    size_t scratch_bytes;
    int *ints_host;       /* pinned: small device arrays the host must read (MoE row counts) */
    size_t ints_host_n;
    /* DMR (dmr_cuda.cu): the checker's context (its own stream, cuBLAS handle, workspace and
     * scratch; NULL in the checker's own context), the events that order the two streams, and
     * the answers of the compare and fingerprint kernels (device, and pinned for the host) */
    int bf16;             /* run.precision = bf16: GEMM operands rounded to bf16 (gemm.cu) */
    void *gemm_ws;        /* the GEMMs' bf16 copies of their operands; grows */
    size_t gemm_ws_bytes;
    struct cuda_ctx *checker;
    cudaEvent_t ev_to_checker, ev_from_checker;
    unsigned *res_dev, *res_host;
} CudaCtx;

static inline CudaCtx *cuda_ctx(const FtOpCall *c) { return (CudaCtx *)c->ctx; }

#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess)                                                                 \
            ft_die_at(__FILE__, __LINE__, __func__, "%s: %s (%s)", #call,                      \
                      cudaGetErrorString(e_), cudaGetErrorName(e_));                           \
    } while (0)

#define CUBLAS_CHECK(call)                                                                     \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            ft_die_at(__FILE__, __LINE__, __func__, "%s: %s", #call,                           \
                      cublasGetStatusString(s_));                                              \
    } while (0)

/* after every kernel launch: a bad launch configuration is reported where it happened */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

#define FT_CUDA_NT 256          /* threads of every row kernel (fixes its reduction tree) */
#define FT_CUDA_ROWS_CHUNK 32   /* rows per partial sum of a column reduction */

/* Blocks for a grid-stride loop over n elements (capped: the loop covers the rest). */
static inline unsigned cuda_blocks(long long n, int nt)
{
    long long b = (n + nt - 1) / nt;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

/* dmr_cuda.cu: the backend's DMR functions (backend.h: checker_run, equal, fingerprint), and
 * the set-up of the checker's context and the answer buffers (at backend_cuda_open). */
void cuda_dmr_init(CudaCtx *cx, CudaCtx *checker);
void cuda_checker_run(void *ctx, FtOpFn fn, FtOpCall *c);
int cuda_equal(void *ctx, const void *a, const void *b, size_t bytes);
uint64_t cuda_fingerprint(void *ctx, const void *p, size_t esize, size_t n);
void cuda_mark_differs(void *ctx, const void *a, const void *b, size_t bytes, unsigned *flag);
void cuda_fingerprint_into(void *ctx, const void *p, size_t esize, size_t n, uint64_t *slot);
/* gemm.cu: run.precision for the context and its checker (backend.h set_precision). */
extern "C" void cuda_set_precision(void *ctx, int precision);
/* A stream with a cuBLAS handle bound to it: pedantic fp32, no atomics, its own workspace. */
void cuda_ctx_streams(CudaCtx *cx, int device);

/* Scratch of at least `bytes` for the op being launched (backend_cuda.cu); valid until the next
 * call. Growing it waits for the stream, so the old buffer is not freed under a running kernel. */
void *cuda_scratch(CudaCtx *cx, size_t bytes);
/* Copies n ints from the device to a pinned host buffer and waits; valid until the next call. */
const int *cuda_ints_to_host(CudaCtx *cx, const int *dev, size_t n);
/* Byte offsets into scratch: rounds up to 256 so every piece is aligned for any type. */
static inline size_t cuda_align(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* A kernel's dynamic shared memory (its launch's third argument) as a T *name, 16-byte aligned.
 * Over 48 KiB needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize). */
#ifdef FTEMU_DEVICE_H
#define FT_DYN_SHARED(T, name) T *name = (T *)ftemu::dyn_shared()
#else
#define FT_DYN_SHARED(T, name)                                                                 \
    extern __shared__ float4 name##_dyn_[];                                                    \
    T *name = (T *)name##_dyn_
#endif

/* ---- deterministic reductions inside one block (blockDim.x a multiple of 32, <= 1024) ------ */

template <typename T> __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v; /* lane 0 holds the warp's sum */
}

/* The block's sum, in a fixed tree (lanes by halving, then warps by halving); every thread gets
 * it. Every thread of the block must call it. */
template <typename T> __device__ T block_sum(T v)
{
    __shared__ T part[32];
    __shared__ T total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads(); /* an earlier call's readers are done with part and total */
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? part[lane] : (T)0;
        v = warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

/* The block's maximum (exact in any order); every thread gets it. */
__device__ __forceinline__ float block_max(float v)
{
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? part[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

/* ---- the CPU's polynomials (ops_cpu.c), the same operations in the same order ------------- */

/* exp(x): x = k ln2 + r, a degree-7 Taylor polynomial in r, clamped to [-87, 88]. */
__device__ __forceinline__ float exp_poly(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float t = x * 1.44269504f + 12582912.0f;
    float kf = t - 12582912.0f;
    int k = __float_as_int(t) - 0x4B400000;
    float r = x - kf * 0.693145752f - kf * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
              r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    unsigned e = ((unsigned)k + 127u) << 23;
    return p * __uint_as_float(e);
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1) */
__device__ __forceinline__ float tanh_poly(float u)
{
    return 1.0f - 2.0f / (exp_poly(2.0f * u) + 1.0f);
}

#endif

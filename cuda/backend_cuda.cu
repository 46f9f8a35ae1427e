/* backend_cuda.cu: the CUDA backend (backend.h): device memory on cudaMalloc, copies on the
 * context's stream, the op table of ops_table.cu, and the context (one stream, one cuBLAS
 * handle with a fixed workspace, the ops' scratch).
 *
 * Key decisions:
 *  - One stream per backend: ops, copies and sets are issued on it in program order, so an op
 *    may use what the previous one wrote without events, and the scratch buffer is shared.
 *    Copies to and from the host wait for the stream (the caller reuses or reads the host
 *    buffer at once); copies within the device and sets do not.
 *  - cuBLAS: pedantic fp32 math (no TF32, whatever NVIDIA_TF32_OVERRIDE says), atomics not
 *    allowed, and a workspace of its own set on the handle: cuBLAS's rule for bitwise
 *    reproducible results on a stream.
 *  - Opening it when there is no usable GPU returns NULL with the CUDA error in one line; it
 *    never dies, so `ftllm train` can exit 2 with that line and tests can skip.
 *  - DMR's checker has a context of its own (a second stream, cuBLAS handle, workspace and op
 *    scratch: dmr_cuda.cu), so a re-execution there reproduces the primary's bytes; the two
 *    streams are ordered by events, never by the host.
 *  - run.precision = bf16 rounds the GEMMs' operands to bf16 (gemm.cu); every other kernel,
 *    the activations, master weights and optimizer state stay fp32.
 * Not yet: bf16 storage of activations and weights, bf16 elementwise kernels, NCCL. */
#include "ops_cuda.h" /* the context (cuda_common.cuh); the attention kernels, for the log */

#include <stdio.h>
#include <string.h>

extern "C" const FtOpDesc *ops_cuda_table(void); /* ops_table.cu */

#define BLAS_WS_BYTES (32u << 20) /* cuBLAS's advice for Hopper: 32 MiB per handle */

static CudaCtx g_ctx, g_checker; /* the primary's context and DMR's checker's */
static FtBackend g_be;

void cuda_ctx_streams(CudaCtx *cx, int device)
{
    cx->device = device;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&cx->blas));
    CUBLAS_CHECK(cublasSetStream(cx->blas, cx->stream));
    CUBLAS_CHECK(cublasSetMathMode(cx->blas, CUBLAS_PEDANTIC_MATH));
    CUBLAS_CHECK(cublasSetAtomicsMode(cx->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    cx->blas_ws_bytes = BLAS_WS_BYTES;
    CUDA_CHECK(cudaMalloc(&cx->blas_ws, cx->blas_ws_bytes));
    CUBLAS_CHECK(cublasSetWorkspace(cx->blas, cx->blas_ws, cx->blas_ws_bytes));
    CUBLAS_CHECK(cublasLtCreate(&cx->lt));
}

static void *cu_alloc(void *ctx, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    size_t n = cuda_align(bytes ? bytes : 1);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* clear it: backend_alloc reports the failure */
        return NULL;
    }
    CUDA_CHECK(e);
    CUDA_CHECK(cudaMemsetAsync(p, 0, n, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return p;
}

static void cu_release(void *ctx, void *p)
{
    (void)ctx;
    if (p) CUDA_CHECK(cudaFree(p)); /* cudaFree waits for the work that may still use p */
}

static void cu_to_device(void *ctx, void *dst, const void *host, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
}

/* Device memory (cudaMalloc) as opposed to host memory, pageable or pinned. */
static int cu_is_device(void *ctx, const void *p)
{
    (void)ctx;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a pointer CUDA knows: host memory */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void cu_to_host(void *ctx, void *host, const void *src, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cx->stream));
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
}

static void cu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (bytes && dst != src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cx->stream));
}

static void cu_set(void *ctx, void *dst, int byte, size_t bytes)
{
    CudaCtx *cx = (CudaCtx *)ctx;
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, cx->stream));
}

static void cu_sync(void *ctx) { CUDA_CHECK(cudaStreamSynchronize(((CudaCtx *)ctx)->stream)); }

void *cuda_scratch(CudaCtx *cx, size_t bytes)
{
    if (bytes <= cx->scratch_bytes) return cx->scratch;
    size_t n = cuda_align(bytes > 2 * cx->scratch_bytes ? bytes : 2 * cx->scratch_bytes);
    CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    if (cx->scratch) CUDA_CHECK(cudaFree(cx->scratch));
    cx->scratch = NULL, cx->scratch_bytes = 0;
    cudaError_t e = cudaMalloc(&cx->scratch, n);
    if (e != cudaSuccess)
        FT_DIE("cuda: no memory for %zu bytes of op scratch: %s", n, cudaGetErrorString(e));
    cx->scratch_bytes = n;
    return cx->scratch;
}

const int *cuda_ints_to_host(CudaCtx *cx, const int *dev, size_t n)
{
    if (n > cx->ints_host_n) {
        if (cx->ints_host) CUDA_CHECK(cudaFreeHost(cx->ints_host));
        CUDA_CHECK(cudaMallocHost((void **)&cx->ints_host, sizeof(int) * n));
        cx->ints_host_n = n;
    }
    if (n) {
        CUDA_CHECK(cudaMemcpyAsync(cx->ints_host, dev, sizeof(int) * n, cudaMemcpyDeviceToHost,
                                   cx->stream));
        CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    }
    return cx->ints_host;
}

/* A CUDA call that may fail for want of a GPU: writes the reason and returns nonzero. */
static int soft_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "no usable GPU: %s: %s (%s) (HINT: run it on a node with an NVIDIA "
             "GPU and its driver)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
    return 1;
}

extern "C" const FtBackend *backend_cuda_open(int device, char *err, size_t errlen)
{
    if (g_be.ops) {
        if (device == g_ctx.device) return &g_be;
        snprintf(err, errlen, "the CUDA backend is open on device %d already, not %d",
                 g_ctx.device, device);
        return NULL;
    }
    const char *bad = cuda_attention_check();
    if (!bad) bad = cuda_lt_check();
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return NULL;
    }
    int n = 0;
    if (soft_fail(cudaGetDeviceCount(&n), "cudaGetDeviceCount", err, errlen)) return NULL;
    if (n <= 0) {
        snprintf(err, errlen, "no usable GPU: cudaGetDeviceCount found none (HINT: run it on a "
                              "node with an NVIDIA GPU and its driver)");
        return NULL;
    }
    if (device < 0) {
        snprintf(err, errlen, "GPU %d asked for: expected a rank on the node, 0 or more", device);
        return NULL;
    }
    device %= n; /* more ranks than GPUs on the node: they share (MPI staging, not NCCL) */
    if (soft_fail(cudaSetDevice(device), "cudaSetDevice", err, errlen)) return NULL;
    CudaCtx *cx = &g_ctx;
    memset(cx, 0, sizeof *cx);
    memset(&g_checker, 0, sizeof g_checker);
    cuda_ctx_streams(cx, device);
    cuda_ctx_streams(&g_checker, device);
    cuda_dmr_init(cx, &g_checker);
    g_be.name = "cuda";
    g_be.ctx = cx;
    g_be.alloc = cu_alloc;
    g_be.release = cu_release;
    g_be.to_device = cu_to_device;
    g_be.to_host = cu_to_host;
    g_be.copy = cu_copy;
    g_be.set = cu_set;
    g_be.sync = cu_sync;
    g_be.checker_run = cuda_checker_run;
    g_be.equal = cuda_equal;
    g_be.fingerprint = cuda_fingerprint;
    g_be.mark_differs = cuda_mark_differs;
    g_be.fingerprint_into = cuda_fingerprint_into;
    g_be.set_precision = cuda_set_precision;
    g_be.is_device = cu_is_device;
    g_be.stream = (void *)cx->stream;
    cudaDeviceProp prop;
    if (soft_fail(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", err, errlen))
        return NULL;
    memcpy(g_be.uuid, prop.uuid.bytes, sizeof g_be.uuid);
    static char about[400];
    snprintf(about, sizeof about,
             "GPU %d of %d: %.100s (sm_%d%d, %d SMs, %.1f GiB); attention: %s "
             "(FTLLM_CUDA_ATTENTION); matmul bias: %s",
             device, n, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             prop.totalGlobalMem / 1073741824.0,
             cuda_attention_is("flash") ? "flash, tiled kernels where the head size is 32 or 64"
             : cuda_attention_is("gemm") ? "gemm, cuBLAS batched GEMMs and row kernels"
             : cuda_attention_is("tc")
                 ? "tc, tensor-core tiled kernels under bf16 where the head size is 16, 32 or 64, "
                   "else gemm"
                 : "rows, one block per query row",
             cuda_lt_on() ? "cuBLASLt epilogue under bf16" : "a fill (FTLLM_CUDA_LT=0)");
    g_be.about = about;
    g_be.ops = ops_cuda_table(); /* last: a set ops marks the backend open */
    return &g_be;
}

/* cublas_v2.h (ftllm's CUDA emulator): the cuBLAS calls ftllm makes, column-major as cuBLAS's,
 * checked as cuBLAS checks them (dimensions, leading dimensions) and further (every operand
 * inside one device allocation), computed on the host by emu_runtime.cc. */
#ifndef FTEMU_CUBLAS_V2_H
#define FTEMU_CUBLAS_V2_H

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftemu_blas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1,
               CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7,
               CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2,
               CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 } cublasAtomicsMode_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long sa, const float *B, int ldb, long long sb,
                                         const float *beta, float *C, int ldc, long long sc,
                                         int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B, cudaDataType bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

#endif

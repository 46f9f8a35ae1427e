/* ops_cuda.h: the CUDA implementation of every op kind (ops.h), one function per direction,
 * named cuda_<op>_fwd / cuda_<op>_bwd, and the helpers the op files share. Arguments, shapes and
 * results are exactly ops.h's; pointers in the FtOpCall are device pointers, FtOpCall.ctx is
 * the CudaCtx (cuda_common.cuh). Every function only launches work on the context's stream. */
#ifndef FTLLM_OPS_CUDA_H
#define FTLLM_OPS_CUDA_H

#include "cuda_common.cuh"

#include <cuda_bf16.h>

/* gemm.cu: n floats of src rounded to bf16 (nearest even) into dst, on cx's stream */
void cuda_to_bf16(CudaCtx *cx, __nv_bfloat16 *dst, const float *src, size_t n);
/* ops_encoder.cu */
void cuda_encoder_fwd(const FtOpCall *c);
void cuda_encoder_bwd(const FtOpCall *c);
/* ops_layernorm.cu */
void cuda_layernorm_fwd(const FtOpCall *c);
void cuda_layernorm_bwd(const FtOpCall *c);
/* ops_matmul.cu */
void cuda_matmul_fwd(const FtOpCall *c);
void cuda_matmul_bwd(const FtOpCall *c);
/* ops_attention.cu; cuda_attention_is: whether FTLLM_CUDA_ATTENTION (read once; gemm when
 * unset) names kernel ("gemm", "tc", "flash", "rows"); cuda_attention_check: NULL when it names
 * one of them, else the one-line reason (the backend does not open) */
void cuda_attention_fwd(const FtOpCall *c);
void cuda_attention_bwd(const FtOpCall *c);
bool cuda_attention_is(const char *kernel);
const char *cuda_attention_check(void);
/* ops_attention_flash.cu: the tiled kernels, when FTLLM_CUDA_ATTENTION=flash and the shape fits
 * (head size 32 or 64); false: not run, the caller's kernels do it */
bool cuda_attention_flash_fwd(const FtOpCall *c);
bool cuda_attention_flash_bwd(const FtOpCall *c);
/* ops_attention_tc.cu: the tensor-core tiled kernels, when FTLLM_CUDA_ATTENTION=tc, bf16 and
 * the head size 16, 32 or 64; false: not run */
bool cuda_attention_tc_fwd(const FtOpCall *c);
bool cuda_attention_tc_bwd(const FtOpCall *c);
/* ops_attention_gemm.cu: cuBLAS batched GEMMs and row kernels, when FTLLM_CUDA_ATTENTION=gemm
 * (or tc where those did not run); false: not run */
bool cuda_attention_gemm_fwd(const FtOpCall *c);
bool cuda_attention_gemm_bwd(const FtOpCall *c);
/* ops_elementwise.cu */
void cuda_gelu_fwd(const FtOpCall *c);
void cuda_gelu_bwd(const FtOpCall *c);
void cuda_residual_fwd(const FtOpCall *c);
void cuda_residual_bwd(const FtOpCall *c);
/* ops_loss.cu */
void cuda_crossent_fwd(const FtOpCall *c);
void cuda_crossent_bwd(const FtOpCall *c);
void cuda_lossmean_fwd(const FtOpCall *c);
/* ops_optim.cu */
void cuda_gradnorm_fwd(const FtOpCall *c);
void cuda_adamw_fwd(const FtOpCall *c);
/* ops_moe_route.cu */
void cuda_moe_route_fwd(const FtOpCall *c);
void cuda_moe_route_bwd(const FtOpCall *c);
/* ops_moe_rows.cu */
void cuda_moe_dispatch_fwd(const FtOpCall *c);
void cuda_moe_dispatch_bwd(const FtOpCall *c);
void cuda_moe_combine_fwd(const FtOpCall *c);
void cuda_moe_combine_bwd(const FtOpCall *c);
/* ops_moe_expert.cu */
void cuda_moe_expert_fwd(const FtOpCall *c);
void cuda_moe_expert_bwd(const FtOpCall *c);

/* ---- shared helpers -------------------------------------------------------------------------- */

/* gemm.cu: row-major GEMMs in ops.h's layouts (weights (OC, C)) through cuBLAS sgemm.
 *   y (N,OC) = x (N,C) w^T + beta y        dx (N,C) = dy (N,OC) w
 *   dw (OC,C) = dy^T x + beta dw */
void cuda_gemm_xwt(CudaCtx *cx, const float *x, const float *w, float *y, long long N,
                   long long C, long long OC, float beta);
/* y = x w^T + b (b NULL: none): under bf16 the bias in cuBLASLt's epilogue where it can, else a
 * fill of y with b and a beta-1 GEMM */
void cuda_gemm_xwt_bias(CudaCtx *cx, const float *x, const float *w, const float *b, float *y,
                        long long N, long long C, long long OC);
/* FTLLM_CUDA_LT: whether the bias epilogue may run (cuda_lt_on), and NULL when the variable is
 * unset, 1 or 0, else the one-line reason (the backend does not open) */
bool cuda_lt_on(void);
const char *cuda_lt_check(void);
void cuda_gemm_dytx(CudaCtx *cx, const float *dy, const float *x, float *dw, long long N,
                    long long C, long long OC, float beta);
/* a matmul's backward: dx = dy w (dx NULL: not) and dw = beta dw + dy^T x (dw NULL: not), dy
 * rounded to bf16 once for both under run.precision = bf16 */
void cuda_gemm_bwd(CudaCtx *cx, const float *dy, const float *x, const float *w, float *dx,
                   float *dw, long long N, long long C, long long OC, float beta);
/* y (N,OC) = b broadcast over rows */
void cuda_rows_fill(CudaCtx *cx, float *y, const float *b, long long N, long long OC);
/* dst = src (n floats), or zeros when src is NULL: a gradient's start from its earlier sum */
void cuda_init_from(CudaCtx *cx, float *dst, const float *src, size_t n);

/* colsum.cu: dst[c] = base[c] (0 when base is NULL) + sum over the N rows of src[n, c], in
 * chunks of FT_CUDA_ROWS_CHUNK rows added in chunk order. dst may be base. */
void cuda_colsum(CudaCtx *cx, float *dst, const float *base, const float *src, long long N,
                 long long C);
/* The second half alone: dst[c] = base[c] + sum over k < nchunk of part[k C + c], in k order. */
void cuda_colsum_finish(CudaCtx *cx, float *dst, const float *base, const float *part,
                        long long nchunk, long long C);

#endif

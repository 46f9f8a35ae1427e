/* mma_bf16.cuh: the warp-level tensor-core product the tiled attention (ops_attention_tc.cu)
 * is built on, mma.sync m16n8k16 with bf16 operands and fp32 accumulators, and the fragment
 * loads for it. On nvcc it is the PTX instruction; on ftllm's CUDA emulator (make CUDA=emu) it
 * is ftemu::mma_m16n8k16_bf16 (cuda/emu/emu_device.h), which gathers the warp's fragments in the
 * PTX ISA's layout, so a fragment loaded in a wrong layout gives wrong numbers there too.
 *
 * Layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"; g = lane / 4,
 * t = lane % 4; a 32-bit word holds two bf16, the lower column or row in its low half):
 *   A, 16 x 16 (row-major): a[0] row g, columns 2t, 2t+1; a[1] row g+8, same columns;
 *                           a[2] row g, columns 2t+8, 2t+9; a[3] row g+8, same columns.
 *   B, 16 x 8 (k x n):      b[0] rows (k) 2t, 2t+1 of column g; b[1] rows 2t+8, 2t+9.
 *   C/D, 16 x 8 (fp32):     c[0], c[1] row g, columns 2t, 2t+1; c[2], c[3] row g+8.
 * C's layout for two tiles side by side is A's for one 16-column tile (tc_c_to_a): the
 * probabilities computed into accumulators feed the next product without a shuffle. */
#ifndef FTLLM_MMA_BF16_CUH
#define FTLLM_MMA_BF16_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>

/* d += a b on the tensor cores (every lane of a full warp calls it) */
static __device__ __forceinline__ void tc_mma(float d[4], const uint32_t a[4], const uint32_t b[2])
{
#ifdef FTEMU_DEVICE_H /* the emulator's device header, force-included (Makefile) */
    ftemu::mma_m16n8k16_bf16(d, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* two floats rounded to bf16 (nearest even), lo in the low half */
static __device__ __forceinline__ uint32_t tc_pack(float lo, float hi)
{
    __nv_bfloat16 a = __float2bfloat16_rn(lo), b = __float2bfloat16_rn(hi);
    uint16_t ua, ub;
    memcpy(&ua, &a, 2);
    memcpy(&ub, &b, 2);
    return (uint32_t)ua | (uint32_t)ub << 16;
}

static __device__ __forceinline__ uint32_t tc_word(const __nv_bfloat16 *p)
{
    return *(const uint32_t *)p; /* p is at an even column of a row of even length: aligned */
}

/* A fragment of rows r0..r0+15, columns k0..k0+15 of s (row-major, LD elements a row) */
template <int LD>
static __device__ __forceinline__ void tc_load_a(uint32_t a[4], const __nv_bfloat16 (*s)[LD],
                                                 int r0, int k0)
{
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    a[0] = tc_word(&s[r0 + g][k0 + 2 * t]);
    a[1] = tc_word(&s[r0 + g + 8][k0 + 2 * t]);
    a[2] = tc_word(&s[r0 + g][k0 + 8 + 2 * t]);
    a[3] = tc_word(&s[r0 + g + 8][k0 + 8 + 2 * t]);
}

/* B fragment whose column n is row n0 + n of s, k its columns k0..k0+15:
 * B[k][n] = s[n0 + n][k0 + k] (s holds B transposed: the operand's rows are B's columns) */
template <int LD>
static __device__ __forceinline__ void tc_load_b(uint32_t b[2], const __nv_bfloat16 (*s)[LD],
                                                 int n0, int k0)
{
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    b[0] = tc_word(&s[n0 + g][k0 + 2 * t]);
    b[1] = tc_word(&s[n0 + g][k0 + 8 + 2 * t]);
}

/* A fragment (16 x 16, bf16) from two accumulator tiles: c0 its columns 0..7, c1 8..15 */
static __device__ __forceinline__ void tc_c_to_a(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = tc_pack(c0[0], c0[1]);
    a[1] = tc_pack(c0[2], c0[3]);
    a[2] = tc_pack(c1[0], c1[1]);
    a[3] = tc_pack(c1[2], c1[3]);
}

#endif

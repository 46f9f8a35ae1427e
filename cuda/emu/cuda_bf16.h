/* cuda_bf16.h (ftllm's CUDA emulator): bf16 storage and float -> bf16 rounding. */
#ifndef FTEMU_CUDA_BF16_H
#define FTEMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

typedef struct __nv_bfloat16_st { uint16_t x; } __nv_bfloat16;

/* round to nearest even; a NaN stays a (quiet) NaN */
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        h.x = (uint16_t)((u >> 16) | 0x40u);
    else
        h.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return h;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif

/* fingerprint.c: DMR's fingerprint on the host (backend.h ft_fingerprint; the terms and why they
 * suffice: checksum.h ft_fp_term). One pass of 32-bit vector arithmetic per element (a multiply
 * per lane): the loops below compute exactly ft_fp_term's sums, in chunks over OpenMP threads
 * when the array is large; integer lanes mod 2^32 make the value independent of the split. */
#include <string.h>

#include "ftllm/backend.h"
#include "ftllm/checksum.h"

#define FP_CHUNK 65536 /* elements per OpenMP task */

/* Lanes of elements [i0, i1) of 4-byte words. */
static void sum4(const unsigned char *p, size_t i0, size_t i1, uint32_t *lo, uint32_t *hi)
{
    uint32_t l = 0, h = 0;
#pragma omp simd reduction(+ : l, h)
    for (size_t i = i0; i < i1; i++) {
        uint32_t a, k = (uint32_t)i;
        memcpy(&a, p + 4 * i, 4);
        l += a * (k * FT_FP_KEY_LO + 1u);
        h += (a ^ (a >> 15)) * (k * FT_FP_KEY_HI + FT_FP_OFF_HI);
    }
    *lo += l, *hi += h;
}

/* Lanes of elements [i0, i1) of 8-byte words: the low word in lo, the high word in hi. */
static void sum8(const unsigned char *p, size_t i0, size_t i1, uint32_t *lo, uint32_t *hi)
{
    uint32_t l = 0, h = 0;
#pragma omp simd reduction(+ : l, h)
    for (size_t i = i0; i < i1; i++) {
        uint32_t a, b, k = (uint32_t)i;
        memcpy(&a, p + 8 * i, 4);
        memcpy(&b, p + 8 * i + 4, 4);
        l += a * (k * FT_FP_KEY_LO + 1u);
        h += b * (k * FT_FP_KEY_HI + FT_FP_OFF_HI);
    }
    *lo += l, *hi += h;
}

/* 1- and 2-byte elements: the scalar terms. */
static void sum_small(const unsigned char *p, size_t esize, size_t i0, size_t i1, uint32_t *lo,
                      uint32_t *hi)
{
    uint32_t l = 0, h = 0;
    for (size_t i = i0; i < i1; i++) {
        uint64_t bits = 0;
        memcpy(&bits, p + esize * i, esize); /* little-endian: the element's value */
        uint64_t t = ft_fp_term(i, bits, esize);
        l += (uint32_t)t, h += (uint32_t)(t >> 32);
    }
    *lo += l, *hi += h;
}

uint64_t ft_fingerprint(const void *data, size_t esize, size_t n)
{
    const unsigned char *p = data;
    size_t tasks = (n + FP_CHUNK - 1) / FP_CHUNK;
    uint32_t lo = 0, hi = 0;
#pragma omp parallel for reduction(+ : lo, hi) schedule(static) if (tasks > 4)
    for (size_t t = 0; t < tasks; t++) {
        size_t i0 = t * FP_CHUNK, i1 = i0 + FP_CHUNK < n ? i0 + FP_CHUNK : n;
        uint32_t l = 0, h = 0;
        if (esize == 4) sum4(p, i0, i1, &l, &h);
        else if (esize == 8) sum8(p, i0, i1, &l, &h);
        else sum_small(p, esize, i0, i1, &l, &h);
        lo += l, hi += h;
    }
    return (uint64_t)hi << 32 | lo;
}

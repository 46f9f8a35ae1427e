/* checksum.h: the per-element terms of the sum32x2 checksum (ckpt.h's dataset checksum), as
 * inline functions that compile for the host and, under nvcc, for the device too, so a device
 * could checksum a tensor where it lives and get the checkpoint's value. DMR's fingerprint was
 * this checksum until 2026-12-01; it has its own now (fingerprint.h says why). No state, no
 * includes beyond stdint: safe in C and CUDA C++. */
#ifndef FTLLM_CHECKSUM_H
#define FTLLM_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FT_HD __host__ __device__
#else
#define FT_HD
#endif

/* The two 32-bit finalizers (murmur3's fmix32 and Wellons' lowbias32): xor-shifts and odd
 * multiplies, so each is a bijection of a 32-bit word. */
static inline FT_HD uint32_t ckpt_mix_lo(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

static inline FT_HD uint32_t ckpt_mix_hi(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

/* The lanes' index keys (u = i + 1 split in 32-bit halves, so a vector loop needs no 64-bit
 * multiply: along a row the key grows by the lo32 multiplier per element). */
#define CKPT_KEY_LO_A 0x9E3779B9u
#define CKPT_KEY_LO_B 0x7F4A7C15u
#define CKPT_KEY_HI_A 0x85EBCA77u
#define CKPT_KEY_HI_B 0xC2B2AE3Du
static inline FT_HD uint32_t ckpt_key_lo(uint64_t idx)
{
    uint64_t u = idx + 1;
    return (uint32_t)u * CKPT_KEY_LO_A + (uint32_t)(u >> 32) * CKPT_KEY_LO_B;
}

static inline FT_HD uint32_t ckpt_key_hi(uint64_t idx)
{
    uint64_t u = idx + 1;
    return (uint32_t)u * CKPT_KEY_HI_A + (uint32_t)(u >> 32) * CKPT_KEY_HI_B;
}

/* The per-element term of element idx (global index) whose bytes are `bits` (esize bytes, the
 * rest of bits ignored), its two lanes packed as hi << 32 | lo. For a fixed index each lane's
 * term is a bijection of the bits (1, 2, 4 bytes: an add or xor, then a finalizer; 8 bytes:
 * murmur3's fmix64 after an add), so changing any one element changes at least one lane's sum.
 * The scalar reference: ckpt_checksum_slab computes the same sums in a vector loop. */
static inline FT_HD uint64_t ckpt_term(uint64_t idx, uint64_t bits, size_t esize)
{
    if (esize == 8) {
        uint64_t x = bits + (idx + 1) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 33;
        x *= 0xFF51AFD7ED558CCDull;
        x ^= x >> 33;
        x *= 0xC4CEB9FE1A85EC53ull;
        x ^= x >> 33;
        return x;
    }
    uint32_t w = esize == 1 ? (uint32_t)(bits & 0xFF)
                 : esize == 2 ? (uint32_t)(bits & 0xFFFF) : (uint32_t)bits;
    uint32_t lo = ckpt_mix_lo(w + ckpt_key_lo(idx)), hi = ckpt_mix_hi(w ^ ckpt_key_hi(idx));
    return (uint64_t)hi << 32 | lo;
}

/* Combines two (partial) checksums: each 32-bit lane adds mod 2^32 (no carry between lanes),
 * so partials of any partition of a dataset combine to the same value in any order. */
static inline FT_HD uint64_t ckpt_sum_add(uint64_t a, uint64_t b)
{
    uint32_t lo = (uint32_t)a + (uint32_t)b, hi = (uint32_t)(a >> 32) + (uint32_t)(b >> 32);
    return (uint64_t)hi << 32 | lo;
}

#endif

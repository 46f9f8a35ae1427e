/* fingerprint.h: DMR's fingerprint of a buffer's bytes (backend.h's fingerprint and
 * fingerprint_into): the terms as inline functions that compile for the host and, under nvcc,
 * for the device, so the CUDA kernel (cuda/dmr_cuda.cu) and the CPU (src/engine/fingerprint.c)
 * compute the same value from the same bytes.
 *
 * Definition. The bytes are read as little-endian 32-bit words w_i, i = 0 .. ceil(bytes/4) - 1
 * (the last one padded with zero bytes); each word has an odd 32-bit key k_i, and
 *     fingerprint = sum_i w_i * k_i  +  bytes * FT_FP_LEN   (64-bit products, sum mod 2^64).
 * The key of word i is tab(i mod 1024) xor hkey(i / 1024): tab(j) has j in bits 1..10, bit 0
 * set and pseudo-random bits 11..31; hkey(h) = (h * FT_FP_HMUL mod 2^21) << 11 only moves bits
 * 11..31. So keys are odd and, for i < 2^31 (8 GiB), pairwise distinct: two words of one block
 * differ in bits 1..10, two of the same column j of different blocks in bits 11..31
 * (h -> h * odd mod 2^21 is a bijection).
 *
 * What it guarantees (buffers up to 8 GiB): a change of one bit, or of any two bits, changes
 * the fingerprint. A bit flip b of word i moves the sum by exactly +-2^b k_i; two flips by
 * d = s1 2^b k_i + s2 2^c k_j, with |d| < 2^64, so d = 0 mod 2^64 only if d = 0: for b < c,
 * 2^-b d = s1 k_i + s2 2^(c-b) k_j is odd; for b = c, k_i = +-k_j needs i = j, and two flips of
 * one word are (s1 2^b + s2 2^c) k_i != 0. More flips, or garbage, are caught unless a sum of
 * products vanishes mod 2^64: the keys' pseudo-random bits make that a chance event (a
 * multilinear hash), not a pattern such as Fletcher's sums miss.
 *
 * Why not the checkpoint checksum (checksum.h, sum32x2), which DMR used until 2026-12-01: its
 * four 32-bit multiplies per element cost 10 GB/s on one core of an Intel Xeon (a vector
 * 32-bit multiply is two micro-ops there), where this widening multiply per word runs at
 * 30 GB/s, about copy speed (perf/README.md); the checksum must also stay as it is for the
 * checkpoints written with it. Sums of words are order-free, so threads and thread blocks add
 * their partial sums in any order. No state, no includes beyond stdint: safe in C and CUDA C++. */
#ifndef FTLLM_FINGERPRINT_H
#define FTLLM_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FT_FP_HD __host__ __device__
#else
#define FT_FP_HD
#endif

#define FT_FP_BLOCK 1024u                   /* words per key block (the table's length) */
#define FT_FP_HMUL 0x9E3779B1u              /* block key multiplier (odd) */
#define FT_FP_LEN 0x9E3779B97F4A7C15ull     /* the length term's multiplier */

/* The table entry of column j (< FT_FP_BLOCK): murmur3's fmix32 of a keyed j for bits 11..31,
 * j in bits 1..10, bit 0 set. */
static inline FT_FP_HD uint32_t ft_fp_tab(uint32_t j)
{
    uint32_t x = j * 0x9E3779B9u + 0x7F4A7C15u;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return (x & 0xFFFFF800u) | j << 1 | 1u;
}

/* The key bits of block h (words h * FT_FP_BLOCK ...): only bits 11..31. */
static inline FT_FP_HD uint32_t ft_fp_hkey(uint64_t h)
{
    return ((uint32_t)h * FT_FP_HMUL) << 11;
}

static inline FT_FP_HD uint32_t ft_fp_key(uint64_t i)
{
    return ft_fp_tab((uint32_t)(i % FT_FP_BLOCK)) ^ ft_fp_hkey(i / FT_FP_BLOCK);
}

/* Word i's term. */
static inline FT_FP_HD uint64_t ft_fp_term(uint64_t i, uint32_t w)
{
    return (uint64_t)w * ft_fp_key(i);
}

/* The last word of a buffer of `bytes` bytes whose length is not a multiple of 4 (zero-padded),
 * from its bytes p[0 .. bytes % 4). */
static inline FT_FP_HD uint32_t ft_fp_tail(const unsigned char *p, size_t bytes)
{
    uint32_t w = 0;
    for (size_t k = 0; k < bytes % 4; k++) w |= (uint32_t)p[k] << (8 * k);
    return w;
}

/* The length term, added once to the sum of the terms. */
static inline FT_FP_HD uint64_t ft_fp_len(size_t bytes) { return (uint64_t)bytes * FT_FP_LEN; }

#ifndef __CUDACC__
/* The fingerprint of bytes at p (any alignment), over OpenMP threads for large buffers (the
 * value does not depend on their number). */
uint64_t ft_fingerprint(const void *p, size_t bytes);
#endif

#endif

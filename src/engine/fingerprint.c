/* fingerprint.c: DMR's fingerprint on the host (fingerprint.h has the definition and what it
 * guarantees). The words go through a vector loop per key block: the block's table slice xor
 * one block key, a widening 32 x 32 -> 64-bit multiply (vpmuludq on x86) and a 64-bit add, so
 * no per-word multiply of keys; the table is computed once. Large buffers are split over
 * OpenMP threads by chunks of whole blocks; 64-bit integer sums make the value independent of
 * the split. Words are read with memcpy (any alignment; little-endian hosts). */
#include "ftllm/fingerprint.h"

#include <pthread.h>
#include <string.h>

static uint32_t g_tab[FT_FP_BLOCK];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    for (uint32_t j = 0; j < FT_FP_BLOCK; j++) g_tab[j] = ft_fp_tab(j);
}

/* The terms of m whole words at p, the first being word i0 of the buffer. */
static uint64_t sum_words(const unsigned char *p, uint64_t m, uint64_t i0)
{
    uint64_t acc = 0;
    while (m) {
        uint64_t j0 = i0 % FT_FP_BLOCK, len = FT_FP_BLOCK - j0;
        if (len > m) len = m;
        const uint32_t *t = g_tab + j0;
        uint32_t h = ft_fp_hkey(i0 / FT_FP_BLOCK);
#pragma omp simd reduction(+ : acc)
        for (uint64_t j = 0; j < len; j++) {
            uint32_t w;
            memcpy(&w, p + 4 * j, 4);
            acc += (uint64_t)w * (uint32_t)(t[j] ^ h);
        }
        p += 4 * len;
        i0 += len;
        m -= len;
    }
    return acc;
}

#define FP_CHUNK (64 * FT_FP_BLOCK) /* words per OpenMP task (256 KiB) */

uint64_t ft_fingerprint(const void *data, size_t bytes)
{
    pthread_once(&g_once, tab_init);
    const unsigned char *p = data;
    uint64_t full = bytes / 4, tasks = (full + FP_CHUNK - 1) / FP_CHUNK;
    uint64_t acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static) if (tasks > 1)
    for (uint64_t t = 0; t < tasks; t++) {
        uint64_t i0 = t * FP_CHUNK, m = full - i0 < FP_CHUNK ? full - i0 : FP_CHUNK;
        acc += sum_words(p + 4 * i0, m, i0);
    }
    if (bytes % 4) acc += ft_fp_term(full, ft_fp_tail(p + 4 * full, bytes));
    return acc + ft_fp_len(bytes);
}

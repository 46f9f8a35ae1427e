/* copy_stream.c: ft_copy_stream (copy_stream.h).
 *
 * Key decisions:
 *  - Below 4 KiB plain memcpy: the fence and the alignment head cost more than the cache
 *    pollution of a few lines.
 *  - The head up to the destination's vector alignment by memcpy, the body by unaligned loads
 *    and aligned streaming stores of the widest vector the build targets (AVX-512, AVX, or
 *    SSE2, which every x86-64 has), the tail by memcpy; one sfence at the end orders the
 *    streaming stores before any later access. */
#include "ftllm/copy_stream.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__AVX512F__)
#define VEC 64
#elif defined(__AVX__)
#define VEC 32
#else
#define VEC 16
#endif

static void stream_body(char *d, const char *s, size_t n) /* d VEC-aligned, n % (4 VEC) == 0 */
{
    for (size_t i = 0; i < n; i += 4 * VEC) {
#if VEC == 64
        __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
        __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
        _mm512_stream_si512((void *)(d + i), a), _mm512_stream_si512((void *)(d + i + 64), b);
        _mm512_stream_si512((void *)(d + i + 128), c), _mm512_stream_si512((void *)(d + i + 192), e);
#elif VEC == 32
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
        _mm256_stream_si256((__m256i *)(d + i), a), _mm256_stream_si256((__m256i *)(d + i + 32), b);
        _mm256_stream_si256((__m256i *)(d + i + 64), c), _mm256_stream_si256((__m256i *)(d + i + 96), e);
#else
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a), _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c), _mm_stream_si128((__m128i *)(d + i + 48), e);
#endif
    }
}

void ft_copy_stream(void *dst, const void *src, size_t bytes)
{
    if (bytes < 4096) {
        if (bytes) memcpy(dst, src, bytes);
        return;
    }
    char *d = dst;
    const char *s = src;
    size_t head = (VEC - (uintptr_t)d % VEC) % VEC;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    size_t body = bytes - bytes % (4 * VEC);
    stream_body(d, s, body);
    memcpy(d + body, s + body, bytes - body);
    _mm_sfence();
}
#else
void ft_copy_stream(void *dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(dst, src, bytes);
}
#endif

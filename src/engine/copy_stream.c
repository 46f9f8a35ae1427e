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
typedef __m512i vec_t;
#define VLOAD(p) _mm512_loadu_si512(p)
#define VSTREAM(p, v) _mm512_stream_si512((void *)(p), v)
#elif defined(__AVX__)
#define VEC 32
typedef __m256i vec_t;
#define VLOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VSTREAM(p, v) _mm256_stream_si256((__m256i *)(p), v)
#else
#define VEC 16
typedef __m128i vec_t;
#define VLOAD(p) _mm_loadu_si128((const __m128i *)(p))
#define VSTREAM(p, v) _mm_stream_si128((__m128i *)(p), v)
#endif

static void stream_body(char *d, const char *s, size_t n) /* d VEC-aligned, n % (4 VEC) == 0 */
{
    for (size_t i = 0; i < n; i += 4 * VEC) { /* four loads in flight, then four stores */
        vec_t a = VLOAD(s + i), b = VLOAD(s + i + VEC);
        vec_t c = VLOAD(s + i + 2 * VEC), e = VLOAD(s + i + 3 * VEC);
        VSTREAM(d + i, a), VSTREAM(d + i + VEC, b);
        VSTREAM(d + i + 2 * VEC, c), VSTREAM(d + i + 3 * VEC, e);
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

/* test_fingerprint.c: DMR's fingerprint (fingerprint.h, src/engine/fingerprint.c).
 *   - ft_fingerprint equals the definition written out here independently (words read byte by
 *     byte, keys from fingerprint.h's description: table column, block bits), on lengths from
 *     0 to a few blocks plus odd tails, at byte offsets 0 to 3, and on a buffer of several
 *     OpenMP chunks with 1 and 2 threads (the value does not depend on the split).
 *   - The keys: odd and pairwise distinct over the first 2^22 words, across block and chunk
 *     boundaries, and for words far apart that share a table column.
 *   - Every single-bit flip and every pair of bit flips of a 40-byte buffer changes the
 *     fingerprint (exhaustively: 320 single, 51,040 pairs), and so do 200,000 random pairs
 *     (same bit position in particular, bits 31 included) over a 3 MiB buffer whose words span
 *     many key blocks and OpenMP chunks.
 *   - Equal bytes give equal fingerprints whatever the element size the backend is given, and
 *     buffers of zero bytes of different lengths differ (the length term).
 * ft-test: ranks 1 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/fingerprint.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

/* The definition, from the header's comment: words little-endian, zero-padded; key of word i =
 * column j = i mod 1024 (fmix32 of j * 0x9E3779B9 + 0x7F4A7C15, bits 11..31 kept, j in bits
 * 1..10, bit 0 set) xor (block h = i / 1024) * 0x9E3779B1 shifted left 11. */
static uint32_t ref_key(uint64_t i)
{
    uint32_t j = (uint32_t)(i % 1024), x = j * 0x9E3779B9u + 0x7F4A7C15u;
    x ^= x >> 16, x *= 0x85EBCA6Bu, x ^= x >> 13, x *= 0xC2B2AE35u, x ^= x >> 16;
    uint32_t col = (x & 0xFFFFF800u) | j << 1 | 1u;
    return col ^ (uint32_t)((uint32_t)(i / 1024) * 0x9E3779B1u) << 11;
}

static uint64_t ref_fp(const unsigned char *p, size_t bytes)
{
    uint64_t s = 0;
    for (size_t i = 0; 4 * i < bytes; i++) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4 && 4 * i + k < bytes; k++) w |= (uint32_t)p[4 * i + k] << (8 * k);
        s += (uint64_t)w * ref_key(i);
    }
    return s + (uint64_t)bytes * 0x9E3779B97F4A7C15ull;
}

static void test_definition(void **state)
{
    (void)state;
    enum { MAX = 3 * 4096 + 64 };
    unsigned char *buf = malloc(MAX + 4);
    assert_non_null(buf);
    for (size_t i = 0; i < MAX + 4; i++) buf[i] = (unsigned char)rnd();
    static const size_t lens[] = {0, 1, 2, 3, 4, 5, 7, 8, 63, 4095, 4096, 4097, 4099, 8192 + 6,
                                  MAX - 1, MAX};
    for (int off = 0; off < 4; off++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            assert_true(ft_fingerprint(buf + off, lens[k]) == ref_fp(buf + off, lens[k]));
    for (uint64_t i = 0; i < 5000; i += 7) assert_true(ft_fp_key(i) == ref_key(i));
    free(buf);
}

/* Several OpenMP chunks (64 blocks of 1024 words each) and a tail: 1 and 2 threads. */
static void test_threads(void **state)
{
    (void)state;
    size_t bytes = (size_t)5 * 65536 * 4 + 4000 + 3;
    unsigned char *buf = malloc(bytes);
    assert_non_null(buf);
    for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)rnd();
    uint64_t want = ref_fp(buf, bytes);
    int nt = omp_get_max_threads();
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        assert_true(ft_fingerprint(buf, bytes) == want);
    }
    omp_set_num_threads(nt);
    free(buf);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void test_keys(void **state)
{
    (void)state;
    enum { N = 1 << 22 };
    uint32_t *k = malloc(sizeof *k * N);
    assert_non_null(k);
    for (uint32_t i = 0; i < N; i++) {
        k[i] = ft_fp_key(i);
        assert_true(k[i] & 1u);
    }
    qsort(k, N, sizeof *k, cmp_u32);
    for (uint32_t i = 1; i < N; i++) assert_true(k[i] != k[i - 1]);
    /* words that share a column, blocks far apart (up to word 2^31 - 1) */
    for (int r = 0; r < 100000; r++) {
        uint64_t a = rnd() % ((uint64_t)1 << 31), b = rnd() % ((uint64_t)1 << 31);
        b = b / 1024 * 1024 + a % 1024;
        if (a != b) assert_true(ft_fp_key(a) != ft_fp_key(b));
    }
    free(k);
}

static void flip(unsigned char *p, size_t bit) { p[bit / 8] ^= (unsigned char)(1u << (bit % 8)); }

static void test_flips_exhaustive(void **state)
{
    (void)state;
    enum { B = 40 };
    unsigned char buf[B];
    for (int i = 0; i < B; i++) buf[i] = (unsigned char)rnd();
    uint64_t f0 = ft_fingerprint(buf, B);
    long long pairs = 0;
    for (size_t a = 0; a < 8 * B; a++) {
        flip(buf, a);
        assert_true(ft_fingerprint(buf, B) != f0);
        for (size_t b = a + 1; b < 8 * B; b++) {
            flip(buf, b);
            assert_true(ft_fingerprint(buf, B) != f0);
            flip(buf, b);
            pairs++;
        }
        flip(buf, a);
    }
    assert_true(pairs == 8 * B * (8 * B - 1) / 2);
    assert_true(ft_fingerprint(buf, B) == f0);
}

/* Random pairs over a buffer of many blocks and chunks; half of them the same bit position of
 * two words (the case a plain sum of multiples of one key would miss), bit 31 included. */
static void test_flips_random(void **state)
{
    (void)state;
    size_t bytes = (size_t)3 << 20, bits = 8 * bytes;
    unsigned char *buf = malloc(bytes);
    assert_non_null(buf);
    for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)rnd();
    uint64_t f0 = ft_fingerprint(buf, bytes);
    for (int r = 0; r < 200000; r++) {
        size_t a = rnd() % bits, b = rnd() % bits;
        if (r % 2) b = (b / 32) * 32 + a % 32;
        if (r % 97 == 0) a = a / 32 * 32 + 31, b = b / 32 * 32 + 31;
        if (a == b) continue;
        /* the sum changes by the two terms only: check them against the whole buffer now and
         * then, and on the terms' difference always (the whole pass would take minutes) */
        uint64_t wa = 0, wb = 0;
        memcpy(&wa, buf + a / 32 * 4, 4), memcpy(&wb, buf + b / 32 * 4, 4);
        uint64_t da = (wa ^ (1ull << (a % 32))) * ft_fp_key(a / 32) - wa * ft_fp_key(a / 32);
        uint64_t db = (wb ^ (1ull << (b % 32))) * ft_fp_key(b / 32) - wb * ft_fp_key(b / 32);
        if (a / 32 == b / 32) { /* one word, two bits */
            uint64_t w2 = wa ^ (1ull << (a % 32)) ^ (1ull << (b % 32));
            da = w2 * ft_fp_key(a / 32) - wa * ft_fp_key(a / 32), db = 0;
        }
        assert_true(da + db != 0);
        if (r % 2000 == 0) {
            flip(buf, a), flip(buf, b);
            assert_true(ft_fingerprint(buf, bytes) != f0);
            assert_true(ft_fingerprint(buf, bytes) - f0 == da + db);
            flip(buf, a), flip(buf, b);
        }
    }
    assert_true(ft_fingerprint(buf, bytes) == f0);
    free(buf);
}

static void test_backend_and_length(void **state)
{
    (void)state;
    const FtBackend *be = backend_cpu();
    unsigned char buf[64] = {0};
    for (int i = 0; i < 64; i++) buf[i] = (unsigned char)(3 * i + 1);
    uint64_t f = ft_fingerprint(buf, 64);
    assert_true(be->fingerprint(be->ctx, buf, 1, 64) == f);
    assert_true(be->fingerprint(be->ctx, buf, 2, 32) == f);
    assert_true(be->fingerprint(be->ctx, buf, 4, 16) == f);
    assert_true(be->fingerprint(be->ctx, buf, 8, 8) == f);
    unsigned char zero[16] = {0};
    assert_true(ft_fingerprint(zero, 8) != ft_fingerprint(zero, 12));
    assert_true(ft_fingerprint(zero, 0) == 0);
}

FT_TEST_MAIN(cmocka_unit_test(test_definition), cmocka_unit_test(test_threads),
             cmocka_unit_test(test_keys), cmocka_unit_test(test_flips_exhaustive),
             cmocka_unit_test(test_flips_random), cmocka_unit_test(test_backend_and_length))

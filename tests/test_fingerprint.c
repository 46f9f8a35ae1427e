/* test_fingerprint.c: DMR's fingerprint (backend.h ft_fingerprint, checksum.h ft_fp_term).
 *   - The vector loops and the OpenMP chunks compute exactly the sums of the scalar terms, for
 *     1-, 2-, 4- and 8-byte elements, lengths around the vector width and over several chunks,
 *     with one and two threads (integer lanes: any split gives the same value).
 *   - Every single flipped bit of every element changes it (exhaustive on a small array, each
 *     element size), and so do 20,000 random single-element changes; the keys are odd at every
 *     index (what makes each lane's term a bijection of the element).
 *   - The CPU backend's fingerprint is ft_fingerprint.
 * ft-test: ranks 1 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/checksum.h"

static unsigned long long g_rng = 2026;
static uint64_t rnd64(void)
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t reference(const unsigned char *p, size_t esize, size_t n)
{
    uint32_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = 0;
        memcpy(&bits, p + esize * i, esize);
        uint64_t t = ft_fp_term(i, bits, esize);
        lo += (uint32_t)t, hi += (uint32_t)(t >> 32);
    }
    return (uint64_t)hi << 32 | lo;
}

static void test_matches_terms(void **state)
{
    (void)state;
    static const size_t es[] = {1, 2, 4, 8};
    static const size_t ns[] = {0, 1, 7, 8, 9, 63, 65, 1000, 5 * 65536 + 13};
    size_t maxb = 8 * ns[8];
    unsigned char *a = malloc(maxb);
    assert_non_null(a);
    for (size_t i = 0; i < maxb; i++) a[i] = (unsigned char)rnd64();
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 9; j++) {
            uint64_t want = reference(a, es[k], ns[j]);
            for (int th = 1; th <= 2; th++) {
                omp_set_num_threads(th);
                assert_true(ft_fingerprint(a, es[k], ns[j]) == want);
            }
            /* an address that is not aligned to the element: the bytes decide */
            assert_true(ft_fingerprint(a + 1, es[k], ns[j] ? ns[j] - 1 : 0) ==
                        reference(a + 1, es[k], ns[j] ? ns[j] - 1 : 0));
        }
    omp_set_num_threads(1);
    assert_true(ft_fingerprint(a, 4, 0) == 0);
    const FtBackend *be = backend_cpu();
    for (int k = 0; k < 4; k++)
        assert_true(be->fingerprint(be->ctx, a, es[k], 1000) == ft_fingerprint(a, es[k], 1000));
    free(a);
}

static void test_single_changes(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < 100000; i += 7) { /* odd keys: each lane's term is a bijection */
        uint32_t k = (uint32_t)i;
        assert_true((k * FT_FP_KEY_LO + 1u) & 1u);
        assert_true((k * FT_FP_KEY_HI + FT_FP_OFF_HI) & 1u);
    }
    static const size_t es[] = {1, 2, 4, 8};
    enum { N = 37 };
    unsigned char a[8 * N];
    long long flips = 0;
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < sizeof a; i++) a[i] = (unsigned char)rnd64();
        uint64_t f0 = ft_fingerprint(a, es[k], N);
        for (size_t bit = 0; bit < 8 * es[k] * N; bit++) {
            a[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            assert_true(ft_fingerprint(a, es[k], N) != f0);
            a[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            flips++;
        }
        assert_true(ft_fingerprint(a, es[k], N) == f0);
    }
    /* random single-element changes, on arrays long enough for the vector loops */
    enum { M = 4099 };
    static unsigned char b[8 * M];
    for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)rnd64();
    long long changes = 0;
    for (int k = 0; k < 4; k++) {
        uint64_t f0 = ft_fingerprint(b, es[k], M);
        for (int r = 0; r < 5000; r++) {
            size_t el = (size_t)(rnd64() % M);
            unsigned char old[8], nw[8];
            memcpy(old, b + es[k] * el, es[k]);
            do {
                uint64_t v = rnd64();
                memcpy(nw, &v, es[k]);
            } while (!memcmp(nw, old, es[k]));
            memcpy(b + es[k] * el, nw, es[k]);
            assert_true(ft_fingerprint(b, es[k], M) != f0);
            memcpy(b + es[k] * el, old, es[k]);
            changes++;
        }
    }
    printf("  %lld single-bit flips and %lld random single-element changes: each changed the "
           "fingerprint\n", flips, changes);
}

FT_TEST_MAIN(cmocka_unit_test(test_matches_terms), cmocka_unit_test(test_single_changes))

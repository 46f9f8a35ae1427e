/* test_copy_stream.c: ft_copy_stream (copy_stream.h), the streaming copy of DMR's kept inputs.
 *   - Every length from 0 to 4 KiB + 1 KiB around the memcpy cut-off, and lengths around
 *     multiples of the body's stride up to 1 MiB, at every source and destination offset from
 *     0 to 63 (a sample of them for the long lengths): the destination holds the source's bytes,
 *     and the bytes just before and after it are untouched.
 *   - The CPU backend's copy_cold is it, and a kept copy read on another thread right after
 *     (the fence) sees the bytes.
 * ft-test: ranks 1 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/copy_stream.h"

enum { PAD = 64, MAXN = (1 << 20) + 1024 };

static unsigned char *g_src, *g_dst;

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
}

/* One copy of n bytes from src offset so to dst offset do, checked with its guard bytes. */
static void check(size_t n, size_t so, size_t dof)
{
    memset(g_dst, 0xA5, MAXN + 3 * PAD);
    ft_copy_stream(g_dst + PAD + dof, g_src + so, n);
    if (n) assert_int_equal(memcmp(g_dst + PAD + dof, g_src + so, n), 0);
    for (size_t i = 0; i < PAD + dof; i++) assert_int_equal(g_dst[i], 0xA5);
    for (size_t i = PAD + dof + n; i < PAD + dof + n + PAD; i++) assert_int_equal(g_dst[i], 0xA5);
}

static void bufs(void) /* once; freed at exit */
{
    if (g_src) return;
    g_src = aligned_alloc(64, MAXN + 3 * PAD);
    g_dst = aligned_alloc(64, MAXN + 3 * PAD);
    assert_true(g_src && g_dst);
    fill(g_src, MAXN + 3 * PAD, 7);
}

static void test_short_lengths(void **state)
{
    (void)state;
    bufs();
    for (size_t n = 0; n <= 300; n++)
        for (size_t so = 0; so < 64; so += 7)
            for (size_t dof = 0; dof < 64; dof += 5) check(n, so, dof);
    for (size_t n = 4096 - 300; n <= 4096 + 1024; n++) check(n, n % 64, (n / 64) % 64);
}

static void test_long_lengths(void **state)
{
    (void)state;
    bufs();
    size_t lens[] = {4096, 8192, 65536, 65536 + 1, 65536 + 255, 65536 + 256, 65536 + 257,
                     (1 << 20) - 1, 1 << 20, (1 << 20) + 17, (1 << 20) + 1023};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (size_t so = 0; so < 64; so += 13)
            for (size_t dof = 0; dof < 64; dof += 11) check(lens[k], so, dof);
    for (size_t dof = 0; dof < 64; dof++) check((1 << 18) + 3, 64 - dof, dof);
}

static void test_backend_other_thread(void **state)
{
    (void)state;
    bufs();
    const FtBackend *be = backend_cpu();
    assert_non_null(be->copy_cold);
    size_t n = (1 << 20) + 40;
    memset(g_dst, 0, n);
    be->copy_cold(be->ctx, g_dst, g_src + 3, n);
    int bad = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad)
    if (omp_get_thread_num() == omp_get_num_threads() - 1) bad += memcmp(g_dst, g_src + 3, n) != 0;
    assert_int_equal(bad, 0);
}

FT_TEST_MAIN(cmocka_unit_test(test_short_lengths), cmocka_unit_test(test_long_lengths),
             cmocka_unit_test(test_backend_other_thread))

/* test_flash_rows.c: the tiled CUDA attention (cuda/ops_attention_flash.cu) has never run on a
 * GPU, so its arithmetic runs here on the CPU: the same per-thread functions on the same tiles
 * (cuda/attention_flash_rows.h, compiled for the host), in the kernels' block and tile loops
 * mirrored one thread after another, against the CPU op (ops.h ATTENTION). Shapes: head size 64
 * over three tiles with a partial last one, head size 32 over two, exactly one tile, and T = 1.
 * Checked: y and lse (relative L2 1e-5), dqkv (1e-4), and that no element is left unwritten
 * (outputs start as NaN). What this cannot check is CUDA itself: the shared-memory sizes, the
 * barriers, the launch.
 * ft-test: ranks 1 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/ops.h"

#include "../cuda/attention_flash_rows.h"

enum { FB = 64 }; /* FL_B: rows per block and per tile */

/* load_tile: rows [r0, r0 + n) of a matrix with rows stride floats apart, hs wide from p. */
static void load(float *tile, const float *p, size_t stride, int r0, int n, int hs)
{
    for (int e = 0; e < n * hs; e++) tile[e] = p[(size_t)(r0 + e / hs) * stride + e % hs];
}

/* The per-thread rows of a block (FB threads from row t0 on): thread x takes row t0 + x of a
 * matrix with rows stride floats apart, hs wide from p (NULL or past T: zeros), as the kernels
 * read their own rows into registers. */
static void thread_rows(float *dst, const float *p, size_t stride, int t0, int T, int hs)
{
    for (int x = 0; x < FB; x++)
        for (int i = 0; i < hs; i++)
            dst[x * hs + i] = p && t0 + x < T ? p[(size_t)(t0 + x) * stride + i] : 0.0f;
}

static int imin(int a, int b) { return a < b ? a : b; }

/* flash_fwd_kernel, every block, its threads one after another between the barriers. */
static void emu_fwd(float *y, float *lse, const float *qkv, long long B_, long long T_,
                    long long C_, long long NH_)
{
    int B = (int)B_, T = (int)T_, C = (int)C_, NH = (int)NH_; /* the test's shapes are small */
    int hs = C / NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    size_t row = 3 * (size_t)C;
    float *ks = malloc(sizeof(float) * FB * hs), *vs = malloc(sizeof(float) * FB * hs);
    float *q = malloc(sizeof(float) * FB * hs), *acc = malloc(sizeof(float) * FB * hs);
    float m[FB], l[FB];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int blk = 0; blk * FB < T; blk++) {
                const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
                thread_rows(q, base, row, blk * FB, T, hs);
                thread_rows(acc, NULL, 0, 0, 0, hs);
                for (int x = 0; x < FB; x++) m[x] = -INFINITY, l[x] = 0.0f;
                int kend = fl_key_end(T, blk * FB, FB);
                for (int k0 = 0; k0 < kend; k0 += FB) {
                    int nk = imin(FB, kend - k0);
                    load(ks, base + C, row, k0, nk, hs);
                    load(vs, base + 2 * C, row, k0, nk, hs);
                    for (int x = 0; x < FB; x++) {
                        int t = blk * FB + x;
                        if (t < T)
                            fl_fwd_tile(q + x * hs, acc + x * hs, &m[x], &l[x], ks, vs,
                                        fl_keys_seen(t, k0, nk), hs, scale);
                    }
                }
                for (int x = 0; x < FB; x++) {
                    int t = blk * FB + x;
                    if (t >= T) continue;
                    float inv = 1.0f / l[x], *o = y + ((size_t)b * T + t) * C + (size_t)h * hs;
                    for (int i = 0; i < hs; i++) o[i] = acc[x * hs + i] * inv;
                    lse[((size_t)b * NH + h) * T + t] = m[x] + logf(l[x]);
                }
            }
    free(ks), free(vs), free(q), free(acc);
}

/* flash_bwd_dq_kernel, then flash_bwd_kv_kernel for dv and for dk. */
static void emu_bwd(float *dqkv, const float *dy, const float *qkv, const float *lse,
                    long long B_, long long T_, long long C_, long long NH_)
{
    int B = (int)B_, T = (int)T_, C = (int)C_, NH = (int)NH_; /* the test's shapes are small */
    int hs = C / NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    size_t row = 3 * (size_t)C;
    float *D = malloc(sizeof(float) * (size_t)B * NH * T);
    float *t1 = malloc(sizeof(float) * FB * hs), *t2s = malloc(sizeof(float) * FB * hs);
    float *r1 = malloc(sizeof(float) * FB * hs), *r2 = malloc(sizeof(float) * FB * hs);
    float *r3 = malloc(sizeof(float) * FB * hs);
    float ls[FB], ds[FB], d[FB];
    double dsum[FB];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
            const float *gb = dy + (size_t)b * T * C + (size_t)h * hs;
            const float *lb = lse + ((size_t)b * NH + h) * T;
            float *db = D + ((size_t)b * NH + h) * T;
            for (int blk = 0; blk * FB < T; blk++) { /* dq: r1 q, r2 g, r3 dq */
                thread_rows(r1, base, row, blk * FB, T, hs);
                thread_rows(r2, gb, (size_t)C, blk * FB, T, hs);
                thread_rows(r3, NULL, 0, 0, 0, hs);
                for (int x = 0; x < FB; x++) d[x] = 0.0f;
                int kend = fl_key_end(T, blk * FB, FB);
                for (int pass = 0; pass < 2; pass++) {
                    for (int x = 0; x < FB; x++) dsum[x] = 0;
                    for (int k0 = 0; k0 < kend; k0 += FB) {
                        int nk = imin(FB, kend - k0);
                        load(t1, base + C, row, k0, nk, hs);
                        load(t2s, base + 2 * C, row, k0, nk, hs);
                        for (int x = 0; x < FB; x++) {
                            int t = blk * FB + x;
                            if (t < T)
                                fl_dq_tile(pass, r1 + x * hs, r2 + x * hs, r3 + x * hs, &dsum[x],
                                           d[x], lb[t], t1, t2s, fl_keys_seen(t, k0, nk), hs,
                                           scale);
                        }
                    }
                    if (pass == 0)
                        for (int x = 0; x < FB; x++) d[x] = (float)dsum[x];
                }
                for (int x = 0; x < FB; x++) {
                    int t = blk * FB + x;
                    if (t >= T) continue;
                    db[t] = d[x];
                    float *o = dqkv + ((size_t)b * T + t) * row + (size_t)h * hs;
                    for (int i = 0; i < hs; i++) o[i] = scale * r3[x * hs + i];
                }
            }
            for (int want_dk = 0; want_dk < 2; want_dk++)
                for (int blk = 0; blk * FB < T; blk++) { /* r1 k, r2 v, r3 acc */
                    thread_rows(r1, base + C, row, blk * FB, T, hs);
                    thread_rows(r2, want_dk ? base + 2 * C : NULL, row, blk * FB, T, hs);
                    thread_rows(r3, NULL, 0, 0, 0, hs);
                    for (int q0 = blk * FB; q0 < T; q0 += FB) {
                        int nq = imin(FB, T - q0);
                        load(t1, base, row, q0, nq, hs);
                        load(t2s, gb, (size_t)C, q0, nq, hs);
                        for (int x = 0; x < nq; x++) ls[x] = lb[q0 + x], ds[x] = db[q0 + x];
                        for (int x = 0; x < FB; x++) {
                            int t2 = blk * FB + x;
                            if (t2 < T)
                                fl_kv_tile(want_dk, r1 + x * hs, r2 + x * hs, r3 + x * hs, t1, t2s,
                                           ls, ds, fl_first_query(t2, q0), nq, hs, scale);
                        }
                    }
                    for (int x = 0; x < FB; x++) {
                        int t2 = blk * FB + x;
                        if (t2 >= T) continue;
                        float *o = dqkv + ((size_t)b * T + t2) * row + (size_t)(want_dk ? C : 2 * C) +
                                   (size_t)h * hs;
                        for (int i = 0; i < hs; i++)
                            o[i] = want_dk ? scale * r3[x * hs + i] : r3[x * hs + i];
                    }
                }
        }
    free(D), free(t1), free(t2s), free(r1), free(r2), free(r3);
}

static void check_shape(int B, int T, int C, int NH, unsigned seed)
{
    double e[3];
    ft_attention_vs_cpu(B, T, C, NH, seed, emu_fwd, emu_bwd, e);
    printf("  B %d T %d C %d NH %d (head size %d): y %.2e, lse %.2e, dqkv %.2e\n", B, T, C, NH,
           C / NH, e[0], e[1], e[2]);
    assert_true(e[0] <= 1e-5 && e[1] <= 1e-5 && e[2] <= 1e-4);
}

static void test_shapes(void **state)
{
    (void)state;
    check_shape(2, 150, 128, 2, 1); /* head size 64, tiles 64 + 64 + 22 */
    check_shape(1, 70, 96, 3, 2);   /* head size 32, tiles 64 + 6 */
    check_shape(1, 64, 64, 1, 3);   /* exactly one tile */
    check_shape(2, 1, 64, 2, 4);    /* one position */
}

/* The tile bounds: which keys a query sees, which queries see a key, which keys a block needs. */
static void test_bounds(void **state)
{
    (void)state;
    assert_int_equal(fl_keys_seen(5, 0, 64), 6);    /* keys 0..5 */
    assert_int_equal(fl_keys_seen(70, 64, 64), 7);  /* keys 64..70 */
    assert_int_equal(fl_keys_seen(100, 0, 64), 64); /* the whole tile */
    assert_true(fl_keys_seen(10, 64, 64) <= 0);     /* none */
    assert_int_equal(fl_first_query(70, 64), 6);
    assert_int_equal(fl_first_query(10, 64), 0);
    assert_int_equal(fl_key_end(150, 128, 64), 150);
    assert_int_equal(fl_key_end(150, 64, 64), 128);
}

FT_TEST_MAIN(cmocka_unit_test(test_bounds), cmocka_unit_test(test_shapes))

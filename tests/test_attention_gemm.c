/* test_attention_gemm.c: the batched-GEMM CUDA attention (cuda/ops_attention_gemm.cu) has never
 * run on a GPU, so its plan runs here on the CPU: the very GEMM descriptors the CUDA file hands
 * to cublas<t>gemmStridedBatched (cuda/attention_gemm_plan.h), through a reference column-major
 * strided-batched GEMM that follows cuBLAS's documented semantics, one call per batch row as the
 * CUDA file makes them, and the row arithmetic between them, against the CPU op (ops.h
 * ATTENTION). Shapes: head sizes 16, 32 and 64, T not a multiple of anything, T = 1, one head.
 * Checked: y and lse (relative L2 1e-5), dqkv (1e-4), every element written (outputs start as
 * NaN); that each descriptor's operands stay inside their buffers; and that the transposes
 * matter (a descriptor with one transpose flipped fails the comparison: the test can tell).
 * What this cannot check is CUDA: the launches, the block-parallel row kernels, bf16.
 * ft-test: ranks 1 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/ops.h"

#include "../cuda/attention_gemm_plan.h"

typedef struct bufs {
    float *f[6];
    size_t n[6]; /* floats in each */
} Bufs;

/* Column-major C = alpha op(A) op(B) (beta 0) for each head of batch row b, as
 * cublasSgemmStridedBatched does, with every element read checked against its buffer. */
static void ref_gemm(const AgGemm *g, const Bufs *bf, long long b)
{
    for (int q = 0; q < g->batch; q++) {
        long long ao = g->a_off + b * g->a_row + q * g->sa;
        long long bo = g->b_off + b * g->b_row + q * g->sb;
        long long co = g->c_off + b * g->c_row + q * g->sc;
        const float *A = bf->f[g->a] + ao, *Bm = bf->f[g->b] + bo;
        float *C = bf->f[g->c] + co;
        /* the last element each operand can touch */
        long long alast = ao + (long long)((g->ta ? g->m : g->k) - 1) * g->lda + (g->ta ? g->k : g->m) - 1;
        long long blast = bo + (long long)((g->tb ? g->k : g->n) - 1) * g->ldb + (g->tb ? g->n : g->k) - 1;
        long long clast = co + (long long)(g->n - 1) * g->ldc + g->m - 1;
        assert_true(ao >= 0 && alast < (long long)bf->n[g->a]);
        assert_true(bo >= 0 && blast < (long long)bf->n[g->b]);
        assert_true(co >= 0 && clast < (long long)bf->n[g->c]);
        assert_true(g->lda >= (g->ta ? g->k : g->m) && g->ldb >= (g->tb ? g->n : g->k) &&
                    g->ldc >= g->m);
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                float s = 0.0f;
                for (int p = 0; p < g->k; p++) {
                    float a = g->ta ? A[p + (long long)i * g->lda] : A[i + (long long)p * g->lda];
                    float v = g->tb ? Bm[j + (long long)p * g->ldb] : Bm[p + (long long)j * g->ldb];
                    s += a * v;
                }
                C[i + (long long)j * g->ldc] = g->alpha * s;
            }
    }
}

static void run(const AgGemm *g, const Bufs *bf, long long B)
{
    for (long long b = 0; b < B; b++) ref_gemm(g, bf, b); /* one call per batch row */
}

static int g_flip; /* > 0: flip one transpose of descriptor number g_flip (the test's own test) */

static void gemm_step(AgGemm g, const Bufs *bf, long long B, int *count)
{
    if (++*count == g_flip) g.tb = !g.tb;
    run(&g, bf, B);
}

/* cuda_attention_gemm_fwd's sequence: S, the softmax rows, Y. */
static void emu_fwd(float *y, float *lse, const float *qkv, long long B, long long T, long long C,
                    long long NH)
{
    AgShape s = ag_shape(T, C, NH);
    float scale = (float)(1.0 / sqrt((double)s.HS));
    Bufs bf = {{0}, {0}};
    size_t tt = (size_t)(B * NH * T * T);
    bf.f[AG_QKV] = (float *)qkv, bf.n[AG_QKV] = (size_t)(B * T * 3 * C);
    bf.f[AG_Y] = y, bf.n[AG_Y] = (size_t)(B * T * C);
    bf.f[AG_P] = malloc(sizeof(float) * tt), bf.n[AG_P] = tt;
    assert_non_null(bf.f[AG_P]);
    int count = 0;
    gemm_step(ag_scores(&s, scale), &bf, B, &count);
    for (long long r = 0; r < B * NH * T; r++)
        lse[r] = ag_softmax_row(bf.f[AG_P] + r * T, r % T, T);
    gemm_step(ag_out(&s), &bf, B, &count);
    free(bf.f[AG_P]);
}

/* cuda_attention_gemm_bwd's sequence: S, P again, dP, dS, dV, dQ, dK. */
static void emu_bwd(float *dqkv, const float *dy, const float *qkv, const float *lse, long long B,
                    long long T, long long C, long long NH)
{
    AgShape s = ag_shape(T, C, NH);
    float scale = (float)(1.0 / sqrt((double)s.HS));
    Bufs bf = {{0}, {0}};
    size_t tt = (size_t)(B * NH * T * T);
    bf.f[AG_QKV] = (float *)qkv, bf.n[AG_QKV] = (size_t)(B * T * 3 * C);
    bf.f[AG_DY] = (float *)dy, bf.n[AG_DY] = (size_t)(B * T * C);
    bf.f[AG_DQKV] = dqkv, bf.n[AG_DQKV] = (size_t)(B * T * 3 * C);
    bf.f[AG_P] = malloc(sizeof(float) * tt), bf.n[AG_P] = tt;
    bf.f[AG_DS] = malloc(sizeof(float) * tt), bf.n[AG_DS] = tt;
    assert_true(bf.f[AG_P] && bf.f[AG_DS]);
    int count = 2; /* the forward's two descriptors come first in g_flip's numbering */
    gemm_step(ag_scores(&s, scale), &bf, B, &count);
    for (long long r = 0; r < B * NH * T; r++) ag_prob_row(bf.f[AG_P] + r * T, r % T, T, lse[r]);
    gemm_step(ag_dp(&s), &bf, B, &count);
    for (long long r = 0; r < B * NH * T; r++)
        ag_dsoftmax_row(bf.f[AG_P] + r * T, bf.f[AG_DS] + r * T, r % T, T);
    gemm_step(ag_dv(&s), &bf, B, &count);
    gemm_step(ag_dq(&s, scale), &bf, B, &count);
    gemm_step(ag_dk(&s, scale), &bf, B, &count);
    free(bf.f[AG_P]), free(bf.f[AG_DS]);
}

/* The plan against the CPU op on one shape; returns whether every output was within tolerance
 * (printed either way). */
static bool shape_ok(int B, int T, int C, int NH, unsigned seed)
{
    double e[3];
    ft_attention_vs_cpu(B, T, C, NH, seed, emu_fwd, emu_bwd, e);
    printf("  B %d T %d C %d NH %d (head size %d)%s: y %.2e, lse %.2e, dqkv %.2e\n", B, T, C, NH,
           C / NH, g_flip ? " one transpose flipped" : "", e[0], e[1], e[2]);
    return e[0] <= 1e-5 && e[1] <= 1e-5 && e[2] <= 1e-4;
}

static void test_shapes(void **state)
{
    (void)state;
    assert_true(shape_ok(2, 37, 64, 4, 1));   /* head size 16 */
    assert_true(shape_ok(1, 70, 96, 3, 2));   /* head size 32 */
    assert_true(shape_ok(2, 130, 128, 2, 3)); /* head size 64 */
    assert_true(shape_ok(3, 1, 64, 2, 4));    /* one position */
    assert_true(shape_ok(1, 33, 48, 1, 5));   /* one head */
}

/* Each of the seven descriptors (the forward's two, the backward's five) with op(B)'s transpose
 * flipped in turn: the comparison fails. The shape has T = HS, so that every flipped product
 * still fits its buffers and it is the values, not the bounds checks, that tell. */
static void test_transposes_matter(void **state)
{
    (void)state;
    for (g_flip = 1; g_flip <= 7; g_flip++) assert_false(shape_ok(1, 24, 48, 2, 6));
    g_flip = 0;
}

/* The descriptors' shapes: m, n, k and the strides of one head, for GPT-2 small's layer. */
static void test_descriptors(void **state)
{
    (void)state;
    AgShape s = ag_shape(1024, 768, 12);
    AgGemm g = ag_scores(&s, 0.125f);
    assert_true(g.ta == 1 && g.tb == 0 && g.m == 1024 && g.n == 1024 && g.k == 64);
    assert_true(g.lda == 3 * 768 && g.sa == 64 && g.a_off == 768 && g.b_off == 0);
    assert_true(g.ldc == 1024 && g.sc == 1024 * 1024 && g.c_row == 12LL * 1024 * 1024);
    assert_true(g.batch == 12 && g.alpha == 0.125f);
    g = ag_out(&s);
    assert_true(g.m == 64 && g.n == 1024 && g.k == 1024 && g.ldc == 768 && g.sc == 64);
    assert_true(g.a_off == 2 * 768 && g.c_row == 1024LL * 768);
    g = ag_dv(&s);
    assert_true(g.c == AG_DQKV && g.c_off == 2 * 768 && g.ldc == 3 * 768);
    g = ag_dk(&s, 0.125f);
    assert_true(g.c == AG_DQKV && g.c_off == 768 && g.alpha == 0.125f && g.tb == 1);
    g = ag_dq(&s, 0.125f);
    assert_true(g.c == AG_DQKV && g.c_off == 0 && g.b == AG_DS && g.tb == 0);
}

FT_TEST_MAIN(cmocka_unit_test(test_descriptors), cmocka_unit_test(test_shapes),
             cmocka_unit_test(test_transposes_matter))

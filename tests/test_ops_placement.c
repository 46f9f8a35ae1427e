/* test_ops_placement.c: an op's output bytes do not depend on where its buffers lie.
 *
 * DMR compares a primary's output with a checker's, and the checker does not run on the same
 * addresses: a naive check writes into scratch buffers, a deferred one reads kept copies of the
 * inputs (ops.h: every output is a function of the input bytes alone). A reduction vectorized
 * with a scalar head that depends on the address (peeling to reach an aligned load) sums in an
 * order set by the address, so the same op on the same bytes elsewhere gives other bits: a false
 * alarm. Whether a compiler peels depends on its tuning (-march=native: another CPU, another
 * choice), so this is checked, not assumed: every op kind with a reduction (and the elementwise
 * ones and AdamW's streaming-store path, which also look at addresses) runs with every input and
 * output at 16 placements (0..15 elements past a 64-byte boundary, each buffer shifted by its
 * own amount), on 1 and on 2 threads; each placement must give the bytes of the first.
 * ft-test: ranks 1 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/ops.h"

typedef enum { F32, I32, F64 } Ty;
typedef struct buf {
    Ty ty;
    size_t n;   /* elements; 0: the argument is NULL */
    void *host; /* inputs: the data; outputs: unused */
} Buf;

enum { B = 2, T = 13, C = 96, NH = 2, V = 101, VP = 112, MAXT = 16, OC = 40, N = B * T };
enum { E = 8, K = 2, CAP = 5, SHIFTS = 16 };

static unsigned long long g_rng = 99;
static double urand(void)
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static size_t ty_size(Ty t) { return t == F64 ? 8 : 4; }
static Buf frand(size_t n, double lo, double hi)
{
    float *a = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) a[i] = (float)(lo + (hi - lo) * urand());
    return (Buf){F32, n, a};
}
static Buf irand(size_t n, int mod)
{
    int *a = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) a[i] = (int)(urand() * mod);
    return (Buf){I32, n, a};
}
static Buf out_of(Ty t, size_t n) { return (Buf){t, n, NULL}; }

/* Runs kind/dir with every buffer placed `shift` elements (buffer i: shift + 5 i, mod 16) past
 * a 64-byte boundary (always at a multiple of its element size: a double at a 4-byte offset
 * would be undefined); the outputs are copied into res[i] (malloc'ed). */
static void run_placed(FtOpKind kind, FtOpDir dir, const Buf *in, const Buf *out,
                       const long long *d, const double *x, int shift, void **res)
{
    FtOpCall c;
    memset(&c, 0, sizeof c);
    void *mem[FT_OP_MAX_IN + FT_OP_MAX_OUT] = {0};
    for (int i = 0; i < FT_OP_MAX_IN + FT_OP_MAX_OUT; i++) {
        const Buf *b = i < FT_OP_MAX_IN ? &in[i] : &out[i - FT_OP_MAX_IN];
        if (!b->n) continue;
        size_t bytes = ty_size(b->ty) * b->n,
               off = ty_size(b->ty) * (size_t)((shift + 5 * i) % SHIFTS);
        assert_int_equal(posix_memalign(&mem[i], 64, bytes + 8 * SHIFTS), 0);
        char *p = (char *)mem[i] + off;
        if (i < FT_OP_MAX_IN) {
            memcpy(p, b->host, bytes);
            c.in[i] = p;
        } else {
            memset(p, 0xA5, bytes);
            c.out[i - FT_OP_MAX_IN] = p;
        }
    }
    memcpy(c.d, d, sizeof c.d);
    memcpy(c.x, x, sizeof c.x);
    const FtOpDesc *op = ops_desc(kind);
    (dir == FT_FWD ? op->fwd : op->bwd)(&c);
    for (int i = 0; i < FT_OP_MAX_OUT; i++) {
        res[i] = NULL;
        if (!out[i].n) continue;
        size_t bytes = ty_size(out[i].ty) * out[i].n;
        res[i] = malloc(bytes);
        memcpy(res[i], c.out[i], bytes);
    }
    for (int i = 0; i < FT_OP_MAX_IN + FT_OP_MAX_OUT; i++) free(mem[i]);
}

/* One case at every placement, on 1 and 2 threads; frees the inputs. */
static void check_case(const char *name, FtOpKind kind, FtOpDir dir, Buf *in, const Buf *out,
                       const long long *d, const double *x)
{
    int bad = 0;
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        void *first[FT_OP_MAX_OUT], *got[FT_OP_MAX_OUT];
        run_placed(kind, dir, in, out, d, x, 0, first);
        for (int s = 1; s < SHIFTS; s++) {
            run_placed(kind, dir, in, out, d, x, s, got);
            for (int i = 0; i < FT_OP_MAX_OUT; i++) {
                if (!out[i].n) continue;
                if (memcmp(first[i], got[i], ty_size(out[i].ty) * out[i].n)) {
                    printf("  %s out[%d], %d thread(s): placement %d gives other bytes than 0\n",
                           name, i, nt, s);
                    bad++;
                }
                free(got[i]);
            }
        }
        for (int i = 0; i < FT_OP_MAX_OUT; i++) free(first[i]);
    }
    omp_set_num_threads(1);
    printf("  %-18s %s\n", name, bad ? "DEPENDS ON PLACEMENT" : "the same bytes at 16 placements");
    for (int i = 0; i < FT_OP_MAX_IN; i++) free(in[i].host);
    if (bad) fail_msg("%s: %d output(s) differ with the buffers' placement", name, bad);
}

/* the outputs of one run at placement 0 (inputs consistent with a forward: LayerNorm and
 * attention statistics, probabilities, routing); the caller frees them */
static void outputs_of(FtOpKind kind, FtOpDir dir, const Buf *in, const Buf *out,
                       const long long *d, const double *x, void **res)
{
    run_placed(kind, dir, in, out, d, x, 0, res);
}

static void *dup_of(const void *p, size_t bytes)
{
    void *a = malloc(bytes);
    memcpy(a, p, bytes);
    return a;
}

static void test_rows_and_columns(void **state)
{
    (void)state;
    long long dE[4] = {B, T, C}, dL[4] = {N, C}, dM[4] = {N, C, OC};
    double x0[FT_OP_MAX_X] = {0}, xE[FT_OP_MAX_X] = {VP, MAXT};
    Buf ef[FT_OP_MAX_IN] = {irand(N, V), frand(VP * C, -1, 1), frand(MAXT * C, -1, 1)};
    check_case("encoder.fwd", FT_OP_ENCODER, FT_FWD, ef, (Buf[FT_OP_MAX_OUT]){out_of(F32, N * C)},
               dE, x0);
    Buf eb[FT_OP_MAX_IN] = {frand(N * C, -1, 1), irand(N, 7), frand(VP * C, -1, 1),
                            frand(MAXT * C, -1, 1), frand((size_t)N * VP, -1, 1),
                            frand(N * C, -1, 1)};
    check_case("encoder.bwd", FT_OP_ENCODER, FT_BWD, eb,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, VP * C), out_of(F32, MAXT * C)}, dE, xE);

    Buf lx = frand(N * C, -2, 2), lw = frand(C, -1, 1), lb = frand(C, -1, 1);
    Buf lo[FT_OP_MAX_OUT] = {out_of(F32, N * C), out_of(F32, N), out_of(F32, N)};
    void *st[FT_OP_MAX_OUT];
    outputs_of(FT_OP_LAYERNORM, FT_FWD, (Buf[FT_OP_MAX_IN]){lx, lw, lb}, lo, dL, x0, st);
    Buf lbwd[FT_OP_MAX_IN] = {frand(N * C, -1, 1), {F32, N * C, dup_of(lx.host, 4 * N * C)},
                              {F32, C, dup_of(lw.host, 4 * C)}, {F32, N, st[1]},
                              {F32, N, st[2]}, frand(N * C, -1, 1), frand(C, -1, 1),
                              frand(C, -1, 1)};
    free(st[0]);
    check_case("layernorm.fwd", FT_OP_LAYERNORM, FT_FWD, (Buf[FT_OP_MAX_IN]){lx, lw, lb}, lo, dL,
               x0);
    check_case("layernorm.bwd", FT_OP_LAYERNORM, FT_BWD, lbwd,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, N * C), out_of(F32, C), out_of(F32, C)}, dL, x0);

    Buf mf[FT_OP_MAX_IN] = {frand(N * C, -1, 1), frand(OC * C, -1, 1), frand(OC, -1, 1)};
    check_case("matmul.fwd", FT_OP_MATMUL, FT_FWD, mf, (Buf[FT_OP_MAX_OUT]){out_of(F32, N * OC)},
               dM, x0);
    Buf mb[FT_OP_MAX_IN] = {frand(N * OC, -1, 1), frand(N * C, -1, 1), frand(OC * C, -1, 1),
                            frand(OC * C, -1, 1), frand(OC, -1, 1)};
    check_case("matmul.bwd", FT_OP_MATMUL, FT_BWD, mb,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, N * C), out_of(F32, OC * C), out_of(F32, OC)},
               dM, x0);
}

static void test_attention_and_loss(void **state)
{
    (void)state;
    long long dA[4] = {B, T, C, NH}, dX[4] = {N, V, VP}, dN[4] = {N};
    double x0[FT_OP_MAX_X] = {0}, xS[FT_OP_MAX_X] = {0.25};
    size_t nq = (size_t)N * 3 * C, na = (size_t)B * NH * T;
    Buf qkv = frand(nq, -1.5, 1.5);
    Buf ao[FT_OP_MAX_OUT] = {out_of(F32, N * C), out_of(F32, na)};
    void *at[FT_OP_MAX_OUT];
    outputs_of(FT_OP_ATTENTION, FT_FWD, (Buf[FT_OP_MAX_IN]){qkv}, ao, dA, x0, at);
    Buf ab[FT_OP_MAX_IN] = {frand(N * C, -1, 1), {F32, nq, dup_of(qkv.host, 4 * nq)},
                            {F32, na, at[1]}};
    free(at[0]);
    check_case("attention.fwd", FT_OP_ATTENTION, FT_FWD, (Buf[FT_OP_MAX_IN]){qkv}, ao, dA, x0);
    check_case("attention.bwd", FT_OP_ATTENTION, FT_BWD, ab,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, nq)}, dA, x0);

    Buf lg = frand((size_t)N * VP, -3, 3), tg = irand(N, V);
    Buf co[FT_OP_MAX_OUT] = {out_of(F32, (size_t)N * VP), out_of(F32, N)};
    void *pr[FT_OP_MAX_OUT];
    outputs_of(FT_OP_CROSSENT, FT_FWD, (Buf[FT_OP_MAX_IN]){lg, tg}, co, dX, x0, pr);
    Buf cb[FT_OP_MAX_IN] = {{F32, (size_t)N * VP, pr[0]}, {I32, N, dup_of(tg.host, 4 * N)}};
    Buf lm[FT_OP_MAX_IN] = {{F32, N, pr[1]}};
    check_case("crossent.fwd", FT_OP_CROSSENT, FT_FWD, (Buf[FT_OP_MAX_IN]){lg, tg}, co, dX, x0);
    check_case("crossent.bwd", FT_OP_CROSSENT, FT_BWD, cb,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, (size_t)N * VP)}, dX, xS);
    check_case("lossmean.fwd", FT_OP_LOSSMEAN, FT_FWD, lm, (Buf[FT_OP_MAX_OUT]){out_of(F32, 1)},
               dN, x0);
}

static void test_elementwise_and_optimizer(void **state)
{
    (void)state;
    enum { M = 1000 };
    long long dG[4] = {N * C}, dO[4] = {M}, dW[4] = {3 * FT_OPS_CHUNK + 17};
    double x0[FT_OP_MAX_X] = {0};
    double xA[FT_OP_MAX_X] = {1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 0.25, 0.5};
    Buf gf[FT_OP_MAX_IN] = {frand(N * C, -5, 5)};
    check_case("gelu.fwd", FT_OP_GELU, FT_FWD, gf, (Buf[FT_OP_MAX_OUT]){out_of(F32, N * C)}, dG,
               x0);
    Buf gb[FT_OP_MAX_IN] = {frand(N * C, -1, 1), frand(N * C, -5, 5)};
    check_case("gelu.bwd", FT_OP_GELU, FT_BWD, gb, (Buf[FT_OP_MAX_OUT]){out_of(F32, N * C)}, dG,
               x0);
    Buf gn[FT_OP_MAX_IN] = {frand((size_t)dW[0], -1, 1)};
    check_case("gradnorm.fwd", FT_OP_GRADNORM, FT_FWD, gn, (Buf[FT_OP_MAX_OUT]){out_of(F64, 1)},
               dW, x0);
    Buf aw[FT_OP_MAX_IN] = {frand(M, -1, 1), frand(M, -1, 1), frand(M, -0.1, 0.1),
                            frand(M, 0, 0.1)};
    check_case("adamw.fwd", FT_OP_ADAMW, FT_FWD, aw,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, M), out_of(F32, M), out_of(F32, M)}, dO, xA);
}

static void test_moe_route(void **state)
{
    (void)state;
    long long dR[4] = {N, E, K, CAP};
    double xR[FT_OP_MAX_X] = {0.01};
    Buf rf[FT_OP_MAX_IN] = {frand(N * E, -2, 2)};
    check_case("moe_route.fwd", FT_OP_MOE_ROUTE, FT_FWD, rf,
               (Buf[FT_OP_MAX_OUT]){out_of(F32, N * E), out_of(I32, N * K), out_of(F32, N * K),
                                    out_of(I32, N * K), out_of(F32, 1)},
               dR, xR);
}

FT_TEST_MAIN(cmocka_unit_test(test_rows_and_columns), cmocka_unit_test(test_attention_and_loss),
             cmocka_unit_test(test_elementwise_and_optimizer), cmocka_unit_test(test_moe_route))

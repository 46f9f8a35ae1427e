/* test_ops.c: every op kind's forward against a double-precision reference, every backward
 * against central finite differences of that double-precision forward, the naive GEMM twin
 * against the BLAS path, attention's causality (later positions leave earlier rows' bytes
 * unchanged), and bitwise determinism (two runs on 2 threads, any prior buffer
 * contents) of every kernel.
 * ft-test: ranks 1
 *
 * Tolerances (relative L2 error per tensor, |a - ref| / |ref|):
 *   forward fp32 vs double reference       1e-5  (fp32 rounding over sums of <= 64 terms;
 *                                                 measured worst 5e-8)
 *   backward fp32 vs double finite diff.   1e-4  (the FD error itself is ~1e-9 with h = 1e-4
 *                                                 in double; fp32 rounding of the analytic
 *                                                 gradient dominates; measured worst 8e-8)
 *   matmul BLAS vs naive twin              1e-5  (different summation order in fp32;
 *                                                 measured worst 2e-7)
 *   GELU per element on a grid (absolute)  1e-6 forward, 5e-6 derivative (test_gelu_grid)
 * A wrong formula gives errors of order 1, so these bounds leave room for rounding only.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/ops.h"

#define FWD_TOL 1e-5
#define BWD_TOL 1e-4

static unsigned long long g_rng = 42;
static double urand(void) /* uniform in [0, 1), splitmix64 */
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
}
static float *frand(size_t n, float scale)
{
    float *a = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) a[i] = (float)((2 * urand() - 1) * scale);
    return a;
}
static double *to_d(const float *a, size_t n)
{
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}
static float *fzeros(size_t n) { return calloc(n, sizeof(float)); }

static double rel_err_fd(const float *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void expect_close(const char *what, const float *a, const double *ref, size_t n,
                         double tol)
{
    double e = rel_err_fd(a, ref, n);
    printf("  %-32s rel err %.2e (tol %.0e)\n", what, e, tol);
    if (!(e <= tol)) fail_msg("%s: relative error %.3e > %.0e", what, e, tol);
}

/* ---- double-precision references: the objective f = sum(G * y) ----------------------------- */

/* The case under test: its double inputs and the objective. */
typedef double (*ObjFn)(void);
static ObjFn g_obj;

/* Central differences of g_obj with respect to every element of x (double, perturbed in
 * place); compares against the analytic gradient a. */
static void fd_check(const char *what, double *x, size_t n, const float *a)
{
    double *fd = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i], h = 1e-4 * (fabs(x0) > 1 ? fabs(x0) : 1);
        x[i] = x0 + h;
        double fp = g_obj();
        x[i] = x0 - h;
        double fm = g_obj();
        x[i] = x0;
        fd[i] = (fp - fm) / (2 * h);
    }
    expect_close(what, a, fd, n, BWD_TOL);
    free(fd);
}

/* Bitwise determinism: runs fn twice on 2 threads; outputs must match bytewise, and must not
 * depend on what the output buffers held before (every op writes its outputs completely). */
static void expect_deterministic(FtOpFn fn, FtOpCall *c, const size_t *out_bytes, int nout)
{
    void *first[FT_OP_MAX_OUT] = {0}, *save[FT_OP_MAX_OUT] = {0};
    int nt = omp_get_max_threads();
    omp_set_num_threads(2);
    for (int i = 0; i < nout; i++) {
        if (!c->out[i]) continue;
        save[i] = malloc(out_bytes[i]);
        memcpy(save[i], c->out[i], out_bytes[i]);
    }
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < nout; i++) {
            if (!c->out[i]) continue;
            memset(c->out[i], rep ? 0xA5 : 0x00, out_bytes[i]); /* garbage vs zeros */
        }
        fn(c);
        for (int i = 0; i < nout; i++) {
            if (!c->out[i]) continue;
            if (rep == 0) {
                first[i] = malloc(out_bytes[i]);
                memcpy(first[i], c->out[i], out_bytes[i]);
            } else {
                assert_memory_equal(first[i], c->out[i], out_bytes[i]);
            }
        }
    }
    for (int i = 0; i < nout; i++) {
        free(first[i]);
        free(save[i]);
    }
    omp_set_num_threads(nt);
}

/* ---- encoder ------------------------------------------------------------------------------- */

enum { EB = 2, ET = 5, EC = 6, EVp = 8, EmaxT = 7, EN = EB * ET };
static int e_tok[EN];
static double *e_wte, *e_wpe, *e_G;

static double enc_obj(void)
{
    double f = 0;
    for (int bt = 0; bt < EN; bt++)
        for (int i = 0; i < EC; i++)
            f += e_G[bt * EC + i] * (e_wte[e_tok[bt] * EC + i] + e_wpe[(bt % ET) * EC + i]);
    return f;
}

static void test_encoder(void **state)
{
    (void)state;
    for (int i = 0; i < EN; i++) e_tok[i] = (int)(urand() * EVp) % 5; /* repeated tokens */
    float *wte = frand(EVp * EC, 1), *wpe = frand(EmaxT * EC, 1), *x = fzeros(EN * EC);
    float *G = frand(EN * EC, 1), *dwte = fzeros(EVp * EC), *dwpe = fzeros(EmaxT * EC);
    e_wte = to_d(wte, EVp * EC), e_wpe = to_d(wpe, EmaxT * EC), e_G = to_d(G, EN * EC);
    const FtOpDesc *op = ops_desc(FT_OP_ENCODER);
    FtOpCall f = {.in = {e_tok, wte, wpe}, .out = {x}, .d = {EB, ET, EC}};
    op->fwd(&f);
    double ref[EN * EC];
    for (int bt = 0; bt < EN; bt++)
        for (int i = 0; i < EC; i++)
            ref[bt * EC + i] = e_wte[e_tok[bt] * EC + i] + e_wpe[(bt % ET) * EC + i];
    expect_close("encoder fwd", x, ref, EN * EC, FWD_TOL);
    FtOpCall b = {.in = {G, e_tok, NULL, NULL}, .out = {dwte, dwpe}, .d = {EB, ET, EC},
                  .x = {EVp, EmaxT}};
    op->bwd(&b);
    g_obj = enc_obj;
    fd_check("encoder bwd dwte", e_wte, EVp * EC, dwte);
    fd_check("encoder bwd dwpe", e_wpe, EmaxT * EC, dwpe);
    size_t ob[] = {sizeof(float) * EN * EC};
    expect_deterministic(op->fwd, &f, ob, 1);
    size_t bb[] = {sizeof(float) * EVp * EC, sizeof(float) * EmaxT * EC};
    expect_deterministic(op->bwd, &b, bb, 2);
    /* the tied LM head folded in: bitwise what its own matmul dW followed by the encoder's
     * rows on top of it gives (the same sums in the same order, one pass fewer) */
    float *dlg = frand(EN * EVp, 1), *lnf = frand(EN * EC, 1), *head = fzeros(EVp * EC);
    float *fused = fzeros(EVp * EC), *chain = fzeros(EVp * EC), *dwpe2 = fzeros(EmaxT * EC);
    FtOpCall mm = {.in = {dlg, lnf, wte}, .out = {fzeros(EN * EC), head, NULL}, .d = {EN, EC, EVp}};
    ops_desc(FT_OP_MATMUL)->bwd(&mm);
    FtOpCall bc = {.in = {G, e_tok, head, NULL}, .out = {chain, dwpe2}, .d = {EB, ET, EC},
                   .x = {EVp, EmaxT}};
    op->bwd(&bc);
    FtOpCall bf = {.in = {G, e_tok, NULL, NULL, dlg, lnf}, .out = {fused, dwpe2}, .d = {EB, ET, EC},
                   .x = {EVp, EmaxT}};
    op->bwd(&bf);
    assert_memory_equal(fused, chain, sizeof(float) * EVp * EC);
    assert_true(op->flops(&bf, FT_BWD) > op->flops(&b, FT_BWD));
    free(dlg), free(lnf), free(head), free(fused), free(chain), free(dwpe2), free(mm.out[0]);
    free(wte), free(wpe), free(x), free(G), free(dwte), free(dwpe);
    free(e_wte), free(e_wpe), free(e_G);
}

/* ---- layernorm ----------------------------------------------------------------------------- */

enum { LN_N = 6, LN_C = 12 };
static double *ln_x, *ln_w, *ln_b, *ln_G;

static void ln_ref(double *y)
{
    for (int n = 0; n < LN_N; n++) {
        double m = 0, v = 0;
        for (int i = 0; i < LN_C; i++) m += ln_x[n * LN_C + i];
        m /= LN_C;
        for (int i = 0; i < LN_C; i++) v += (ln_x[n * LN_C + i] - m) * (ln_x[n * LN_C + i] - m);
        v /= LN_C;
        for (int i = 0; i < LN_C; i++)
            y[n * LN_C + i] = (ln_x[n * LN_C + i] - m) / sqrt(v + 1e-5) * ln_w[i] + ln_b[i];
    }
}
static double ln_obj(void)
{
    double y[LN_N * LN_C], f = 0;
    ln_ref(y);
    for (int i = 0; i < LN_N * LN_C; i++) f += ln_G[i] * y[i];
    return f;
}

static void test_layernorm(void **state)
{
    (void)state;
    size_t nx = LN_N * LN_C;
    float *x = frand(nx, 2), *w = frand(LN_C, 1), *bb = frand(LN_C, 1), *y = fzeros(nx);
    float *mean = fzeros(LN_N), *rstd = fzeros(LN_N), *G = frand(nx, 1), *R = frand(nx, 1);
    float *dx = fzeros(nx), *dw = fzeros(LN_C), *db = fzeros(LN_C);
    ln_x = to_d(x, nx), ln_w = to_d(w, LN_C), ln_b = to_d(bb, LN_C), ln_G = to_d(G, nx);
    const FtOpDesc *op = ops_desc(FT_OP_LAYERNORM);
    FtOpCall f = {.in = {x, w, bb}, .out = {y, mean, rstd}, .d = {LN_N, LN_C}};
    op->fwd(&f);
    double ref[LN_N * LN_C];
    ln_ref(ref);
    expect_close("layernorm fwd", y, ref, nx, FWD_TOL);
    FtOpCall b = {.in = {G, x, w, mean, rstd, R}, .out = {dx, dw, db}, .d = {LN_N, LN_C}};
    op->bwd(&b);
    for (size_t i = 0; i < nx; i++) dx[i] -= R[i]; /* dx = dres + d(LN)/dx */
    g_obj = ln_obj;
    fd_check("layernorm bwd dx", ln_x, nx, dx);
    fd_check("layernorm bwd dw", ln_w, LN_C, dw);
    fd_check("layernorm bwd db", ln_b, LN_C, db);
    double *dx_no_res = to_d(dx, nx); /* = dx with dres, minus dres */
    b.in[5] = NULL;                    /* without a residual gradient */
    op->bwd(&b);
    expect_close("layernorm bwd dx without dres", dx, dx_no_res, nx, FWD_TOL);
    free(dx_no_res);
    b.in[5] = R;
    size_t ob[] = {sizeof(float) * nx, sizeof(float) * LN_N, sizeof(float) * LN_N};
    expect_deterministic(op->fwd, &f, ob, 3);
    size_t bo[] = {sizeof(float) * nx, sizeof(float) * LN_C, sizeof(float) * LN_C};
    expect_deterministic(op->bwd, &b, bo, 3);
    free(x), free(w), free(bb), free(y), free(mean), free(rstd), free(G), free(R), free(dx),
        free(dw), free(db);
    free(ln_x), free(ln_w), free(ln_b), free(ln_G);
}

/* ---- matmul -------------------------------------------------------------------------------- */

enum { MM_N = 7, MM_C = 9, MM_OC = 5 };
static double *mm_x, *mm_w, *mm_b, *mm_G;

static double mm_obj(void)
{
    double f = 0;
    for (int n = 0; n < MM_N; n++)
        for (int o = 0; o < MM_OC; o++) {
            double s = mm_b[o];
            for (int i = 0; i < MM_C; i++) s += mm_x[n * MM_C + i] * mm_w[o * MM_C + i];
            f += mm_G[n * MM_OC + o] * s;
        }
    return f;
}

static void test_matmul(void **state)
{
    (void)state;
    float *x = frand(MM_N * MM_C, 1), *w = frand(MM_OC * MM_C, 1), *bb = frand(MM_OC, 1);
    float *y = fzeros(MM_N * MM_OC), *G = frand(MM_N * MM_OC, 1);
    float *dx = fzeros(MM_N * MM_C), *dw = fzeros(MM_OC * MM_C), *db = fzeros(MM_OC);
    mm_x = to_d(x, MM_N * MM_C), mm_w = to_d(w, MM_OC * MM_C), mm_b = to_d(bb, MM_OC);
    mm_G = to_d(G, MM_N * MM_OC);
    const FtOpDesc *op = ops_desc(FT_OP_MATMUL);
    FtOpCall f = {.in = {x, w, bb}, .out = {y}, .d = {MM_N, MM_C, MM_OC}};
    op->fwd(&f);
    double ref[MM_N * MM_OC];
    for (int n = 0; n < MM_N; n++)
        for (int o = 0; o < MM_OC; o++) {
            double s = mm_b[o];
            for (int i = 0; i < MM_C; i++) s += mm_x[n * MM_C + i] * mm_w[o * MM_C + i];
            ref[n * MM_OC + o] = s;
        }
    expect_close("matmul fwd", y, ref, MM_N * MM_OC, FWD_TOL);
    FtOpCall b = {.in = {G, x, w}, .out = {dx, dw, db}, .d = {MM_N, MM_C, MM_OC}};
    op->bwd(&b);
    g_obj = mm_obj;
    fd_check("matmul bwd dx", mm_x, MM_N * MM_C, dx);
    fd_check("matmul bwd dw", mm_w, MM_OC * MM_C, dw);
    fd_check("matmul bwd db", mm_b, MM_OC, db);
    size_t ob[] = {sizeof(float) * MM_N * MM_OC};
    expect_deterministic(op->fwd, &f, ob, 1);
    size_t bo[] = {sizeof(float) * MM_N * MM_C, sizeof(float) * MM_OC * MM_C,
                   sizeof(float) * MM_OC};
    expect_deterministic(op->bwd, &b, bo, 3);
    free(x), free(w), free(bb), free(y), free(G), free(dx), free(dw), free(db);
    free(mm_x), free(mm_w), free(mm_b), free(mm_G);
}

/* The BLAS path against its naive twin on a larger, GPT-shaped problem, with and without bias
 * and with earlier gradient sums (prev) under dw and db. */
static void test_matmul_twin(void **state)
{
    (void)state;
    int N = 64, C = 96, OC = 160;
    const FtOpDesc *op = ops_desc(FT_OP_MATMUL);
    float *x = frand(N * C, 1), *w = frand(OC * C, 1), *bb = frand(OC, 1), *G = frand(N * OC, 1);
    float *y1 = fzeros(N * OC), *y2 = fzeros(N * OC);
    for (int withb = 0; withb < 2; withb++) {
        FtOpCall f1 = {.in = {x, w, withb ? bb : NULL}, .out = {y1}, .d = {N, C, OC}};
        FtOpCall f2 = f1;
        f2.out[0] = y2;
        op->fwd(&f1);
        op->fwd_ref(&f2);
        double *r = to_d(y2, N * OC);
        expect_close(withb ? "matmul fwd blas vs naive (bias)" : "matmul fwd blas vs naive", y1,
                     r, N * OC, FWD_TOL);
        free(r);
    }
    float *pw = frand(OC * C, 1), *pb = frand(OC, 1);
    float *dx1 = fzeros(N * C), *dw1 = fzeros(OC * C), *db1 = fzeros(OC);
    float *dx2 = fzeros(N * C), *dw2 = fzeros(OC * C), *db2 = fzeros(OC);
    FtOpCall b1 = {.in = {G, x, w, pw, pb}, .out = {dx1, dw1, db1}, .d = {N, C, OC}};
    FtOpCall b2 = {.in = {G, x, w, pw, pb}, .out = {dx2, dw2, db2}, .d = {N, C, OC}};
    op->bwd(&b1);
    op->bwd_ref(&b2);
    double *r = to_d(dx2, N * C);
    expect_close("matmul bwd dx blas vs naive", dx1, r, N * C, FWD_TOL);
    free(r);
    r = to_d(dw2, OC * C);
    expect_close("matmul bwd dw blas vs naive", dw1, r, OC * C, FWD_TOL);
    free(r);
    r = to_d(db2, OC);
    expect_close("matmul bwd db blas vs naive", db1, r, OC, FWD_TOL);
    free(r);
    /* prev + contribution: against a call without prev, plus prev; prev itself untouched */
    float *pw0 = malloc(sizeof(float) * OC * C);
    memcpy(pw0, pw, sizeof(float) * OC * C);
    FtOpCall b3 = {.in = {G, x, w}, .out = {dx2, dw2, db2}, .d = {N, C, OC}};
    op->bwd(&b3);
    double *sum = malloc(sizeof(double) * OC * C);
    for (int i = 0; i < OC * C; i++) sum[i] = (double)pw[i] + dw2[i];
    expect_close("matmul bwd dw = prev + contribution", dw1, sum, OC * C, FWD_TOL);
    assert_memory_equal(pw, pw0, sizeof(float) * OC * C);
    free(sum), free(pw0), free(pw), free(pb);
    free(x), free(w), free(bb), free(G), free(y1), free(y2), free(dx1), free(dw1), free(db1),
        free(dx2), free(dw2), free(db2);
}

/* ---- attention ----------------------------------------------------------------------------- */

enum { AB = 2, AT = 5, AC = 8, ANH = 2, AHS = AC / ANH };
static double *at_qkv, *at_G;

/* y (and, when lse is not NULL, each row's log-sum-exp of its scaled scores) in double */
static void attn_ref_lse(double *y, double *lse)
{
    double scale = 1.0 / sqrt((double)AHS);
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < ANH; h++)
            for (int t = 0; t < AT; t++) {
                double s[AT], mx = -1e300, sum = 0;
                const double *q = at_qkv + (b * AT + t) * 3 * AC + h * AHS;
                for (int t2 = 0; t2 <= t; t2++) {
                    const double *k = at_qkv + (b * AT + t2) * 3 * AC + AC + h * AHS;
                    s[t2] = 0;
                    for (int i = 0; i < AHS; i++) s[t2] += q[i] * k[i];
                    s[t2] *= scale;
                    if (s[t2] > mx) mx = s[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (s[t2] = exp(s[t2] - mx));
                if (lse) lse[(b * ANH + h) * AT + t] = mx + log(sum);
                for (int i = 0; i < AHS; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o += s[t2] / sum * at_qkv[(b * AT + t2) * 3 * AC + 2 * AC + h * AHS + i];
                    y[(b * AT + t) * AC + h * AHS + i] = o;
                }
            }
}
static void attn_ref(double *y) { attn_ref_lse(y, NULL); }
static double attn_obj(void)
{
    double y[AB * AT * AC], f = 0;
    attn_ref(y);
    for (int i = 0; i < AB * AT * AC; i++) f += at_G[i] * y[i];
    return f;
}

static void test_attention(void **state)
{
    (void)state;
    size_t nq = AB * AT * 3 * AC, ny = AB * AT * AC, na = AB * ANH * AT;
    float *qkv = frand(nq, 1.5f), *y = fzeros(ny), *att = fzeros(na), *G = frand(ny, 1);
    float *dqkv = fzeros(nq);
    at_qkv = to_d(qkv, nq), at_G = to_d(G, ny);
    const FtOpDesc *op = ops_desc(FT_OP_ATTENTION);
    FtOpCall f = {.in = {qkv}, .out = {y, att}, .d = {AB, AT, AC, ANH}};
    op->fwd(&f);
    double ref[AB * AT * AC], lse[AB * ANH * AT];
    attn_ref_lse(ref, lse);
    expect_close("attention fwd", y, ref, ny, FWD_TOL);
    expect_close("attention fwd lse", att, lse, na, FWD_TOL);
    FtOpCall b = {.in = {G, qkv, att}, .out = {dqkv}, .d = {AB, AT, AC, ANH}};
    op->bwd(&b);
    g_obj = attn_obj;
    fd_check("attention bwd dqkv", at_qkv, nq, dqkv);
    size_t ob[] = {sizeof(float) * ny, sizeof(float) * na};
    expect_deterministic(op->fwd, &f, ob, 2);
    size_t bo[] = {sizeof(float) * nq};
    expect_deterministic(op->bwd, &b, bo, 1);
    free(qkv), free(y), free(att), free(G), free(dqkv), free(at_qkv), free(at_G);
}

/* The GEMM path against its plain twin on a larger shape (T not a multiple of anything). */
static void test_attention_twin(void **state)
{
    (void)state;
    long long B = 3, T = 33, C = 64, NH = 4;
    size_t nq = B * T * 3 * C, ny = B * T * C, na = B * NH * T;
    const FtOpDesc *op = ops_desc(FT_OP_ATTENTION);
    float *qkv = frand(nq, 2), *G = frand(ny, 1);
    float *y1 = fzeros(ny), *y2 = fzeros(ny), *a1 = fzeros(na), *a2 = fzeros(na);
    float *d1 = fzeros(nq), *d2 = fzeros(nq);
    FtOpCall f1 = {.in = {qkv}, .out = {y1, a1}, .d = {B, T, C, NH}};
    FtOpCall f2 = {.in = {qkv}, .out = {y2, a2}, .d = {B, T, C, NH}};
    op->fwd(&f1);
    op->fwd_ref(&f2);
    double *r = to_d(y2, ny);
    expect_close("attention fwd gemm vs plain", y1, r, ny, FWD_TOL);
    free(r);
    r = to_d(a2, na);
    expect_close("attention lse gemm vs plain", a1, r, na, FWD_TOL);
    free(r);
    FtOpCall b1 = {.in = {G, qkv, a1}, .out = {d1}, .d = {B, T, C, NH}};
    FtOpCall b2 = {.in = {G, qkv, a2}, .out = {d2}, .d = {B, T, C, NH}};
    op->bwd(&b1);
    op->bwd_ref(&b2);
    r = to_d(d2, nq);
    expect_close("attention bwd gemm vs plain", d1, r, nq, FWD_TOL);
    free(r);
    size_t ob[] = {sizeof(float) * ny, sizeof(float) * na};
    expect_deterministic(op->fwd, &f1, ob, 2);
    size_t bo[] = {sizeof(float) * nq};
    expect_deterministic(op->bwd, &b1, bo, 1);
    free(qkv), free(G), free(y1), free(y2), free(a1), free(a2), free(d1), free(d2);
}

/* Causality: what a position's output and attention row hold depends on the queries, keys and
 * values of that position and earlier ones only, bit for bit. Changing every later position
 * (large keys, so a later score would dominate any softmax that saw it) must leave the earlier
 * rows' bytes unchanged, in the GEMM path and in its plain twin. */
static void test_attention_causal(void **state)
{
    (void)state;
    long long B = 2, T = 9, C = 16, NH = 2, t0 = 4;
    size_t nq = B * T * 3 * C, ny = B * T * C, na = B * NH * T;
    const FtOpDesc *op = ops_desc(FT_OP_ATTENTION);
    float *qkv = frand(nq, 1), *qkv2 = malloc(sizeof(float) * nq);
    memcpy(qkv2, qkv, sizeof(float) * nq);
    for (long long b = 0; b < B; b++)
        for (long long t = t0 + 1; t < T; t++)
            for (long long i = 0; i < 3 * C; i++)
                qkv2[(b * T + t) * 3 * C + i] = (i >= C && i < 2 * C ? 40.0f : 3.0f) *
                                                (float)(urand() + 0.5);
    for (int twin = 0; twin < 2; twin++) {
        FtOpFn fwd = twin ? op->fwd_ref : op->fwd;
        float *y1 = fzeros(ny), *y2 = fzeros(ny), *a1 = fzeros(na), *a2 = fzeros(na);
        FtOpCall f1 = {.in = {qkv}, .out = {y1, a1}, .d = {B, T, C, NH}};
        FtOpCall f2 = {.in = {qkv2}, .out = {y2, a2}, .d = {B, T, C, NH}};
        fwd(&f1);
        fwd(&f2);
        assert_true(memcmp(y1, y2, sizeof(float) * ny) != 0); /* the later rows did change */
        for (long long b = 0; b < B; b++) {
            assert_memory_equal(y1 + b * T * C, y2 + b * T * C, sizeof(float) * (t0 + 1) * C);
            for (long long h = 0; h < NH; h++) {
                size_t r = (size_t)((b * NH + h) * T);
                assert_memory_equal(a1 + r, a2 + r, sizeof(float) * (t0 + 1));
            }
        }
        free(y1), free(y2), free(a1), free(a2);
    }
    free(qkv), free(qkv2);
}

/* ---- gelu and residual -------------------------------------------------------------------- */

enum { GN = 40 };
static double *ge_x, *ge_G;
static double gelu_d(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double gelu_obj(void)
{
    double f = 0;
    for (int i = 0; i < GN; i++) f += ge_G[i] * gelu_d(ge_x[i]);
    return f;
}

static void test_gelu(void **state)
{
    (void)state;
    float *x = frand(GN, 4), *y = fzeros(GN), *G = frand(GN, 1), *dx = fzeros(GN);
    ge_x = to_d(x, GN), ge_G = to_d(G, GN);
    const FtOpDesc *op = ops_desc(FT_OP_GELU);
    FtOpCall f = {.in = {x}, .out = {y}, .d = {GN}};
    op->fwd(&f);
    double ref[GN];
    for (int i = 0; i < GN; i++) ref[i] = gelu_d(ge_x[i]);
    expect_close("gelu fwd", y, ref, GN, FWD_TOL);
    FtOpCall b = {.in = {G, x}, .out = {dx}, .d = {GN}};
    op->bwd(&b);
    g_obj = gelu_obj;
    fd_check("gelu bwd dx", ge_x, GN, dx);
    size_t ob[] = {sizeof(float) * GN};
    expect_deterministic(op->fwd, &f, ob, 1);
    expect_deterministic(op->bwd, &b, ob, 1);
    free(x), free(y), free(G), free(dx), free(ge_x), free(ge_G);
}

/* GELU elementwise on a grid over [-5, 5], forward and derivative against the double formula,
 * the largest absolute error per element: the relative L2 bound above cannot see a constant
 * off in its fourth digit (0.0447 for 0.044715 moves y by up to 8e-6), this one can. Bounds:
 * tanh_poly's absolute error (~2e-7) times 0.5 |x| <= 2.5, plus fp32 rounding of |y| <= 5:
 * 1e-6 forward (measured 4.3e-7); the derivative multiplies the tanh error by up to ~9
 * (0.5 |x| S (1 + 3 c x^2) times d(sech^2)/d(tanh)): 5e-6 (measured 2.0e-6). No BLAS and no
 * FMA contraction (-std=c11) in these kernels: the same bits on every CPU. */
static void test_gelu_grid(void **state)
{
    (void)state;
    enum { NG = 2001 };
    float *x = fzeros(NG), *y = fzeros(NG), *one = fzeros(NG), *dx = fzeros(NG);
    for (int i = 0; i < NG; i++) x[i] = (float)(-5.0 + 10.0 * i / (NG - 1)), one[i] = 1.0f;
    const FtOpDesc *op = ops_desc(FT_OP_GELU);
    FtOpCall f = {.in = {x}, .out = {y}, .d = {NG}};
    FtOpCall b = {.in = {one, x}, .out = {dx}, .d = {NG}};
    op->fwd(&f);
    op->bwd(&b);
    double ef = 0, eb = 0, S = sqrt(2 / M_PI);
    for (int i = 0; i < NG; i++) {
        double v = x[i], th = tanh(S * (v + 0.044715 * v * v * v));
        double yr = 0.5 * v * (1 + th);
        double dr = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * S * (1 + 3 * 0.044715 * v * v);
        ef = fmax(ef, fabs(y[i] - yr));
        eb = fmax(eb, fabs(dx[i] - dr));
    }
    printf("  gelu on [-5, 5]: max abs err fwd %.2e (tol 1e-6), bwd %.2e (tol 5e-6)\n", ef, eb);
    assert_true(ef <= 1e-6);
    assert_true(eb <= 5e-6);
    free(x), free(y), free(one), free(dx);
}

static double *re_a, *re_b, *re_G;
static double res_obj(void)
{
    double f = 0;
    for (int i = 0; i < GN; i++) f += re_G[i] * (re_a[i] + re_b[i]);
    return f;
}

static void test_residual(void **state)
{
    (void)state;
    float *a = frand(GN, 1), *bb = frand(GN, 1), *y = fzeros(GN), *G = frand(GN, 1);
    float *da = fzeros(GN), *db = fzeros(GN);
    re_a = to_d(a, GN), re_b = to_d(bb, GN), re_G = to_d(G, GN);
    const FtOpDesc *op = ops_desc(FT_OP_RESIDUAL);
    FtOpCall f = {.in = {a, bb}, .out = {y}, .d = {GN}};
    op->fwd(&f);
    double ref[GN];
    for (int i = 0; i < GN; i++) ref[i] = re_a[i] + re_b[i];
    expect_close("residual fwd", y, ref, GN, FWD_TOL);
    FtOpCall b = {.in = {G}, .out = {da, db}, .d = {GN}};
    op->bwd(&b);
    g_obj = res_obj;
    fd_check("residual bwd da", re_a, GN, da);
    fd_check("residual bwd db", re_b, GN, db);
    free(a), free(bb), free(y), free(G), free(da), free(db), free(re_a), free(re_b), free(re_G);
}

/* ---- cross-entropy over the padded vocabulary ---------------------------------------------- */

enum { CN = 6, CV = 11, CVp = 16 };
static double *ce_l;
static int ce_t[CN];
static const double CE_S = 1.0 / CN;

static double ce_loss(int n)
{
    double mx = -1e300, s = 0;
    for (int v = 0; v < CV; v++)
        if (ce_l[n * CVp + v] > mx) mx = ce_l[n * CVp + v];
    for (int v = 0; v < CV; v++) s += exp(ce_l[n * CVp + v] - mx);
    return log(s) + mx - ce_l[n * CVp + ce_t[n]];
}
static double ce_obj(void)
{
    double f = 0;
    for (int n = 0; n < CN; n++) f += CE_S * ce_loss(n);
    return f;
}

static void test_crossentropy(void **state)
{
    (void)state;
    for (int n = 0; n < CN; n++) ce_t[n] = (int)(urand() * CV);
    float *l = frand(CN * CVp, 3), *probs = fzeros(CN * CVp), *losses = fzeros(CN);
    float *dl = fzeros(CN * CVp), loss = 0;
    for (int n = 0; n < CN; n++) /* the padding holds large values that must not matter */
        for (int v = CV; v < CVp; v++) l[n * CVp + v] = 50.0f;
    ce_l = to_d(l, CN * CVp);
    const FtOpDesc *op = ops_desc(FT_OP_CROSSENT);
    FtOpCall f = {.in = {l, ce_t}, .out = {probs, losses}, .d = {CN, CV, CVp}};
    op->fwd(&f);
    double ref[CN];
    for (int n = 0; n < CN; n++) ref[n] = ce_loss(n);
    expect_close("crossentropy fwd losses", losses, ref, CN, FWD_TOL);
    for (int n = 0; n < CN; n++)
        for (int v = CV; v < CVp; v++) assert_true(probs[n * CVp + v] == 0.0f);
    FtOpCall lm = {.in = {losses}, .out = {&loss}, .d = {CN}};
    ops_desc(FT_OP_LOSSMEAN)->fwd(&lm);
    double mref = 0;
    for (int n = 0; n < CN; n++) mref += ref[n] / CN;
    assert_true(fabs(loss - mref) <= 1e-6 * fabs(mref));
    FtOpCall b = {.in = {probs, ce_t}, .out = {dl}, .d = {CN, CV, CVp}, .x = {CE_S}};
    op->bwd(&b);
    g_obj = ce_obj;
    fd_check("crossentropy bwd dlogits", ce_l, CN * CVp, dl); /* padding: FD 0, analytic 0 */
    size_t ob[] = {sizeof(float) * CN * CVp, sizeof(float) * CN};
    expect_deterministic(op->fwd, &f, ob, 2);
    expect_deterministic(op->bwd, &b, ob, 1);
    free(l), free(probs), free(losses), free(dl), free(ce_l);
}

/* ---- optimizer kernels ---------------------------------------------------------------------- */

static void test_gradnorm_adamw(void **state)
{
    (void)state;
    size_t n = 3 * FT_OPS_CHUNK + 17;
    float *g = frand(n, 1);
    double ss = 0, ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
    FtOpCall c = {.in = {g}, .out = {&ss}, .d = {(long long)n}};
    ops_desc(FT_OP_GRADNORM)->fwd(&c);
    assert_true(fabs(ss - ref) <= 1e-12 * ref);
    size_t ob[] = {sizeof(double)};
    expect_deterministic(ops_desc(FT_OP_GRADNORM)->fwd, &c, ob, 1);
    double s1 = ss;
    omp_set_num_threads(1); /* fixed chunks: the same bytes on 1 thread too */
    ops_desc(FT_OP_GRADNORM)->fwd(&c);
    assert_memory_equal(&s1, &ss, sizeof ss);

    /* AdamW: two steps against the double formula */
    size_t m = 1000;
    float *p = frand(m, 1), *mo = fzeros(m), *v = fzeros(m), *gg = frand(m, 1);
    double *pd = to_d(p, m), *md = calloc(m, sizeof(double)), *vd = calloc(m, sizeof(double));
    double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    float *p2 = fzeros(m), *mo2 = fzeros(m), *v2 = fzeros(m), *t_;
    for (int t = 1; t <= 2; t++) {
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        FtOpCall a = {.in = {gg, p, mo, v}, .out = {p2, mo2, v2}, .d = {(long long)m},
                      .x = {lr, b1, b2, eps, wd, bc1, bc2, gs}};
        ops_desc(FT_OP_ADAMW)->fwd(&a);
        size_t ab[] = {sizeof(float) * m, sizeof(float) * m, sizeof(float) * m};
        expect_deterministic(ops_desc(FT_OP_ADAMW)->fwd, &a, ab, 3); /* inputs untouched */
        t_ = p, p = p2, p2 = t_; /* the new state becomes current */
        t_ = mo, mo = mo2, mo2 = t_;
        t_ = v, v = v2, v2 = t_;
        for (size_t i = 0; i < m; i++) {
            double gi = gg[i] * gs;
            md[i] = b1 * md[i] + (1 - b1) * gi;
            vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
            pd[i] -= lr * (md[i] / bc1 / (sqrt(vd[i] / bc2) + eps) + wd * pd[i]);
        }
    }
    expect_close("adamw 2 steps params", p, pd, m, FWD_TOL);
    /* the vector body and the scalar tail give the same bits: 1 thread vs 3 threads moves
     * the split points (and so which elements take which path) */
    float *q[2];
    for (int k = 0; k < 2; k++) {
        float *pp = frand(m, 1), *mm = frand(m, 0.1f), *vv = frand(m, 0.1f);
        for (size_t i = 0; i < m; i++) vv[i] = fabsf(vv[i]);
        g_rng -= 3 * m * 0x9E3779B97F4A7C15ull; /* same inputs both times */
        omp_set_num_threads(k ? 3 : 1);
        float *np = fzeros(m), *nm = fzeros(m), *nv = fzeros(m);
        FtOpCall a = {.in = {gg, pp, mm, vv}, .out = {np, nm, nv}, .d = {(long long)m},
                      .x = {lr, b1, b2, eps, wd, 0.5, 0.25, gs}};
        ops_desc(FT_OP_ADAMW)->fwd(&a);
        q[k] = np;
        free(pp), free(mm), free(vv), free(nm), free(nv);
    }
    omp_set_num_threads(1);
    assert_memory_equal(q[0], q[1], sizeof(float) * m);
    free(q[0]), free(q[1]);
    free(g), free(p), free(mo), free(v), free(gg), free(pd), free(md), free(vd), free(p2),
        free(mo2), free(v2);
}

/* Every kind reports positive FLOPs and bytes for a real call, and has a name. */
static void test_table(void **state)
{
    (void)state;
    ops_cpu_set_parallel_min(0); /* every kernel threaded, even on these tiny shapes */
    for (int k = 0; k < FT_OP_NKINDS; k++) {
        const FtOpDesc *d = ops_desc((FtOpKind)k);
        assert_non_null(d->name);
        assert_non_null(d->fwd);
        FtOpCall c = {.d = {4, 8, 16, 2}};
        if (k == FT_OP_MARK) continue;
        assert_true(d->flops(&c, FT_FWD) > 0);
        assert_true(d->bytes(&c, FT_FWD) > 0);
        if (d->bwd && k != FT_OP_RESIDUAL) assert_true(d->flops(&c, FT_BWD) > 0);
    }
    assert_true(ops_desc(FT_OP_RESIDUAL)->flops(&(FtOpCall){.d = {1000}}, FT_FWD) == 1000);
    assert_true(ops_desc(FT_OP_RESIDUAL)->flops(&(FtOpCall){.d = {1000}}, FT_BWD) == 0);
    FtOpCall mm = {.d = {256, 768, 2304}};
    assert_true(ops_desc(FT_OP_MATMUL)->flops(&mm, FT_FWD) == 2.0 * 256 * 768 * 2304);
}

/* Every output is written completely (ops.h), so a call moves at least its outputs' bytes:
 * each kind's bytes figure is at least that, forward and backward, on GPT-2 124M's shapes (B 4,
 * T 1024, C 768, NH 12, Vp 50304) and a MoE layer of 8 experts, top 2. And the FLOPs by
 * direction: a backward that computes input and weight gradients through the forward's products
 * costs at least the forward (a GEMM's dx and dw each cost its forward); crossentropy's and the
 * router's forwards (max, exp, sum, log; top-k) cost more than their backwards (probabilities
 * minus a one-hot, scaled). */
static void test_traffic(void **state)
{
    (void)state;
    static char any; /* the cost functions read only whether an optional tensor is given */
    void *y = &any;
    const long long B = 4, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304, N = B * T, E = 8,
                    K = 2, n = 124000000, R = N * K;
    struct {
        FtOpKind k;
        FtOpDir dir;
        FtOpCall c;
        double out; /* elements of 4 bytes the call writes */
    } cases[] = {
        {FT_OP_ENCODER, FT_FWD, {.d = {B, T, C}}, (double)N * C},
        {FT_OP_ENCODER, FT_BWD, {.d = {B, T, C}, .x = {Vp, T}}, (double)(Vp + T) * C},
        {FT_OP_ENCODER, FT_BWD, {.in = {[4] = y, [5] = y}, .d = {B, T, C}, .x = {Vp, T}},
         (double)(Vp + T) * C},
        {FT_OP_LAYERNORM, FT_FWD, {.d = {N, C}}, (double)N * C + 2 * N},
        {FT_OP_LAYERNORM, FT_BWD, {.d = {N, C}}, (double)N * C + 2 * C},
        {FT_OP_MATMUL, FT_FWD, {.d = {N, C, 4 * C}}, (double)N * 4 * C},
        {FT_OP_MATMUL, FT_BWD, {.out = {y, y, y}, .d = {N, C, 4 * C}},
         (double)N * C + 4.0 * C * C + 4 * C},
        {FT_OP_MATMUL, FT_BWD, {.out = {NULL, y, y}, .d = {N, C, 4 * C}}, 4.0 * C * C + 4 * C},
        {FT_OP_MATMUL, FT_BWD, {.out = {y}, .d = {N, C, 4 * C}}, (double)N * C},
        {FT_OP_ATTENTION, FT_FWD, {.d = {B, T, C, NH}}, (double)N * C + B * NH * T},
        {FT_OP_ATTENTION, FT_BWD, {.d = {B, T, C, NH}}, 3.0 * N * C},
        {FT_OP_GELU, FT_FWD, {.d = {N * 4 * C}}, 4.0 * N * C},
        {FT_OP_GELU, FT_BWD, {.d = {N * 4 * C}}, 4.0 * N * C},
        {FT_OP_RESIDUAL, FT_FWD, {.d = {N * C}}, (double)N * C},
        {FT_OP_RESIDUAL, FT_BWD, {.d = {N * C}}, 2.0 * N * C},
        {FT_OP_CROSSENT, FT_FWD, {.d = {N, V, Vp}}, (double)N * Vp + N},
        {FT_OP_CROSSENT, FT_BWD, {.d = {N, V, Vp}}, (double)N * Vp},
        {FT_OP_LOSSMEAN, FT_FWD, {.d = {N}}, 1},
        {FT_OP_GRADNORM, FT_FWD, {.d = {n}}, 2}, /* one double */
        {FT_OP_ADAMW, FT_FWD, {.d = {n}}, 3.0 * n},
        {FT_OP_MOE_ROUTE, FT_FWD, {.d = {N, E, K, R / E}}, (double)N * E + 3.0 * N * K + 1},
        {FT_OP_MOE_ROUTE, FT_BWD, {.d = {N, E, K}}, (double)N * E},
        {FT_OP_MOE_DISPATCH, FT_FWD, {.d = {N, C, K, E}}, (double)R * C + E},
        {FT_OP_MOE_DISPATCH, FT_BWD, {.d = {N, C, K, E}}, (double)N * C},
        {FT_OP_MOE_EXPERT, FT_FWD, {.d = {R, C, 4 * C, E}, .x = {1, R}}, (double)R * 4 * C},
        {FT_OP_MOE_EXPERT, FT_BWD, {.out = {y, y, y}, .d = {R, C, 4 * C, E}, .x = {1, R}},
         (double)R * C + E * 4.0 * C * C + E * 4 * C},
        {FT_OP_MOE_COMBINE, FT_FWD, {.d = {N, C, K}}, (double)N * C},
        {FT_OP_MOE_COMBINE, FT_BWD, {.d = {N, C, K}}, (double)R * C + N * K},
    };
    int covered[FT_OP_NKINDS][2] = {{0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const FtOpDesc *d = ops_desc(cases[i].k);
        const FtOpCall *c = &cases[i].c;
        FtOpDir dir = cases[i].dir;
        double b = d->bytes(c, dir);
        if (!(b >= 4 * cases[i].out))
            fail_msg("%s.%s (case %zu): %.4g bytes moved, less than the %.4g its outputs take",
                     d->name, dir ? "bwd" : "fwd", i, b, 4 * cases[i].out);
        covered[cases[i].k][dir] = 1;
        if (dir == FT_BWD) { /* the directions' order */
            double f = d->flops(c, FT_FWD), bk = d->flops(c, FT_BWD);
            if (cases[i].k == FT_OP_CROSSENT || cases[i].k == FT_OP_MOE_ROUTE) assert_true(bk < f);
            else if (cases[i].k != FT_OP_RESIDUAL) assert_true(bk >= f);
        }
        /* FLOPs are linear in the rows (d[0]: N, B or n) for every kind and direction, and the
         * MoE data movers' in each of their dimensions (rows, channels, top-k) */
        FtOpCall lin = *c;
        if (cases[i].k == FT_OP_MOE_EXPERT) lin.x[1] = 0; /* its rows from d[0] */
        int dims = cases[i].k == FT_OP_MOE_DISPATCH || cases[i].k == FT_OP_MOE_COMBINE ? 3 : 1;
        double f1 = d->flops(&lin, dir);
        for (int k = 0; k < dims; k++) {
            FtOpCall c2 = lin;
            c2.d[k] *= 2;
            double f2 = d->flops(&c2, dir);
            if (f2 != 2 * f1)
                fail_msg("%s.%s (case %zu): FLOPs %.6g with d[%d] doubled, %.6g before", d->name,
                         dir ? "bwd" : "fwd", i, f2, k, f1);
        }
    }
    /* the tied LM head folded into the encoder's backward (cases 1 and 2: without and with it)
     * reads dlogits (N, Vp) and the final LayerNorm's output (N, C) once each, and its dW =
     * dlogits^T lnf is 2 N C Vp FLOPs: exactly that much more than the backward without it */
    const FtOpDesc *enc = ops_desc(FT_OP_ENCODER);
    assert_true(cases[1].k == FT_OP_ENCODER && cases[2].k == FT_OP_ENCODER && cases[2].c.in[4]);
    double head_b = enc->bytes(&cases[2].c, FT_BWD) - enc->bytes(&cases[1].c, FT_BWD);
    double head_f = enc->flops(&cases[2].c, FT_BWD) - enc->flops(&cases[1].c, FT_BWD);
    if (head_b != 4.0 * N * (Vp + C) || head_f != 2.0 * N * C * Vp)
        fail_msg("encoder.bwd's tied head: %.6g bytes and %.6g FLOPs more, want %.6g and %.6g",
                 head_b, head_f, 4.0 * N * (Vp + C), 2.0 * N * C * Vp);
    for (int k = 0; k < FT_OP_NKINDS; k++) { /* every kind and direction has a case */
        if (k == FT_OP_MARK) continue;
        if (!covered[k][FT_FWD] || (ops_desc(k)->bwd && !covered[k][FT_BWD]))
            fail_msg("%s: no traffic case", ops_desc(k)->name);
    }
    /* the GEMM, the step's bulk, exactly: each operand it reads and each output it writes
     * once (no bias: a bias's OC values are left out of the figure); its backward's FLOPs are
     * its forward's once for each of dx and dw */
    const FtOpDesc *mm = ops_desc(FT_OP_MATMUL);
    const double M = (double)N, Cd = (double)C, O = 4.0 * C;
    struct {
        FtOpCall c;
        FtOpDir dir;
        double io, times_fwd;
    } gemm[] = {
        {{.d = {N, C, 4 * C}}, FT_FWD, M * Cd + O * Cd + M * O, 1},                 /* x, w; y */
        {{.out = {y, y}, .d = {N, C, 4 * C}}, FT_BWD, M * O + M * Cd + 2 * O * Cd + M * Cd + O * Cd,
         2},
        {{.out = {NULL, y}, .d = {N, C, 4 * C}}, FT_BWD, M * O + M * Cd + 2 * O * Cd, 1}, /* dy x prev; dw */
        {{.out = {y}, .d = {N, C, 4 * C}}, FT_BWD, M * O + O * Cd + M * Cd, 1},           /* dy w; dx */
    };
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++) {
        double b = mm->bytes(&gemm[i].c, gemm[i].dir);
        if (!(b >= 4 * gemm[i].io))
            fail_msg("matmul case %zu: %.4g bytes, less than its operands and outputs' %.4g", i, b,
                     4 * gemm[i].io);
        assert_true(mm->flops(&gemm[i].c, gemm[i].dir) ==
                    gemm[i].times_fwd * mm->flops(&gemm[i].c, FT_FWD));
    }
}

/* ops_cpu_set_gemm_bf16: MATMUL's operands rounded to the nearest bf16, ties to even (the
 * stand-in device's run.precision = bf16, as CUDA's __float2bfloat16_rn): x = 1 + 2^-8 is
 * halfway between the bf16 values 1 and 1 + 2^-7 and goes to 1 (even); 1 + 3 2^-8 is halfway
 * between 1 + 2^-7 and 1 + 2^-6 and goes to 1 + 2^-6 (even); 1 + 2^-8 + 2^-20 is above half
 * and goes up; -(1 + 2^-8) to -1; a NaN stays NaN; the bias is added in fp32, unrounded; the
 * weights are rounded too (1 + 2^-8 + 2^-20 to 1 + 2^-7). Off again: the fp32 product. */
static void test_gemm_bf16(void **state)
{
    (void)state;
    float x[5] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -(1.0f + 0x1p-8f),
                  NAN};
    /* output column 1: a weight that rounds up to 1 + 2^-7, no bias (the other operand too) */
    float w[2] = {1.0f, 1.0f + 0x1p-8f + 0x1p-20f}, b[2] = {0x1p-12f, 0.0f}, y[10];
    float rx[4] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -1.0f}; /* x rounded */
    FtOpCall c = {.in = {x, w, b}, .out = {y}, .d = {5, 1, 2}};
    ops_cpu_set_gemm_bf16(true);
    ops_cpu_table()[FT_OP_MATMUL].fwd(&c);
    ops_cpu_set_gemm_bf16(false);
    for (int i = 0; i < 4; i++) {
        assert_true(y[2 * i] == rx[i] + 0x1p-12f);
        assert_true(y[2 * i + 1] == rx[i] * (1.0f + 0x1p-7f)); /* exact in fp32 */
    }
    assert_true(isnan(y[8]) && isnan(y[9]));
    ops_cpu_table()[FT_OP_MATMUL].fwd(&c);
    for (int i = 0; i < 4; i++)
        assert_true(y[2 * i] == x[i] + 0x1p-12f && y[2 * i + 1] == x[i] * w[1]);
}

FT_TEST_MAIN(cmocka_unit_test(test_table), cmocka_unit_test(test_traffic), cmocka_unit_test(test_encoder),
             cmocka_unit_test(test_layernorm), cmocka_unit_test(test_matmul),
             cmocka_unit_test(test_matmul_twin), cmocka_unit_test(test_attention),
             cmocka_unit_test(test_attention_twin), cmocka_unit_test(test_attention_causal),
             cmocka_unit_test(test_gelu), cmocka_unit_test(test_gelu_grid),
             cmocka_unit_test(test_residual),
             cmocka_unit_test(test_crossentropy), cmocka_unit_test(test_gradnorm_adamw),
             cmocka_unit_test(test_gemm_bf16))

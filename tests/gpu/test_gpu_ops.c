/* test_gpu_ops.c: every op kind of the CUDA backend against the CPU backend (the reference) on
 * random inputs, each CUDA op run twice into outputs pre-filled with two different byte
 * patterns, and a third time on DMR's checker stream (its own cuBLAS handle and workspace) into
 * a third pattern: the three results must be the same bytes (bitwise determinism, every output
 * byte written from the inputs alone, ops.h, and a checker that reproduces the primary).
 * Also the backend's alloc: zeroed memory (backend.h), a released buffer's bytes never seen.
 * Where no GPU is usable (CI, the build machine) every
 * test skips with one line saying why.
 * ft-test: ranks 1
 *
 * These tolerances are reasoned, not yet measured: the author had no GPU. Relative L2 error per
 * output tensor, |gpu - cpu| / |cpu|; int outputs must be equal; 0 means the same bytes.
 *   0      encoder fwd, residual, dispatch fwd: a single IEEE add or a copy, nothing to reorder
 *   1e-6   elementwise ops and row ops whose kernels follow the CPU's operation order (GELU,
 *          AdamW, cross-entropy, MoE route/dispatch/combine, LayerNorm fwd and dx, encoder bwd,
 *          the loss mean): expected to match to the bit; double-precision row sums in another
 *          order may move a float by one ulp
 *   1e-5   cuBLAS GEMMs against OpenBLAS (fp32 sums of <= 300 terms in another order), column
 *          sums in chunks (LayerNorm dw/db, bias gradients), attention forward (CUDA's expf is
 *          within 2 ulp of glibc's)
 *   1e-4   attention backward (att (datt - sum att datt) cancels; fp32 order differences in
 *          small entries grow relative to them)
 *   1e-10  the gradient norm (doubles over 1.4e5 terms summed in another tree)
 * A wrong formula or index gives errors of order 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ft_test.h"
#include "gpu_skip.h"
#include "ftllm/backend.h"
#include "ftllm/deck_keys.h"
#include "ftllm/exec.h"
#include "ftllm/ops.h"

typedef enum { F32, I32, F64 } Ty;
typedef struct buf {
    Ty ty;
    size_t n;   /* elements; 0: the argument is NULL */
    void *host; /* inputs: the data; outputs: unused */
} Buf;

typedef struct op_case {
    const char *name;
    FtOpKind kind;
    FtOpDir dir;
    Buf in[FT_OP_MAX_IN], out[FT_OP_MAX_OUT];
    long long d[FT_OP_MAX_DIMS];
    double x[FT_OP_MAX_X];
    double tol[FT_OP_MAX_OUT];
} OpCase;

static int g_covered[FT_OP_NKINDS][2];

/* ---- inputs --------------------------------------------------------------------------------- */

static unsigned long long g_rng = 20240520;
static double urand(void)
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static size_t ty_size(Ty t) { return t == F32 ? 4 : t == I32 ? 4 : 8; }
static Buf frand(size_t n, float scale)
{
    float *a = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) a[i] = (float)((2 * urand() - 1) * scale);
    return (Buf){F32, n, a};
}
static Buf fpos(size_t n) /* positive, for second moments */
{
    float *a = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) a[i] = (float)(urand() * 1e-3);
    return (Buf){F32, n, a};
}
static Buf irand(size_t n, int mod)
{
    int *a = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) a[i] = (int)(urand() * mod);
    return (Buf){I32, n, a};
}
static Buf copy_of(Ty t, const void *p, size_t n)
{
    void *a = malloc(ty_size(t) * n);
    memcpy(a, p, ty_size(t) * n);
    return (Buf){t, n, a};
}
static Buf out_f(size_t n) { return (Buf){F32, n, NULL}; }
static Buf out_i(size_t n) { return (Buf){I32, n, NULL}; }
static Buf out_d(size_t n) { return (Buf){F64, n, NULL}; }

/* The CPU outputs of a call (for inputs that must be consistent: LayerNorm statistics, the
 * attention matrix, routing); the caller frees them. */
static void cpu_run(FtOpKind kind, FtOpDir dir, const Buf *in, const Buf *out, const long long *d,
                    const double *x, void **res)
{
    FtOpCall c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < FT_OP_MAX_IN; i++) c.in[i] = in[i].n ? in[i].host : NULL;
    for (int i = 0; i < FT_OP_MAX_OUT; i++) {
        res[i] = out[i].n ? calloc(out[i].n, ty_size(out[i].ty)) : NULL;
        c.out[i] = res[i];
    }
    memcpy(c.d, d, sizeof c.d);
    memcpy(c.x, x, sizeof c.x);
    const FtOpDesc *op = &ops_cpu_table()[kind];
    (dir == FT_FWD ? op->fwd : op->bwd)(&c);
}

/* ---- one case: CPU once, GPU twice, compare -------------------------------------------------- */

static double rel_err(Ty t, const void *a, const void *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double u = t == F32 ? ((const float *)a)[i] : ((const double *)a)[i];
        double r = t == F32 ? ((const float *)ref)[i] : ((const double *)ref)[i];
        num += (u - r) * (u - r);
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* floor (NULL: none): per output, the least error allowed (bf16 GEMM outputs: the bf16 path
 * ran, not fp32) */
static void run_case_floor(OpCase *k, const double *floor)
{
    const FtBackend *be = gpu();
    void *ref[FT_OP_MAX_OUT], *got[3][FT_OP_MAX_OUT] = {{0}}, *din[FT_OP_MAX_IN] = {0};
    void *dout[3][FT_OP_MAX_OUT] = {{0}};
    cpu_run(k->kind, k->dir, k->in, k->out, k->d, k->x, ref);
    for (int i = 0; i < FT_OP_MAX_IN; i++) {
        if (!k->in[i].n) continue;
        size_t bytes = ty_size(k->in[i].ty) * k->in[i].n;
        din[i] = backend_alloc(be, bytes, "a test input");
        be->to_device(be->ctx, din[i], k->in[i].host, bytes);
    }
    /* NaN, then 1.5e16, then -2.9e-16: unwritten bytes show; the third run is DMR's checker's
     * (backend.h checker_run: the second stream with its own cuBLAS handle and workspace) */
    static const int fill[3] = {0xFF, 0x5A, 0xA5};
    const FtOpDesc *od = &be->ops[k->kind];
    for (int r = 0; r < 3; r++) {
        FtOpCall c;
        memset(&c, 0, sizeof c);
        for (int i = 0; i < FT_OP_MAX_IN; i++) c.in[i] = din[i];
        for (int i = 0; i < FT_OP_MAX_OUT; i++) {
            if (!k->out[i].n) continue;
            size_t bytes = ty_size(k->out[i].ty) * k->out[i].n;
            dout[r][i] = backend_alloc(be, bytes, "a test output");
            be->set(be->ctx, dout[r][i], fill[r], bytes);
            c.out[i] = dout[r][i];
        }
        memcpy(c.d, k->d, sizeof c.d);
        memcpy(c.x, k->x, sizeof c.x);
        if (r < 2) exec_op_on(be, k->kind, k->dir, &c, NULL);
        else be->checker_run(be->ctx, k->dir == FT_FWD ? od->fwd : od->bwd, &c);
        be->sync(be->ctx);
        for (int i = 0; i < FT_OP_MAX_OUT; i++) {
            if (!k->out[i].n) continue;
            size_t bytes = ty_size(k->out[i].ty) * k->out[i].n;
            got[r][i] = malloc(bytes);
            be->to_host(be->ctx, got[r][i], dout[r][i], bytes);
        }
    }
    g_covered[k->kind][k->dir] = 1;
    int bad = 0;
    for (int i = 0; i < FT_OP_MAX_OUT; i++) {
        if (!k->out[i].n) continue;
        Ty t = k->out[i].ty;
        size_t bytes = ty_size(t) * k->out[i].n;
        int twice = !memcmp(got[0][i], got[1][i], bytes), same = !memcmp(got[0][i], ref[i], bytes);
        int checker = !memcmp(got[0][i], got[2][i], bytes);
        double e = t == I32 ? (same ? 0.0 : 1.0) : rel_err(t, got[0][i], ref[i], k->out[i].n);
        int ok = twice && checker && (t == I32 || k->tol[i] == 0 ? same : e <= k->tol[i]) &&
                 (!floor || e >= floor[i]);
        printf("  %-24s out[%d] rel err %.2e (tol %.0e)%s%s%s\n", k->name, i, e, k->tol[i],
               same ? ", the CPU's bytes" : "",
               twice ? ", same bytes twice" : ", DIFFERS RUN TO RUN",
               checker ? " and on the checker stream" : ", DIFFERS ON THE CHECKER STREAM");
        bad += !ok;
    }
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < FT_OP_MAX_OUT; i++) {
            free(got[r][i]);
            if (dout[r][i]) be->release(be->ctx, dout[r][i]);
        }
    for (int i = 0; i < FT_OP_MAX_OUT; i++) free(ref[i]);
    for (int i = 0; i < FT_OP_MAX_IN; i++) {
        if (din[i]) be->release(be->ctx, din[i]);
        free(k->in[i].host);
    }
    if (bad) fail_msg("%s: %d output(s) off (see the lines above)", k->name, bad);
}

static void run_case(OpCase *k) { run_case_floor(k, NULL); }

/* ---- the cases ------------------------------------------------------------------------------ */

enum { B = 3, T = 17, C = 48, NH = 4, V = 61, VP = 64, MAXT = 20, OC = 40, N = B * T };

static void test_encoder(void **s)
{
    (void)s;
    gpu();
    OpCase f = {"encoder.fwd", FT_OP_ENCODER, FT_FWD,
                {irand(N, V), frand(VP * C, 1), frand(MAXT * C, 1)}, {out_f(N * C)},
                {B, T, C}, {0}, {0}};
    run_case(&f);
    OpCase b = {"encoder.bwd", FT_OP_ENCODER, FT_BWD,
                {frand(N * C, 1), irand(N, 7), frand(VP * C, 1), frand(MAXT * C, 1)},
                {out_f(VP * C), out_f(MAXT * C)}, {B, T, C}, {VP, MAXT}, {1e-6, 1e-6}};
    run_case(&b);
}

static void layernorm_case(const char *name, long long rows, long long cols)
{
    size_t n = (size_t)(rows * cols);
    Buf x = frand(n, 2), w = frand((size_t)cols, 1), bias = frand((size_t)cols, 1);
    OpCase f = {name, FT_OP_LAYERNORM, FT_FWD,
                {copy_of(F32, x.host, n), copy_of(F32, w.host, cols), bias},
                {out_f(n), out_f(rows), out_f(rows)}, {rows, cols}, {0}, {1e-6, 1e-6, 1e-6}};
    void *st[FT_OP_MAX_OUT];
    cpu_run(FT_OP_LAYERNORM, FT_FWD, f.in, f.out, f.d, f.x, st);
    run_case(&f);
    OpCase b = {name, FT_OP_LAYERNORM, FT_BWD,
                {frand(n, 1), x, w, copy_of(F32, st[1], rows), copy_of(F32, st[2], rows),
                 frand(n, 1), frand(cols, 1), frand(cols, 1)},
                {out_f(n), out_f(cols), out_f(cols)}, {rows, cols}, {0}, {1e-6, 1e-5, 1e-5}};
    for (int i = 0; i < 3; i++) free(st[i]);
    run_case(&b);
}

static void test_layernorm(void **s)
{
    (void)s;
    gpu();
    layernorm_case("layernorm", N, C);
    layernorm_case("layernorm wide", 40, 770);
    layernorm_case("layernorm 13 rows", 13, 100); /* a last block of rows that is not full */
}

/* gt: the GEMM outputs' tolerance, gf their floor (bf16); the bias gradient is a column sum */
static void matmul_case_tol(const char *name, long long n, long long c, long long oc,
                            int with_prev, double gt, double gf)
{
    size_t nc = (size_t)(n * c), noc = (size_t)(n * oc), occ = (size_t)(oc * c);
    OpCase f = {name, FT_OP_MATMUL, FT_FWD, {frand(nc, 1), frand(occ, 1), frand(oc, 1)},
                {out_f(noc)}, {n, c, oc}, {0}, {gt}};
    run_case_floor(&f, (const double[FT_OP_MAX_OUT]){gf});
    OpCase b = {name, FT_OP_MATMUL, FT_BWD,
                {frand(noc, 1), frand(nc, 1), frand(occ, 1), with_prev ? frand(occ, 1) : (Buf){0},
                 with_prev ? frand(oc, 1) : (Buf){0}},
                {with_prev ? out_f(nc) : (Buf){0}, out_f(occ), out_f(oc)}, {n, c, oc}, {0},
                {gt, gt, 1e-5}};
    run_case_floor(&b, (const double[FT_OP_MAX_OUT]){with_prev ? gf : 0, gf, 0});
}

static void matmul_case(const char *name, long long n, long long c, long long oc, int with_prev)
{
    matmul_case_tol(name, n, c, oc, with_prev, 1e-5, 0);
}

static void test_matmul(void **s)
{
    (void)s;
    gpu();
    matmul_case("matmul", N, C, OC, 1);
    matmul_case("matmul no dx/prev", N, C, OC, 0);
    matmul_case("matmul 300x192x160", 300, 192, 160, 1);
    /* dx only (ops.h: dw and db NULL, the tied LM head's call; mutant K34 of
     * tests/mutants/cuda_kernels.md, which skipped it, was caught by test_gpu_train alone) */
    size_t nc = (size_t)(N * C), noc = (size_t)(N * OC), occ = (size_t)(OC * C);
    OpCase dxo = {"matmul dx only", FT_OP_MATMUL, FT_BWD,
                  {frand(noc, 1), frand(nc, 1), frand(occ, 1)}, {out_f(nc)}, {N, C, OC}, {0},
                  {1e-5}};
    run_case(&dxo);
}

/* One shape: y and lse, then dqkv from the CPU's lse (bwd NULL: not); tolerances ty (y, lse)
 * and tb (dqkv), and floors (NULL: none) as run_case_floor's. */
static void attention_case_qkv(const char *fwd, const char *bwd, long long b_, long long t_,
                               long long c_, long long nh, Buf qkv, double ty, double tb,
                               const double *ffloor, const double *bfloor)
{
    size_t nq = (size_t)(b_ * t_ * 3 * c_), ny = (size_t)(b_ * t_ * c_), na = (size_t)(b_ * nh * t_);
    OpCase f = {fwd, FT_OP_ATTENTION, FT_FWD, {copy_of(F32, qkv.host, nq)},
                {out_f(ny), out_f(na)}, {b_, t_, c_, nh}, {0}, {ty, ty}};
    void *r[FT_OP_MAX_OUT];
    cpu_run(FT_OP_ATTENTION, FT_FWD, f.in, f.out, f.d, f.x, r);
    run_case_floor(&f, ffloor);
    if (!bwd) { /* forward only */
        free(r[0]), free(r[1]), free(qkv.host);
        return;
    }
    OpCase b = {bwd, FT_OP_ATTENTION, FT_BWD, {frand(ny, 1), qkv, copy_of(F32, r[1], na)},
                {out_f(nq)}, {b_, t_, c_, nh}, {0}, {tb}};
    free(r[0]), free(r[1]);
    run_case_floor(&b, bfloor);
}

static void attention_case_tol(const char *fwd, const char *bwd, long long b_, long long t_,
                               long long c_, long long nh, double ty, double tb,
                               const double *ffloor, const double *bfloor)
{
    attention_case_qkv(fwd, bwd, b_, t_, c_, nh, frand((size_t)(b_ * t_ * 3 * c_), 1), ty, tb,
                       ffloor, bfloor);
}

static void attention_case(const char *fwd, const char *bwd, long long b_, long long t_,
                           long long c_, long long nh)
{
    attention_case_tol(fwd, bwd, b_, t_, c_, nh, 1e-5, 1e-4, NULL, NULL);
}

/* The masked-hot-key shape and its qkv (test_attention says why): each head's last key is 300
 * times its first query. */
enum { HB = 1, HT = 70, HC = 96, HNH = 3, HHS = HC / HNH };
static Buf hot_key_qkv(void)
{
    Buf hot = frand(HB * HT * 3 * HC, 1);
    float *h = hot.host;
    for (int hd = 0; hd < HNH; hd++)
        for (int i = 0; i < HHS; i++)
            h[(HT - 1) * 3 * HC + HC + hd * HHS + i] = 300.0f * h[hd * HHS + i];
    return hot;
}

/* Head size 12 (the per-row kernels always, or the batched GEMMs under
 * FTLLM_CUDA_ATTENTION=gemm), then 64 and 32 over several tiles of 64 rows with a partial last
 * one (the tiled kernels under FTLLM_CUDA_ATTENTION=flash, perf/gpu/run.sh). */
static void test_attention(void **s)
{
    (void)s;
    gpu();
    attention_case("attention.fwd", "attention.bwd", B, T, C, NH);
    attention_case("attention.fwd hs64 T150", "attention.bwd hs64 T150", 2, 150, 128, 2);
    attention_case("attention.fwd hs32 T70", "attention.bwd hs32 T70", 1, 70, 96, 3);
    /* a masked key far above the rest: each head's last key is 300 times its first query, so
     * row 0's score against it (masked, t2 > t) is about 300 |q_0|^2 / sqrt(32), hundreds, while
     * the causal scores are of order 1: a softmax whose maximum ran over the masked part too
     * would underflow every exp of row 0 (mutant K22 of tests/mutants/cuda_kernels.md).
     * Forward only: the backward's dq of the last row multiplies that key, and its error
     * relative to the rest (6.6e-4 on the emulator) is the key's size, not the kernels' */
    attention_case_qkv("attention.fwd masked hot key", NULL, HB, HT, HC, HNH, hot_key_qkv(), 1e-5,
                       1e-4, NULL, NULL);
}

#ifdef FTLLM_CUDA_EMU
long ftemu_launch_count(const char *prefix); /* cuda/emu/emu_runtime.cc */
#endif

/* FTLLM_CUDA_ATTENTION=tc under bf16: the tensor-core tiled kernels (cuda/ops_attention_tc.cu)
 * against the CPU's fp32 op, with the batched-GEMM path's tolerances and floors (test_bf16_gemms
 * says why): they round the same operands to bf16. Head size 64 over three tiles with a partial
 * last one (the diagonal tile of each block, the rows past T), 32 with three heads, 16, one row
 * (T = 1: a block that is nearly all padding), two tiles exactly (T = 128), and the masked hot
 * key of test_attention (forward only: a softmax whose maximum ran over masked keys underflows
 * row 0). On the emulator the kernels must have run: a tc that fell back to the GEMMs would pass
 * the same tolerances. */
static void attention_tc_cases(void)
{
    const double yf[FT_OP_MAX_OUT] = {1e-4, 0}, bf[FT_OP_MAX_OUT] = {1e-4};
#ifdef FTLLM_CUDA_EMU
    long f0 = ftemu_launch_count("tc_fwd_kernel"), d0 = ftemu_launch_count("tc_dkv_kernel");
#endif
    attention_case_tol("attention.fwd tc hs64 T150", "attention.bwd tc hs64 T150", 2, 150, 128, 2,
                       1e-2, 3e-2, yf, bf);
    attention_case_tol("attention.fwd tc hs32 T70", "attention.bwd tc hs32 T70", 1, 70, 96, 3,
                       1e-2, 3e-2, yf, bf);
    attention_case_tol("attention.fwd tc hs16 T70", "attention.bwd tc hs16 T70", 2, 70, 64, 4,
                       1e-2, 3e-2, yf, bf);
    attention_case_tol("attention.fwd tc T1", "attention.bwd tc T1", 2, 1, 128, 2, 1e-2, 3e-2,
                       NULL, NULL); /* one key: y is v's row rounded, lse exact */
    attention_case_tol("attention.fwd tc T128", "attention.bwd tc T128", 1, 128, 64, 1, 1e-2,
                       3e-2, yf, bf);
    attention_case_qkv("attention.fwd tc masked hot key", NULL, HB, HT, HC, HNH, hot_key_qkv(),
                       1e-2, 0, yf, NULL);
#ifdef FTLLM_CUDA_EMU
    long nf = ftemu_launch_count("tc_fwd_kernel") - f0, nd = ftemu_launch_count("tc_dkv_kernel") - d0;
    printf("  tc kernels run: %ld forward, %ld dk/dv launches\n", nf, nd);
    assert_true(nf >= 6 && nd >= 5); /* each case twice and on the checker stream */
#endif
}

static void test_elementwise(void **s)
{
    (void)s;
    gpu();
    enum { M = 4099 };
    OpCase gf = {"gelu.fwd", FT_OP_GELU, FT_FWD, {frand(M, 4)}, {out_f(M)}, {M}, {0}, {1e-6}};
    run_case(&gf);
    OpCase gb = {"gelu.bwd", FT_OP_GELU, FT_BWD, {frand(M, 1), frand(M, 4)}, {out_f(M)}, {M},
                 {0}, {1e-6}};
    run_case(&gb);
    OpCase rf = {"residual.fwd", FT_OP_RESIDUAL, FT_FWD, {frand(M, 1), frand(M, 1)},
                 {out_f(M)}, {M}, {0}, {0}};
    run_case(&rf);
    OpCase rb = {"residual.bwd", FT_OP_RESIDUAL, FT_BWD, {frand(M, 1)}, {out_f(M), out_f(M)},
                 {M}, {0}, {0, 0}};
    run_case(&rb);
}

static void crossent_case(const char *name, long long rows, long long v, long long vp)
{
    size_t n = (size_t)(rows * vp);
    Buf tg = irand((size_t)rows, (int)v), lg = frand(n, 3);
    /* the padding's logits far above the real ones: the softmax (its maximum too) runs over
     * the first V columns only (mutant K04 of tests/mutants/cuda_kernels.md) */
    for (long long r = 0; r < rows; r++)
        for (long long j = v; j < vp; j++) ((float *)lg.host)[r * vp + j] = 100.0f;
    OpCase f = {name, FT_OP_CROSSENT, FT_FWD, {lg, copy_of(I32, tg.host, rows)},
                {out_f(n), out_f(rows)}, {rows, v, vp}, {0}, {1e-6, 1e-6}};
    void *r[FT_OP_MAX_OUT];
    cpu_run(FT_OP_CROSSENT, FT_FWD, f.in, f.out, f.d, f.x, r);
    run_case(&f);
    OpCase b = {name, FT_OP_CROSSENT, FT_BWD, {copy_of(F32, r[0], n), tg}, {out_f(n)},
                {rows, v, vp}, {1.0 / rows}, {1e-6}};
    OpCase m = {name, FT_OP_LOSSMEAN, FT_FWD, {copy_of(F32, r[1], rows)}, {out_f(1)}, {rows},
                {0}, {1e-6}};
    free(r[0]), free(r[1]);
    run_case(&b);
    run_case(&m);
}

/* The two forward kernels give the same bytes: the same logits at a 16-byte aligned address
 * (the row in shared memory) and one float past one (the backend falls back to three reads from
 * device memory: ops_loss.cu takes 16-byte pieces only from aligned rows). On the emulator
 * each must have run once. */
static void crossent_kernels_agree(long long rows, long long v, long long vp)
{
    const FtBackend *be = gpu();
    size_t n = (size_t)(rows * vp), lb = (n + 4) * sizeof(float), pb = n * sizeof(float);
    Buf lg = frand(n, 3), tg = irand((size_t)rows, (int)v);
    float *dl[2] = {backend_alloc(be, pb, "logits"), backend_alloc(be, lb, "logits")};
    int *dt = backend_alloc(be, (size_t)rows * sizeof(int), "targets");
    be->to_device(be->ctx, dl[0], lg.host, pb);
    be->to_device(be->ctx, dl[1] + 1, lg.host, pb); /* the same logits, 4 bytes off alignment */
    be->to_device(be->ctx, dt, tg.host, (size_t)rows * sizeof(int));
    void *got[2][2];
#ifdef FTLLM_CUDA_EMU
    long s0 = ftemu_launch_count("crossent_fwd_smem_kernel");
    long g0 = ftemu_launch_count("crossent_fwd_kernel");
#endif
    for (int k = 0; k < 2; k++) {
        FtOpCall c;
        memset(&c, 0, sizeof c);
        c.in[0] = dl[k] + k, c.in[1] = dt;
        c.out[0] = backend_alloc(be, pb, "probs");
        c.out[1] = backend_alloc(be, (size_t)rows * sizeof(float), "losses");
        c.d[0] = rows, c.d[1] = v, c.d[2] = vp;
        exec_op_on(be, FT_OP_CROSSENT, FT_FWD, &c, NULL);
        be->sync(be->ctx);
        got[k][0] = malloc(pb), got[k][1] = malloc((size_t)rows * sizeof(float));
        be->to_host(be->ctx, got[k][0], c.out[0], pb);
        be->to_host(be->ctx, got[k][1], c.out[1], (size_t)rows * sizeof(float));
        be->release(be->ctx, c.out[0]), be->release(be->ctx, c.out[1]);
    }
    int same = !memcmp(got[0][0], got[1][0], pb) &&
               !memcmp(got[0][1], got[1][1], (size_t)rows * sizeof(float));
    printf("  crossent V %lld: aligned and unaligned rows %s\n", v,
           same ? "the same bytes" : "DIFFER");
    assert_true(same);
#ifdef FTLLM_CUDA_EMU
    assert_int_equal(ftemu_launch_count("crossent_fwd_smem_kernel") - s0, 1);
    assert_int_equal(ftemu_launch_count("crossent_fwd_kernel") - g0, 1);
#endif
    for (int k = 0; k < 2; k++) free(got[k][0]), free(got[k][1]);
    be->release(be->ctx, dl[0]), be->release(be->ctx, dl[1]), be->release(be->ctx, dt);
    free(lg.host), free(tg.host);
}

/* Both forward kernels of cuda/ops_loss.cu: the row in shared memory where it fits (the small
 * cases, GPT-2's 50257 on an H100 or H200: 196 KiB), read three times from device memory where
 * it does not (60000 floats, 234 KiB, over the 227 KiB any current GPU lets a block take), an
 * odd V (a scalar tail after the 16-byte pieces). On the emulator each kernel must have run. */
static void test_crossent(void **s)
{
    (void)s;
    gpu();
#ifdef FTLLM_CUDA_EMU
    long s0 = ftemu_launch_count("crossent_fwd_smem_kernel");
    long g0 = ftemu_launch_count("crossent_fwd_kernel");
#endif
    crossent_case("crossent", N, V, VP);
    crossent_case("crossent V 1000", 9, 1000, 1024);
    crossent_case("crossent V 1002", 3, 1002, 1008);
    crossent_case("crossent V 50257", 2, 50257, 50304);
#ifdef FTLLM_CUDA_EMU
    long ns = ftemu_launch_count("crossent_fwd_smem_kernel") - s0;
    long ng0 = ftemu_launch_count("crossent_fwd_kernel") - g0;
#endif
    crossent_case("crossent V 60000", 2, 60000, 60032);
    crossent_kernels_agree(5, 1003, 1008); /* V % 4 = 3: the last piece ends in the padding */
    crossent_kernels_agree(2, 50257, 50304);
#ifdef FTLLM_CUDA_EMU
    long ng = ftemu_launch_count("crossent_fwd_kernel") - g0;
    printf("  crossent forward kernels run: %ld in shared memory, %ld from device memory\n", ns,
           ng);
    assert_true(ns >= 12 && ng0 == 0 && ng >= 3); /* each case twice and on the checker stream */
#endif
}

static void test_optimizer(void **s)
{
    (void)s;
    gpu();
    size_t n = 2 * FT_OPS_CHUNK + 1234;
    OpCase g = {"gradnorm", FT_OP_GRADNORM, FT_FWD, {frand(n, 1)}, {out_d(1)}, {(long long)n},
                {0}, {1e-10}};
    run_case(&g);
    enum { M = 5007 };
    OpCase a = {"adamw", FT_OP_ADAMW, FT_FWD, {frand(M, 1), frand(M, 1), frand(M, 1e-2), fpos(M)},
                {out_f(M), out_f(M), out_f(M)}, {M},
                {1e-3, 0.9, 0.95, 1e-8, 0.1, 1 - 0.729, 1 - 0.857375, 0.7}, {1e-6, 1e-6, 1e-6}};
    run_case(&a);
    /* gradients and moments of order 1e-6 and 1e-12, where sqrt(v) is near eps: eps added
     * outside the square root, as the CPU's (mutant K10 of tests/mutants/cuda_kernels.md) */
    Buf v0 = fpos(M);
    for (int i = 0; i < M; i++) ((float *)v0.host)[i] *= 1e-9f;
    OpCase t = {"adamw tiny moments", FT_OP_ADAMW, FT_FWD,
                {frand(M, 1e-6f), frand(M, 1), frand(M, 1e-6f), v0},
                {out_f(M), out_f(M), out_f(M)}, {M},
                {1e-3, 0.9, 0.95, 1e-8, 0.1, 1 - 0.729, 1 - 0.857375, 0.7}, {1e-6, 1e-6, 1e-6}};
    run_case(&t);
}

/* routing of N tokens to E experts, top 2, capacity 17 (some choices dropped) */
enum { E = 6, K = 2, CAP = 17 };

static void test_moe(void **s)
{
    (void)s;
    gpu();
    Buf lg = frand(N * E, 2);
    OpCase rf = {"moe_route.fwd", FT_OP_MOE_ROUTE, FT_FWD, {copy_of(F32, lg.host, N * E)},
                 {out_f(N * E), out_i(N * K), out_f(N * K), out_i(N * K), out_f(1)},
                 {N, E, K, CAP}, {0.01}, {1e-6, 0, 1e-6, 0, 1e-6}};
    void *r[FT_OP_MAX_OUT];
    cpu_run(FT_OP_MOE_ROUTE, FT_FWD, rf.in, rf.out, rf.d, rf.x, r);
    free(lg.host);
    run_case(&rf);
    const void *probs = r[0], *expert = r[1], *gate = r[2], *row = r[3];
    OpCase rb = {"moe_route.bwd", FT_OP_MOE_ROUTE, FT_BWD,
                 {frand(N * K, 1), copy_of(F32, probs, N * E), copy_of(I32, expert, N * K)},
                 {out_f(N * E)}, {N, E, K}, {0.01, 0.5}, {1e-6}};
    run_case(&rb);
    OpCase df = {"moe_dispatch.fwd", FT_OP_MOE_DISPATCH, FT_FWD,
                 {frand(N * C, 1), copy_of(I32, expert, N * K), copy_of(I32, row, N * K)},
                 {out_f(N * K * C), out_i(E)}, {N, C, K, E}, {0}, {0, 0}};
    run_case(&df);
    OpCase db = {"moe_dispatch.bwd", FT_OP_MOE_DISPATCH, FT_BWD,
                 {frand(N * K * C, 1), copy_of(I32, row, N * K), frand(N * C, 1)},
                 {out_f(N * C)}, {N, C, K, E}, {0}, {1e-6}};
    run_case(&db);
    OpCase cf = {"moe_combine.fwd", FT_OP_MOE_COMBINE, FT_FWD,
                 {frand(N * K * C, 1), copy_of(F32, gate, N * K), copy_of(I32, row, N * K)},
                 {out_f(N * C)}, {N, C, K}, {0}, {1e-6}};
    run_case(&cf);
    OpCase cb = {"moe_combine.bwd", FT_OP_MOE_COMBINE, FT_BWD,
                 {frand(N * C, 1), frand(N * K * C, 1), copy_of(F32, gate, N * K),
                  copy_of(I32, row, N * K)},
                 {out_f(N * K * C), out_f(N * K)}, {N, C, K}, {0}, {1e-6, 1e-6}};
    run_case(&cb);
    for (int i = 0; i < 5; i++) free(r[i]);
    /* logits of -1, 0 or 1: most tokens have tied experts, taken lower index first (ops.h;
     * mutant K23 of tests/mutants/cuda_kernels.md) */
    Buf tl = irand(N * E, 3);
    float *tf = malloc(sizeof(float) * N * E);
    for (int i = 0; i < N * E; i++) tf[i] = (float)(((int *)tl.host)[i] - 1);
    free(tl.host);
    OpCase tf_ = {"moe_route.fwd ties", FT_OP_MOE_ROUTE, FT_FWD, {(Buf){F32, N * E, tf}},
                  {out_f(N * E), out_i(N * K), out_f(N * K), out_i(N * K), out_f(1)},
                  {N, E, K, CAP}, {0.01}, {1e-6, 0, 1e-6, 0, 1e-6}};
    run_case(&tf_);
}

/* the grouped matmul: G = 2 source groups x El = 3 local experts, 28 of R = 40 rows used */
static void moe_expert_case(const char *name, double gt, double gf)
{
    enum { G = 2, EL = 3, R = 40 };
    static const int counts[G * EL] = {5, 0, 7, 3, 9, 4};
    OpCase f = {name, FT_OP_MOE_EXPERT, FT_FWD,
                {frand(R * C, 1), frand(EL * OC * C, 1), frand(EL * OC, 1),
                 copy_of(I32, counts, G * EL)},
                {out_f(R * OC)}, {R, C, OC, EL}, {G, 0}, {gt}};
    run_case_floor(&f, (const double[FT_OP_MAX_OUT]){gf});
    OpCase b = {name, FT_OP_MOE_EXPERT, FT_BWD,
                {frand(R * OC, 1), frand(R * C, 1), frand(EL * OC * C, 1),
                 copy_of(I32, counts, G * EL), frand(EL * OC * C, 1), frand(EL * OC, 1)},
                {out_f(R * C), out_f(EL * OC * C), out_f(EL * OC)}, {R, C, OC, EL}, {G, 0},
                {gt, gt, 1e-5}};
    run_case_floor(&b, (const double[FT_OP_MAX_OUT]){gf, gf, 0});
}

static void test_moe_expert(void **s)
{
    (void)s;
    gpu();
    moe_expert_case("moe_expert", 1e-5, 0);
}

/* A bf16 matmul forward with its input 4 bytes off 16-byte alignment (an operand inside an
 * activation arena may be): the input is then rounded to bf16 one element a thread over many
 * blocks, not four at a time (gemm.cu's cuda_to_bf16); y must be the aligned input's bytes. On
 * the emulator the scalar kernel must have run (mutant C01 of random_sample.md's CUDA seed 2:
 * its grid-stride start miscomputed, only the first block's elements converted). urand's state
 * is put back at the end, so every later case's inputs are as they were (the tc masked-hot-key
 * case's bf16 error depends on its draw: its last row's score of the hot key is about 100, off by
 * about 0.4 after rounding). */
static void matmul_unaligned_agrees(long long n, long long c, long long oc)
{
    const FtBackend *be = gpu();
    unsigned long long rng = g_rng;
    size_t nc = (size_t)(n * c), noc = (size_t)(n * oc), occ = (size_t)(oc * c);
    Buf x = frand(nc, 1), w = frand(occ, 1), bias = frand((size_t)oc, 1);
    float *dx[2] = {backend_alloc(be, nc * sizeof(float), "x"),
                    backend_alloc(be, (nc + 4) * sizeof(float), "x")};
    float *dw = backend_alloc(be, occ * sizeof(float), "w");
    float *db = backend_alloc(be, (size_t)oc * sizeof(float), "b");
    be->to_device(be->ctx, dx[0], x.host, nc * sizeof(float));
    be->to_device(be->ctx, dx[1] + 1, x.host, nc * sizeof(float)); /* 4 bytes off */
    be->to_device(be->ctx, dw, w.host, occ * sizeof(float));
    be->to_device(be->ctx, db, bias.host, (size_t)oc * sizeof(float));
#ifdef FTLLM_CUDA_EMU
    long s0 = ftemu_launch_count("to_bf16_kernel");
#endif
    /* first another input through the same GEMM workspace, so that no bf16 copy of x is left
     * there for the unaligned call to reuse; then the unaligned call, then the aligned one */
    Buf other = frand(nc, 1);
    float *dother = backend_alloc(be, nc * sizeof(float), "x other");
    be->to_device(be->ctx, dother, other.host, nc * sizeof(float));
    float *got[3];
    for (int k = 2; k >= 0; k--) {
        FtOpCall cl;
        memset(&cl, 0, sizeof cl);
        cl.in[0] = k == 2 ? dother : dx[k] + k, cl.in[1] = dw, cl.in[2] = db;
        cl.out[0] = backend_alloc(be, noc * sizeof(float), "y");
        cl.d[0] = n, cl.d[1] = c, cl.d[2] = oc;
        exec_op_on(be, FT_OP_MATMUL, FT_FWD, &cl, NULL);
        be->sync(be->ctx);
        got[k] = malloc(noc * sizeof(float));
        assert_non_null(got[k]);
        be->to_host(be->ctx, got[k], cl.out[0], noc * sizeof(float));
        be->release(be->ctx, cl.out[0]);
    }
    int same = !memcmp(got[0], got[1], noc * sizeof(float));
    printf("  matmul bf16 %lldx%lldx%lld: aligned and unaligned input %s\n", n, c, oc,
           same ? "the same bytes" : "DIFFER");
    assert_true(same);
#ifdef FTLLM_CUDA_EMU
    assert_true(ftemu_launch_count("to_bf16_kernel") - s0 >= 1);
#endif
    assert_true(memcmp(got[0], got[2], noc * sizeof(float))); /* the other input: other y */
    free(got[0]), free(got[1]), free(got[2]), free(other.host);
    be->release(be->ctx, dx[0]), be->release(be->ctx, dx[1]), be->release(be->ctx, dother);
    be->release(be->ctx, dw), be->release(be->ctx, db);
    free(x.host), free(w.host), free(bias.host);
    g_rng = rng;
}

/* run.precision = bf16: every op that multiplies through cuBLAS (MATMUL, MOE_EXPERT, the tied
 * LM head's part of ENCODER's backward) against the CPU's fp32, then fp32 again. Tolerance
 * (reasoned, not yet measured): each operand rounded to bf16 is off by at most 2^-9 relative
 * (RMS about 2^-9 / sqrt 3), so a product by about 1.6e-3 RMS and a sum of such products with
 * random signs by about as much relative to its size: 1e-2 on the relative L2 error, and at
 * least 1e-4 (an error that small means fp32 ran, not bf16). The fp32 parts (bias gradients:
 * column sums; the earlier sums, the embedding rows) keep their fp32 tolerances. Bitwise
 * twice and on the checker stream, as every case. */
static void test_bf16_gemms(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    if (!be->set_precision) skip(); /* a backend that computes in fp32 only */
#ifdef FT_GPU_STANDIN
    setenv("FTLLM_CUDA_ATTENTION", "gemm", 1); /* the stand-in then rounds attention's too */
#endif
    be->set_precision(be->ctx, FT_PRECISION_BF16);
#ifdef FTLLM_CUDA_EMU
    long lt0 = ftemu_launch_count("cublasLtMatmul");
#endif
    matmul_case_tol("matmul bf16", N, C, OC, 1, 1e-2, 1e-4);
    matmul_case_tol("matmul bf16 300x192x160", 300, 192, 160, 1, 1e-2, 1e-4);
#ifdef FTLLM_CUDA_EMU
    /* the forward's bias in cuBLASLt's epilogue (gemm.cu): each case's forward twice and on the
     * checker stream */
    long lt = ftemu_launch_count("cublasLtMatmul") - lt0;
    printf("  cublasLtMatmul calls: %ld\n", lt);
    assert_true(lt >= 6);
#endif
    matmul_case_tol("matmul bf16 no dx/prev", N, C, OC, 0, 1e-2, 1e-4);
    matmul_unaligned_agrees(300, 192, 160); /* 57,600 inputs: 225 blocks of the scalar kernel */
    moe_expert_case("moe_expert bf16", 1e-2, 1e-4);
    OpCase b = {"encoder.bwd bf16 tied", FT_OP_ENCODER, FT_BWD,
                {frand(N * C, 1), irand(N, 7), frand(VP * C, 1), frand(MAXT * C, 1),
                 frand(N * VP, 1), frand(N * C, 1)},
                {out_f(VP * C), out_f(MAXT * C)}, {B, T, C}, {VP, MAXT}, {1e-2, 1e-6}};
    run_case_floor(&b, (const double[FT_OP_MAX_OUT]){1e-4, 0});
    /* FTLLM_CUDA_ATTENTION=gemm: attention's products are bf16 GEMMs too. Forward: y as a GEMM
     * output (1e-2, floor 1e-4); lse = max + log sum exp from scores of bf16 operands, 1e-2 and
     * no floor (its row maxima alone can come out within 1e-4). Backward: dqkv through two
     * bf16 products in a row (dP = dY V^T, then dS K and friends) whose roundings add, and
     * P (dP - D), where D is a mean of dP over the row and cancels little on random inputs:
     * 3e-2, floor 1e-4. Reasoned; measured on the stand-in, whose CPU attention rounds the
     * same products' operands under FTLLM_CUDA_ATTENTION=gemm (2026-12-01): y 2.2e-3, lse
     * 3.3e-5, dqkv 2.4e-3. */
    const char *att = getenv("FTLLM_CUDA_ATTENTION"); /* gemm when unset */
    if (!att || !*att || !strcmp(att, "gemm"))
        attention_case_tol("attention.fwd bf16 hs64", "attention.bwd bf16 hs64", 2, 150, 128, 2,
                           1e-2, 3e-2, (const double[FT_OP_MAX_OUT]){1e-4, 0},
                           (const double[FT_OP_MAX_OUT]){1e-4});
    if (att && !strcmp(att, "tc")) attention_tc_cases();
    be->set_precision(be->ctx, FT_PRECISION_FP32);
#ifdef FT_GPU_STANDIN
    unsetenv("FTLLM_CUDA_ATTENTION");
#endif
    matmul_case("matmul fp32 again", N, C, OC, 1);
}

/* The backend's memory (backend.h): alloc gives zeroed memory, at sizes below, at and past a
 * page, also where a released buffer that held other bytes may be handed out again (mutant K39
 * of tests/mutants/cuda_kernels.md: cu_alloc without its cudaMemsetAsync). */
static void test_alloc_zeroed(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    static const size_t sizes[] = {1, 4, 4097, (1u << 20) + 3};
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < 4; k++) {
            size_t n = sizes[k];
            unsigned char *d = backend_alloc(be, n, "a zeroed test buffer"), *h = malloc(n);
            memset(h, 0x77, n);
            be->to_host(be->ctx, h, d, n);
            size_t nz = 0;
            for (size_t i = 0; i < n; i++) nz += h[i] != 0;
            if (nz) printf("  alloc of %zu bytes (round %d): %zu nonzero byte(s)\n", n, round, nz);
            assert_int_equal(nz, 0);
            be->set(be->ctx, d, 0xA5, n); /* other bytes for the next round's buffer */
            be->sync(be->ctx);
            be->release(be->ctx, d);
            free(h);
        }
}

/* Last: every kind the CPU table has (and its backward, where it has one) was compared. */
static void test_all_kinds_covered(void **s)
{
    (void)s;
    gpu();
    int missing = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++) {
        if (k == FT_OP_MARK) continue;
        for (int dir = 0; dir < 2; dir++) {
            int has = dir == FT_FWD || ops_cpu_table()[k].bwd;
            if (has && !g_covered[k][dir]) {
                printf("  not compared: %s.%s\n", ops_cpu_table()[k].name, dir ? "bwd" : "fwd");
                missing++;
            }
        }
    }
    assert_int_equal(missing, 0);
}

FT_TEST_MAIN(cmocka_unit_test(test_encoder), cmocka_unit_test(test_layernorm),
             cmocka_unit_test(test_matmul), cmocka_unit_test(test_attention),
             cmocka_unit_test(test_elementwise), cmocka_unit_test(test_crossent),
             cmocka_unit_test(test_optimizer), cmocka_unit_test(test_moe),
             cmocka_unit_test(test_moe_expert), cmocka_unit_test(test_bf16_gemms),
             cmocka_unit_test(test_alloc_zeroed), cmocka_unit_test(test_all_kinds_covered))

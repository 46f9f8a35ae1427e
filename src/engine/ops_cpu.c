/* ops_cpu.c: the CPU implementation of every op kind (ops.h): C + OpenMP, GEMMs via cblas_sgemm.
 *
 * Key decisions:
 *  - Plain loops that read like the math; GEMMs through OpenBLAS (its OpenMP build, so BLAS and
 *    our loops share one thread pool). matmul keeps a naive twin (matmul_fwd_ref/bwd_ref).
 *  - Determinism: every `omp for` is schedule(static); every sum is accumulated by one thread in
 *    a fixed order. Reductions over rows (bias, LayerNorm weight, embedding gradients) are
 *    parallelised over columns, so even their results do not depend on the thread count; only
 *    the GEMMs do (OpenBLAS splits K differently per thread count).
 *  - Outputs are written completely (the padded vocabulary columns get zeros), so output bytes
 *    never depend on what the buffer held before: every call writes its outputs from its inputs
 *    alone. A gradient that sums several
 *    contributions (micro-batches, the tied embedding's two uses) takes the earlier sum as an
 *    input and writes earlier + new into a different buffer, in the order the old in-place
 *    accumulation used, so the bits are those of `out += contribution`.
 *  - Row statistics (LayerNorm mean/variance, softmax sums, the loss mean) are accumulated in
 *    double: cheap, and it keeps fp32 results close to the double-precision references.
 */
#include "ftllm/ops.h"

/* No errno from sqrtf & co. and no FP traps (ftllm never reads errno or traps after a
 * kernel): lets `omp simd` loops with sqrt and clamps vectorize. Neither option changes a
 * result's value; bits stay the same from run to run. */
#pragma GCC optimize("no-math-errno", "no-trapping-math")

#include <cblas.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

/* out = prev (or zeros when prev is NULL), n floats: the start of a gradient output that sums
 * a new contribution onto an earlier one (out-of-place, so the call can run again). */
static void init_from(float *out, const float *prev, size_t n)
{
    FT_ASSERT(out != prev);
    if (prev) memcpy(out, prev, sizeof(float) * n);
    else memset(out, 0, sizeof(float) * n);
}

/* exp(x) for the elementwise kernels: range reduction x = k ln2 + r, |r| <= ln2/2, and a
 * degree-7 Taylor polynomial (relative error < 2e-7 over the clamped range [-87, 88]). Written
 * so `omp simd` vectorizes it (glibc's expf/tanhf only vectorize under -ffast-math); the same
 * binary gives the same bits on every call, which is what determinism needs. */
static inline float exp_poly(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* k = round(x / ln2) by the 1.5 * 2^23 trick: t's low mantissa bits hold k */
    float t = x * 1.44269504f + 12582912.0f;
    float kf = t - 12582912.0f;
    int32_t k;
    uint32_t e;
    memcpy(&k, &t, sizeof k); /* bit casts by memcpy: unions stop GCC's vectorizer */
    k -= 0x4B400000;
    float r = x - kf * 0.693145752f - kf * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
              r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    float scale;
    /* unsigned: a NaN input gives a k far out of range, and a signed shift would be undefined
     * (the result is NaN either way, since p is) */
    e = ((uint32_t)k + 127u) << 23;
    memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~2e-7, saturating cleanly at +-1. */
static inline float tanh_poly(float u) { return 1.0f - 2.0f / (exp_poly(2.0f * u) + 1.0f); }

/* Whether an op of `work` elements runs on all threads: below ~1M elements a parallel region
 * gains little on an idle machine and loses a lot on a busy one (a descheduled thread stalls the
 * region's barrier for a scheduler time slice). Every kernel's result is independent of this
 * choice except through BLAS, which is not affected. */
static long long g_par_min = 1LL << 20; /* performance only: results do not depend on it */
#define PAR(work) ((long long)(work) >= g_par_min)

void ops_cpu_set_parallel_min(long long work) { g_par_min = work < 0 ? 0 : work; }

/* ---- GEMMs with bf16 operands (ops_cpu_set_gemm_bf16) --------------------------------------- */

static bool g_gemm_bf16; /* the model's GEMMs round their operands to bf16 (see ops.h) */
static bool g_att_bf16;  /* and attention's */

void ops_cpu_set_gemm_bf16(bool on) { g_gemm_bf16 = on; }
void ops_cpu_set_attention_bf16(bool on) { g_att_bf16 = on; }

/* x rounded to the nearest bf16 (ties to even), as a float: CUDA's __float2bfloat16_rn, which
 * the CUDA backend's GEMMs apply to their operands under run.precision = bf16. NaN stays NaN. */
static inline float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The n floats of a rounded to bf16, in a new buffer. */
static float *bf16_copy(const float *a, size_t n)
{
    float *r = malloc(sizeof(float) * (n ? n : 1));
    FT_ASSERT(r);
#pragma omp parallel for schedule(static) if (PAR(n))
    for (size_t i = 0; i < n; i++) r[i] = bf16_round(a[i]);
    return r;
}

/* Row-major C = alpha op(A) op(B) + beta C (cblas_sgemm's arguments). With bf16 (model_gemm:
 * the GEMMs of MATMUL, MOE_EXPERT and the tied LM head in ENCODER's backward, the ones the CUDA
 * backend multiplies in bf16, under ops_cpu_set_gemm_bf16), A and B are rounded to bf16 first
 * (fp32 products and sums, C fp32): what a bf16 GEMM with fp32 accumulation computes, summed
 * in BLAS's order. */
static void gemm_in(bool bf16, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                    float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc)
{
    if (!bf16 || !M || !N || !K) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* the extent of each operand: rows of ld floats, the last one as wide as the matrix */
    size_t na = ta == CblasNoTrans ? (size_t)(M - 1) * lda + K : (size_t)(K - 1) * lda + M;
    size_t nb = tb == CblasNoTrans ? (size_t)(K - 1) * ldb + N : (size_t)(N - 1) * ldb + K;
    float *a = bf16_copy(A, na), *b = bf16_copy(B, nb);
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    free(a), free(b);
}

#define model_gemm(...) gemm_in(g_gemm_bf16, __VA_ARGS__)
/* attention's products (ATTENTION's fast path below): bf16 operands under
 * ops_cpu_set_attention_bf16, as the CUDA backend's batched-GEMM attention computes them */
#define att_gemm(...) gemm_in(g_att_bf16, __VA_ARGS__)

/* Columns [lo, hi) of a total of n that thread `id` of `nth` owns (static, contiguous). */
static void split_range(long long n, int id, int nth, long long *lo, long long *hi)
{
    long long q = n / nth, r = n % nth;
    *lo = id * q + (id < r ? id : r);
    *hi = *lo + q + (id < r ? 1 : 0);
}

/* ---- encoder: x[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] ------------------------------------ */

static void encoder_fwd(const FtOpCall *c)
{
    const int *tok = c->in[0];
    const float *wte = c->in[1], *wpe = c->in[2];
    float *x = c->out[0];
    long long B = c->d[0], T = c->d[1], C = c->d[2];
#pragma omp parallel for schedule(static) if (PAR(B * T * C))
    for (long long bt = 0; bt < B * T; bt++) {
        long long t = bt % T;
        const float *e = wte + (size_t)tok[bt] * C, *p = wpe + (size_t)t * C;
        float *o = x + (size_t)bt * C;
        for (long long i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

/* dwte = prev + scatter(dx), dwpe = prev + sum over b: each thread owns a slice of channels and
 * walks all (b,t) in order, so the sums into a repeated token's row run in one fixed order. */
static void encoder_bwd(const FtOpCall *c)
{
    const float *dx = c->in[0];
    const int *tok = c->in[1];
    float *dwte = c->out[0], *dwpe = c->out[1];
    long long B = c->d[0], T = c->d[1], C = c->d[2], Vp = (long long)c->x[0],
              maxT = (long long)c->x[1];
    FT_ASSERT(Vp >= 1 && maxT >= T);
    init_from(dwte, c->in[2], (size_t)(Vp * C));
    init_from(dwpe, c->in[3], (size_t)(maxT * C));
    if (c->in[4]) /* the tied LM head's part: dwte += dlogits^T lnf (as matmul_bwd's dw) */
        model_gemm(CblasTrans, CblasNoTrans, (int)Vp, (int)C, (int)(B * T), 1.0f, c->in[4],
                   (int)Vp, c->in[5], (int)C, 1.0f, dwte, (int)C);
#pragma omp parallel if (PAR(B * T * C))
    {
        long long lo, hi;
        split_range(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long long bt = 0; bt < B * T; bt++) {
            const float *g = dx + (size_t)bt * C;
            float *we = dwte + (size_t)tok[bt] * C, *wp = dwpe + (size_t)(bt % T) * C;
            for (long long i = lo; i < hi; i++) {
                we[i] += g[i];
                wp[i] += g[i];
            }
        }
    }
}

/* ---- layernorm ------------------------------------------------------------------------------ */

static void layernorm_fwd(const FtOpCall *c)
{
    const float *x = c->in[0], *w = c->in[1], *b = c->in[2];
    float *y = c->out[0], *mean = c->out[1], *rstd = c->out[2];
    long long N = c->d[0], C = c->d[1];
#pragma omp parallel for schedule(static) if (PAR(N * C))
    for (long long n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (long long i = 0; i < C; i++) s += xr[i];
        float m = (float)(s / C);
        double v = 0;
#pragma omp simd reduction(+ : v)
        for (long long i = 0; i < C; i++) {
            float d = xr[i] - m;
            v += (double)d * d;
        }
        float rs = (float)(1.0 / sqrt(v / C + 1e-5));
        float *yr = y + (size_t)n * C;
        for (long long i = 0; i < C; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        mean[n] = m;
        rstd[n] = rs;
    }
}

/* dx = dres + rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dy * w;
 * dw = dw_prev + sum_n dy * xhat, db = db_prev + sum_n dy (over rows, split by columns). */
static void layernorm_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0], *x = c->in[1], *w = c->in[2], *mean = c->in[3],
                *rstd = c->in[4], *dres = c->in[5];
    float *dx = c->out[0], *dw = c->out[1], *db = c->out[2];
    long long N = c->d[0], C = c->d[1];
    init_from(dw, c->in[6], (size_t)C);
    init_from(db, c->in[7], (size_t)C);
#pragma omp parallel if (PAR(N * C))
    {
#pragma omp for schedule(static)
        for (long long n = 0; n < N; n++) {
            const float *g = dy + (size_t)n * C, *xr = x + (size_t)n * C;
            float m = mean[n], rs = rstd[n];
            double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
            for (long long i = 0; i < C; i++) {
                float xh = (xr[i] - m) * rs, dn = g[i] * w[i];
                s1 += dn;
                s2 += (double)dn * xh;
            }
            float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
            float *o = dx + (size_t)n * C;
            const float *r = dres ? dres + (size_t)n * C : NULL;
            for (long long i = 0; i < C; i++) {
                float xh = (xr[i] - m) * rs;
                float v = rs * (g[i] * w[i] - m1 - xh * m2);
                o[i] = r ? r[i] + v : v;
            }
        }
        long long lo, hi;
        split_range(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long long n = 0; n < N; n++) {
            const float *g = dy + (size_t)n * C, *xr = x + (size_t)n * C;
            float m = mean[n], rs = rstd[n];
            for (long long i = lo; i < hi; i++) {
                dw[i] += g[i] * ((xr[i] - m) * rs);
                db[i] += g[i];
            }
        }
    }
}

/* ---- matmul: y = x w^T + b ------------------------------------------------------------------- */

static void matmul_fwd(const FtOpCall *c)
{
    const float *x = c->in[0], *w = c->in[1], *b = c->in[2];
    float *y = c->out[0];
    int N = (int)c->d[0], C = (int)c->d[1], OC = (int)c->d[2];
    if (b) {
#pragma omp parallel for schedule(static) if (PAR((long long)N * OC))
        for (long long n = 0; n < N; n++) memcpy(y + (size_t)n * OC, b, sizeof(float) * OC);
    }
    model_gemm(CblasNoTrans, CblasTrans, N, OC, C, 1.0f, x, C, w, C, b ? 1.0f : 0.0f, y, OC);
}

/* dx = dy w; dw += dy^T x; db += sum_n dy (split by columns): the accumulating core that
 * matmul_bwd and the grouped expert backward share. */
static void matmul_bwd_into(const float *dy, const float *x, const float *w, float *dx,
                            float *dw, float *db, int N, int C, int OC)
{
    if (dx) model_gemm(CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dy, OC, w, C, 0.0f, dx, C);
    model_gemm(CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dy, OC, x, C, 1.0f, dw, C);
    if (db) {
#pragma omp parallel if (PAR((long long)N * OC))
        {
            long long lo, hi;
            split_range(OC, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
            for (long long n = 0; n < N; n++) {
                const float *g = dy + (size_t)n * OC;
                for (long long o = lo; o < hi; o++) db[o] += g[o];
            }
        }
    }
}

/* dx = dy w; dw = dw_prev + dy^T x; db = db_prev + sum_n dy (dw NULL: dx only). */
static void matmul_bwd(const FtOpCall *c)
{
    float *dw = c->out[1], *db = c->out[2];
    int N = (int)c->d[0], C = (int)c->d[1], OC = (int)c->d[2];
    if (!dw) {
        FT_ASSERT(!db && c->out[0]);
        model_gemm(CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, c->in[0], OC, c->in[2], C, 0.0f,
                   c->out[0], C);
        return;
    }
    init_from(dw, c->in[3], (size_t)OC * C);
    if (db) init_from(db, c->in[4], (size_t)OC);
    matmul_bwd_into(c->in[0], c->in[1], c->in[2], c->out[0], dw, db, N, C, OC);
}

/* The naive twins: the same math as three plain loops (float accumulation in index order). */
static void matmul_fwd_ref(const FtOpCall *c)
{
    const float *x = c->in[0], *w = c->in[1], *b = c->in[2];
    float *y = c->out[0];
    long long N = c->d[0], C = c->d[1], OC = c->d[2];
#pragma omp parallel for schedule(static)
    for (long long n = 0; n < N; n++)
        for (long long o = 0; o < OC; o++) {
            float s = b ? b[o] : 0.0f;
            for (long long i = 0; i < C; i++) s += x[n * C + i] * w[o * C + i];
            y[n * OC + o] = s;
        }
}

static void matmul_bwd_ref(const FtOpCall *c)
{
    const float *dy = c->in[0], *x = c->in[1], *w = c->in[2];
    float *dx = c->out[0], *dw = c->out[1], *db = c->out[2];
    long long N = c->d[0], C = c->d[1], OC = c->d[2];
    if (dw) init_from(dw, c->in[3], (size_t)(OC * C));
    if (db) init_from(db, c->in[4], (size_t)OC);
    if (dx) {
#pragma omp parallel for schedule(static)
        for (long long n = 0; n < N; n++)
            for (long long i = 0; i < C; i++) {
                float s = 0.0f;
                for (long long o = 0; o < OC; o++) s += dy[n * OC + o] * w[o * C + i];
                dx[n * C + i] = s;
            }
    }
    if (!dw) return;
#pragma omp parallel for schedule(static)
    for (long long o = 0; o < OC; o++) {
        for (long long i = 0; i < C; i++) {
            float s = 0.0f;
            for (long long n = 0; n < N; n++) s += dy[n * OC + o] * x[n * C + i];
            dw[o * C + i] += s;
        }
        if (db) {
            float s = 0.0f;
            for (long long n = 0; n < N; n++) s += dy[n * OC + o];
            db[o] += s;
        }
    }
}

/* ---- causal multi-head attention ----------------------------------------------------------- */

/* Attention keeps no T x T matrix between its passes: the forward writes, per row, the log of
 * its softmax denominator over the scaled scores (lse = max + log sum exp(s - max)), and the
 * backward recomputes the probabilities as exp(s - lse) from q and k (flash-attention style).
 * So a layer's saved state is B NH T floats, not B NH T T. */

/* The plain loops (naive twin of attention_fwd): one dot product per (t, t2). */
static void attention_fwd_ref(const FtOpCall *c)
{
    const float *qkv = c->in[0];
    float *y = c->out[0], *lse = c->out[1];
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], HS = C / NH;
    float scale = (float)(1.0 / sqrt((double)HS));
#pragma omp parallel for collapse(2) schedule(static) if (PAR(B * T * T * C))
    for (long long b = 0; b < B; b++)
        for (long long h = 0; h < NH; h++) {
            float a[T];
            for (long long t = 0; t < T; t++) {
                const float *q = qkv + (size_t)(b * T + t) * 3 * C + h * HS;
                float mx = -INFINITY;
                for (long long t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (size_t)(b * T + t2) * 3 * C + C + h * HS;
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (long long i = 0; i < HS; i++) s += q[i] * k[i];
                    s *= scale;
                    a[t2] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0;
                for (long long t2 = 0; t2 <= t; t2++) {
                    float e = expf(a[t2] - mx);
                    a[t2] = e;
                    sum += e;
                }
                float inv = (float)(1.0 / sum);
                for (long long t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                lse[(b * NH + h) * T + t] = mx + (float)log(sum);
                float *o = y + (size_t)(b * T + t) * C + h * HS;
                for (long long i = 0; i < HS; i++) o[i] = 0.0f;
                for (long long t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + (size_t)(b * T + t2) * 3 * C + 2 * C + h * HS;
#pragma omp simd
                    for (long long i = 0; i < HS; i++) o[i] += a[t2] * v[i];
                }
            }
        }
}

/* Each (b, h) owns disjoint slices of dqkv, so no two threads write the same element. This is
 * the plain twin of attention_bwd. */
static void attention_bwd_ref(const FtOpCall *c)
{
    const float *dy = c->in[0], *qkv = c->in[1], *lse = c->in[2];
    float *dqkv = c->out[0];
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], HS = C / NH;
    float scale = (float)(1.0 / sqrt((double)HS));
#pragma omp parallel for collapse(2) schedule(static) if (PAR(B * T * T * C))
    for (long long b = 0; b < B; b++)
        for (long long h = 0; h < NH; h++) {
            for (long long t = 0; t < T; t++)
                for (int part = 0; part < 3; part++)
                    memset(dqkv + (size_t)(b * T + t) * 3 * C + part * C + h * HS, 0,
                           sizeof(float) * HS);
            float a[T], datt[T], dpre[T];
            for (long long t = 0; t < T; t++) {
                const float *g = dy + (size_t)(b * T + t) * C + h * HS;
                const float *q = qkv + (size_t)(b * T + t) * 3 * C + h * HS;
                float *dq = dqkv + (size_t)(b * T + t) * 3 * C + h * HS;
                float l = lse[(b * NH + h) * T + t];
                for (long long t2 = 0; t2 <= t; t2++) { /* the probabilities again */
                    const float *k = qkv + (size_t)(b * T + t2) * 3 * C + C + h * HS;
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (long long i = 0; i < HS; i++) s += q[i] * k[i];
                    a[t2] = expf(s * scale - l);
                }
                double dsum = 0;
                for (long long t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + (size_t)(b * T + t2) * 3 * C + 2 * C + h * HS;
                    float *dv = dqkv + (size_t)(b * T + t2) * 3 * C + 2 * C + h * HS;
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (long long i = 0; i < HS; i++) {
                        s += g[i] * v[i];
                        dv[i] += a[t2] * g[i];
                    }
                    datt[t2] = s;
                    dsum += (double)a[t2] * s;
                }
                for (long long t2 = 0; t2 <= t; t2++)
                    dpre[t2] = a[t2] * (datt[t2] - (float)dsum) * scale;
                for (long long t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (size_t)(b * T + t2) * 3 * C + C + h * HS;
                    float *dk = dqkv + (size_t)(b * T + t2) * 3 * C + C + h * HS;
#pragma omp simd
                    for (long long i = 0; i < HS; i++) {
                        dq[i] += dpre[t2] * k[i];
                        dk[i] += dpre[t2] * q[i];
                    }
                }
            }
        }
}

/* The fast path: per (b, h), GEMMs on strided views of qkv (rows 3C apart) into a T x T scratch
 * of the thread's own (att_gemm: bf16 operands under ops_cpu_set_attention_bf16, the stand-in's
 * FTLLM_CUDA_ATTENTION=gemm), one (b, h) per thread, so each sgemm runs single-threaded inside the
 * parallel loop (OpenBLAS's OpenMP build does not nest) and its bits do not depend on how
 * (b, h) are shared out. The full T x T product is computed and the causal part kept (2x the
 * minimum FLOPs, still far faster than dot products for T <= 1024). */
static void attention_fwd(const FtOpCall *c)
{
    const float *qkv = c->in[0];
    float *y = c->out[0], *lse = c->out[1];
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], HS = C / NH;
    float scale = (float)(1.0 / sqrt((double)HS));
#pragma omp parallel if (PAR(B * T * T * C))
    {
        float *a = malloc(sizeof(float) * (size_t)(T * T > 0 ? T * T : 1));
        FT_ASSERT(a);
#pragma omp for collapse(2) schedule(static)
        for (long long b = 0; b < B; b++)
            for (long long h = 0; h < NH; h++) {
                const float *q = qkv + (size_t)b * T * 3 * C + h * HS, *k = q + C, *v = q + 2 * C;
                float *l = lse + (b * NH + h) * T;
                att_gemm(CblasNoTrans, CblasTrans, (int)T, (int)T, (int)HS,
                            scale, q, (int)(3 * C), k, (int)(3 * C), 0.0f, a, (int)T);
                for (long long t = 0; t < T; t++) {
                    float *r = a + t * T, mx = -INFINITY;
                    for (long long t2 = 0; t2 <= t; t2++) mx = r[t2] > mx ? r[t2] : mx;
                    double sum = 0;
                    for (long long t2 = 0; t2 <= t; t2++) {
                        float e = expf(r[t2] - mx);
                        r[t2] = e;
                        sum += e;
                    }
                    float inv = (float)(1.0 / sum);
                    for (long long t2 = 0; t2 <= t; t2++) r[t2] *= inv;
                    for (long long t2 = t + 1; t2 < T; t2++) r[t2] = 0.0f;
                    l[t] = mx + (float)log(sum);
                }
                att_gemm(CblasNoTrans, CblasNoTrans, (int)T, (int)HS, (int)T,
                            1.0f, a, (int)T, v, (int)(3 * C), 0.0f, y + (size_t)b * T * C + h * HS,
                            (int)C);
            }
        free(a);
    }
}

/* att = exp(s Q K^T - lse) (causal), datt = dy V^T, dV = att^T dy,
 * dpre = att * (datt - rowsum(att * datt)), dQ = s dpre K, dK = s dpre^T Q; every slice of
 * dqkv written (beta 0). */
static void attention_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0], *qkv = c->in[1], *lse = c->in[2];
    float *dqkv = c->out[0];
    long long B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], HS = C / NH;
    float scale = (float)(1.0 / sqrt((double)HS));
    int ld = (int)(3 * C), iT = (int)T, iHS = (int)HS;
#pragma omp parallel if (PAR(B * T * T * C))
    {
        size_t tt = (size_t)(T * T > 0 ? T * T : 1);
        float *a = malloc(sizeof(float) * tt), *da = malloc(sizeof(float) * tt);
        FT_ASSERT(a && da);
#pragma omp for collapse(2) schedule(static)
        for (long long b = 0; b < B; b++)
            for (long long h = 0; h < NH; h++) {
                size_t off = (size_t)b * T * 3 * C + h * HS;
                const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
                float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
                const float *l = lse + (b * NH + h) * T;
                const float *g = dy + (size_t)b * T * C + h * HS;
                att_gemm(CblasNoTrans, CblasTrans, iT, iT, iHS, scale, q, ld, k,
                            ld, 0.0f, a, iT);
                for (long long t = 0; t < T; t++) {
                    float *r = a + t * T;
                    for (long long t2 = 0; t2 <= t; t2++) r[t2] = expf(r[t2] - l[t]);
                    for (long long t2 = t + 1; t2 < T; t2++) r[t2] = 0.0f;
                }
                att_gemm(CblasNoTrans, CblasTrans, iT, iT, iHS, 1.0f, g, (int)C,
                            v, ld, 0.0f, da, iT);
                att_gemm(CblasTrans, CblasNoTrans, iT, iHS, iT, 1.0f, a, iT, g,
                            (int)C, 0.0f, dv, ld);
                for (long long t = 0; t < T; t++) {
                    const float *ar = a + t * T;
                    float *r = da + t * T;
                    double dsum = 0;
                    for (long long t2 = 0; t2 <= t; t2++) dsum += (double)ar[t2] * r[t2];
                    for (long long t2 = 0; t2 <= t; t2++) r[t2] = ar[t2] * (r[t2] - (float)dsum);
                    for (long long t2 = t + 1; t2 < T; t2++) r[t2] = 0.0f;
                }
                att_gemm(CblasNoTrans, CblasNoTrans, iT, iHS, iT, scale, da, iT,
                            k, ld, 0.0f, dq, ld);
                att_gemm(CblasTrans, CblasNoTrans, iT, iHS, iT, scale, da, iT, q,
                            ld, 0.0f, dk, ld);
            }
        free(a), free(da);
    }
}

/* ---- GELU (tanh approximation) ------------------------------------------------------------ */

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

static void gelu_fwd(const FtOpCall *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    long long N = c->d[0];
#pragma omp parallel if (PAR(N))
    {
        long long lo, hi;
        split_range(N, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#pragma omp simd
        for (long long i = lo; i < hi; i++) {
            float v = x[i];
            y[i] = 0.5f * v * (1.0f + tanh_poly(GELU_S * (v + 0.044715f * v * v * v)));
        }
    }
}

static void gelu_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0], *x = c->in[1];
    float *dx = c->out[0];
    long long N = c->d[0];
#pragma omp parallel if (PAR(N))
    {
        long long lo, hi;
        split_range(N, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#pragma omp simd
        for (long long i = lo; i < hi; i++) {
            float v = x[i];
            float u = GELU_S * (v + 0.044715f * v * v * v);
            float th = tanh_poly(u), sech2 = 1.0f - th * th;
            float g = 0.5f * (1.0f + th) +
                      0.5f * v * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * v * v);
            dx[i] = g * dy[i];
        }
    }
}

/* ---- residual ------------------------------------------------------------------------------ */

static void residual_fwd(const FtOpCall *c)
{
    const float *a = c->in[0], *b = c->in[1];
    float *y = c->out[0];
    long long N = c->d[0];
#pragma omp parallel for schedule(static) if (PAR(N))
    for (long long i = 0; i < N; i++) y[i] = a[i] + b[i];
}

static void residual_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0];
    float *da = c->out[0], *db = c->out[1];
    long long N = c->d[0];
#pragma omp parallel for schedule(static) if (PAR(N))
    for (long long i = 0; i < N; i++) {
        da[i] = dy[i];
        db[i] = dy[i];
    }
}

/* ---- softmax + cross-entropy over the unpadded vocabulary ---------------------------------- */

static void crossent_fwd(const FtOpCall *c)
{
    const float *logits = c->in[0];
    const int *tgt = c->in[1];
    float *probs = c->out[0], *losses = c->out[1];
    long long N = c->d[0], V = c->d[1], Vp = c->d[2];
#pragma omp parallel for schedule(static) if (PAR(N * Vp))
    for (long long n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vp;
        float *p = probs + (size_t)n * Vp;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (long long v = 0; v < V; v++) mx = l[v] > mx ? l[v] : mx;
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (long long v = 0; v < V; v++) {
            float e = exp_poly(l[v] - mx);
            p[v] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (long long v = 0; v < V; v++) p[v] *= inv;
        for (long long v = V; v < Vp; v++) p[v] = 0.0f;
        int t = tgt[n];
        FT_ASSERT(t >= 0 && t < V);
        losses[n] = (float)(log(sum) - (double)(l[t] - mx));
    }
}

static void crossent_bwd(const FtOpCall *c)
{
    const float *probs = c->in[0];
    const int *tgt = c->in[1];
    float *dl = c->out[0];
    long long N = c->d[0], V = c->d[1], Vp = c->d[2];
    float s = (float)c->x[0];
#pragma omp parallel for schedule(static) if (PAR(N * Vp))
    for (long long n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float *o = dl + (size_t)n * Vp;
        for (long long v = 0; v < V; v++) o[v] = s * p[v];
        o[tgt[n]] = s * (p[tgt[n]] - 1.0f);
        for (long long v = V; v < Vp; v++) o[v] = 0.0f;
    }
}

static void lossmean_fwd(const FtOpCall *c)
{
    const float *l = c->in[0];
    float *out = c->out[0];
    long long N = c->d[0];
    double s = 0;
    for (long long i = 0; i < N; i++) s += l[i];
    out[0] = (float)(s / N);
}

/* ---- optimizer kernels ---------------------------------------------------------------------- */

static void gradnorm_fwd(const FtOpCall *c)
{
    const float *g = c->in[0];
    double *out = c->out[0];
    long long n = c->d[0], nch = (n + FT_OPS_CHUNK - 1) / FT_OPS_CHUNK;
    double *part = malloc(sizeof(double) * (size_t)(nch > 0 ? nch : 1));
    FT_ASSERT(part);
#pragma omp parallel for schedule(static) if (PAR(n))
    for (long long k = 0; k < nch; k++) {
        long long lo = k * FT_OPS_CHUNK, hi = lo + FT_OPS_CHUNK < n ? lo + FT_OPS_CHUNK : n;
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (long long i = lo; i < hi; i++) s += (double)g[i] * g[i];
        part[k] = s;
    }
    double total = 0;
    for (long long k = 0; k < nch; k++) total += part[k];
    free(part);
    out[0] = total;
}

/* AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected moments:
 *   g' = gs * g;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
 *   p -= lr * (m / bc1 / (sqrt(v / bc2) + eps) + wd * p)
 * One element (adamw_one) and eight at once (adamw_eight): the same operations in the same
 * order. IEEE mul/add/div/sqrt are correctly rounded and -std=c11 does not contract to FMA, so
 * both give the same bits (GCC will not vectorize sqrtf without -fno-math-errno, a whole-build
 * flag, hence the intrinsics). */
typedef struct adamw_k {
    float lr, b1, b2, eps, wd, bc1, bc2, gs;
} AdamwK;

typedef struct adamw_io {
    const float *g, *p0, *m0, *v0;
    float *p, *m, *v;
} AdamwIO;

static inline void adamw_one(const AdamwK *k, const AdamwIO *a, long long i)
{
    float gi = a->g[i] * k->gs;
    float mi = k->b1 * a->m0[i] + (1.0f - k->b1) * gi;
    float vi = k->b2 * a->v0[i] + ((1.0f - k->b2) * gi) * gi;
    a->m[i] = mi;
    a->v[i] = vi;
    a->p[i] = a->p0[i] - k->lr * (mi / k->bc1 / (sqrtf(vi / k->bc2) + k->eps) + k->wd * a->p0[i]);
}

#ifdef __AVX__
/* Elements i .. i+7 into *p, *m, *v (the caller stores them). */
static inline void adamw_eight(const AdamwK *k, const AdamwIO *a, long long i, __m256 *p,
                               __m256 *m, __m256 *v)
{
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(a->g + i), _mm256_set1_ps(k->gs));
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(k->b1), _mm256_loadu_ps(a->m0 + i)),
                              _mm256_mul_ps(_mm256_set1_ps(1.0f - k->b1), gi));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(k->b2), _mm256_loadu_ps(a->v0 + i)),
                              _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(1.0f - k->b2), gi), gi));
    __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, _mm256_set1_ps(k->bc2))),
                               _mm256_set1_ps(k->eps));
    __m256 pi = _mm256_loadu_ps(a->p0 + i);
    __m256 upd = _mm256_add_ps(_mm256_div_ps(_mm256_div_ps(mi, _mm256_set1_ps(k->bc1)), den),
                               _mm256_mul_ps(_mm256_set1_ps(k->wd), pi));
    *p = _mm256_sub_ps(pi, _mm256_mul_ps(_mm256_set1_ps(k->lr), upd));
    *m = mi;
    *v = vi;
}
#endif

static void adamw_fwd(const FtOpCall *c)
{
    const AdamwIO a = {c->in[0], c->in[1], c->in[2], c->in[3], c->out[0], c->out[1], c->out[2]};
    long long n = c->d[0];
    FT_ASSERT(a.p != a.p0 && a.m != a.m0 && a.v != a.v0);
    const AdamwK k = {(float)c->x[0], (float)c->x[1], (float)c->x[2], (float)c->x[3],
                      (float)c->x[4], (float)c->x[5], (float)c->x[6], (float)c->x[7]};
#pragma omp parallel if (PAR(n))
    {
        long long lo, hi;
        split_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        long long i = lo;
#ifdef __AVX__
        /* the outputs are written once and not read again this step (the next one reads them
         * from memory anyway): streaming stores skip reading their cache lines first, which
         * out-of-place AdamW would otherwise pay for. Aligned alike in the model's buffers, so
         * a scalar head brings all three to 32 bytes. */
        for (; i < hi && ((uintptr_t)(a.p + i) & 31); i++) adamw_one(&k, &a, i);
        bool stream = !(((uintptr_t)(a.p + i) | (uintptr_t)(a.m + i) | (uintptr_t)(a.v + i)) & 31);
        for (; i + 8 <= hi; i += 8) {
            __m256 p, m, v;
            adamw_eight(&k, &a, i, &p, &m, &v);
            if (stream) {
                _mm256_stream_ps(a.m + i, m), _mm256_stream_ps(a.v + i, v);
                _mm256_stream_ps(a.p + i, p);
            } else {
                _mm256_storeu_ps(a.m + i, m), _mm256_storeu_ps(a.v + i, v);
                _mm256_storeu_ps(a.p + i, p);
            }
        }
        if (stream) _mm_sfence();
#endif
        for (; i < hi; i++) adamw_one(&k, &a, i);
    }
}

/* ---- mixture of experts: routing, dispatch, grouped expert matmul, combine ------------------ */

/* Softmax of each row, the top K by logit (ties: lower index), the gates, then capacity in
 * choice-major order (j = 0 for every token first) and the packed row of each kept choice. The
 * capacity pass is sequential by definition (an assignment depends on all earlier ones). */
static void moe_route_fwd(const FtOpCall *c)
{
    const float *lg = c->in[0];
    float *probs = c->out[0], *gate = c->out[2], *aux = c->out[4];
    int *expert = c->out[1], *row = c->out[3];
    long long N = c->d[0], E = c->d[1], K = c->d[2], cap = c->d[3];
    FT_ASSERT(K >= 1 && K <= E && cap >= 1);
#pragma omp parallel for schedule(static) if (PAR(N * E))
    for (long long n = 0; n < N; n++) {
        const float *l = lg + n * E;
        float *p = probs + n * E, mx = -INFINITY;
        for (long long e = 0; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (long long e = 0; e < E; e++) {
            p[e] = exp_poly(l[e] - mx);
            sum += p[e];
        }
        float inv = (float)(1.0 / sum);
        for (long long e = 0; e < E; e++) p[e] *= inv;
        for (long long j = 0; j < K; j++) {
            long long best = -1;
            for (long long e = 0; e < E; e++) {
                int taken = 0;
                for (long long i = 0; i < j; i++) taken |= expert[n * K + i] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = e;
            }
            expert[n * K + j] = (int)best;
            gate[n * K + j] = p[best];
        }
    }
    long long *cnt = calloc((size_t)E, sizeof(long long)), *off = calloc((size_t)E, sizeof(long long));
    double *f = calloc((size_t)E, sizeof(double));
    FT_ASSERT(cnt && off && f);
    for (long long j = 0; j < K; j++)
        for (long long n = 0; n < N; n++) {
            int e = expert[n * K + j];
            f[e] += 1.0;
            row[n * K + j] = cnt[e] < cap ? (int)cnt[e]++ : -1; /* position, for now */
        }
    for (long long e = 1; e < E; e++) off[e] = off[e - 1] + cnt[e - 1];
    for (long long i = 0; i < N * K; i++)
        if (row[i] >= 0) row[i] += (int)off[expert[i]];
    double a = 0;
    for (long long e = 0; e < E; e++) {
        double P = 0;
        for (long long n = 0; n < N; n++) P += probs[n * E + e];
        a += f[e] / (double)(N * K) * (P / (double)N);
    }
    aux[0] = (float)(c->x[0] * (double)E * a);
    free(cnt), free(off), free(f);
}

/* dprobs = the gates' gradients at the chosen experts + d(aux)/dprobs = coef E f_e / N times
 * d(objective)/d(aux); then the softmax backward. */
static void moe_route_bwd(const FtOpCall *c)
{
    const float *dgate = c->in[0], *probs = c->in[1];
    const int *expert = c->in[2];
    float *dl = c->out[0];
    long long N = c->d[0], E = c->d[1], K = c->d[2];
    double *fa = calloc((size_t)E, sizeof(double));
    FT_ASSERT(fa);
    for (long long i = 0; i < N * K; i++) fa[expert[i]] += 1.0;
    double s = c->x[0] * c->x[1] * (double)E / ((double)(N * K) * (double)N);
    for (long long e = 0; e < E; e++) fa[e] *= s;
#pragma omp parallel for schedule(static) if (PAR(N * E))
    for (long long n = 0; n < N; n++) {
        const float *p = probs + n * E;
        float *o = dl + n * E;
        for (long long e = 0; e < E; e++) o[e] = (float)fa[e];
        for (long long j = 0; j < K; j++) o[expert[n * K + j]] += dgate[n * K + j];
        double dot = 0;
        for (long long e = 0; e < E; e++) dot += (double)p[e] * o[e];
        for (long long e = 0; e < E; e++) o[e] = p[e] * (o[e] - (float)dot);
    }
    free(fa);
}

static void moe_dispatch_fwd(const FtOpCall *c)
{
    const float *x = c->in[0];
    const int *expert = c->in[1], *row = c->in[2];
    float *xs = c->out[0];
    int *counts = c->out[1];
    long long N = c->d[0], C = c->d[1], K = c->d[2], E = c->d[3];
    memset(xs, 0, sizeof(float) * (size_t)(N * K * C));
    for (long long e = 0; e < E; e++) counts[e] = 0;
    for (long long i = 0; i < N * K; i++) {
        if (row[i] < 0) continue;
        counts[expert[i]]++;
        memcpy(xs + (size_t)row[i] * C, x + (size_t)(i / K) * C, sizeof(float) * C);
    }
}

static void moe_dispatch_bwd(const FtOpCall *c)
{
    const float *dxs = c->in[0], *dadd = c->in[2];
    const int *row = c->in[1];
    float *dx = c->out[0];
    long long N = c->d[0], C = c->d[1], K = c->d[2];
#pragma omp parallel for schedule(static) if (PAR(N * C * K))
    for (long long n = 0; n < N; n++) {
        float *o = dx + n * C;
        for (long long i = 0; i < C; i++) o[i] = dadd ? dadd[n * C + i] : 0.0f;
        for (long long j = 0; j < K; j++) {
            int r = row[n * K + j];
            if (r < 0) continue;
            const float *g = dxs + (size_t)r * C;
            for (long long i = 0; i < C; i++) o[i] += g[i];
        }
    }
}

/* Rows of block (g, e) start at the sum of the earlier blocks' counts; returns the total. */
static long long expert_blocks(const FtOpCall *c, long long G, long long El, long long R)
{
    const int *counts = c->in[3];
    long long total = 0;
    for (long long b = 0; b < G * El; b++) {
        FT_ASSERT(counts[b] >= 0);
        total += counts[b];
    }
    if (total > R) FT_DIE("moe expert: %lld rows routed to this rank, buffer holds %lld", total, R);
    return total;
}

static void moe_expert_fwd(const FtOpCall *c)
{
    const float *x = c->in[0], *w = c->in[1], *b = c->in[2];
    const int *counts = c->in[3];
    float *y = c->out[0];
    long long R = c->d[0], C = c->d[1], OC = c->d[2], El = c->d[3], G = (long long)c->x[0];
    long long total = expert_blocks(c, G, El, R), r0 = 0;
    for (long long g = 0; g < G; g++)
        for (long long e = 0; e < El; e++) {
            long long n = counts[g * El + e];
            if (n) {
                FtOpCall mc = {.in = {x + r0 * C, w + e * OC * C, b ? b + e * OC : NULL},
                               .out = {y + r0 * OC}, .d = {n, C, OC}};
                matmul_fwd(&mc);
            }
            r0 += n;
        }
    memset(y + total * OC, 0, sizeof(float) * (size_t)((R - total) * OC));
}

static void moe_expert_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0], *x = c->in[1], *w = c->in[2];
    const int *counts = c->in[3];
    float *dx = c->out[0], *dw = c->out[1], *db = c->out[2];
    long long R = c->d[0], C = c->d[1], OC = c->d[2], El = c->d[3], G = (long long)c->x[0];
    init_from(dw, c->in[4], (size_t)(El * OC * C));
    if (db) init_from(db, c->in[5], (size_t)(El * OC));
    long long total = expert_blocks(c, G, El, R), r0 = 0;
    for (long long g = 0; g < G; g++)
        for (long long e = 0; e < El; e++) {
            long long n = counts[g * El + e];
            if (n)
                matmul_bwd_into(dy + r0 * OC, x + r0 * C, w + e * OC * C, dx ? dx + r0 * C : NULL,
                                dw + e * OC * C, db ? db + e * OC : NULL, (int)n, (int)C,
                                (int)OC);
            r0 += n;
        }
    if (dx) memset(dx + total * C, 0, sizeof(float) * (size_t)((R - total) * C));
}

static void moe_combine_fwd(const FtOpCall *c)
{
    const float *yr = c->in[0], *gate = c->in[1];
    const int *row = c->in[2];
    float *y = c->out[0];
    long long N = c->d[0], C = c->d[1], K = c->d[2];
#pragma omp parallel for schedule(static) if (PAR(N * C * K))
    for (long long n = 0; n < N; n++) {
        float *o = y + n * C;
        for (long long i = 0; i < C; i++) o[i] = 0.0f;
        for (long long j = 0; j < K; j++) {
            int r = row[n * K + j];
            if (r < 0) continue;
            float gj = gate[n * K + j];
            const float *v = yr + (size_t)r * C;
            for (long long i = 0; i < C; i++) o[i] += gj * v[i];
        }
    }
}

static void moe_combine_bwd(const FtOpCall *c)
{
    const float *dy = c->in[0], *yr = c->in[1], *gate = c->in[2];
    const int *row = c->in[3];
    float *dyr = c->out[0], *dgate = c->out[1];
    long long N = c->d[0], C = c->d[1], K = c->d[2];
    memset(dyr, 0, sizeof(float) * (size_t)(N * K * C));
#pragma omp parallel for schedule(static) if (PAR(N * C * K))
    for (long long n = 0; n < N; n++) {
        const float *g = dy + n * C;
        for (long long j = 0; j < K; j++) {
            int r = row[n * K + j];
            if (r < 0) {
                dgate[n * K + j] = 0.0f;
                continue;
            }
            const float *v = yr + (size_t)r * C;
            float *o = dyr + (size_t)r * C, gj = gate[n * K + j];
            double dot = 0;
            for (long long i = 0; i < C; i++) {
                o[i] = gj * g[i];
                dot += (double)g[i] * v[i];
            }
            dgate[n * K + j] = (float)dot;
        }
    }
}

/* ---- FLOPs and bytes ----------------------------------------------------------------------- */

#define F4 4.0 /* bytes per float */

static double encoder_flops(const FtOpCall *c, FtOpDir dir)
{
    double n = (double)c->d[0] * c->d[1] * c->d[2];
    if (dir == FT_BWD && c->in[4]) n += n * c->x[0]; /* the tied LM head's dW: 2 N C Vp */
    return (dir == FT_FWD ? 1.0 : 2.0) * n;
}
static double encoder_bytes(const FtOpCall *c, FtOpDir dir)
{
    double n = (double)c->d[0] * c->d[1] * c->d[2];
    if (dir == FT_FWD) return 3 * n * F4; /* rows of wte and wpe read, x written */
    /* dx read, the touched rows read and written again; both tables read (prev) and written
     * whole (every output byte is written); the tied LM head's dlogits and lnf read */
    double tables = (c->x[0] + c->x[1]) * c->d[2], N = (double)c->d[0] * c->d[1];
    double head = c->in[4] ? N * (c->x[0] + c->d[2]) : 0;
    return (3 * n + 2 * tables + head) * F4;
}
static double layernorm_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 8.0 : 14.0) * c->d[0] * c->d[1];
}
static double layernorm_bytes(const FtOpCall *c, FtOpDir dir)
{
    double n = (double)c->d[0] * c->d[1];
    return (dir == FT_FWD ? 2 * n : 5 * n) * F4;
}
static double matmul_flops(const FtOpCall *c, FtOpDir dir)
{
    double mnk = 2.0 * c->d[0] * c->d[1] * c->d[2];
    if (dir == FT_FWD) return mnk;
    return ((c->out[0] ? 1.0 : 0.0) + (c->out[1] || !c->out[0] ? 1.0 : 0.0)) * mnk; /* dx, dw */
}
static double matmul_bytes(const FtOpCall *c, FtOpDir dir)
{
    double N = c->d[0], C = c->d[1], OC = c->d[2];
    if (dir == FT_FWD) return (N * C + OC * C + N * OC) * F4;
    return (N * OC + N * C + 3 * OC * C + (c->out[0] ? N * C : 0)) * F4;
}
static double attention_flops(const FtOpCall *c, FtOpDir dir)
{
    /* QK^T and att V over the causal half: 2 GEMM-like products of B NH T(T+1)/2 HS MACs; the
     * backward computes QK^T again, then 4 more */
    double B = c->d[0], T = c->d[1], C = c->d[2];
    double f = 2.0 * 2.0 * B * C * T * (T + 1) / 2.0;
    return dir == FT_FWD ? f : 2.5 * f;
}
static double attention_bytes(const FtOpCall *c, FtOpDir dir)
{
    /* qkv in, y out and lse (fwd); dy, qkv and lse in, dqkv out (bwd): no T x T traffic */
    double B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3];
    return (dir == FT_FWD ? 4.0 * B * T * C : 7.0 * B * T * C) * F4 + B * NH * T * F4;
}
static double elementwise_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 8.0 : 16.0) * c->d[0];
}
static double elementwise_bytes(const FtOpCall *c, FtOpDir dir)
{
    return 3.0 * c->d[0] * F4;
}
static double residual_flops(const FtOpCall *c, FtOpDir dir)
{
    return dir == FT_FWD ? (double)c->d[0] : 0.0; /* a + b; the backward copies dy twice */
}
static double crossent_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 5.0 : 2.0) * c->d[0] * c->d[1];
}
static double crossent_bytes(const FtOpCall *c, FtOpDir dir)
{
    return 2.0 * c->d[0] * c->d[2] * F4;
}
static double lossmean_flops(const FtOpCall *c, FtOpDir dir) { return (double)c->d[0]; }
static double lossmean_bytes(const FtOpCall *c, FtOpDir dir) { return c->d[0] * F4; }
static double gradnorm_flops(const FtOpCall *c, FtOpDir dir) { return 2.0 * c->d[0]; }
static double gradnorm_bytes(const FtOpCall *c, FtOpDir dir) { return c->d[0] * F4; }
static double adamw_flops(const FtOpCall *c, FtOpDir dir) { return 14.0 * c->d[0]; }
static double adamw_bytes(const FtOpCall *c, FtOpDir dir) { return 7.0 * c->d[0] * F4; }
static double moe_route_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 6.0 + 2.0 * c->d[2] : 5.0) * c->d[0] * c->d[1];
}
static double moe_route_bytes(const FtOpCall *c, FtOpDir dir)
{
    return (2.0 * c->d[0] * c->d[1] + 4.0 * c->d[0] * c->d[2]) * F4;
}
static double moe_dispatch_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 1.0 : 2.0) * c->d[0] * c->d[1] * c->d[2];
}
static double moe_dispatch_bytes(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 2.0 : 3.0) * c->d[0] * c->d[1] * c->d[2] * F4;
}
/* FLOPs of the nominal rows (x[1]; d[0], the buffer's capacity, when 0): the rows routed to an
 * expert vary per micro-batch, the planner wants a fixed figure. */
static double moe_expert_rows(const FtOpCall *c) { return c->x[1] > 0 ? c->x[1] : (double)c->d[0]; }
static double moe_expert_flops(const FtOpCall *c, FtOpDir dir)
{
    FtOpCall m = {.out = {c->out[0]}, .d = {(long long)moe_expert_rows(c), c->d[1], c->d[2]}};
    return matmul_flops(&m, dir);
}
static double moe_expert_bytes(const FtOpCall *c, FtOpDir dir)
{
    double rows = moe_expert_rows(c), C = c->d[1], OC = c->d[2], El = c->d[3] > 0 ? c->d[3] : 1;
    return (dir == FT_FWD ? rows * (C + OC) + El * OC * C : 2 * rows * (C + OC) + 3 * El * OC * C) * F4;
}
static double moe_combine_flops(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 2.0 : 4.0) * c->d[0] * c->d[1] * c->d[2];
}
static double moe_combine_bytes(const FtOpCall *c, FtOpDir dir)
{
    return (dir == FT_FWD ? 2.0 : 3.0) * c->d[0] * c->d[1] * c->d[2] * F4;
}
static double zero_cost(const FtOpCall *c, FtOpDir dir) { return 0.0; }
static void mark_fn(const FtOpCall *c) { (void)c; }

static const FtOpDesc g_cpu_ops[FT_OP_NKINDS] = {
    [FT_OP_ENCODER] = {"encoder", encoder_fwd, encoder_bwd, NULL, NULL, encoder_flops,
                       encoder_bytes},
    [FT_OP_LAYERNORM] = {"layernorm", layernorm_fwd, layernorm_bwd, NULL, NULL, layernorm_flops,
                         layernorm_bytes},
    [FT_OP_MATMUL] = {"matmul", matmul_fwd, matmul_bwd, matmul_fwd_ref, matmul_bwd_ref,
                      matmul_flops, matmul_bytes},
    [FT_OP_ATTENTION] = {"attention", attention_fwd, attention_bwd, attention_fwd_ref,
                         attention_bwd_ref, attention_flops,
                         attention_bytes},
    [FT_OP_GELU] = {"gelu", gelu_fwd, gelu_bwd, NULL, NULL, elementwise_flops,
                    elementwise_bytes},
    [FT_OP_RESIDUAL] = {"residual", residual_fwd, residual_bwd, NULL, NULL, residual_flops,
                        elementwise_bytes},
    [FT_OP_CROSSENT] = {"crossentropy", crossent_fwd, crossent_bwd, NULL, NULL, crossent_flops,
                        crossent_bytes},
    [FT_OP_LOSSMEAN] = {"lossmean", lossmean_fwd, NULL, NULL, NULL, lossmean_flops,
                        lossmean_bytes},
    [FT_OP_GRADNORM] = {"gradnorm", gradnorm_fwd, NULL, NULL, NULL, gradnorm_flops,
                        gradnorm_bytes},
    [FT_OP_ADAMW] = {"adamw", adamw_fwd, NULL, NULL, NULL, adamw_flops, adamw_bytes},
    [FT_OP_MOE_ROUTE] = {"moe_route", moe_route_fwd, moe_route_bwd, NULL, NULL, moe_route_flops,
                         moe_route_bytes},
    [FT_OP_MOE_DISPATCH] = {"moe_dispatch", moe_dispatch_fwd, moe_dispatch_bwd, NULL, NULL,
                            moe_dispatch_flops, moe_dispatch_bytes},
    [FT_OP_MOE_EXPERT] = {"moe_expert", moe_expert_fwd, moe_expert_bwd, NULL, NULL,
                          moe_expert_flops, moe_expert_bytes},
    [FT_OP_MOE_COMBINE] = {"moe_combine", moe_combine_fwd, moe_combine_bwd, NULL, NULL,
                           moe_combine_flops, moe_combine_bytes},
    [FT_OP_MARK] = {"mark", mark_fn, mark_fn, NULL, NULL, zero_cost, zero_cost},
};

const FtOpDesc *ops_cpu_table(void) { return g_cpu_ops; }


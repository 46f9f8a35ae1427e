/* attention_gemm_plan.h: ATTENTION (ops.h) as batched GEMMs (ops_attention_gemm.cu): the
 * cuBLAS calls as descriptors, and the per-row softmax arithmetic between them, in plain C that
 * nvcc compiles into the CUDA file and the C compiler into tests/test_attention_gemm.c, which
 * runs the same descriptors through a reference column-major GEMM on the CPU against the CPU op.
 * Only the launch of each GEMM and the block-parallel row kernels are not checked there.
 *
 * The products are the CPU op's fast path (ops_cpu.c), per batch row b and head h, with Q, K, V
 * the (T, HS) row-major views of qkv (rows 3C apart) and S, P, dP, dS (T, T) row-major:
 *   forward   S = scale Q K^T;  P = softmax of S's causal part (zeros above the diagonal),
 *             lse = max + log(sum exp(s - max));  Y = P V
 *   backward  S again; P = exp(S - lse) (causal); dP = dY V^T; dS = P (dP - rowsum(P dP));
 *             dV = P^T dY;  dQ = scale dS K;  dK = scale dS^T Q   (every slice of dqkv written)
 * cuBLAS is column-major: a row-major (r, c) matrix with rows ld apart is its column-major
 * transpose (c, r) with leading dimension ld, so each product is computed transposed, e.g.
 * S^T = K Q^T. One call per b covers the NH heads as a strided batch: a head's Q, K, V, Y and
 * dqkv slices are HS floats apart, its S, P, dP, dS T^2 floats apart. */
#ifndef FTLLM_ATTENTION_GEMM_PLAN_H
#define FTLLM_ATTENTION_GEMM_PLAN_H

#include <math.h>

#ifdef __CUDACC__
#define AG_FN __host__ __device__ __forceinline__
#else
#define AG_FN static inline
#endif

/* The buffers a descriptor names; an offset counts floats from the buffer's start. */
enum ag_buf { AG_QKV, AG_Y, AG_DY, AG_DQKV, AG_P, AG_DS };

typedef struct ag_gemm {
    int ta, tb;    /* op(A), op(B): 0 = as stored, 1 = transposed */
    int m, n, k;   /* C (m, n) = alpha op(A) (m, k) op(B) (k, n), column-major, beta 0 */
    float alpha;
    int a, b, c;   /* enum ag_buf */
    long long a_off, b_off, c_off; /* of batch 0 of batch row 0 */
    long long a_row, b_row, c_row; /* added per batch row b */
    int lda, ldb, ldc;
    long long sa, sb, sc; /* strides between the heads of one call */
    int batch;            /* NH */
} AgGemm;

typedef struct ag_shape {
    long long T, C, NH, HS;
} AgShape;

AG_FN AgShape ag_shape(long long T, long long C, long long NH)
{
    AgShape s = {T, C, NH, C / NH};
    return s;
}

AG_FN AgGemm ag_gemm(int ta, int tb, long long m, long long n, long long k, float alpha)
{
    AgGemm g;
    g.ta = ta, g.tb = tb, g.m = (int)m, g.n = (int)n, g.k = (int)k, g.alpha = alpha;
    g.a = g.b = g.c = 0;
    g.a_off = g.b_off = g.c_off = g.a_row = g.b_row = g.c_row = 0;
    g.lda = g.ldb = g.ldc = 0;
    g.sa = g.sb = g.sc = 0;
    g.batch = 0;
    return g;
}

/* Operand x of g: buffer, offset (part: 0 q, 1 k, 2 v of qkv or dqkv), leading dimension,
 * per-row step and per-head stride, for each buffer's layout. */
AG_FN void ag_operand(const AgShape *s, int buf, int part, int *which, long long *off,
                      long long *row, int *ld, long long *stride)
{
    long long T = s->T, C = s->C, HS = s->HS;
    *which = buf;
    switch (buf) {
    case AG_QKV:
    case AG_DQKV: *off = part * C, *row = T * 3 * C, *ld = (int)(3 * C), *stride = HS; break;
    case AG_Y:
    case AG_DY: *off = 0, *row = T * C, *ld = (int)C, *stride = HS; break;
    default: *off = 0, *row = s->NH * T * T, *ld = (int)T, *stride = T * T; break; /* P, dS */
    }
}

#define AG_A(g, s, buf, part) ag_operand(s, buf, part, &(g).a, &(g).a_off, &(g).a_row, &(g).lda, &(g).sa)
#define AG_B(g, s, buf, part) ag_operand(s, buf, part, &(g).b, &(g).b_off, &(g).b_row, &(g).ldb, &(g).sb)
#define AG_C(g, s, buf, part) ag_operand(s, buf, part, &(g).c, &(g).c_off, &(g).c_row, &(g).ldc, &(g).sc)

/* S = scale Q K^T into P's buffer: S^T (T, T) = K (T, HS) Q^T, K = (K^T stored)^T. */
AG_FN AgGemm ag_scores(const AgShape *s, float scale)
{
    AgGemm g = ag_gemm(1, 0, s->T, s->T, s->HS, scale);
    AG_A(g, s, AG_QKV, 1), AG_B(g, s, AG_QKV, 0), AG_C(g, s, AG_P, 0);
    g.batch = (int)s->NH;
    return g;
}

/* Y = P V: Y^T (HS, T) = V^T (stored as is) P^T (stored as is). */
AG_FN AgGemm ag_out(const AgShape *s)
{
    AgGemm g = ag_gemm(0, 0, s->HS, s->T, s->T, 1.0f);
    AG_A(g, s, AG_QKV, 2), AG_B(g, s, AG_P, 0), AG_C(g, s, AG_Y, 0);
    g.batch = (int)s->NH;
    return g;
}

/* dP = dY V^T into dS's buffer: dP^T (T, T) = V (T, HS) dY^T, V = (V^T stored)^T. */
AG_FN AgGemm ag_dp(const AgShape *s)
{
    AgGemm g = ag_gemm(1, 0, s->T, s->T, s->HS, 1.0f);
    AG_A(g, s, AG_QKV, 2), AG_B(g, s, AG_DY, 0), AG_C(g, s, AG_DS, 0);
    g.batch = (int)s->NH;
    return g;
}

/* dV = P^T dY: dV^T (HS, T) = dY^T (stored as is) P, P = (P^T stored)^T. */
AG_FN AgGemm ag_dv(const AgShape *s)
{
    AgGemm g = ag_gemm(0, 1, s->HS, s->T, s->T, 1.0f);
    AG_A(g, s, AG_DY, 0), AG_B(g, s, AG_P, 0), AG_C(g, s, AG_DQKV, 2);
    g.batch = (int)s->NH;
    return g;
}

/* dQ = scale dS K: dQ^T (HS, T) = K^T (stored as is) dS^T (stored as is). */
AG_FN AgGemm ag_dq(const AgShape *s, float scale)
{
    AgGemm g = ag_gemm(0, 0, s->HS, s->T, s->T, scale);
    AG_A(g, s, AG_QKV, 1), AG_B(g, s, AG_DS, 0), AG_C(g, s, AG_DQKV, 0);
    g.batch = (int)s->NH;
    return g;
}

/* dK = scale dS^T Q: dK^T (HS, T) = Q^T (stored as is) dS, dS = (dS^T stored)^T. */
AG_FN AgGemm ag_dk(const AgShape *s, float scale)
{
    AgGemm g = ag_gemm(0, 1, s->HS, s->T, s->T, scale);
    AG_A(g, s, AG_QKV, 0), AG_B(g, s, AG_DS, 0), AG_C(g, s, AG_DQKV, 1);
    g.batch = (int)s->NH;
    return g;
}

/* ---- the rows between the GEMMs (one row t of one (b, h); the kernels: one block per row,
 * the maximum and the sums over a fixed tree; here in order) ------------------------------- */

/* The softmax of r[0..t] in place (the scaled scores), zeros in r[t+1..T-1]; returns lse. */
AG_FN float ag_softmax_row(float *r, long long t, long long T)
{
    float mx = -INFINITY;
    for (long long j = 0; j <= t; j++) mx = r[j] > mx ? r[j] : mx;
    double sum = 0;
    for (long long j = 0; j <= t; j++) {
        float e = expf(r[j] - mx);
        r[j] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (long long j = 0; j <= t; j++) r[j] *= inv;
    for (long long j = t + 1; j < T; j++) r[j] = 0.0f;
    return mx + (float)log(sum);
}

/* The probabilities again from the scaled scores r and the forward's lse, in place. */
AG_FN void ag_prob_row(float *r, long long t, long long T, float lse)
{
    for (long long j = 0; j <= t; j++) r[j] = expf(r[j] - lse);
    for (long long j = t + 1; j < T; j++) r[j] = 0.0f;
}

/* dS = P (dP - sum_j P dP) of row t, in place over dP; zeros above the diagonal. */
AG_FN void ag_dsoftmax_row(const float *p, float *dp, long long t, long long T)
{
    double d = 0;
    for (long long j = 0; j <= t; j++) d += (double)p[j] * dp[j];
    for (long long j = 0; j <= t; j++) dp[j] = p[j] * (dp[j] - (float)d);
    for (long long j = t + 1; j < T; j++) dp[j] = 0.0f;
}

#endif

/* attention_flash_rows.h: what one thread of the tiled attention kernels (ops_attention_flash.cu)
 * does with one tile of the other operand, and which rows of a tile it takes: plain C that
 * nvcc compiles for the device and the C compiler for the host, so that tests/test_flash_rows.c
 * runs the kernels' arithmetic block by block on the CPU (no GPU here) against the CPU op.
 *
 * A tile is n rows of hs floats in shared memory (row r at tile + r hs). A thread's rows (q, g,
 * k, v and its accumulators) are hs floats of its own. Every loop runs in a fixed order, so a
 * thread's results depend on nothing but its inputs. */
#ifndef FTLLM_ATTENTION_FLASH_ROWS_H
#define FTLLM_ATTENTION_FLASH_ROWS_H

#include <math.h>

#ifdef __CUDACC__
#define FL_FN __host__ __device__ __forceinline__
#else
#define FL_FN static inline
#endif

/* Of the keys k0 .. k0 + nk - 1, how many query t sees (k0 + j <= t); 0 or less: none. */
FL_FN int fl_keys_seen(int t, int k0, int nk) { return t - k0 + 1 < nk ? t - k0 + 1 : nk; }

/* Of the queries q0 .. q0 + nq - 1, the first that sees key t2 (q0 + j >= t2). */
FL_FN int fl_first_query(int t2, int q0) { return t2 - q0 > 0 ? t2 - q0 : 0; }

/* The keys a block of queries [b0, b0 + rows) needs: [0, end). */
FL_FN int fl_key_end(int T, int b0, int rows) { return b0 + rows < T ? b0 + rows : T; }

FL_FN float fl_dot(const float *a, const float *b, int hs)
{
    float s = 0.0f;
    for (int i = 0; i < hs; i++) s += a[i] * b[i];
    return s;
}

/* Forward, one tile: the online softmax of query q over the tile's first jn keys (ks, vs),
 * carrying the running maximum *m, the running sum *l and the unnormalized output acc. */
FL_FN void fl_fwd_tile(const float *q, float *acc, float *m, float *l, const float *ks,
                       const float *vs, int jn, int hs, float scale)
{
    for (int j = 0; j < jn; j++) {
        float s = fl_dot(q, ks + j * hs, hs) * scale;
        if (s > *m) { /* the first key: m = -inf, so the factor is 0 on an empty sum */
            float f = expf(*m - s);
            *l *= f;
            for (int i = 0; i < hs; i++) acc[i] *= f;
            *m = s;
        }
        float p = expf(s - *m);
        *l += p;
        for (int i = 0; i < hs; i++) acc[i] += p * vs[j * hs + i];
    }
}

/* Backward for dq, one tile of jn keys: pass 0 adds p (dy . v) into *dsum (D); pass 1 adds
 * p (dy . v - d) k into dq (scaled at the end). p = exp(q.k scale - lt). */
FL_FN void fl_dq_tile(int pass, const float *q, const float *g, float *dq, double *dsum, float d,
                      float lt, const float *ks, const float *vs, int jn, int hs, float scale)
{
    for (int j = 0; j < jn; j++) {
        float s = fl_dot(q, ks + j * hs, hs), dp = fl_dot(g, vs + j * hs, hs);
        float p = expf(s * scale - lt);
        if (pass == 0) {
            *dsum += (double)p * dp;
        } else {
            float ds = p * (dp - d);
            for (int i = 0; i < hs; i++) dq[i] += ds * ks[j * hs + i];
        }
    }
}

/* Backward for key k (and v), one tile of queries qs, their dy rows gs, lse ls and D ds, from
 * query j0 to nq - 1: dk (want_dk) adds p (dy . v - D) q, else dv adds p dy. */
FL_FN void fl_kv_tile(int want_dk, const float *k, const float *v, float *acc, const float *qs,
                      const float *gs, const float *ls, const float *ds, int j0, int nq, int hs,
                      float scale)
{
    for (int j = j0; j < nq; j++) {
        float p = expf(fl_dot(qs + j * hs, k, hs) * scale - ls[j]);
        if (!want_dk) {
            for (int i = 0; i < hs; i++) acc[i] += p * gs[j * hs + i];
        } else {
            float dsv = p * (fl_dot(gs + j * hs, v, hs) - ds[j]);
            for (int i = 0; i < hs; i++) acc[i] += dsv * qs[j * hs + i];
        }
    }
}

#undef FL_FN
#endif

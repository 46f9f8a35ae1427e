/* test_moe.c: the mixture-of-experts ops and model on one rank.
 *  - a whole MoE layer (router, routing, dispatch, each expert's GELU MLP, combine) built from
 *    the op kinds against a double-precision dense reference that computes the experts one by
 *    one (for each expert, its kept tokens), forward and backward; the backward against central
 *    finite differences of that reference, for the objective sum(G * y) + s * aux, with a
 *    capacity small enough that tokens are dropped (the test asserts some are);
 *  - the routing op alone (top-k ties to the lower expert, capacity in choice-major order, the
 *    auxiliary loss and its gradient), and the grouped expert matmul with two source groups
 *    and unused tail rows against a per-block reference and finite differences;
 *  - bitwise determinism of every MoE op (two runs on 2 threads, garbage in the outputs first);
 *  - the MoE model on the tape: it trains, activation checkpointing gives bitwise-identical
 *    gradients, two runs give the same bits, the gradient is linear in the loss scale (the
 *    auxiliary loss's part too);
 *  - the deck's cross-checks (ep > 1 needs experts, experts % ep, top_k <= experts, no llm.c
 *    file for a MoE model).
 * ft-test: ranks 1
 *
 * Tolerances (relative L2 error per tensor), as in test_ops.c and for the same reasons:
 *   forward fp32 vs double reference       1e-5  (fp32 rounding; GELU's tanh and the softmax's
 *                                                 exp are ~2e-7 approximations)
 *   backward fp32 vs double finite diff.   1e-4  (central differences with h = 1e-4 in double
 *                                                 are exact to ~1e-9; fp32 rounding dominates)
 * Finite differences are taken where the routing is locally constant (the test checks that no
 * perturbation changes a top-k choice or a capacity decision); a wrong formula is off by O(1).
 * Routing is discrete, so comparing the fp32 op's routing with the double reference's is only
 * sound away from near-ties: the test computes, from its fixed inputs, the smallest gap between
 * consecutive top logits of a token against the largest error fp32 can make in that gap (a
 * C-term dot product in any order, with or without FMA: C u sum |x w| per logit) and requires a
 * factor > 10, so the comparison holds on any CPU and BLAS (the inputs here: ~1700). The
 * finite-difference routing check runs in double with plain + and * (no FMA contraction under
 * -std=c11), so it gives the same answer everywhere too. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"
#include "ftllm/ops.h"
#include "ftllm/train.h"

#define FWD_TOL 1e-5
#define BWD_TOL 1e-4

static unsigned long long g_rng = 7;
static double urand(void)
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(float *a, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) a[i] = (float)((2 * urand() - 1) * scale);
}
static double *to_d(const float *a, size_t n)
{
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}
static double rel_err(const float *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static void expect_close(const char *what, const float *a, const double *ref, size_t n, double tol)
{
    double e = rel_err(a, ref, n);
    printf("  %-34s rel err %.2e (tol %.0e)\n", what, e, tol);
    if (!(e <= tol)) fail_msg("%s: relative error %.3e > %.0e", what, e, tol);
}
static void run(FtOpKind k, FtOpDir dir, const FtOpCall *c) { exec_op(k, dir, c, NULL); }

/* ---- the double-precision dense reference of a MoE layer ----------------------------------- */

enum { N = 12, C = 6, E = 4, H = 8, K = 2, CAP = 4, NK = N * K };
#define COEF 0.05
#define SAUX 0.7 /* d(objective)/d(aux) */

typedef struct ref {
    double *x, *wr, *w1, *b1, *w2, *b2, *G; /* inputs (double copies) and the output weights */
    int expert[NK], row[NK];                 /* routing of the last evaluation */
    int expert0[NK], row0[NK];               /* routing at the unperturbed point */
    int changed;                             /* a perturbation changed the routing */
} Ref;
static Ref g;

static double gelu_d(double v)
{
    return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

/* y (N,C) and aux of the layer at g's inputs; also fills g.expert / g.row (packed rows). */
static void ref_layer(double *y, double *aux, double *probs_out)
{
    double lg[N * E], pr[N * E];
    for (int n = 0; n < N; n++) {
        double mx = -1e300, s = 0;
        for (int e = 0; e < E; e++) {
            double v = 0;
            for (int i = 0; i < C; i++) v += g.x[n * C + i] * g.wr[e * C + i];
            lg[n * E + e] = v;
            mx = v > mx ? v : mx;
        }
        for (int e = 0; e < E; e++) s += pr[n * E + e] = exp(lg[n * E + e] - mx);
        for (int e = 0; e < E; e++) pr[n * E + e] /= s;
        for (int j = 0; j < K; j++) { /* top-k by logit, ties to the lower expert */
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= g.expert[n * K + i] == e;
                if (!taken && (best < 0 || lg[n * E + e] > lg[n * E + best])) best = e;
            }
            g.expert[n * K + j] = best;
        }
    }
    int cnt[E] = {0}, off[E] = {0};
    double f[E] = {0};
    for (int j = 0; j < K; j++)
        for (int n = 0; n < N; n++) {
            int e = g.expert[n * K + j];
            f[e] += 1.0 / NK;
            g.row[n * K + j] = cnt[e] < CAP ? cnt[e]++ : -1;
        }
    for (int e = 1; e < E; e++) off[e] = off[e - 1] + cnt[e - 1];
    for (int i = 0; i < NK; i++)
        if (g.row[i] >= 0) g.row[i] += off[g.expert[i]];
    double a = 0;
    for (int e = 0; e < E; e++) {
        double P = 0;
        for (int n = 0; n < N; n++) P += pr[n * E + e] / N;
        a += f[e] * P;
    }
    *aux = COEF * E * a;
    /* the experts one by one: expert e's MLP on each token that chose it and was kept */
    memset(y, 0, sizeof(double) * N * C);
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++)
            for (int j = 0; j < K; j++) {
                if (g.expert[n * K + j] != e || g.row[n * K + j] < 0) continue;
                double h[H];
                for (int o = 0; o < H; o++) {
                    double v = g.b1[e * H + o];
                    for (int i = 0; i < C; i++) v += g.w1[(e * H + o) * C + i] * g.x[n * C + i];
                    h[o] = gelu_d(v);
                }
                for (int o = 0; o < C; o++) {
                    double v = g.b2[e * C + o];
                    for (int i = 0; i < H; i++) v += g.w2[(e * C + o) * H + i] * h[i];
                    y[n * C + o] += pr[n * E + e] * v;
                }
            }
    if (probs_out) memcpy(probs_out, pr, sizeof pr);
}

/* The routing certificate: the smallest gap, over tokens, between a token's consecutive logits
 * in descending order down to its (K+1)-th, which decide its top-k set and choice order
 * (capacity then depends on those choices only), divided by the largest error the fp32 router
 * matmul can make in a gap. A logit is a C-term dot product of floats; summed in any order, with
 * or without FMA, its error is at most C u sum_i |x_i w_ei| (u = 2^-24), so a gap moves by at
 * most twice that. A ratio > 1 means the fp32 routing equals the double one on any CPU. */
static double routing_margin(void)
{
    double worst = INFINITY;
    for (int n = 0; n < N; n++) {
        double lg[E], err = 0;
        for (int e = 0; e < E; e++) {
            double v = 0, a = 0;
            for (int i = 0; i < C; i++) {
                v += g.x[n * C + i] * g.wr[e * C + i];
                a += fabs(g.x[n * C + i] * g.wr[e * C + i]);
            }
            lg[e] = v;
            err = fmax(err, 2 * C * 0x1p-24 * a);
        }
        for (int i = 1; i < E; i++) /* descending */
            for (int k = i; k > 0 && lg[k] > lg[k - 1]; k--) {
                double t = lg[k];
                lg[k] = lg[k - 1], lg[k - 1] = t;
            }
        for (int j = 0; j < K && j + 1 < E; j++) worst = fmin(worst, (lg[j] - lg[j + 1]) / err);
    }
    return worst;
}

static double ref_obj(void)
{
    double y[N * C], aux;
    ref_layer(y, &aux, NULL);
    if (memcmp(g.expert, g.expert0, sizeof g.expert) || memcmp(g.row, g.row0, sizeof g.row))
        g.changed = 1;
    double f = SAUX * aux;
    for (int i = 0; i < N * C; i++) f += g.G[i] * y[i];
    return f;
}

static void fd_check(const char *what, double *x, size_t n, const float *a)
{
    double *fd = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i], h = 1e-4 * (fabs(x0) > 1 ? fabs(x0) : 1);
        x[i] = x0 + h;
        double fp = ref_obj();
        x[i] = x0 - h;
        double fm = ref_obj();
        x[i] = x0;
        fd[i] = (fp - fm) / (2 * h);
    }
    assert_false(g.changed); /* the routing was locally constant */
    expect_close(what, a, fd, n, BWD_TOL);
    free(fd);
}

/* The layer from the op kinds, forward and backward, against the reference. */
static void test_layer_vs_dense_reference(void **state)
{
    (void)state;
    ops_cpu_set_parallel_min(0);
    float x[N * C], wr[E * C], w1[E * H * C], b1[E * H], w2[E * C * H], b2[E * C], G[N * C];
    fill(x, N * C, 1.0), fill(wr, E * C, 1.0), fill(w1, E * H * C, 0.5), fill(b1, E * H, 0.2);
    fill(w2, E * C * H, 0.5), fill(b2, E * C, 0.2), fill(G, N * C, 1.0);
    float rlog[N * E], probs[N * E], gate[NK], aux, xs[NK * C], h[NK * H], hg[NK * H];
    float ye[NK * C], y[N * C];
    int expert[NK], row[NK], counts[E];
    run(FT_OP_MATMUL, FT_FWD, &(FtOpCall){.in = {x, wr, NULL}, .out = {rlog}, .d = {N, C, E}});
    run(FT_OP_MOE_ROUTE, FT_FWD, &(FtOpCall){.in = {rlog}, .out = {probs, expert, gate, row, &aux},
                                            .d = {N, E, K, CAP}, .x = {COEF}});
    run(FT_OP_MOE_DISPATCH, FT_FWD,
        &(FtOpCall){.in = {x, expert, row}, .out = {xs, counts}, .d = {N, C, K, E}});
    run(FT_OP_MOE_EXPERT, FT_FWD, &(FtOpCall){.in = {xs, w1, b1, counts}, .out = {h},
                                             .d = {NK, C, H, E}, .x = {1, NK}});
    run(FT_OP_GELU, FT_FWD, &(FtOpCall){.in = {h}, .out = {hg}, .d = {NK * H}});
    run(FT_OP_MOE_EXPERT, FT_FWD, &(FtOpCall){.in = {hg, w2, b2, counts}, .out = {ye},
                                             .d = {NK, H, C, E}, .x = {1, NK}});
    run(FT_OP_MOE_COMBINE, FT_FWD,
        &(FtOpCall){.in = {ye, gate, row}, .out = {y}, .d = {N, C, K}});

    g = (Ref){.x = to_d(x, N * C), .wr = to_d(wr, E * C), .w1 = to_d(w1, E * H * C),
              .b1 = to_d(b1, E * H), .w2 = to_d(w2, E * C * H), .b2 = to_d(b2, E * C),
              .G = to_d(G, N * C)};
    double yref[N * C], auxref, pref[N * E];
    ref_layer(yref, &auxref, pref);
    memcpy(g.expert0, g.expert, sizeof g.expert);
    memcpy(g.row0, g.row, sizeof g.row);
    /* the inputs are fixed (a seeded integer RNG, the same on every machine); their routing is
     * far from a near-tie, so the fp32 op must route exactly like the double reference */
    double margin = routing_margin();
    printf("  routing margin: smallest decisive logit gap = %.0f x the largest fp32 error of a "
           "gap\n", margin);
    assert_true(margin > 10);
    assert_memory_equal(expert, g.expert, sizeof expert); /* the same routing */
    assert_memory_equal(row, g.row, sizeof row);
    int dropped = 0, kept = 0;
    for (int i = 0; i < NK; i++) dropped += row[i] < 0;
    for (int e = 0; e < E; e++) kept += counts[e], assert_true(counts[e] <= CAP);
    printf("  %d of %d choices dropped at capacity %d\n", dropped, NK, CAP);
    assert_true(dropped > 0 && kept + dropped == NK);
    expect_close("moe layer fwd y", y, yref, N * C, FWD_TOL);
    expect_close("moe layer fwd probs", probs, pref, N * E, FWD_TOL);
    float auxf[1] = {aux};
    expect_close("moe layer fwd aux", auxf, &auxref, 1, FWD_TOL);

    float dye[NK * C], dgate[NK], dhg[NK * H], dh[NK * H], dxs[NK * C], drlog[N * E];
    float dxr[N * C], dx[N * C];
    float *dw1 = calloc(E * H * C, 4), *db1 = calloc(E * H, 4), *dw2 = calloc(E * C * H, 4),
          *db2 = calloc(E * C, 4), *dwr = calloc(E * C, 4);
    run(FT_OP_MOE_COMBINE, FT_BWD, &(FtOpCall){.in = {G, ye, gate, row}, .out = {dye, dgate},
                                              .d = {N, C, K}});
    run(FT_OP_MOE_EXPERT, FT_BWD, &(FtOpCall){.in = {dye, hg, w2, counts}, .out = {dhg, dw2, db2},
                                             .d = {NK, H, C, E}, .x = {1, NK}});
    run(FT_OP_GELU, FT_BWD, &(FtOpCall){.in = {dhg, h}, .out = {dh}, .d = {NK * H}});
    run(FT_OP_MOE_EXPERT, FT_BWD, &(FtOpCall){.in = {dh, xs, w1, counts}, .out = {dxs, dw1, db1},
                                             .d = {NK, C, H, E}, .x = {1, NK}});
    run(FT_OP_MOE_ROUTE, FT_BWD, &(FtOpCall){.in = {dgate, probs, expert}, .out = {drlog},
                                            .d = {N, E, K}, .x = {COEF, SAUX}});
    run(FT_OP_MATMUL, FT_BWD, &(FtOpCall){.in = {drlog, x, wr}, .out = {dxr, dwr, NULL},
                                         .d = {N, C, E}});
    run(FT_OP_MOE_DISPATCH, FT_BWD, &(FtOpCall){.in = {dxs, row, dxr}, .out = {dx},
                                               .d = {N, C, K, E}});
    fd_check("moe layer bwd dx", g.x, N * C, dx);
    fd_check("moe layer bwd drouter", g.wr, E * C, dwr);
    fd_check("moe layer bwd dfcw", g.w1, E * H * C, dw1);
    fd_check("moe layer bwd dfcb", g.b1, E * H, db1);
    fd_check("moe layer bwd dfcprojw", g.w2, E * C * H, dw2);
    fd_check("moe layer bwd dfcprojb", g.b2, E * C, db2);
    /* a dropped choice contributes nothing: its expert's weights see no gradient from it, and
     * an expert none of whose tokens was kept has zero weight gradients */
    for (int e = 0; e < E; e++)
        if (!counts[e])
            for (int i = 0; i < H * C; i++) assert_true(dw1[e * H * C + i] == 0.0f);
    free(dw1), free(db1), free(dw2), free(db2), free(dwr);
    free(g.x), free(g.wr), free(g.w1), free(g.b1), free(g.w2), free(g.b2), free(g.G);
}

/* Routing details: ties go to the lower expert; choice j = 0 of every token is served before
 * any j = 1; with no limit nothing drops; aux is coef when routing is uniform. */
static void test_route_rules(void **state)
{
    (void)state;
    enum { n = 4, e = 4, k = 2 };
    float lg[n * e] = {0, 0, 0, 0, /* all tied: experts 0, 1 */
                       1, 2, 2, 0, /* tie at 1, 2: 1 first */
                       5, 0, 0, 4, /* 0, 3 */
                       0, 3, 3, 3};
    float probs[n * e], gate[n * k], aux;
    int expert[n * k], row[n * k];
    FtOpCall c = {.in = {lg}, .out = {probs, expert, gate, row, &aux}, .d = {n, e, k, 2}, .x = {1}};
    run(FT_OP_MOE_ROUTE, FT_FWD, &c);
    int want[n * k] = {0, 1, 1, 2, 0, 3, 1, 2};
    assert_memory_equal(expert, want, sizeof want);
    /* capacity 2: expert 1 is chosen by tokens 1 (j 0), 3 (j 0) and 0 (j 1): the two first
     * choices are kept, token 0's second choice is dropped although token 0 comes first */
    assert_true(row[0 * k + 1] < 0);
    assert_true(row[1 * k + 0] >= 0 && row[3 * k + 0] >= 0);
    for (int i = 0; i < n * k; i++) assert_true(gate[i] == probs[(i / k) * e + expert[i]]);
    /* no limit (cap = n): nothing dropped, rows are a permutation of 0 .. n k - 1 */
    c.d[3] = n;
    run(FT_OP_MOE_ROUTE, FT_FWD, &c);
    int seen[n * k] = {0};
    for (int i = 0; i < n * k; i++) assert_true(row[i] >= 0 && row[i] < n * k && !seen[row[i]]++);
    /* uniform probabilities and uniform choices: aux = coef */
    float flat[4 * 2] = {0};
    float p2[8], g2[4], a2;
    int e2[4], r2[4];
    FtOpCall u = {.in = {flat}, .out = {p2, e2, g2, r2, &a2}, .d = {4, 2, 1, 4}, .x = {0.5}};
    run(FT_OP_MOE_ROUTE, FT_FWD, &u); /* ties: every token picks expert 0: f = (1, 0) */
    assert_true(fabsf(a2 - 0.5f * 2 * (1.0f * 0.5f)) < 1e-6f);
}

/* Expert capacity (model_moe_capacity): ceil(factor N K / E), at least 1, at most N; a product
 * that is an integer in exact arithmetic is not rounded up by its binary error; factor 0: N. */
static void test_capacity(void **state)
{
    (void)state;
    FtGpt2Config mc = {.E = 4, .K = 2, .capacity_factor = 1.25};
    assert_int_equal(model_moe_capacity(&mc, 10), 7);  /* 6.25 */
    assert_int_equal(model_moe_capacity(&mc, 16), 10); /* 10 exactly */
    mc.capacity_factor = 1.1;
    assert_int_equal(model_moe_capacity(&mc, 100), 55); /* 1.1 * 100 * 2 / 4 = 55.00000000000001 */
    mc.capacity_factor = 2.2, mc.E = 8;
    assert_int_equal(model_moe_capacity(&mc, 50), 28);  /* 27.500000000000004 */
    mc.E = 4;
    mc.capacity_factor = 1.0;
    assert_int_equal(model_moe_capacity(&mc, 16), 8);
    assert_int_equal(model_moe_capacity(&mc, 1), 1);   /* 0.5: at least one row */
    mc.capacity_factor = 0.01;
    assert_int_equal(model_moe_capacity(&mc, 3), 1);
    mc.capacity_factor = 8;
    assert_int_equal(model_moe_capacity(&mc, 5), 5);   /* at most N */
    mc.capacity_factor = 0;
    assert_int_equal(model_moe_capacity(&mc, 33), 33); /* no limit */
}

/* The grouped expert matmul with two source groups, empty blocks and an unused tail. */
static void test_expert_groups(void **state)
{
    (void)state;
    enum { Gr = 2, El = 3, Cin = 5, Oc = 4, R = 14 };
    int counts[Gr * El] = {2, 0, 3, 1, 4, 0}; /* 10 rows used, 4 tail rows */
    float x[R * Cin], w[El * Oc * Cin], b[El * Oc], y[R * Oc], dy[R * Oc], dx[R * Cin];
    fill(x, R * Cin, 1), fill(w, El * Oc * Cin, 1), fill(b, El * Oc, 1), fill(dy, R * Oc, 1);
    float *dw = calloc(El * Oc * Cin, 4), *db = calloc(El * Oc, 4);
    FtOpCall f = {.in = {x, w, b, counts}, .out = {y}, .d = {R, Cin, Oc, El}, .x = {Gr, 10}};
    memset(y, 0x7f, sizeof y);
    run(FT_OP_MOE_EXPERT, FT_FWD, &f);
    double yref[R * Oc] = {0};
    int r = 0;
    for (int gg = 0; gg < Gr; gg++)
        for (int e = 0; e < El; e++)
            for (int k = 0; k < counts[gg * El + e]; k++, r++)
                for (int o = 0; o < Oc; o++) {
                    double v = b[e * Oc + o];
                    for (int i = 0; i < Cin; i++) v += (double)w[(e * Oc + o) * Cin + i] * x[r * Cin + i];
                    yref[r * Oc + o] = v;
                }
    expect_close("moe expert fwd (2 groups)", y, yref, R * Oc, FWD_TOL);
    FtOpCall bw = {.in = {dy, x, w, counts}, .out = {dx, dw, db}, .d = {R, Cin, Oc, El},
                   .x = {Gr, 10}};
    memset(dx, 0x7f, sizeof dx);
    run(FT_OP_MOE_EXPERT, FT_BWD, &bw);
    for (int i = 10 * Cin; i < R * Cin; i++) assert_true(dx[i] == 0.0f);
    /* reference gradients: dx = dy w_e per row, dw_e = sum over its rows (both groups) */
    double dxr[R * Cin] = {0}, dwr[El * Oc * Cin] = {0}, dbr[El * Oc] = {0};
    r = 0;
    for (int gg = 0; gg < Gr; gg++)
        for (int e = 0; e < El; e++)
            for (int k = 0; k < counts[gg * El + e]; k++, r++)
                for (int o = 0; o < Oc; o++) {
                    dbr[e * Oc + o] += dy[r * Oc + o];
                    for (int i = 0; i < Cin; i++) {
                        dxr[r * Cin + i] += (double)dy[r * Oc + o] * w[(e * Oc + o) * Cin + i];
                        dwr[(e * Oc + o) * Cin + i] += (double)dy[r * Oc + o] * x[r * Cin + i];
                    }
                }
    expect_close("moe expert bwd dx", dx, dxr, R * Cin, FWD_TOL);
    expect_close("moe expert bwd dw", dw, dwr, El * Oc * Cin, FWD_TOL);
    expect_close("moe expert bwd db", db, dbr, El * Oc, FWD_TOL);
    free(dw), free(db);
}

/* ---- determinism ---------------------------------------------------------------------------- */

static void expect_deterministic(FtOpKind k, FtOpDir dir, FtOpCall *c, const size_t *bytes, int nout)
{
    void *first[FT_OP_MAX_OUT] = {0}, *save[FT_OP_MAX_OUT] = {0};
    int nt = omp_get_max_threads();
    omp_set_num_threads(2);
    for (int i = 0; i < nout; i++) {
        save[i] = malloc(bytes[i]);
        memcpy(save[i], c->out[i], bytes[i]);
    }
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < nout; i++) {
            memset(c->out[i], rep ? 0xA5 : 0x00, bytes[i]);
        }
        run(k, dir, c);
        for (int i = 0; i < nout; i++) {
            if (rep == 0) {
                first[i] = malloc(bytes[i]);
                memcpy(first[i], c->out[i], bytes[i]);
            } else {
                assert_memory_equal(first[i], c->out[i], bytes[i]);
            }
        }
    }
    for (int i = 0; i < nout; i++) free(first[i]), free(save[i]);
    omp_set_num_threads(nt);
}

static void test_deterministic(void **state)
{
    (void)state;
    ops_cpu_set_parallel_min(0);
    float lg[N * E], probs[N * E], gate[NK], aux, x[N * C], xs[NK * C], dxs[NK * C], dx[N * C];
    float w[E * H * C], b[E * H], h[NK * H], dh[NK * H], dw[E * H * C] = {0}, db[E * H] = {0};
    float y[N * C], dy[N * C], dgate[NK], dlg[N * E], dyr[NK * C];
    int expert[NK], row[NK], counts[E];
    fill(lg, N * E, 2), fill(x, N * C, 1), fill(w, E * H * C, 1), fill(b, E * H, 1);
    fill(dh, NK * H, 1), fill(dy, N * C, 1), fill(dxs, NK * C, 1);
    FtOpCall r = {.in = {lg}, .out = {probs, expert, gate, row, &aux}, .d = {N, E, K, CAP}, .x = {0.1}};
    expect_deterministic(FT_OP_MOE_ROUTE, FT_FWD, &r,
                         (size_t[]){sizeof probs, sizeof expert, sizeof gate, sizeof row, 4}, 5);
    FtOpCall d = {.in = {x, expert, row}, .out = {xs, counts}, .d = {N, C, K, E}};
    expect_deterministic(FT_OP_MOE_DISPATCH, FT_FWD, &d, (size_t[]){sizeof xs, sizeof counts}, 2);
    FtOpCall ef = {.in = {xs, w, b, counts}, .out = {h}, .d = {NK, C, H, E}, .x = {1, NK}};
    expect_deterministic(FT_OP_MOE_EXPERT, FT_FWD, &ef, (size_t[]){sizeof h}, 1);
    FtOpCall eb = {.in = {dh, xs, w, counts}, .out = {dxs, dw, db}, .d = {NK, C, H, E},
                   .x = {1, NK}};
    expect_deterministic(FT_OP_MOE_EXPERT, FT_BWD, &eb, (size_t[]){sizeof dxs, sizeof dw, sizeof db}, 3);
    FtOpCall cf = {.in = {xs, gate, row}, .out = {y}, .d = {N, C, K}};
    expect_deterministic(FT_OP_MOE_COMBINE, FT_FWD, &cf, (size_t[]){sizeof y}, 1);
    FtOpCall cb = {.in = {dy, xs, gate, row}, .out = {dyr, dgate}, .d = {N, C, K}};
    expect_deterministic(FT_OP_MOE_COMBINE, FT_BWD, &cb, (size_t[]){sizeof dyr, sizeof dgate}, 2);
    FtOpCall rb = {.in = {dgate, probs, expert}, .out = {dlg}, .d = {N, E, K}, .x = {0.1, 0.5}};
    expect_deterministic(FT_OP_MOE_ROUTE, FT_BWD, &rb, (size_t[]){sizeof dlg}, 1);
    FtOpCall db2 = {.in = {dyr, row, x}, .out = {dx}, .d = {N, C, K, E}};
    expect_deterministic(FT_OP_MOE_DISPATCH, FT_BWD, &db2, (size_t[]){sizeof dx}, 1);
    ops_cpu_set_parallel_min(1 << 20);
}

/* ---- the MoE model on the tape --------------------------------------------------------------- */

static int g_dims[2];

static FtConfig moe_cfg(int ac)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 3;
    c.model.heads = 2;
    c.model.channels = 16;
    c.model.vocab = 50;
    c.model.vocab_pad = 16;
    c.model.seq_len = 8;
    c.model.experts = 4;
    c.model.top_k = 2;
    c.model.capacity_factor = 1.0;
    c.train.batch = 2;
    c.train.steps = 8;
    c.train.lr = 1e-2;
    c.train.warmup = 1;
    c.train.val_batches = 0;
    c.train.ac = ac;
    c.train.ac_every = 2;
    assert_int_equal(deck_check(&c, 1, err, sizeof err), 0);
    g_dims[0] = 8, g_dims[1] = 50;
    return c;
}

/* Trains 8 steps; returns the losses and leaves the model for comparison. */
static void train_moe(int ac, double *loss, FtModel *m)
{
    FtConfig c = moe_cfg(ac);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    model_create(m, &mc);
    model_init_random(m, 3);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init(&tr, &c, m, &src, NULL);
    for (int s = 0; s < 8; s++) {
        FtStepInfo st;
        train_step(&tr, &st);
        loss[s] = st.loss;
    }
    train_free(&tr);
}

static void test_model_trains(void **state)
{
    (void)state;
    double a[8], b[8], c[8];
    FtModel ma, mb, mcm;
    train_moe(FT_AC_CHOICE_NONE, a, &ma);
    train_moe(FT_AC_CHOICE_NONE, b, &mb);
    train_moe(FT_AC_CHOICE_EVERY, c, &mcm);
    printf("  moe model: loss %.4f -> %.4f\n", a[0], a[7]);
    assert_true(a[7] < a[0] - 0.1);
    assert_true(ma.p[FT_P_ROUTERW].size > 0 && ma.p[FT_P_FCW].expert);
    assert_memory_equal(a, b, sizeof a); /* run twice: the same bits */
    assert_memory_equal(ma.params, mb.params, sizeof(float) * ma.nparams);
    assert_memory_equal(a, c, sizeof a); /* AC recomputes the same bytes */
    assert_memory_equal(ma.params, mcm.params, sizeof(float) * ma.nparams);
    model_free(&ma), model_free(&mb), model_free(&mcm);
}

/* The gradient is linear in the tape's loss scale (1 / (micro-batches x data ranks): how
 * gradient accumulation averages), the auxiliary loss's part included: scale 1/2 gives exactly
 * half of scale 1's gradient, bit for bit (halving is exact in binary floating point and every
 * backward op is linear in its incoming gradient). */
static void test_loss_scale(void **state)
{
    (void)state;
    FtConfig c = moe_cfg(FT_AC_CHOICE_NONE);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 5);
    int B = 2, T = 8, tok[16], tgt[16];
    ft_synth_fetch(g_dims, 0, B, tok, tgt);
    float *grad[2];
    for (int k = 0; k < 2; k++) {
        FtTapeOpts o = {.B = B, .T = T, .ac = FT_AC_OFF, .backward = true,
                        .loss_scale = k ? 0.5 : 1.0};
        FtTape tp;
        model_build_tape(&m, &o, &tp);
        memcpy(tp.t[tp.tokens].data, tok, sizeof tok);
        memcpy(tp.t[tp.targets].data, tgt, sizeof tgt);
        FtExec ex = {0};
        exec_run_ctx(&ex, &tp, 0, tp.ne);
        grad[k] = malloc(sizeof(float) * m.nparams);
        memcpy(grad[k], m.grads, sizeof(float) * m.nparams);
        tape_free(&tp);
    }
    const FtParamInfo *r = &m.p[FT_P_ROUTERW];
    double router = 0;
    for (size_t i = 0; i < r->size; i++) router += fabs(grad[0][r->offset + i]);
    assert_true(router > 0 && mc.aux_coef > 0); /* the router has a gradient, aux a weight */
    for (size_t i = 0; i < m.nparams; i++) grad[0][i] *= 0.5f;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m.p[i];
        if (memcmp(grad[0] + p->offset, grad[1] + p->offset, sizeof(float) * p->size))
            fail_msg("d%s at loss scale 1/2 is not half of d%s at scale 1", p->name, p->name);
    }
    free(grad[0]), free(grad[1]);
    model_free(&m);
}

/* The deck's MoE cross-checks: each bad combination is one line naming both keys. */
static void test_deck_checks(void **state)
{
    (void)state;
    struct { int experts, top_k, ep, ranks; const char *want; } bad[] = {
        {0, 1, 2, 2, "parallel.ep = 2 splits experts over ranks, but the model is dense"},
        {6, 1, 4, 4, "model.experts = 6 cannot be split over parallel.ep = 4"},
        {4, 5, 1, 1, "model.top_k = 5 exceeds model.experts = 4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FtConfig c;
        char err[FT_DECK_ERR_MAX];
        assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
        c.model.experts = bad[i].experts, c.model.top_k = bad[i].top_k, c.parallel.ep = bad[i].ep;
        assert_int_not_equal(deck_check(&c, bad[i].ranks, err, sizeof err), 0);
        printf("  %s\n", err);
        assert_non_null(strstr(err, bad[i].want));
    }
    FtConfig c = moe_cfg(0);
    char err[FT_DECK_ERR_MAX];
    c.parallel.ep = 2;
    assert_int_equal(deck_check(&c, 2, err, sizeof err), 0); /* 4 experts over 2 ranks */
    snprintf(c.model.init, sizeof c.model.init, "gpt2.bin");
    assert_int_not_equal(deck_check(&c, 2, err, sizeof err), 0); /* llm.c files are dense */
}

FT_TEST_MAIN(cmocka_unit_test(test_deck_checks), cmocka_unit_test(test_layer_vs_dense_reference), cmocka_unit_test(test_route_rules),
             cmocka_unit_test(test_capacity),
             cmocka_unit_test(test_expert_groups), cmocka_unit_test(test_deterministic),
             cmocka_unit_test(test_model_trains), cmocka_unit_test(test_loss_scale))

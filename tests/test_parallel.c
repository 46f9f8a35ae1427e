/* test_parallel.c: the parallel layouts against the single-rank run. For a tiny GPT-2 (L 4, C 32,
 * NH 4, T 8, B 2, V 64), every layout this job's size allows ({tp2, pp2 under 1F1B and GPipe,
 * dp2, tp2 with activation checkpointing} on 2 ranks, {tp2 x pp2, tp2 x dp2, pp2 x dp2, pp4 (its
 * middle stages have two neighbours and no embedding)} on 4,
 * tp2 x pp2 x dp2 on 8; mixture-of-experts models (E 4) with ep2 on 2 ranks, ep2 x tp2 and
 * ep2 x dp2 on 4) trains 10 steps; the single-rank run uses dp x ep times the micro-batches
 * (the same global batch). Checked:
 *  - step 1's gradient, every parameter: each rank's gradient (every copy of a replicated
 *    tensor too) against the single-rank gradient's part that model_param_slab assigns it, and
 *    the writers' slabs of one replica gathered into the global tensors on rank 0 (every element
 *    exactly once) against the whole single-rank gradient; relative L2 error of each slice
 *    (each tensor, each layer of a stacked tensor) <= 1e-4; the global gradient norm (train.h
 *    counts each parameter once) and the norm of the gathered gradient within 1e-4 of the
 *    single-rank norm. This is the sharp check: AdamW (per-element division by sqrt(v)) and
 *    clipping hide a constant scale of a gradient from losses and parameters;
 *  - the loss of each step (relative 1e-5), every parameter after 10 steps (2e-4), and the
 *    validation loss of 2 batches after them (relative 1e-5; the same on every rank);
 *  - the same layout run twice gives bitwise-identical losses and parameters; parameters
 *    replicated over tp (LayerNorms, biases of row-parallel layers, embeddings) are bitwise
 *    equal on every tp rank, dp replicas hold the same bits, ep ranks the same dense ones.
 *
 * Tolerances: a layout changes only the order of floating-point sums (tp: partial products
 * summed by an all-reduce; pp: the tied wte's two gradient halves; dp and ep: gradients summed
 * over ranks, expert gradients block by block; the global norm summed by parts). Reordering a
 * sum of n terms moves it by at most about n u sum|terms| (u = 2^-24 = 6e-8); here n <= 128 (the
 * 128 tokens of a global batch, the 4C = 128 inputs of fcproj), so a few 1e-6 relative per sum
 * in the worst case, a few 1e-7 typically (sqrt(n) u), compounded over the few sums in series
 * from the loss to a weight. Hence 1e-4 on step 1's gradients (measured: <= 6.5e-7 per slice,
 * <= 1.1e-8 on the norm), while a gradient counted twice, a wrong loss scale or a lost micro-batch
 * is off by 1e-1 to 1 (a doubled attention-bias gradient in tp2, planted to check: relative
 * error 1.00 on attprojb). Over 10 steps at lr 1e-2 AdamW amplifies the rounding of gradients
 * near zero but stays far below one step's update (lr): |p - p_ref| <= 2e-4 (2% of lr) and
 * 1e-5 relative on the loss (measured: <= 1.3e-7 on the loss, <= 3.5e-5 on parameters).
 *
 * MoE routing is a discrete decision (top-k, then capacity in token order): a layout's
 * rounding can tip a near-tie of two router logits and route a token elsewhere, which moves
 * the loss in the fourth digit. So no MoE comparison with the single rank depends on a
 * near-tie, whatever the CPU (see ModelKind): all-experts routing (top_k = E, nothing
 * dropped: continuous) over 10 steps, and top-2 with capacity drops at step 1, where each
 * router's input is by construction the same bytes in every layout (exact_routing).
 * Capacity is per micro-batch of each data rank, so the same tokens are routed and dropped as
 * on one rank.
 * On 2 ranks the MoE model is also resharded: 5 steps with ep2, a checkpoint, restored on each
 * rank as a whole model (no grid), 5 more steps: within the same bound of the single-rank run of
 * 10 steps (the restore is exact; the layouts sum in different orders).
 * ft-test: ranks 2 4 8 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/ckpt.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/model.h"
#include "ftllm/pipeline.h"
#include "ftllm/train.h"
#include "ftllm/train_ckpt.h"

enum { STEPS = 10, MICRO = 4 };
#define LOSS_RTOL 1e-5
#define PARAM_ATOL 2e-4
#define GRAD_RTOL 1e-4

/* The models a layout is checked on. MoE routing is a discrete choice (top-k, then capacity in
 * token order), so a MoE comparison across layouts must not depend on which side of a near-tie
 * a router logit's rounding falls:
 *  - MOE_ALL: top_k = experts, capacity factor 1: every token goes to every expert and nothing
 *    is dropped, so the layer is a continuous function of its inputs (the order of a token's
 *    choices only decides where its rows are packed, that is rounding); safe to compare over
 *    STEPS steps;
 *  - MOE_DROPS: top-2 with capacity (tokens are dropped, experts get uneven row counts over the
 *    ep ranks), with every router's input the same bytes in every layout at step 1 (see
 *    exact_routing), so step 1 routes and drops the same tokens as the single-rank run on any
 *    CPU; only step 1 is compared with the single rank (loss, gradients), the whole run with
 *    itself. */
typedef enum model_kind { DENSE, MOE_ALL, MOE_DROPS } ModelKind;

/* Sequence i: (3 i + 5 t + (i t mod 7)) mod V: learnable, and no two sequences alike. */
static void synth_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    const int *dims = ctx; /* T, V */
    int T = dims[0], V = dims[1];
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++) {
            uint64_t i = first + (uint64_t)b;
            int tok = (int)((i * 3 + 5 * (uint64_t)t + (i * (uint64_t)t) % 7) % (uint64_t)V);
            if (t < T) in[b * T + t] = tok;
            if (t > 0) tg[b * T + t - 1] = tok;
        }
}

static int g_dims[2];

static FtConfig tiny_cfg(int tp, int pp, int dp, int micro, int ep, ModelKind kind)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 4;
    c.model.heads = 4;
    c.model.channels = 32;
    c.model.vocab = 64;
    c.model.vocab_pad = 16;
    c.model.seq_len = 8;
    c.train.batch = 2;
    c.train.steps = STEPS;
    c.train.lr = 1e-2;
    c.train.warmup = 2;
    c.train.val_batches = 0;
    c.parallel.tp = tp;
    c.parallel.pp = pp;
    c.parallel.dp = dp;
    c.parallel.microbatches = micro;
    c.parallel.ep = ep;
    c.model.experts = kind == DENSE ? 0 : 4;
    c.model.top_k = kind == MOE_ALL ? 4 : 2;
    c.model.capacity_factor = 1.0; /* top-2: 8 rows per expert for 16 tokens x 2 choices */
    c.model.aux_loss_coef = 0.01;
    c.parallel.bucket_mb = 0.01; /* several buckets even for this tiny model */
    g_dims[0] = (int)c.model.seq_len;
    g_dims[1] = (int)c.model.vocab;
    return c;
}

/* MOE_DROPS: zero the attention output projections of every block and the experts' output
 * projections of every block but the last. Then every block but the last adds exactly +-0 to
 * the residual stream, so at step 1 each router's input is LayerNorm(wte[token] + wpe[t]): the
 * same op on the same bytes in every layout (the embedding and LayerNorms are replicated over
 * tp, ep and dp ranks read the single-rank run's micro-batches), and so is the router's matmul
 * (replicated, same shape, same threads). No layout can change a routing decision, whatever
 * the CPU's rounding. The last block's experts are whole, so the gradients of the router,
 * the experts (fc and fcproj), dispatch, capacity and combine are non-trivial. */
static void exact_routing(FtModel *m)
{
    static const int ids[] = {FT_P_ATTPROJW, FT_P_ATTPROJB, FT_P_FCPROJW, FT_P_FCPROJB};
    for (int l = m->l0; l < m->l0 + m->nl; l++)
        for (int k = 0; k < 4; k++) {
            if (k >= 2 && l == m->cfg.L - 1) continue;
            size_t n = m->p[ids[k]].size / (size_t)m->nl;
            memset(model_tensor(m, m->params, ids[k], l), 0, sizeof(float) * n);
        }
}

/* MOE_DROPS coverage: step 1's routing recomputed in double from the single-rank model (each
 * router's input is LayerNorm(wte[token] + wpe[t]) by exact_routing): the number of choices
 * made and dropped at capacity, over the nmicro micro-batches of B sequences and every layer.
 * Rounding differs from the engine's float routing only at near-ties, which move a count by one
 * or two; the caller asserts only that many choices drop. */
static void step1_drops(const FtModel *m, int nmicro, int B, int *choices, int *dropped)
{
    int T = g_dims[0], C = m->cfg.C, E = m->cfg.E, K = m->cfg.K, N = B * T;
    int cap = model_moe_capacity(&m->cfg, N);
    assert_true(E <= 64);
    int *in = malloc(sizeof(int) * (size_t)N * 2), *tg = in + N, *pick = malloc(sizeof(int) * (size_t)N * K);
    double *x = malloc(sizeof(double) * (size_t)C), *lg = malloc(sizeof(double) * (size_t)E);
    *choices = *dropped = 0;
    for (int mb = 0; mb < nmicro; mb++) {
        synth_fetch(g_dims, (uint64_t)mb * B, B, in, tg);
        for (int l = 0; l < m->cfg.L; l++) {
            const float *w = model_tensor(m, m->params, FT_P_LN2W, l);
            const float *bb = model_tensor(m, m->params, FT_P_LN2B, l);
            const float *wr = model_tensor(m, m->params, FT_P_ROUTERW, l);
            for (int n = 0; n < N; n++) {
                double mean = 0, var = 0;
                for (int c = 0; c < C; c++)
                    mean += x[c] = (double)m->params[m->p[FT_P_WTE].offset + (size_t)in[n] * C + c] +
                                   m->params[m->p[FT_P_WPE].offset + (size_t)(n % T) * C + c];
                mean /= C;
                for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean);
                double rstd = 1 / sqrt(var / C + 1e-5);
                for (int c = 0; c < C; c++) x[c] = (x[c] - mean) * rstd * w[c] + bb[c];
                for (int e = 0; e < E; e++) {
                    lg[e] = 0;
                    for (int c = 0; c < C; c++) lg[e] += wr[e * C + c] * x[c];
                }
                for (int j = 0; j < K; j++) { /* top-k, ties to the lower expert */
                    int best = -1;
                    for (int e = 0; e < E; e++) {
                        int taken = 0;
                        for (int i = 0; i < j; i++) taken |= pick[n * K + i] == e;
                        if (!taken && (best < 0 || lg[e] > lg[best])) best = e;
                    }
                    pick[n * K + j] = best;
                }
            }
            int cnt[64] = {0};
            for (int j = 0; j < K; j++) /* capacity: choice 0 of every token first */
                for (int n = 0; n < N; n++) {
                    ++*choices;
                    if (cnt[pick[n * K + j]] < cap) cnt[pick[n * K + j]]++;
                    else ++*dropped;
                }
        }
    }
    free(in), free(pick), free(x), free(lg);
}

typedef struct run {
    double loss[STEPS];
    double val; /* train_eval of 2 batches after the steps */
    double gnorm1; /* step 1's global gradient norm */
    float *grad1;  /* step 1's gradient, this rank's layout */
    FtModel m;     /* the shard after the run's steps */
} Run;

static void run_free(Run *r)
{
    free(r->grad1);
    model_free(&r->m);
}

/* Trains `steps` steps; keeps the losses and step 1's gradient and norm. */
static void run_steps(FtTrainer *tr, Run *r, int steps)
{
    for (int s = 0; s < steps; s++) {
        FtStepInfo st;
        train_step(tr, &st);
        r->loss[s] = st.loss;
        if (s == 0) {
            r->gnorm1 = st.grad_norm;
            r->grad1 = malloc(sizeof(float) * r->m.nparams);
            memcpy(r->grad1, r->m.grads, sizeof(float) * r->m.nparams);
        }
    }
    r->val = train_eval(tr, 2);
}

/* The single-rank reference: the same global batch as dp ranks x MICRO micro-batches. */
static void run_single(int dp, ModelKind kind, int steps, Run *r)
{
    FtConfig c = tiny_cfg(1, 1, 1, MICRO * dp, 1, kind);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    model_create(&r->m, &mc);
    model_init_random(&r->m, 42);
    if (kind == MOE_DROPS) exact_routing(&r->m);
    FtBatchSource src = {synth_fetch, g_dims};
    FtTrainer tr;
    train_init(&tr, &c, &r->m, &src, &src);
    run_steps(&tr, r, steps);
    train_free(&tr);
}

static int g_warmup_extra; /* parallel.warmup_extra of the layouts run (1F1B) */

static void run_layout(int tp, int pp, int dp, int ep, ModelKind kind, int schedule, int ac,
                       Run *r, FtGrid *g)
{
    FtConfig c = tiny_cfg(tp, pp, dp, MICRO, ep, kind);
    c.parallel.schedule = schedule;
    c.parallel.warmup_extra = g_warmup_extra;
    c.train.ac = ac;
    char err[256];
    assert_int_equal(deck_check(&c, ft_test_size(), err, sizeof err), 0);
    assert_int_equal(grid_create(g, ft_test_comm(), tp, pp, dp, ep, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtShard sh = {.tp = tp, .tp_rank = g->tp_rank, .pp = pp, .pp_rank = g->pp_rank, .ep = ep,
                  .ep_rank = g->ep_rank};
    model_create_sharded(&r->m, &mc, &sh);
    model_init_random(&r->m, 42);
    if (kind == MOE_DROPS) exact_routing(&r->m);
    FtBatchSource src = {synth_fetch, g_dims};
    FtTrainer tr;
    train_init_grid(&tr, &c, &r->m, g, &src, &src);
    run_steps(&tr, r, STEPS);
    train_free(&tr);
}

/* Bitwise equality of buf over the ranks of comm. */
static int same_on(MPI_Comm comm, const void *buf, size_t len)
{
    int n = 0;
    MPI_Comm_size(comm, &n);
    char *all = malloc(len * (size_t)n);
    MPI_Allgather(buf, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, comm);
    int ok = 1;
    for (int i = 1; i < n; i++) ok &= memcmp(all, all + (size_t)i * len, len) == 0;
    free(all);
    return ok;
}

/* ---- step 1's gradient against the single-rank run ------------------------------------------ */

/* Relative L2 error of got against want (n elements): |got - want| / |want|; when want is all
 * zero, 0 if got is too, else infinity. */
static double rel_l2(const float *got, const float *want, size_t n)
{
    double e = 0, w = 0;
    for (size_t k = 0; k < n; k++) {
        double d = (double)got[k] - want[k];
        e += d * d;
        w += (double)want[k] * want[k];
    }
    if (w == 0) return e == 0 ? 0 : INFINITY;
    return sqrt(e / w);
}

/* Adds the packed slab `local` into the global array and counts each element placed. */
static void slab_place(const FtSlab *s, const float *local, float *global, float *count)
{
    size_t g[4] = {1, 1, 1, 1}, o[4] = {0, 0, 0, 0}, c[4] = {1, 1, 1, 1};
    int pad = FT_SLAB_MAX_DIMS - s->ndims;
    for (int k = 0; k < s->ndims; k++)
        g[pad + k] = s->gshape[k], o[pad + k] = s->offset[k], c[pad + k] = s->count[k];
    for (size_t a = 0; a < c[0]; a++)
        for (size_t b = 0; b < c[1]; b++)
            for (size_t d = 0; d < c[2]; d++) {
                size_t dst = (((a + o[0]) * g[1] + b + o[1]) * g[2] + d + o[2]) * g[3] + o[3];
                for (size_t e = 0; e < c[3]; e++) global[dst + e] += *local++, count[dst + e] += 1;
            }
}

typedef struct grad_err {
    double rel;   /* the worst relative L2 error of a (tensor, layer) slice */
    int id, layer;
} GradErr;

/* The worst slice of tensor id (n elements; per layer: nl slices from global layer l0). */
static void worst_slice(GradErr *w, int id, const float *got, const float *want, size_t n,
                        int nl, int l0)
{
    for (int j = 0; j < nl; j++) {
        size_t k = n / (size_t)nl;
        double e = rel_l2(got + j * k, want + j * k, k);
        if (!(e <= w->rel)) *w = (GradErr){e, id, nl > 1 || l0 >= 0 ? l0 + j : -1};
    }
}

/* Step 1's gradient of every rank (every copy of a replicated tensor too) against the
 * single-rank gradient, slice by slice (each tensor, and each layer of a stacked one); then the
 * writers' slabs of one replica gathered into the global tensors on rank 0 (every element
 * exactly once) and compared the same way, and the layout's global gradient norm against the
 * single-rank one and against the norm of the gathered gradient. Collective. Returns 1 on
 * every rank iff every error is within GRAD_RTOL. */
static int check_grads(const Run *ref, const Run *a, const FtGrid *g, const char *what)
{
    const FtModel *rm = &ref->m, *am = &a->m;
    GradErr local = {0, -1, -1}, global = {0, -1, -1};
    float *glob = calloc(rm->nparams, sizeof(float)), *count = calloc(rm->nparams, sizeof(float));
    assert_true(glob && count);
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &am->p[i];
        if (!p->size) continue;
        float *want = malloc(sizeof(float) * p->size);
        model_slab_extract(am, i, ref->grad1 + rm->p[i].offset, want);
        worst_slice(&local, i, a->grad1 + p->offset, want, p->size, p->per_layer ? am->nl : 1,
                    p->per_layer ? am->l0 : -1);
        free(want);
        FtSlab s;
        model_param_slab(am, i, &s);
        if (s.writer && g->dp_rank == 0)
            slab_place(&s, a->grad1 + p->offset, glob + rm->p[i].offset, count + rm->p[i].offset);
    }
    int root = ft_test_rank() == 0;
    MPI_Reduce(root ? MPI_IN_PLACE : glob, glob, (int)rm->nparams, MPI_FLOAT, MPI_SUM, 0,
               ft_test_comm());
    MPI_Reduce(root ? MPI_IN_PLACE : count, count, (int)rm->nparams, MPI_FLOAT, MPI_SUM, 0,
               ft_test_comm());
    int ok = 1;
    double norm_err = 0, gathered_err = 0;
    if (root) {
        for (size_t k = 0; k < rm->nparams; k++) ok &= count[k] == 1.0f;
        for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
            const FtParamInfo *p = &rm->p[i];
            if (!p->size) continue;
            worst_slice(&global, i, glob + p->offset, ref->grad1 + p->offset, p->size,
                        p->per_layer ? rm->cfg.L : 1, p->per_layer ? 0 : -1);
        }
        double n2 = 0;
        for (size_t k = 0; k < rm->nparams; k++) n2 += (double)glob[k] * glob[k];
        norm_err = fabs(a->gnorm1 - ref->gnorm1) / ref->gnorm1;
        gathered_err = fabs(sqrt(n2) - ref->gnorm1) / ref->gnorm1;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, ft_test_comm());
    struct { double v; int r; } in = {local.rel, ft_test_rank()}, out;
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, ft_test_comm());
    MPI_Bcast(&local, sizeof local, MPI_BYTE, out.r, ft_test_comm());
    if (root) {
        const char *gname = global.id >= 0 ? rm->p[global.id].name : "-";
        const char *lname = local.id >= 0 ? rm->p[local.id].name : "-";
        printf("  %s step-1 gradient vs one rank: gathered worst %s layer %d rel err %.2e, "
               "per-rank copies worst %s layer %d (rank %d) %.2e, norm %.2e (gathered %.2e)%s\n",
               what, gname, global.layer, global.rel, lname, local.layer, out.r, local.rel,
               norm_err, gathered_err, ok ? "" : ", SOME ELEMENT NOT COVERED EXACTLY ONCE");
    }
    MPI_Bcast(&norm_err, 1, MPI_DOUBLE, 0, ft_test_comm());
    MPI_Bcast(&gathered_err, 1, MPI_DOUBLE, 0, ft_test_comm());
    MPI_Bcast(&global, sizeof global, MPI_BYTE, 0, ft_test_comm());
    free(glob), free(count);
    return ok && global.rel <= GRAD_RTOL && local.rel <= GRAD_RTOL && norm_err <= GRAD_RTOL &&
           gathered_err <= GRAD_RTOL;
}

static void check_layout_kind(int tp, int pp, int dp, int ep, ModelKind kind, int schedule,
                              int ac)
{
    if (tp * pp * dp * ep != ft_test_size()) skip(); /* this layout needs another rank count */
    /* MOE_DROPS is compared with the single rank at step 1 only (see ModelKind) */
    int ref_steps = kind == MOE_DROPS ? 1 : STEPS;
    Run ref = {0}, a = {0}, b = {0};
    run_single(dp * ep, kind, ref_steps, &ref);
    FtGrid g;
    run_layout(tp, pp, dp, ep, kind, schedule, ac, &a, &g);
    grid_destroy(&g);
    run_layout(tp, pp, dp, ep, kind, schedule, ac, &b, &g);
    char what[80];
    snprintf(what, sizeof what, "tp %d pp %d dp %d ep %d%s%s%s%s", tp, pp, dp, ep,
             kind == MOE_ALL ? " moe all-experts" : kind == MOE_DROPS ? " moe top-2 drops" : "",
             pp > 1 ? (schedule == FT_PIPE_GPIPE ? " gpipe" : " 1f1b") : "",
             pp > 1 && g_warmup_extra ? " warm-up +extra" : "", ac ? " ac" : "");
    if (kind == MOE_DROPS) {
        int choices, dropped;
        FtModel m0; /* the parameters step 1 starts from */
        model_create(&m0, &ref.m.cfg);
        model_init_random(&m0, 42);
        exact_routing(&m0);
        step1_drops(&m0, dp * ep * MICRO, 2, &choices, &dropped);
        model_free(&m0);
        if (ft_test_rank() == 0)
            printf("  %s: step 1 drops %d of %d routing choices at capacity (recomputed in "
                   "double)\n", what, dropped, choices);
        assert_all(dropped >= choices / 20); /* the capacity path is exercised */
    }
    /* step 1: the gradient of every parameter and the global norm */
    assert_all(check_grads(&ref, &a, &g, what));
    /* the losses of the steps compared, and the parameters after STEPS steps */
    double lerr = 0, perr = 0;
    for (int s = 0; s < ref_steps; s++)
        lerr = fmax(lerr, fabs(a.loss[s] - ref.loss[s]) / ref.loss[s]);
    size_t nglob = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS && ref_steps == STEPS; i++) {
        const FtParamInfo *p = &a.m.p[i];
        if (!p->size) continue;
        float *want = malloc(sizeof(float) * p->size);
        model_slab_extract(&a.m, i, ref.m.params + ref.m.p[i].offset, want);
        const float *got = a.m.params + p->offset;
        for (size_t k = 0; k < p->size; k++) perr = fmax(perr, fabs((double)got[k] - want[k]));
        nglob += p->size;
        free(want);
    }
    double verr = ref_steps == STEPS ? fabs(a.val - ref.val) / ref.val : 0;
    double lmax = lerr, pmax = perr;
    MPI_Allreduce(MPI_IN_PLACE, &lmax, 1, MPI_DOUBLE, MPI_MAX, ft_test_comm());
    MPI_Allreduce(MPI_IN_PLACE, &pmax, 1, MPI_DOUBLE, MPI_MAX, ft_test_comm());
    if (ft_test_rank() == 0) {
        if (ref_steps == STEPS)
            printf("  %s: loss %.4f -> %.4f, max rel loss diff %.2e, max param diff %.2e, val "
                   "loss %.4f (rel diff %.2e)\n", what, a.loss[0], a.loss[STEPS - 1], lmax, pmax,
                   a.val, verr);
        else
            printf("  %s: loss %.4f -> %.4f, step-1 rel loss diff %.2e (later steps: only "
                   "against itself)\n", what, a.loss[0], a.loss[STEPS - 1], lmax);
    }
    assert_all(a.loss[STEPS - 1] < a.loss[0] - 0.05); /* it trains */
    assert_all(lerr <= LOSS_RTOL);
    assert_all(perr <= PARAM_ATOL);
    assert_all(verr <= LOSS_RTOL && ft_same_bytes(&a.val, sizeof a.val) && a.val == b.val);
    assert_all(nglob > 0 || ref_steps < STEPS);
    /* run twice: the same bits */
    assert_all(memcmp(a.loss, b.loss, sizeof a.loss) == 0);
    assert_all(a.m.nparams == b.m.nparams &&
               memcmp(a.m.params, b.m.params, sizeof(float) * a.m.nparams) == 0);
    /* replicated over tp: bitwise equal on every tp rank; every rank has the same loss */
    for (int i = 0; i < FT_NPARAM_TENSORS; i++)
        if (a.m.p[i].tp_split == FT_SPLIT_NONE)
            assert_all(same_on(g.tp_comm, a.m.params + a.m.p[i].offset,
                               sizeof(float) * a.m.p[i].size));
    assert_all(ft_same_bytes(a.loss, sizeof a.loss));
    /* dp replicas hold the same parameters; ep ranks the same dense ones */
    assert_all(same_on(g.dp_comm, a.m.params, sizeof(float) * a.m.nparams));
    for (int i = 0; i < FT_NPARAM_TENSORS; i++)
        if (!a.m.p[i].expert)
            assert_all(same_on(g.ep_comm, a.m.params + a.m.p[i].offset,
                               sizeof(float) * a.m.p[i].size));
    grid_destroy(&g);
    run_free(&ref), run_free(&a), run_free(&b);
}

static void check_layout(int tp, int pp, int dp, int schedule, int ac)
{
    check_layout_kind(tp, pp, dp, 1, DENSE, schedule, ac);
}

static void test_tp2(void **state) { (void)state; check_layout(2, 1, 1, FT_PIPE_1F1B, 0); }
static void test_tp2_ac(void **state) { (void)state; check_layout(2, 1, 1, FT_PIPE_1F1B, FT_AC_CHOICE_FULL); }
static void test_pp2_1f1b(void **state) { (void)state; check_layout(1, 2, 1, FT_PIPE_1F1B, 0); }
static void test_pp2_gpipe(void **state) { (void)state; check_layout(1, 2, 1, FT_PIPE_GPIPE, 0); }
static void test_dp2(void **state) { (void)state; check_layout(1, 1, 2, FT_PIPE_1F1B, 0); }
static void test_tp2_pp2(void **state) { (void)state; check_layout(2, 2, 1, FT_PIPE_1F1B, 0); }
static void test_tp2_dp2(void **state) { (void)state; check_layout(2, 1, 2, FT_PIPE_1F1B, 0); }
static void test_pp2_dp2(void **state) { (void)state; check_layout(1, 2, 2, FT_PIPE_1F1B, FT_AC_CHOICE_FULL); }
static void test_pp4(void **state) { (void)state; check_layout(1, 4, 1, FT_PIPE_1F1B, 0); }
/* parallel.warmup_extra: more micro-batches in flight, the same gradients in the same order:
 * the one-rank curve as every layout, and bitwise the run without the extra warm-up */
static void warmup_extra_layout(int pp, int extra, int ac)
{
    if (pp != ft_test_size()) skip();
    g_warmup_extra = extra;
    check_layout(1, pp, 1, FT_PIPE_1F1B, ac);
    Run a = {0}, b = {0};
    FtGrid g;
    run_layout(1, pp, 1, 1, DENSE, FT_PIPE_1F1B, ac, &a, &g); /* with the extra warm-up */
    grid_destroy(&g);
    g_warmup_extra = 0;
    run_layout(1, pp, 1, 1, DENSE, FT_PIPE_1F1B, ac, &b, &g);
    grid_destroy(&g);
    assert_all(memcmp(a.loss, b.loss, sizeof a.loss) == 0);
    assert_all(memcmp(a.m.params, b.m.params, sizeof(float) * a.m.nparams) == 0);
    run_free(&a), run_free(&b);
}
static void test_pp2_warmup_extra(void **state) { (void)state; warmup_extra_layout(2, 1, FT_AC_CHOICE_FULL); }
static void test_pp4_warmup_extra(void **state) { (void)state; warmup_extra_layout(4, 2, 0); }
static void test_tp2_pp2_dp2(void **state) { (void)state; check_layout(2, 2, 2, FT_PIPE_1F1B, 0); }
static void test_moe_ep2(void **state) { (void)state; check_layout_kind(1, 1, 1, 2, MOE_ALL, FT_PIPE_1F1B, 0); }
static void test_moe_ep2_tp2(void **state) { (void)state; check_layout_kind(2, 1, 1, 2, MOE_ALL, FT_PIPE_1F1B, 0); }
static void test_moe_ep2_dp2(void **state) { (void)state; check_layout_kind(1, 1, 2, 2, MOE_ALL, FT_PIPE_1F1B, FT_AC_CHOICE_FULL); }
static void test_moe_ep2_drops(void **state) { (void)state; check_layout_kind(1, 1, 1, 2, MOE_DROPS, FT_PIPE_1F1B, 0); }
static void test_moe_ep2_tp2_drops(void **state) { (void)state; check_layout_kind(2, 1, 1, 2, MOE_DROPS, FT_PIPE_1F1B, 0); }
static void test_moe_ep2_dp2_drops(void **state) { (void)state; check_layout_kind(1, 1, 2, 2, MOE_DROPS, FT_PIPE_1F1B, FT_AC_CHOICE_FULL); }

/* ep2 -> a checkpoint -> one whole model per rank: the expert slabs land in their places. */
static void test_moe_ckpt_reshard(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    enum { HALF = STEPS / 2 };
    char dir[64], err[CKPT_ERR_MAX] = "", path[CKPT_PATH_MAX];
    if (ft_test_rank() == 0) {
        snprintf(dir, sizeof dir, "/tmp/ft_moe_ckpt_XXXXXX");
        assert_non_null(mkdtemp(dir));
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, ft_test_comm());
    Run ref = {0};
    run_single(2, MOE_ALL, STEPS, &ref); /* 10 steps on one rank */
    FtConfig ca = tiny_cfg(1, 1, 1, MICRO, 2, MOE_ALL), cb = tiny_cfg(1, 1, 1, 2 * MICRO, 1, MOE_ALL);
    snprintf(ca.run.name, sizeof ca.run.name, "moe");
    snprintf(ca.checkpoint.dir, sizeof ca.checkpoint.dir, "%s", dir);
    ca.checkpoint.interval = HALF;
    FtGrid g;
    assert_int_equal(grid_create(&g, ft_test_comm(), 1, 1, 1, 2, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(&ca, &mc);
    FtShard sh = {.tp = 1, .pp = 1, .ep = 2, .ep_rank = g.ep_rank};
    FtModel ma, mb;
    model_create_sharded(&ma, &mc, &sh);
    model_init_random(&ma, 42);
    FtBatchSource src = {synth_fetch, g_dims};
    FtTrainer ta, tb;
    train_init_grid(&ta, &ca, &ma, &g, &src, NULL);
    for (int s = 0; s < HALF; s++) {
        FtStepInfo st;
        train_step(&ta, &st);
    }
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_create(&tc, &ca, ft_test_comm(), err, sizeof err), 0);
    train_ckpt_save(tc, &ta);
    train_ckpt_destroy(tc);
    train_free(&ta);
    grid_destroy(&g);
    model_create(&mb, &mc);
    model_init_random(&mb, 99); /* other weights: the restore must set every one */
    train_init(&tb, &cb, &mb, &src, NULL);
    ckpt_path(path, sizeof path, dir, "moe", HALF);
    int rc = train_ckpt_restore(&tb, path, true, ft_test_comm(), err, sizeof err);
    if (rc) printf("  %s\n", err);
    assert_all(rc == 0 && mb.step == HALF);
    for (int s = 0; s < HALF; s++) {
        FtStepInfo st;
        train_step(&tb, &st);
        assert_all(fabs(st.loss - ref.loss[HALF + s]) <= LOSS_RTOL * ref.loss[HALF + s]);
    }
    double perr = 0;
    for (size_t k = 0; k < mb.nparams; k++)
        perr = fmax(perr, fabs((double)mb.params[k] - ref.m.params[k]));
    if (ft_test_rank() == 0)
        printf("  moe written on ep 2, resumed on one rank: max |param - single rank| after %d + "
               "%d steps = %.2e\n", HALF, HALF, perr);
    assert_all(perr <= PARAM_ATOL);
    train_free(&tb);
    model_free(&ma), model_free(&mb), run_free(&ref);
    MPI_Barrier(ft_test_comm());
    if (ft_test_rank() == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
    }
}

/* The checkpoint layout: every shard is one hyperslab, the slabs of a replica tile each global
 * dataset exactly once (writers), and extracting from a global tensor gives the shard's values. */
static void test_slabs_tile(void **state)
{
    (void)state;
    for (int tp = 1; tp <= 4; tp *= 2) /* heads 4, layers 4; dense, and 4 experts on ep 1, 2, 4 */
        for (int pp = 1; pp <= 4; pp *= 2)
            for (int ep = 0; ep <= 4; ep = ep ? 2 * ep : 1) {
                FtConfig c = tiny_cfg(tp, pp, 1, 1, ep ? ep : 1, ep ? MOE_DROPS : DENSE);
                FtGpt2Config mc;
                model_config_from_deck(&c, &mc);
                FtModel full;
                model_create(&full, &mc);
                model_init_random(&full, 9);
                for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
                    size_t gsize = full.p[i].size;
                    unsigned char *cover = calloc(gsize, 1);
                    for (int r = 0; r < tp * pp * (ep ? ep : 1); r++) {
                        FtShard sh = {.tp = tp,
                                      .tp_rank = r % tp,
                                      .pp = pp,
                                      .pp_rank = r / tp % pp,
                                      .ep = ep,
                                      .ep_rank = r / (tp * pp)};
                        FtModel m;
                        model_create_sharded(&m, &mc, &sh);
                        model_init_random(&m, 9);
                        FtSlab s;
                        model_param_slab(&m, i, &s);
                        if (s.writer) { /* mark the covered global elements */
                            size_t g[4] = {1, 1, 1, 1}, o[4] = {0}, cn[4] = {1, 1, 1, 1};
                            int pad = 4 - s.ndims;
                            for (int k = 0; k < s.ndims; k++)
                                g[pad + k] = s.gshape[k], o[pad + k] = s.offset[k],
                                        cn[pad + k] = s.count[k];
                            for (size_t a = 0; a < cn[0]; a++)
                                for (size_t b = 0; b < cn[1]; b++)
                                    for (size_t d = 0; d < cn[2]; d++)
                                        for (size_t e = 0; e < cn[3]; e++)
                                            cover[(((a + o[0]) * g[1] + b + o[1]) * g[2] + d +
                                                   o[2]) *
                                                      g[3] +
                                                  e + o[3]]++;
                        }
                        float *want = malloc(sizeof(float) * (m.p[i].size + 1));
                        model_slab_extract(&m, i, full.params + full.p[i].offset, want);
                        assert_true(memcmp(want, m.params + m.p[i].offset,
                                           sizeof(float) * m.p[i].size) == 0);
                        free(want);
                        model_free(&m);
                    }
                    for (size_t k = 0; k < gsize; k++)
                        assert_int_equal(cover[k], 1);
                    free(cover);
                }
                model_free(&full);
            }
}

FT_TEST_MAIN(cmocka_unit_test(test_slabs_tile), cmocka_unit_test(test_tp2),
             cmocka_unit_test(test_tp2_ac), cmocka_unit_test(test_pp2_1f1b),
             cmocka_unit_test(test_pp2_gpipe), cmocka_unit_test(test_dp2),
             cmocka_unit_test(test_tp2_pp2), cmocka_unit_test(test_tp2_dp2),
             cmocka_unit_test(test_pp2_dp2), cmocka_unit_test(test_pp4),
             cmocka_unit_test(test_pp2_warmup_extra), cmocka_unit_test(test_pp4_warmup_extra),
             cmocka_unit_test(test_tp2_pp2_dp2),
             cmocka_unit_test(test_moe_ep2), cmocka_unit_test(test_moe_ep2_tp2),
             cmocka_unit_test(test_moe_ep2_dp2), cmocka_unit_test(test_moe_ep2_drops),
             cmocka_unit_test(test_moe_ep2_tp2_drops), cmocka_unit_test(test_moe_ep2_dp2_drops),
             cmocka_unit_test(test_moe_ckpt_reshard))

/* test_model.c: the GPT-2 tape, executor and training step on synthetic tokens: activation
 * checkpointing gives bitwise-identical gradients (and a segment longer than the model costs
 * no more memory than one holding the whole model), two runs give bitwise-identical losses and
 * parameters, gradient accumulation matches a bigger batch, the tape's purity rules hold, the
 * loss goes down, and the learning-rate schedule has its shape. The parameter layout: Vp is V
 * rounded up to model.vocab_pad, initialization leaves wte's padded rows at zero (the last
 * stage's copy too), the weights' scales are GPT-2's, and model_copy_state copies parameters, both moments and the step. The
 * step's bookkeeping: the timeline, the data cursor, the model FLOPs per step against what the
 * executor counted, validation as the mean of its batches, and train_run's summary.
 * ft-test: ranks 1 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/ops.h"
#include "ftllm/optim.h"
#include "ftllm/train.h"

static FtConfig tiny_cfg(void)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 3;
    c.model.heads = 2;
    c.model.channels = 16;
    c.model.vocab = 50;
    c.model.vocab_pad = 16; /* Vp = 64 */
    c.model.seq_len = 8;
    c.train.batch = 2;
    c.train.steps = 5;
    c.train.lr = 1e-2;
    c.train.warmup = 1;
    c.train.val_batches = 0;
    assert_int_equal(deck_check(&c, 1, err, sizeof err), 0);
    return c;
}

static int g_dims[2];
static FtBatchSource synth_source(const FtConfig *c)
{
    g_dims[0] = train_seq_len(c);
    g_dims[1] = (int)c->model.vocab;
    FtBatchSource s = {ft_synth_fetch, g_dims};
    return s;
}

/* Gradients of one micro-batch with the given AC setting. */
static float *grads_with(FtConfig c, int ac, int every, size_t *arena, int *nrec)
{
    c.train.ac = ac;
    c.train.ac_every = every;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 7);
    FtBatchSource src = synth_source(&c);
    FtTrainer tr;
    train_init(&tr, &c, &m, &src, NULL);
    FtStepInfo st;
    train_step(&tr, &st); /* one step: the grads stay in m.grads */
    float *g = malloc(sizeof(float) * m.nparams);
    memcpy(g, m.grads, sizeof(float) * m.nparams);
    *arena = tr.tape.arena_bytes;
    *nrec = 0;
    for (int i = 0; i < tr.tape.ne; i++) *nrec += tr.tape.e[i].phase == FT_PH_RECOMPUTE;
    train_free(&tr);
    model_free(&m);
    return g;
}

static void test_ac_bitwise(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    c.model.layers = 5;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    size_t n = 0;
    {
        FtModel m;
        model_create(&m, &mc);
        n = m.nparams;
        model_free(&m);
    }
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        size_t a0, a1, a2, a3;
        int r0, r1, r2, r3;
        float *g0 = grads_with(c, FT_AC_CHOICE_NONE, 1, &a0, &r0);
        float *g1 = grads_with(c, FT_AC_CHOICE_FULL, 1, &a1, &r1);
        float *g2 = grads_with(c, FT_AC_CHOICE_EVERY, 2, &a2, &r2);
        float *g3 = grads_with(c, FT_AC_CHOICE_EVERY, 3, &a3, &r3);
        printf("  %d thread(s): arena none %zu, full %zu, every2 %zu, every3 %zu bytes; recompute "
               "entries %d %d %d %d\n", threads, a0, a1, a2, a3, r0, r1, r2, r3);
        double norm = 0;
        for (size_t i = 0; i < n; i++) norm += (double)g0[i] * g0[i];
        assert_true(norm > 0); /* gradients are not trivially zero */
        assert_memory_equal(g0, g1, sizeof(float) * n);
        assert_memory_equal(g0, g2, sizeof(float) * n);
        assert_memory_equal(g0, g3, sizeof(float) * n);
        assert_int_equal(r0, 0);
        assert_true(r1 > 0 && r2 > 0 && r3 > 0);
        assert_true(a1 < a0 && a2 < a0 && a3 < a0); /* AC saves activation memory */
        /* a segment longer than the stage is the whole stage: the same gradients, and no more
         * memory than one segment of all its blocks */
        size_t a4, a5;
        int r4, r5;
        float *g4 = grads_with(c, FT_AC_CHOICE_EVERY, 5, &a4, &r4);
        float *g5 = grads_with(c, FT_AC_CHOICE_EVERY, 9, &a5, &r5);
        assert_memory_equal(g0, g4, sizeof(float) * n);
        assert_memory_equal(g0, g5, sizeof(float) * n);
        assert_int_equal(a5, a4);
        free(g0), free(g1), free(g2), free(g3), free(g4), free(g5);
    }
    omp_set_num_threads(1);
}

/* Runs `steps` optimizer steps from seed; returns the losses and leaves the params in *p. */
static void run_steps(FtConfig c, int steps, double *losses, float **p, size_t *n)
{
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, (uint64_t)c.run.seed);
    FtBatchSource src = synth_source(&c);
    FtTrainer tr;
    train_init(&tr, &c, &m, &src, NULL);
    for (int i = 0; i < steps; i++) {
        FtStepInfo st;
        train_step(&tr, &st);
        losses[i] = st.loss;
    }
    *n = m.nparams;
    *p = malloc(sizeof(float) * m.nparams);
    memcpy(*p, m.params, sizeof(float) * m.nparams);
    train_free(&tr);
    model_free(&m);
}

static void test_two_runs_bitwise(void **state)
{
    (void)state;
    omp_set_num_threads(2);
    FtConfig c = tiny_cfg();
    c.parallel.microbatches = 2;
    double l1[6], l2[6];
    float *p1, *p2;
    size_t n1, n2;
    run_steps(c, 6, l1, &p1, &n1);
    run_steps(c, 6, l2, &p2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(p1, p2, sizeof(float) * n1);
    /* a different seed gives different parameters (the comparison can fail) */
    float *p3;
    double l3[6];
    c.run.seed = 99;
    run_steps(c, 6, l3, &p3, &n2);
    assert_true(memcmp(p1, p3, sizeof(float) * n1) != 0);
    free(p1), free(p2), free(p3);
    omp_set_num_threads(1);
}

/* 2 micro-batches of B = 2 against 1 micro-batch of B = 4 over the same sequences: the same
 * gradients up to fp32 summation order. */
static void test_grad_accum(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    float *g[2];
    double loss[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        FtConfig ck = c;
        ck.parallel.microbatches = k ? 2 : 1;
        ck.train.batch = k ? 2 : 4;
        FtModel m;
        model_create(&m, &mc);
        model_init_random(&m, 3);
        FtBatchSource src = synth_source(&ck);
        FtTrainer tr;
        train_init(&tr, &ck, &m, &src, NULL);
        FtStepInfo st;
        train_step(&tr, &st);
        loss[k] = st.loss;
        n = m.nparams;
        g[k] = malloc(sizeof(float) * n);
        memcpy(g[k], m.grads, sizeof(float) * n);
        train_free(&tr);
        model_free(&m);
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (double)(g[0][i] - g[1][i]) * (g[0][i] - g[1][i]);
        den += (double)g[0][i] * g[0][i];
    }
    printf("  grad accumulation vs big batch: rel err %.2e, losses %.6f %.6f\n", sqrt(num / den),
           loss[0], loss[1]);
    assert_true(sqrt(num / den) < 1e-5); /* fp32 summation order only */
    assert_true(fabs(loss[0] - loss[1]) < 1e-5 * fabs(loss[0]));
    free(g[0]), free(g[1]);
}

/* Purity rules of the tape: every activation and activation gradient is written by exactly one
 * non-accumulating entry per phase; parameter gradients are only accumulated; recompute entries
 * repeat forward entries exactly. */
static void test_tape_rules(void **state)
{
    (void)state;
    ops_cpu_set_parallel_min(0); /* the threaded paths, on this tiny model */
    FtConfig c = tiny_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    FtTape tp;
    FtTapeOpts o = {.B = 2, .T = 8, .ac = FT_AC_EVERY, .ac_every = 2, .backward = true,
                    .loss_scale = 1};
    model_build_tape(&m, &o, &tp);
    int *writes = calloc((size_t)tp.nt, sizeof(int));
    int nmark_comm = 0, nseg = 0;
    for (int i = 0; i < tp.ne; i++) {
        const FtTapeEntry *e = &tp.e[i];
        if (e->kind == FT_OP_MARK) {
            nmark_comm += e->mark == FT_MARK_COMM_TP || e->mark == FT_MARK_COMM_GRADS;
            nseg += e->mark == FT_MARK_SEG_BEGIN;
            continue;
        }
        for (int k = 0; k < FT_OP_MAX_OUT; k++) {
            int t = e->out[k];
            if (t < 0) continue;
            const FtTensor *ts = &tp.t[t];
            assert_true(ts->role != FT_TR_PARAM && ts->role != FT_TR_GRAD_PREV);
            if (e->phase != FT_PH_RECOMPUTE) writes[t]++;
        }
    }
    for (int t = 0; t < tp.nt; t++) {
        if (tp.t[t].role == FT_TR_GRAD) /* one writer: earlier sum + this micro-batch's */
            assert_int_equal(writes[t], 1);
        if (tp.t[t].role == FT_TR_ACT || tp.t[t].role == FT_TR_ACT_GRAD) {
            /* per-layer activation gradients in a block are shared across layers: one write
             * per layer; everything else exactly one write */
            int want = strncmp(tp.t[t].name, "d.", 2) == 0 && !strstr(tp.t[t].name, "res") &&
                               strcmp(tp.t[t].name, "d.logits") && strcmp(tp.t[t].name, "d.lnf")
                           ? mc.L
                           : 1;
            if (!strcmp(tp.t[t].name, "d.resmid")) want = mc.L;
            if (strncmp(tp.t[t].name, "slot", 4) == 0) continue; /* storage only, via aliases */
            if (writes[t] != want) fprintf(stderr, "tensor %s written %d times, want %d\n",
                                           tp.t[t].name, writes[t], want);
            assert_int_equal(writes[t], want);
        }
    }
    assert_int_equal(nseg, 2); /* 3 layers in segments of 2: [0,1] [2] */
    assert_true(nmark_comm >= 3 * mc.L);
    /* the recompute entries of layer 0 are its forward entries, in order */
    int f0 = -1, r0 = -1;
    for (int i = 0; i < tp.ne; i++) {
        if (tp.e[i].layer == 0 && tp.e[i].kind != FT_OP_MARK) {
            if (tp.e[i].phase == FT_PH_FWD && f0 < 0) f0 = i;
            if (tp.e[i].phase == FT_PH_RECOMPUTE && r0 < 0) r0 = i;
        }
    }
    assert_true(f0 >= 0 && r0 > f0);
    for (int j = 0; j < 10; j++) {
        const FtTapeEntry *a = &tp.e[f0 + j], *b = &tp.e[r0 + j];
        assert_int_equal(a->kind, b->kind);
        assert_memory_equal(a->in, b->in, sizeof a->in);
        assert_memory_equal(a->out, b->out, sizeof a->out);
        assert_int_equal(a->twin, r0 + j); /* twins point at each other */
        assert_int_equal(b->twin, f0 + j);
    }
    /* every recompute entry has its forward twin; forward entries of the last segment (layer
     * 2, not recomputed) have none, those of the first segment have one */
    for (int i = 0; i < tp.ne; i++) {
        const FtTapeEntry *e = &tp.e[i];
        if (e->phase == FT_PH_RECOMPUTE && e->mark != FT_MARK_RECOMPUTE) {
            assert_true(e->twin >= 0 && e->twin < tp.fwd_end);
            assert_int_equal(tp.e[e->twin].twin, i);
        } else if (e->phase == FT_PH_FWD && e->layer == 2) {
            assert_int_equal(e->twin, -1);
        } else if (e->phase == FT_PH_FWD && e->layer == 0 && e->mark == FT_MARK_NONE) {
            assert_true(e->twin >= tp.fwd_end);
        } else if (e->phase == FT_PH_BWD) {
            assert_int_equal(e->twin, -1);
        }
    }
    free(writes);
    tape_free(&tp);
    model_free(&m);
}

/* model_tape_bind gives every alias its target's storage, the tape's first tensor included
 * (random mutant R11 of seed 8 bound aliases of tensors 1.. only; no model tape today aliases
 * tensor 0, so this tape is made by hand). */
static void test_bind_aliases(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    FtTape tp;
    tape_init(&tp);
    float x[4] = {0};
    int a0 = tape_tensor(&tp, "x", FT_F32, FT_TR_ACT, 4, x, -1);
    int w = tape_state(&tp, "wte", FT_TR_PARAM, FT_P_WTE, -1, m.p[FT_P_WTE].size);
    int y = tape_tensor(&tp, "y", FT_F32, FT_TR_ACT, 4, x + 1, -1);
    int ax = tape_alias(&tp, "x.view", a0, -1), ay = tape_alias(&tp, "y.view", y, -1);
    assert_int_equal(a0, 0);
    model_tape_bind(&m, &tp, m.grads, NULL);
    assert_ptr_equal(tp.t[w].data, m.params + m.p[FT_P_WTE].offset);
    assert_ptr_equal(tp.t[ax].data, x);
    assert_ptr_equal(tp.t[ay].data, x + 1);
    tape_free(&tp);
    model_free(&m);
}

static void test_loss_decreases(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    c.train.steps = 60;
    c.train.lr = 1e-2;
    c.train.weight_decay = 0;
    double l[60];
    float *p;
    size_t n;
    run_steps(c, 60, l, &p, &n);
    printf("  loss %.4f -> %.4f (ln V = %.4f)\n", l[0], l[59], log(50.0));
    assert_true(fabs(l[0] - log(50.0)) < 0.3); /* random init: close to uniform */
    assert_true(l[59] < 0.75 * l[0]); /* measured 3.90 -> 2.72 */
    free(p);
}

static void test_lr_schedule(void **state)
{
    (void)state;
    FtOptimCfg o = {.lr = 1.0, .lr_min_frac = 0.1, .warmup = 4, .steps = 14,
                    .schedule = FT_SCHED_COSINE};
    assert_true(fabs(optim_lr(&o, 0) - 0.25) < 1e-12);
    assert_true(fabs(optim_lr(&o, 3) - 1.0) < 1e-12);
    assert_true(fabs(optim_lr(&o, 4) - 1.0) < 1e-12);
    assert_true(fabs(optim_lr(&o, 13) - 0.1) < 1e-12);
    for (int s = 5; s < 14; s++) assert_true(optim_lr(&o, s) < optim_lr(&o, s - 1));
    o.schedule = FT_SCHED_LINEAR;
    assert_true(fabs(optim_lr(&o, 13) - 0.1) < 1e-12);
    assert_true(fabs(optim_lr(&o, 8) - (1.0 - 0.9 * 4 / 9.0)) < 1e-12);
    o.schedule = FT_SCHED_CONSTANT;
    assert_true(fabs(optim_lr(&o, 13) - 1.0) < 1e-12);
    /* the last step runs at the floor and any step past it too (the rate never rises again or
     * goes below the floor), also when the decay is a single step */
    for (int sched = FT_SCHED_COSINE; sched <= FT_SCHED_LINEAR; sched++)
        for (int steps = 5; steps <= 14; steps += 9) {
            o.schedule = sched, o.steps = steps;
            for (int s = steps - 1; s < steps + 4; s++)
                assert_true(fabs(optim_lr(&o, s) - 0.1) < 1e-12);
        }
}

/* model_config_from_deck: Vp is V rounded up to a multiple of model.vocab_pad; a multiple stays
 * as it is (GPT-2's 50257 pads to llm.c's 50304). */
static void test_vocab_pad(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    const long long cases[][3] = {{50, 16, 64}, {64, 16, 64}, {65, 16, 80}, {63, 1, 63},
                                  {50257, 128, 50304}, {50304, 128, 50304}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        c.model.vocab = cases[k][0], c.model.vocab_pad = cases[k][1];
        FtGpt2Config mc;
        model_config_from_deck(&c, &mc);
        assert_int_equal(mc.V, cases[k][0]);
        assert_int_equal(mc.Vp, cases[k][2]);
    }
}

/* model_init_random: the padded rows V..Vp-1 of wte start (and, with no gradient, stay) at 0,
 * the real rows do not; every other buffer starts at 0 and the step at 0; the last pipeline
 * stage's copy of the tied wte has the same bits as the whole model's. */
static void test_init_padding(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg(); /* V 50, Vp 64 */
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    assert_true(mc.Vp > mc.V);
    FtModel m, last;
    model_create(&m, &mc);
    model_init_random(&m, 7);
    FtShard sh = {.tp = 1, .pp = 3, .pp_rank = 2};
    model_create_sharded(&last, &mc, &sh);
    model_init_random(&last, 7);
    assert_int_equal(m.step, 0);
    size_t C = (size_t)mc.C, V = (size_t)mc.V, Vp = (size_t)mc.Vp;
    const float *wte = model_tensor(&m, m.params, FT_P_WTE, -1);
    assert_int_equal(m.p[FT_P_WTE].size, Vp * C);
    size_t nonzero = 0, padded = 0;
    for (size_t i = 0; i < V * C; i++) nonzero += wte[i] != 0.0f;
    for (size_t i = V * C; i < Vp * C; i++) padded += wte[i] != 0.0f;
    assert_int_equal(nonzero, V * C);
    assert_int_equal(padded, 0);
    assert_int_equal(last.p[FT_P_WTE].size, Vp * C);
    assert_memory_equal(model_tensor(&last, last.params, FT_P_WTE, -1), wte, sizeof(float) * Vp * C);
    float *zero[] = {m.grads, m.m, m.v, m.grads_alt};
    for (size_t k = 0; k < sizeof zero / sizeof zero[0]; k++)
        for (size_t i = 0; i < m.nparams; i++) assert_true(zero[k][i] == 0.0f);
    model_free(&m);
    model_free(&last);
}

/* model_init_random's scales, as GPT-2 and llm.c: every weight matrix N(0, 0.02), the two
 * residual projections (attprojw, fcprojw) N(0, 0.02 / sqrt(2 L)); LayerNorm weights 1, every
 * bias 0. Sample standard deviations within 5% (each tensor has at least 3000 values: the
 * estimate's own spread is under 1.3%, and the seed is fixed) and means within 4 standard
 * errors; the tensors' streams differ (no two start with the same value). */
static void test_init_scales(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    c.model.layers = 4, c.model.channels = 32, c.model.vocab = 200, c.model.seq_len = 128;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 11);
    double resid = 0.02 / sqrt(2.0 * mc.L);
    for (int id = 0; id < FT_NPARAM_TENSORS; id++) {
        const FtParamInfo *p = &m.p[id];
        if (!p->size) continue;
        const float *w = m.params + p->offset;
        size_t n = id == FT_P_WTE ? (size_t)mc.V * mc.C : p->size; /* padded rows: 0 */
        bool weight = id == FT_P_WTE || id == FT_P_WPE || id == FT_P_QKVW ||
                      id == FT_P_ATTPROJW || id == FT_P_FCW || id == FT_P_FCPROJW;
        if (!weight) {
            float want = id == FT_P_LN1W || id == FT_P_LN2W || id == FT_P_LNFW ? 1.0f : 0.0f;
            for (size_t i = 0; i < p->size; i++) assert_true(w[i] == want);
            continue;
        }
        double sum = 0, sq = 0;
        for (size_t i = 0; i < n; i++) sum += w[i], sq += (double)w[i] * w[i];
        double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        double want = id == FT_P_ATTPROJW || id == FT_P_FCPROJW ? resid : 0.02;
        if (fabs(sd / want - 1) > 0.05 || fabs(mean) > 4 * want / sqrt((double)n))
            fprintf(stderr, "%s: %zu values, mean %.3g sd %.4g, want sd %.4g\n", p->name, n, mean,
                    sd, want);
        assert_true(n >= 3000);
        assert_true(fabs(sd / want - 1) <= 0.05 && fabs(mean) <= 4 * want / sqrt((double)n));
        for (int o = 0; o < id; o++)
            if (m.p[o].size) assert_true(m.params[m.p[o].offset] != w[0]);
    }
    model_free(&m);
}

/* model_copy_state copies parameters, both AdamW moments and the step, every element (between
 * two host models here; a device model is staged the same way). */
static void test_copy_state(void **state)
{
    (void)state;
    FtConfig c = tiny_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel a, b;
    model_create(&a, &mc);
    model_create(&b, &mc);
    model_init_random(&a, 3);
    model_init_random(&b, 4);
    for (size_t i = 0; i < a.nparams; i++)
        a.m[i] = (float)i * 0.5f + 1.0f, a.v[i] = (float)i * 0.25f + 2.0f, b.m[i] = b.v[i] = -1.0f;
    a.step = 7;
    model_copy_state(&b, &a);
    assert_int_equal(b.step, 7);
    assert_memory_equal(b.params, a.params, sizeof(float) * a.nparams);
    assert_memory_equal(b.m, a.m, sizeof(float) * a.nparams);
    assert_memory_equal(b.v, a.v, sizeof(float) * a.nparams);
    model_free(&a);
    model_free(&b);
}

/* The validation source: ft_synth_fetch's sequences from g_val_shift on (so batch k of the
 * stream can be evaluated alone, as batch 0). */
static uint64_t g_val_shift;
static void shifted_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    ft_synth_fetch(ctx, first + g_val_shift, B, in, tg);
}

/* The step's bookkeeping, 3 steps of 2 micro-batches on one rank, without AC and with AC:
 *  - each step is one STEP interval on the timeline, and the data cursor moves by M B;
 *  - the trainer's model FLOPs of a step are the FLOPs the executor counted in the model's ops
 *    (the optimizer's kinds left out): equal without AC, fewer with AC (its recomputation is
 *    not model work);
 *  - validation of n batches is the mean of the n batches' losses, each evaluated alone (the
 *    same forward on the same bytes: bitwise);
 *  - train_run's summary: its first and last loss, its validation loss after the last step
 *    are those of the train_step run (bitwise: two runs are), and with train.rate_skip =
 *    steps - 1 the last step is timed. */
static void test_step_bookkeeping(void **state)
{
    (void)state;
    log_init(0, FT_LOG_WARN); /* train_run's per-step lines */
    for (int ac = 0; ac <= 1; ac++) {
        FtConfig c = tiny_cfg();
        c.parallel.microbatches = 2;
        c.train.steps = 3;
        c.train.ac = ac ? FT_AC_CHOICE_FULL : FT_AC_CHOICE_NONE;
        c.train.val_batches = 2;
        c.train.val_every = 0;
        c.train.rate_skip = 2;
        FtGpt2Config mc;
        model_config_from_deck(&c, &mc);
        FtModel m;
        model_create(&m, &mc);
        model_init_random(&m, 5);
        FtBatchSource src = synth_source(&c), val = {shifted_fetch, g_dims};
        g_val_shift = 0;
        FtTrainer tr;
        train_init(&tr, &c, &m, &src, &val);
        double loss[3];
        for (int s = 1; s <= 3; s++) {
            FtStepInfo st;
            assert_int_equal(train_step(&tr, &st), FT_STEP_OK);
            assert_int_equal(st.step, s);
            assert_true(tr.cursor == (uint64_t)s * 2 * c.train.batch);
            loss[s - 1] = st.loss;
        }
        assert_int_equal(tr.tl.count[FT_TL_STEP], 3);
        assert_true(tr.tl.total[FT_TL_STEP] > 0);
        double counted = 0;
        for (int k = 0; k < FT_OP_NKINDS; k++)
            if (k != FT_OP_GRADNORM && k != FT_OP_ADAMW)
                counted += tr.stats.flops[k][FT_FWD] + tr.stats.flops[k][FT_BWD];
        printf("  ac %d: model FLOPs per step %.6e, executor counted %.6e per step\n", ac,
               tr.step_flops, counted / 3);
        assert_true(tr.step_flops > 0);
        if (ac) assert_true(counted > 3 * tr.step_flops * (1 + 1e-6));
        else assert_true(fabs(counted - 3 * tr.step_flops) <= 1e-12 * counted);
        /* validation: 2 batches against each batch alone */
        double v2 = train_eval(&tr, 2), v[2];
        for (int k = 0; k < 2; k++) {
            g_val_shift = (uint64_t)k * c.train.batch;
            v[k] = train_eval(&tr, 1);
        }
        g_val_shift = 0;
        assert_true(v[0] != v[1]); /* the batches differ, so a repeated one would show */
        assert_true(v2 == (v[0] + v[1]) / 2);
        train_free(&tr);
        if (!ac) { /* the same run through train_run */
            FtModel m2;
            model_create(&m2, &mc);
            model_init_random(&m2, 5);
            train_init(&tr, &c, &m2, &src, &val);
            FtTrainSummary sum;
            train_run(&tr, &sum);
            train_free(&tr);
            assert_true(sum.ok);
            assert_int_equal(sum.steps, 3);
            assert_true(sum.first_loss == loss[0] && sum.last_loss == loss[2]);
            assert_true(sum.val_loss == v2);
            assert_true(sum.mean_ms > 0 && sum.tokens_per_s > 0 && sum.gflops > 0);
            assert_memory_equal(m.params, m2.params, sizeof(float) * m.nparams);
            model_free(&m2);
        }
        model_free(&m);
    }
}

FT_TEST_MAIN(cmocka_unit_test(test_tape_rules), cmocka_unit_test(test_bind_aliases), cmocka_unit_test(test_init_scales), cmocka_unit_test(test_ac_bitwise),
             cmocka_unit_test(test_two_runs_bitwise), cmocka_unit_test(test_grad_accum),
             cmocka_unit_test(test_loss_decreases), cmocka_unit_test(test_lr_schedule),
             cmocka_unit_test(test_vocab_pad), cmocka_unit_test(test_init_padding),
             cmocka_unit_test(test_copy_state), cmocka_unit_test(test_step_bookkeeping))

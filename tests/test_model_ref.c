/* test_model_ref.c: the whole model against PyTorch. tests/ref/make_gpt2_fixture.py built a
 * small random GPT-2 (L 2, NH 4, C 32, V 61 -> Vp 64, maxT 16) in PyTorch, wrote it in llm.c's
 * format with a batch of tokens (B 2, T 12), and recorded the logits, the loss, every parameter
 * gradient and the losses of 10 AdamW steps (clipping at 1.0, warm-up 2 + cosine). ftllm loads
 * the same file and must agree.
 * ft-test: ranks 1
 *
 * Tolerances (relative L2 error per tensor, |ftllm - torch| / |torch|), both sides fp32 with
 * different summation orders (BLAS vs PyTorch's kernels) and different transcendental
 * implementations:
 *   logits, loss               1e-5   (measured 2026-11-29: logits 1.5e-7, loss 1.2e-7)
 *   every parameter gradient   1e-5   (measured per tensor: wte 1.4e-7, wpe 1.7e-7, ln1w
 *                                      1.4e-7, ln1b 1.8e-7, qkvw 1.9e-7, qkvb 2.2e-7, attprojw
 *                                      1.8e-7, attprojb 1.6e-7, ln2w 3.2e-7, ln2b 2.2e-7, fcw
 *                                      2.1e-7, fcb 1.8e-7, fcprojw 1.9e-7, fcprojb 1.6e-7, lnfw
 *                                      1.6e-7, lnfb 1.1e-7)
 *   10 AdamW step losses       1e-5 relative each (measured worst 1.6e-7; Adam's m / sqrt(v)
 *                                      can amplify rounding in tiny gradients, hence margin)
 * A wrong formula anywhere gives errors of order 1e-2 or more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/llmc.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

#define MODEL_FILE "tests/ref/gpt2_tiny.bin"
#define STATE_FILE "tests/ref/gpt2_tiny_state.bin"

typedef struct ref_state {
    int B, T, steps, V, Vp;
    size_t nparams;
    int *x, *y;
    float *logits, loss, *grads, *losses;
} RefState;

static void load_state(RefState *s)
{
    FILE *f = fopen(STATE_FILE, "rb");
    assert_non_null(f);
    int32_t h[256];
    assert_int_equal(fread(h, sizeof h, 1, f), 1);
    assert_int_equal(h[0], 20241129);
    assert_int_equal(h[1], 1);
    s->B = h[2], s->T = h[3], s->steps = h[4], s->V = h[5], s->Vp = h[6];
    s->nparams = (size_t)h[7];
    size_t N = (size_t)s->B * s->T;
    s->x = malloc(sizeof(int) * N), s->y = malloc(sizeof(int) * N);
    s->logits = malloc(sizeof(float) * N * s->V);
    s->grads = malloc(sizeof(float) * s->nparams);
    s->losses = malloc(sizeof(float) * s->steps);
    assert_int_equal(fread(s->x, sizeof(int), N, f), N);
    assert_int_equal(fread(s->y, sizeof(int), N, f), N);
    assert_int_equal(fread(s->logits, sizeof(float), N * s->V, f), N * s->V);
    assert_int_equal(fread(&s->loss, sizeof(float), 1, f), 1);
    assert_int_equal(fread(s->grads, sizeof(float), s->nparams, f), s->nparams);
    assert_int_equal(fread(s->losses, sizeof(float), s->steps, f), (size_t)s->steps);
    fclose(f);
}

static void free_state(RefState *s)
{
    free(s->x), free(s->y), free(s->logits), free(s->grads), free(s->losses);
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static RefState *g_state;
static void fixed_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    (void)ctx, (void)first;
    memcpy(in, g_state->x, sizeof(int) * (size_t)B * g_state->T);
    memcpy(tg, g_state->y, sizeof(int) * (size_t)B * g_state->T);
}

/* The deck of the fixture (keep in step with make_gpt2_fixture.py). */
static FtConfig fixture_cfg(void)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 4, c.model.channels = 32;
    c.model.vocab = 61, c.model.vocab_pad = 64, c.model.seq_len = 16;
    c.train.batch = 2, c.train.seq_len = 12, c.train.steps = 10;
    c.train.lr = 1e-2, c.train.lr_min_frac = 0.1, c.train.warmup = 2;
    c.train.schedule = FT_SCHED_COSINE;
    c.train.beta1 = 0.9, c.train.beta2 = 0.95, c.train.eps = 1e-8;
    c.train.weight_decay = 0.1, c.train.grad_clip = 1.0;
    assert_int_equal(deck_check(&c, 1, err, sizeof err), 0);
    return c;
}

static void test_against_pytorch(void **state)
{
    (void)state;
    RefState s;
    load_state(&s);
    g_state = &s;
    FtConfig c = fixture_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    char err[512];
    int rc = llmc_read_model(MODEL_FILE, &m, err, sizeof err);
    if (rc) fail_msg("%s", err);
    assert_int_equal(m.nparams, s.nparams);
    assert_int_equal(s.B, c.train.batch);
    assert_int_equal(s.T, c.train.seq_len);

    FtBatchSource src = {fixed_fetch, NULL};
    FtTrainer tr;
    train_init(&tr, &c, &m, &src, NULL);
    FtStepInfo st;
    train_step(&tr, &st); /* forward + backward on the batch, then the first AdamW step */

    /* logits: ftllm keeps (N, Vp); compare the first V columns */
    size_t N = (size_t)s.B * s.T;
    const float *lg = tr.tape.t[tr.tape.logits].data;
    float *lv = malloc(sizeof(float) * N * s.V);
    for (size_t n = 0; n < N; n++) memcpy(lv + n * s.V, lg + n * s.Vp, sizeof(float) * s.V);
    double e = rel_l2(lv, s.logits, N * s.V);
    printf("  %-10s rel err %.2e\n", "logits", e);
    assert_true(e < 1e-5);
    free(lv);
    float loss = (float)st.loss;
    e = fabs((double)loss - s.loss) / fabs((double)s.loss);
    printf("  %-10s rel err %.2e (ftllm %.6f, torch %.6f)\n", "loss", e, loss, s.loss);
    assert_true(e < 1e-5);
    double worst = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m.p[i];
        e = rel_l2(m.grads + p->offset, s.grads + p->offset, p->size);
        printf("  d%-9s rel err %.2e\n", p->name, e);
        if (e > worst) worst = e;
        assert_true(e < 1e-5);
    }
    printf("  worst gradient rel err %.2e\n", worst);

    /* 10 AdamW steps on the same batch: step 1 above, then 9 more */
    float losses[32];
    losses[0] = (float)st.loss;
    for (int k = 1; k < s.steps; k++) {
        train_step(&tr, &st);
        losses[k] = (float)st.loss;
    }
    worst = 0;
    for (int k = 0; k < s.steps; k++) {
        e = fabs((double)losses[k] - s.losses[k]) / fabs((double)s.losses[k]);
        if (e > worst) worst = e;
        printf("  step %2d loss ftllm %.6f torch %.6f rel err %.2e\n", k + 1, losses[k],
               s.losses[k], e);
        assert_true(e < 1e-5);
    }
    assert_true(losses[s.steps - 1] < losses[0] - 0.5); /* the steps did train */
    train_free(&tr);
    model_free(&m);
    free_state(&s);
}

FT_TEST_MAIN(cmocka_unit_test(test_against_pytorch))

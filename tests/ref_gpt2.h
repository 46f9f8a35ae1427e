/* ref_gpt2.h: the whole model against PyTorch on any backend, for tests/test_model_ref.c (the
 * CPU) and tests/gpu/test_gpu_train.c (the GPU, and the stand-in device in every `make test`).
 * tests/ref/make_gpt2_fixture.py built a small random GPT-2 (L 2, NH 4, C 32, V 61 -> Vp 64,
 * maxT 16) in PyTorch, wrote it in llm.c's format with a batch of tokens (B 2, T 12), and
 * recorded the logits, the loss, every parameter gradient and the losses of 10 AdamW steps
 * (clipping at 1.0, warm-up 2 + cosine). ref_gpt2_check loads the same file into a host model,
 * stages it onto the backend, trains it through the one training loop and compares what it
 * reads back (the backend's copies to the host) with PyTorch's, each within tol relative L2
 * (per tensor; per step for the losses), printing every error. Run from the repository root
 * (the files are tests/ref/...). Static functions: include it in one test source only. */
#ifndef FTLLM_TESTS_REF_GPT2_H
#define FTLLM_TESTS_REF_GPT2_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/deck.h"
#include "ftllm/llmc.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

#define REF_MODEL_FILE "tests/ref/gpt2_tiny.bin"
#define REF_STATE_FILE "tests/ref/gpt2_tiny_state.bin"

typedef struct ref_state {
    int B, T, steps, V, Vp;
    size_t nparams;
    int *x, *y;
    float *logits, loss, *grads, *losses;
} RefState;

static void ref_load_state(RefState *s)
{
    FILE *f = fopen(REF_STATE_FILE, "rb");
    if (!f) fail_msg("%s: cannot open (run from the repository root)", REF_STATE_FILE);
    int32_t h[256];
    assert_int_equal(fread(h, sizeof h, 1, f), 1);
    assert_int_equal(h[0], 20241129);
    assert_int_equal(h[1], 1);
    s->B = h[2], s->T = h[3], s->steps = h[4], s->V = h[5], s->Vp = h[6];
    s->nparams = (size_t)h[7];
    assert_true(s->steps >= 2 && s->steps <= 32);
    size_t N = (size_t)s->B * s->T;
    s->x = malloc(sizeof(int) * N), s->y = malloc(sizeof(int) * N);
    s->logits = malloc(sizeof(float) * N * s->V);
    s->grads = malloc(sizeof(float) * s->nparams);
    s->losses = malloc(sizeof(float) * s->steps);
    assert_true(s->x && s->y && s->logits && s->grads && s->losses);
    assert_int_equal(fread(s->x, sizeof(int), N, f), N);
    assert_int_equal(fread(s->y, sizeof(int), N, f), N);
    assert_int_equal(fread(s->logits, sizeof(float), N * s->V, f), N * s->V);
    assert_int_equal(fread(&s->loss, sizeof(float), 1, f), 1);
    assert_int_equal(fread(s->grads, sizeof(float), s->nparams, f), s->nparams);
    assert_int_equal(fread(s->losses, sizeof(float), s->steps, f), (size_t)s->steps);
    fclose(f);
}

static void ref_free_state(RefState *s)
{
    free(s->x), free(s->y), free(s->logits), free(s->grads), free(s->losses);
}

static RefState *g_ref_state;
static void ref_fixed_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    (void)ctx, (void)first;
    memcpy(in, g_ref_state->x, sizeof(int) * (size_t)B * g_ref_state->T);
    memcpy(tg, g_ref_state->y, sizeof(int) * (size_t)B * g_ref_state->T);
}

/* The deck of the fixture (keep in step with make_gpt2_fixture.py). */
static FtConfig ref_fixture_cfg(void)
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

/* The fixture on backend be (NULL: the CPU): logits and loss of the first forward, every
 * parameter gradient of its backward, the losses of 10 AdamW steps, each within tol of
 * PyTorch's; the steps must train (the last loss 0.5 below the first). */
static void ref_gpt2_check(const FtBackend *be, double tol)
{
    RefState s;
    ref_load_state(&s);
    g_ref_state = &s;
    FtConfig c = ref_fixture_cfg();
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    char err[512];
    if (llmc_read_model(REF_MODEL_FILE, &m, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(m.nparams, s.nparams);
    assert_int_equal(s.B, c.train.batch);
    assert_int_equal(s.T, c.train.seq_len);
    if (be && !backend_is_host(be)) { /* the model staged into the device's memory */
        FtModel host = m;
        model_create_on(&m, &host.cfg, &host.sh, be);
        model_copy_state(&m, &host);
        model_free(&host);
    }
    const FtBackend *mb = m.be;

    FtBatchSource src = {ref_fixed_fetch, NULL};
    FtTrainer tr;
    train_init(&tr, &c, &m, &src, NULL);
    FtStepInfo st;
    train_step(&tr, &st); /* forward + backward on the batch, then the first AdamW step */

    /* logits: ftllm keeps (N, Vp); compare the first V columns */
    size_t N = (size_t)s.B * s.T;
    float *lg = malloc(sizeof(float) * N * s.Vp), *lv = malloc(sizeof(float) * N * s.V);
    float *g = malloc(sizeof(float) * m.nparams);
    assert_true(lg && lv && g);
    mb->to_host(mb->ctx, lg, tr.tape.t[tr.tape.logits].data, sizeof(float) * N * s.Vp);
    for (size_t n = 0; n < N; n++) memcpy(lv + n * s.V, lg + n * s.Vp, sizeof(float) * s.V);
    double e = ft_rel_l2(lv, s.logits, N * s.V);
    printf("  %-10s rel err %.2e\n", "logits", e);
    assert_true(e < tol);
    float loss = (float)st.loss;
    e = fabs((double)loss - s.loss) / fabs((double)s.loss);
    printf("  %-10s rel err %.2e (ftllm %.6f, torch %.6f)\n", "loss", e, loss, s.loss);
    assert_true(e < tol);
    mb->to_host(mb->ctx, g, m.grads, sizeof(float) * m.nparams);
    double worst = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m.p[i];
        e = ft_rel_l2(g + p->offset, s.grads + p->offset, p->size);
        printf("  d%-9s rel err %.2e\n", p->name, e);
        if (!(e <= worst)) worst = e;
        assert_true(e < tol);
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
        if (!(e <= worst)) worst = e;
        printf("  step %2d loss ftllm %.6f torch %.6f rel err %.2e\n", k + 1, losses[k],
               s.losses[k], e);
        assert_true(e < tol);
    }
    assert_true(losses[s.steps - 1] < losses[0] - 0.5); /* the steps did train */
    train_free(&tr);
    model_free(&m);
    free(lg), free(lv), free(g);
    ref_free_state(&s);
}

#endif

/* test_reexec.c: every tape entry can run again from its inputs and gives the same bytes.
 *
 * ft-test: ranks 1 2
 *
 * DMR re-executes an op and compares output bytes; SPARe and rollback redo whole steps. Both
 * need every entry to be a pure function of its inputs: no output may share storage with an
 * input (in-place accumulation, an AdamW that updates p/m/v where they are) and no output may
 * depend on what its buffer held. The executor's after-op hook re-runs each op right after the
 * primary, first on a buffer filled with garbage, and compares; it also checks that no output
 * overlaps an input. Over two steps of 2 micro-batches (so the gradient banks' earlier sums are
 * exercised) of dense GPT-2 without AC, with AC every 2 and full, MoE, and on 2 ranks tp2,
 * pp2 (1F1B), dp2 and MoE ep2, for the model's tapes and the optimizer's. A redo asked for by
 * the before-commit hook ends bitwise where a plain run ends; on dp2 the gradient buckets'
 * reductions are tested between ops (parallel.progress); a step still asked to redo after
 * FT_TRAIN_MAX_REDOS attempts fails and commits nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

static int g_dims[2];

typedef struct check {
    long long entries, kinds[FT_OP_NKINDS][2], mismatch, overlap;
    char first_bad[160];
    const FtExec *ex;   /* the trainer's executor while it runs */
    long long watched;  /* ops after which the executor had requests to test */
    long long by_instance[2]; /* micro-batch tape ops per micro-batch the executor named */
    long long bad_instance;   /* ... not 0 or 1 (2 micro-batches), or an optimizer op not 0 */
} Check;

static size_t tensor_bytes(const FtTape *tp, int id) { return tape_tensor_bytes(tp, id); }

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = a, *y = b;
    return na && nb && x < y + nb && y < x + na;
}

static void after_op(void *arg, const FtTape *tp, int i, int instance, const FtOpCall *c)
{
    Check *ck = arg;
    const FtTapeEntry *e = &tp->e[i];
    ck->entries++;
    bool opt = e->kind == FT_OP_ADAMW || e->kind == FT_OP_GRADNORM;
    if (instance < 0 || instance > 1 || (opt && instance != 0)) ck->bad_instance++;
    else if (!opt) ck->by_instance[instance]++;
    if (ck->ex && ck->ex->nwatch) ck->watched++;
    ck->kinds[e->kind][e->dir]++;
    void *saved[FT_OP_MAX_OUT] = {0};
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        if (e->out[k] < 0 || !c->out[k]) continue;
        size_t nb = tensor_bytes(tp, e->out[k]);
        for (int j = 0; j < FT_OP_MAX_IN; j++)
            if (e->in[j] >= 0 && c->in[j] &&
                overlaps(c->out[k], nb, c->in[j], tensor_bytes(tp, e->in[j]))) {
                ck->overlap++;
                if (!ck->first_bad[0])
                    snprintf(ck->first_bad, sizeof ck->first_bad, "entry %d %s: output %s overlaps input %s",
                             i, e->label ? e->label : "", tp->t[e->out[k]].name,
                             tp->t[e->in[j]].name);
            }
        saved[k] = malloc(nb);
        memcpy(saved[k], c->out[k], nb);
        memset(c->out[k], 0xA5, nb); /* garbage: the re-run must write every byte */
    }
    const FtOpDesc *d = ops_desc(e->kind);
    (e->dir == FT_FWD ? d->fwd : d->bwd)(c);
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        if (!saved[k]) continue;
        size_t nb = tensor_bytes(tp, e->out[k]);
        if (memcmp(saved[k], c->out[k], nb)) {
            ck->mismatch++;
            if (!ck->first_bad[0])
                snprintf(ck->first_bad, sizeof ck->first_bad, "entry %d %s.%s %s: output %s differs",
                         i, d->name, e->dir ? "bwd" : "fwd", e->label ? e->label : "",
                         tp->t[e->out[k]].name);
        }
        memcpy(c->out[k], saved[k], nb); /* the primary's bytes go on */
        free(saved[k]);
    }
}

static FtConfig cfg(int tp, int pp, int dp, int ep, int experts, int ac)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 4, c.model.heads = 4, c.model.channels = 32, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = 2, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0, c.train.ac = ac, c.train.ac_every = 2;
    c.parallel.tp = tp, c.parallel.pp = pp, c.parallel.dp = dp, c.parallel.ep = ep;
    c.parallel.microbatches = 2, c.parallel.bucket_mb = 0.01;
    c.model.experts = experts, c.model.top_k = 2, c.model.capacity_factor = 1.0;
    c.model.aux_loss_coef = 0.01;
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

/* Trains `steps` steps of the layout with the re-executing hook (when ck) and returns the
 * model (caller frees). redo_at: the before-commit hook asks for one redo at that step. */
static int g_redo_at, g_redos;
static int redo_once(void *ctx, FtTrainer *tr, int attempt)
{
    (void)ctx;
    if (tr->model->step + 1 == g_redo_at && attempt == 0) return g_redos++, 1;
    return 0;
}

static void train_layout(const FtConfig *c, Check *ck, int redo_at, FtModel *m)
{
    int np = (int)(c->parallel.tp * c->parallel.pp * c->parallel.dp * c->parallel.ep);
    FtGrid g;
    char err[256];
    assert_int_equal(deck_check(c, np, err, sizeof err), 0);
    int one = np == 1;
    if (!one)
        assert_int_equal(grid_create(&g, ft_test_comm(), (int)c->parallel.tp, (int)c->parallel.pp,
                                     (int)c->parallel.dp, (int)c->parallel.ep, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = 1, .pp = 1, .ep = 1};
    if (!one)
        sh = (FtShard){.tp = g.tp, .tp_rank = g.tp_rank, .pp = g.pp, .pp_rank = g.pp_rank,
                       .ep = g.ep, .ep_rank = g.ep_rank};
    model_create_sharded(m, &mc, &sh);
    model_init_random(m, 7);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init_grid(&tr, c, m, one ? NULL : &g, &src, NULL);
    if (ck) tr.ex.hooks = (FtExecHooks){.after_op = after_op, .arg = ck}, ck->ex = &tr.ex;
    g_redo_at = redo_at, g_redos = 0;
    if (redo_at) tr.before_commit = redo_once;
    for (int s = 0; s < (int)c->train.steps; s++) {
        FtStepInfo st;
        FtStepStatus rc = train_step(&tr, &st);
        assert_int_equal(rc, st.step == redo_at ? FT_STEP_REDONE : FT_STEP_OK);
        assert_int_equal(st.redos, st.step == redo_at ? 1 : 0);
    }
    if (ck) ck->ex = NULL;
    train_free(&tr);
    if (!one) grid_destroy(&g);
}

static void check_layout(int tp, int pp, int dp, int ep, int experts, int ac)
{
    if (tp * pp * dp * ep != ft_test_size()) skip();
    FtConfig c = cfg(tp, pp, dp, ep, experts, ac);
    Check ck = {0};
    FtModel m;
    train_layout(&c, &ck, 0, &m);
    model_free(&m);
    if (ck.first_bad[0]) fprintf(stderr, "rank %d: %s\n", ft_test_rank(), ck.first_bad);
    assert_all(ck.mismatch == 0 && ck.overlap == 0);
    /* the optimizer's entries and every backward kind were covered */
    assert_all(ck.kinds[FT_OP_ADAMW][FT_FWD] > 0 && ck.kinds[FT_OP_GRADNORM][FT_FWD] > 0 &&
               ck.kinds[FT_OP_MATMUL][FT_BWD] > 0 && ck.kinds[FT_OP_LAYERNORM][FT_BWD] > 0);
    if (experts) assert_all(ck.kinds[FT_OP_MOE_EXPERT][FT_BWD] > 0 &&
                            ck.kinds[FT_OP_MOE_ROUTE][FT_BWD] > 0);
    /* dp: the buckets' reductions are handed to the executor to test between ops
     * (parallel.progress is on by default); a bucket started at a layer's marker is still
     * listed when the next op's hook runs */
    if (dp > 1) assert_all(ck.watched > 0);
    /* the executor names each micro-batch's ops (DMR plans them apart): as many in each */
    assert_all(ck.bad_instance == 0 && ck.by_instance[0] > 0 &&
               ck.by_instance[0] == ck.by_instance[1]);
}

static void test_dense(void **s) { (void)s; check_layout(1, 1, 1, 1, 0, FT_AC_CHOICE_NONE); }
static void test_dense_ac_every(void **s) { (void)s; check_layout(1, 1, 1, 1, 0, FT_AC_CHOICE_EVERY); }
static void test_dense_ac_full(void **s) { (void)s; check_layout(1, 1, 1, 1, 0, FT_AC_CHOICE_FULL); }
static void test_moe(void **s) { (void)s; check_layout(1, 1, 1, 1, 4, FT_AC_CHOICE_FULL); }
static void test_tp2(void **s) { (void)s; check_layout(2, 1, 1, 1, 0, FT_AC_CHOICE_EVERY); }
static void test_pp2(void **s) { (void)s; check_layout(1, 2, 1, 1, 0, FT_AC_CHOICE_FULL); }
static void test_dp2(void **s) { (void)s; check_layout(1, 1, 2, 1, 0, FT_AC_CHOICE_NONE); }
static void test_ep2(void **s) { (void)s; check_layout(1, 1, 1, 2, 4, FT_AC_CHOICE_NONE); }

/* A step redone before its commit (as DMR's rollback and SPARe's re-execution do) ends where
 * the plain run ends, bitwise: parameters and both AdamW moments. */
static void test_redo_is_invisible(void **s)
{
    (void)s;
    int np = ft_test_size();
    FtConfig c = cfg(1, np == 2 ? 2 : 1, 1, 1, 0, FT_AC_CHOICE_EVERY);
    c.train.steps = 3;
    FtModel a, b;
    train_layout(&c, NULL, 0, &a);
    train_layout(&c, NULL, 2, &b);
    assert_all(g_redos == 1);
    assert_all(a.step == 3 && b.step == 3);
    assert_all(!memcmp(a.params, b.params, sizeof(float) * a.nparams) &&
               !memcmp(a.m, b.m, sizeof(float) * a.nparams) &&
               !memcmp(a.v, b.v, sizeof(float) * a.nparams));
    model_free(&a), model_free(&b);
}

/* The before-commit hook asks for a redo at every attempt; records the attempts it saw. */
static int g_attempts[2 * FT_TRAIN_MAX_REDOS], g_nattempts;
static int redo_always(void *ctx, FtTrainer *tr, int attempt)
{
    (void)ctx, (void)tr;
    if (g_nattempts < 2 * FT_TRAIN_MAX_REDOS) g_attempts[g_nattempts] = attempt;
    g_nattempts++;
    return 1;
}

/* A step still asked to redo after FT_TRAIN_MAX_REDOS attempts: FT_STEP_FAILED after exactly
 * that many attempts (0, 1, ...), and nothing committed: step, parameters, moments and data
 * cursor as before it. */
static void test_redo_limit(void **s)
{
    (void)s;
    if (ft_test_size() != 1) skip();
    FtConfig c = cfg(1, 1, 1, 1, 0, FT_AC_CHOICE_NONE);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 7);
    size_t bytes = sizeof(float) * m.nparams;
    float *p0 = malloc(bytes);
    memcpy(p0, m.params, bytes);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init(&tr, &c, &m, &src, NULL);
    tr.before_commit = redo_always;
    g_nattempts = 0;
    FtStepInfo st;
    assert_int_equal(train_step(&tr, &st), FT_STEP_FAILED);
    assert_int_equal(g_nattempts, FT_TRAIN_MAX_REDOS);
    for (int k = 0; k < FT_TRAIN_MAX_REDOS; k++) assert_int_equal(g_attempts[k], k);
    assert_int_equal(st.redos, FT_TRAIN_MAX_REDOS);
    assert_int_equal(m.step, 0);
    assert_true(tr.cursor == 0);
    assert_memory_equal(m.params, p0, bytes);
    for (size_t k = 0; k < m.nparams; k++) assert_true(m.m[k] == 0 && m.v[k] == 0);
    train_free(&tr);
    model_free(&m);
    free(p0);
}

FT_TEST_MAIN(cmocka_unit_test(test_dense), cmocka_unit_test(test_dense_ac_every),
             cmocka_unit_test(test_dense_ac_full), cmocka_unit_test(test_moe),
             cmocka_unit_test(test_tp2), cmocka_unit_test(test_pp2), cmocka_unit_test(test_dp2),
             cmocka_unit_test(test_ep2), cmocka_unit_test(test_redo_is_invisible),
             cmocka_unit_test(test_redo_limit))

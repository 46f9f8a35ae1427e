/* test_regrid.c: a data-parallel replica leaves mid-run and the others train on.
 *
 * ft-test: ranks 2 4
 *
 * dp 2 (x tp 2 on 4 ranks), 2 micro-batches: after step K replica `leave` leaves by a plain
 * call (grid_shrink_dp + train_regrid on the survivors; the fault machinery comes later); the
 * survivors train to step STEPS. The reference: the same first K steps, then a fresh model and
 * trainer built on the survivors' grid, given the state after step K (parameters, moments,
 * step, data cursor), trained to STEPS. The two must end bitwise equal (regrid == a clean start
 * on the smaller grid), on every survivor, for either replica leaving; and the survivors'
 * tensor-parallel copies stay equal. The survivors' trainer keeps its hooks (the executor's
 * after-op and poll hooks, the before-commit hook: the ones still run after the regrid) and
 * its op statistics. */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

enum { K = 2, STEPS = 4 };
static int g_dims[2];

static FtConfig cfg(int tp, int dp)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = 16, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = STEPS, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0;
    c.parallel.tp = tp, c.parallel.dp = dp, c.parallel.microbatches = 2;
    c.parallel.bucket_mb = 0.001;
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

static void make_model(FtModel *m, const FtConfig *c, const FtGrid *g)
{
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = g->tp, .tp_rank = g->tp_rank, .pp = 1, .ep = 1};
    model_create_sharded(m, &mc, &sh);
    model_init_random(m, 11);
}

static void steps(FtTrainer *tr, int n)
{
    for (int s = 0; s < n; s++) {
        FtStepInfo st;
        assert_int_equal(train_step(tr, &st), FT_STEP_OK);
    }
}

/* Hooks that count their calls (results unchanged: no redo, no work in the poll). */
typedef struct hook_counts {
    long long ops, commits;
} HookCounts;

static void count_op(void *arg, const FtTape *tp, int entry, int instance, const FtOpCall *c)
{
    (void)tp, (void)entry, (void)instance, (void)c;
    ((HookCounts *)arg)->ops++;
}

static int count_commit(void *ctx, FtTrainer *tr, int attempt)
{
    (void)tr, (void)attempt;
    ((HookCounts *)ctx)->commits++;
    return 0;
}

static bool idle_poll(void *arg)
{
    (void)arg;
    return false;
}

static long long op_calls(const FtExecStats *s)
{
    long long n = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++) n += s->calls[k][FT_FWD] + s->calls[k][FT_BWD];
    return n;
}

static void check_leave(int leave)
{
    int np = ft_test_size(), tp = np / 2;
    FtConfig c = cfg(tp, 2);
    char err[256];
    FtBatchSource src = {ft_synth_fetch, g_dims};

    /* the run whose replica leaves */
    FtGrid g, small;
    assert_int_equal(grid_create(&g, ft_test_comm(), tp, 1, 2, 1, err, sizeof err), 0);
    FtModel a;
    make_model(&a, &c, &g);
    FtTrainer tr;
    train_init_grid(&tr, &c, &a, &g, &src, NULL);
    HookCounts hc = {0};
    int kept = 1;
    tr.ex.hooks = (FtExecHooks){.after_op = count_op, .arg = &hc};
    tr.before_commit = count_commit, tr.before_commit_ctx = &hc;
    tr.ex.poll = (FtPoll){idle_poll, &hc};
    steps(&tr, K);
    int rc = grid_shrink_dp(&g, leave, &small, err, sizeof err);
    assert_true(rc == 0 || rc == 1);
    assert_int_equal(rc == 1, g.dp_rank == leave);
    if (rc == 0) {
        HookCounts before = hc;
        long long calls = op_calls(&tr.stats);
        train_regrid(&tr, &small);
        assert_int_equal(tr.data_width, 1);
        kept = tr.ex.poll.fn == idle_poll && tr.ex.poll.arg == &hc &&
               op_calls(&tr.stats) == calls;
        steps(&tr, STEPS - K);
        kept &= hc.ops > before.ops && hc.commits == before.commits + STEPS - K &&
                op_calls(&tr.stats) > calls;
    }
    uint64_t cursor_a = tr.cursor;
    train_free(&tr);
    assert_all(kept); /* hooks and statistics, on every survivor */

    /* the reference: the same K steps, then a fresh start on the survivors' grid */
    FtModel b;
    make_model(&b, &c, &g);
    train_init_grid(&tr, &c, &b, &g, &src, NULL);
    steps(&tr, K);
    uint64_t cursor = tr.cursor;
    train_free(&tr);
    if (rc == 0) {
        FtModel f;
        make_model(&f, &c, &small);
        size_t n = b.nparams * sizeof(float);
        memcpy(f.params, b.params, n), memcpy(f.m, b.m, n), memcpy(f.v, b.v, n);
        f.step = b.step;
        train_init_grid(&tr, &c, &f, &small, &src, NULL);
        tr.cursor = cursor;
        steps(&tr, STEPS - K);
        assert_true(tr.cursor == cursor_a);
        train_free(&tr);
        assert_int_equal(a.step, STEPS);
        assert_memory_equal(a.params, f.params, n);
        assert_memory_equal(a.m, f.m, n);
        assert_memory_equal(a.v, f.v, n);
        /* tp copies of the replicated LayerNorm weights stay equal */
        MPI_Comm tpc = small.tp_comm;
        float *lnf = a.params + a.p[FT_P_LNFW].offset;
        int ntp = 0;
        MPI_Comm_size(tpc, &ntp);
        float *all = malloc(sizeof(float) * a.p[FT_P_LNFW].size * (size_t)ntp);
        MPI_Allgather(lnf, (int)a.p[FT_P_LNFW].size, MPI_FLOAT, all, (int)a.p[FT_P_LNFW].size,
                      MPI_FLOAT, tpc);
        for (int k = 1; k < ntp; k++)
            assert_memory_equal(all, all + k * a.p[FT_P_LNFW].size, a.p[FT_P_LNFW].size * 4);
        free(all);
        model_free(&f);
        grid_destroy(&small);
    } else {
        assert_int_equal(a.step, K); /* the leaving replica stopped where it left */
    }
    model_free(&a), model_free(&b);
    grid_destroy(&g);
    MPI_Barrier(ft_test_comm());
}

static void test_replica1_leaves(void **s) { (void)s; check_leave(1); }
static void test_replica0_leaves(void **s) { (void)s; check_leave(0); }

/* A bad replica number is refused with a message, on every rank alike. */
static void test_bad_leave(void **s)
{
    (void)s;
    int tp = ft_test_size() / 2;
    FtGrid g, out;
    char err[256];
    assert_int_equal(grid_create(&g, ft_test_comm(), tp, 1, 2, 1, err, sizeof err), 0);
    err[0] = 0;
    assert_int_equal(grid_shrink_dp(&g, 2, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "replica 2"));
    grid_destroy(&g);
}

FT_TEST_MAIN(cmocka_unit_test(test_replica1_leaves), cmocka_unit_test(test_replica0_leaves),
             cmocka_unit_test(test_bad_leave))

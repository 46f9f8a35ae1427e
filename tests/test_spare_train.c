/* test_spare_train.c: SPARe in the training loop (train.h, gradsync.h's shard-keyed variant).
 *
 * ft-test: ranks 4
 *
 *  - the shard-keyed reduction alone: the same bits whichever rank holds each shard, and the
 *    exactly-once count catches a shard entered twice (by two ranks or one) or never, and
 *    names the first such shard (on every rank alike);
 *  - dp 4, r 2: replica 1 fails after step K; the survivors end bitwise equal (parameters,
 *    moments, step, cursor) to the same run without the failure; with no failure every replica
 *    computes only level 0 (counters); the same with a replica = tp 2 ranks, = pp 2 stages,
 *    with a mixture-of-experts model (ep 1), and with expert parallelism (dp 2 x ep 2: a
 *    replica = 2 ep ranks, each computing its own part of a shard; replica 1 or 0 fails);
 *  - r 1 with no failure against plain data parallelism (spare.r = 0, bucketed all-reduce): on
 *    2 ranks bitwise (a + b is commutative, so both reductions give the same bits); on 4 ranks
 *    the all-reduce adds in its own tree order, so within a tolerance, and SPARe bitwise run to
 *    run; with ep 2 (dp 2 x ep 2) within the same tolerance, for the same reason (plain sums the
 *    dense gradient over the 4 data ranks in the all-reduce's order, SPARe over ep, then in
 *    shard order), and SPARe bitwise run to run; on 1 rank (one shard type, its sum a copy)
 *    bitwise;
 *  - the failure path through train_run's faults hook: the failed replica's ranks report that
 *    they left, the survivors finish the run; a wipe-out stops the run cleanly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/gradsync.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

enum { K = 3, STEPS = 6 };
static int g_dims[2];
static int g_experts; /* model.experts of the next runs (0: dense) */
static int g_ep = 1;  /* parallel.ep of the next runs */

static FtConfig cfg(int tp, int pp, int dp, int r)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = 16, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = STEPS, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0;
    c.parallel.tp = tp, c.parallel.pp = pp, c.parallel.dp = dp, c.parallel.microbatches = 2;
    c.parallel.bucket_mb = 0.001;
    c.spare.r = r;
    c.model.experts = g_experts, c.model.top_k = 1;
    c.parallel.ep = g_ep;
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

static void make_model(FtModel *m, const FtConfig *c, const FtGrid *g)
{
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = g->tp, .tp_rank = g->tp_rank, .pp = g->pp, .pp_rank = g->pp_rank,
                  .ep = g->ep, .ep_rank = g->ep_rank};
    model_create_sharded(m, &mc, &sh);
    model_init_random(m, 11);
}

/* What a run leaves behind on this rank. */
typedef struct run {
    FtModel m;
    uint64_t cursor;
    FtSpareStats sp;
    bool left;
} Run;

/* steps STEPS on a grid over comm; replica `fail` (-1: none) fails after step K. */
static void run(Run *out, MPI_Comm comm, int tp, int pp, int dp, int r, int fail)
{
    FtConfig c = cfg(tp, pp, dp, r);
    char err[256];
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtGrid g;
    assert_int_equal(grid_create(&g, comm, tp, pp, dp, g_ep, err, sizeof err), 0);
    make_model(&out->m, &c, &g);
    FtTrainer tr;
    train_init_grid(&tr, &c, &out->m, &g, &src, NULL);
    for (int s = 0; s < STEPS && !tr.left; s++) {
        if (s == K && fail >= 0) {
            int rc = train_fail_replica(&tr, fail);
            assert_true(rc == SPARE_MASKED || rc == SPARE_DEEPER);
            if (tr.left) break;
        }
        FtStepInfo st;
        assert_int_equal(train_step(&tr, &st), FT_STEP_OK);
        assert_true(isfinite(st.loss));
    }
    out->cursor = tr.cursor;
    out->sp = tr.spare;
    out->left = tr.left;
    train_free(&tr);
    grid_destroy(&g);
}

/* Parameters, moments and step bitwise equal. */
static bool same_state(const FtModel *a, const FtModel *b)
{
    size_t n = a->nparams * sizeof(float);
    return a->step == b->step && !memcmp(a->params, b->params, n) && !memcmp(a->m, b->m, n) &&
           !memcmp(a->v, b->v, n);
}

/* With expert parallelism: the dense parameters are bitwise the same on the ep ranks of each
 * replica (each ep rank banks the shard's dense gradient summed over them, not its own part). */
static bool dense_same_over_ep(const FtModel *m, int tp)
{
    int rank = 0, ok = 1;
    MPI_Comm_rank(ft_test_comm(), &rank);
    MPI_Comm ep;
    MPI_Comm_split(ft_test_comm(), rank / (tp * g_ep) * tp + rank % tp, rank, &ep);
    float *mine = malloc(sizeof(float) * m->nparams);
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m->p[i];
        if (p->expert || !p->size) continue;
        memcpy(mine, m->params + p->offset, sizeof(float) * p->size);
        MPI_Bcast(mine, (int)p->size, MPI_FLOAT, 0, ep);
        ok &= !memcmp(mine, m->params + p->offset, sizeof(float) * p->size);
    }
    free(mine);
    MPI_Comm_free(&ep);
    return ok;
}

/* ---- the reduction alone ----------------------------------------------------------------- */

static float shard_value(int s, size_t i) { return (float)(sin(1.0 + 7.0 * s + 0.37 * i) / 3.0); }

/* Each rank contributes the shards in held[rank] (terminated by -1); returns the violation
 * (-1: none) and leaves the reduced gradient in m->grads. */
static int reduce_with(FtModel *m, FtComm *dp, const int held[4][4], int *count)
{
    FtGradSyncComms gc = {.dense = dp};
    FtGradSync *g = gradsync_create_shards(m, &gc, 1, 4, 4);
    FtExec ex = {0};
    int me = comm_rank(dp);
    for (int k = 0; held[me][k] >= 0; k++) {
        int s = held[me][k];
        gradsync_shard_begin(g, s);
        for (size_t i = 0; i < m->nparams; i++) m->grads[i] = shard_value(s, i);
        gradsync_shard_end(g, &ex);
    }
    gradsync_finish(g, &ex);
    int bad = gradsync_shard_violation(g, count);
    gradsync_free(g);
    return bad;
}

static void test_reduction_fixed_order_and_counts(void **state)
{
    (void)state;
    FtConfig c = cfg(1, 1, 4, 1);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    FtComm *dp = comm_create_mpi_dup(ft_test_comm(), "dp");
    size_t n = m.nparams;
    float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) { /* shard order: ((g0 + g1) + g2) + g3 */
        want[i] = shard_value(0, i);
        for (int s = 1; s < 4; s++) want[i] += shard_value(s, i);
    }
    int cnt;
    static const int plain[4][4] = {{0, -1}, {1, -1}, {2, -1}, {3, -1}};
    static const int moved[4][4] = {{3, 1, -1}, {-1}, {0, -1}, {2, -1}}; /* any holders */
    static const int twice[4][4] = {{0, 1, -1}, {1, -1}, {2, -1}, {3, -1}};
    static const int never[4][4] = {{0, -1}, {1, -1}, {2, -1}, {-1}};
    static const int here2[4][4] = {{0, -1}, {1, 1, -1}, {2, -1}, {3, -1}}; /* on one rank */
    static const int both[4][4] = {{0, 1, -1}, {1, -1}, {2, -1}, {-1}}; /* 1 twice, 3 never */
    assert_all(reduce_with(&m, dp, plain, &cnt) == -1);
    memcpy(got, m.grads, sizeof(float) * n);
    assert_all(memcmp(got, want, sizeof(float) * n) == 0);
    assert_all(reduce_with(&m, dp, moved, &cnt) == -1);
    assert_all(memcmp(m.grads, want, sizeof(float) * n) == 0);
    assert_all(reduce_with(&m, dp, twice, &cnt) == 1 && cnt == 2);
    assert_all(reduce_with(&m, dp, never, &cnt) == 3 && cnt == 0);
    assert_all(reduce_with(&m, dp, here2, &cnt) == 1 && cnt == 2);
    assert_all(reduce_with(&m, dp, both, &cnt) == 1 && cnt == 2); /* the first bad shard */
    free(want), free(got);
    comm_destroy(dp);
    model_free(&m);
}

/* ---- training ---------------------------------------------------------------------------- */

/* A failure at step K against no failure, on a tp x pp x dp grid of the test's 4 ranks. */
static void check_masked(int tp, int pp, int dp, int r, int fail)
{
    Run a, b;
    run(&a, ft_test_comm(), tp, pp, dp, r, fail);
    run(&b, ft_test_comm(), tp, pp, dp, r, -1);
    /* no failure: every replica computed its level-0 shard only */
    assert_all(!b.left && b.sp.steps == STEPS && b.sp.mine == STEPS && b.sp.mine_deep == 0);
    assert_all(b.sp.levels == STEPS && b.sp.skipped == 0);
    assert_all(b.sp.computed == (long long)dp * STEPS && b.sp.needed == b.sp.computed);
    /* the failure: masked, and the survivors end bitwise where the failure-free run ends */
    int rank = 0;
    MPI_Comm_rank(ft_test_comm(), &rank);
    bool failed = rank / (tp * pp * g_ep) == fail;
    assert_all(a.left == failed);
    /* the failed replica stopped where it failed; the survivors masked it, every shard still
     * computed once per step, they went deeper, and end bitwise where no failure ends */
    assert_all(failed ? a.m.step == K
                      : a.sp.masked == 1 && a.cursor == b.cursor && same_state(&a.m, &b.m));
    assert_all(failed || (a.sp.computed == (long long)dp * STEPS && a.sp.levels > STEPS));
    if (g_ep > 1) assert_all(dense_same_over_ep(&a.m, tp) && dense_same_over_ep(&b.m, tp));
    model_free(&a.m), model_free(&b.m);
    MPI_Barrier(ft_test_comm());
}

static void test_dp4_r2_replica1_fails(void **s) { (void)s; check_masked(1, 1, 4, 2, 1); }
static void test_tp2_dp2_r2_replica0_fails(void **s) { (void)s; check_masked(2, 1, 2, 2, 0); }
static void test_pp2_dp2_r2_replica1_fails(void **s) { (void)s; check_masked(1, 2, 2, 2, 1); }
/* mixture of experts without expert parallelism: expert gradients are reduced with the rest */
static void test_moe_dp4_r2_replica2_fails(void **s)
{
    (void)s;
    g_experts = 2;
    check_masked(1, 1, 4, 2, 2);
    g_experts = 0;
}

/* expert parallelism: a replica is its 2 ep ranks, each with 2 of the 4 experts; replica 0
 * failing too (the survivor, replica 1, is then the grid's dp 0 but still reads shard 1 as its
 * own and computes shard 0 a level deeper) */
static void test_moe_dp2_ep2_r2_replica_fails(void **s)
{
    (void)s;
    g_experts = 4, g_ep = 2;
    check_masked(1, 1, 2, 2, 1);
    check_masked(1, 1, 2, 2, 0);
    g_experts = 0, g_ep = 1;
}

/* r = 1 against plain data parallelism on the ranks of comm (dp x g_ep = its size). */
static void check_r1(MPI_Comm comm, int dp, bool bitwise)
{
    Run plain, sp, sp2;
    run(&plain, comm, 1, 1, dp, 0, -1);
    run(&sp, comm, 1, 1, dp, 1, -1);
    run(&sp2, comm, 1, 1, dp, 1, -1);
    assert_all(same_state(&sp.m, &sp2.m)); /* run to run */
    assert_all(sp.cursor == plain.cursor);
    size_t n = sp.m.nparams;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)sp.m.params[i] - plain.m.params[i]);
        if (d > worst) worst = d;
    }
    if (ft_test_rank() == 0)
        printf("r 1 vs plain dp %d ep %d: largest parameter difference %.3g after %d steps\n", dp,
               g_ep, worst, STEPS);
    if (bitwise) assert_all(same_state(&sp.m, &plain.m));
    else assert_all(worst < 1e-5); /* last-bit differences of the sums, grown over the steps */
    model_free(&plain.m), model_free(&sp.m), model_free(&sp2.m);
}

static void test_r1_vs_plain_dp2_bitwise(void **s)
{
    (void)s;
    MPI_Comm half;
    int rank = 0;
    MPI_Comm_rank(ft_test_comm(), &rank);
    MPI_Comm_split(ft_test_comm(), rank / 2, rank, &half);
    check_r1(half, 2, true);
    MPI_Comm_free(&half);
    assert_all(1);
}

static void test_r1_vs_plain_dp4(void **s) { (void)s; check_r1(ft_test_comm(), 4, false); }

static void test_r1_vs_plain_dp2_ep2(void **s)
{
    (void)s;
    g_experts = 4, g_ep = 2;
    check_r1(ft_test_comm(), 2, false);
    g_experts = 0, g_ep = 1;
}

/* One replica (dp 1, r 1: one shard type, summed alone) on each rank by itself: bitwise the
 * run without SPARe. */
static void test_r1_vs_plain_dp1_bitwise(void **s)
{
    (void)s;
    MPI_Comm one;
    int rank = 0;
    MPI_Comm_rank(ft_test_comm(), &rank);
    MPI_Comm_split(ft_test_comm(), rank, 0, &one);
    check_r1(one, 1, true);
    MPI_Comm_free(&one);
    assert_all(1);
}

/* ---- train_run with the faults hook -------------------------------------------------------- */

typedef struct fails {
    int n;
    long long step[4];
    int replica[4];
} Fails;

static void fail_hook(void *ctx, FtTrainer *tr, long long step)
{
    const Fails *f = ctx;
    for (int k = 0; k < f->n; k++)
        if (f->step[k] == step) train_fail_replica(tr, f->replica[k]);
}

static void run_loop(const Fails *f, FtTrainSummary *s, FtSpareStats *st, bool *left)
{
    FtConfig c = cfg(1, 1, 4, 2);
    char err[256];
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtGrid g;
    assert_int_equal(grid_create(&g, ft_test_comm(), 1, 1, 4, 1, err, sizeof err), 0);
    FtModel m;
    make_model(&m, &c, &g);
    FtTrainer tr;
    train_init_grid(&tr, &c, &m, &g, &src, NULL);
    tr.before_step = fail_hook, tr.before_step_ctx = (void *)f;
    train_run(&tr, s);
    *st = tr.spare;
    *left = tr.left;
    train_report_spare(&tr, NULL);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

static void test_run_hook_masks_then_wipes_out(void **state)
{
    (void)state;
    int rank = 0;
    MPI_Comm_rank(ft_test_comm(), &rank);
    FtTrainSummary s;
    FtSpareStats st;
    bool left;
    /* replica 1 fails before step 4, replica 3 before step 5: both masked (r 2, N 4) */
    Fails two = {2, {4, 5}, {1, 3}};
    run_loop(&two, &s, &st, &left);
    bool gone = rank == 1 || rank == 3;
    assert_all(left == gone && s.left == gone && !s.wipeout);
    assert_all(gone || (s.ok && s.steps == STEPS && st.masked == 2 && st.wipeouts == 0));
    /* replicas 1 and 2 hold shard 2 (r 2): the second failure wipes it out */
    Fails wipe = {2, {3, 4}, {1, 2}};
    run_loop(&wipe, &s, &st, &left);
    assert_all(rank == 1 ? left : (!left && s.wipeout && !s.ok && st.wipeouts == 1 &&
                                   s.steps == 3));
    MPI_Barrier(ft_test_comm());
}

FT_TEST_MAIN(cmocka_unit_test(test_reduction_fixed_order_and_counts),
             cmocka_unit_test(test_dp4_r2_replica1_fails),
             cmocka_unit_test(test_tp2_dp2_r2_replica0_fails),
             cmocka_unit_test(test_pp2_dp2_r2_replica1_fails),
             cmocka_unit_test(test_moe_dp4_r2_replica2_fails),
             cmocka_unit_test(test_moe_dp2_ep2_r2_replica_fails),
             cmocka_unit_test(test_r1_vs_plain_dp2_bitwise), cmocka_unit_test(test_r1_vs_plain_dp4),
             cmocka_unit_test(test_r1_vs_plain_dp2_ep2),
             cmocka_unit_test(test_r1_vs_plain_dp1_bitwise),
             cmocka_unit_test(test_run_hook_masks_then_wipes_out))

/* test_spare_job.c: SPARe's job-wide answers to failures (train_spare.c), through train_run
 * with the job channel (train_spare_attach), a faults hook and checkpoints (train_ckpt.h).
 *
 * ft-test: ranks 4
 *
 *  - a wipe-out restarts in-process from the newest verified checkpoint (one written by the
 *    survivors after a first failure), every replica back: the run finishes, ends bitwise equal
 *    (parameters, moments, step, cursor) to the run without failures, and counts the restart
 *    and the steps computed again; with spare.wipeout = requeue, or no checkpoint, it stops as
 *    before (a wipe-out, nothing restarted);
 *  - a hot spare (dp 3 + 1 spare, r 2): replica 1 fails before step 3 and the spare takes its
 *    place; replica 2 fails before step 5 and is still masked, which without the spare is a
 *    wipe-out (asserted too); the run ends bitwise equal to the run without failures, where the
 *    unused spare idles through the run and leaves at its end; two failures before one step: the
 *    spare joins for the first and takes part in the second; a spare that takes replica 0's
 *    place mid-run gets the run's state (copied from another place), not its own initial one;
 *  - a wipe-out when every replica that trained through it was a spare (dp 2 + 2 spares, r 1):
 *    the restart brings back the first grid with the run's counters and both spares wait again
 *    (the next failure is a spare's again); bitwise the run without failures;
 *  - the same restart with expert parallelism (dp 2 x ep 2, r 1, a mixture of experts): the
 *    checkpoint holds each ep rank's experts, and every rank ends bitwise equal to itself in the
 *    run without failures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"
#include "ftllm/train_ckpt.h"

enum { STEPS = 8 };
static int g_dims[2];
static int g_ep = 1; /* parallel.ep of the next runs (> 1: a mixture of 4 experts) */

static FtConfig cfg(int dp, int r, int spares, const char *dir, long long interval)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = 16, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = STEPS, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0, c.train.sample_tokens = 0;
    c.parallel.dp = dp, c.parallel.microbatches = 2, c.parallel.ep = g_ep;
    if (g_ep > 1) c.model.experts = 4, c.model.top_k = 1;
    c.spare.r = r, c.spare.spares = spares;
    c.run.log_level = FT_LOG_WARN;
    snprintf(c.run.name, sizeof c.run.name, "job");
    snprintf(c.checkpoint.dir, sizeof c.checkpoint.dir, "%s", dir ? dir : "");
    c.checkpoint.interval = interval;
    c.checkpoint.keep = 100;
    assert_int_equal(deck_check(&c, ft_test_size(), err, sizeof err), 0);
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

/* The faults hook as the fault schedule's: a step's failures at once, each step once. */
typedef struct fails {
    int n;
    long long step[4];
    int replica[4];
} Fails;

static void fail_hook(void *ctx, FtTrainer *tr, long long step)
{
    const Fails *f = ctx;
    if (step <= tr->spare.fail_upto) return;
    tr->spare.fail_upto = step;
    int batch[4], n = 0;
    for (int k = 0; k < f->n; k++)
        if (f->step[k] == step) batch[n++] = f->replica[k];
    if (n) train_fail_replicas(tr, batch, n);
}

/* What a run leaves on this rank. */
typedef struct result {
    FtTrainSummary s;
    FtSpareStats st;
    bool left;
    uint64_t hash;   /* of parameters, moments, step and cursor (live ranks) */
} Result;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t state_hash(const FtModel *m, uint64_t cursor)
{
    size_t n = m->nparams * sizeof(float);
    uint64_t h = fnv(1469598103934665603ull, m->params, n);
    h = fnv(h, m->m, n);
    h = fnv(h, m->v, n);
    h = fnv(h, &m->step, sizeof m->step);
    return fnv(h, &cursor, sizeof cursor);
}

/* train_run on the test's ranks: the first dp x ep ranks train, the rest are spares. */
static void run(Result *out, const FtConfig *c, const Fails *f)
{
    char err[512];
    FtBatchSource src = {ft_synth_fetch, g_dims};
    int rank = ft_test_rank(), dp = (int)c->parallel.dp, ep = (int)c->parallel.ep;
    bool trains = rank < dp * ep;
    FtGrid g;
    assert_true(grid_create_sub(&g, ft_test_comm(), trains, rank, 1, 1, dp, ep, err,
                                sizeof err) >= 0);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtModel m;
    FtShard sh = {.tp = 1, .pp = 1, .ep = ep, .ep_rank = rank % ep}; /* its place in a replica */
    model_create_sharded(&m, &mc, &sh);
    model_init_random(&m, 11);
    FtTrainer tr;
    if (trains) train_init_grid(&tr, c, &m, &g, &src, NULL);
    else train_init_spare(&tr, c, &m, &src, NULL);
    FtTrainCkpt *tc = NULL;
    if (c->checkpoint.interval) {
        assert_int_equal(train_ckpt_create(&tc, c, trains ? g.world : MPI_COMM_SELF, err,
                                           sizeof err), 0);
        train_ckpt_attach(tc, &tr);
    }
    train_spare_attach(&tr, ft_test_comm());
    if (f) tr.before_step = fail_hook, tr.before_step_ctx = (void *)f;
    train_run(&tr, &out->s);
    train_ckpt_destroy(tc);
    out->st = tr.spare;
    out->left = tr.left;
    out->hash = tr.left ? 0 : state_hash(&m, tr.cursor);
    train_report_spare(&tr, NULL);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* The hash of rank 0 (which trains in every run below) on every rank. */
static uint64_t rank0_hash(const Result *r)
{
    uint64_t h = r->hash;
    MPI_Bcast(&h, 1, MPI_UINT64_T, 0, ft_test_comm());
    return h;
}

/* ---- wipe-out -> restart from the newest verified checkpoint -------------------------------- */

static void test_wipeout_restarts_from_checkpoint(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    /* dp 4, r 2: replica 1 fails before step 3 (masked; the checkpoint of step 4 is written by
     * the 3 survivors), replica 2 before step 6: shard 2 has lost both holders. (Few
     * checkpoints: a 4-rank HDF5 write takes seconds on 2 cores.) */
    Fails f = {2, {3, 6}, {1, 2}};
    FtConfig c = cfg(4, 2, 0, dir, 4);
    Result a, b;
    run(&a, &c, &f);
    FtConfig c0 = cfg(4, 2, 0, NULL, 0);
    run(&b, &c0, NULL);
    uint64_t want = rank0_hash(&b);
    /* every replica back after the restart, the run finished */
    assert_all(!a.left && !a.s.left && !a.s.wipeout && a.s.ok && a.s.steps == STEPS);
    /* one masked failure, one wipe-out, one restart from step 4: step 5 computed again */
    assert_all(a.st.masked == 1 && a.st.wipeouts == 1 && a.st.restarts == 1 &&
               a.st.recomputed == 1);
    /* steps 1-5 and the recomputed 5, 6-8: nine steps, every shard once each */
    assert_all(a.st.steps == STEPS + 1 && a.st.needed == 4 * (STEPS + 1) &&
               a.st.computed == a.st.needed);
    /* bitwise the run without failures */
    assert_all(a.hash == want && b.hash == want);
    ft_rmdir(dir);
}

static void test_wipeout_requeue_or_no_checkpoint_stops(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    Fails f = {2, {3, 6}, {1, 2}};
    FtConfig c = cfg(4, 2, 0, dir, 4);
    c.spare.wipeout = FT_WIPEOUT_REQUEUE;
    int rank = ft_test_rank();
    Result a;
    run(&a, &c, &f);
    /* replica 1 left and waited for the end; the others stopped at the wipe-out (replica 2
     * too: a wipe-out changes no grid) */
    assert_all(rank == 1 ? a.s.left && a.left
                         : a.s.wipeout && !a.s.ok && a.st.restarts == 0 && a.s.steps == 5);
    /* no checkpoints at all: the same stop */
    FtConfig c0 = cfg(4, 2, 0, NULL, 0);
    run(&a, &c0, &f);
    assert_all(rank == 1 ? a.s.left : a.s.wipeout && a.st.restarts == 0 && a.s.steps == 5);
    ft_rmdir(dir);
}

/* ---- hot spares ------------------------------------------------------------------------------- */

static void test_hot_spare_restores_redundancy(void **state)
{
    (void)state;
    int rank = ft_test_rank();
    /* dp 3 + 1 spare (rank 3), r 2: replica 1 fails before step 3 (the spare takes its place),
     * replica 2 before step 5 (masked deeper: shard 2 is still held by the spare) */
    Fails f = {2, {3, 5}, {1, 2}};
    FtConfig c = cfg(3, 2, 1, NULL, 0);
    Result a, b;
    run(&a, &c, &f);
    run(&b, &c, NULL);
    uint64_t want = rank0_hash(&b);
    /* no failure: the spare idled through the run and left at its end */
    assert_all(rank == 3 ? b.s.left : !b.left && b.st.spares_used == 0 && b.st.masked == 0);
    /* the spare took replica 1's place, ranks 1 and 2 left, both failures masked */
    assert_all((rank == 1 || rank == 2) == a.left);
    assert_all(a.left || (a.st.spares_used == 1 && a.st.masked == 2 && a.st.wipeouts == 0 &&
                          a.s.steps == STEPS && a.hash == want));
    /* every step computed each shard once; the spare kept the depth at 1 until step 5 */
    assert_all(a.left || (a.st.computed == 3 * STEPS && a.st.levels == 4 + 2 * (STEPS - 4)));
    /* two failures before the same step: the spare takes replica 1's place and, joined, takes
     * part in replica 2's failure, which the controller masks */
    Fails same = {2, {3, 3}, {1, 2}};
    run(&a, &c, &same);
    assert_all((rank == 1 || rank == 2) == a.left);
    assert_all(a.left || (a.st.spares_used == 1 && a.st.masked == 2 && a.s.steps == STEPS &&
                          a.st.levels == 2 + 2 * (STEPS - 2) && a.hash == want));
    /* the spare takes replica 0's place (the first place of the grid) in the middle of the run:
     * the state it gets is the run's, not its own initial one */
    Fails zero = {1, {4}, {0}};
    run(&a, &c, &zero);
    assert_all((rank == 0) == a.left);
    assert_all(a.left || (a.st.spares_used == 1 && a.st.masked == 1 && a.s.steps == STEPS &&
                          a.st.levels == STEPS && a.hash == want));
    /* without a spare left the same two failures wipe shard 2 out before step 5 (the spare
     * is used up by replica 0 before step 1; rank 3 is replica 0 from then on) */
    Fails f3 = {3, {1, 3, 5}, {0, 1, 2}};
    run(&a, &c, &f3);
    assert_all(rank < 2 ? a.s.left
                        : a.s.wipeout && a.st.spares_used == 1 && a.st.masked == 2 &&
                              a.st.wipeouts == 1 && a.s.steps == 4);
    MPI_Barrier(ft_test_comm());
}

/* dp 2 + 2 spares, r 1: both spares take the places of replicas 0 and 1 (before steps 3 and 4;
 * the checkpoint of step 4 is theirs), then the spare in replica 0's place fails before step 6:
 * a wipe-out when only spares trained through it. The restart brings the first grid back (ranks
 * 0 and 1, which had left) with the run's counters, and both spares wait again: replica 1's
 * failure before step 7 is answered by spare 0 once more. The run ends bitwise equal to the run
 * without failures. */
static void test_wipeout_after_spares_then_spare_again(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    int rank = ft_test_rank();
    Fails f = {4, {3, 4, 6, 7}, {0, 1, 0, 1}};
    FtConfig c = cfg(2, 1, 2, dir, 4);
    Result a, b;
    run(&a, &c, &f);
    FtConfig c0 = cfg(2, 1, 2, NULL, 0);
    run(&b, &c0, NULL);
    uint64_t want = rank0_hash(&b);
    /* at the end rank 0 trains as replica 0, rank 2 (spare 0) as replica 1; 1 and 3 wait */
    assert_all((rank == 1 || rank == 3) == a.left);
    /* three joins, one wipe-out restarted from step 4 (step 5 computed again) */
    assert_all(a.left || (a.st.spares_used == 3 && a.st.masked == 3 && a.st.wipeouts == 1 &&
                          a.st.restarts == 1 && a.st.recomputed == 1 && a.s.ok &&
                          a.s.steps == STEPS && a.st.steps == STEPS + 1 && a.hash == want));
    /* every step at depth 1: r 1 has no deeper level, and each failure got a spare */
    assert_all(a.left || a.st.levels == STEPS + 1);
    ft_rmdir(dir);
}

/* dp 2 x ep 2, r 1: replica 1 (ranks 2 and 3) fails before step 6, a wipe-out (shard 1 had
 * one holder); the restart from the checkpoint of step 4 brings it back and computes step 5
 * again. Each rank holds its own experts, so each compares with itself. */
static void test_ep2_wipeout_restarts_from_checkpoint(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    g_ep = 2;
    Fails f = {1, {6}, {1}};
    FtConfig c = cfg(2, 1, 0, dir, 4);
    Result a, b;
    run(&a, &c, &f);
    FtConfig c0 = cfg(2, 1, 0, NULL, 0);
    run(&b, &c0, NULL);
    g_ep = 1;
    assert_all(!a.left && a.s.ok && a.s.steps == STEPS && a.st.masked == 0 &&
               a.st.wipeouts == 1 && a.st.restarts == 1 && a.st.recomputed == 1);
    assert_all(a.st.steps == STEPS + 1 && a.st.computed == 2 * (STEPS + 1));
    assert_all(a.hash == b.hash && b.hash != 0);
    ft_rmdir(dir);
}

FT_TEST_MAIN(cmocka_unit_test(test_wipeout_restarts_from_checkpoint),
             cmocka_unit_test(test_wipeout_requeue_or_no_checkpoint_stops),
             cmocka_unit_test(test_hot_spare_restores_redundancy),
             cmocka_unit_test(test_wipeout_after_spares_then_spare_again),
             cmocka_unit_test(test_ep2_wipeout_restarts_from_checkpoint))

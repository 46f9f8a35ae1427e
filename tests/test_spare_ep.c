/* test_spare_ep.c: a hot spare with expert parallelism (train_spare.c's copy_state over the
 * replicas' ranks at each (tp, pp, ep) place, train.h's c_shards).
 *
 * ft-test: ranks 6
 *
 * dp 2 x ep 2 + 1 hot spare (world ranks 4 and 5), r 2, a mixture of 4 experts (2 per ep rank):
 * replica 1 fails before step 3 and the spare takes its place, or replica 0 fails before step 4
 * (the state then comes from place 1). Each of the spare's ep ranks must get its own experts
 * (from the same ep rank of the live replica), its moments, the step and the cursor: every
 * (replica, ep rank) place ends bitwise equal to that place in the run without failures. */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

enum { STEPS = 6, DP = 2, EP = 2, PLACES = DP * EP };
static int g_dims[2];

static FtConfig cfg(void)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = 16, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8, c.model.experts = 4, c.model.top_k = 1;
    c.train.batch = 2, c.train.steps = STEPS, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0, c.train.sample_tokens = 0;
    c.parallel.dp = DP, c.parallel.ep = EP, c.parallel.microbatches = 2;
    c.spare.r = 2, c.spare.spares = 1;
    c.run.log_level = FT_LOG_WARN;
    assert_int_equal(deck_check(&c, ft_test_size(), err, sizeof err), 0);
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

typedef struct fail {
    long long step;
    int replica;
} Fail;

static void fail_hook(void *ctx, FtTrainer *tr, long long step)
{
    const Fail *f = ctx;
    if (step <= tr->spare.fail_upto) return;
    tr->spare.fail_upto = step;
    if (f->step == step) train_fail_replica(tr, f->replica);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* train_run on the test's 6 ranks (4 train, 2 wait as the spare); out[place]: the hash of
 * parameters, moments, step and cursor of the rank at each (replica, ep rank) place at the
 * end, the same on every rank; *spares_used and *masked from a live rank. */
static void run(const Fail *f, uint64_t out[PLACES], long long *spares_used, long long *masked)
{
    FtConfig c = cfg();
    char err[512];
    FtBatchSource src = {ft_synth_fetch, g_dims};
    int rank = ft_test_rank();
    bool trains = rank < PLACES;
    FtGrid g;
    assert_true(grid_create_sub(&g, ft_test_comm(), trains, rank, 1, 1, DP, EP, err,
                                sizeof err) >= 0);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    FtShard sh = {.tp = 1, .pp = 1, .ep = EP, .ep_rank = rank % EP}; /* its place in a replica */
    model_create_sharded(&m, &mc, &sh);
    model_init_random(&m, trains ? 11 : 12); /* a spare's own state is not the run's */
    FtTrainer tr;
    if (trains) train_init_grid(&tr, &c, &m, &g, &src, NULL);
    else train_init_spare(&tr, &c, &m, &src, NULL);
    train_spare_attach(&tr, ft_test_comm());
    if (f) tr.before_step = fail_hook, tr.before_step_ctx = (void *)f;
    FtTrainSummary s;
    train_run(&tr, &s);
    uint64_t mine[PLACES] = {0};
    long long st[2] = {-1, -1};
    if (!tr.left) {
        size_t n = m.nparams * sizeof(float);
        uint64_t h = fnv(1469598103934665603ull, m.params, n);
        h = fnv(fnv(h, m.m, n), m.v, n);
        h = fnv(fnv(h, &m.step, sizeof m.step), &tr.cursor, sizeof tr.cursor);
        mine[tr.replica * EP + tr.grid->ep_rank] = h;
        st[0] = tr.spare.spares_used, st[1] = tr.spare.masked;
        assert_true(s.ok && s.steps == STEPS);
    }
    MPI_Allreduce(mine, out, PLACES, MPI_UINT64_T, MPI_BOR, ft_test_comm());
    MPI_Allreduce(MPI_IN_PLACE, st, 2, MPI_LONG_LONG, MPI_MAX, ft_test_comm());
    *spares_used = st[0], *masked = st[1];
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

static void test_ep2_hot_spare_bitwise(void **state)
{
    (void)state;
    uint64_t clean[PLACES], got[PLACES];
    long long used, masked;
    run(NULL, clean, &used, &masked);
    assert_all(used == 0 && masked == 0);
    for (int p = 0; p < PLACES; p++) assert_all(clean[p] != 0);
    /* the two ep ranks of a replica hold different experts: their states differ */
    assert_all(clean[0] != clean[1] && clean[2] != clean[3]);
    Fail one = {3, 1}, zero = {4, 0};
    run(&one, got, &used, &masked);
    assert_all(used == 1 && masked == 1 && !memcmp(got, clean, sizeof clean));
    run(&zero, got, &used, &masked);
    assert_all(used == 1 && masked == 1 && !memcmp(got, clean, sizeof clean));
}

FT_TEST_MAIN(cmocka_unit_test(test_ep2_hot_spare_bitwise))

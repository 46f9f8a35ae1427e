/* test_gradsync.c: the data-parallel buckets of gradient sync (gradsync.h, gradsync_buckets).
 *
 * ft-test: ranks 1
 *
 * The buckets decide how much of the gradient's all-reduce overlaps the backward (and how long
 * the communication windows are that DMR's deferred checkers fill), so their shape is checked
 * here against sizes computed from the model's parameter table:
 *  - a tiny parallel.bucket_mb: one bucket per item ([final LayerNorm,] each layer, the
 *    embeddings), in start order; a huge one: all layers (and the final LayerNorm) in one
 *    bucket, the embeddings in their own;
 *  - a bucket closes once it holds at least bucket_mb (the boundary: exactly a bucket's size
 *    closes it);
 *  - pipeline stages: the first stage has no final LayerNorm's bucket, the last one does;
 *  - every gradient float is in exactly one bucket (dense and MoE models);
 *  - no data parallelism: no buckets. */
#include <stdlib.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/gradsync.h"
#include "ftllm/model.h"

enum { L = 3, MAXB = 16 };

/* A model of L layers: stage pp_rank of pp, experts 0 (dense) or E. */
static void make(FtModel *m, int pp, int pp_rank, int experts)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = L * pp, c.model.heads = 2, c.model.channels = 16, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.model.experts = experts, c.model.top_k = 1;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtShard sh = {.tp = 1, .pp = pp, .pp_rank = pp_rank, .ep = 1};
    model_create_sharded(m, &mc, &sh);
}

/* Floats of the final LayerNorm (0 off the last stage), of one layer, of the embeddings. */
static void item_sizes(const FtModel *m, size_t *head, size_t *layer, size_t *embed)
{
    *head = m->last ? m->p[FT_P_LNFW].size + m->p[FT_P_LNFB].size : 0;
    *layer = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++)
        if (m->p[i].per_layer) *layer += m->p[i].size / (size_t)m->nl;
    *embed = m->p[FT_P_WTE].size + m->p[FT_P_WPE].size;
    assert_int_equal(m->nl, L);
    assert_true(*head + (size_t)L * *layer + *embed == m->nparams);
}

/* The buckets of model m with bucket_mb; returns their number, sizes in sz. */
static int buckets(FtModel *m, FtComm *dp, bool expert, double bucket_mb, size_t *sz)
{
    FtGradSyncComms gc = {.dense = dp, .expert = expert ? dp : NULL};
    FtGradSync *g = gradsync_create(m, &gc, 2, bucket_mb);
    int nb = gradsync_buckets(g, sz, MAXB);
    assert_true(nb <= MAXB);
    size_t sum = 0;
    for (int i = 0; i < nb; i++) sum += sz[i];
    assert_true(sum == m->nparams); /* every float exactly once */
    gradsync_free(g);
    return nb;
}

static double mb_of(size_t floats) { return (double)floats * sizeof(float) / 1048576.0; }

static void check_stage(int pp, int pp_rank, int experts)
{
    FtModel m;
    make(&m, pp, pp_rank, experts);
    FtComm *dp = comm_create_mpi_dup(ft_test_comm(), "dp");
    size_t head, layer, embed, sz[MAXB];
    item_sizes(&m, &head, &layer, &embed);
    bool moe = experts > 0;
    int h = m.last ? 1 : 0;

    /* tiny: every item alone */
    int nb = buckets(&m, dp, moe, 1e-9, sz);
    assert_int_equal(nb, h + L + 1);
    if (h) assert_true(sz[0] == head);
    for (int l = 0; l < L; l++) assert_true(sz[h + l] == layer);
    assert_true(sz[nb - 1] == embed);

    /* huge: the layers (and the final LayerNorm) together, then the embeddings */
    nb = buckets(&m, dp, moe, 1e3, sz);
    assert_int_equal(nb, 2);
    assert_true(sz[0] == head + L * layer && sz[1] == embed);

    /* exactly the first two items' size: they close the first bucket, the rest of the layers
     * fill the second (still short of the limit), the embeddings their own */
    size_t first = h ? head + layer : 2 * layer;
    nb = buckets(&m, dp, moe, mb_of(first), sz);
    assert_int_equal(nb, 3);
    assert_true(sz[0] == first && sz[1] == head + L * layer - first && sz[2] == embed);

    /* one float short of it: the first bucket closes one item later */
    nb = buckets(&m, dp, moe, mb_of(first - 1), sz);
    assert_int_equal(nb, 3);
    assert_true(sz[0] == first && sz[1] == head + L * layer - first && sz[2] == embed);
    /* one float over: the first bucket takes one more layer */
    size_t rest = head + L * layer - first - layer;
    nb = buckets(&m, dp, moe, mb_of(first + 1), sz);
    assert_int_equal(nb, rest ? 3 : 2);
    assert_true(sz[0] == first + layer && sz[nb - 1] == embed && (!rest || sz[1] == rest));

    comm_destroy(dp);
    model_free(&m);
}

static void test_one_stage(void **state)
{
    (void)state;
    check_stage(1, 0, 0);
}

static void test_pipeline_stages(void **state)
{
    (void)state;
    check_stage(2, 0, 0); /* no final LayerNorm */
    check_stage(2, 1, 0);
}

static void test_moe(void **state)
{
    (void)state;
    check_stage(1, 0, 4);
}

static void test_no_data_parallelism(void **state)
{
    (void)state;
    FtModel m;
    make(&m, 1, 0, 0);
    FtGradSyncComms gc = {0};
    FtGradSync *g = gradsync_create(&m, &gc, 1, 25);
    size_t sz[MAXB];
    assert_int_equal(gradsync_buckets(g, sz, MAXB), 0);
    gradsync_free(g);
    model_free(&m);
}

FT_TEST_MAIN(cmocka_unit_test(test_one_stage), cmocka_unit_test(test_pipeline_stages),
             cmocka_unit_test(test_moe), cmocka_unit_test(test_no_data_parallelism))

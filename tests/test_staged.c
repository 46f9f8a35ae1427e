/* test_staged.c: MPI with host staging for device buffers (comm_create_staged), the way a CUDA
 * job's ranks talk where NCCL cannot be had, against a stand-in device: the CPU backend under
 * another identity whose allocations are "device memory" (is_device knows their ranges) and
 * whose copies count the bytes they move. Every operation (all-reduce, in place and not,
 * reduce-scatter, all-gather, all-to-all(v) with gaps, broadcast, send and receive) on device
 * buffers gives the MPI backend's bytes and moves them through host memory; host buffers on
 * the same communicator pass through unstaged. Then training on the stand-in device with tp 2,
 * pp 2 (1F1B), dp 2 and MoE ep 2 (the trainer's communicators staged) ends bitwise where the
 * same layout on the CPU ends, and really staged its messages; so does SPARe's shard-keyed
 * reduction at dp 2 through a replica's failure (staged and routed); planned DMR (deferred and AGC
 * checks keeping their inputs in device memory) on pp 2 catches a flip and ends bitwise where
 * the CPU run does.
 * ft-test: ranks 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/comm.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"
#include "ftllm/train_dmr.h"

/* Bytes the stand-in device's copies moved so far, both ways. */
static double moved_bytes(void) { return ft_dev_to_host + ft_dev_to_device; }

static FtComm *staged_world(void)
{
    FtCommStager st;
    backend_stager(ft_dev(), &st);
    return comm_create_staged(ft_test_comm(), "staged", &st);
}

static float *dev_floats(size_t n)
{
    return ft_dev()->alloc(ft_dev()->ctx, n * sizeof(float));
}

/* ---- every operation ----------------------------------------------------------------------- */

/* Reduce-scatter, all-gather, all-to-all(v) with gaps and broadcast of s's buffers d -> d2 (N * P
 * floats each) against m on host buffers h -> h2 holding the same values: the same bytes. */
static void collectives_like_mpi(FtComm *s, FtComm *m, const float *d, float *d2, const float *h,
                                 float *h2, int N)
{
    int rank = ft_test_rank(), P = ft_test_size();
    comm_reduce_scatter_sum(s, d, d2, (size_t)(N / P), FT_F32);
    comm_reduce_scatter_sum(m, h, h2, (size_t)(N / P), FT_F32);
    assert_memory_equal(d2, h2, sizeof(float) * (size_t)(N / P));
    comm_allgather(s, d, d2, (size_t)N, FT_F32);
    comm_allgather(m, h, h2, (size_t)N, FT_F32);
    assert_memory_equal(d2, h2, sizeof(float) * (size_t)N * (size_t)P);
    /* all-to-all(v): 3 + q elements to rank q, with a gap of 2 in front of each block */
    int sc[64], sd[64], rc[64], rd[64];
    assert_true(P <= 64);
    for (int q = 0, o = 0, r = 0; q < P; q++) {
        sc[q] = 3 + q, sd[q] = o + 2, o += 2 + sc[q];
        rc[q] = 3 + rank, rd[q] = r + 2, r += 2 + rc[q];
    }
    for (int i = 0; i < N * P; i++)
        d2[i] = h2[i] = -1.0f;
    FtReq r1, r2;
    comm_ialltoallv(s, d, sc, sd, d2, rc, rd, FT_F32, &r1);
    comm_ialltoallv(m, h, sc, sd, h2, rc, rd, FT_F32, &r2);
    comm_wait(&r1, NULL), comm_wait(&r2, NULL);
    assert_memory_equal(d2, h2, sizeof(float) * (size_t)N); /* the gaps kept their -1 */
    for (int i = 0; i < N; i++)
        d2[i] = h2[i] = (float)(rank == 1 ? i : -i);
    comm_bcast(s, d2, (size_t)N, FT_F32, 1);
    comm_bcast(m, h2, (size_t)N, FT_F32, 1);
    assert_memory_equal(d2, h2, sizeof(float) * (size_t)N);
}

/* Each operation on stand-in device buffers against the plain MPI backend on host buffers. */
static void test_ops(void **state)
{
    (void)state;
    int rank = ft_test_rank(), P = ft_test_size();
    backend_standin_set_host_access(true); /* the test fills and reads device buffers directly */
    FtComm *s = staged_world(), *m = comm_create_mpi(ft_test_comm(), "mpi");
    enum { N = 1000 };
    float *d = dev_floats((size_t)N * P), *d2 = dev_floats((size_t)N * P);
    float *h = malloc(sizeof(float) * N * P), *h2 = malloc(sizeof(float) * N * P);
    assert_true(d && d2 && h && h2);
    for (int i = 0; i < N * P; i++)
        d[i] = h[i] = (float)(rank * 1000 + i) * 0.25f;
    double before = moved_bytes(), start = before;
    comm_allreduce_sum(s, FT_IN_PLACE, d, N, FT_F32); /* in place */
    comm_allreduce_sum(m, FT_IN_PLACE, h, N, FT_F32);
    assert_memory_equal(d, h, sizeof(float) * N);
    assert_true(moved_bytes() - before == 2.0 * sizeof(float) * N); /* out and back */
    comm_allreduce_sum(s, h, d2, N, FT_F32);                  /* host send, device receive */
    comm_allreduce_sum(m, h, h2, N, FT_F32);
    assert_memory_equal(d2, h2, sizeof(float) * N);
    collectives_like_mpi(s, m, d, d2, h, h2, N);
    /* point to point: rank 0 sends the device buffer, rank 1 receives into device memory */
    if (rank < 2) {
        for (int i = 0; i < N; i++)
            d[i] = (float)(7 * i + rank);
        FtReq rq;
        if (rank == 0)
            comm_isend(s, d, N, FT_F32, 1, 5, &rq);
        else
            comm_irecv(s, d2, N, FT_F32, 0, 5, &rq);
        comm_wait(&rq, NULL);
        if (rank == 1)
            for (int i = 0; i < N; i++)
                assert_true(d2[i] == (float)(7 * i));
    }
    /* every byte the stager moved, both ways, is counted in the communicator's staged_bytes */
    assert_true(comm_stats(s).staged_bytes == moved_bytes() - start);
    /* host buffers on the staged communicator are not staged */
    double staged = comm_stats(s).staged_bytes;
    before = moved_bytes();
    long long v = rank + 1;
    comm_allreduce_sum(s, FT_IN_PLACE, &v, 1, FT_I64);
    assert_true(v == (long long)P * (P + 1) / 2);
    assert_true(moved_bytes() == before && comm_stats(s).staged_bytes == staged && staged > 0);
    comm_destroy(s), comm_destroy(m);
    ft_dev()->release(ft_dev()->ctx, d), ft_dev()->release(ft_dev()->ctx, d2);
    free(h), free(h2);
    backend_standin_set_host_access(false);
}

/* ---- NCCL beside MPI (comm_create_routed) --------------------------------------------------- */

/* The stand-in for NCCL: MPI over a duplicate of the communicator, which reads the stand-in
 * device's memory directly (it is host memory underneath); g_transport_fail makes it refuse.
 * NCCL's operations wait for the compute stream's work; this one cannot, so the tests that use
 * it open the stand-in device to the host (backend_standin_set_host_access: eager, readable). */
static bool g_transport_fail;
static char g_transport_name[64];

static FtComm *standin_transport(MPI_Comm comm, const char *name, void *stream, char *err,
                                 size_t errlen)
{
    (void)stream;
    snprintf(g_transport_name, sizeof g_transport_name, "%s", name);
    if (g_transport_fail) {
        snprintf(err, errlen, "NCCL: stand-in refused");
        return NULL;
    }
    return comm_create_mpi_dup(comm, name);
}

static FtComm *routed_world(void)
{
    FtCommStager st;
    backend_stager(ft_dev(), &st);
    char err[256] = "";
    comm_set_device_transport(standin_transport);
    FtComm *c = comm_create_routed(ft_test_comm(), "routed", &st, NULL, err, sizeof err);
    if (!c) fail_msg("comm_create_routed: %s", err);
    return c;
}

/* Collectives none of whose buffers is host memory go to the device transport, unstaged; host
 * buffers, mixed ones and point-to-point go over MPI, staged where they are device memory; every
 * result is the MPI backend's. */
static void test_routed_ops(void **state)
{
    (void)state;
    int rank = ft_test_rank(), P = ft_test_size();
    backend_standin_set_host_access(true); /* the stand-in transport reads device memory */
    FtComm *s = routed_world(), *m = comm_create_mpi(ft_test_comm(), "mpi");
    assert_string_equal(g_transport_name, "routed.device");
    enum { N = 600 };
    float *d = dev_floats((size_t)N * P), *d2 = dev_floats((size_t)N * P);
    float *h = malloc(sizeof(float) * N * P), *h2 = malloc(sizeof(float) * N * P);
    assert_true(d && d2 && h && h2);
    for (int i = 0; i < N * P; i++)
        d[i] = h[i] = (float)(rank * 1000 + i) * 0.5f;
    double moved = moved_bytes();
    long calls = 0;
#define ROUTED(n) /* n more calls on the device transport, nothing staged */                     \
    do {                                                                                         \
        calls += (n);                                                                            \
        assert_true(comm_stats(s).dev_calls == calls && moved_bytes() == moved);                 \
    } while (0)
    comm_allreduce_sum(s, FT_IN_PLACE, d, N, FT_F32);
    comm_allreduce_sum(m, FT_IN_PLACE, h, N, FT_F32);
    assert_memory_equal(d, h, sizeof(float) * N);
    ROUTED(1);
    comm_allreduce_sum(s, d, d2, N, FT_F32);
    comm_allreduce_sum(m, h, h2, N, FT_F32);
    assert_memory_equal(d2, h2, sizeof(float) * N);
    collectives_like_mpi(s, m, d, d2, h, h2, N);
    ROUTED(5);
    assert_true(comm_stats(s).dev_bytes > 0);
    /* host buffers: MPI, not the device transport, nothing staged */
    long long v = rank + 1;
    comm_allreduce_sum(s, FT_IN_PLACE, &v, 1, FT_I64);
    assert_true(v == (long long)P * (P + 1) / 2);
    ROUTED(0);
    /* a host send into a device receive: MPI, the device side staged */
    comm_allreduce_sum(s, h, d2, N, FT_F32);
    comm_allreduce_sum(m, h, h2, N, FT_F32);
    assert_memory_equal(d2, h2, sizeof(float) * N);
    assert_true(comm_stats(s).dev_calls == calls && moved_bytes() > moved);
    /* point to point stays on MPI, staged, even with device buffers at both ends */
    moved = moved_bytes();
    if (rank < 2) {
        for (int i = 0; i < N; i++) d[i] = (float)(3 * i + rank);
        FtReq rq;
        if (rank == 0) comm_isend(s, d, N, FT_F32, 1, 9, &rq);
        else comm_irecv(s, d2, N, FT_F32, 0, 9, &rq);
        comm_wait(&rq, NULL);
        if (rank == 1)
            for (int i = 0; i < N; i++) assert_true(d2[i] == (float)(3 * i));
        assert_true(moved_bytes() - moved == sizeof(float) * N);
    }
    assert_true(comm_stats(s).dev_calls == calls);
#undef ROUTED
    comm_destroy(s), comm_destroy(m);
    comm_set_device_transport(NULL);
    ft_dev()->release(ft_dev()->ctx, d), ft_dev()->release(ft_dev()->ctx, d2);
    free(h), free(h2);
    backend_standin_set_host_access(false);
}

/* A device transport that cannot be had: no communicator, its one-line reason. */
static void test_routed_refused(void **state)
{
    (void)state;
    FtCommStager st;
    backend_stager(ft_dev(), &st);
    char err[256] = "";
    comm_set_device_transport(standin_transport);
    g_transport_fail = true;
    FtComm *c = comm_create_routed(ft_test_comm(), "tp", &st, NULL, err, sizeof err);
    g_transport_fail = false;
    comm_set_device_transport(NULL);
    assert_null(c);
    assert_string_equal(err, "NCCL: stand-in refused");
    assert_string_equal(g_transport_name, "tp.device");
}

/* ---- training on the stand-in device ------------------------------------------------------- */

typedef struct run {
    FtConfig c;
    FtGrid g;
    FtModel m;
    FtTrainer tr;
} Run;

static int g_dims[2];
static int g_spare_r; /* spare.r of the next runs (0: no SPARe) */

static void run_open(Run *r, int tp, int pp, int dp, int ep, const FtBackend *be)
{
    char err[FT_DECK_ERR_MAX];
    FtConfig *c = &r->c;
    assert_int_equal(deck_defaults(c, err, sizeof err), 0);
    c->model.layers = 2, c->model.heads = 2, c->model.channels = 16, c->model.vocab = 50;
    c->model.vocab_pad = 16, c->model.seq_len = 8;
    c->model.experts = ep > 1 ? 4 : 0, c->model.top_k = 2, c->model.capacity_factor = 1.0;
    c->train.batch = 2, c->train.steps = 3, c->train.lr = 1e-2, c->train.warmup = 1;
    c->train.val_batches = 0, c->train.sample_tokens = 0, c->train.ac = FT_AC_CHOICE_FULL;
    c->parallel.tp = tp, c->parallel.pp = pp, c->parallel.dp = dp, c->parallel.ep = ep;
    c->parallel.microbatches = pp > 1 ? 2 : 1;
    c->spare.r = g_spare_r;
    c->run.log_level = FT_LOG_WARN;
    assert_int_equal(deck_check(c, ft_test_size(), err, sizeof err), 0);
    assert_int_equal(grid_create(&r->g, ft_test_comm(), tp, pp, dp, ep, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = r->g.tp,
                  .tp_rank = r->g.tp_rank,
                  .pp = r->g.pp,
                  .pp_rank = r->g.pp_rank,
                  .ep = r->g.ep,
                  .ep_rank = r->g.ep_rank};
    model_create_sharded(&r->m, &mc, &sh);
    model_init_random(&r->m, 1337);
    if (be) {
        FtModel host = r->m;
        model_create_on(&r->m, &host.cfg, &host.sh, be);
        model_copy_state(&r->m, &host);
        model_free(&host);
    }
    g_dims[0] = train_seq_len(c), g_dims[1] = (int)c->model.vocab;
    FtBatchSource src = {ft_synth_fetch, g_dims};
    train_init_grid(&r->tr, c, &r->m, &r->g, &src, NULL);
}

static double staged_bytes(const FtTrainer *tr)
{
    FtComm *cs[] = {tr->c_world, tr->c_replica, tr->c_tp,  tr->c_pp,
                    tr->c_emb,   tr->c_ep,      tr->c_edp, tr->c_dp};
    double b = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        if (cs[i]) b += comm_stats(cs[i]).staged_bytes;
    return b;
}

static void run_close(Run *r)
{
    train_free(&r->tr);
    model_free(&r->m);
    grid_destroy(&r->g);
}

/* Calls the device transport carried, over the trainer's communicators; world and replica
 * carry host values only and must have none. */
static long dev_calls(const FtTrainer *tr)
{
    FtComm *cs[] = {tr->c_tp, tr->c_pp, tr->c_emb, tr->c_ep, tr->c_edp, tr->c_dp};
    long n = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        if (cs[i]) n += comm_stats(cs[i]).dev_calls;
    assert_true(comm_stats(tr->c_world).dev_calls == 0 &&
                comm_stats(tr->c_replica).dev_calls == 0);
    return n;
}

/* r's trainer again with parallel.device_comm = nccl (deck_check refuses it on a CPU deck: set
 * after it, as `ftllm train` does) over the stand-in device transport, which stays set (the
 * caller unsets it when no regrid needs it any more). */
static void run_routed(Run *r)
{
    comm_set_device_transport(standin_transport);
    r->c.parallel.device_comm = FT_DEVCOMM_KEY_NCCL;
    train_free(&r->tr);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    train_init_grid(&r->tr, &r->c, &r->m, &r->g, &src, NULL);
}

/* The layout on the CPU (a) and on the stand-in device (b), staged, or with routed
 * (parallel.device_comm = nccl) its collectives on the stand-in device transport. */
static void layout_on(int tp, int pp, int dp, int ep, bool routed)
{
    Run a, b;
    if (routed) backend_standin_set_host_access(true); /* its transport reads device memory */
    run_open(&a, tp, pp, dp, ep, NULL);
    run_open(&b, tp, pp, dp, ep, ft_dev());
    if (routed) {
        run_routed(&b);
        comm_set_device_transport(NULL);
    }
    double la[3], lb[3];
    for (int s = 0; s < 3; s++) {
        FtStepInfo ia, ib;
        assert_all(train_step(&a.tr, &ia) == FT_STEP_OK);
        assert_all(train_step(&b.tr, &ib) == FT_STEP_OK);
        la[s] = ia.loss, lb[s] = ib.loss;
    }
    size_t bytes = sizeof(float) * a.m.nparams;
    backend_standin_set_host_access(true); /* the device model read directly */
    assert_all(memcmp(la, lb, sizeof la) == 0);
    assert_all(memcmp(a.m.params, b.m.params, bytes) == 0);
    assert_all(memcmp(a.m.m, b.m.m, bytes) == 0 && memcmp(a.m.v, b.m.v, bytes) == 0);
    assert_all(staged_bytes(&a.tr) == 0 && dev_calls(&a.tr) == 0);
    if (!routed) assert_all(staged_bytes(&b.tr) > 0 && dev_calls(&b.tr) == 0);
    else assert_all(dev_calls(&b.tr) > 0 && (pp == 1 || staged_bytes(&b.tr) > 0));
    assert_all(la[0] != la[2]); /* it trained */
    backend_standin_set_host_access(false);
    if (routed) backend_standin_set_host_access(false);
    run_close(&a), run_close(&b);
}

static void layout(int tp, int pp, int dp, int ep)
{
    layout_on(tp, pp, dp, ep, false);
    layout_on(tp, pp, dp, ep, true);
}

static void test_train_tp2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    layout(2, 1, 1, 1);
}

static void test_train_pp2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    layout(1, 2, 1, 1);
}

static void test_train_dp2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    layout(1, 1, 2, 1);
}

static void test_train_ep2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    layout(1, 1, 1, 2);
}

/* SPARe on the stand-in device, dp 2, spare.r 2 (each replica computes both shards' stacks
 * in turn; the shard-keyed reduction sums the shard gradients in shard order on the backend):
 * on the CPU (a) and on the device (b), staged, or with routed its collectives on the stand-in
 * device transport. Replica 1 fails after step 2 (train_fail_replica, as a `fail` line does):
 * its rank leaves, rank 0 regrids alone (new communicators: routed again where b was) and
 * trains on; both runs end bitwise alike on every rank, with the failure masked. */
static void spare_on(bool routed)
{
    Run a, b;
    g_spare_r = 2;
    if (routed) backend_standin_set_host_access(true); /* its transport reads device memory */
    run_open(&a, 1, 1, 2, 1, NULL);
    run_open(&b, 1, 1, 2, 1, ft_dev());
    g_spare_r = 0;
    if (routed) run_routed(&b); /* the transport kept for the regrid */
    double la[4] = {0}, lb[4] = {0};
    int rc[2] = {0, 0};
    bool moved = false; /* before the failure: b's dp 2 messages went through the device paths */
    for (int s = 0; s < 4; s++) {
        if (s == 2) {
            moved = routed ? dev_calls(&b.tr) > 0 && staged_bytes(&b.tr) > 0
                           : staged_bytes(&b.tr) > 0 && dev_calls(&b.tr) == 0;
            rc[0] = train_fail_replica(&a.tr, 1);
            rc[1] = train_fail_replica(&b.tr, 1);
        }
        FtStepInfo ia, ib;
        if (!a.tr.left) assert_true(train_step(&a.tr, &ia) == FT_STEP_OK), la[s] = ia.loss;
        if (!b.tr.left) assert_true(train_step(&b.tr, &ib) == FT_STEP_OK), lb[s] = ib.loss;
    }
    comm_set_device_transport(NULL);
    bool gone = ft_test_rank() == 1;
    assert_all(rc[0] == rc[1] && (rc[0] == SPARE_MASKED || rc[0] == SPARE_DEEPER));
    assert_all(a.tr.left == gone && b.tr.left == gone);
    assert_all(gone || (a.tr.spare.masked == 1 && b.tr.spare.masked == 1));
    size_t bytes = sizeof(float) * a.m.nparams;
    backend_standin_set_host_access(true); /* the device model read directly */
    assert_all(memcmp(la, lb, sizeof la) == 0 && la[0] != la[gone ? 1 : 3]); /* it trained */
    assert_all(memcmp(a.m.params, b.m.params, bytes) == 0);
    assert_all(memcmp(a.m.m, b.m.m, bytes) == 0 && memcmp(a.m.v, b.m.v, bytes) == 0);
    assert_all(moved);
    backend_standin_set_host_access(false);
    if (routed) backend_standin_set_host_access(false);
    run_close(&a), run_close(&b);
}

static void test_spare_dp2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    spare_on(false);
    spare_on(true);
}

/* Planned DMR on the CPU (r[0]) and on the stand-in device (r[1]), phases 1,2,3 profiled from
 * the first 2 of 6 steps; the stand-in's run has the fault file `faults`, whose one flip falls
 * in step 4 (its attempt redone). */
typedef struct dmr_pair {
    Run r[2];
    FtTrainDmr *td[2];
    char sched[64];
} DmrPair;

static void pair_open(DmrPair *p, int pp, int ep, const char *faults, bool moe_dynamic)
{
    ft_tmpfile(faults, strlen(faults), p->sched);
    for (int k = 0; k < 2; k++) {
        run_open(&p->r[k], 1, pp, 1, ep, k ? ft_dev() : NULL);
        FtConfig *c = &p->r[k].c;
        if (pp > 1) c->parallel.microbatches = 4;
        c->train.steps = 6;
        c->dmr.mode = FT_DMR_PLANNED, c->dmr.phases = FT_DMR_PHASES_123;
        c->dmr.profile_steps = 2;
        if (moe_dynamic) c->dmr.deferred_mb = 64, c->dmr.moe_dynamic = true;
        if (k) snprintf(c->faults.schedule, sizeof c->faults.schedule, "%s", p->sched);
        char err[FT_DECK_ERR_MAX];
        train_free(&p->r[k].tr); /* again with the DMR settings */
        FtBatchSource src = {ft_synth_fetch, g_dims};
        train_init_grid(&p->r[k].tr, c, &p->r[k].m, &p->r[k].g, &src, NULL);
        assert_int_equal(train_dmr_setup(&p->td[k], &p->r[k].tr, c, err, sizeof err), 0);
    }
}

/* Steps from .. to - 1 (0-based) of both runs; the stand-in's step 4 is redone (the flip). */
static void pair_steps(DmrPair *p, int from, int to)
{
    for (int s = from; s < to; s++)
        for (int k = 0; k < 2; k++) {
            FtStepInfo info;
            FtStepStatus want = k == 1 && s == 3 ? FT_STEP_REDONE : FT_STEP_OK;
            assert_all(train_step(&p->r[k].tr, &info) == want);
        }
}

/* The two runs end bitwise in the same state (parameters and both moments). */
static void pair_same_state(DmrPair *p)
{
    const FtModel *a = &p->r[0].m, *b = &p->r[1].m;
    size_t bytes = sizeof(float) * a->nparams;
    backend_standin_set_host_access(true); /* the device model read directly */
    assert_all(memcmp(a->params, b->params, bytes) == 0);
    assert_all(memcmp(a->m, b->m, bytes) == 0 && memcmp(a->v, b->v, bytes) == 0);
    backend_standin_set_host_access(false);
}

static void pair_close(DmrPair *p)
{
    for (int k = 0; k < 2; k++) {
        train_dmr_destroy(p->td[k]);
        run_close(&p->r[k]);
    }
    if (ft_test_rank() == 0) unlink(p->sched);
}

/* Planned DMR on the stand-in device, pp 2 with 4 micro-batches: deferred and AGC checks keep
 * their inputs in device memory (the backend's alloc and copy) and replay there; a flip of a
 * forward matmul on the last stage is caught and rolled back, and the run ends bitwise where the
 * CPU run with no flip ends. */
static void test_planned_dmr_pp2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    DmrPair p;
    pair_open(&p, 2, 1, "sdc step=4 rank=1 op=matmul:5 bit=30\n", false);
    double moved = moved_bytes();
    pair_steps(&p, 0, 2); /* the profile */
    FtDmrStats planned0, mine, st[2];
    dmr_stats(train_dmr_get(p.td[1]), &planned0); /* this rank's */
    long long answers = ft_dev_answers, runs = ft_dev_checker_runs;
    pair_steps(&p, 2, 6); /* under the plan */
    answers = ft_dev_answers - answers, runs = ft_dev_checker_runs - runs;
    dmr_stats(train_dmr_get(p.td[1]), &mine);
    for (int k = 0; k < 2; k++) train_dmr_stats(p.td[k], &st[k]);
    /* under the plan no check waits for its answer on the device (they are all read at the
     * agreement), and every naive check and deferred or AGC replay ran through checker_run
     * (on a GPU: the checker stream) */
    long long replayed = 0;
    for (int j = 0; j < FT_DMR_NSTRAT; j++)
        if (j != FT_DMR_S_PIGGYBACK) replayed += mine.checks[j] - planned0.checks[j];
    assert_all(answers == 0 && replayed > 0 && runs >= replayed);
    pair_same_state(&p);
    assert_all(st[0].mismatches == 0 && st[1].injected == 1 && st[1].detected == 1 &&
               st[1].missed == 0 && st[1].redone == 1);
    assert_all(st[1].checks[FT_DMR_S_DEFERRED] + st[1].checks[FT_DMR_S_AGC] > 0);
    assert_all(moved_bytes() > moved); /* the pipeline's messages were staged */
    pair_close(&p);
}

/* The MoE dynamic planner (dmr.moe_dynamic) on the stand-in device, ep 2: the expert ops'
 * routed rows are read through the backend, their checks deferred at run time keep device
 * copies; a flip of an expert op after the profile is caught and rolled back, and the run ends
 * bitwise where the CPU run with no flip ends. */
static void test_moe_dynamic_ep2(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    DmrPair p;
    pair_open(&p, 1, 2, "sdc step=4 rank=0 op=moe_expert:1 bit=29\n", true);
    pair_steps(&p, 0, 6);
    FtDmrStats st[2];
    for (int k = 0; k < 2; k++) train_dmr_stats(p.td[k], &st[k]);
    pair_same_state(&p);
    /* checks deferred at run time in both runs (the device run's count has one attempt more:
     * the redone step's), keeping the routed rows only */
    assert_all(st[0].dyn_deferred > 0 && st[1].dyn_deferred > st[0].dyn_deferred);
    assert_all(st[1].dyn_bytes > st[0].dyn_bytes && st[1].dyn_bytes < st[1].dyn_cap_bytes);
    assert_all(st[0].mismatches == 0 && st[1].injected == 1 && st[1].detected == 1 &&
               st[1].missed == 0 && st[1].redone == 1);
    pair_close(&p);
}

/* The executor's op table on a device times each op to its end when stats.sync asks (a stream
 * wait before and after it: the table `ftllm train` prints at debug level), and otherwise does
 * not wait: the op runs, counted either way. */
static void test_op_timing(void **state)
{
    (void)state;
    enum { N = 64 };
    float *x = dev_floats(N), *y = dev_floats(N), hx[N], hy[N];
    for (int i = 0; i < N; i++) hx[i] = 0.1f * (float)i;
    ft_dev()->to_device(ft_dev()->ctx, x, hx, sizeof hx);
    FtExecStats st;
    memset(&st, 0, sizeof st);
    FtOpCall c = {.in = {x}, .out = {y}, .d = {N}};
    ft_dev_syncs = 0;
    exec_op_on(ft_dev(), FT_OP_GELU, FT_FWD, &c, &st);
    assert_true(ft_dev_syncs == 0 && st.calls[FT_OP_GELU][FT_FWD] == 1);
    ft_dev()->to_host(ft_dev()->ctx, hy, y, sizeof hy); /* waits for the op */
    assert_true(hy[N - 1] > 6.0f);
    st.sync = true;
    exec_op_on(ft_dev(), FT_OP_GELU, FT_FWD, &c, &st);
    assert_true(ft_dev_syncs == 2 && st.calls[FT_OP_GELU][FT_FWD] == 2);
    exec_op_on(ft_dev(), FT_OP_GELU, FT_FWD, &c, NULL); /* no table: no wait */
    assert_true(ft_dev_syncs == 2);
    ft_dev()->release(ft_dev()->ctx, x), ft_dev()->release(ft_dev()->ctx, y);
}

FT_TEST_MAIN(cmocka_unit_test(test_ops), cmocka_unit_test(test_op_timing),
             cmocka_unit_test(test_routed_ops), cmocka_unit_test(test_routed_refused),
             cmocka_unit_test(test_train_tp2),
             cmocka_unit_test(test_train_pp2), cmocka_unit_test(test_train_dp2),
             cmocka_unit_test(test_train_ep2), cmocka_unit_test(test_spare_dp2),
             cmocka_unit_test(test_planned_dmr_pp2),
             cmocka_unit_test(test_moe_dynamic_ep2))

/* test_train_ckpt.c: checkpoints of the training state (train_ckpt.h) on a tiny GPT-2 and
 * synthetic tokens:
 *  - 2N steps straight vs N steps + checkpoint + restore into a differently initialized model
 *    + N steps: bitwise-identical parameters, moments and losses (cosine schedule, so the step
 *    count really is restored), synchronous and asynchronous; the same with the model on a
 *    stand-in device (the CPU backend under another identity), staged through host memory as
 *    a CUDA model is;
 *  - the schedule: interval in steps (multiples + the end), keep-last-K, the time trigger (rank
 *    0's clock decides, agreed one step ahead: every rank checkpoints at the same steps even
 *    when another rank's clock runs ahead), interval = auto (the interval is the optimizer's
 *    for the step and checkpoint times it measured, and the files follow it);
 *  - resume: auto picks the newest that verifies and falls back over flipped bytes, a truncated
 *    file and a file of another format (named in the warning); resume = FILE with a bad file and
 *    a checkpoint of another model shape are errors naming the file and the dataset.
 * With 2 ranks the tests above train one replica per rank (no grid: rank 0 writes, every rank
 * reads the whole tensors back), and resharding is tested: N steps on one layout (tp2, pp2, dp2),
 * checkpoint, restore on another (pp2, dp2, tp2, or no grid), N more steps; the parameters must
 * match a single-rank run of 2N steps with the same global batch within 2e-4 per parameter
 * (2% of lr): the restore itself is exact (each rank reads its hyperslab of the global
 * tensors), but the layouts sum in different orders, a relative error of ~1e-7 per gradient
 * that AdamW's division by sqrt(v) amplifies for gradients near zero (the same bound and reason
 * as test_parallel.c); a misplaced shard would be off by ~lr.
 * ft-test: ranks 1 2 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/analytic.h"
#include "ftllm/ckpt.h"
#include "ftllm/deck.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/sim.h"
#include "ftllm/train.h"
#include "ftllm/train_ckpt.h"

#define N_HALF 3

static int g_dims[2];

static FtConfig tiny_cfg(const char *dir)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2;
    c.model.heads = 2;
    c.model.channels = 16;
    c.model.vocab = 50;
    c.model.vocab_pad = 16;
    c.model.seq_len = 8;
    c.train.batch = 2;
    c.train.steps = 2 * N_HALF;
    c.train.lr = 1e-2;
    c.train.warmup = 1;
    c.train.schedule = FT_SCHED_COSINE;
    c.train.val_batches = 0;
    c.train.sample_tokens = 0;
    c.run.log_level = FT_LOG_WARN;
    snprintf(c.run.name, sizeof c.run.name, "t");
    snprintf(c.checkpoint.dir, sizeof c.checkpoint.dir, "%s", dir);
    c.checkpoint.keep = 100;
    assert_int_equal(deck_check(&c, 0, err, sizeof err), 0);
    return c;
}

typedef struct {
    FtModel m;
    FtTrainer tr;
} Run;

/* A run of c from initialization `seed`, its model on be (NULL: the CPU). */
static void run_init_on(Run *r, const FtConfig *c, uint64_t seed, const FtBackend *be)
{
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    model_create(&r->m, &mc);
    model_init_random(&r->m, seed);
    if (be) {
        FtModel host = r->m;
        model_create_on(&r->m, &host.cfg, &host.sh, be);
        model_copy_state(&r->m, &host);
        model_free(&host);
    }
    g_dims[0] = train_seq_len(c);
    g_dims[1] = (int)c->model.vocab;
    FtBatchSource src = {ft_synth_fetch, g_dims};
    train_init(&r->tr, c, &r->m, &src, NULL);
}

static void run_init(Run *r, const FtConfig *c, uint64_t seed) { run_init_on(r, c, seed, NULL); }

static void run_free(Run *r)
{
    train_free(&r->tr);
    model_free(&r->m);
}

static void steps(Run *r, int n, double *losses)
{
    for (int i = 0; i < n; i++) {
        FtStepInfo st;
        train_step(&r->tr, &st);
        if (losses) losses[i] = st.loss;
    }
}

static bool exists(const char *dir, long long step)
{
    char p[CKPT_PATH_MAX];
    ckpt_path(p, sizeof p, dir, "t", step);
    return access(p, F_OK) == 0;
}

/* 2N straight vs N + checkpoint + restore + N; staged: the checkpointed and the restored run
 * have their model on a stand-in device (ft_test.h's ft_dev), saved at N - 1 too (the staging
 * buffer is used again: it must hold step N's state, not N - 1's). */
static void resume_bitwise(bool async, bool staged)
{
    char dir[64], err[CKPT_ERR_MAX] = "";
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.checkpoint.interval = N_HALF;
    c.checkpoint.async = async;
    double la[2 * N_HALF], lb[N_HALF];
    Run a, b;
    run_init(&a, &c, 7);
    steps(&a, 2 * N_HALF, la);

    const FtBackend *be = staged ? ft_dev() : NULL;
    run_init_on(&b, &c, 7, be);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_create(&tc, &c, ft_test_comm(), err, sizeof err), 0);
    assert_non_null(tc);
    steps(&b, N_HALF - 1, NULL);
    if (staged) train_ckpt_save(tc, &b.tr);
    steps(&b, 1, NULL);
    ft_dev_to_host = ft_dev_to_device = 0;
    train_ckpt_save(tc, &b.tr);
    size_t state = 3 * sizeof(float) * b.m.nparams;
    /* staged through the host */
    assert_true(staged ? ft_dev_to_host >= state : ft_dev_to_host == 0);
    /* asynchronous: the copy is taken, so training on may change the live state at once */
    if (async) steps(&b, 1, NULL);
    train_ckpt_destroy(tc);
    run_free(&b);

    run_init_on(&b, &c, 99, be); /* another initialization: everything must come from the file */
    char path[CKPT_PATH_MAX];
    ckpt_path(path, sizeof path, dir, "t", N_HALF);
    ft_dev_to_host = ft_dev_to_device = 0;
    int rc = train_ckpt_restore(&b.tr, path, true, ft_test_comm(), err, sizeof err);
    if (rc) printf("  %s\n", err);
    assert_all(rc == 0);
    assert_true(staged ? ft_dev_to_device >= state : ft_dev_to_device == 0);
    assert_all(b.m.step == N_HALF && b.tr.cursor == (uint64_t)(N_HALF * c.train.batch));
    steps(&b, N_HALF, lb);
    if (staged) backend_standin_set_host_access(true); /* the device model read directly */
    size_t bytes = sizeof(float) * a.m.nparams;
    assert_all(memcmp(a.m.params, b.m.params, bytes) == 0);
    assert_all(memcmp(a.m.m, b.m.m, bytes) == 0 && memcmp(a.m.v, b.m.v, bytes) == 0);
    if (staged) backend_standin_set_host_access(false);
    assert_all(memcmp(la + N_HALF, lb, sizeof lb) == 0);
    /* and the test can fail: the restored run did not just happen to start from the same init */
    assert_all(la[0] != la[N_HALF]);
    run_free(&a);
    run_free(&b);
    ft_rmdir(dir);
}

static void test_resume_bitwise_sync(void **state)
{
    (void)state;
    resume_bitwise(false, false);
}

static void test_resume_bitwise_async(void **state)
{
    (void)state;
    resume_bitwise(true, false);
}

/* A model on a device is checkpointed and restored through host memory, synchronous and
 * asynchronous, bitwise as from host memory. */
static void test_resume_staged(void **state)
{
    (void)state;
    resume_bitwise(false, true);
    resume_bitwise(true, true);
}

/* train_run with the hook: which steps get a file. */
static void run_with_hook(FtConfig *c, long long *interval_out)
{
    char err[CKPT_ERR_MAX] = "";
    Run r;
    run_init(&r, c, 7);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_setup(&tc, &r.tr, c, ft_test_comm(), err, sizeof err), 0);
    FtTrainSummary s;
    train_run(&r.tr, &s);
    assert_all(s.ok);
    if (interval_out) *interval_out = train_ckpt_interval(tc);
    train_ckpt_destroy(tc);
    run_free(&r);
}

static void test_interval_and_keep(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 7;
    c.checkpoint.interval = 3;
    run_with_hook(&c, NULL);
    bool want[8] = {0, 0, 0, 1, 0, 0, 1, 1}; /* multiples of 3, and the end */
    for (int s = 1; s <= 7; s++) assert_all(exists(dir, s) == want[s]);
    ft_rmdir(dir);

    ft_tmpdir(dir);
    c = tiny_cfg(dir);
    c.train.steps = 7;
    c.checkpoint.interval = 1;
    c.checkpoint.keep = 2;
    run_with_hook(&c, NULL);
    for (int s = 1; s <= 7; s++) assert_all(exists(dir, s) == (s >= 6));
    ft_rmdir(dir);
}

static void test_every_seconds(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 4;
    c.checkpoint.every_s = 1e-9; /* always due: a checkpoint after every step but the first (the
                                  * decision for a step is taken at the end of the one before) */
    run_with_hook(&c, NULL);
    for (int s = 1; s <= 4; s++) assert_all(exists(dir, s) == (s >= 2));
    ft_rmdir(dir);

    ft_tmpdir(dir);
    c = tiny_cfg(dir);
    c.train.steps = 4;
    c.checkpoint.every_s = 1e9; /* never due: only the end */
    run_with_hook(&c, NULL);
    for (int s = 1; s <= 4; s++) assert_all(exists(dir, s) == (s == 4));
    ft_rmdir(dir);
}

/* A hook around train_ckpt's: it records the checkpoint count after every step, keeps each
 * step's time, and can stall one rank at one step (a rank whose clock runs ahead). */
typedef struct {
    void (*inner)(void *ctx, FtTrainer *tr, const FtStepInfo *st, bool last);
    void *inner_ctx;
    FtTrainCkpt *tc;
    int count[16];
    double seconds[16], hook_s[16];
    int stall_rank[16]; /* -1: none */
    double stall_s;
} Spy;

static void spy_on_step(void *ctx, FtTrainer *tr, const FtStepInfo *st, bool last)
{
    Spy *y = ctx;
    long long s = st->step;
    assert_true(s >= 1 && s < 16);
    if (y->stall_rank[s] == ft_test_rank()) {
        double t0 = MPI_Wtime();
        while (MPI_Wtime() - t0 < y->stall_s) usleep(1000);
    }
    double t0 = MPI_Wtime();
    y->inner(y->inner_ctx, tr, st, last);
    y->hook_s[s] = MPI_Wtime() - t0;
    y->count[s] = train_ckpt_count(y->tc);
    y->seconds[s] = st->seconds;
}

/* train_run with the checkpoint hook wrapped by a Spy */
static void run_with_spy(FtConfig *c, Spy *y)
{
    char err[CKPT_ERR_MAX] = "";
    Run r;
    run_init(&r, c, 7);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_setup(&tc, &r.tr, c, ft_test_comm(), err, sizeof err), 0);
    y->inner = r.tr.on_step, y->inner_ctx = r.tr.on_step_ctx, y->tc = tc;
    r.tr.on_step = spy_on_step, r.tr.on_step_ctx = y;
    FtTrainSummary s;
    train_run(&r.tr, &s);
    assert_all(s.ok);
    train_ckpt_destroy(tc);
    run_free(&r);
}

/* The time trigger agrees: rank 0's clock decides, and every rank checkpoints at the same steps.
 * The last rank stalls at step 2 (its own clock passes every_s: it must not act on it), rank 0
 * at step 4 (its clock passes every_s: the next step is due on every rank). */
static void test_every_seconds_agreed(void **state)
{
    (void)state;
    char dir[64];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 7;
    c.checkpoint.every_s = 0.3;
    Spy y;
    memset(&y, 0, sizeof y);
    for (int s = 0; s < 16; s++) y.stall_rank[s] = -1;
    y.stall_rank[2] = ft_test_size() - 1;
    y.stall_rank[4] = 0;
    y.stall_s = 0.4;
    run_with_spy(&c, &y);
    if (ft_test_rank() == 0) {
        printf("  checkpoints after each step:");
        for (int s = 1; s <= 7; s++) printf(" %d", y.count[s]);
        printf("\n");
    }
    assert_all(ft_same_bytes(y.count, sizeof y.count)); /* the same steps on every rank */
    /* a checkpoint by time before the end: step 5 (rank 0 passed every_s during step 4), or
     * earlier if this machine is slow enough that 0.3 s passed before */
    assert_all(y.count[5] >= 1 && y.count[7] == y.count[6] + 1);
    for (int s = 1; s <= 7; s++) assert_all(exists(dir, s) == (y.count[s] > y.count[s - 1]));
    ft_rmdir(dir);
}

/* One run with interval = auto: the interval it chose against the optimizer's formula for the
 * inputs it measured, and the files against the interval. Returns the measured step time. */
static double auto_run(double mtbf_h, bool async)
{
    char dir[64], err[CKPT_ERR_MAX] = "";
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 12;
    c.train.rate_skip = 1;
    c.checkpoint.interval = FT_AUTO;
    c.cluster.gpus = 1;
    c.cluster.gpus_per_replica = 1;
    c.cluster.gpu_mtbf_h = mtbf_h;
    c.cluster.restart_s = 0;
    c.checkpoint.async = async;
    Spy y;
    memset(&y, 0, sizeof y);
    for (int s = 0; s < 16; s++) y.stall_rank[s] = -1;
    Run r;
    run_init(&r, &c, 7);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_setup(&tc, &r.tr, &c, ft_test_comm(), err, sizeof err), 0);
    y.inner = r.tr.on_step, y.inner_ctx = r.tr.on_step_ctx, y.tc = tc;
    r.tr.on_step = spy_on_step, r.tr.on_step_ctx = &y;
    FtTrainSummary sum;
    train_run(&r.tr, &sum);
    assert_all(sum.ok);
    long long n = train_ckpt_interval(tc);
    double step_s, C;
    train_ckpt_auto_inputs(tc, &step_s, &C);
    train_ckpt_destroy(tc);
    run_free(&r);

    /* the inputs: the step time is step 2's (the only timed step before the first checkpoint),
     * the largest over the ranks; C is positive and at most the time the hook took at step 2 */
    double want_step = y.seconds[2], hook = y.hook_s[2];
    MPI_Allreduce(MPI_IN_PLACE, &want_step, 1, MPI_DOUBLE, MPI_MAX, ft_test_comm());
    MPI_Allreduce(MPI_IN_PLACE, &hook, 1, MPI_DOUBLE, MPI_MAX, ft_test_comm());
    /* the optimizer for them: the deck's cluster with the measured step time and checkpoint
     * cost and a run of train.steps, checkpoint-only policy (Daly's interval where it finds no
     * finite plan: a checkpoint cost of hundreds of failure times), in whole steps */
    FtCluster cl;
    sim_cluster_from_cfg(&c, &cl);
    cl.step = step_s, cl.ckpt = C, cl.steps = (double)c.train.steps;
    FtPlan plan;
    double tau = analytic_plan(&cl, FT_POL_CKPT, 1, 0, &plan) == 0
                     ? plan.interval
                     : analytic_daly(C, cl.gpu_mtbf / (double)cl.gpus);
    long long want = llround(tau / step_s);
    if (want < 1) want = 1;
    if (ft_test_rank() == 0)
        printf("  MTBF %.3g s: auto chose %lld steps; measured step %.3g s, C %.3g s (hook %.3g s); "
               "the optimum %.3g s = %lld steps\n", 3600 * mtbf_h, n, step_s, C, hook, tau, want);
    assert_all(step_s == want_step && C > 0 && C <= hook);
    if (async) {
        /* asynchronous: never more often than one write takes. The write ran inside step 2's
         * hook (the interval is chosen once it finished), so n lies between the optimizer's and
         * ceil(hook / step); a write takes longer than a step of this tiny model, so n >= 2. */
        long long lim = (long long)ceil(hook / step_s);
        assert_all(n >= want && n <= (want > lim ? want : lim) && n >= 2);
    } else {
        assert_all(n == want);
    }
    for (int s = 1; s <= 12; s++) {
        bool due = s == 2 || (s > 2 && (s - 2) % n == 0) || s == 12;
        assert_all(exists(dir, s) == due);
    }
    ft_rmdir(dir);
    return step_s;
}

/* interval = auto: the first checkpoint after the first timed step (rate_skip 1: step 2), then
 * every n steps with the n it chose (and the end); n is the optimizer's for the measured inputs.
 * First a failure every 3.6 ms (on a fast machine longer than the run: n is the whole run),
 * then a failure every 4 measured step times, so that the optimum lies inside the run (on this
 * machine it does not: a write costs hundreds of steps, and n is again the whole run), then a
 * failure every hundredth of a step time: no finite plan on any machine (the write takes more
 * than a step), Daly's interval (the MTBF) is below one step, so n = 1 and the every-n-steps
 * rule is exercised whatever the machine's step and write times. Last the same asynchronously:
 * n is then at least one write time (more than one step). */
static void test_auto_interval(void **state)
{
    (void)state;
    double step_s = auto_run(1e-6, false);
    auto_run(4 * step_s / 3600, false);
    auto_run(step_s / 100 / 3600, false);
    auto_run(step_s / 100 / 3600, true); /* the optimizer says 1; one write time is more */
}

static void flip_middle(const char *path)
{
    if (ft_test_rank() == 0) {
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long mid = ftell(f) / 2;
        fseek(f, mid, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, mid, SEEK_SET);
        fputc(ch ^ 0x10, f);
        fclose(f);
    }
    MPI_Barrier(ft_test_comm());
}

static void test_resume_fallback_and_errors(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX] = "", path[CKPT_PATH_MAX], p[5][200];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 4;
    c.checkpoint.interval = 1;
    run_with_hook(&c, NULL);
    for (int s = 1; s <= 4; s++) ckpt_path(p[s], sizeof p[s], dir, "t", s);
    flip_middle(p[4]);
    if (ft_test_rank() == 0) {
        assert_int_equal(truncate(p[3], 3000), 0);
        FILE *f = fopen(p[2], "w");
        fputs("step,loss\n1,4.5\n", f);
        fclose(f);
    }
    MPI_Barrier(ft_test_comm());

    snprintf(c.checkpoint.resume, sizeof c.checkpoint.resume, "auto");
    Run r;
    run_init(&r, &c, 7);
    int rc = train_ckpt_resume(&r.tr, &c, ft_test_comm(), path, sizeof path, err, sizeof err);
    assert_all(rc == 1 && strcmp(path, p[1]) == 0 && r.m.step == 1);

    /* resume = FILE with each bad file: -1 and the file's own message */
    const char *want[5] = {NULL, NULL, "not an HDF5 file", "truncated or damaged HDF5 file",
                           "checksum mismatch"};
    for (int s = 2; s <= 4; s++) {
        snprintf(c.checkpoint.resume, sizeof c.checkpoint.resume, "%s", p[s]);
        err[0] = 0;
        rc = train_ckpt_resume(&r.tr, &c, ft_test_comm(), NULL, 0, err, sizeof err);
        if (ft_test_rank() == 0) printf("  resume=%s: %s\n", p[s], err);
        assert_all(rc == -1 && strstr(err, p[s]) && strstr(err, want[s]) && !strchr(err, '\n'));
    }
    assert_all(strstr(err, "dataset 'optim/") != NULL); /* the middle of the file: a moment */
    run_free(&r);

    /* a checkpoint of a different model shape: the dataset and both shapes are named */
    FtConfig c3 = tiny_cfg(dir);
    c3.model.layers = 3;
    snprintf(c3.checkpoint.resume, sizeof c3.checkpoint.resume, "%s", p[1]);
    run_init(&r, &c3, 7);
    rc = train_ckpt_resume(&r.tr, &c3, ft_test_comm(), NULL, 0, err, sizeof err);
    if (ft_test_rank() == 0) printf("  other shape: %s\n", err);
    assert_all(rc == -1 && strstr(err, "dataset 'params/ln1w' has shape [2,16], the model expects [3,16]"));
    run_free(&r);

    /* nothing of this run in the folder: auto starts fresh */
    snprintf(c.checkpoint.resume, sizeof c.checkpoint.resume, "auto");
    snprintf(c.run.name, sizeof c.run.name, "other");
    run_init(&r, &c, 7);
    rc = train_ckpt_resume(&r.tr, &c, ft_test_comm(), NULL, 0, err, sizeof err);
    assert_all(rc == 0 && r.m.step == 0);
    run_free(&r);
    ft_rmdir(dir);
}

/* After a resume, the checkpoint it resumed from is this run's newest (SPARe's restart point
 * before the run writes one of its own): setup remembers its step. */
static void test_newest_after_resume(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX] = "";
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 3;
    c.checkpoint.interval = 3;
    run_with_hook(&c, NULL);
    c.train.steps = 6;
    snprintf(c.checkpoint.resume, sizeof c.checkpoint.resume, "auto");
    Run r;
    run_init(&r, &c, 7);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_setup(&tc, &r.tr, &c, ft_test_comm(), err, sizeof err), 0);
    assert_all(tc != NULL && r.m.step == 3 && r.tr.ckpt_newest != NULL);
    long long newest = r.tr.ckpt_newest(r.tr.on_step_ctx, &r.tr);
    assert_all(newest == 3);
    train_ckpt_destroy(tc);
    run_free(&r);
    ft_rmdir(dir);
}

/* A batch source whose first fetch takes at least SLOW_S (sleeps), so that step 1 does. */
#define SLOW_S 0.4
static void slow_first_fetch(void *ctx, uint64_t first, int B, int *tokens, int *targets)
{
    if (first == 0) usleep((useconds_t)(SLOW_S * 1e6));
    ft_synth_fetch(ctx, first, B, tokens, targets);
}

/* The time trigger counts the step to come: with every_s = 1.5 SLOW_S and a first step of at
 * least SLOW_S, at the end of step 1 rank 0 expects step 2 to end at least 2 SLOW_S after the
 * start, past every_s, so step 2 is checkpointed (a bound that holds on any machine: a slower
 * one only makes both terms larger). */
static void test_every_seconds_counts_next_step(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX] = "";
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.train.steps = 3;
    c.checkpoint.every_s = 1.5 * SLOW_S;
    Run r;
    run_init(&r, &c, 7);
    r.tr.train.fetch = slow_first_fetch;
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_setup(&tc, &r.tr, &c, ft_test_comm(), err, sizeof err), 0);
    FtTrainSummary s;
    train_run(&r.tr, &s);
    assert_all(s.ok);
    train_ckpt_destroy(tc);
    run_free(&r);
    assert_all(!exists(dir, 1) && exists(dir, 2) && exists(dir, 3));
    ft_rmdir(dir);
}

/* A checkpoint whose state/step is negative (not one ftllm train writes) is refused by name. */
static void test_negative_step_refused(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX] = "", path[CKPT_PATH_MAX];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.checkpoint.interval = 1;
    Run r;
    run_init(&r, &c, 7);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_create(&tc, &c, ft_test_comm(), err, sizeof err), 0);
    r.m.step = -1;
    train_ckpt_save(tc, &r.tr);
    train_ckpt_destroy(tc);
    r.m.step = 0;
    ckpt_path(path, sizeof path, dir, "t", -1);
    int rc = train_ckpt_restore(&r.tr, path, true, ft_test_comm(), err, sizeof err);
    if (ft_test_rank() == 0) printf("  %s\n", rc ? err : "restored (wrong)");
    assert_all(rc == -1 && strstr(err, "dataset 'state/step' is -1, expected >= 0") && r.m.step == 0);
    run_free(&r);
    ft_rmdir(dir);
}

/* A run on a layout: tp, pp, dp over the test's ranks (0 = no grid, one replica per rank). */
typedef struct {
    Run r;
    FtGrid g;
    bool has_grid;
} LRun;

static void lrun_init(LRun *l, FtConfig c, int tp, int pp, int dp, uint64_t seed)
{
    char err[256];
    int micro = 2; /* global batch 2 B in every layout: dp 2 uses 1 micro-batch per rank */
    l->has_grid = tp > 0;
    if (l->has_grid) {
        micro = 2 / dp;
        c.parallel.tp = tp, c.parallel.pp = pp, c.parallel.dp = dp;
    }
    c.parallel.microbatches = micro;
    static FtConfig keep[3]; /* the trainer keeps a pointer to its config (ref, a, b alive) */
    static int which;
    FtConfig *cp = &keep[which++ % 3];
    *cp = c;
    FtGpt2Config mc;
    model_config_from_deck(cp, &mc);
    g_dims[0] = train_seq_len(cp);
    g_dims[1] = (int)cp->model.vocab;
    FtBatchSource src = {ft_synth_fetch, g_dims};
    if (!l->has_grid) {
        model_create(&l->r.m, &mc);
        model_init_random(&l->r.m, seed);
        train_init(&l->r.tr, cp, &l->r.m, &src, NULL);
        return;
    }
    assert_int_equal(grid_create(&l->g, ft_test_comm(), tp, pp, dp, 1, err, sizeof err), 0);
    FtShard sh = {.tp = tp, .tp_rank = l->g.tp_rank, .pp = pp, .pp_rank = l->g.pp_rank};
    model_create_sharded(&l->r.m, &mc, &sh);
    model_init_random(&l->r.m, seed);
    train_init_grid(&l->r.tr, cp, &l->r.m, &l->g, &src, NULL);
}

static void lrun_free(LRun *l)
{
    run_free(&l->r);
    if (l->has_grid) grid_destroy(&l->g);
}

static void reshard(int ta, int pa, int da, int tb, int pb, int db)
{
    char dir[64], err[CKPT_ERR_MAX] = "", path[CKPT_PATH_MAX];
    ft_tmpdir(dir);
    FtConfig c = tiny_cfg(dir);
    c.checkpoint.interval = N_HALF;
    LRun ref, a, b;
    lrun_init(&ref, c, 0, 0, 0, 7); /* the single-rank run: 2 micro-batches of B */
    steps(&ref.r, 2 * N_HALF, NULL);

    lrun_init(&a, c, ta, pa, da, 7);
    steps(&a.r, N_HALF, NULL);
    FtTrainCkpt *tc = NULL;
    assert_int_equal(train_ckpt_create(&tc, &c, ft_test_comm(), err, sizeof err), 0);
    train_ckpt_save(tc, &a.r.tr);
    train_ckpt_destroy(tc);
    lrun_free(&a);

    lrun_init(&b, c, tb, pb, db, 99);
    ckpt_path(path, sizeof path, dir, "t", N_HALF);
    int rc = train_ckpt_restore(&b.r.tr, path, true, ft_test_comm(), err, sizeof err);
    if (rc && ft_test_rank() == 0) printf("  %s\n", err);
    assert_all(rc == 0);
    assert_all(b.r.m.step == N_HALF && b.r.tr.cursor == (uint64_t)(N_HALF * 2 * c.train.batch));
    steps(&b.r, N_HALF, NULL);
    double perr = 0;
    size_t n = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &b.r.m.p[i];
        if (!p->size) continue;
        float *want = malloc(sizeof(float) * p->size);
        model_slab_extract(&b.r.m, i, ref.r.m.params + ref.r.m.p[i].offset, want);
        for (size_t k = 0; k < p->size; k++)
            perr = fmax(perr, fabs((double)b.r.m.params[p->offset + k] - want[k]));
        n += p->size;
        free(want);
    }
    double pmax = perr;
    MPI_Allreduce(MPI_IN_PLACE, &pmax, 1, MPI_DOUBLE, MPI_MAX, ft_test_comm());
    if (ft_test_rank() == 0)
        printf("  written tp %d pp %d dp %d, resumed on tp %d pp %d dp %d: max |param - single "
               "rank| after %d + %d steps = %.2e\n", ta, pa, da, tb, pb, db, N_HALF, N_HALF, pmax);
    assert_all(n > 0 && perr <= 2e-4);
    lrun_free(&ref);
    lrun_free(&b);
    ft_rmdir(dir);
}

static void test_reshard(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    reshard(2, 1, 1, 1, 2, 1); /* tp2 -> pp2 */
    reshard(1, 2, 1, 1, 1, 2); /* pp2 -> dp2 */
    reshard(1, 1, 2, 2, 1, 1); /* dp2 -> tp2 */
    reshard(2, 1, 1, 0, 0, 0); /* tp2 -> one replica per rank, no grid */
}

FT_TEST_MAIN(cmocka_unit_test(test_resume_bitwise_sync), cmocka_unit_test(test_resume_bitwise_async),
             cmocka_unit_test(test_resume_staged),
             cmocka_unit_test(test_interval_and_keep), cmocka_unit_test(test_every_seconds),
             cmocka_unit_test(test_every_seconds_agreed),
             cmocka_unit_test(test_auto_interval), cmocka_unit_test(test_resume_fallback_and_errors),
             cmocka_unit_test(test_reshard), cmocka_unit_test(test_newest_after_resume),
             cmocka_unit_test(test_every_seconds_counts_next_step),
             cmocka_unit_test(test_negative_step_refused))

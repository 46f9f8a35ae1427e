/* test_gpu_dmr.c: DMR on the CUDA backend (backend.h: checker_run, equal, fingerprint,
 * mark_differs, fingerprint_into).
 *   - The backends' DMR functions agree with the host: the CPU backend's fingerprint is
 *     ft_fingerprint (fingerprint.h) and its equal is memcmp, and the CUDA kernel's way of
 *     summing fingerprint.h's terms (per thread over a grid-stride loop of words, then the
 *     threads' sums in another order, block 0 adding the tail word and the length term),
 *     emulated on the host, gives ft_fingerprint too (this test runs everywhere); the CUDA
 *     fingerprint kernel gives ft_fingerprint's value for the same bytes (1-, 2-, 4- and 8-byte
 *     elements, lengths that fill no block evenly, buffers at 4-, 2- and 1-byte alignment) and
 *     any single flipped bit changes it; the CUDA equal finds a single differing byte at the first, a
 *     middle and the last position, on word-aligned and odd lengths; mark_differs (the
 *     compare DMR reads back at the agreement) gives the same answers into a flag word and
 *     never clears a flag that is set, and fingerprint_into the fingerprint's value into a
 *     word, on both backends.
 *   - A flip campaign on the GPU: seeded sdc-random schedules (primary and checker targets) over
 *     the forward, backward, AC recomputation and optimizer of a dense GPT-2 with AC every 2
 *     blocks, naive and piggyback DMR, through train_dmr_setup as `ftllm train` uses it: every
 *     flip detected and its step redone, and the run ends with parameters and both AdamW
 *     moments bitwise equal to the fault-free GPU run without DMR. A clean run with naive DMR
 *     (every op re-run on the checker stream) mismatches nowhere.
 *   - The same with mode planned (phases 1,2,3 after a 2-step profile, dmr.leftovers = end),
 *     dense and MoE top-2 with the dynamic planner (dmr.moe_dynamic): deferred replays on the
 *     checker stream, every flip caught, the run bitwise where the model without DMR ends.
 * (Each op kind on the checker stream against its primary: test_gpu_ops.c.) Where no GPU is
 * usable the GPU tests skip with one line saying why.
 * ft-test: ranks 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ft_test.h"
#include "gpu_skip.h"
#include "ftllm/backend.h"
#include "ftllm/fingerprint.h"
#include "ftllm/deck.h"
#include "ftllm/deck_keys.h"
#include "ftllm/dmr.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"
#include "ftllm/train_dmr.h"

static unsigned long long g_rng = 77;
static unsigned char rbyte(void)
{
    unsigned long long z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (unsigned char)((z ^ (z >> 31)) >> 56);
}

/* ---- the functions themselves -------------------------------------------------------------- */

/* fingerprint_into's value for n esize-byte elements at p (backend memory), read back; the
 * slot holds garbage before, which must not matter. */
static uint64_t fp_into(const FtBackend *be, const void *p, size_t esize, size_t n)
{
    uint64_t *slot = backend_alloc(be, sizeof(uint64_t), "fingerprint slot"), v;
    be->set(be->ctx, slot, 0xA5, sizeof(uint64_t));
    be->fingerprint_into(be->ctx, p, esize, n, slot);
    be->to_host(be->ctx, &v, slot, sizeof v);
    be->release(be->ctx, slot);
    return v;
}

/* mark_differs's answer for a and b (backend memory), read back: 1 when they differ. A flag
 * already set stays set (an equal pair never clears it). */
static unsigned marks(const FtBackend *be, const void *a, const void *b, size_t n)
{
    unsigned *f = backend_alloc(be, 2 * sizeof(unsigned), "mark test"), h[2];
    be->mark_differs(be->ctx, a, b, n, f);
    be->to_device(be->ctx, f + 1, &(unsigned){1}, sizeof(unsigned));
    be->mark_differs(be->ctx, a, a, n, f + 1);
    be->to_host(be->ctx, h, f, sizeof h);
    be->release(be->ctx, f);
    assert_int_equal(h[1], 1);
    return h[0];
}

static void test_cpu_backend(void **s)
{
    (void)s;
    const FtBackend *be = backend_cpu();
    enum { N = 1001 };
    static unsigned char a[8 * N], b[8 * N];
    for (size_t i = 0; i < sizeof a; i++) a[i] = b[i] = rbyte();
    static const size_t es[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        assert_true(be->fingerprint(be->ctx, a, es[k], N) == ft_fingerprint(a, es[k] * N));
        assert_true(fp_into(be, a, es[k], N) == ft_fingerprint(a, es[k] * N));
    }
    assert_true(be->equal(be->ctx, a, b, sizeof a));
    assert_int_equal(marks(be, a, b, sizeof a), 0);
    b[4321] ^= 0x10;
    assert_false(be->equal(be->ctx, a, b, sizeof a));
    assert_int_equal(marks(be, a, b, sizeof a), 1);
    assert_int_equal(marks(be, a + 1, b + 1, sizeof a - 1), 1);
    /* the fingerprint kernel's sums, emulated on the host from fingerprint.h's terms: each of
     * 3 blocks x 256 threads sums its grid-stride words, then the threads' sums are added in
     * reverse (the kernel: block trees, then one integer atomicAdd per block), block 0 adding
     * the tail word and the length term; at byte offsets 0, 1 and 2 (the kernel's 4-, 1- and
     * 2-byte loads) and lengths that end mid-word */
    for (size_t off = 0; off < 3; off++)
        for (size_t bytes = 8 * N - 3; bytes <= 8 * N - off; bytes++) {
            enum { NT = 3 * 256 };
            const unsigned char *p = a + off;
            uint64_t part[NT] = {0}, sum = 0;
            for (size_t i = 0; i < bytes / 4; i++) {
                uint32_t w = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                             (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
                part[i % NT] += ft_fp_term(i, w);
            }
            if (bytes % 4) part[0] += ft_fp_term(bytes / 4, ft_fp_tail(p + bytes / 4 * 4, bytes));
            part[0] += ft_fp_len(bytes);
            for (int t = NT - 1; t >= 0; t--) sum += part[t];
            assert_true(sum == ft_fingerprint(p, bytes));
        }
    /* 2-byte elements (bf16): a flipped bit in one element changes the fingerprint */
    uint64_t f0 = be->fingerprint(be->ctx, a, 2, N);
    a[2 * 500 + 1] ^= 0x80;
    assert_true(be->fingerprint(be->ctx, a, 2, N) != f0);
}

static void test_fingerprint(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    static const size_t es[] = {1, 2, 4, 8};
    static const size_t ns[] = {1, 255, 257, 100003, 3 * 65536 * 256 + 17};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 5; j++) {
            size_t n = ns[j], bytes = es[k] * n;
            int off = (k + j) % 3; /* the kernel's 4-, 2- and 1-byte word loads */
            unsigned char *h = malloc(bytes);
            assert_non_null(h);
            for (size_t i = 0; i < bytes; i++) h[i] = rbyte();
            unsigned char *base = backend_alloc(be, bytes + 4, "fingerprint test");
            void *d = base + (off == 1 ? 2 : off == 2 ? 1 : 0);
            be->to_device(be->ctx, d, h, bytes);
            uint64_t want = ft_fingerprint(h, bytes);
            uint64_t got = be->fingerprint(be->ctx, d, es[k], n);
            assert_true(fp_into(be, d, es[k], n) == want); /* the no-wait form, same value */
            size_t el = n / 2, bit = (size_t)rbyte() % (8 * es[k]);
            h[el * es[k] + bit / 8] ^= (unsigned char)(1u << (bit % 8));
            be->to_device(be->ctx, d, h, bytes);
            uint64_t flipped = be->fingerprint(be->ctx, d, es[k], n);
            uint64_t want2 = ft_fingerprint(h, bytes);
            printf("  fingerprint %zu-byte x %zu at +%d: %016llx (host %016llx), one bit flipped "
                   "%016llx\n", es[k], n, off == 1 ? 2 : off == 2 ? 1 : 0,
                   (unsigned long long)got, (unsigned long long)want,
                   (unsigned long long)flipped);
            assert_true(got == want);
            assert_true(flipped == want2 && flipped != got);
            be->release(be->ctx, base);
            free(h);
        }
}

static void test_equal(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    static const size_t lens[] = {1, 4, 7, 4096, 1000001};
    for (int j = 0; j < 5; j++) {
        size_t n = lens[j];
        unsigned char *h = malloc(n);
        assert_non_null(h);
        for (size_t i = 0; i < n; i++) h[i] = rbyte();
        unsigned char *a = backend_alloc(be, n, "equal test"), *b = backend_alloc(be, n, "equal test");
        be->to_device(be->ctx, a, h, n);
        be->to_device(be->ctx, b, h, n);
        assert_true(be->equal(be->ctx, a, b, n));
        assert_int_equal(marks(be, a, b, n), 0);
        size_t pos[3] = {0, n / 2, n - 1};
        for (int p = 0; p < 3; p++) {
            unsigned char c = h[pos[p]] ^ 0x01;
            be->to_device(be->ctx, b + pos[p], &c, 1);
            assert_false(be->equal(be->ctx, a, b, n));
            assert_int_equal(marks(be, a, b, n), 1);
            if (pos[p] != 0) { /* misaligned pointers: the byte-wise kernel */
                assert_false(be->equal(be->ctx, a + 1, b + 1, n - 1));
                assert_int_equal(marks(be, a + 1, b + 1, n - 1), 1);
            }
            be->to_device(be->ctx, b + pos[p], h + pos[p], 1);
            assert_true(be->equal(be->ctx, a, b, n));
        }
        be->release(be->ctx, a), be->release(be->ctx, b);
        free(h);
    }
}

/* ---- training with DMR on the GPU ---------------------------------------------------------- */

enum { STEPS = 30 };
static int g_dims[2];

static FtConfig cfg_of(int mode)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 4, c.model.heads = 4, c.model.channels = 32, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = STEPS, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0, c.train.ac = FT_AC_CHOICE_EVERY, c.train.ac_every = 2;
    c.parallel.microbatches = 2;
    c.dmr.mode = mode;
    c.dmr.suspect_after = 0;
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    assert_int_equal(deck_check(&c, 1, err, sizeof err), 0);
    return c;
}

/* A planned run's profile, read before its DMR is destroyed (train_gpu): its step seconds
 * without checks and its checker seconds (both summed over the profiled steps); 0 where the run
 * made none. */
static double g_prof_step, g_prof_checks;

/* Trains c's steps on the GPU from the seed-7 initialization (schedule: a fault file's text or
 * NULL); the final state comes back into *host (caller frees), the DMR counters into *st. */
static void train_gpu(const FtBackend *be, FtConfig *c, const char *schedule, FtModel *host,
                      FtDmrStats *st)
{
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtModel m;
    model_create(host, &mc);
    model_init_random(host, 7);
    model_create_on(&m, &mc, NULL, be);
    model_copy_state(&m, host);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init(&tr, c, &m, &src, NULL);
    char path[64] = "", err[FT_DECK_ERR_MAX];
    if (schedule) {
        ft_tmpfile(schedule, strlen(schedule), path);
        snprintf(c->faults.schedule, sizeof c->faults.schedule, "%s", path);
    }
    FtTrainDmr *td = NULL;
    int rc = train_dmr_setup(&td, &tr, c, err, sizeof err);
    if (rc) fprintf(stderr, "train_dmr_setup: %s\n", err);
    assert_int_equal(rc, 0);
    if (path[0]) unlink(path);
    c->faults.schedule[0] = '\0';
    for (long long s = 0; s < c->train.steps; s++) {
        FtStepInfo info;
        assert_true(train_step(&tr, &info) != FT_STEP_FAILED);
    }
    memset(st, 0, sizeof *st);
    if (td) train_dmr_stats(td, st);
    const FtDmrProfile *pr = td ? dmr_profile(train_dmr_get(td)) : NULL;
    g_prof_step = g_prof_checks = 0;
    if (pr) {
        g_prof_step = pr->step_s;
        for (int i = 0; i < pr->nmicro + pr->nopt; i++) g_prof_checks += pr->time[i];
    }
    train_dmr_destroy(td);
    train_free(&tr);
    model_copy_state(host, &m);
    model_free(&m);
}

static int same_state(const FtModel *a, const FtModel *b)
{
    return a->step == b->step && a->nparams == b->nparams &&
           !memcmp(a->params, b->params, sizeof(float) * a->nparams) &&
           !memcmp(a->m, b->m, sizeof(float) * a->nparams) &&
           !memcmp(a->v, b->v, sizeof(float) * a->nparams);
}

static void test_flip_campaign(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    log_init(0, FT_LOG_WARN);
    FtConfig c0 = cfg_of(FT_DMR_OFF);
    FtModel ref, clean;
    FtDmrStats none, cs;
    train_gpu(be, &c0, NULL, &ref, &none);
    FtConfig cc = cfg_of(FT_DMR_NAIVE);
    train_gpu(be, &cc, NULL, &clean, &cs);
    printf("  %s clean naive: %lld checks on the checker stream, %lld mismatches\n", be->name,
           cs.checks[FT_DMR_S_NAIVE], cs.mismatches);
    assert_true(cs.checks[FT_DMR_S_NAIVE] > 1000 && cs.mismatches == 0 && cs.redone == 0);
    assert_true(same_state(&clean, &ref));
    model_free(&clean);
    for (int mode = FT_DMR_NAIVE; mode <= FT_DMR_PIGGYBACK; mode++) {
        enum { COUNT = 60 };
        char text[256];
        snprintf(text, sizeof text, "; gpu campaign %s\nsdc-random count=%d seed=%d steps=1-%d "
                 "target=both\n", dmr_mode_name(mode), COUNT, 2000 + mode, STEPS);
        FtConfig c = cfg_of(mode);
        FtModel m;
        FtDmrStats st;
        train_gpu(be, &c, text, &m, &st);
        printf("  %s %-9s: %lld flips injected, %lld detected, %lld missed, %lld of %lld "
               "attempts redone, checks naive %lld piggyback %lld\n", be->name, dmr_mode_name(mode),
               st.injected, st.detected, st.missed, st.redone, st.attempts,
               st.checks[FT_DMR_S_NAIVE], st.checks[FT_DMR_S_PIGGYBACK]);
        assert_true(st.injected == COUNT && st.not_fired == 0);
        assert_true(st.detected == st.injected && st.missed == 0 && st.rolled_back == COUNT);
        assert_true(st.redone > 0 && st.attempts == STEPS + st.redone && st.unchecked == 0);
        if (mode == FT_DMR_PIGGYBACK) assert_true(st.checks[FT_DMR_S_PIGGYBACK] > 0);
        assert_true(same_state(&m, &ref));
        model_free(&m);
    }
    model_free(&ref);
}

/* Mode planned on the GPU, dense and MoE top-2 with the dynamic planner: profiled from the first
 * 2 steps, then (one rank has no communication windows) the checks the plan leaves naive
 * deferred to the drain (dmr.leftovers = end) and replayed on the checker stream, with their
 * fingerprints read at the agreement, the second micro-batch's gradient checks chained to the
 * first's (dmr.chain: the earlier sum taken from the replay); every flip caught, and each run ends bitwise where the
 * same model without DMR ends. */
static void test_planned_campaign(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    log_init(0, FT_LOG_WARN);
    for (int moe = 0; moe < 2; moe++) {
        FtConfig c0 = cfg_of(FT_DMR_OFF);
        if (moe) c0.model.experts = 4, c0.model.top_k = 2;
        FtModel ref, m;
        FtDmrStats none, st;
        train_gpu(be, &c0, NULL, &ref, &none);
        enum { COUNT = 40 };
        char text[256];
        snprintf(text, sizeof text, "; gpu planned campaign\nsdc-random count=%d seed=%d "
                 "steps=1-%d target=both\n", COUNT, 3000 + moe, STEPS);
        FtConfig c = cfg_of(FT_DMR_PLANNED);
        if (moe) c.model.experts = 4, c.model.top_k = 2, c.dmr.moe_dynamic = true;
        c.dmr.phases = FT_DMR_PHASES_123, c.dmr.profile_steps = 2, c.dmr.deferred_mb = 64;
        c.dmr.leftovers = FT_DMR_LEFT_END; /* one GPU has no windows: deferred to the drain */
        train_gpu(be, &c, text, &m, &st);
        printf("  %s planned%s: %lld flips injected, %lld detected, %lld missed; checks naive "
               "%lld piggyback %lld deferred %lld agc %lld; dynamic %lld deferred; %lld "
               "gradient checks chained\n", be->name,
               moe ? " (MoE, dynamic)" : "", st.injected, st.detected, st.missed,
               st.checks[FT_DMR_S_NAIVE], st.checks[FT_DMR_S_PIGGYBACK],
               st.checks[FT_DMR_S_DEFERRED], st.checks[FT_DMR_S_AGC], st.dyn_deferred,
               st.chained);
        assert_true(st.injected == COUNT && st.detected == COUNT && st.missed == 0);
        assert_true(st.checks[FT_DMR_S_DEFERRED] + st.checks[FT_DMR_S_AGC] > 0);
        assert_true(!moe || st.dyn_deferred > 0);
        /* the second micro-batch's deferred gradient checks take their earlier sums from the
         * first's replay on the checker stream (dmr.chain): no window replays before the drain */
        assert_true(st.chained > 0);
        assert_true(same_state(&m, &ref));
        model_free(&m), model_free(&ref);
    }
}

/* The profile of mode planned on a device times the step without its checks and each check apart
 * (dmr_plan.h): a check re-runs its op, so over a step the checks take about what the
 * primaries take, and the step without checks, which holds every primary, is at least a good
 * part of the checks' time. A device runs its work late (the stand-in queues it until a wait;
 * a GPU until the stream gets to it): a profile that started a check's clock before waiting
 * for the primary charged the primary to the check, and its step without checks was the
 * launches alone (on the H200 24.8 ms against the 153 ms a step took; on the stand-in a
 * ratio under 0.1). Wide enough that the ops' arithmetic outweighs the host's bookkeeping and
 * the stream waits (each check waits three times, each primary once while profiling): on a GPU
 * a GPT-2 small layer's width at T 512. */
static void test_profile_times(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(FT_DMR_PLANNED);
#if defined(FT_GPU_STANDIN) || defined(FTLLM_CUDA_EMU)
    c.model.channels = 256, c.model.heads = 4, c.model.seq_len = 64, c.model.layers = 2;
    c.train.batch = 4;
#else /* a GPU: kernels of hundreds of microseconds, so that they, not the waits, are timed */
    c.model.channels = 768, c.model.heads = 12, c.model.seq_len = 512, c.model.layers = 2;
    c.train.batch = 8;
#endif
    c.train.steps = 3;
    g_dims[0] = (int)c.model.seq_len;
    c.dmr.profile_steps = 2;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_check(&c, 1, err, sizeof err), 0);
    FtModel m;
    FtDmrStats st;
    train_gpu(be, &c, NULL, &m, &st);
    printf("  %s profile: step without checks %.2f ms, checks %.2f ms (ratio %.2f)\n", be->name,
           1e3 * g_prof_step, 1e3 * g_prof_checks, g_prof_step / g_prof_checks);
    assert_true(g_prof_checks > 0);
    assert_true(g_prof_step >= 0.3 * g_prof_checks);
    model_free(&m);
}

/* run.precision = bf16: the checker (a second stream with its own cuBLAS handle on a GPU) must
 * multiply in bf16 as the primary does, or every GEMM check mismatches. A clean naive run has
 * no mismatch and ends bitwise where bf16 without DMR ends, which is not where fp32 ends (the
 * precision took effect); then 40 flips over naive and piggyback checks, all caught, and the
 * same end. */
static void test_bf16_campaign(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    if (!be->set_precision) skip(); /* a backend that computes in fp32 only */
    log_init(0, FT_LOG_WARN);
    FtConfig c0 = cfg_of(FT_DMR_OFF);
    FtModel f32, ref, m;
    FtDmrStats none, st;
    train_gpu(be, &c0, NULL, &f32, &none);
    be->set_precision(be->ctx, FT_PRECISION_BF16);
    c0 = cfg_of(FT_DMR_OFF);
    train_gpu(be, &c0, NULL, &ref, &none);
    assert_false(same_state(&ref, &f32));
    FtConfig cc = cfg_of(FT_DMR_NAIVE);
    train_gpu(be, &cc, NULL, &m, &st);
    printf("  %s bf16 clean naive: %lld checks on the checker stream, %lld mismatches\n",
           be->name, st.checks[FT_DMR_S_NAIVE], st.mismatches);
    assert_true(st.checks[FT_DMR_S_NAIVE] > 1000 && st.mismatches == 0 && st.redone == 0);
    assert_true(same_state(&m, &ref));
    model_free(&m);
    enum { COUNT = 40 };
    char text[256];
    snprintf(text, sizeof text, "; gpu bf16 campaign\nsdc-random count=%d seed=4000 steps=1-%d "
             "target=both\n", COUNT, STEPS);
    FtConfig c = cfg_of(FT_DMR_PIGGYBACK);
    train_gpu(be, &c, text, &m, &st);
    be->set_precision(be->ctx, FT_PRECISION_FP32);
    printf("  %s bf16 piggyback: %lld flips injected, %lld detected, %lld missed\n", be->name,
           st.injected, st.detected, st.missed);
    assert_true(st.injected == COUNT && st.detected == COUNT && st.missed == 0);
    assert_true(same_state(&m, &ref));
    model_free(&m), model_free(&ref), model_free(&f32);
}

FT_TEST_MAIN(cmocka_unit_test(test_cpu_backend), cmocka_unit_test(test_fingerprint),
             cmocka_unit_test(test_equal), cmocka_unit_test(test_flip_campaign),
             cmocka_unit_test(test_planned_campaign), cmocka_unit_test(test_profile_times),
             cmocka_unit_test(test_bf16_campaign))

/* bench_train.c: one GPT-2 124M training step on the CPU against the BLAS sgemm rate.
 *
 * GPT-2 124M (L 12, NH 12, C 768, V 50257 padded to 50304, maxT 1024), B 4, T 64, synthetic
 * tokens, AdamW: prints ms/step and the model FLOP rate (matmul + attention FLOPs of forward and
 * backward, no recomputation, over the whole step including the optimizer) divided by the
 * cblas_sgemm rate measured in the same run on the same threads. The sgemm baseline is the
 * faster of two shapes: the model's own MLP GEMM (256 x 3072 x 768) and a square 1536^3 GEMM,
 * so the ratio is conservative; it is timed just before every timed step, so baseline and step
 * see the same machine load (this 2-core machine is shared). Reported: the mean over the timed
 * steps (mean step time against the mean baseline) and best of N (the fastest step against the
 * fastest baseline: each the least disturbed of its N measurements, the steadiest figure on a
 * shared machine; a step's ratio to the baseline just before it is not, since a disturbed
 * baseline inflates it).
 * Target: >= 0.6. Also runs the step with activation checkpointing (full) to show its cost,
 * and prints the per-op time table of the plain step. The train loop times itself with
 * MPI_Wtime, so this is an MPI program of one rank (it calls MPI_Init).
 * Usage: bench_train [steps] (default 3 timed steps after 1 warm-up step).
 * FT_BENCH_SMOKE=1: a tiny model (L 2, C 64, V 256) and 1 timed step, a few seconds: checks
 * that the benchmark runs (tests/e2e/bench_smoke.sh), its numbers mean nothing. */
#include <cblas.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

static void random_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    const int *dims = ctx; /* T, V */
    uint64_t s = first * 2654435761u + 1;
    for (int i = 0; i < B * dims[0]; i++) {
        in[i] = (int)(model_rng_next(&s) % (uint64_t)dims[1]);
        tg[i] = (int)(model_rng_next(&s) % (uint64_t)dims[1]);
    }
}

/* GFLOP/s of cblas_sgemm C(M,N) = A(M,K) B(N,K)^T, mean over reps after one warm-up call. */
static double sgemm_rate(int M, int N, int K, int reps)
{
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K),
          *c = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
    double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
    double dt = omp_get_wtime() - t0;
    free(a), free(b), free(c);
    return 2.0 * M * N * K * reps / dt / 1e9;
}

/* Model FLOPs of one step: matmul and attention entries, no recomputation; plus the tied LM
 * head's weight gradient where the encoder backward computes it (a one-stage model: ops.h). */
static double model_flops(const FtTape *tp, int micro)
{
    double f = 0;
    for (int i = 0; i < tp->ne; i++) {
        const FtTapeEntry *e = &tp->e[i];
        if (e->phase == FT_PH_RECOMPUTE) continue;
        if (e->kind == FT_OP_ENCODER && e->dir == FT_BWD && e->in[4] >= 0) {
            f += 2.0 * e->d[0] * e->d[1] * e->d[2] * e->x[0]; /* 2 N C Vp */
            continue;
        }
        if (e->kind != FT_OP_MATMUL && e->kind != FT_OP_ATTENTION) continue;
        f += tape_flops(tp, i, i + 1, false);
    }
    return f * micro;
}

/* The sgemm baseline, timed just before each timed step: the model's MLP shape and a square
 * one (smoke mode: one small shape, once). */
typedef struct base {
    double small, square; /* GFLOP/s of each shape */
} Base;

static int g_smoke;

static Base measure_baseline(void)
{
    if (g_smoke) {
        double r = sgemm_rate(64, 256, 64, 2);
        return (Base){r, r};
    }
    return (Base){sgemm_rate(256, 3072, 768, 10), sgemm_rate(1536, 1536, 1536, 2)};
}

static double base_best(Base b) { return b.small > b.square ? b.small : b.square; }

/* What one configuration measured over its timed steps. */
typedef struct result {
    double flops;            /* model FLOPs of one step */
    double mean_s, best_s;   /* step time: mean, best */
    Base base;               /* mean baseline of each shape */
    double ratio_mean;       /* mean model rate / faster mean baseline */
    double best_base;        /* the fastest baseline timed */
    double ratio_best;       /* best of N: the best step's rate / the fastest baseline */
} Result;

static void run(FtConfig *c, int ac, int steps, int print_ops, Result *res)
{
    c->train.ac = ac;
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 1337);
    static int dims[2];
    dims[0] = (int)c->train.seq_len, dims[1] = (int)c->model.vocab;
    FtBatchSource src = {random_fetch, dims};
    FtTrainer tr;
    train_init(&tr, c, &m, &src, NULL);
    memset(res, 0, sizeof *res);
    res->flops = model_flops(&tr.tape, tr.micro);
    FtStepInfo st;
    train_step(&tr, &st); /* warm-up: page faults, BLAS buffers */
    memset(&tr.stats, 0, sizeof tr.stats);
    double total = 0;
    res->best_s = 1e30;
    for (int i = 0; i < steps; i++) {
        Base b = measure_baseline();
        res->base.small += b.small / steps, res->base.square += b.square / steps;
        train_step(&tr, &st);
        total += st.seconds;
        if (st.seconds < res->best_s) res->best_s = st.seconds;
        if (base_best(b) > res->best_base) res->best_base = base_best(b);
        printf("  ac %-5s step %d: %8.1f ms, loss %.4f, sgemm just before %.1f GFLOP/s\n",
               ac ? "full" : "none", i + 1, 1e3 * st.seconds, st.loss, base_best(b));
        fflush(stdout);
    }
    res->mean_s = total / steps;
    res->ratio_mean = res->flops / res->mean_s / 1e9 / base_best(res->base);
    res->ratio_best = res->flops / res->best_s / 1e9 / res->best_base;
    if (print_ops) exec_stats_print(stdout, &tr.stats);
    printf("  activations (tape arena): %.1f MiB\n", tr.tape.arena_bytes / 1048576.0);
    train_free(&tr);
    model_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *smoke = getenv("FT_BENCH_SMOKE");
    g_smoke = smoke && *smoke && strcmp(smoke, "0") != 0;
    int steps = argc > 1 ? atoi(argv[1]) : g_smoke ? 1 : 3;
    if (steps < 1) steps = 1;
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    if (deck_defaults(&c, err, sizeof err)) MPI_Abort(MPI_COMM_WORLD, 1);
    c.model.layers = 12, c.model.heads = 12, c.model.channels = 768;
    c.model.vocab = 50257, c.model.vocab_pad = 128, c.model.seq_len = 1024;
    c.train.batch = 4, c.train.seq_len = 64, c.train.steps = 1000, c.train.warmup = 10;
    if (g_smoke) {
        c.model.layers = 2, c.model.heads = 2, c.model.channels = 64;
        c.model.vocab = 256, c.model.vocab_pad = 64, c.model.seq_len = 64;
        c.train.batch = 2, c.train.seq_len = 16;
    }
    if (deck_check(&c, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int nt = omp_get_max_threads();
    long long tok = c.train.batch * c.train.seq_len;
    printf("bench_train: %s (L%lld NH%lld C%lld V%lld), B %lld, T %lld, %d thread%s, %d timed "
           "step%s after 1 warm-up\n", g_smoke ? "smoke mode, a tiny GPT-2" : "GPT-2 124M",
           c.model.layers, c.model.heads, c.model.channels, c.model.vocab, c.train.batch,
           c.train.seq_len, nt, nt == 1 ? "" : "s", steps, steps == 1 ? "" : "s");
    Result none, full;
    run(&c, FT_AC_CHOICE_NONE, steps, 1, &none);
    printf("  sgemm before the steps (mean): %s %.1f GFLOP/s, %s %.1f GFLOP/s; baseline %.1f "
           "GFLOP/s\n", g_smoke ? "64x256x64" : "256x3072x768", none.base.small,
           g_smoke ? "64x256x64" : "1536^3", none.base.square, base_best(none.base));
    printf("  model FLOPs per step: %.2f GFLOP\n", none.flops / 1e9);
    double rate = none.flops / none.mean_s / 1e9;
    printf("RESULT ac none: %.1f ms/step, %.0f tok/s, %.1f GFLOP/s, %.2f of the sgemm rate "
           "(target >= 0.60)\n", 1e3 * none.mean_s, tok / none.mean_s, rate, none.ratio_mean);
    printf("RESULT ac none best of %d: %.1f ms/step, sgemm %.1f GFLOP/s, %.2f of the sgemm rate\n",
           steps, 1e3 * none.best_s, none.best_base, none.ratio_best);
    run(&c, FT_AC_CHOICE_FULL, steps, 0, &full);
    double rate_ac = full.flops / full.mean_s / 1e9;
    printf("RESULT ac full: %.1f ms/step, %.1f GFLOP/s model FLOPs, %.2f of the sgemm rate "
           "(its own baseline); recomputation costs %.0f%% of the sgemm-relative rate\n",
           1e3 * full.mean_s, rate_ac, full.ratio_mean,
           100.0 * (1.0 - full.ratio_mean / none.ratio_mean));
    printf("  (ac full baseline: %.1f GFLOP/s; uptime load shows how busy the machine was)\n",
           base_best(full.base));
    int ok = none.ratio_mean > 0 && full.ratio_mean > 0; /* finite, positive rates */
    printf("verdict: %s\n", ok ? "OK" : "FAILED (no rate measured)");
    MPI_Finalize();
    return ok ? 0 : 1;
}

/* bench_ops.c: each op kind of a backend (default cuda) timed alone at one GPT-2 shape (default
 * 124M's: B 16, T 1024, C 768, NH 12, V 50257 padded to 50304, 12 layers), on random inputs:
 * the median of 7 timed rounds of 3 calls each, after 2 warm-up calls, each round between two
 * backend syncs (a host clock: what a round costs the device, launches included). For each
 * call it prints ms, TFLOP/s and GB/s from the op table's own cost figures (ops.h), the floor
 * (the larger of FLOPs over a peak rate and bytes over a bandwidth: the H200's measured
 * ceilings by default, perf/README.md), how far above that floor the op runs, and its share of
 * a training step (the call times the calls a step of the model makes: e.g. 12 QKV GEMMs
 * forward). The shares' sum is a step with nothing overlapped and no optimizer or gradient
 * clearing beyond AdamW and the norm; the rows say which kernels a step's time is in.
 *
 *   mpiexec -n 1 bench_ops [fp32|bf16] [B T C NH V L]
 * Environment: FT_BENCH_PEAK_TFLOPS (default 790 for bf16's tensor cores, 51 for fp32's
 * CUDA cores), FT_BENCH_GBS (default 4300), FT_BENCH_BACKEND (default cuda; cpu for a dry
 * run), FTLLM_CUDA_ATTENTION (the attention kernel, as in training), FTLLM_CUDA_LT (0: the
 * matmul bias by a fill, not cuBLASLt's epilogue), FT_BENCH_ONLY (only the
 * cases whose name contains it, e.g. "attention" or "matmul fc": for a profiler, perf/gpu/ncu.sh).
 * perf/gpu/run.sh runs it on the GPU; tests/e2e/gpu_run_emu.sh at toy sizes on the emulator. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_util.h"
#include "ftllm/backend.h"
#include "ftllm/deck_keys.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"
#include "ftllm/ops.h"

enum { WARM = 2, ROUNDS = 7, CALLS = 3 };

typedef enum { F32, POS, I32 } Fill; /* uniform in (-1, 1), in (0, 1e-3), ints in [0, mod) */
typedef struct arg {
    Fill fill;
    size_t n; /* elements; 0: NULL */
    int mod;
} Arg;

typedef struct bcase {
    const char *name;
    FtOpKind kind;
    FtOpDir dir;
    Arg in[FT_OP_MAX_IN], out[FT_OP_MAX_OUT];
    long long d[FT_OP_MAX_DIMS];
    double x[FT_OP_MAX_X];
    int per_step; /* calls in one training step */
} BCase;

static const FtBackend *g_be;
static double g_peak, g_bw;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* A device buffer of a.n elements of a's kind, filled from a seeded host chunk (tiled). */
static void *dev_random(Arg a, uint64_t *rng)
{
    enum { CHUNK = 1 << 22 };
    size_t bytes = 4 * a.n, chunk = a.n < CHUNK ? a.n : CHUNK;
    void *d = backend_alloc(g_be, bytes, "a benchmark input");
    unsigned *h = malloc(4 * chunk);
    for (size_t i = 0; i < chunk; i++) {
        double u = model_rng_uniform(rng);
        if (a.fill == I32) ((int *)h)[i] = (int)(u * a.mod);
        else ((float *)h)[i] = a.fill == POS ? (float)(u * 1e-3) : (float)(2 * u - 1);
    }
    for (size_t off = 0; off < a.n; off += chunk) {
        size_t m = a.n - off < chunk ? a.n - off : chunk;
        g_be->to_device(g_be->ctx, (char *)d + 4 * off, h, 4 * m);
    }
    free(h);
    return d;
}

/* Times one case; adds its share of a step to *step_ms. */
static void run(const BCase *k, double *step_ms)
{
    uint64_t rng = 20261204;
    FtOpCall c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < FT_OP_MAX_IN; i++)
        c.in[i] = k->in[i].n ? dev_random(k->in[i], &rng) : NULL;
    for (int i = 0; i < FT_OP_MAX_OUT; i++)
        c.out[i] = k->out[i].n ? backend_alloc(g_be, 4 * k->out[i].n, "a benchmark output") : NULL;
    memcpy(c.d, k->d, sizeof c.d);
    memcpy(c.x, k->x, sizeof c.x);
    for (int r = 0; r < WARM; r++) exec_op_on(g_be, k->kind, k->dir, &c, NULL);
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        g_be->sync(g_be->ctx);
        double t0 = now();
        for (int j = 0; j < CALLS; j++) exec_op_on(g_be, k->kind, k->dir, &c, NULL);
        g_be->sync(g_be->ctx);
        t[r] = (now() - t0) / CALLS;
    }
    double s = bench_median(t, ROUNDS);
    c.ctx = g_be->ctx;
    const FtOpDesc *od = &g_be->ops[k->kind];
    double fl = od->flops(&c, k->dir), by = od->bytes(&c, k->dir);
    double fl_floor = fl / g_peak, by_floor = by / g_bw;
    double floor = fl_floor > by_floor ? fl_floor : by_floor;
    printf("%-22s %-4s | %9.3f | %8.1f | %8.1f | %8.3f %-5s | %7.1fx | %4d | %8.2f\n", k->name,
           k->dir == FT_FWD ? "fwd" : "bwd", 1e3 * s, fl / s / 1e12, by / s / 1e9, 1e3 * floor,
           fl_floor > by_floor ? "flops" : "bytes", floor > 0 ? s / floor : 0.0, k->per_step,
           1e3 * s * k->per_step);
    *step_ms += 1e3 * s * k->per_step;
    for (int i = 0; i < FT_OP_MAX_IN; i++)
        if (c.in[i]) g_be->release(g_be->ctx, (void *)c.in[i]);
    for (int i = 0; i < FT_OP_MAX_OUT; i++)
        if (c.out[i]) g_be->release(g_be->ctx, c.out[i]);
}

#define F(n) {F32, (size_t)(n), 0}
#define P(n) {POS, (size_t)(n), 0}
#define I(n, m) {I32, (size_t)(n), (int)(m)}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int bf16 = argc > 1 && !strcmp(argv[1], "bf16");
    long long B = 16, T = 1024, C = 768, NH = 12, V = 50257, L = 12;
    if (argc > 1 && strcmp(argv[1], "bf16") && strcmp(argv[1], "fp32")) {
        fprintf(stderr, "bench_ops: argument 1 is '%s': expected fp32 or bf16\n", argv[1]);
        return 2;
    }
    if (argc == 8) {
        long long *v[6] = {&B, &T, &C, &NH, &V, &L};
        for (int i = 0; i < 6; i++) {
            char *end;
            *v[i] = strtoll(argv[2 + i], &end, 10);
            if (*end || *v[i] <= 0) {
                fprintf(stderr, "bench_ops: argument %d is '%s': expected a positive integer\n",
                        2 + i, argv[2 + i]);
                return 2;
            }
        }
        if (C % NH) {
            fprintf(stderr, "bench_ops: C %lld is not a multiple of NH %lld\n", C, NH);
            return 2;
        }
    } else if (argc > 2) {
        fprintf(stderr, "usage: bench_ops [fp32|bf16] [B T C NH V L]\n");
        return 2;
    }
    const char *name = getenv("FT_BENCH_BACKEND") ? getenv("FT_BENCH_BACKEND") : "cuda";
    char why[512] = "";
    g_be = backend_open(name, 0, why, sizeof why);
    if (!g_be) {
        fprintf(stderr, "bench_ops: backend %s: %s\n", name, why);
        MPI_Finalize();
        return 2;
    }
    if (bf16) {
        if (!g_be->set_precision) {
            fprintf(stderr, "bench_ops: backend %s computes in fp32 only\n", name);
            MPI_Finalize();
            return 2;
        }
        g_be->set_precision(g_be->ctx, FT_PRECISION_BF16);
    }
    g_peak = 1e12 * (getenv("FT_BENCH_PEAK_TFLOPS") ? atof(getenv("FT_BENCH_PEAK_TFLOPS"))
                                                    : bf16 ? 790 : 51);
    g_bw = 1e9 * (getenv("FT_BENCH_GBS") ? atof(getenv("FT_BENCH_GBS")) : 4300);
    long long N = B * T, VP = (V + 127) / 128 * 128, C3 = 3 * C, C4 = 4 * C;
    long long np = VP * C + T * C + L * (12 * C * C + 13 * C) + 2 * C; /* GPT-2's parameters */
    const char *att = getenv("FTLLM_CUDA_ATTENTION"), *lt = getenv("FTLLM_CUDA_LT");
    printf("bench_ops: backend %s, %s, B %lld T %lld C %lld NH %lld V %lld (Vp %lld) L %lld, "
           "%lld parameters; attention %s; FTLLM_CUDA_LT %s; floors at %.0f TFLOP/s and "
           "%.0f GB/s\n",
           g_be->name, bf16 ? "bf16" : "fp32", B, T, C, NH, V, VP, L, np,
           att && *att ? att : "(default)", lt && *lt ? lt : "(default)", g_peak / 1e12,
           g_bw / 1e9);
    const BCase cases[] = {
        {"encoder", FT_OP_ENCODER, FT_FWD, {I(N, V), F(VP * C), F(T * C)}, {F(N * C)},
         {B, T, C}, {0}, 1},
        {"encoder + tied head dW", FT_OP_ENCODER, FT_BWD,
         {F(N * C), I(N, V), F(VP * C), F(T * C), F(N * VP), F(N * C)}, {F(VP * C), F(T * C)},
         {B, T, C}, {(double)VP, (double)T}, 1},
        {"layernorm", FT_OP_LAYERNORM, FT_FWD, {F(N * C), F(C), F(C)}, {F(N * C), F(N), F(N)},
         {N, C}, {0}, 2 * L + 1},
        {"layernorm", FT_OP_LAYERNORM, FT_BWD,
         {F(N * C), F(N * C), F(C), F(N), P(N), F(N * C), F(C), F(C)}, {F(N * C), F(C), F(C)},
         {N, C}, {0}, 2 * L + 1},
        {"matmul qkv", FT_OP_MATMUL, FT_FWD, {F(N * C), F(C3 * C), F(C3)}, {F(N * C3)},
         {N, C, C3}, {0}, L},
        {"matmul qkv", FT_OP_MATMUL, FT_BWD,
         {F(N * C3), F(N * C), F(C3 * C), F(C3 * C), F(C3)}, {F(N * C), F(C3 * C), F(C3)},
         {N, C, C3}, {0}, L},
        {"matmul attproj", FT_OP_MATMUL, FT_FWD, {F(N * C), F(C * C), F(C)}, {F(N * C)},
         {N, C, C}, {0}, L},
        {"matmul attproj", FT_OP_MATMUL, FT_BWD, {F(N * C), F(N * C), F(C * C), F(C * C), F(C)},
         {F(N * C), F(C * C), F(C)}, {N, C, C}, {0}, L},
        {"matmul fc", FT_OP_MATMUL, FT_FWD, {F(N * C), F(C4 * C), F(C4)}, {F(N * C4)},
         {N, C, C4}, {0}, L},
        {"matmul fc", FT_OP_MATMUL, FT_BWD,
         {F(N * C4), F(N * C), F(C4 * C), F(C4 * C), F(C4)}, {F(N * C), F(C4 * C), F(C4)},
         {N, C, C4}, {0}, L},
        {"matmul fcproj", FT_OP_MATMUL, FT_FWD, {F(N * C4), F(C * C4), F(C)}, {F(N * C)},
         {N, C4, C}, {0}, L},
        {"matmul fcproj", FT_OP_MATMUL, FT_BWD,
         {F(N * C), F(N * C4), F(C * C4), F(C * C4), F(C)}, {F(N * C4), F(C * C4), F(C)},
         {N, C4, C}, {0}, L},
        {"matmul lm head", FT_OP_MATMUL, FT_FWD, {F(N * C), F(VP * C)}, {F(N * VP)}, {N, C, VP},
         {0}, 1},
        {"matmul lm head dx", FT_OP_MATMUL, FT_BWD, {F(N * VP), F(N * C), F(VP * C)},
         {F(N * C)}, {N, C, VP}, {0}, 1},
        {"attention", FT_OP_ATTENTION, FT_FWD, {F(N * C3)}, {F(N * C), F(B * NH * T)},
         {B, T, C, NH}, {0}, L},
        {"attention", FT_OP_ATTENTION, FT_BWD, {F(N * C), F(N * C3), F(B * NH * T)},
         {F(N * C3)}, {B, T, C, NH}, {0}, L},
        {"gelu", FT_OP_GELU, FT_FWD, {F(N * C4)}, {F(N * C4)}, {N * C4}, {0}, L},
        {"gelu", FT_OP_GELU, FT_BWD, {F(N * C4), F(N * C4)}, {F(N * C4)}, {N * C4}, {0}, L},
        {"residual", FT_OP_RESIDUAL, FT_FWD, {F(N * C), F(N * C)}, {F(N * C)}, {N * C}, {0},
         2 * L},
        {"crossentropy", FT_OP_CROSSENT, FT_FWD, {F(N * VP), I(N, V)}, {F(N * VP), F(N)},
         {N, V, VP}, {0}, 1},
        {"crossentropy", FT_OP_CROSSENT, FT_BWD, {F(N * VP), I(N, V)}, {F(N * VP)}, {N, V, VP},
         {1.0 / (double)N}, 1},
        {"gradnorm (all params)", FT_OP_GRADNORM, FT_FWD, {F(np)}, {F(2)}, {np}, {0}, 1},
        {"adamw (all params)", FT_OP_ADAMW, FT_FWD, {F(np), F(np), F(np), P(np)},
         {F(np), F(np), F(np)}, {np}, {1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05, 1}, 1},
    };
    const size_t ncases = sizeof cases / sizeof cases[0];
    const char *only = getenv("FT_BENCH_ONLY");
    size_t named = 0;
    for (size_t i = 0; i < ncases; i++) named += !only || !*only || strstr(cases[i].name, only);
    if (!named) {
        fprintf(stderr, "bench_ops: FT_BENCH_ONLY=%s names no case\n", only);
        MPI_Finalize();
        return 2;
    }
    printf("%-27s | %9s | %8s | %8s | %14s | %8s | %4s | %8s\n", "op", "ms/call", "TFLOP/s",
           "GB/s", "floor ms", "x floor", "/stp", "ms/step");
    double step = 0;
    for (size_t i = 0; i < ncases; i++)
        if (!only || !*only || strstr(cases[i].name, only)) run(&cases[i], &step);
    if (only && *only)
        printf("RESULT bench_ops %s: the cases with '%s' %.2f ms of a step\n", bf16 ? "bf16" : "fp32",
               only, step);
    else
        printf("RESULT bench_ops %s: a step's ops one after another %.2f ms (%.0f tok/s)\n",
               bf16 ? "bf16" : "fp32", step, (double)N / (step / 1e3));
    MPI_Finalize();
    return 0;
}

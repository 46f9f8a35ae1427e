/* fuzz_plan.c: libFuzzer target for DMR plan files (dmr.plan; make fuzz). The tapes are a small
 * GPT-2's (L 2, C 32, AC full) and its optimizer's; LLVMFuzzerInitialize writes a plan of them
 * (the planner on a synthetic profile with pipeline and other waits, so the seed has piggyback,
 * deferred, AGC and naive ops and windows of both kinds; and one per micro-batch, from a
 * sequence of two) into build/fuzz/corpus_plan/, where
 * `make fuzz` starts. Any bytes must be read as a plan or refused with one line that starts
 * with the file's name; never a crash, a leak or undefined behaviour. A plan that is read must
 * write and read back to the same plan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftllm/dmr_plan.h"
#include "ftllm/planner.h"
#include "ftllm/model.h"
#include "ftllm/optim.h"

static FtModel g_m;
static FtTape g_micro, g_opt;
static char g_in[64], g_out[64];
static const char *g_rank = "rank 0 of 1 layout tp=1 pp=1 dp=1 ep=1";

static void cleanup(void) { unlink(g_in), unlink(g_out); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FtGpt2Config mc = {.maxT = 16, .V = 64, .Vp = 64, .L = 2, .NH = 2, .C = 32};
    model_create(&g_m, &mc);
    FtTapeOpts o = {.B = 2, .T = 16, .ac = FT_AC_FULL, .backward = true, .loss_scale = 1.0};
    model_build_tape(&g_m, &o, &g_micro);
    optim_build_tape(&g_m, &g_opt);
    snprintf(g_in, sizeof g_in, "/tmp/fuzz_plan.%d.in", (int)getpid());
    snprintf(g_out, sizeof g_out, "/tmp/fuzz_plan.%d.out", (int)getpid());
    atexit(cleanup);
    /* the seed: the planner's plan of a synthetic profile */
    FtDmrProfile pf;
    int n = g_micro.ne + g_opt.ne;
    dmr_profile_init(&pf, g_micro.ne, g_opt.ne);
    pf.steps = 1, pf.step_s = 1.0, pf.wall_s = 1.0;
    for (int i = 0; i < n; i++) pf.time[i] = 1e-3 * (1 + i % 5), pf.fp[i] = 1e-5;
    pf.wait_pp[3] = 0.02, pf.wait_pp[g_micro.fwd_end + 2] = 0.05;
    pf.wait_other[g_micro.ne - 2] = 0.03;
    FtDmrEntryPlan p;
    char err[512];
    if (dmr_plan_build(&pf, &g_micro, &g_opt, 1 << 20, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3, &p))
        abort();
    mkdir("build/fuzz/corpus_plan", 0755);
    if (dmr_plan_write(&p, &g_micro, &g_opt, "build/fuzz/corpus_plan/seed", g_rank, err,
                       sizeof err))
        fprintf(stderr, "fuzz_plan: no seed written: %s\n", err);
    dmr_plan_free(&p);
    /* and a plan per micro-batch (version 2 with micro_batches 2): the same profile with its
     * sequence of two micro-batches, waits before some executions */
    int pos = 0;
    for (int mb = 0; mb < 2; mb++)
        for (int i = 0; i < g_micro.ne; i++)
            if (g_micro.e[i].kind != FT_OP_MARK)
                dmr_profile_seq(&pf, pos++, i, mb, i == 3 ? 0.01 * (mb + 1) : 0, i == 3 ? 0.01 : 0);
    for (int i = 0; i < g_opt.ne; i++)
        if (g_opt.e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, g_micro.ne + i, 0, 0, 0);
    dmr_profile_seq(&pf, pos, -1, 0, 0.02, 0);
    if (dmr_plan_build(&pf, &g_micro, &g_opt, 1 << 20, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3, &p))
        abort();
    if (dmr_plan_write(&p, &g_micro, &g_opt, "build/fuzz/corpus_plan/seed_mb2", g_rank, err,
                       sizeof err))
        fprintf(stderr, "fuzz_plan: no seed written: %s\n", err);
    dmr_plan_free(&p);
    dmr_profile_free(&pf);
    return 0;
}

static bool same(const FtDmrEntryPlan *a, const FtDmrEntryPlan *b)
{
    size_t n = (size_t)a->n, w = (size_t)a->nwin;
    return a->n == b->n && a->nwin == b->nwin && a->nseg == b->nseg && a->phases == b->phases &&
           !memcmp(a->strat, b->strat, n * sizeof *a->strat) &&
           !memcmp(a->seg, b->seg, n * sizeof *a->seg) &&
           !memcmp(a->window, b->window, n * sizeof *a->window) &&
           !memcmp(a->kept, b->kept, n * sizeof *a->kept) &&
           (!w || (!memcmp(a->win_after, b->win_after, w * sizeof *a->win_after) &&
                   !memcmp(a->win_kind, b->win_kind, w * sizeof *a->win_kind) &&
                   !memcmp(a->win_use, b->win_use, w * sizeof *a->win_use)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(g_in, "wb");
    if (!f) abort();
    fwrite(data, 1, size, f);
    fclose(f);
    FtDmrEntryPlan p, q;
    char err[1024] = "";
    int rc = dmr_plan_read(&p, &g_micro, &g_opt, g_in, g_rank, 0, err, sizeof err);
    if (rc) {
        if (strncmp(err, g_in, strlen(g_in)) || strchr(err, '\n')) abort();
        return 0;
    }
    if (dmr_plan_write(&p, &g_micro, &g_opt, g_out, g_rank, err, sizeof err)) abort();
    if (dmr_plan_read(&q, &g_micro, &g_opt, g_out, g_rank, 0, err, sizeof err)) {
        fprintf(stderr, "fuzz_plan: a plan read, written and read again was refused: %s\n", err);
        abort();
    }
    if (!same(&p, &q)) abort();
    dmr_plan_free(&p), dmr_plan_free(&q);
    return 0;
}

/* test_fault.c: the fault schedule (fault.h): every line kind, every class of bad line with its
 * exact one-line FILE:LINE message, the checks against a job, and the resolution of sdc-random
 * campaigns (reproducible, inside the job, never two flips in one execution); the collective
 * load gives every rank the same schedule or the same error.
 * ft-test: ranks 1 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/comm.h"
#include "ftllm/fault.h"

static FtFaultSchedule g_s;
static char g_err[1024];

static int parse(const char *text)
{
    g_err[0] = '\0';
    return fault_parse(&g_s, "t.faults", text, strlen(text), g_err, sizeof g_err);
}

/* The schedule fails with exactly the message want (one line). */
static void expect_error(const char *text, const char *want)
{
    int rc = parse(text);
    if (rc == 0 || strcmp(g_err, want))
        fprintf(stderr, "schedule:\n%s\n  got rc=%d err='%s'\n  want '%s'\n", text, rc, g_err, want);
    assert_int_equal(rc, -1);
    assert_string_equal(g_err, want);
    assert_int_equal(g_s.nev, 0);
}

static void test_good_lines(void **state)
{
    (void)state;
    const char *text = "; a fault schedule\n"
                       "\n"
                       "sdc step=3 rank=1 op=matmul:5 bit=30 elem=17 target=checker ; inline\n"
                       "  sdc\tbit=0 op=crossent rank=0 step=1   # fields in any order\r\n"
                       "sdc-random count=100 seed=7 steps=2-9 ranks=0,3 ops=gelu,adamw target=both\n"
                       "sdc-random count=1 seed=0\n"
                       "fail step=5 replica=1\n"
                       "fail step=6 rank=2";
    assert_int_equal(parse(text), 0);
    assert_int_equal(g_s.nev, 6);
    const FtFaultEvent *e = g_s.ev;
    assert_int_equal(e[0].kind, FT_FAULT_SDC);
    assert_int_equal(e[0].line, 3);
    assert_true(e[0].step == 3 && e[0].rank == 1 && e[0].op == FT_OP_MATMUL && e[0].nth == 5);
    assert_true(e[0].bit == 30 && e[0].elem == 17 && e[0].target == FT_TARGET_CHECKER);
    assert_int_equal(e[1].line, 4);
    assert_true(e[1].op == FT_OP_CROSSENT && e[1].nth == 0 && e[1].elem == -1 &&
                e[1].target == FT_TARGET_PRIMARY);
    assert_int_equal(e[2].kind, FT_FAULT_SDC_RANDOM);
    assert_true(e[2].count == 100 && e[2].seed == 7 && e[2].step_lo == 2 && e[2].step_hi == 9);
    assert_true(e[2].nranks == 2 && e[2].ranks[0] == 0 && e[2].ranks[1] == 3);
    assert_true(e[2].ops == ((1u << FT_OP_GELU) | (1u << FT_OP_ADAMW)) &&
                e[2].target == FT_TARGET_BOTH);
    assert_true(e[3].ranks == NULL && e[3].ops == 0 && e[3].step_lo == 0);
    assert_true(e[4].kind == FT_FAULT_FAIL && e[4].step == 5 && e[4].replica == 1 && e[4].rank == -1);
    assert_true(e[5].kind == FT_FAULT_FAIL && e[5].rank == 2 && e[5].replica == -1 && e[5].line == 8);
    assert_int_equal(fault_count(&g_s, FT_FAULT_FAIL), 2);
    assert_int_equal(fault_count(&g_s, FT_FAULT_SDC), 2);
    fault_free(&g_s);
    assert_int_equal(parse("; only comments\n# and blanks\n\n"), 0);
    assert_int_equal(g_s.nev, 0);
    fault_free(&g_s);
    assert_int_equal(parse(""), 0);
    fault_free(&g_s);
    /* every op kind by its table name */
    for (int k = 0; k < FT_OP_NKINDS; k++) {
        if (k == FT_OP_MARK) continue;
        assert_int_equal(fault_op_kind(ops_desc(k)->name), k);
    }
    assert_int_equal(fault_op_kind("mark"), -1);
}

static void test_bad_lines(void **state)
{
    (void)state;
    expect_error("\n\nsdcx step=1", "t.faults:3: unknown event 'sdcx' (did you mean 'sdc'?)");
    expect_error("boom", "t.faults:1: unknown event 'boom': expected sdc, sdc-random or fail");
    expect_error("sdc step=1 rank=0 op=matmul",
                 "t.faults:1: a sdc line needs bit= (sdc step=S rank=R op=NAME[:N] bit=B [elem=I] "
                 "[target=primary|checker])");
    expect_error("sdc rank=0 op=matmul bit=1", "t.faults:1: a sdc line needs step= (sdc step=S "
                 "rank=R op=NAME[:N] bit=B [elem=I] [target=primary|checker])");
    expect_error("sdc step=0 rank=0 op=matmul bit=1",
                 "t.faults:1: step=0 is out of range: expected an integer >= 1");
    expect_error("sdc step=x rank=0 op=matmul bit=1", "t.faults:1: step=x: expected an integer");
    expect_error("sdc step=1 rank=-2 op=matmul bit=1",
                 "t.faults:1: rank=-2 is out of range: expected an integer in [0..2147483647]");
    expect_error("sdc step=1 rank=0 op=matmull bit=1",
                 "t.faults:1: op=matmull: unknown op kind 'matmull' (did you mean 'matmul'?)");
    expect_error("sdc step=1 rank=0 op=xyz bit=1",
                 "t.faults:1: op=xyz: unknown op kind 'xyz'; op kinds: encoder layernorm matmul "
                 "attention gelu residual crossentropy lossmean gradnorm adamw moe_route "
                 "moe_dispatch moe_expert moe_combine");
    expect_error("sdc step=1 rank=0 op=matmul:x bit=1",
                 "t.faults:1: op=matmul:x: N must be an integer >= 0 (the N-th execution of matmul "
                 "in the step, from 0)");
    expect_error("sdc step=1 rank=0 op=matmul: bit=1",
                 "t.faults:1: op=matmul:: expected NAME:N with N an execution number from 0");
    expect_error("sdc step=1 rank=0 op=:3 bit=1", "t.faults:1: op=:3: expected NAME or NAME:N");
    expect_error("sdc step=1 rank=0 op=matmul bit=64",
                 "t.faults:1: bit=64 is out of range: expected an integer in [0..63]");
    expect_error("sdc step=1 rank=0 op=matmul bit=1 bits=2",
                 "t.faults:1: unknown field 'bits' in a sdc line (did you mean 'bit'?)");
    /* two swapped letters are one edit: 'po' is suggested 'op' (two substitutions would not be
     * fewer than its length) */
    expect_error("sdc step=1 rank=0 po=matmul bit=1",
                 "t.faults:1: unknown field 'po' in a sdc line (did you mean 'op'?)");
    expect_error("sdc step=1 rank=0 op=matmul bit=1 colour=red",
                 "t.faults:1: unknown field 'colour' in a sdc line (sdc step=S rank=R op=NAME[:N] "
                 "bit=B [elem=I] [target=primary|checker])");
    expect_error("sdc step=1 step=2 rank=0 op=matmul bit=1", "t.faults:1: step= is given twice");
    expect_error("sdc step=1 rank=0 op=matmul bit=1 target=both",
                 "t.faults:1: target=both: expected primary or checker");
    expect_error("sdc step= rank=0 op=matmul bit=1", "t.faults:1: step=: empty value");
    expect_error("sdc step=1 rank",
                 "t.faults:1: expected key=value, got 'rank' (sdc step=S rank=R op=NAME[:N] bit=B "
                 "[elem=I] [target=primary|checker])");
    expect_error("sdc step=1 rank=0 op=gelu bit=1 elem=4\nsdc step=1 rank=0 op=gelu bit=1 elem=4",
                 "t.faults:2: the same flip as line 1 (a bit flipped twice is unchanged)");
    expect_error("sdc-random seed=1",
                 "t.faults:1: a sdc-random line needs count= (sdc-random count=K seed=X "
                 "[steps=A-B] [ranks=R1,R2] [ops=NAME,NAME] [target=primary|checker|both])");
    expect_error("sdc-random count=0 seed=1",
                 "t.faults:1: count=0 is out of range: expected an integer in [1..1000000]");
    expect_error("sdc-random count=5 seed=1 steps=5-2",
                 "t.faults:1: steps=5-2: the first step is after the last");
    expect_error("sdc-random count=5 seed=1 steps=0-2",
                 "t.faults:1: steps=0-2: expected A-B with 1 <= A <= B");
    expect_error("sdc-random count=5 seed=1 steps=3-",
                 "t.faults:1: steps=3-: expected A-B (first and last step, from 1)");
    expect_error("sdc-random count=5 seed=1 ranks=0,0", "t.faults:1: ranks=0,0: rank 0 is listed twice");
    expect_error("sdc-random count=5 seed=1 ranks=0,,1",
                 "t.faults:1: ranks=0,,1: expected a comma-separated list of ranks");
    expect_error("sdc-random count=5 seed=1 ranks=0,a",
                 "t.faults:1: ranks=0,a: 'a' is not a rank (an integer >= 0)");
    expect_error("sdc-random count=5 seed=1 ops=gelu,gelu", "t.faults:1: ops=gelu,gelu: 'gelu' is listed twice");
    expect_error("sdc-random count=5 seed=1 ops=gelu,attn",
                 "t.faults:1: ops=gelu,attn: unknown op kind 'attn'; op kinds: encoder layernorm "
                 "matmul attention gelu residual crossentropy lossmean gradnorm adamw moe_route "
                 "moe_dispatch moe_expert moe_combine");
    expect_error("sdc-random count=5 seed=1 ops=lossmaen",
                 "t.faults:1: ops=lossmaen: unknown op kind 'lossmaen' (did you mean 'lossmean'?)");
    expect_error("sdc-random count=5 seed=1 target=any",
                 "t.faults:1: target=any: expected primary, checker or both");
    expect_error("sdc-random count=5 seed=1 step=4",
                 "t.faults:1: unknown field 'step' in a sdc-random line (did you mean 'steps'?)");
    expect_error("fail step=3",
                 "t.faults:1: a fail line needs replica=I (a whole replica) or rank=R (one rank)");
    expect_error("fail step=3 replica=0 rank=1", "t.faults:1: a fail line names replica= or rank=, not both");
    expect_error("fail replica=1", "t.faults:1: a fail line needs step= (fail step=S replica=I, or "
                 "fail step=S rank=R)");
    expect_error("fial step=1 rank=0", "t.faults:1: unknown event 'fial' (did you mean 'fail'?)");
    char nul[] = "sdc step=1\0 rank=0";
    assert_int_equal(fault_parse(&g_s, "t.faults", nul, sizeof nul - 1, g_err, sizeof g_err), -1);
    assert_string_equal(g_err, "t.faults:1: NUL byte in the fault schedule (is this a text file?)");
    char *lng = malloc(3000);
    memset(lng, ' ', 2999);
    memcpy(lng, "; x\nfail", 8);
    lng[2999] = '\0';
    expect_error(lng, "t.faults:2: line is longer than 1024 characters");
    /* the longest line accepted: 1024 characters (a comment here), then one more */
    lng[4] = ';';
    lng[4 + 1024] = '\0';
    assert_int_equal(parse(lng), 0);
    fault_free(&g_s);
    lng[4 + 1024] = ' ';
    lng[4 + 1025] = '\0';
    expect_error(lng, "t.faults:2: line is longer than 1024 characters");
    free(lng);
}

/* A job of two ranks: rank 0 runs matmul 10 times a step (outputs of up to 100 elements) and
 * gradnorm 3 times (one double), rank 1 matmul 4 times and gelu twice. */
static FtFaultOps g_ops[2];
static FtFaultJob job2(void)
{
    memset(g_ops, 0, sizeof g_ops);
    g_ops[0].count[FT_OP_MATMUL] = 10, g_ops[0].max_elems[FT_OP_MATMUL] = 100, g_ops[0].bits[FT_OP_MATMUL] = 32;
    g_ops[0].count[FT_OP_GRADNORM] = 3, g_ops[0].max_elems[FT_OP_GRADNORM] = 1, g_ops[0].bits[FT_OP_GRADNORM] = 64;
    g_ops[1].count[FT_OP_MATMUL] = 4, g_ops[1].max_elems[FT_OP_MATMUL] = 50, g_ops[1].bits[FT_OP_MATMUL] = 32;
    g_ops[1].count[FT_OP_GELU] = 2, g_ops[1].max_elems[FT_OP_GELU] = 64, g_ops[1].bits[FT_OP_GELU] = 32;
    return (FtFaultJob){.nranks = 2, .dp = 2, .steps = 20, .ops = g_ops, .seed = 1337};
}

static void expect_plan_error(const char *text, const char *want)
{
    assert_int_equal(parse(text), 0);
    FtFaultJob job = job2();
    FtFlip *f = (FtFlip *)1;
    int n = -1;
    char warn[64] = "x";
    int rc = fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, warn, sizeof warn);
    if (rc == 0 || strcmp(g_err, want))
        fprintf(stderr, "schedule:\n%s\n  got rc=%d err='%s'\n  want '%s'\n", text, rc, g_err, want);
    assert_int_equal(rc, -1);
    assert_string_equal(g_err, want);
    assert_true(f == NULL && n == 0 && warn[0] == '\0');
    fault_free(&g_s);
}

static void test_against_the_job(void **state)
{
    (void)state;
    expect_plan_error("\nsdc step=1 rank=2 op=matmul bit=1",
                      "t.faults:2: rank=2 is outside the job (2 ranks: 0..1)");
    expect_plan_error("sdc step=1 rank=0 op=moe_expert bit=1",
                      "t.faults:1: op=moe_expert: rank 0 runs no moe_expert in a training step of "
                      "this model and layout");
    expect_plan_error("sdc step=1 rank=1 op=matmul:4 bit=1",
                      "t.faults:1: op=matmul:4: rank 1 runs matmul 4 times a step (N = 0..3)");
    expect_plan_error("sdc step=1 rank=0 op=matmul bit=40",
                      "t.faults:1: bit=40: matmul outputs on rank 0 are 32-bit elements (bit 0..31)");
    expect_plan_error("sdc step=1 rank=0 op=matmul bit=32",
                      "t.faults:1: bit=32: matmul outputs on rank 0 are 32-bit elements (bit 0..31)");
    expect_plan_error("sdc step=1 rank=1 op=matmul bit=1 elem=50",
                      "t.faults:1: elem=50: no matmul execution on rank 1 has that many output "
                      "elements (at most 50)");
    expect_plan_error("fail step=2 replica=2",
                      "t.faults:1: replica=2 is outside the job (parallel.dp = 2: replicas 0..1)");
    expect_plan_error("fail step=2 rank=5", "t.faults:1: rank=5 is outside the job (2 ranks: 0..1)");
    expect_plan_error("fail step=22 rank=2", "t.faults:1: rank=2 is outside the job (2 ranks: 0..1)");
    expect_plan_error("sdc step=22 rank=0 op=matmul:10 bit=1",
                      "t.faults:1: op=matmul:10: rank 0 runs matmul 10 times a step (N = 0..9)");
    expect_plan_error("sdc-random count=3 seed=1 steps=1-21",
                      "t.faults:1: steps=1-21: the run's last step is 20 (train.steps)");
    expect_plan_error("sdc-random count=3 seed=1 ranks=0,2",
                      "t.faults:1: ranks=2 is outside the job (2 ranks: 0..1)");
    expect_plan_error("sdc-random count=3 seed=1 ops=gelu",
                      "t.faults:1: ops=: none of the listed op kinds runs on rank 0");
    expect_plan_error("sdc-random count=2 seed=1 steps=1-1 ranks=1 ops=gelu",
                      "t.faults:1: count=2: too many flips for the 2 op executions they may land on "
                      "(at most half of them)");
    expect_plan_error("sdc-random count=9 seed=1 steps=1-1 ranks=1 ops=gelu",
                      "t.faults:1: count=9: too many flips for the 2 op executions they may land on "
                      "(at most half of them)");
    /* a good schedule: a 64-bit flip of gradnorm, a fail line (checked, no flip) */
    assert_int_equal(parse("sdc step=1 rank=0 op=gradnorm:2 bit=63\nfail step=3 replica=1\n"
                           "sdc step=2 rank=1 op=gelu bit=5 target=checker\n"), 0);
    FtFaultJob job = job2();
    FtFlip *f;
    int n;
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), 0);
    assert_int_equal(n, 2);
    assert_true(f[0].line == 1 && f[0].op == FT_OP_GRADNORM && f[0].nth == 2 && f[0].bit == 63 &&
                f[0].elem == -1 && f[0].target == FT_TARGET_PRIMARY);
    assert_true(f[1].line == 3 && f[1].rank == 1 && f[1].target == FT_TARGET_CHECKER);
    FtFlip *g;
    int m;
    assert_int_equal(fault_plan(&g_s, &job, &g, &m, g_err, sizeof g_err, NULL, 0), 0);
    assert_true(m == n && f[0].elem_draw == g[0].elem_draw); /* the element stream is seeded */
    free(f), free(g);
    fault_free(&g_s);
    /* a kind that runs but writes no element (empty outputs on this rank) has nothing to flip */
    assert_int_equal(parse("sdc step=1 rank=1 op=lossmean bit=1\n"), 0);
    job = job2();
    g_ops[1].count[FT_OP_LOSSMEAN] = 2; /* max_elems and bits stay 0 */
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), -1);
    assert_string_equal(g_err, "t.faults:1: op=lossmean: rank 1 runs no lossmean in a training step "
                               "of this model and layout");
    fault_free(&g_s);
    assert_int_equal(parse("sdc-random count=1 seed=1 ranks=1 ops=lossmean\n"), 0);
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), -1);
    assert_string_equal(g_err, "t.faults:1: ops=: none of the listed op kinds runs on rank 1");
    fault_free(&g_s);
    assert_int_equal(parse("sdc-random count=12 seed=3 ranks=1\n"), 0); /* matmul and gelu only */
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), 0);
    assert_int_equal(n, 12);
    for (int i = 0; i < n; i++) assert_true(f[i].op == FT_OP_MATMUL || f[i].op == FT_OP_GELU);
    free(f);
    fault_free(&g_s);
    job = job2();
    /* the edges: the top bit, the last step, a campaign of exactly half its executions, and
     * two lines alike but for drawn elements (each line draws its own) are all planned */
    assert_int_equal(parse("sdc step=20 rank=0 op=matmul:9 bit=31\n"
                           "sdc-random count=1 seed=1 steps=1-1 ranks=1 ops=gelu\n"
                           "sdc step=3 rank=1 op=gelu bit=4\nsdc step=3 rank=1 op=gelu bit=4\n"), 0);
    char warn[256];
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, warn, sizeof warn), 0);
    assert_string_equal(warn, "");
    assert_int_equal(n, 4);
    assert_true(f[0].step == 20 && f[0].nth == 9 && f[0].bit == 31);
    assert_true(f[1].line == 2 && f[1].step == 1 && f[1].rank == 1 && f[1].op == FT_OP_GELU);
    assert_true(f[2].line == 3 && f[3].line == 4 && f[2].elem_draw != f[3].elem_draw);
    free(f);
    fault_free(&g_s);
    /* events after the run's last step: checked, left out, the first one named */
    assert_int_equal(parse("sdc step=2 rank=0 op=matmul bit=1\nsdc step=21 rank=0 op=matmul bit=1\n"
                           "fail step=30 rank=1\nsdc step=25 rank=1 op=gelu bit=2\n"), 0);
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, warn, sizeof warn), 0);
    assert_int_equal(n, 1);
    assert_int_equal(f[0].step, 2);
    assert_string_equal(warn, "t.faults:2: step=21 is after the run's last step (train.steps = "
                              "20): left out, and 2 more lines");
    free(f);
    fault_free(&g_s);
    assert_int_equal(parse("fail step=21 rank=1\nfail step=22 replica=1\nsdc-random count=2 seed=5 "
                           "steps=19-20\n"), 0);
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, warn, sizeof warn), 0);
    assert_int_equal(n, 2);
    assert_string_equal(warn, "t.faults:1: step=21 is after the run's last step (train.steps = "
                              "20): left out, and 1 more line");
    free(f);
    fault_free(&g_s);
    /* a run of no steps has nowhere to put a campaign */
    assert_int_equal(parse("sdc-random count=1 seed=5\n"), 0);
    job.steps = 0;
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), -1);
    assert_string_equal(g_err, "t.faults:1: sdc-random: the run has no steps (train.steps = 0)");
    job.steps = 20;
    fault_free(&g_s);
    assert_int_equal(parse("sdc step=2 rank=0 op=matmul bit=1\n"), 0);
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, warn, sizeof warn), 0);
    assert_string_equal(warn, "");
    free(f);
    fault_free(&g_s);
}

static void test_random_campaign(void **state)
{
    (void)state;
    FtFaultJob job = job2();
    assert_int_equal(parse("sdc step=4 rank=1 op=gelu:1 bit=2\n"
                           "sdc-random count=80 seed=42 steps=3-12 target=both\n"
                           "sdc-random count=20 seed=1 ranks=0 ops=gradnorm\n"), 0);
    FtFlip *f, *g;
    int n, m;
    assert_int_equal(fault_plan(&g_s, &job, &f, &n, g_err, sizeof g_err, NULL, 0), 0);
    assert_int_equal(fault_plan(&g_s, &job, &g, &m, g_err, sizeof g_err, NULL, 0), 0);
    assert_int_equal(n, 101);
    assert_int_equal(m, n);
    for (int i = 0; i < n; i++) /* reproducible */
        assert_true(f[i].step == g[i].step && f[i].rank == g[i].rank && f[i].op == g[i].op &&
                    f[i].nth == g[i].nth && f[i].bit == g[i].bit &&
                    f[i].elem_draw == g[i].elem_draw && f[i].target == g[i].target);
    int targets[2] = {0}, kinds[FT_OP_NKINDS] = {0};
    for (int i = 1; i < n; i++) {
        const FtFlip *x = &f[i];
        const FtFaultOps *o = &g_ops[x->rank];
        assert_true(x->rank >= 0 && x->rank < 2);
        assert_true(o->count[x->op] > 0 && x->nth >= 0 && x->nth < o->count[x->op]);
        assert_true(x->bit >= 0 && x->bit < o->bits[x->op] && x->elem == -1);
        if (i <= 80) {
            assert_true(x->step >= 3 && x->step <= 12 && x->line == 2);
            targets[x->target]++;
        } else {
            assert_true(x->rank == 0 && x->op == FT_OP_GRADNORM && x->line == 3 &&
                        x->target == FT_TARGET_PRIMARY && x->step >= 1 && x->step <= 20);
        }
        kinds[x->op]++;
        for (int j = 0; j < i; j++) /* never two flips in one execution */
            assert_false(f[j].step == x->step && f[j].rank == x->rank && f[j].op == x->op &&
                         f[j].nth == x->nth);
    }
    assert_true(targets[FT_TARGET_PRIMARY] > 20 && targets[FT_TARGET_CHECKER] > 20);
    assert_true(kinds[FT_OP_MATMUL] > 0 && kinds[FT_OP_GELU] > 0 && kinds[FT_OP_GRADNORM] > 20);
    free(f), free(g);
    fault_free(&g_s);
}

static void test_load(void **state)
{
    (void)state;
    char path[64];
    const char *text = "sdc step=1 rank=0 op=gelu bit=3\nsdc step=1 rank=0 op=gelu bit=99\n";
    ft_tmpfile(text, strlen(text), path);
    int rc = fault_load(&g_s, path, NULL, g_err, sizeof g_err); /* each rank reads it alone */
    MPI_Barrier(ft_test_comm());
    if (ft_test_rank() == 0) unlink(path);
    assert_int_equal(rc, -1);
    char want[256];
    snprintf(want, sizeof want, "%s:2: bit=99 is out of range: expected an integer in [0..63]", path);
    assert_string_equal(g_err, want);
    assert_int_equal(fault_load(&g_s, "nope.faults", NULL, g_err, sizeof g_err), -1);
    assert_string_equal(g_err, "nope.faults: cannot open the fault schedule: No such file or "
                               "directory (faults.schedule)");
    assert_int_equal(fault_load(&g_s, "/tmp", NULL, g_err, sizeof g_err), -1);
    assert_string_equal(g_err, "/tmp: cannot read the fault schedule (is it a directory?)");
}

/* The collective load: rank 0 reads, every rank gets the same events or the same one line. */
static void test_load_collective(void **state)
{
    (void)state;
    FtComm *world = comm_create_mpi_dup(ft_test_comm(), "world");
    char path[64];
    const char *good = "sdc step=2 rank=0 op=gelu:1 bit=7 elem=3\nsdc-random count=4 seed=9 "
                       "ranks=0 ops=matmul,gelu\nfail step=3 replica=0\n";
    ft_tmpfile(good, strlen(good), path);
    g_err[0] = '\0';
    int rc = fault_load(&g_s, path, world, g_err, sizeof g_err);
    if (rc) fprintf(stderr, "fault_load: %s\n", g_err);
    assert_all(rc == 0 && g_s.nev == 3);
    assert_all(g_s.ev[0].step == 2 && g_s.ev[0].op == FT_OP_GELU && g_s.ev[0].nth == 1 &&
               g_s.ev[0].bit == 7 && g_s.ev[0].elem == 3);
    assert_all(g_s.ev[1].count == 4 && g_s.ev[1].seed == 9 && g_s.ev[1].nranks == 1 &&
               g_s.ev[1].ops == ((1u << FT_OP_MATMUL) | (1u << FT_OP_GELU)));
    assert_all(g_s.ev[2].kind == FT_FAULT_FAIL && g_s.ev[2].replica == 0 && g_s.ev[2].line == 3);
    fault_free(&g_s);
    if (ft_test_rank() == 0) unlink(path);
    const char *bad = "; fine\nsdc step=1 rank=0 op=gelu bit=64\n";
    ft_tmpfile(bad, strlen(bad), path);
    rc = fault_load(&g_s, path, world, g_err, sizeof g_err);
    char want[128];
    snprintf(want, sizeof want, "%s:2: bit=64 is out of range: expected an integer in [0..63]", path);
    assert_all(rc == -1 && !strcmp(g_err, want) && g_s.nev == 0);
    if (ft_test_rank() == 0) unlink(path);
    rc = fault_load(&g_s, "/nonexistent/x.faults", world, g_err, sizeof g_err);
    assert_all(rc == -1 && !strcmp(g_err, "/nonexistent/x.faults: cannot open the fault schedule: "
                                          "No such file or directory (faults.schedule)"));
    ft_tmpfile("", 0, path); /* empty: no events */
    rc = fault_load(&g_s, path, world, g_err, sizeof g_err);
    assert_all(rc == 0 && g_s.nev == 0);
    if (ft_test_rank() == 0) unlink(path);
    comm_destroy(world);
}

FT_TEST_MAIN(cmocka_unit_test(test_good_lines), cmocka_unit_test(test_bad_lines),
             cmocka_unit_test(test_against_the_job), cmocka_unit_test(test_random_campaign),
             cmocka_unit_test(test_load), cmocka_unit_test(test_load_collective))

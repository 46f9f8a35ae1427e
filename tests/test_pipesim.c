/* test_pipesim.c: the pipeline's step under DMR plans, simulated, and the stages' plans refined
 * together (dmr_pipesim.h).
 *  - A two-stage pipeline by hand (one micro-batch: F, B on each stage): the step without
 *    checks, all naive, a deferred check replayed in the barrier, one replayed in a wait that
 *    overruns the message (the poll hook finishes the member it started) and one that fits.
 *  - An AGC unit is replayed only once its segment's last member ran; over the budget a
 *    deferred check is checked at once (demoted) and the peak stays within the budget; an AGC
 *    unit replayed at once over the budget frees its bytes once (a later check is demoted).
 *  - Random 1F1B pipelines (2-4 stages, 1-5 micro-batches, 1-3 executions per part, an
 *    optimizer after): without checks, and all naive, the simulated step equals an independent
 *    recursion over the stages' schedules (each part starts at the later of its stage's end and
 *    its message); under random strategies and budgets every stage ends no earlier than its
 *    work (each check done once), a single stage without waits exactly at it, the peak within
 *    the budget.
 *  - The pipeline's bound (dmr_pipe_bound) never above a simulated step, 8 on the hand
 *    pipeline (b's earliest start, 4, then b and its check).
 *  - Groups first where single flips do not fit the budget: an op's two executions deferred
 *    together in one move (8.2 s, where one flip gets 9.1).
 *  - A group move once single flips converge: two tied ends, each shortened by one execution
 *    of the same op alone (no gain), both by the two together (6.5 s for 7).
 *  - The refinement: on the hand pipeline from all naive it finds the best of the 16
 *    assignments (8.3, by hand); on random pipelines (each part's k-th execution a group, as an
 *    op entry's executions over the micro-batches are) it never ends worse than it started,
 *    changes only the slots that may flip, ends where no group move and no single flip helps,
 *    and gives the same answer twice. Packing round-trips; unpacking refuses what is not a stage.
 * ft-test: ranks 1 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/pipeline.h"
#include "ftllm/planner.h"

enum { MAXN = 256 };

/* A stage as a test writes it: slot k is execution k. */
typedef struct spec {
    int stage, P, n, last;
    double budget;
    int hops_only;
    int recv[MAXN], send[MAXN], strat[MAXN], seg[MAXN], flip[MAXN], group[MAXN];
    double dur[MAXN], lat[MAXN], wait[MAXN + 1], chk[MAXN], keep[MAXN], inl[MAXN], kept[MAXN];
} Spec;

static void spec_init(Spec *s, int stage, int P, int n)
{
    memset(s, 0, sizeof *s);
    s->stage = stage, s->P = P, s->n = n, s->last = n - 1, s->budget = 1e18;
    for (int k = 0; k < n; k++)
        s->recv[k] = s->send[k] = s->seg[k] = s->group[k] = -1, s->strat[k] = PLAN_NAIVE;
}

/* The stage through its packed form (dmr_pipe_rank_unpack). */
static void mk(const Spec *s, FtPipeRank *r)
{
    size_t len = 6 + 6 * (size_t)s->n + 1 + 8 * (size_t)s->n;
    double *b = calloc(len, sizeof *b), *q = b;
    *q++ = s->stage, *q++ = s->P, *q++ = s->n, *q++ = s->n, *q++ = s->last, *q++ = s->budget;
    for (int k = 0; k < s->n; k++)
        *q++ = k, *q++ = s->recv[k], *q++ = s->send[k], *q++ = s->dur[k], *q++ = s->wait[k],
        *q++ = s->lat[k];
    *q++ = s->wait[s->n];
    for (int k = 0; k < s->n; k++)
        *q++ = s->strat[k], *q++ = s->seg[k], *q++ = s->flip[k], *q++ = s->chk[k], *q++ = s->keep[k],
        *q++ = s->inl[k], *q++ = s->kept[k], *q++ = s->group[k];
    assert_int_equal(dmr_pipe_rank_unpack(b, len, r), 0);
    free(b);
}

/* Stage 0: a (F, 1 s) sends message 0, b (B, 2 s) waits for message 1; stage 1: c (F, 1 s)
 * waits for message 0, d (B, 2 s) sends message 1. Checker time = the op's, flippable. */
static void hand(Spec *s)
{
    for (int q = 0; q < 2; q++) {
        spec_init(&s[q], q, 2, 2);
        s[q].dur[0] = s[q].chk[0] = 1, s[q].dur[1] = s[q].chk[1] = 2;
        s[q].flip[0] = s[q].flip[1] = 1;
    }
    s[0].send[0] = 0, s[0].recv[1] = 1;
    s[1].recv[0] = 0, s[1].send[1] = 1;
}

static double sim_of(Spec *s, int P, FtPipeResult *res)
{
    FtPipeRank r[4];
    for (int q = 0; q < P; q++) mk(&s[q], &r[q]), r[q].hops_only = s[q].hops_only;
    FtPipeResult x = dmr_pipe_sim(r, P);
    for (int q = 0; q < P; q++) dmr_pipe_rank_free(&r[q]);
    assert_true(x.ok);
    if (res) *res = x;
    return x.step;
}

static double bound_of(Spec *s, int P)
{
    FtPipeRank r[4];
    for (int q = 0; q < P; q++) mk(&s[q], &r[q]);
    double b = dmr_pipe_bound(r, P);
    for (int q = 0; q < P; q++) dmr_pipe_rank_free(&r[q]);
    return b;
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-12)

static void test_hand_pipeline(void **state)
{
    (void)state;
    Spec s[2];
    hand(s);
    for (int q = 0; q < 2; q++) s[q].strat[0] = s[q].strat[1] = -1;
    NEAR(sim_of(s, 2, NULL), 6); /* a 0-1, c 1-2, d 2-4, b 4-6 */
    hand(s);
    NEAR(sim_of(s, 2, NULL), 12); /* every op twice at once */
    /* d deferred (bookkeeping 0.1): its grad leaves at 6.1, b ends at 10.1; d's check replays
     * in stage 1's barrier wait (6.1 to 10.1) */
    hand(s);
    s[1].strat[1] = PLAN_DEFERRED, s[1].keep[1] = 0.1;
    NEAR(sim_of(s, 2, NULL), 10.1);
    /* a deferred with a 10 s check: stage 0 waits from 1 for the grad (sent at 7) and replays
     * it; the member started runs to its end (11), so b runs 11-15 */
    hand(s);
    s[0].strat[0] = PLAN_DEFERRED, s[0].chk[0] = 10;
    NEAR(sim_of(s, 2, NULL), 15);
    s[0].chk[0] = 5; /* fits: 1-6, the grad at 7, b 7-11 */
    NEAR(sim_of(s, 2, NULL), 11);
    /* transfer times: the activation arrives 0.5 s after a's end, the gradient 0.25 s after
     * d's: a 0-1, c 1.5-2.5, d 2.5-4.5, b 4.75-6.75; all naive: a 0-2, c 2.5-4.5, d 4.5-8.5,
     * b 8.75-12.75 */
    hand(s);
    s[0].lat[0] = 0.5, s[1].lat[1] = 0.25;
    NEAR(sim_of(s, 2, NULL), 12.75);
    NEAR(bound_of(s, 2), 8.75); /* b from its start without checks (4.75), with its check */
    for (int q = 0; q < 2; q++) s[q].strat[0] = s[q].strat[1] = -1;
    NEAR(sim_of(s, 2, NULL), 6.75);
    /* hops_only (the paper's windows): d deferred replays neither in stage 1's barrier wait nor
     * at the meeting: the barrier at 10.1, then the drain 10.1-12.1 */
    hand(s);
    s[1].strat[1] = PLAN_DEFERRED, s[1].keep[1] = 0.1, s[1].hops_only = 1;
    NEAR(sim_of(s, 2, NULL), 12.1);
    /* a deferred (5 s) on stage 0, the rest naive: no replay in its wait for the gradient
     * (sent at 7, no transfer time): b 7-11 with its check, the meeting at 11, the drain to 16
     * (11 in every wait: the existing case above); with a 1 s transfer the replay starts in it
     * (from 1; the member runs to 6), the gradient arrives at 8, b 8-12 */
    hand(s);
    s[0].strat[0] = PLAN_DEFERRED, s[0].chk[0] = 5, s[0].hops_only = 1;
    NEAR(sim_of(s, 2, NULL), 16);
    s[1].lat[1] = 1;
    NEAR(sim_of(s, 2, NULL), 12);
    s[0].hops_only = 0; /* every wait: the same here (the replay fits before the arrival) */
    NEAR(sim_of(s, 2, NULL), 12);
}

static void test_units_and_budget(void **state)
{
    (void)state;
    /* one stage: a, b an AGC segment (b its last member), a 5 s wait between them, c no
     * check: the unit is not replayed in the wait (incomplete), but at the drain: 1+5+1+1+2 */
    Spec s;
    spec_init(&s, 0, 1, 3);
    for (int k = 0; k < 3; k++) s.dur[k] = 1, s.chk[k] = 1;
    s.strat[0] = s.strat[1] = PLAN_AGC, s.seg[0] = s.seg[1] = 0, s.strat[2] = -1;
    s.wait[1] = 5;
    FtPipeResult x;
    NEAR(sim_of(&s, 1, &x), 10);
    /* the same wait after b: the whole unit replays in it (2 to 4 of 2 to 7), c 7-8 */
    s.wait[1] = 0, s.wait[2] = 5;
    NEAR(sim_of(&s, 1, &x), 8);
    /* two deferred checks of 100 bytes each, budget 150: the second at once */
    spec_init(&s, 0, 1, 2);
    for (int k = 0; k < 2; k++) s.dur[k] = s.chk[k] = 1, s.strat[k] = PLAN_DEFERRED, s.kept[k] = 100;
    s.budget = 150;
    NEAR(sim_of(&s, 1, &x), 4);
    assert_true(x.demoted == 1 && x.peak == 100);
    s.budget = 200;
    NEAR(sim_of(&s, 1, &x), 4);
    assert_true(x.demoted == 0 && x.peak == 200);
    /* an AGC segment a, b (100 bytes kept at each end), then deferred c, d (100 each), budget
     * 150: b would hold 200, so the unit replays at once and b is checked at once; the unit's
     * 100 bytes are freed once (c kept, d over the budget again): two demoted, the peak 100 */
    spec_init(&s, 0, 1, 4);
    for (int k = 0; k < 4; k++) s.dur[k] = s.chk[k] = 1, s.kept[k] = 100;
    s.strat[0] = s.strat[1] = PLAN_AGC, s.seg[0] = s.seg[1] = 0;
    s.strat[2] = s.strat[3] = PLAN_DEFERRED;
    s.budget = 150;
    NEAR(sim_of(&s, 1, &x), 8);
    assert_int_equal(x.demoted, 2);
    assert_true(x.peak == 100);
}

/* ---- random pipelines ---------------------------------------------------------------------- */

static unsigned g_seed = 12345;
static double urand(void)
{
    g_seed = g_seed * 1103515245u + 12345u;
    return ((g_seed >> 8) & 0xffff) / 65536.0;
}

/* Per stage, per schedule op: its executions [first, first + cnt). */
typedef struct pipe {
    int P, M;
    Spec s[4];
    FtPipeOp ops[4][16];
    int first[4][16], cnt[4][16], nopt[4];
} Pipe;

static void random_pipe(Pipe *p, int P, int M)
{
    memset(p, 0, sizeof *p);
    p->P = P, p->M = M;
    for (int q = 0; q < P; q++) {
        pipeline_schedule(FT_PIPE_1F1B, P, q, M, 0, p->ops[q]);
        int n = 0;
        for (int o = 0; o < 2 * M; o++) p->first[q][o] = n, n += p->cnt[q][o] = 1 + (int)(3 * urand());
        int last = n - 1;
        p->nopt[q] = 1 + (int)(2 * urand());
        n += p->nopt[q];
        Spec *s = &p->s[q];
        spec_init(s, q, P, n);
        s->last = last;
        for (int k = 0; k < n; k++) {
            s->dur[k] = 0.5 + urand(), s->chk[k] = 0.5 + urand(), s->keep[k] = 0.1 * urand();
            s->kept[k] = 1 + (int)(100 * urand()), s->flip[k] = k <= last;
        }
        for (int o = 0; o < 2 * M; o++) {
            FtPipeOp op = p->ops[q][o];
            int a = p->first[q][o], z = a + p->cnt[q][o] - 1, m = op.mb;
            for (int k = a; k <= z; k++) s->group[k] = (op.fwd ? 0 : 3) + k - a; /* an "entry" */
            if (op.fwd) {
                if (q > 0) s->recv[a] = (2 * m) * P + q - 1;
                if (q < P - 1) s->send[z] = (2 * m) * P + q, s->lat[z] = 0.3 * urand();
            } else {
                if (q < P - 1) s->recv[a] = (2 * m + 1) * P + q + 1;
                if (q > 0) s->send[z] = (2 * m + 1) * P + q, s->lat[z] = 0.3 * urand();
            }
        }
    }
}

/* The oracle: each schedule op starts at the later of its stage's end and its message's
 * arrival (its send's end and transfer time) and takes its executions' time (naive: twice, as chk is set); then every stage
 * meets the latest, runs its optimizer. */
static double oracle(const Pipe *p, bool naive)
{
    double t[4] = {0}, sent[2 * 16 * 4 + 8];
    for (int i = 0; i < (int)(sizeof sent / sizeof *sent); i++) sent[i] = -1;
    int pos[4] = {0}, left = 2 * p->M * p->P;
    while (left) {
        int moved = 0;
        for (int q = 0; q < p->P; q++) {
            if (pos[q] == 2 * p->M) continue;
            int o = pos[q], a = p->first[q][o], z = a + p->cnt[q][o] - 1;
            const Spec *s = &p->s[q];
            if (s->recv[a] >= 0 && sent[s->recv[a]] < 0) continue;
            if (s->recv[a] >= 0 && sent[s->recv[a]] > t[q]) t[q] = sent[s->recv[a]];
            for (int k = a; k <= z; k++) t[q] += s->dur[k] + (naive ? s->chk[k] : 0);
            if (s->send[z] >= 0) sent[s->send[z]] = t[q] + s->lat[z];
            pos[q]++, left--, moved = 1;
        }
        assert_true(moved);
    }
    double T = 0, end = 0;
    for (int q = 0; q < p->P; q++) T = fmax(T, t[q]);
    for (int q = 0; q < p->P; q++) {
        double e = T;
        for (int k = p->s[q].last + 1; k < p->s[q].n; k++)
            e += p->s[q].dur[k] + (naive ? p->s[q].chk[k] : 0);
        end = fmax(end, e);
    }
    return end;
}

static void test_random_pipelines(void **state)
{
    (void)state;
    Pipe *p = malloc(sizeof *p);
    int runs = 0;
    for (int P = 1; P <= 4; P++)
        for (int M = 1; M <= 5; M++)
            for (int rep = 0; rep < 4; rep++, runs++) {
                random_pipe(p, P, M);
                for (int q = 0; q < P; q++)
                    for (int k = 0; k < p->s[q].n; k++) p->s[q].strat[k] = -1;
                FtPipeResult x;
                double off = sim_of(p->s, P, &x);
                assert_true(fabs(off - oracle(p, false)) < 1e-9 * off);
                for (int q = 0; q < P; q++)
                    for (int k = 0; k < p->s[q].n; k++) p->s[q].strat[k] = PLAN_NAIVE;
                double naive = sim_of(p->s, P, &x);
                assert_true(fabs(naive - oracle(p, true)) < 1e-9 * naive);
                /* random strategies and budget: each stage's end at least its work */
                double budget = 50 + 400 * urand();
                for (int q = 0; q < P; q++) {
                    Spec *s = &p->s[q];
                    s->budget = budget;
                    for (int k = 0; k < s->n; k++) {
                        double u = urand();
                        s->strat[k] = k > s->last || u < 0.3 ? PLAN_NAIVE
                                      : u < 0.8           ? PLAN_DEFERRED
                                                          : PLAN_PIGGYBACK;
                        s->inl[k] = s->strat[k] == PLAN_PIGGYBACK ? 0.05 : 0;
                    }
                }
                double step = sim_of(p->s, P, &x);
                assert_true(x.peak <= budget && step >= off - 1e-9);
                assert_true(bound_of(p->s, P) <= step * (1 + 1e-12));
                for (int q = 0; q < P; q++) {
                    const Spec *s = &p->s[q];
                    double work = 0, keep = 0;
                    for (int k = 0; k < s->n; k++) {
                        work += s->dur[k] + (s->strat[k] == PLAN_NAIVE      ? s->chk[k]
                                             : s->strat[k] == PLAN_DEFERRED ? s->chk[k] + s->keep[k]
                                                                            : s->inl[k]);
                        keep += s->strat[k] == PLAN_DEFERRED ? s->keep[k] : 0;
                    }
                    /* every check once; a demoted one keeps nothing (its bookkeeping saved) */
                    assert_true(x.end[q] >= work - keep - 1e-9);
                    if (P == 1) /* no waits: exactly its work, less what demotions saved */
                        assert_true(x.end[q] <= work + 1e-9 && (x.demoted || x.end[q] >= work - 1e-9));
                }
            }
    free(p);
    assert_true(runs == 80);
}

/* ---- the refinement ------------------------------------------------------------------------ */

static void test_refine_hand(void **state)
{
    (void)state;
    Spec s[2];
    hand(s);
    for (int q = 0; q < 2; q++) s[q].keep[0] = s[q].keep[1] = 0.1;
    double best = INFINITY;
    for (int mask = 0; mask < 16; mask++) { /* every assignment of the four */
        for (int b = 0; b < 4; b++) s[b / 2].strat[b % 2] = mask >> b & 1 ? PLAN_DEFERRED : PLAN_NAIVE;
        best = fmin(best, sim_of(s, 2, NULL));
    }
    NEAR(best, 8.3);
    for (int b = 0; b < 4; b++) s[b / 2].strat[b % 2] = PLAN_NAIVE;
    FtPipeRank r[2];
    for (int q = 0; q < 2; q++) mk(&s[q], &r[q]);
    FtPipeRefine rf;
    dmr_pipe_refine(r, 2, 100000, &rf);
    NEAR(rf.start.step, 12), NEAR(rf.best.step, best), NEAR(rf.off.step, 6), NEAR(rf.naive.step, 12);
    NEAR(rf.bound, 8); /* stage 0 from b's earliest start (4): b and its check, 4 s */
    NEAR(dmr_pipe_sim(r, 2).step, best); /* r holds the strategies it found */
    assert_true(rf.flips == 3 && rf.best.demoted == 0);
    assert_true(r[0].strat[0] == PLAN_DEFERRED && r[0].strat[1] == PLAN_NAIVE &&
                r[1].strat[0] == PLAN_DEFERRED && r[1].strat[1] == PLAN_DEFERRED);
    for (int q = 0; q < 2; q++) dmr_pipe_rank_free(&r[q]);
}

/* Where a pass of single flips does not fit the budget, an op's executions move together
 * first: one stage, x1 and x2 one op (a group), a 5 s wait before x3. With room for one
 * simulation after the four the refinement starts with, the group move takes both: 8.2 s (one
 * flip alone would give 9.1, nothing 10). */
static void test_refine_groups_first(void **state)
{
    (void)state;
    Spec s;
    spec_init(&s, 0, 1, 3);
    for (int k = 0; k < 3; k++) s.dur[k] = 1, s.chk[k] = 1, s.keep[k] = 0.1;
    s.flip[0] = s.flip[1] = 1, s.group[0] = s.group[1] = 0, s.strat[2] = -1, s.wait[2] = 5;
    FtPipeRank r;
    mk(&s, &r);
    FtPipeRefine rf;
    dmr_pipe_refine(&r, 1, 5, &rf);
    NEAR(rf.start.step, 10), NEAR(rf.best.step, 8.2);
    assert_true(rf.evals == 5 && rf.flips == 2);
    assert_true(r.strat[0] == PLAN_DEFERRED && r.strat[1] == PLAN_DEFERRED);
    dmr_pipe_rank_free(&r);
}

/* Where no single flip helps but an op's executions together do: three stages, stage 1 runs
 * w, then x0 (its output to stage 2, whose y ends the step) and, after a late activation, x1 (its
 * output to stage 0, whose d ends the step too). Deferring x0 alone or x1 alone shortens one of
 * the two tied ends: no gain; both (x0 and x1 one op, a group) 6.5 s instead of 7. Deferring w
 * (100 bytes, budget 50) would demote it, so the all-deferred start is refused (a demotion the
 * stages' own plans do not have): only the group move, once single flips converge, finds 6.5. */
static void test_refine_group_escape(void **state)
{
    (void)state;
    Spec s[3];
    spec_init(&s[0], 0, 3, 3), spec_init(&s[1], 1, 3, 3), spec_init(&s[2], 2, 3, 1);
    for (int k = 0; k < 3; k++) s[0].strat[k] = -1; /* stage 0: a, b, d, no checks */
    s[0].dur[0] = 1, s[0].send[0] = 0, s[0].dur[1] = 3, s[0].send[1] = 1;
    s[0].dur[2] = 1, s[0].recv[2] = 3;
    s[2].strat[0] = -1, s[2].dur[0] = 3.8, s[2].recv[0] = 2; /* stage 2: y */
    Spec *t = &s[1]; /* stage 1: w, x0, x1 */
    t->budget = 50;
    t->dur[0] = t->chk[0] = 0.1, t->keep[0] = 0.05, t->kept[0] = 100, t->recv[0] = 0;
    t->dur[1] = t->chk[1] = 1, t->keep[1] = 0.5, t->kept[1] = 10, t->send[1] = 2;
    t->dur[2] = t->chk[2] = 1, t->keep[2] = 0.5, t->kept[2] = 10, t->recv[2] = 1, t->send[2] = 3;
    for (int k = 0; k < 3; k++) t->flip[k] = 1;
    t->group[1] = t->group[2] = 7;
    NEAR(sim_of(s, 3, NULL), 7);
    FtPipeRank r[3];
    for (int q = 0; q < 3; q++) mk(&s[q], &r[q]);
    FtPipeRefine rf;
    dmr_pipe_refine(r, 3, 1000000, &rf);
    NEAR(rf.start.step, 7), NEAR(rf.best.step, 6.5);
    assert_true(rf.best.demoted == 0 && rf.flips == 2 && r[1].strat[0] == PLAN_NAIVE &&
                r[1].strat[1] == PLAN_DEFERRED && r[1].strat[2] == PLAN_DEFERRED);
    for (int q = 0; q < 3; q++) dmr_pipe_rank_free(&r[q]);
}

static void test_refine_random(void **state)
{
    (void)state;
    Pipe *p = malloc(sizeof *p);
    for (int tight = 0; tight < 2; tight++) /* a budget so small that groups move first */
    for (int P = 2; P <= 4; P++)
        for (int M = 1; M <= 4; M++) {
            random_pipe(p, P, M);
            FtPipeRank r[4], r2[4];
            int *start[4];
            for (int q = 0; q < P; q++) {
                Spec *s = &p->s[q];
                s->budget = 40 + 200 * urand();
                for (int k = 0; k < s->n; k++) {
                    s->strat[k] = urand() < 0.5 ? PLAN_NAIVE : PLAN_DEFERRED;
                    if (k > s->last) s->strat[k] = PLAN_NAIVE;
                    if (urand() < 0.2) s->flip[k] = 0; /* some may not move */
                }
                mk(s, &r[q]), mk(s, &r2[q]);
                start[q] = malloc(sizeof(int) * (size_t)s->n);
                memcpy(start[q], r[q].strat, sizeof(int) * (size_t)s->n);
            }
            FtPipeRefine rf, rf2;
            long long flippable = 0;
            for (int q = 0; q < P; q++)
                for (int k = 0; k < r[q].n; k++) flippable += r[q].flip[k];
            long long cap = tight ? 12 * flippable - 1 : 1000000;
            dmr_pipe_refine(r, P, cap, &rf);
            dmr_pipe_refine(r2, P, cap, &rf2);
            assert_true(rf.start.ok && rf.best.step <= rf.start.step && rf.best.demoted <= rf.start.demoted);
            /* the pipeline's bound: below both, above the step without checks */
            assert_true(rf.bound >= rf.off.step && rf.bound <= rf.best.step * (1 + 1e-12));
            assert_true(rf.evals <= cap && rf.best.step == rf2.best.step && rf.flips == rf2.flips);
            assert_true(tight || rf.evals < cap); /* converged: the checks below hold */
            int changed = 0;
            for (int q = 0; q < P; q++)
                for (int k = 0; k < r[q].n; k++) {
                    assert_true(r[q].strat[k] == r2[q].strat[k]);
                    if (r[q].strat[k] != start[q][k]) assert_true(r[q].flip[k]), changed++;
                }
            assert_true(changed == rf.flips);
            if (rf.evals >= cap) { /* stopped by the cap: not a local optimum */
                for (int q = 0; q < P; q++) dmr_pipe_rank_free(&r[q]), dmr_pipe_rank_free(&r2[q]), free(start[q]);
                continue;
            }
            /* no group move makes it shorter without more demotions (the search's: every
             * flippable slot of a group to deferred when one is naive, else to naive) */
            for (int q = 0; q < P; q++)
                for (int g = 0; g < 6; g++) {
                    int to = PLAN_NAIVE, n = 0, was[MAXN];
                    for (int k = 0; k < r[q].n; k++)
                        if (r[q].group[k] == g && r[q].flip[k]) n++, to = r[q].strat[k] == PLAN_NAIVE ? PLAN_DEFERRED : to;
                    if (n < 2) continue;
                    for (int k = 0; k < r[q].n; k++)
                        if (r[q].group[k] == g && r[q].flip[k]) was[k] = r[q].strat[k], r[q].strat[k] = to;
                    FtPipeResult x = dmr_pipe_sim(r, P);
                    assert_true(!(x.step < rf.best.step * (1 - 1e-9) && x.demoted <= rf.best.demoted));
                    for (int k = 0; k < r[q].n; k++)
                        if (r[q].group[k] == g && r[q].flip[k]) r[q].strat[k] = was[k];
                }
            /* no single flip makes it shorter without more demotions */
            for (int q = 0; q < P; q++)
                for (int k = 0; k < r[q].n; k++) {
                    if (!r[q].flip[k]) continue;
                    int was = r[q].strat[k];
                    r[q].strat[k] = was == PLAN_NAIVE ? PLAN_DEFERRED : PLAN_NAIVE;
                    FtPipeResult x = dmr_pipe_sim(r, P);
                    assert_true(!(x.step < rf.best.step * (1 - 1e-9) && x.demoted <= rf.best.demoted));
                    r[q].strat[k] = was;
                }
            for (int q = 0; q < P; q++) dmr_pipe_rank_free(&r[q]), dmr_pipe_rank_free(&r2[q]), free(start[q]);
        }
    free(p);
}

static void test_pack(void **state)
{
    (void)state;
    Pipe *p = malloc(sizeof *p);
    random_pipe(p, 3, 2);
    FtPipeRank r, back;
    mk(&p->s[1], &r);
    double *buf;
    size_t len = dmr_pipe_rank_pack(&r, &buf);
    assert_int_equal(dmr_pipe_rank_unpack(buf, len, &back), 0);
    double *buf2;
    size_t len2 = dmr_pipe_rank_pack(&back, &buf2);
    assert_true(len2 == len && !memcmp(buf, buf2, len * sizeof *buf));
    dmr_pipe_rank_free(&back);
    assert_int_equal(dmr_pipe_rank_unpack(buf, len - 1, &back), -1); /* short */
    double keep = buf[0];
    buf[0] = 3; /* stage 3 of 3 */
    assert_int_equal(dmr_pipe_rank_unpack(buf, len, &back), -1);
    buf[0] = keep;
    buf[6] = 0.5; /* execution 0's slot */
    assert_int_equal(dmr_pipe_rank_unpack(buf, len, &back), -1);
    buf[6] = 0;
    buf[6 + 6 * r.n + 1] = 7; /* slot 0's strategy */
    assert_int_equal(dmr_pipe_rank_unpack(buf, len, &back), -1);
    buf[6 + 6 * r.n + 1] = PLAN_NAIVE;
    buf[6 + 5] = -1; /* execution 0's latency */
    assert_int_equal(dmr_pipe_rank_unpack(buf, len, &back), -1);
    assert_true(back.n == 0 && back.slot == NULL);
    free(buf), free(buf2);
    dmr_pipe_rank_free(&r);
    free(p);
}

FT_TEST_MAIN(cmocka_unit_test(test_hand_pipeline), cmocka_unit_test(test_units_and_budget),
             cmocka_unit_test(test_random_pipelines), cmocka_unit_test(test_refine_hand),
             cmocka_unit_test(test_refine_groups_first), cmocka_unit_test(test_refine_group_escape),
             cmocka_unit_test(test_refine_random),
             cmocka_unit_test(test_pack))

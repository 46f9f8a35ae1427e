/* test_dmr.c: DMR catches every injected bit flip and a rolled-back step leaves no trace.
 *
 * ft-test: ranks 1 2 4
 *
 * A flip campaign: seeded sdc-random schedules (half the flips on the primary's output, half on
 * the checker's) over every op kind, in the forward, backward, AC recomputation and optimizer,
 * with naive and piggyback DMR, on one rank (dense with AC every 2 blocks, MoE with AC full) and
 * on two (tp2, pp2 1F1B, dp2, MoE ep2), through the same set-up `ftllm train` uses
 * (train_dmr_setup). Every flip must be detected and its step redone, and the run must end with
 * parameters and both AdamW moments bitwise equal to the fault-free run without DMR. Clean runs
 * (no faults) with each mode check at least 10,000 op executions without one mismatch and end
 * bitwise where DMR off ends. Mode planned: campaigns with phases 1 / 1,2 / 1,2,3 on every
 * layout (deferred checks and AGC segment replays really run, within dmr.deferred_mb, and every
 * flip is caught), clean runs planned from a real profile (AC on and off) bitwise equal to DMR
 * off with every op covered once, and the plan file read back as written. The dynamic planner
 * (dmr.moe_dynamic) on the MoE layouts: a flip campaign on the expert ops all caught, expert
 * checks deferred within its guard, and all naive (still caught) with a tiny budget.
 * A rank that keeps mismatching is reported suspect on every rank.
 * A replica that leaves mid-run (train_regrid) leaves DMR working on the survivors.
 * The edges the mutation run (tests/mutants/dmr.md) found untested: every execution checked
 * exactly once (piggyback ops replayed in an AGC segment too); dmr.deferred_mb inclusive to the
 * byte; the profile's length and its sorting of pipeline waits from the others; queued checks
 * replayed by the poll hook; the dynamic guard when the static plan reserves the budget, and the
 * job's slack the tightest rank's; plan build windows (place, kind, scaled length), every
 * plan-file field read back, and the reader's refusals; flips of steps before the run's start,
 * flips that cancel (missed, yet rolled back). And those tests/mutants/plan_pool_select.md
 * found: the end waits of each kind (before the optimizer, the tail) and the scaling of
 * pre_bwd_s and order_s; PP windows of the block before them holding AGC segments, whose
 * costs add up and whose plan (two segments, a window after -1, phases 1,2) reads back; the
 * reader's order and twin checks; the pool inclusive of the budget; dmr.leftovers = end
 * leaving the optimizer's and integer-writing checks naive. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/pipeline.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"
#include "ftllm/train_dmr.h"

#include "../src/ft/dmr_impl.h"

static int g_dims[2];

typedef struct layout {
    const char *name;
    int tp, pp, dp, ep, experts, ac;
} Layout;

static const Layout g_layouts[] = {
    {"dense", 1, 1, 1, 1, 0, FT_AC_CHOICE_EVERY},
    {"moe", 1, 1, 1, 1, 4, FT_AC_CHOICE_FULL},
    {"tp2", 2, 1, 1, 1, 0, FT_AC_CHOICE_EVERY},
    {"pp2", 1, 2, 1, 1, 0, FT_AC_CHOICE_FULL},
    {"dp2", 1, 1, 2, 1, 0, FT_AC_CHOICE_EVERY},
    {"ep2", 1, 1, 1, 2, 4, FT_AC_CHOICE_FULL},
    {"tp2pp2", 2, 2, 1, 1, 0, FT_AC_CHOICE_FULL}, /* the paper's layout, small: 4 ranks */
    {"ep2pp2", 1, 2, 1, 2, 4, FT_AC_CHOICE_FULL},
};
#define NLAYOUTS ((int)(sizeof g_layouts / sizeof g_layouts[0]))

static FtConfig cfg_of(const Layout *l, int mode, long long steps)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 4, c.model.heads = 4, c.model.channels = 32, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 8;
    c.train.batch = 2, c.train.steps = steps, c.train.lr = 1e-2, c.train.warmup = 1;
    c.train.val_batches = 0, c.train.ac = l->ac, c.train.ac_every = 2;
    c.parallel.tp = l->tp, c.parallel.pp = l->pp, c.parallel.dp = l->dp, c.parallel.ep = l->ep;
    c.parallel.microbatches = 2, c.parallel.bucket_mb = 0.01;
    c.model.experts = l->experts, c.model.top_k = 2, c.model.capacity_factor = 1.0;
    c.model.aux_loss_coef = 0.01;
    c.dmr.mode = mode;
    c.dmr.suspect_after = 0;
    g_dims[0] = (int)c.model.seq_len, g_dims[1] = (int)c.model.vocab;
    return c;
}

/* A plan whose shape depends on the tapes alone, not on this machine's speed (mode planned,
 * for the campaigns): a profile where op entry i takes (1 + i % 5) ms and a 1 s wait follows
 * every communication point (a pipeline send or receive: a PP window; a tensor-parallel
 * all-reduce, an expert all-to-all, a layer's gradients ready: intra) and the backward (the
 * data-parallel reduction), planned with dmr_plan_build. */
static void synthetic_plan(const FtTrainer *tr, int phases, size_t budget, bool moe_dynamic,
                           FtDmrEntryPlan *p)
{
    const FtTape *mt = &tr->tape, *ot = &tr->opt_tape;
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 1, pf.step_s = 1.0, pf.moe_dynamic = moe_dynamic;
    for (int i = 0; i < mt->ne + ot->ne; i++) {
        const FtTapeEntry *e = i < mt->ne ? &mt->e[i] : &ot->e[i - mt->ne];
        pf.time[i] = 1e-3 * (1 + i % 5);
        pf.copy[i] = 1e-4 * (i % 3), pf.fp[i] = 1e-4; /* bookkeeping: below every op's time */
        if (e->kind != FT_OP_MARK) continue;
        if (e->mark == FT_MARK_PP_RECV || e->mark == FT_MARK_PP_SEND) pf.wait_pp[i + 1] = 1.0;
        else if (e->mark == FT_MARK_COMM_TP || e->mark == FT_MARK_COMM_GRADS ||
                 e->mark == FT_MARK_EP_TO_EXPERTS || e->mark == FT_MARK_EP_TO_SOURCES)
            pf.wait_other[i + 1] = 1.0;
    }
    pf.wait_other[mt->ne] = 1.0;
    pf.pre_bwd_s = 0.5;
    assert_int_equal(dmr_plan_build(&pf, mt, ot, budget, phases, p), 0);
    dmr_profile_free(&pf);
}

/* The entry of plan slot s (dmr_plan.h), its tape and micro-batch. */
static const FtTapeEntry *slot_entry(const FtTrainer *tr, const FtDmrEntryPlan *p, int s,
                                     const FtTape **tp, int *m)
{
    int i = dmr_plan_entry(p, s, m);
    *tp = i < tr->tape.ne ? &tr->tape : &tr->opt_tape;
    return &(*tp)->e[i < tr->tape.ne ? i : i - tr->tape.ne];
}

/* Executions per step that slot s of plan p stands for, M micro-batches a step. */
static int slot_runs(const FtTrainer *tr, const FtDmrEntryPlan *p, int s, int M)
{
    int m, i = dmr_plan_entry(p, s, &m);
    return i >= tr->tape.ne || p->ninst > 1 ? 1 : M;
}

/* Every AGC segment is a run of one block's ops inside one execution of one tape (dmr_defer.c's
 * units are built on that): its members share the tape and the micro-batch, and on the
 * micro-batch tape the layer. */
static bool plan_segments_local(const FtTrainer *tr, const FtDmrEntryPlan *p)
{
    for (int g = 0; g < p->nseg; g++) {
        const FtTape *tp0 = NULL;
        int m0 = -1, layer0 = 0;
        for (int i = 0; i < p->n; i++) {
            if (p->seg[i] != g) continue;
            const FtTape *tp;
            int m;
            const FtTapeEntry *e = slot_entry(tr, p, i, &tp, &m);
            if (!tp0) tp0 = tp, m0 = m, layer0 = e->layer;
            else if (tp != tp0 || m != m0 || (tp == &tr->tape && e->layer != layer0)) return false;
        }
    }
    return true;
}

/* Every op execution of the tapes has exactly one strategy, markers none (on every rank); a
 * plan made from a profile has a slot per micro-batch (M). */
static bool plan_covers(const FtTrainer *tr, const FtDmrEntryPlan *p)
{
    const FtTape *mt = &tr->tape, *ot = &tr->opt_tape;
    bool ok = p && p->n == (p->ninst > 1 ? p->ninst : 1) * mt->ne + ot->ne;
    for (int i = 0; ok && i < p->n; i++) {
        const FtTape *tp;
        int m;
        const FtTapeEntry *e = slot_entry(tr, p, i, &tp, &m);
        ok = e->kind == FT_OP_MARK ? p->strat[i] == -1 : p->strat[i] >= PLAN_PIGGYBACK &&
                                                              p->strat[i] <= PLAN_AGC;
    }
    return ok && plan_segments_local(tr, p);
}

static int phase_mask(long long choice)
{
    return choice == FT_DMR_PHASES_1 ? PLAN_PHASE1 : choice == FT_DMR_PHASES_12
           ? PLAN_PHASE1 | PLAN_PHASE2 : PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3;
}

static bool g_synthetic; /* mode planned: train_layout gives the run synthetic_plan's plan */
static bool g_covered;   /* mode planned: the plan in use covered every op (set by train_layout) */
static int g_dyn_left;   /* ... and left this many expert entries without an AC twin naive (the
                            dynamic planner's, dmr.moe_dynamic), on every rank */

/* Expert entries without an AC twin the plan leaves naive, or -1 when one is planned otherwise. */
static int dyn_left(const FtTrainer *tr, const FtDmrEntryPlan *p)
{
    int n = 0;
    for (int i = 0; p && i < p->n; i++) {
        const FtTape *tp;
        int m;
        const FtTapeEntry *e = slot_entry(tr, p, i, &tp, &m);
        if (tp != &tr->tape || e->kind != FT_OP_MOE_EXPERT || e->twin >= 0) continue;
        if (p->strat[i] != PLAN_NAIVE) return -1;
        n++;
    }
    return n;
}

/* mode planned: when set, train_layout's synthetic plan goes through it before the run */
static void (*g_plan_edit)(const FtTrainer *tr, FtDmrEntryPlan *p);

static const FtBatchSource *g_source; /* run_open's batch source (NULL: ft_synth_fetch) */
static bool g_no_windows; /* run_open: no poll hook (deferred checks replay at the drain only) */
static bool g_with_val;               /* run_open: the same source for validation too */

/* A trainer with DMR and faults from c (schedule: the fault file's text or NULL) on its grid. */
typedef struct run {
    FtGrid g;
    FtTrainer tr;
    FtTrainDmr *td;
} Run;

static void run_open(Run *r, FtConfig *c, const char *schedule, FtModel *m)
{
    int np = (int)(c->parallel.tp * c->parallel.pp * c->parallel.dp * c->parallel.ep);
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_check(c, np, err, sizeof err), 0);
    assert_int_equal(grid_create(&r->g, ft_test_comm(), (int)c->parallel.tp, (int)c->parallel.pp,
                                 (int)c->parallel.dp, (int)c->parallel.ep, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = r->g.tp, .tp_rank = r->g.tp_rank, .pp = r->g.pp, .pp_rank = r->g.pp_rank,
                  .ep = r->g.ep, .ep_rank = r->g.ep_rank};
    model_create_sharded(m, &mc, &sh);
    model_init_random(m, 7);
    FtBatchSource src = g_source ? *g_source : (FtBatchSource){ft_synth_fetch, g_dims};
    train_init_grid(&r->tr, c, m, &r->g, &src, g_with_val ? &src : NULL);
    char path[64] = "";
    if (schedule) {
        ft_tmpfile(schedule, strlen(schedule), path);
        snprintf(c->faults.schedule, sizeof c->faults.schedule, "%s", path);
    }
    r->td = NULL;
    int rc = train_dmr_setup(&r->td, &r->tr, c, err, sizeof err);
    if (rc && ft_test_rank() == 0) fprintf(stderr, "train_dmr_setup: %s\n", err);
    assert_all(rc == 0);
    if (path[0] && ft_test_rank() == 0) unlink(path);
    c->faults.schedule[0] = '\0';
    if (c->dmr.mode == FT_DMR_PLANNED && g_synthetic) {
        FtDmrEntryPlan p;
        synthetic_plan(&r->tr, phase_mask(c->dmr.phases), (size_t)(c->dmr.deferred_mb * 1048576.0),
                       c->dmr.moe_dynamic, &p);
        if (g_plan_edit) g_plan_edit(&r->tr, &p);
        dmr_set_plan(train_dmr_get(r->td), &p);
    }
    if (g_no_windows) r->tr.ex.poll = (FtPoll){0};
}

static FtDmrStats g_mine; /* this rank's counters of the last run (run_close) */

/* The job's DMR counters in *st (zero without DMR; this rank's in g_mine); frees all but the
 * model. */
static void run_close(Run *r, FtDmrStats *st)
{
    memset(st, 0, sizeof *st);
    memset(&g_mine, 0, sizeof g_mine);
    if (r->td) train_dmr_stats(r->td, st), dmr_stats(train_dmr_get(r->td), &g_mine);
    train_dmr_destroy(r->td);
    train_free(&r->tr);
    grid_destroy(&r->g);
}

/* Checks of one attempt on this rank under plan p (NULL: none), M micro-batches: every
 * execution of an op entry that writes something counts once, a piggybacked forward op and its
 * recomputation once together (at the recomputation). */
static long long checked_per_attempt(const FtTrainer *tr, const FtDmrEntryPlan *p, int M)
{
    if (!p) return -1;
    long long n = 0;
    for (int i = 0; i < p->n; i++) {
        const FtTape *tp;
        int m;
        const FtTapeEntry *e = slot_entry(tr, p, i, &tp, &m);
        bool writes = false;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) writes |= e->out[k] >= 0 && tp->t[e->out[k]].n > 0;
        if (e->kind == FT_OP_MARK || !writes) continue;
        if (p->strat[i] == PLAN_PIGGYBACK && dmr_entry_piggyback(tp, e) &&
            e->phase != FT_PH_RECOMPUTE)
            continue; /* its twin's check */
        n += slot_runs(tr, p, i, M);
    }
    return n;
}

/* Naive checks of one attempt on this rank under plan p with dmr.leftovers = end: of the
 * entries p leaves naive, only those on the optimizer's tape and those writing integers. */
static long long naive_left_per_attempt(const FtTrainer *tr, const FtDmrEntryPlan *p, int M)
{
    if (!p) return -1;
    long long n = 0;
    for (int i = 0; i < p->n; i++) {
        const FtTape *tp;
        int m;
        const FtTapeEntry *e = slot_entry(tr, p, i, &tp, &m);
        bool writes = false;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) writes |= e->out[k] >= 0 && tp->t[e->out[k]].n > 0;
        if (e->kind == FT_OP_MARK || !writes || p->strat[i] != PLAN_NAIVE) continue;
        if (tp == &tr->opt_tape || !dmr_entry_deferrable(tp, e)) n += slot_runs(tr, p, i, M);
    }
    return n;
}

/* AGC units (one segment's members in one execution of their tape) of one attempt on this
 * rank under plan p: each segment once per execution of its slots (M on the micro-batch tape
 * of a plan per entry). */
static long long agc_units_per_attempt(const FtTrainer *tr, const FtDmrEntryPlan *p, int M)
{
    if (!p) return -1;
    long long n = 0;
    for (int g = 0; g < p->nseg; g++)
        for (int i = 0; i < p->n; i++)
            if (p->seg[i] == g) { /* its first member: the segment's runs */
                n += slot_runs(tr, p, i, M);
                break;
            }
    return n;
}

static long long g_per_attempt; /* mode planned: checked_per_attempt of the run's plan */
static long long g_agc_units;   /* ... and agc_units_per_attempt */
static long long g_naive_left;  /* ... and naive_left_per_attempt */
static bool g_ordered; /* mode planned: every rank's plan has its time-order bound (a plan
                          from the profile: has_order), not below issue 10's */

/* Trains c's steps (DMR and faults from c; schedule: the fault file's text or NULL), leaves
 * the model in *m (caller frees) and the job's DMR counters in *st (zero without DMR). */
static bool g_refined;    /* mode planned: the stages refined their plans together (g_rf) */
static FtPipeRefine g_rf;
static int g_my_deferred, g_stage; /* this rank's deferred slots as it ran, its stage */
static unsigned long long g_my_sig;  /* ... and its plan's strategies (dmr_pipe_sig) */
static int g_peer;                   /* its place among its stage's tp x ep peers */
static int g_tp_same, g_tp_apart;    /* micro-batch executions whose strategy and AGC segment
                                        are its stage's first peer's (tp and ep rank 0); of the
                                        others, those both ran naive or deferred (choices the
                                        refinement gives every peer) */
static int g_tp_micro;               /* its micro-batch executions */

static void train_layout(FtConfig *c, const char *schedule, FtModel *m, FtDmrStats *st)
{
    Run r;
    run_open(&r, c, schedule, m);
    for (long long s = 0; s < c->train.steps; s++) {
        FtStepInfo info;
        assert_all(train_step(&r.tr, &info) != FT_STEP_FAILED);
    }
    if (c->dmr.mode == FT_DMR_PLANNED) {
        g_per_attempt = checked_per_attempt(&r.tr, dmr_plan(train_dmr_get(r.td)),
                                            (int)c->parallel.microbatches);
        g_naive_left = naive_left_per_attempt(&r.tr, dmr_plan(train_dmr_get(r.td)),
                                              (int)c->parallel.microbatches);
        g_agc_units = agc_units_per_attempt(&r.tr, dmr_plan(train_dmr_get(r.td)),
                                            (int)c->parallel.microbatches);
        g_covered = ft_all(plan_covers(&r.tr, dmr_plan(train_dmr_get(r.td))) ? 1 : 0) == 1;
        const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(r.td));
        double ob = 0, lb = p ? dmr_plan_bounds(p, p->step_s, &ob) : 0;
        g_ordered = ft_all(p && p->has_order && ob >= lb && ob <= 1e3 ? 1 : 0) == 1;
        int left = dyn_left(&r.tr, dmr_plan(train_dmr_get(r.td)));
        g_dyn_left = ft_all(left > 0 ? 1 : 0) == 1 ? left : -1;
        const FtPipeRefine *rf = train_dmr_refined(r.td);
        g_refined = rf != NULL;
        if (rf) memcpy(&g_rf, rf, sizeof g_rf); /* its bytes, padding too (compared below) */
        g_my_deferred = 0; /* this rank's plan as it runs: its stage's part of the answer */
        for (int i = 0; p && i < p->n; i++) g_my_deferred += p->strat[i] == PLAN_DEFERRED;
        g_my_sig = p ? dmr_pipe_sig(p->strat, p->n) : 0;
        g_stage = r.g.pp_rank, g_peer = r.g.ep_rank * r.g.tp + r.g.tp_rank;
        g_tp_same = g_tp_apart = 0;
        int M = p ? p->ninst * p->nmicro : 0, *root = calloc(2 * (size_t)M + 1, sizeof *root);
        assert_non_null(root);
        g_tp_micro = M;
        if (p && r.g.tp * r.g.ep > 1) { /* its stage's first peer's micro-batch strategies */
            MPI_Comm pc;
            MPI_Comm_split(r.g.replica_comm, r.g.pp_rank, g_peer, &pc);
            memcpy(root, p->strat, (size_t)M * sizeof *root);
            memcpy(root + M, p->seg, (size_t)M * sizeof *root);
            MPI_Bcast(root, 2 * M, MPI_INT, 0, pc);
            MPI_Comm_free(&pc);
            for (int i = 0; i < M; i++) {
                bool nd = (p->strat[i] == PLAN_NAIVE || p->strat[i] == PLAN_DEFERRED) &&
                          (root[i] == PLAN_NAIVE || root[i] == PLAN_DEFERRED);
                bool same = p->strat[i] == root[i] && p->seg[i] == root[M + i];
                g_tp_same += same, g_tp_apart += !same && nd;
            }
        }
        free(root);
    }
    run_close(&r, st);
}

/* One rank's trainer for c (pp, tp, dp, ep 1; no DMR installed): the plan tests' tapes. */
static void plan_trainer(FtConfig *c, FtGrid *g, FtModel *m, FtTrainer *tr)
{
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(grid_create(g, ft_test_comm(), 1, 1, 1, 1, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    model_create(m, &mc);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    train_init_grid(tr, c, m, g, &src, NULL);
}

/* Parameters and both moments equal, bitwise, on every rank. */
static int same_state(const FtModel *a, const FtModel *b)
{
    return a->step == b->step && a->nparams == b->nparams &&
           !memcmp(a->params, b->params, sizeof(float) * a->nparams) &&
           !memcmp(a->m, b->m, sizeof(float) * a->nparams) &&
           !memcmp(a->v, b->v, sizeof(float) * a->nparams);
}

static bool runs_here(const Layout *l)
{
    return l->tp * l->pp * l->dp * l->ep == ft_test_size();
}

/* The first layout without experts that runs on this rank count, or NULL. */
static const Layout *dense_here(void)
{
    for (int li = 0; li < NLAYOUTS; li++)
        if (runs_here(&g_layouts[li]) && !g_layouts[li].experts) return &g_layouts[li];
    return NULL;
}

/* ---- the campaign -------------------------------------------------------------------------- */

enum { CAMPAIGN_STEPS = 200 }; /* about one flip a step: some steps none, some several */

static void test_flip_campaign(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    FtDmrStats tot = {0};
    long long configs = 0;
    bool moe = false;
    for (int li = 0; li < NLAYOUTS; li++) {
        const Layout *l = &g_layouts[li];
        if (!runs_here(l)) continue;
        FtConfig c0 = cfg_of(l, FT_DMR_OFF, CAMPAIGN_STEPS);
        FtModel ref;
        FtDmrStats none;
        train_layout(&c0, NULL, &ref, &none);
        for (int mode = FT_DMR_NAIVE; mode <= FT_DMR_PIGGYBACK; mode++) {
            /* one rank: 2 layouts x 2 modes x 260 flips; two ranks: 4 x 2 x 130; four: 2 x 2 x 260 */
            int here = 0;
            for (int k = 0; k < NLAYOUTS; k++) here += runs_here(&g_layouts[k]);
            int count = (1040 + 2 * here - 1) / (2 * here);
            char text[256];
            snprintf(text, sizeof text,
                     "; campaign: %s, %s\nsdc-random count=%d seed=%d steps=1-%d target=both\n",
                     l->name, dmr_mode_name(mode), count, 1000 + 10 * li + mode, CAMPAIGN_STEPS);
            FtConfig c = cfg_of(l, mode, CAMPAIGN_STEPS);
            FtModel m;
            FtDmrStats s;
            train_layout(&c, text, &m, &s);
            if (ft_test_rank() == 0)
                printf("  %-5s %-9s: %lld flips injected, %lld detected, %lld missed, %lld of "
                       "%lld attempts redone, %lld checks (naive %lld, piggyback %lld)\n",
                       l->name, dmr_mode_name(mode), s.injected, s.detected, s.missed, s.redone,
                       s.attempts, s.checks[0] + s.checks[1], s.checks[0], s.checks[1]);
            assert_all(s.injected == count && s.not_fired == 0);
            assert_all(s.detected == s.injected && s.missed == 0 && s.rolled_back == s.injected);
            assert_all(s.redone > 0 && s.attempts == CAMPAIGN_STEPS + s.redone);
            assert_all(s.unchecked == 0);
            if (mode == FT_DMR_PIGGYBACK) assert_all(s.checks[FT_DMR_S_PIGGYBACK] > 0);
            assert_all(same_state(&m, &ref));
            model_free(&m);
            for (int k = 0; k < FT_OP_NKINDS; k++)
                for (int p = 0; p < 3; p++) tot.injected_at[k][p] += s.injected_at[k][p];
            for (int a = 0; a <= FT_DMR_NSTRAT; a++)
                for (int t = 0; t < 2; t++) tot.injected_by[a][t] += s.injected_by[a][t];
            tot.injected += s.injected;
            configs++;
        }
        moe |= l->experts > 0;
        model_free(&ref);
    }
    if (!configs) skip();
    if (ft_test_rank() == 0) printf("  campaign: %lld flips, all detected and rolled back\n", tot.injected);
    assert_all(tot.injected >= 1000);
    /* every op kind (the MoE kinds where a MoE layout ran), every phase, strategy and target */
    long long ph[3] = {0};
    for (int k = 0; k < FT_OP_NKINDS; k++) {
        if (k == FT_OP_MARK) continue;
        bool is_moe = k >= FT_OP_MOE_ROUTE && k <= FT_OP_MOE_COMBINE;
        long long n = 0;
        for (int p = 0; p < 3; p++) n += tot.injected_at[k][p], ph[p] += tot.injected_at[k][p];
        if (!is_moe || moe) {
            if (n == 0 && ft_test_rank() == 0) fprintf(stderr, "no flip in %s\n", ops_desc(k)->name);
            assert_all(n > 0);
        }
    }
    assert_all(ph[FT_PH_FWD] > 0 && ph[FT_PH_BWD] > 0 && ph[FT_PH_RECOMPUTE] > 0);
    assert_all(tot.injected_at[FT_OP_ADAMW][FT_PH_FWD] > 0 &&
               tot.injected_at[FT_OP_GRADNORM][FT_PH_FWD] > 0);
    for (int a = FT_DMR_S_NAIVE; a <= FT_DMR_S_PIGGYBACK; a++)
        for (int t = 0; t < 2; t++) assert_all(tot.injected_by[a][t] > 0);
}

/* ---- clean runs ---------------------------------------------------------------------------- */

static void test_clean_runs_match_off(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    long long checks = 0;
    int runs = 0;
    for (int li = 0; li < NLAYOUTS; li++) {
        const Layout *l = &g_layouts[li];
        if (!runs_here(l)) continue;
        FtConfig c0 = cfg_of(l, FT_DMR_OFF, 12);
        FtModel ref;
        FtDmrStats s0;
        train_layout(&c0, NULL, &ref, &s0);
        for (int mode = FT_DMR_NAIVE; mode <= FT_DMR_PIGGYBACK; mode++) {
            FtConfig c = cfg_of(l, mode, 12);
            FtModel m;
            FtDmrStats s;
            train_layout(&c, NULL, &m, &s);
            assert_all(s.mismatches == 0 && s.redone == 0 && s.unchecked == 0);
            assert_all(s.attempts == 12);
            assert_all(same_state(&m, &ref));
            checks += s.checks[0] + s.checks[1];
            model_free(&m);
            runs++;
        }
        model_free(&ref);
    }
    if (!runs) skip();
    if (ft_test_rank() == 0) printf("  %lld clean checked executions, no mismatch\n", checks);
    assert_all(checks >= 10000);
}


/* A validation pass between steps is not DMR's: its forward ops are neither checked nor
 * counted, whichever mode (naive, piggyback): a run with two validation batches after every
 * step makes the same checks and ends in the same state as the run without them. */
static void test_validation_unchecked(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    const Layout *l = dense_here();
    if (!l) skip();
    for (int mode = FT_DMR_NAIVE; mode <= FT_DMR_PIGGYBACK; mode++) {
        FtModel m[2];
        FtDmrStats s[2];
        for (int v = 0; v < 2; v++) {
            FtConfig c = cfg_of(l, mode, 3);
            c.train.val_batches = 2;
            g_with_val = v;
            Run r;
            run_open(&r, &c, NULL, &m[v]);
            g_with_val = false;
            for (int k = 0; k < 3; k++) {
                FtStepInfo info;
                assert_all(train_step(&r.tr, &info) == FT_STEP_OK);
                if (v) train_eval(&r.tr, 2);
            }
            run_close(&r, &s[v]);
        }
        assert_all(s[1].attempts == 3 && s[1].mismatches == 0 && s[1].unchecked == 0);
        assert_all(s[1].checks[FT_DMR_S_NAIVE] == s[0].checks[FT_DMR_S_NAIVE] &&
                   s[1].checks[FT_DMR_S_PIGGYBACK] == s[0].checks[FT_DMR_S_PIGGYBACK]);
        assert_all(same_state(&m[0], &m[1]));
        model_free(&m[0]), model_free(&m[1]);
    }
}

/* ---- mode planned ---------------------------------------------------------------------------- */

enum { PLANNED_STEPS = 60, PLANNED_FLIPS = 60 };
#define PLANNED_BUDGET_MB 0.05 /* small enough that some deferred checks do not fit */

static long long g_split_def, g_split_agc; /* plan_per_microbatch: deferred and AGC checks an
                                              attempt makes under the plan it made (this rank) */

static unsigned g_split_mask; /* plan_split: the micro-batches that keep the entry's deferral */

/* A plan with a slot per micro-batch (dmr_plan.h) from a one-slot-per-entry plan: every
 * micro-batch's slots as the entry's, except that the micro-batches not in g_split_mask check
 * naively what the entry defers, and each micro-batch's AGC segments are segments of their own. */
static void plan_split(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    int M = tr->micro, nm = p->nmicro, nseg = p->nseg;
    assert_true(p->ninst <= 1 && M >= 2 && p->n == nm + p->nopt);
    FtDmrEntryPlan q = *p;
    q.ninst = M, q.n = M * nm + p->nopt, q.nseg = M * nseg, q.pos = NULL; /* instance-major */
    size_t n = (size_t)q.n;
    q.strat = malloc(n * sizeof *q.strat), q.seg = malloc(n * sizeof *q.seg);
    q.window = malloc(n * sizeof *q.window), q.time = malloc(n * sizeof *q.time);
    q.kept = malloc(n * sizeof *q.kept), q.cost = malloc(n * sizeof *q.cost);
    assert_true(q.strat && q.seg && q.window && q.time && q.kept && q.cost);
    g_split_def = g_split_agc = 0;
    for (int s = 0; s < q.n; s++) {
        int m, i = dmr_plan_entry(&q, s, &m);
        q.strat[s] = p->strat[i], q.seg[s] = p->seg[i], q.window[s] = p->window[i];
        q.kept[s] = p->kept[i];
        q.time[s] = i < nm ? p->time[i] / M : p->time[i];
        q.cost[s] = i < nm ? p->cost[i] / M : p->cost[i];
        if (i < nm && !(g_split_mask >> m & 1) && q.strat[s] == PLAN_DEFERRED)
            q.strat[s] = PLAN_NAIVE, q.window[s] = -1, q.cost[s] = q.time[s];
        if (i < nm && q.seg[s] >= 0) q.seg[s] += m * nseg;
        const FtTape *tp;
        int mm;
        const FtTapeEntry *e = slot_entry(tr, &q, s, &tp, &mm);
        bool writes = false;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) writes |= e->out[k] >= 0 && tp->t[e->out[k]].n > 0;
        g_split_def += writes && q.strat[s] == PLAN_DEFERRED;
        g_split_agc += writes && q.strat[s] == PLAN_AGC;
    }
    free(p->strat), free(p->seg), free(p->window), free(p->time), free(p->kept), free(p->cost);
    free(p->pos);
    *p = q;
}

/* plan_split with the even micro-batches deferring: the odd ones check naively what the entry
 * defers. The runtime must look each execution up by its micro-batch: by entry alone the odd
 * ones would defer too. */
static void plan_per_microbatch(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    g_split_mask = 0x55555555u;
    plan_split(tr, p);
}

/* Campaigns with dmr.mode = planned, phases 1 / 1,2 / 1,2,3 and 1,2,3 with dmr.leftovers = end
 * (the checks the plan leaves naive deferred as well, but the optimizer's and those of ops
 * writing integers), on every layout of this rank count
 * (synthetic_plan's plan: its shape does not depend on this machine's speed): every flip
 * detected and rolled back, the run ending bitwise where the fault-free run without DMR ends;
 * deferred checks run wherever phase 3 is on, AGC segments replay on the pipeline (whose PP
 * windows Phase 2 takes); the plan covers every op once and what the deferred checks kept never
 * passed dmr.deferred_mb; the job's peaks (kept, held with the pool) are the largest rank's.
 * And phases 1,2,3 with a strategy per micro-batch (plan_per_microbatch; room for every check):
 * each micro-batch's executions checked as its slots say (deferred and AGC checks counted). */
static void test_planned_campaign(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    long long configs = 0, deferred = 0, agc = 0, flips = 0;
    g_synthetic = true, g_plan_edit = NULL; /* not what a failed test left */
    for (int li = 0; li < NLAYOUTS; li++) {
        const Layout *l = &g_layouts[li];
        if (!runs_here(l)) continue;
        FtConfig c0 = cfg_of(l, FT_DMR_OFF, PLANNED_STEPS);
        FtModel ref;
        FtDmrStats none;
        train_layout(&c0, NULL, &ref, &none);
        double deferred_123 = 0, naive_123 = 0; /* per attempt, phases 1,2,3 */
        for (int v = 0; v < 5; v++) { /* phases 1, 1,2, 1,2,3, 1,2,3 with leftovers = end, and
                                         1,2,3 per micro-batch */
            int ph = v < 3 ? FT_DMR_PHASES_1 + v : FT_DMR_PHASES_123;
            bool left = v == 3, split = v == 4;
            char text[256];
            snprintf(text, sizeof text, "; planned campaign: %s, phases %d%s\nsdc-random "
                     "count=%d seed=%d steps=1-%d target=both\n", l->name, ph,
                     left ? ", leftovers end" : split ? ", per micro-batch" : "", PLANNED_FLIPS,
                     2000 + 10 * li + v, PLANNED_STEPS);
            FtConfig c = cfg_of(l, FT_DMR_PLANNED, PLANNED_STEPS);
            c.dmr.phases = ph, c.dmr.deferred_mb = PLANNED_BUDGET_MB;
            c.dmr.leftovers = left ? FT_DMR_LEFT_END : FT_DMR_LEFT_NAIVE;
            if (left || split) c.dmr.deferred_mb = 256; /* room for every leftover: its path is
                                                           tested; every check as planned */
            g_plan_edit = split ? plan_per_microbatch : NULL;
            FtModel m;
            FtDmrStats s;
            train_layout(&c, text, &m, &s);
            g_plan_edit = NULL;
            if (split) /* this rank's executions checked per micro-batch, as planned */
                assert_all(g_mine.checks[FT_DMR_S_DEFERRED] == g_mine.attempts * g_split_def &&
                           g_mine.checks[FT_DMR_S_AGC] == g_mine.attempts * g_split_agc);
            if (ft_test_rank() == 0)
                printf("  %-5s phases %-5s%s%s: %lld flips, %lld detected, %lld missed; checks "
                       "naive %lld piggyback %lld deferred %lld agc %lld; units in windows %lld, "
                       "drained %lld, over budget %lld; kept at most %lld bytes\n", l->name,
                       ph == 0 ? "1" : ph == 1 ? "1,2" : "1,2,3", left ? " (leftovers end)" : "",
                       split ? " (per micro-batch)" : "", s.injected, s.detected,
                       s.missed, s.checks[0], s.checks[1], s.checks[2], s.checks[3], s.windowed,
                       s.drained, s.demoted, s.kept_peak);
            assert_all(g_covered);
            assert_all(s.injected == PLANNED_FLIPS && s.not_fired == 0);
            assert_all(s.detected == s.injected && s.missed == 0 && s.rolled_back == s.injected);
            assert_all(s.unchecked == 0 && s.attempts == PLANNED_STEPS + s.redone);
            /* every execution checked exactly once (AGC replays of piggyback ops are not checks) */
            long long mine = 0;
            for (int k = 0; k < FT_DMR_NSTRAT; k++) mine += g_mine.checks[k];
            assert_all(mine == g_mine.attempts * g_per_attempt);
            assert_all(s.kept_peak <= (long long)(c.dmr.deferred_mb * 1048576.0));
            long long peak[2] = {g_mine.kept_peak, g_mine.held_peak}, top[2];
            MPI_Allreduce(peak, top, 2, MPI_LONG_LONG, MPI_MAX, ft_test_comm());
            assert_all(s.kept_peak == top[0] && s.held_peak == top[1]); /* the largest rank's */
            if (ph == FT_DMR_PHASES_123) assert_all(s.checks[FT_DMR_S_DEFERRED] > 0);
            else assert_all(s.checks[FT_DMR_S_DEFERRED] == 0);
            /* leftovers = end: the ops the plan leaves naive are deferred too (all fit), per
             * attempt more deferred checks and fewer naive ones than under the same plan */
            double att = (double)s.attempts;
            if (ph == FT_DMR_PHASES_123 && !left)
                deferred_123 = s.checks[FT_DMR_S_DEFERRED] / att,
                naive_123 = s.checks[FT_DMR_S_NAIVE] / att;
            if (left) /* naive on this rank: the optimizer's and integer-writing ones only */
                assert_all(s.checks[FT_DMR_S_DEFERRED] / att > deferred_123 &&
                           s.checks[FT_DMR_S_NAIVE] / att < naive_123 && s.demoted == 0 &&
                           g_mine.checks[FT_DMR_S_NAIVE] == g_mine.attempts * g_naive_left);
            if (ph != FT_DMR_PHASES_1 && l->pp > 1) assert_all(s.checks[FT_DMR_S_AGC] > 0);
            if (ph == FT_DMR_PHASES_1) assert_all(s.checks[FT_DMR_S_AGC] == 0);
            /* checks that keep something report what they kept; the dynamic planner is off */
            if (s.checks[FT_DMR_S_DEFERRED] + s.checks[FT_DMR_S_AGC] > 0)
                assert_all(s.kept_peak > 0);
            assert_all(s.dyn_deferred == 0 && s.dyn_naive == 0 && s.dyn_guard == 0);
            assert_all(same_state(&m, &ref));
            model_free(&m);
            deferred += s.checks[FT_DMR_S_DEFERRED], agc += s.checks[FT_DMR_S_AGC];
            flips += s.injected;
            configs++;
        }
        model_free(&ref);
    }
    g_synthetic = false;
    if (!configs) skip();
    if (ft_test_rank() == 0)
        printf("  planned: %lld flips, all caught; %lld deferred and %lld AGC checks\n", flips,
               deferred, agc);
}

/* ---- chains: a parameter gradient's deferred micro-batches in one unit (dmr.chain) -------- */

/* Whether micro-batch tape entry e reads a parameter gradient's earlier sum (GRAD_PREV). */
static bool adds_onto_grads(const FtTape *tp, const FtTapeEntry *e)
{
    for (int k = 0; e->kind != FT_OP_MARK && k < FT_OP_MAX_IN; k++)
        if (e->in[k] >= 0 && tp->t[e->in[k]].role == FT_TR_GRAD_PREV) return true;
    return false;
}

static int g_grad_entries; /* plan_grads_deferred: entries it deferred (this rank) */

/* The phase-1 plan with every execution of the ops that add onto a gradient's earlier sum
 * deferred: matmul, LayerNorm and encoder backwards. */
static void plan_grads_deferred(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    g_grad_entries = 0;
    for (int s = 0; s < p->n; s++) {
        const FtTape *tp;
        int m;
        const FtTapeEntry *e = slot_entry(tr, p, s, &tp, &m);
        if (tp != &tr->tape || !adds_onto_grads(tp, e)) continue;
        assert_true(p->strat[s] == PLAN_NAIVE && p->seg[s] < 0);
        p->strat[s] = PLAN_DEFERRED;
        g_grad_entries += m == 0;
    }
}

/* plan_grads_deferred, then per micro-batch: deferred only in the micro-batches of
 * g_split_mask, the others naive. */
static void plan_grads_split(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    plan_grads_deferred(tr, p);
    plan_split(tr, p);
}

enum { CHAIN_STEPS = 12, CHAIN_MICRO = 3, CHAIN_FLIPS = 24 };

/* dmr.chain: with every gradient-adding backward op deferred and 3 micro-batches, each
 * micro-batch's check after the first joins the previous one's unit and takes the earlier sum
 * from its replay instead of a copy. On every layout of this rank count: clean runs with the
 * chain on and off end bitwise where DMR off ends without a mismatch; with it on checks were
 * chained (on one rank, where no wait replays a unit early: exactly M - 1 per entry and
 * attempt, kept bytes charged as the copies they replace, so the peak is the same as with it
 * off); off, none. A campaign of flips in those ops' outputs (their weight gradients mostly,
 * primary's and checker's) is caught in full and leaves no trace. And with the checks deferred
 * in some micro-batches only, a chain joins just the execution before: with 0 and 3 deferred of
 * 4 (3 reads the bank 0 wrote, plus 1's and 2's sums) none forms and nothing mismatches. */
static void test_chain(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    int runs = 0;
    g_synthetic = true;
    for (int li = 0; li < NLAYOUTS; li++) {
        const Layout *l = &g_layouts[li];
        if (!runs_here(l)) continue;
        FtConfig c0 = cfg_of(l, FT_DMR_OFF, CHAIN_STEPS);
        c0.parallel.microbatches = CHAIN_MICRO;
        FtModel ref, m;
        FtDmrStats s0;
        train_layout(&c0, NULL, &ref, &s0);
        /* chain off, on, and on with no windows (no poll hook: nothing replays a unit before
         * the next micro-batch joins it, so every chain forms on every layout) */
        FtDmrStats s[3], mine[3];
        for (int v = 0; v < 3; v++) {
            FtConfig c = cfg_of(l, FT_DMR_PLANNED, CHAIN_STEPS);
            c.parallel.microbatches = CHAIN_MICRO;
            c.dmr.phases = FT_DMR_PHASES_1, c.dmr.deferred_mb = 256, c.dmr.chain = v > 0;
            g_plan_edit = plan_grads_deferred, g_no_windows = v == 2;
            train_layout(&c, NULL, &m, &s[v]);
            g_plan_edit = NULL, g_no_windows = false;
            mine[v] = g_mine;
            assert_all(g_grad_entries > 0 && s[v].mismatches == 0 && s[v].redone == 0);
            assert_all(s[v].checks[FT_DMR_S_DEFERRED] > 0 && s[v].demoted == 0);
            assert_all(same_state(&m, &ref));
            model_free(&m);
        }
        /* off: none; on: at most M - 1 per entry and attempt (a unit a wait replayed before
         * the next micro-batch cannot be joined: that one keeps a copy), exactly that where
         * no wait replays (one rank, or no windows), its bytes charged as the copies it
         * replaces: the same peak as with the chain off */
        long long most = mine[1].attempts * (CHAIN_MICRO - 1) * g_grad_entries;
        assert_all(s[0].chained == 0 && mine[1].chained <= most);
        assert_all(mine[2].chained == mine[2].attempts * (CHAIN_MICRO - 1) * g_grad_entries);
        assert_all(s[2].kept_peak == s[0].kept_peak || ft_test_size() > 1);
        if (ft_test_size() == 1) assert_all(mine[1].chained == most);
        /* 4 micro-batches, the gradient checks deferred in some: a chain joins only the
         * execution just before (0 and 3: none, though 3 reads the bank 0 wrote, on top of
         * what 1 and 2 added; 0, 1 and 3: 1 joins 0, 3 copies) */
        for (int v = 0; v < 2; v++) {
            FtConfig c = cfg_of(l, FT_DMR_PLANNED, 4);
            c.parallel.microbatches = 4;
            c.dmr.phases = FT_DMR_PHASES_1, c.dmr.deferred_mb = 256;
            g_plan_edit = plan_grads_split, g_no_windows = true, g_split_mask = v ? 0xbu : 0x9u;
            FtDmrStats sv;
            train_layout(&c, NULL, &m, &sv);
            g_plan_edit = NULL, g_no_windows = false;
            assert_all(sv.mismatches == 0 && sv.redone == 0 && sv.checks[FT_DMR_S_DEFERRED] > 0);
            assert_all(g_mine.chained == (v ? g_mine.attempts * g_grad_entries : 0));
            FtConfig cr = c0;
            cr.train.steps = 4, cr.parallel.microbatches = 4;
            FtModel r4;
            train_layout(&cr, NULL, &r4, &s0);
            assert_all(same_state(&m, &r4));
            model_free(&m), model_free(&r4);
        }
        char text[256];
        snprintf(text, sizeof text, "; chain campaign: %s\nsdc-random count=%d seed=%d steps=1-%d "
                 "ops=matmul,layernorm,encoder target=both\n", l->name, CHAIN_FLIPS, 3100 + li,
                 CHAIN_STEPS);
        FtConfig c = cfg_of(l, FT_DMR_PLANNED, CHAIN_STEPS);
        c.parallel.microbatches = CHAIN_MICRO;
        c.dmr.phases = FT_DMR_PHASES_1, c.dmr.deferred_mb = 256;
        g_plan_edit = plan_grads_deferred, g_no_windows = true;
        FtDmrStats f;
        train_layout(&c, text, &m, &f);
        g_plan_edit = NULL, g_no_windows = false;
        assert_all(f.injected == CHAIN_FLIPS && f.not_fired == 0 && f.chained > 0);
        assert_all(f.detected == f.injected && f.missed == 0 && f.rolled_back == f.injected);
        assert_all(same_state(&m, &ref));
        if (ft_test_rank() == 0)
            printf("  %-6s chained %lld (windows on) and %lld (off) of %lld deferred checks; "
                   "campaign %lld flips, %lld detected\n", l->name, s[1].chained, s[2].chained,
                   s[2].checks[FT_DMR_S_DEFERRED], f.injected, f.detected);
        model_free(&m);
        model_free(&ref);
        runs++;
    }
    g_synthetic = false;
    if (!runs) skip();
}

/* dmr_grad_sole_writer on a hand-made tape: a gradient written by one entry and read by others
 * is its sole writer's; another entry writing bytes that overlap it, or a marker sending or
 * receiving them, or no storage bound, is not. */
static void test_grad_sole_writer(void **state)
{
    (void)state;
    if (ft_test_rank() != 0) return;
    float bank[64], other[16], prev[64];
    for (int v = 0; v < 5; v++) {
        FtTape tp;
        tape_init(&tp);
        int g = tape_tensor(&tp, "g", FT_F32, FT_TR_GRAD, 32, v == 4 ? NULL : bank + 16, -1);
        int gp = tape_tensor(&tp, "gp", FT_F32, FT_TR_GRAD_PREV, 32, prev, -1);
        int o = tape_tensor(&tp, "o", FT_F32, FT_TR_GRAD, 16, v == 1 ? bank + 40 : other, -1);
        if (v == 4) tp.t[g].data = NULL;
        FtTapeEntry e = {.kind = FT_OP_MATMUL, .dir = FT_BWD, .phase = FT_PH_BWD};
        for (int k = 0; k < FT_OP_MAX_IN; k++) e.in[k] = -1;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) e.out[k] = -1;
        FtTapeEntry w = e, r = e, mk = e;
        w.in[3] = gp, w.out[1] = g;               /* adds onto the earlier sum */
        r.in[0] = g, r.out[0] = o;                /* reads g, writes o (v 1: o overlaps g) */
        mk.kind = FT_OP_MARK, mk.mark = FT_MARK_PP_SEND, mk.in[0] = v == 2 ? g : -1;
        tape_push(&tp, &w);
        tape_push(&tp, &r);
        tape_push(&tp, &mk);
        if (v == 3) { /* a second writer of g's bytes through another view (a different id) */
            FtTapeEntry w2 = e;
            w2.out[0] = tape_tensor(&tp, "g2", FT_F32, FT_TR_GRAD, 8, bank + 44, -1);
            tape_push(&tp, &w2);
        }
        FtDmr d;
        memset(&d, 0, sizeof d);
        bool only = dmr_grad_sole_writer(&d, &tp, 0, 1);
        assert_true(only == (v == 0));
        assert_true(dmr_grad_sole_writer(&d, &tp, 0, 1) == only); /* cached */
        free(d.sole);
        tape_free(&tp);
    }
}

/* dmr_dyn_bytes on a hand-made expert op (ops.h's MOE_EXPERT; R 8 rows, C 4, OC 6, 2 local
 * experts): a deferred check keeps the routed rows of the row-indexed inputs (forward x;
 * backward dy and x), the other inputs whole (counts; the backward's dw and db prev), the
 * weights and biases none, and a fingerprint per output; none routed: no row kept, all
 * routed: every row. */
static void test_dyn_bytes(void **state)
{
    (void)state;
    if (ft_test_rank() != 0) return;
    enum { R = 8, C = 4, OC = 6, EL = 2, F = sizeof(float) };
    static float buf[256];
    FtTape tp;
    tape_init(&tp);
    int x = tape_tensor(&tp, "x", FT_F32, FT_TR_ACT, R * C, buf, 0);
    int w = tape_tensor(&tp, "w", FT_F32, FT_TR_PARAM, EL * OC * C, buf, 0);
    int b = tape_tensor(&tp, "b", FT_F32, FT_TR_PARAM, EL * OC, buf, 0);
    int cnt = tape_tensor(&tp, "counts", FT_I32, FT_TR_ACT, EL, buf, 0);
    int y = tape_tensor(&tp, "y", FT_F32, FT_TR_ACT, R * OC, buf, 0);
    int dy = tape_tensor(&tp, "dy", FT_F32, FT_TR_ACT_GRAD, R * OC, buf, 0);
    int dx = tape_tensor(&tp, "dx", FT_F32, FT_TR_ACT_GRAD, R * C, buf, 0);
    int dw = tape_tensor(&tp, "dw", FT_F32, FT_TR_GRAD, EL * OC * C, buf, 0);
    int db = tape_tensor(&tp, "db", FT_F32, FT_TR_GRAD, EL * OC, buf, 0);
    int dwp = tape_tensor(&tp, "dw prev", FT_F32, FT_TR_GRAD_PREV, EL * OC * C, buf, 0);
    int dbp = tape_tensor(&tp, "db prev", FT_F32, FT_TR_GRAD_PREV, EL * OC, buf, 0);
    FtTapeEntry e = {.kind = FT_OP_MOE_EXPERT, .dir = FT_FWD, .phase = FT_PH_FWD};
    for (int k = 0; k < FT_OP_MAX_IN; k++) e.in[k] = -1;
    for (int k = 0; k < FT_OP_MAX_OUT; k++) e.out[k] = -1;
    FtTapeEntry bw = e;
    e.in[0] = x, e.in[1] = w, e.in[2] = b, e.in[3] = cnt, e.out[0] = y;
    bw.dir = FT_BWD, bw.phase = FT_PH_BWD;
    bw.in[0] = dy, bw.in[1] = x, bw.in[2] = w, bw.in[3] = cnt, bw.in[4] = dwp, bw.in[5] = dbp;
    bw.out[0] = dx, bw.out[1] = dw, bw.out[2] = db;
    tape_push(&tp, &e);
    tape_push(&tp, &bw);
    for (int i = 0; i < 2; i++) {
        FtOpCall c;
        memset(&c, 0, sizeof c);
        for (int k = 0; k < FT_OP_MAX_IN; k++) c.in[k] = tp.e[i].in[k] >= 0 ? buf : NULL;
        c.d[0] = R, c.d[1] = C, c.d[2] = OC, c.d[3] = EL, c.x[0] = 1;
        for (long long rows = 0; rows <= R; rows += 3) {
            size_t nb[FT_OP_MAX_IN], want[FT_OP_MAX_IN] = {0}, sum = 0;
            if (i == 0) {
                want[0] = (size_t)rows * C * F, want[3] = EL * sizeof(int);
            } else {
                want[0] = (size_t)rows * OC * F, want[1] = (size_t)rows * C * F;
                want[3] = EL * sizeof(int), want[4] = EL * OC * C * F, want[5] = EL * OC * F;
            }
            for (int k = 0; k < FT_OP_MAX_IN; k++) sum += want[k];
            sum += (i == 0 ? 1 : 3) * sizeof(uint64_t); /* the outputs' fingerprints */
            assert_int_equal(dmr_dyn_bytes(&tp, i, &c, rows, nb), sum);
            for (int k = 0; k < FT_OP_MAX_IN; k++) assert_int_equal(nb[k], want[k]);
        }
    }
    tape_free(&tp);
}

/* Planned from a real profile (dmr.profile_steps = 2), no faults, on every layout with its AC
 * and with AC off: no mismatch, every op covered once, the budget kept, and the parameters
 * bitwise where DMR off ends. */
static void test_planned_clean(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    g_synthetic = false, g_plan_edit = NULL; /* the profile's own plan */
    int runs = 0;
    for (int li = 0; li < NLAYOUTS; li++) {
        Layout l = g_layouts[li];
        if (!runs_here(&l)) continue;
        for (int pass = 0; pass < 2; pass++) {
            if (pass) l.ac = FT_AC_CHOICE_NONE;
            FtConfig c0 = cfg_of(&l, FT_DMR_OFF, 6), c = cfg_of(&l, FT_DMR_PLANNED, 6);
            c.dmr.profile_steps = 2, c.dmr.deferred_mb = PLANNED_BUDGET_MB;
            FtModel ref, m;
            FtDmrStats s0, s;
            train_layout(&c0, NULL, &ref, &s0);
            train_layout(&c, NULL, &m, &s);
            assert_all(g_covered && g_ordered);
            assert_all(s.mismatches == 0 && s.redone == 0 && s.unchecked == 0 && s.attempts == 6);
            /* dmr.refine = pipeline (the default) on a pipeline: the stages simulated their
             * step together, the refined plan no longer than their own, within the pipeline's
             * bound and the step with every check at once; elsewhere not run */
            bool pipe = l.pp > 1;
            assert_all(g_refined == pipe);
            if (pipe)
                assert_all(g_rf.start.ok && g_rf.best.ok && g_rf.off.step > 0 &&
                           g_rf.bound >= g_rf.off.step && g_rf.best.step >= g_rf.bound * (1 - 1e-12) &&
                           g_rf.best.step <= g_rf.start.step && g_rf.naive.step > g_rf.off.step &&
                           g_rf.best.demoted <= g_rf.start.demoted);
            /* stage 0's answer on every stage and peer, and each stage's plan is its part
             * (on the first peer: the others take its naive/deferred choices where they may
             * move them) */
            if (pipe)
                assert_all(ft_same_bytes(&g_rf, sizeof g_rf) &&
                           (g_peer > 0 ||
                            (g_rf.deferred[g_stage] == g_my_deferred && g_rf.sig[g_stage] == g_my_sig)));
            /* tp or ep > 1: every peer runs its stage's first peer's plan for the micro-batch
             * executions, AGC segments too (what the refinement moved included: a peer's own
             * plan never saw the simulation) */
            if (pipe && l.tp * l.ep > 1) {
                assert_all(g_tp_apart == 0 && g_tp_same == g_tp_micro);
                if (ft_test_rank() == 0 && !pass)
                    printf("  %s: the pipeline refined (%d executions moved), every peer runs its "
                           "stage's first peer's plan for its micro-batch executions\n", l.name,
                           g_rf.flips);
            }
            assert_all(s.kept_peak <= (long long)(PLANNED_BUDGET_MB * 1048576.0));
            if (l.ac == FT_AC_CHOICE_NONE) assert_all(s.checks[FT_DMR_S_PIGGYBACK] == 0);
            else assert_all(s.checks[FT_DMR_S_PIGGYBACK] > 0);
            /* the check time by kind: disjoint parts of check_s, each there when its checks are */
            double parts = s.naive_s + s.pb_s + s.keep_s + s.replay_s;
            bool deferred = s.checks[FT_DMR_S_DEFERRED] + s.checks[FT_DMR_S_AGC] > 0;
            assert_all(s.naive_s > 0 && parts <= s.check_s * (1 + 1e-9) + 1e-9);
            assert_all((s.pb_s > 0) == (s.checks[FT_DMR_S_PIGGYBACK] > 0));
            assert_all(!deferred || (s.keep_s > 0 && s.replay_s > 0));
            assert_all(deferred || (s.keep_s == 0 && s.replay_s == 0));
            assert_all(same_state(&m, &ref));
            model_free(&m);
            /* the pipeline not refined where the plan may not defer (phases 1,2) or where
             * dmr.refine = off: nothing deferred in the first, the stages' own plans in both */
            for (int v = 0; pipe && !pass && v < 2; v++) {
                FtConfig cv = c;
                if (v == 0) cv.dmr.phases = FT_DMR_PHASES_12;
                else cv.dmr.refine = FT_DMR_REFINE_OFF;
                train_layout(&cv, NULL, &m, &s);
                assert_all(!g_refined && s.mismatches == 0 && same_state(&m, &ref));
                if (v == 0) assert_all(s.checks[FT_DMR_S_DEFERRED] == 0);
                model_free(&m);
            }
            model_free(&ref);
            runs++;
        }
    }
    if (!runs) skip();
}

/* dmr.profile_steps = 2 without a plan file: the first two steps are profiled (no plan yet),
 * the plan is made at the end of the second and followed from the third. */
static void test_profile_steps(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    const Layout *l = NULL;
    for (int li = 0; li < NLAYOUTS && !l; li++)
        if (runs_here(&g_layouts[li])) l = &g_layouts[li];
    if (!l) skip();
    FtConfig c = cfg_of(l, FT_DMR_PLANNED, 4);
    c.dmr.profile_steps = 2;
    g_synthetic = false, g_plan_edit = NULL; /* the profile's own plan */
    FtModel m;
    Run r;
    run_open(&r, &c, NULL, &m);
    for (int s = 0; s < 4; s++) {
        FtStepInfo info;
        assert_all(train_step(&r.tr, &info) == FT_STEP_OK);
        const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(r.td));
        assert_all(s < 1 ? p == NULL : p != NULL && p->profile_steps == 2);
    }
    FtDmrStats st;
    run_close(&r, &st);
    assert_all(st.attempts == 4 && st.mismatches == 0);
    model_free(&m);
}

/* A batch source that, at its second call (step 1's second micro-batch), books a pipeline wait
 * of 0.5 s and a tensor-parallel one of 0.25 s on the trainer's timeline, as waits on those
 * messages would. */
typedef struct waits_src {
    FtTimeline *tl;
    int calls;
} WaitsSrc;

static void fetch_with_waits(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    WaitsSrc *w = ctx;
    if (++w->calls == 2 && w->tl) w->tl->total[FT_TL_PP] += 0.5, w->tl->total[FT_TL_TP] += 0.25;
    ft_synth_fetch(g_dims, first, B, in, tg);
}

/* The profile sorts the waits it reads from the timeline: a pipeline wait opens a PP window
 * (the one AGC segments use), any other an intra window; both at the place they were waited. */
static void test_profile_window_kinds(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    c.dmr.profile_steps = 1, c.dmr.phases = FT_DMR_PHASES_1;
    WaitsSrc ws = {0};
    FtBatchSource src = {fetch_with_waits, &ws};
    g_source = &src, g_synthetic = false, g_plan_edit = NULL; /* the profile's own plan */
    FtModel m;
    Run r;
    run_open(&r, &c, NULL, &m);
    g_source = NULL;
    ws.tl = &r.tr.tl;
    FtStepInfo info;
    assert_true(train_step(&r.tr, &info) == FT_STEP_OK);
    const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(r.td));
    assert_non_null(p);
    int npp = 0, wpp = -1, wtp = -1;
    for (int w = 0; w < p->nwin; w++) {
        if (p->win_kind[w] == PLAN_WIN_PP) npp++, wpp = w;
        else if (wtp < 0 || p->win_len[w] > p->win_len[wtp]) wtp = w;
    }
    assert_true(npp == 1 && wtp >= 0); /* one rank: no other pipeline wait */
    assert_int_equal(p->win_after[wpp], p->win_after[wtp]);
    assert_true(p->win_len[wpp] > 1.5 * p->win_len[wtp] && p->win_len[wtp] > 0);
    FtDmrStats st;
    run_close(&r, &st);
    model_free(&m);
}

/* A batch source that books a 1000 s pipeline wait on the trainer's timeline at its call `at`
 * (far beyond any step, however the profile scales its waits: by the step without checks over
 * the step with them, which a busy machine can make 0.05)
 * (1: before any op of the first step; 2: between its two micro-batches). */
typedef struct order_src {
    FtTimeline *tl;
    int calls, at;
} OrderSrc;

static void fetch_with_order(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    OrderSrc *w = ctx;
    if (++w->calls == w->at && w->tl) w->tl->total[FT_TL_PP] += 1e3;
    ft_synth_fetch(g_dims, first, B, in, tg);
}

/* The profile's time order (dmr_profile_seq, dmr_order_excess) on one rank: a wait before every
 * op of the step holds no check, so the time-order bound is all the exposed work while issue
 * 10's bound is 0; the same wait between the two micro-batches holds the first one's checks
 * only: the bound is the exposed work of the second micro-batch and the optimizer. Both less
 * at most the rank's other waits (the loss and norm sums': microseconds). */
static void test_profile_order(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    for (int at = 1; at <= 2; at++) {
        FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1); /* 2 micro-batches, AC every 2 */
        c.dmr.profile_steps = 1, c.dmr.phases = FT_DMR_PHASES_1;
        OrderSrc os = {.at = at};
        FtBatchSource src = {fetch_with_order, &os};
        g_source = &src, g_synthetic = false, g_plan_edit = NULL; /* the profile's own plan */
        FtModel m;
        Run r;
        run_open(&r, &c, NULL, &m);
        g_source = NULL;
        os.tl = &r.tr.tl;
        FtStepInfo info;
        assert_true(train_step(&r.tr, &info) == FT_STEP_OK);
        const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(r.td));
        assert_non_null(p);
        assert_true(p->has_order);
        FtDmrPlanTotals t;
        dmr_plan_totals(p, &t);
        double micro = 0, opt = 0;
        assert_int_equal(p->ninst, 2); /* planned per micro-batch */
        for (int i = 0; i < p->n; i++) {
            int mb, e = dmr_plan_entry(p, i, &mb);
            if (p->strat[i] >= 0 && p->strat[i] != PLAN_PIGGYBACK)
                *(e < p->nmicro ? &micro : &opt) += p->time[i];
        }
        /* the booked 1000 s is a window (scaled by the profile: >= 50 s), never an op's time:
         * the checks of this tiny step take milliseconds, so 100 s holds on any machine (a
         * wall-clock bound of 0.5 s left 100x; the booked wait counted as work is >= 1000 s) */
        assert_true(micro > 0 && opt > 0 && t.window_s > 1.0 && t.exposed_s < 100);
        double want = at == 1 ? t.exposed_s : micro / 2 + opt; /* 2 micro-batches */
        double big = 0; /* the booked wait; the others are the loss/norm sums' (microseconds) */
        for (int w = 0; w < p->nwin; w++) big = p->win_len[w] > big ? p->win_len[w] : big;
        /* bounds, not sizes: a busy machine stretches the other waits; tol: the rounding of
         * the sums that hold the booked wait, and of the split over executions */
        double other = t.window_s - big, tol = 1e-12 * want + 1e-13 * big;
        assert_true(p->order_s <= want + tol && p->order_s >= want - other - tol);
        double ob, lb = dmr_plan_bounds(p, 1.0, &ob);
        assert_true(lb == 0 && fabs(ob - p->order_s) <= 1e-12);
        FtDmrStats st;
        run_close(&r, &st);
        model_free(&m);
    }
}

/* The trainer's check for process failures, as ULFM's would answer it: the attempts listed in
 * `broken` (by before_commit call, from 0) were broken by a death, so the trainer's
 * broken-attempt hook runs and the step is computed again, as train_step does after
 * train_spare_recover; the others go on to DMR's own verdict. */
typedef struct broken_commit {
    int (*inner)(void *ctx, FtTrainer *tr, int attempt);
    void *inner_ctx;
    unsigned broken; /* bit k: the k-th call's attempt was broken */
    int calls;
} BrokenCommit;

static int commit_with_breaks(void *ctx, FtTrainer *tr, int attempt)
{
    BrokenCommit *b = ctx;
    int redo = b->inner(b->inner_ctx, tr, attempt);
    if (!(b->broken >> b->calls++ & 1u)) return redo;
    tr->on_broken(tr->on_broken_ctx, tr);
    return 1;
}

/* A profile attempt that a process failure broke is not counted (dmr_attempt_broken): with
 * dmr.profile_steps = 1 and a 1000 s pipeline wait booked in step 1's first attempt, which is
 * then broken, the plan is made from the attempt computed again (no 1000 s window, one step
 * measured), at its commit; a broken warm-up attempt (profile_steps = 2: attempts 1 and 3
 * broken) stays the warm-up, and the plan comes from the one measured attempt after it. Without
 * the breaks (the control) the booked wait is in the plan: the test can see it. An attempt
 * computed again for a mismatch does count (profile_steps = 2, a flip in step 1: its two
 * attempts are the warm-up and the measured one, and the plan is made at step 1's commit). */
static void test_profile_broken(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    for (int v = 0; v < 4; v++) {
        FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
        c.dmr.profile_steps = v >= 2 ? 2 : 1, c.dmr.phases = FT_DMR_PHASES_1;
        OrderSrc os = {.at = v == 3 ? 0 : 1}; /* the wait: before step 1's first op */
        FtBatchSource src = {fetch_with_order, &os};
        g_source = &src, g_synthetic = false, g_plan_edit = NULL; /* the profile's own plan */
        FtModel m;
        Run r;
        run_open(&r, &c, v == 3 ? "sdc step=1 rank=0 op=gelu bit=30\n" : NULL, &m);
        g_source = NULL;
        os.tl = &r.tr.tl;
        BrokenCommit b = {.inner = r.tr.before_commit, .inner_ctx = r.tr.before_commit_ctx,
                          .broken = v == 1 ? 1u : v == 2 ? 5u : 0u};
        r.tr.before_commit = commit_with_breaks, r.tr.before_commit_ctx = &b;
        FtDmr *d = train_dmr_get(r.td);
        FtStepInfo info;
        assert_true(train_step(&r.tr, &info) == (v == 0 ? FT_STEP_OK : FT_STEP_REDONE));
        assert_int_equal(b.calls, v == 0 ? 1 : 2);
        assert_int_equal(info.redos, v == 0 ? 0 : 1);
        if (v == 2) { /* the warm-up done (its second attempt): no plan yet */
            assert_null(dmr_plan(d));
            assert_true(train_step(&r.tr, &info) == FT_STEP_REDONE);
            assert_int_equal(b.calls, 4);
        }
        const FtDmrEntryPlan *p = dmr_plan(d);
        assert_non_null(p);
        const FtDmrProfile *pf = dmr_profile(d);
        assert_non_null(pf);
        assert_int_equal(pf->steps, 1);
        double big = 0;
        for (int w = 0; w < p->nwin; w++) big = p->win_len[w] > big ? p->win_len[w] : big;
        /* the booked 1000 s (scaled by the profile: >= 50 s) against the loss and norm sums'
         * waits of a one-rank step: microseconds, 10 s on any machine */
        if (v == 0) assert_true(big > 10);
        else assert_true(big < 10 && pf->wall_s < 10);
        FtDmrStats st;
        run_close(&r, &st);
        assert_int_equal(st.attempts, v == 0 ? 1 : v == 2 ? 4 : 2);
        assert_int_equal(st.mismatches > 0, v == 3);
        model_free(&m);
    }
}

/* A batch source that runs the DMR poll hook (as a wait with a message in flight does) before
 * each micro-batch but a step's first. */
typedef struct poll_src {
    FtDmr *d;
    const FtExec *ex; /* the trainer's executor: its poll hook, installed by train_dmr_setup */
    int calls;
    long long polls; /* calls of the hook that ran a check */
} PollSrc;

static void fetch_with_poll(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    PollSrc *w = ctx;
    if (w->d && w->calls++ % 2) {
        FtPoll p = w->ex->poll;
        while (p.fn && p.fn(p.arg)) w->polls++;
    }
    ft_synth_fetch(g_dims, first, B, in, tg);
}

/* Deferred checks queued by a micro-batch are replayed by the next wait's poll hook (the
 * trainer's own: train_dmr_setup installs DMR's), one op per call, not held back to the
 * agreement (one rank, phases 1,2,3: its units are lone ops). */
static void test_poll_replays(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 3);
    c.dmr.phases = FT_DMR_PHASES_123, c.dmr.deferred_mb = PLANNED_BUDGET_MB;
    static PollSrc ps;
    ps = (PollSrc){0};
    static FtBatchSource src = {fetch_with_poll, &ps};
    g_source = &src, g_synthetic = true, g_plan_edit = NULL;
    FtModel m;
    Run r;
    run_open(&r, &c, NULL, &m);
    g_source = NULL, g_synthetic = false;
    ps.d = train_dmr_get(r.td), ps.ex = &r.tr.ex;
    for (int s = 0; s < 3; s++) {
        FtStepInfo info;
        assert_true(train_step(&r.tr, &info) == FT_STEP_OK);
    }
    FtDmrStats st;
    run_close(&r, &st);
    assert_true(ps.calls == 6 && ps.polls > 0);
    assert_true(st.windowed > 0 && st.mismatches == 0);
    assert_true(st.checks[FT_DMR_S_DEFERRED] > 0);
    model_free(&m);
}

/* Kept inputs are reused: once a planned step has run, the next steps (the same plan, the same
 * sizes) allocate no buffer; with a budget that holds a step's kept inputs, what is held (kept
 * and pooled) never passes it; the run ends bitwise where DMR off ends. */
static void test_keep_pool(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    const Layout *l = &g_layouts[0];
    FtConfig c = cfg_of(l, FT_DMR_PLANNED, 6);
    c.dmr.phases = FT_DMR_PHASES_123, c.dmr.deferred_mb = PLANNED_BUDGET_MB;
    g_synthetic = true, g_plan_edit = NULL;
    FtModel m;
    Run r;
    run_open(&r, &c, NULL, &m);
    long long allocs[6];
    FtDmrStats st;
    for (int s = 0; s < 6; s++) {
        FtStepInfo info;
        assert_true(train_step(&r.tr, &info) == FT_STEP_OK);
        dmr_stats(train_dmr_get(r.td), &st);
        allocs[s] = st.keep_allocs;
    }
    assert_non_null(dmr_plan(train_dmr_get(r.td)));
    assert_true(st.checks[FT_DMR_S_DEFERRED] + st.checks[FT_DMR_S_AGC] > 0);
    assert_true(allocs[5] > 0 && allocs[5] == allocs[3]); /* steps 5 and 6: none */
    assert_true(st.held_peak >= st.kept_peak && st.kept_peak > 0);
    assert_true(st.held_peak <= (long long)(PLANNED_BUDGET_MB * 1048576.0));
    run_close(&r, &st);
    g_synthetic = false;
    FtConfig c0 = cfg_of(l, FT_DMR_OFF, 6);
    FtModel ref;
    FtDmrStats s0;
    train_layout(&c0, NULL, &ref, &s0);
    assert_true(same_state(&m, &ref));
    model_free(&ref);
    model_free(&m);
    /* planned from a real profile, whose bookkeeping timings keep a buffer of every input size:
     * still within the budget, kept and pooled together */
    c.dmr.profile_steps = 2;
    run_open(&r, &c, NULL, &m);
    for (int s = 0; s < 4; s++) {
        FtStepInfo info;
        assert_true(train_step(&r.tr, &info) == FT_STEP_OK);
    }
    run_close(&r, &st);
    assert_true(st.keep_allocs > 0 && st.held_peak > 0);
    assert_true(st.held_peak <= (long long)(PLANNED_BUDGET_MB * 1048576.0));
    model_free(&m);
}

/* The pool by hand (dmr_impl.h): a freed buffer stays pooled while kept and pooled bytes are
 * within the budget, inclusive, and the next keep of its size takes it back (no allocation);
 * one byte over and it is released. held_peak counts kept and pooled bytes together. */
static void test_keep_pool_budget(void **state)
{
    (void)state;
    FtDmr *d = dmr_create(&(FtDmrCfg){.mode = FT_DMR_NAIVE});
    FtDmrStats st;
    d->budget = 3000, d->kept = 1000;
    void *a = dmr_keep_alloc(d, 2000, "a kept input");
    dmr_keep_free(d, a, 2000); /* 1000 kept + 2000 pooled: the budget */
    void *b = dmr_keep_alloc(d, 2000, "a kept input");
    dmr_stats(d, &st);
    assert_true(b == a && st.keep_allocs == 1 && st.held_peak == 3000);
    d->kept = 1001; /* one byte more: not pooled */
    dmr_keep_free(d, b, 2000);
    void *e = dmr_keep_alloc(d, 2000, "a kept input");
    dmr_stats(d, &st);
    assert_true(st.keep_allocs == 2 && st.held_peak == 3000);
    dmr_keep_free(d, e, 2000);
    d->kept = 0;
    dmr_free(d);
}

static int g_exact; /* plan_one_deferred's entry */

/* The phase-1 plan with entry g_exact deferred (the only deferred check). */
static void plan_one_deferred(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    (void)tr;
    for (int i = 0; i < p->n; i++)
        assert_true(p->strat[i] != PLAN_DEFERRED && p->strat[i] != PLAN_AGC);
    assert_int_equal(p->strat[g_exact], PLAN_NAIVE);
    p->strat[g_exact] = PLAN_DEFERRED;
}

/* dmr.deferred_mb is the most a rank keeps, inclusive: a deferred check that keeps exactly that
 * much is deferred (kept at most the budget, not one byte more); one byte less and it is checked
 * at once (naive). Both runs end bitwise where DMR off ends. */
static void test_budget_exact(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    const Layout *l = &g_layouts[0];
    FtConfig c = cfg_of(l, FT_DMR_PLANNED, 3);
    c.dmr.phases = FT_DMR_PHASES_1;
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    g_exact = -1;
    for (int i = 0; i < tr.tape.fwd_end && g_exact < 0; i++) /* a GELU the plan leaves naive */
        if (tr.tape.e[i].kind == FT_OP_GELU && tr.tape.e[i].twin < 0) g_exact = i;
    assert_true(g_exact >= 0);
    size_t kept = dmr_entry_kept(&tr.tape, g_exact);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
    FtConfig c0 = cfg_of(l, FT_DMR_OFF, 3);
    FtModel ref;
    FtDmrStats s0;
    train_layout(&c0, NULL, &ref, &s0);
    g_synthetic = true, g_plan_edit = plan_one_deferred;
    for (int less = 0; less < 2; less++) {
        c.dmr.deferred_mb = (double)(kept - (size_t)less) / 1048576.0;
        FtDmrStats s;
        train_layout(&c, NULL, &m, &s);
        assert_true(s.mismatches == 0 && s.attempts == 3);
        if (less) {
            assert_true(s.checks[FT_DMR_S_DEFERRED] == 0 && s.kept_peak == 0 && s.demoted >= 3);
        } else {
            assert_true(s.checks[FT_DMR_S_DEFERRED] >= 3); /* each step's first micro-batch */
            assert_true(s.kept_peak == (long long)kept);
            /* its buffers, reused each step, held within the budget with the pool */
            assert_true(s.held_peak == (long long)kept && s.keep_allocs >= 1);
        }
        assert_true(same_state(&m, &ref));
        model_free(&m);
    }
    g_synthetic = false, g_plan_edit = NULL;
    model_free(&ref);
}

/* The plan with, for each AGC segment, the first piggybacked op after its last member made a
 * member too (replayed in the segment; its check is its recomputation's). */
static int g_pb_members;
static void plan_pb_in_segments(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    for (int sg = 0; sg < p->nseg; sg++) {
        int last = -1;
        for (int i = 0; i < p->n; i++)
            if (p->seg[i] == sg) last = i;
        for (int j = last + 1; j < tr->tape.ne; j++)
            if (p->seg[j] < 0 && p->strat[j] == PLAN_PIGGYBACK) {
                p->seg[j] = sg, g_pb_members++;
                break;
            }
    }
}

/* pp2 (AC full), phases 1,2 with piggybacked ops inside the AGC segments: they are
 * replayed there but not counted again (every execution checked exactly once), no mismatch, and
 * the run ends bitwise where DMR off ends. */
static void test_agc_piggyback_members(void **state)
{
    (void)state;
    const Layout *l = &g_layouts[3]; /* pp2 */
    if (!runs_here(l)) skip();
    log_init(ft_test_rank(), FT_LOG_WARN);
    FtConfig c0 = cfg_of(l, FT_DMR_OFF, 4), c = cfg_of(l, FT_DMR_PLANNED, 4);
    c.dmr.phases = FT_DMR_PHASES_12, c.dmr.deferred_mb = PLANNED_BUDGET_MB;
    FtModel ref, m;
    FtDmrStats s0, s;
    train_layout(&c0, NULL, &ref, &s0);
    g_synthetic = true, g_plan_edit = plan_pb_in_segments, g_pb_members = 0;
    train_layout(&c, NULL, &m, &s);
    g_synthetic = false, g_plan_edit = NULL;
    assert_true(ft_all(g_pb_members == 0) == 0); /* some stage has such members */
    long long mine = 0;
    for (int k = 0; k < FT_DMR_NSTRAT; k++) mine += g_mine.checks[k];
    assert_all(mine == g_mine.attempts * g_per_attempt);
    assert_all(s.checks[FT_DMR_S_AGC] > 0 && s.mismatches == 0 && s.attempts == 4);
    assert_all(same_state(&m, &ref));
    model_free(&m), model_free(&ref);
}

/* pp2 (AC full), phases 1,2 (nothing deferred alone) with room for every segment: each
 * execution of a segment's members is one unit, replayed whole, in a window or drained (a
 * member of an open unit does not start a unit of its own; one that meets its own entry in the
 * open unit, the next micro-batch's, closes it). Counted on each rank: units = attempts x the
 * plan's segments per attempt, nothing over the budget. (Over the budget a unit is cut where a
 * member goes naive, at places that depend on when windows came: not counted here.) */
static void test_agc_units(void **state)
{
    (void)state;
    const Layout *l = &g_layouts[3]; /* pp2 */
    if (!runs_here(l)) skip();
    log_init(ft_test_rank(), FT_LOG_WARN);
    FtConfig c = cfg_of(l, FT_DMR_PLANNED, 4);
    c.dmr.phases = FT_DMR_PHASES_12, c.dmr.deferred_mb = 256;
    FtModel m;
    FtDmrStats s;
    g_synthetic = true, g_plan_edit = NULL;
    train_layout(&c, NULL, &m, &s);
    g_synthetic = false;
    assert_all(g_agc_units > 0 && g_mine.demoted == 0 && g_mine.attempts == 4);
    assert_all(g_mine.windowed + g_mine.drained == g_mine.attempts * g_agc_units);
    assert_all(s.checks[FT_DMR_S_AGC] > 0 && s.mismatches == 0);
    model_free(&m);
}

/* ---- the dynamic planner ------------------------------------------------------------------- */

enum { DYN_STEPS = 40, DYN_FLIPS = 40 };
#define DYN_BUDGET_MB 1.0   /* room for the expert ops' routed rows beside the static plan */
#define DYN_TINY_MB (16.0 / 1048576.0) /* below any expert op's fixed bytes: its counts and
                                         output fingerprints (all naive) */

/* The plan with one more deferred check, whose kept bytes (as a plan file may say) fill any
 * budget, queued before the first window: the static plan's reservations leave the dynamic
 * planner no guard. */
static void plan_reserve_all(const FtTrainer *tr, FtDmrEntryPlan *p)
{
    assert_true(p->nwin > 0);
    int j = -1;
    for (int i = 0; i < tr->tape.ne && j < 0; i++) {
        const FtTapeEntry *e = &tr->tape.e[i];
        if (e->kind != FT_OP_MARK && e->kind != FT_OP_MOE_EXPERT &&
            dmr_entry_deferrable(&tr->tape, e) && p->seg[i] < 0 &&
            (p->strat[i] == PLAN_NAIVE || p->strat[i] == PLAN_DEFERRED))
            j = i;
    }
    assert_true(j >= 0);
    p->strat[j] = PLAN_DEFERRED, p->kept[j] = (size_t)1 << 40;
    if (p->nwin == 1 || j <= p->win_after[1]) {
        p->window[j] = 0, p->win_after[0] = j;
        return;
    }
    /* a later stage (its first deferrable op after its second window): the first window
     * after it holds it */
    int w = 1;
    while (w < p->nwin && dmr_plan_pos(p, p->win_after[w]) < dmr_plan_pos(p, j)) w++;
    assert_true(w < p->nwin);
    p->window[j] = w;
}

/* dmr.moe_dynamic on the MoE layouts of this rank count (synthetic_plan's static plan, phases
 * 1,2,3), with a flip campaign on the expert ops: every flip detected and rolled back, the run
 * ending bitwise where the fault-free run without DMR ends; with room the dynamic planner
 * defers expert checks (and what they keep stays within its guard, all within the budget); with
 * a tiny budget every one falls back to naive and the flips are still caught, and so it does
 * when the static plan's reservations take the whole budget (its guard is 0). The job's slack
 * is the tightest rank's. */
static void test_moe_dynamic(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_WARN);
    int configs = 0;
    g_synthetic = true, g_plan_edit = NULL; /* not what a failed test left */
    for (int li = 0; li < NLAYOUTS; li++) {
        const Layout *l = &g_layouts[li];
        if (!runs_here(l) || !l->experts) continue;
        FtConfig c0 = cfg_of(l, FT_DMR_OFF, DYN_STEPS);
        FtModel ref;
        FtDmrStats none;
        train_layout(&c0, NULL, &ref, &none);
        for (int tiny = 0; tiny < 3; tiny++) {
            double mb = tiny == 1 ? DYN_TINY_MB : DYN_BUDGET_MB;
            g_plan_edit = tiny == 2 ? plan_reserve_all : NULL;
            char text[256];
            snprintf(text, sizeof text, "; dynamic campaign: %s\nsdc-random count=%d seed=%d "
                     "steps=1-%d target=both ops=moe_expert\n", l->name, DYN_FLIPS,
                     3000 + 10 * li + tiny, DYN_STEPS);
            FtConfig c = cfg_of(l, FT_DMR_PLANNED, DYN_STEPS);
            c.dmr.phases = FT_DMR_PHASES_123, c.dmr.deferred_mb = mb, c.dmr.moe_dynamic = true;
            FtModel m;
            FtDmrStats s;
            train_layout(&c, text, &m, &s);
            if (ft_test_rank() == 0)
                printf("  %-5s %s budget: %lld flips, %lld detected; dynamic deferred %lld (in "
                       "windows %lld) naive %lld; dynamic kept at most %lld of %lld bytes, all "
                       "%lld; routed bytes %.1f%% of capacity-sized\n", l->name,
                       tiny == 0 ? "room" : tiny == 1 ? "tiny" : "reserved", s.injected, s.detected,
                       s.dyn_deferred, s.dyn_windowed, s.dyn_naive, s.dyn_kept_peak, s.dyn_guard,
                       s.kept_peak, 100.0 * (double)s.dyn_bytes / (double)(s.dyn_cap_bytes + 1));
            assert_all(g_covered && g_dyn_left > 0); /* the static plan left them to us */
            assert_all(s.injected == DYN_FLIPS && s.not_fired == 0);
            assert_all(s.detected == s.injected && s.missed == 0 && s.rolled_back == s.injected);
            assert_all(s.unchecked == 0 && s.attempts == DYN_STEPS + s.redone);
            long long budget = (long long)(mb * 1048576.0);
            assert_all(s.kept_peak <= budget && s.dyn_guard <= budget);
            assert_all(s.dyn_slack >= 0 && s.dyn_kept_peak <= s.dyn_guard); /* on every rank */
            assert_all(s.dyn_bytes > 0 && s.dyn_bytes <= s.dyn_cap_bytes); /* rows <= capacity */
            /* the job's slack is the tightest rank's */
            assert_all(s.dyn_slack <= g_mine.dyn_slack);
            assert_true(ft_all(s.dyn_slack != g_mine.dyn_slack) == 0);
            if (tiny) assert_all(s.dyn_deferred == 0 && s.dyn_naive > 0);
            else assert_all(s.dyn_deferred > 0);
            if (tiny == 2) assert_all(s.dyn_guard == 0); /* though the budget had room */
            assert_all(same_state(&m, &ref));
            model_free(&m);
            configs++;
        }
        model_free(&ref);
    }
    g_synthetic = false, g_plan_edit = NULL;
    if (!configs) skip();
}

/* Rewrites the version 2 plan file src of a one-micro-batch plan as version 1 wrote it (no
 * micro_batches, windows "after ENTRY", op lines without MB) into dst. */
static void plan_as_v1(const char *src, const char *dst)
{
    FILE *f = fopen(src, "r"), *o = fopen(dst, "w");
    assert_non_null(f);
    assert_non_null(o);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *tok[24], *save = NULL;
        int nt = 0;
        if (line[0] == '#') {
            fputs(line, o);
            continue;
        }
        for (char *t = strtok_r(line, " \n", &save); t && nt < 24; t = strtok_r(NULL, " \n", &save))
            tok[nt++] = t;
        if (nt == 0) {
            fputc('\n', o);
            continue;
        }
        int drop = -1, drop2 = -1;
        if (nt == 2 && !strcmp(tok[0], "ftllm-dmr-plan")) tok[1] = "1";
        if (nt == 8 && !strcmp(tok[0], "tape")) drop = 6, drop2 = 7;
        if (!strcmp(tok[0], "window")) drop = 4, drop2 = 5;
        if (!strcmp(tok[0], "op")) drop = 2;
        for (int k = 0, first = 1; k < nt; k++)
            if (k != drop && k != drop2) fprintf(o, "%s%s", first ? "" : " ", tok[k]), first = 0;
        fputc('\n', o);
    }
    fclose(f);
    fclose(o);
}

/* A plan written and read back is the same plan; the reader checks it against the tapes. And
 * `ftllm plan`'s table says what the plan holds: every execution once, its numbers in ms. */
/* text written to bpath and read back as a plan of tr's tapes for "rank 0 of 1 layout x":
 * dmr_plan_read's return (its message in err); the file removed. */
static int read_plan_text(FtTrainer *tr, const char *bpath, const char *text, char *err,
                          size_t errlen)
{
    FILE *f = fopen(bpath, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    FtDmrEntryPlan o;
    int rc = dmr_plan_read(&o, &tr->tape, &tr->opt_tape, bpath, "rank 0 of 1 layout x", 0, err,
                           errlen);
    if (rc == 0) dmr_plan_free(&o);
    unlink(bpath);
    return rc;
}

static void test_plan_file_roundtrip(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[3], FT_DMR_PLANNED, 1); /* pp2's settings, on one rank */
    c.parallel.pp = 1;
    FtGrid g;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(grid_create(&g, ft_test_comm(), 1, 1, 1, 1, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init_grid(&tr, &c, &m, &g, &src, NULL);
    FtDmrEntryPlan p, q;
    synthetic_plan(&tr, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3, 1 << 16, false, &p);
    assert_false(p.has_order); /* the synthetic profile has no sequence */
    p.has_order = true, p.order_s = 12.5e-3;
    char path[64];
    ft_tmpfile("", 0, path);
    assert_int_equal(dmr_plan_write(&p, &tr.tape, &tr.opt_tape, path, "rank 0 of 1 layout x",
                                    err, sizeof err), 0);
    assert_int_equal(dmr_plan_read(&q, &tr.tape, &tr.opt_tape, path, "rank 0 of 1 layout x", 0, err,
                                   sizeof err), 0);
    assert_int_equal(q.n, p.n);
    assert_int_equal(q.nwin, p.nwin);
    assert_int_equal(q.nseg, p.nseg);
    assert_memory_equal(q.strat, p.strat, sizeof *p.strat * (size_t)p.n);
    assert_memory_equal(q.seg, p.seg, sizeof *p.seg * (size_t)p.n);
    assert_memory_equal(q.window, p.window, sizeof *p.window * (size_t)p.n);
    assert_memory_equal(q.win_after, p.win_after, sizeof *p.win_after * (size_t)p.nwin);
    /* every number, to the file's precision (6 decimals of a millisecond) */
    for (int i = 0; i < p.n; i++) {
        if (p.strat[i] < 0) continue;
        assert_true(q.kept[i] == p.kept[i]);
        assert_true(fabs(q.time[i] - p.time[i]) < 1e-9 && fabs(q.cost[i] - p.cost[i]) < 1e-9);
    }
    { /* what `ftllm plan` prints: the table, one row per execution with a strategy, each naming
         its entry, micro-batch, strategy, window and segment, and its time and cost in ms (4
         decimals); then the two summary lines, the counts and times of dmr_plan_totals in ms */
        char *txt = NULL;
        size_t len = 0;
        FILE *ms = open_memstream(&txt, &len);
        assert_non_null(ms);
        dmr_plan_print(ms, &p, &tr.tape, &tr.opt_tape, true);
        fclose(ms);
        int nplanned = 0;
        for (int s = 0; s < p.n; s++) nplanned += p.strat[s] >= 0;
        FtDmrPlanTotals t;
        dmr_plan_totals(&p, &t);
        double ob, lb = dmr_plan_bounds(&p, p.step_s, &ob);
        char want[512];
        snprintf(want, sizeof want, "phase 1 piggyback %d op executions (%.3f ms hidden",
                 t.ops[PLAN_PIGGYBACK], 1e3 * t.time[PLAN_PIGGYBACK]);
        assert_non_null(strstr(txt, want));
        snprintf(want, sizeof want, "phase 2 agc %d segment%s, %d (%.3f ms in PP windows",
                 t.segments, t.segments == 1 ? "" : "s", t.ops[PLAN_AGC], 1e3 * t.time[PLAN_AGC]);
        assert_non_null(strstr(txt, want));
        snprintf(want, sizeof want, "phase 3 deferred %d (%.3f ms in windows); naive %d (%.3f ms)",
                 t.ops[PLAN_DEFERRED], 1e3 * t.time[PLAN_DEFERRED], t.ops[PLAN_NAIVE],
                 1e3 * t.time[PLAN_NAIVE]);
        assert_non_null(strstr(txt, want));
        assert_int_equal(t.ops[PLAN_PIGGYBACK] + t.ops[PLAN_AGC] + t.ops[PLAN_DEFERRED] +
                             t.ops[PLAN_NAIVE],
                         nplanned);
        snprintf(want, sizeof want, "plan: windows %d (%.3f ms per step, %d used", p.nwin,
                 1e3 * t.window_s, t.windows_used);
        assert_non_null(strstr(txt, want));
        snprintf(want, sizeof want, "predicted overhead %.3f ms per step = %.1f%% of the profiled "
                 "step %.3f ms; lower bound %.1f%% (checker time not on recomputation %.3f ms",
                 1e3 * p.overhead, 100 * p.overhead / p.step_s, 1e3 * p.step_s, 100 * lb,
                 1e3 * t.exposed_s);
        assert_non_null(strstr(txt, want));
        snprintf(want, sizeof want, ", %.1f%% in time order (a check runs after its op", 100 * ob);
        assert_non_null(strstr(txt, want)); /* has_order: set above */
        assert_true(p.step_s > 0 && p.overhead > 0 && lb >= 0 && ob > lb && ob < 1);
        /* the table's rows (strtok_r cuts txt: after the summary's checks) */
        int rows = 0;
        char *seen = calloc((size_t)p.n + 1, 1);
        assert_non_null(seen);
        char *save = NULL;
        for (char *ln = strtok_r(txt, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(ln, " entry", 6) || !strncmp(ln, "plan: ", 6)) continue; /* not rows */
            int e, mb, layer, seg = -1;
            char op[40], phase[16], strat[16], win[16], sg[16];
            double t_ms, c_ms;
            assert_int_equal(sscanf(ln, "%d %d %39s %15s %d %15s %15s %15s %lf %lf", &e, &mb, op,
                                    phase, &layer, strat, win, sg, &t_ms, &c_ms), 10);
            if (strcmp(sg, "-")) seg = atoi(sg);
            int hit = -1;
            for (int s = 0; s < p.n && hit < 0; s++) {
                int mi, i = dmr_plan_entry(&p, s, &mi);
                if (p.strat[s] < 0 || seen[s] || i != e || mi != mb) continue;
                hit = s;
            }
            assert_true(hit >= 0); /* an execution of the plan, not printed before */
            seen[hit] = 1, rows++;
            assert_string_equal(strat, planner_strategy_name(p.strat[hit]));
            assert_int_equal(seg, p.seg[hit]);
            assert_true(p.window[hit] < 0 ? !strcmp(win, "-")
                                          : atoi(win + strcspn(win, "0123456789")) ==
                                                p.window[hit]);
            assert_true(fabs(t_ms - 1e3 * p.time[hit]) <= 5.1e-5 &&
                        fabs(c_ms - 1e3 * p.cost[hit]) <= 5.1e-5);
        }
        assert_true(rows == nplanned && rows > 0);
        free(seen), free(txt);
    }
    assert_memory_equal(q.win_kind, p.win_kind, sizeof *p.win_kind * (size_t)p.nwin);
    assert_memory_equal(q.win_use, p.win_use, sizeof *p.win_use * (size_t)p.nwin);
    for (int w = 0; w < p.nwin; w++)
        assert_true(fabs(q.win_len[w] - p.win_len[w]) < 1e-9 &&
                    fabs(q.win_used[w] - p.win_used[w]) < 1e-9);
    assert_true(q.budget_mb == p.budget_mb && q.profile_steps == p.profile_steps);
    assert_true(fabs(q.step_s - p.step_s) < 1e-9 && fabs(q.overhead - p.overhead) < 1e-9);
    assert_true(q.tape_hash == p.tape_hash);
    assert_true(p.pre_bwd_s == 0.5 && fabs(q.pre_bwd_s - 0.5) < 1e-9); /* prebwd_ms */
    assert_true(q.has_order && fabs(q.order_s - 12.5e-3) < 1e-12);   /* order_ms */
    assert_true(p.has_idle && p.idle_s > 0);                          /* idle_ms */
    assert_true(q.has_idle && fabs(q.idle_s - p.idle_s) < 1e-9);
    { /* the budget line's optional fields: a bad value or order is refused with its line */
        char idle[64];
        snprintf(idle, sizeof idle, " idle_ms %.6f", 1e3 * p.idle_s);
        const char *bad[][2] = {{" order_ms 12.500000", " order_ms -1"},
                                {" order_ms 12.500000", " order_ms x"},
                                {" order_ms 12.500000", " order_ms 1 order_ms 2"},
                                {" order_ms 12.500000", " order_ms"},
                                {" prebwd_ms 500.000000", " prebwd_ms -2"},
                                {idle, " idle_ms -1"},
                                {idle, " idle_ms 1 idle_ms 2"},
                                {idle, " idle_ms 1 prebwd_ms 2"},
                                {" order_ms 12.500000", " prebwd_ms 2"}, /* twice */
                                {idle, " idle_ms"}};
        static char buf[1 << 20], mod[1 << 20];
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t nb = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[nb] = 0;
        char bpath[80];
        snprintf(bpath, sizeof bpath, "%s.bad", path);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            char *a = strstr(buf, bad[b][0]);
            assert_non_null(a);
            size_t pre = (size_t)(a - buf);
            snprintf(mod, sizeof mod, "%.*s%s%s", (int)pre, buf, bad[b][1], a + strlen(bad[b][0]));
            assert_int_equal(read_plan_text(&tr, bpath, mod, err, sizeof err), -1);
            assert_non_null(strstr(err, "[order_ms X]"));
            assert_non_null(strstr(err, ":7: ")); /* the budget line */
        }
        /* a window line's kind and use: a bad word is refused, quoted, with its line */
        char *wl = strstr(buf, "\nwindow ");
        assert_non_null(wl);
        wl++;
        int line = 1;
        for (const char *ch = buf; ch < wl; ch++) line += *ch == '\n';
        const char *eol = strchr(wl, '\n');
        const char *field[2] = {" kind ", " use "}, *word[2] = {"sideways", "twice"};
        const char *want[2] = {"window kind 'sideways': expected pp or intra",
                               "window use 'twice': expected -, agc or deferred"};
        for (int k = 0; k < 2; k++) {
            const char *v = strstr(wl, field[k]);
            assert_true(v && v < eol);
            v += strlen(field[k]);
            snprintf(mod, sizeof mod, "%.*s%s%s", (int)(v - buf), buf, word[k],
                     v + strcspn(v, " \n"));
            assert_int_equal(read_plan_text(&tr, bpath, mod, err, sizeof err), -1);
            char msg[256];
            snprintf(msg, sizeof msg, "%s:%d: %s", bpath, line, want[k]);
            if (!strstr(err, msg)) fprintf(stderr, "got: %s\nwant: %s\n", err, msg);
            assert_non_null(strstr(err, msg));
        }
    }
    assert_int_equal(q.fwd_end, tr.tape.fwd_end);
    assert_int_equal(p.fwd_end, tr.tape.fwd_end);
    { /* a version 1 file (one strategy per entry, entry order) still reads: the same plan */
        char v1[80];
        snprintf(v1, sizeof v1, "%s.v1", path);
        plan_as_v1(path, v1);
        FtDmrEntryPlan o;
        int rc = dmr_plan_read(&o, &tr.tape, &tr.opt_tape, v1, "rank 0 of 1 layout x", 4, err,
                               sizeof err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
        assert_true(o.ninst == 1 && o.n == p.n && !o.pos && o.nwin == p.nwin);
        assert_memory_equal(o.strat, p.strat, sizeof *p.strat * (size_t)p.n);
        assert_memory_equal(o.win_after, p.win_after, sizeof *p.win_after * (size_t)p.nwin);
        assert_true(dmr_plan_held_peak(&o, NULL) == dmr_plan_held_peak(&p, NULL));
        assert_true(dmr_plan_slot(&o, 3, 2) == 3); /* every micro-batch's execution: the entry's */
        dmr_plan_free(&o);
        unlink(v1);
    }
    { /* a plan written before prebwd_ms, order_ms and idle_ms existed still reads, without */
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        static char buf[1 << 20];
        size_t nb = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[nb] = 0;
        char *a = strstr(buf, " prebwd_ms "), *b = a ? strchr(a, '\n') : NULL;
        assert_non_null(b);
        memmove(a, b, strlen(b) + 1);
        f = fopen(path, "w");
        fputs(buf, f);
        fclose(f);
        FtDmrEntryPlan o;
        assert_int_equal(dmr_plan_read(&o, &tr.tape, &tr.opt_tape, path, "rank 0 of 1 layout x", 0,
                                       err, sizeof err), 0);
        assert_true(o.pre_bwd_s == 0 && !o.has_order && !o.has_idle && o.n == p.n);
        dmr_plan_free(&o);
    }
    int n[4] = {0};
    for (int i = 0; i < p.n; i++)
        if (p.strat[i] >= 0) n[p.strat[i]]++;
    assert_true(n[PLAN_PIGGYBACK] > 0 && n[PLAN_NAIVE] > 0 && n[PLAN_DEFERRED] > 0);
    /* the per-op costs add up to the overhead; a deferred op costs its bookkeeping */
    double sum = 0;
    for (int i = 0; i < p.n; i++) {
        if (p.strat[i] < 0) continue;
        sum += p.cost[i];
        if (p.strat[i] == PLAN_DEFERRED) assert_true(p.cost[i] > 0 && p.cost[i] < p.time[i]);
        if (p.strat[i] == PLAN_PIGGYBACK && p.seg[i] < 0) assert_true(p.cost[i] == 0);
    }
    assert_true(fabs(sum - p.overhead) <= 1e-9 * p.overhead);
    assert_int_equal(q.phases, p.phases);
    /* dmr.phases = paper: written as "paper", read back as such */
    FtDmrEntryPlan pp;
    dmr_plan_free(&q);
    synthetic_plan(&tr, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER, 1 << 16, false, &pp);
    assert_int_equal(dmr_plan_write(&pp, &tr.tape, &tr.opt_tape, path, "rank 0 of 1 layout x",
                                    err, sizeof err), 0);
    assert_int_equal(dmr_plan_read(&q, &tr.tape, &tr.opt_tape, path, "rank 0 of 1 layout x", 0, err,
                                   sizeof err), 0);
    assert_int_equal(q.phases, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER);
    assert_true(pp.overhead < p.overhead); /* free bookkeeping under the paper's rules */
    dmr_plan_free(&pp);
    /* another rank's line is refused, naming the line */
    dmr_plan_free(&q);
    assert_int_equal(dmr_plan_read(&q, &tr.tape, &tr.opt_tape, path, "rank 1 of 2 layout x", 0, err,
                                   sizeof err), -1);
    char want[160];
    snprintf(want, sizeof want, "%s:5: 'rank 0 of 1 layout x': this plan is for another", path);
    assert_true(strncmp(err, want, strlen(want)) == 0);
    unlink(path);
    dmr_plan_free(&p), dmr_plan_free(&q);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* dmr_plan_build's windows: a wait measured after entry i opens a window after entry i, of the
 * wait's kind, its length per step scaled by step_s / wall_s (the profile's waits stretched by
 * its naive checks); a pipeline wait and another at the same place are two windows, and the
 * plan file carries them (windows in order, ties allowed). Then the waits after the last
 * micro-batch op in time order (below). */
static void test_plan_windows(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, a = 5, b = mt->fwd_end + 3;
    while (mt->e[b].kind == FT_OP_MARK) b++; /* the profiler books a wait after an op */
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 2, pf.step_s = 2.0, pf.wall_s = 4.0; /* a step: 1 s without its checks, 2 s with */
    for (int i = 0; i < n; i++) pf.time[i] = 2e-3, pf.fp[i] = 2e-5;
    pf.wait_pp[a + 1] = 0.6;                             /* after entry a, over the 2 steps */
    pf.wait_pp[b + 1] = 0.2, pf.wait_other[b + 1] = 0.4; /* after entry b, both kinds */
    pf.pre_bwd_s = 0.6; /* the wait after a, before the first backward op: scaled too */
    int after[3] = {a, b, b}, kind[3] = {PLAN_WIN_PP, PLAN_WIN_PP, PLAN_WIN_INTRA};
    double len[3] = {0.15, 0.05, 0.1}; /* 0.6 s / 2 steps x (2 s / 4 s) */
    char path[64], err[512];
    ft_tmpfile("", 0, path);
    for (int all = 0; all < 2; all++) { /* phase 1 alone uses no window */
        FtDmrEntryPlan p, q;
        int phases = all ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 : PLAN_PHASE1;
        assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 20, phases, &p), 0);
        assert_int_equal(p.nwin, 3);
        for (int w = 0; w < 3; w++) {
            assert_int_equal(p.win_after[w], after[w]);
            assert_int_equal(p.win_kind[w], kind[w]);
            assert_true(fabs(p.win_len[w] - len[w]) < 1e-12);
            if (!all) assert_int_equal(p.win_use[w], 0);
        }
        assert_true(fabs(p.step_s - 1.0) < 1e-12 && fabs(p.pre_bwd_s - 0.15) < 1e-12);
        /* the file carries both windows after entry b, and what each is used for */
        assert_int_equal(dmr_plan_write(&p, mt, ot, path, "rank 0 of 1 layout x", err,
                                        sizeof err), 0);
        int rc = dmr_plan_read(&q, mt, ot, path, "rank 0 of 1 layout x", 0, err, sizeof err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
        assert_int_equal(q.nwin, 3);
        assert_memory_equal(q.win_after, after, sizeof after);
        assert_memory_equal(q.win_kind, kind, sizeof kind);
        assert_memory_equal(q.win_use, p.win_use, sizeof *p.win_use * 3);
        dmr_plan_free(&p), dmr_plan_free(&q);
    }
    dmr_profile_free(&pf);
    /* With the step in time order (two micro-batches of the op entries, then the optimizer's):
     * a plan slot per micro-batch, one window per wait before an execution, opening after the
     * execution before it (its slot: micro-batch m's entry i is m x entries + i). The waits
     * that came after the rank's last micro-batch op keep their length, the others are scaled.
     * A pipeline wait of 0.6 s before micro-batch 0's first op after entry a; `before` s of
     * other waits before micro-batch 1's first op, 0.6 - before before the optimizer's first.
     * idle_s (issue 10's bound) scales every wait. */
    assert_true(mt->e[a].kind != FT_OP_MARK);
    int first = -1, lastop = -1, nexta = -1, P = mt->ne;
    for (int j = 0; j < mt->ne; j++) {
        if (mt->e[j].kind == FT_OP_MARK) continue;
        if (first < 0) first = j;
        if (nexta < 0 && j > a) nexta = j;
        lastop = j;
    }
    for (int split = 0; split < 3; split++) {
        double before = split == 0 ? 0 : split == 1 ? 0.3 : 0.6;
        dmr_profile_init(&pf, mt->ne, ot->ne);
        pf.steps = 2, pf.step_s = 2.0, pf.wall_s = 4.0;
        for (int i = 0; i < n; i++) pf.time[i] = 2e-3, pf.fp[i] = 2e-5;
        int pos = 0, ofirst = 1;
        for (int mb = 0; mb < 2; mb++)
            for (int i = 0; i < mt->ne; i++) {
                if (mt->e[i].kind == FT_OP_MARK) continue;
                double wp = mb == 0 && i == nexta ? 0.6 : 0, wo = mb == 1 && i == first ? before : 0;
                dmr_profile_seq(&pf, pos++, i, mb, wp + wo, wp);
            }
        for (int i = 0; i < ot->ne; i++) {
            if (ot->e[i].kind == FT_OP_MARK) continue;
            dmr_profile_seq(&pf, pos++, P + i, 0, ofirst ? 0.6 - before : 0, 0);
            ofirst = 0;
        }
        dmr_profile_seq(&pf, pos, -1, 0, 0, 0);
        FtDmrEntryPlan p;
        assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 20, PLAN_PHASE1, &p), 0);
        assert_true(p.ninst == 2 && p.n == 2 * mt->ne + ot->ne && p.pos);
        int wafter[3], wkind[3], nw = 0;
        double wlen[3];
        wafter[nw] = a, wkind[nw] = PLAN_WIN_PP, wlen[nw++] = 0.15; /* 0.6 / 2 steps x 1/2 */
        if (before > 0) /* after micro-batch 0's last op: scaled */
            wafter[nw] = lastop, wkind[nw] = PLAN_WIN_INTRA, wlen[nw++] = before / 2 * 0.5;
        if (before < 0.6) /* after micro-batch 1's last op: the last micro-batch op, not scaled */
            wafter[nw] = mt->ne + lastop, wkind[nw] = PLAN_WIN_INTRA, wlen[nw++] = (0.6 - before) / 2;
        assert_int_equal(p.nwin, nw);
        for (int w = 0; w < nw; w++) {
            assert_int_equal(p.win_after[w], wafter[w]);
            assert_int_equal(p.win_kind[w], wkind[w]);
            assert_true(fabs(p.win_len[w] - wlen[w]) < 1e-12);
        }
        assert_true(p.has_idle && fabs(p.idle_s - 0.3) < 1e-12); /* 1.2 s / 2 steps x 0.5 */
        /* the slots' places: micro-batch 0's ops, micro-batch 1's, the optimizer's */
        int m1, e1 = dmr_plan_entry(&p, mt->ne + first, &m1);
        assert_true(e1 == first && m1 == 1 && dmr_plan_slot(&p, first, 1) == mt->ne + first);
        assert_true(p.pos[first] == 0 && p.pos[mt->ne + first] > p.pos[lastop] &&
                    p.pos[2 * mt->ne] > p.pos[mt->ne + lastop]);
        /* the file: version 2, the same plan read back */
        FtDmrEntryPlan q;
        assert_int_equal(dmr_plan_write(&p, mt, ot, path, "rank 0 of 1 layout x", err,
                                        sizeof err), 0);
        int rc = dmr_plan_read(&q, mt, ot, path, "rank 0 of 1 layout x", 2, err, sizeof err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
        assert_true(q.ninst == 2 && q.n == p.n && q.nwin == p.nwin);
        assert_memory_equal(q.strat, p.strat, sizeof *p.strat * (size_t)p.n);
        assert_memory_equal(q.pos, p.pos, sizeof *p.pos * (size_t)p.n);
        assert_memory_equal(q.win_after, p.win_after, sizeof *p.win_after * (size_t)p.nwin);
        dmr_plan_free(&q);
        /* a run of another micro-batch count refuses it; 0 (not checked) and 2 read it */
        assert_int_equal(dmr_plan_read(&q, mt, ot, path, "rank 0 of 1 layout x", 4, err,
                                       sizeof err), -1);
        assert_non_null(strstr(err, "made for 2 micro-batches per step; this run has 4"));
        assert_int_equal(dmr_plan_read(&q, mt, ot, path, "rank 0 of 1 layout x", 0, err,
                                       sizeof err), 0);
        dmr_plan_free(&q);
        dmr_plan_free(&p);
        dmr_profile_free(&pf);
    }
    unlink(path);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* dmr_plan_held_peak, memory in time (the dynamic planner's guard is the budget less it), on a
 * hand-made plan of 6 entries: an AGC segment on entries 0-1 (boundary 10 + 20) replayed in
 * window 0, deferred checks 2 (5 bytes) and 3 (7) in window 1, 5 (100) in window 2. Held: 30 at
 * entries 0-1, 5 at 2, 12 at 3-4, 100 at 5: the peak is 100 (charging every segment and the
 * largest queue together, as until 2026-12-02, said 130); without entry 5, 30. With window 0
 * after entry 3 the segment is held beside 2 and 3: 42. */
static void test_plan_held_peak(void **state)
{
    (void)state;
    int strat[6] = {PLAN_AGC, PLAN_AGC, PLAN_DEFERRED, PLAN_DEFERRED, PLAN_NAIVE, PLAN_DEFERRED};
    int seg[6] = {0, 0, -1, -1, -1, -1}, window[6] = {0, 0, 1, 1, -1, 2};
    size_t kept[6] = {10, 20, 5, 7, 1000, 100};
    int after[3] = {1, 4, 5};
    FtDmrEntryPlan p = {.nmicro = 6, .nopt = 0, .n = 6, .strat = strat, .seg = seg,
                        .window = window, .kept = kept, .nwin = 3, .nseg = 1,
                        .win_after = after};
    unsigned char skip[6] = {0, 0, 0, 0, 0, 1};
    assert_true(dmr_plan_held_peak(&p, NULL) == 100);
    assert_true(dmr_plan_held_peak(&p, skip) == 30);
    after[0] = 3;
    assert_true(dmr_plan_held_peak(&p, skip) == 42);
    strat[1] = PLAN_PIGGYBACK, window[1] = -1; /* a piggyback member at the boundary: counted */
    assert_true(dmr_plan_held_peak(&p, skip) == 42);
}

/* dmr_plan_held_peak along a plan's time order, not its slots' order: 2 entries, 3
 * micro-batches (slot m x 2 + i), run as a pipeline's first stage runs them: F0 F1 B0 F2 B1
 * B2 (entry 0 forward, 1 backward). Micro-batch m's forward check (10, 20, 40 bytes) deferred
 * to the window after its backward, micro-batch 2's backward check (5) to the window after it
 * too. In time order F0 and F1 are held together (30), then F1 and F2 (60), then F2 and B2's
 * 5 (45): 60. In slot order (no pos) each forward would be released before the next: 45.
 * Micro-batch 0's forward deferred to the window after B2 instead: held through the step,
 * 10 + 20 + 40 = 70 at F2 and B1; without F2's check (skip), 30. */
static void test_plan_held_in_time_order(void **state)
{
    (void)state;
    int strat[6] = {PLAN_DEFERRED, PLAN_NAIVE, PLAN_DEFERRED, PLAN_NAIVE, PLAN_DEFERRED,
                    PLAN_DEFERRED};
    int seg[6] = {-1, -1, -1, -1, -1, -1}, window[6] = {0, -1, 1, -1, 2, 2};
    size_t kept[6] = {10, 1000, 20, 1000, 40, 5};
    int pos[6] = {0, 2, 1, 4, 3, 5}; /* F0 B0 | F1 B1 | F2 B2 by slot */
    int after[3] = {1, 3, 5};        /* after B0, B1, B2 (slots) */
    FtDmrEntryPlan p = {.nmicro = 2, .nopt = 0, .ninst = 3, .n = 6, .strat = strat, .seg = seg,
                        .window = window, .kept = kept, .pos = pos, .nwin = 3, .win_after = after};
    assert_true(dmr_plan_slot(&p, 1, 2) == 5 && dmr_plan_pos(&p, dmr_plan_slot(&p, 0, 1)) == 1);
    assert_true(dmr_plan_held_peak(&p, NULL) == 60);
    p.pos = NULL; /* entry order: F0 B0 F1 B1 F2 B2 */
    assert_true(dmr_plan_held_peak(&p, NULL) == 45);
    p.pos = pos, window[0] = 2;
    assert_true(dmr_plan_held_peak(&p, NULL) == 70);
    unsigned char skip[6] = {0, 0, 0, 0, 1, 0};
    assert_true(dmr_plan_held_peak(&p, skip) == 30);
}

/* The waits after the rank's last micro-batch op in time order keep their measured length,
 * each kind of them: the one before the optimizer's first entry (booked after the micro-batch
 * tape's last), the step's tail (after the optimizer's last); the wait before that last
 * micro-batch op is still scaled. Two profiled steps, step_s / wall_s = 1/2. pre_bwd_s is
 * scaled as the windows, and order_s is dmr_order_excess over the sequence's waits and tail per
 * step, scaled the same way. */
static void test_plan_end_waits(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, P = mt->ne, pos = 0, lastop = -1, prevlast = -1, lastopt = -1;
    for (int i = 0; i < mt->ne; i++)
        if (mt->e[i].kind != FT_OP_MARK) prevlast = lastop, lastop = i;
    for (int i = 0; i < ot->ne; i++)
        if (ot->e[i].kind != FT_OP_MARK) lastopt = i;
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 2, pf.step_s = 2.0, pf.wall_s = 4.0;
    for (int i = 0; i < n; i++) pf.time[i] = 2e-2, pf.fp[i] = 2e-5;
    for (int mb = 0; mb < 2; mb++) /* 0.2 s before the second micro-batch's last op */
        for (int i = 0; i < mt->ne; i++) {
            if (mt->e[i].kind == FT_OP_MARK) continue;
            double w = mb == 1 && i == lastop ? 0.2 : 0;
            dmr_profile_seq(&pf, pos++, i, mb, w, w);
        }
    for (int i = 0, f = 1; i < ot->ne; i++) /* 0.4 s before the optimizer's first op */
        if (ot->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, P + i, 0, f ? 0.4 : 0, 0), f = 0;
    dmr_profile_seq(&pf, pos, -1, 0, 0.3, 0.3); /* and a tail of 0.3 s */
    assert_true(pf.seq_done && !pf.seq_bad);
    pf.wait_pp[prevlast + 1] = 0.2, pf.wait_other[P] = 0.4, pf.wait_pp[n] = 0.3;
    pf.pre_bwd_s = 0.4;
    FtDmrEntryPlan p;
    assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 20, PLAN_PHASE1, &p), 0);
    assert_int_equal(p.ninst, 2);
    int ns = p.n;
    int after[3] = {mt->ne + prevlast, mt->ne + lastop, 2 * mt->ne + lastopt};
    int kind[3] = {PLAN_WIN_PP, PLAN_WIN_INTRA, PLAN_WIN_PP};
    double len[3] = {0.05, 0.2, 0.15}; /* 0.2 / 2 x 1/2; 0.4 / 2; 0.3 / 2 */
    assert_int_equal(p.nwin, 3);
    for (int w = 0; w < 3; w++) {
        assert_int_equal(p.win_after[w], after[w]);
        assert_int_equal(p.win_kind[w], kind[w]);
        assert_true(fabs(p.win_len[w] - len[w]) < 1e-12);
    }
    assert_true(p.has_idle && fabs(p.idle_s - 0.225) < 1e-12); /* 0.9 / 2 x 1/2 */
    assert_true(fabs(p.pre_bwd_s - 0.1) < 1e-12);
    double *w = malloc(sizeof *w * (size_t)pf.nseq);
    int *sl = malloc(sizeof *sl * (size_t)pf.nseq); /* the sequence's slots */
    assert_non_null(w);
    assert_non_null(sl);
    for (int k = 0; k < pf.nseq; k++)
        w[k] = 0.25 * pf.seq_wait[k], sl[k] = dmr_plan_slot(&p, pf.seq[k], pf.seq_inst[k]);
    double want = dmr_order_excess(p.strat, p.time, ns, sl, w, pf.nseq, 0.25 * 0.3);
    assert_true(p.has_order && want > 0 && fabs(p.order_s - want) < 1e-12);
    /* the same with every checker time doubled (bench_dmr_plan's drift), and no sequence */
    double *t2 = malloc(sizeof *t2 * (size_t)ns);
    assert_non_null(t2);
    for (int i = 0; i < ns; i++) t2[i] = 2 * p.time[i];
    double want2 = dmr_order_excess(p.strat, t2, ns, sl, w, pf.nseq, 0.25 * 0.3);
    assert_true(want2 > want && fabs(dmr_plan_order_excess(&p, &pf, 2.0) - want2) < 1e-12);
    assert_true(fabs(dmr_plan_order_excess(&p, &pf, 1.0) - p.order_s) < 1e-12);
    pf.seq_bad = true;
    assert_true(dmr_plan_order_excess(&p, &pf, 1.0) < 0 && dmr_plan_order_excess(&p, NULL, 1.0) < 0);
    free(t2);
    free(w), free(sl);
    dmr_plan_free(&p);
    dmr_profile_free(&pf);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* A plan per micro-batch keeps its budget over the whole step, counted execution by execution
 * along the time order (an oracle here: every deferred slot held from its place to its
 * window's): two micro-batches whose only long wait comes once, before the optimizer, where
 * every micro-batch's checks want to go. Under budgets from a few executions' kept bytes up,
 * the plan's peak is at most the budget and equals the oracle's, and more budget defers no
 * fewer checks. (A plan per entry kept one execution's bytes per op: it said half of this.) */
static void test_plan_budget_per_execution(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    c.train.ac = FT_AC_CHOICE_NONE; /* nothing piggybacked: every op competes for the window */
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, pos = 0;
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 1, pf.step_s = 1.0, pf.wall_s = 1.0;
    for (int i = 0; i < n; i++) pf.time[i] = 1e-3, pf.fp[i] = 1e-6;
    for (int mb = 0; mb < 2; mb++)
        for (int i = 0; i < mt->ne; i++)
            if (mt->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, i, mb, 0, 0);
    for (int i = 0, f = 1; i < ot->ne; i++) /* 10 s before the optimizer: holds everything */
        if (ot->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, mt->ne + i, 0, f ? 10 : 0, 0), f = 0;
    dmr_profile_seq(&pf, pos, -1, 0, 0, 0);
    size_t one = 0; /* the largest one execution keeps */
    for (int i = 0; i < mt->ne; i++)
        if (mt->e[i].kind != FT_OP_MARK && dmr_entry_kept(mt, i) > one) one = dmr_entry_kept(mt, i);
    int last_deferred = -1;
    for (int k = 1; k <= 64; k *= 4) {
        FtDmrEntryPlan p;
        size_t budget = (size_t)k * one;
        assert_int_equal(dmr_plan_build(&pf, mt, ot, budget, PLAN_PHASE1 | PLAN_PHASE3, &p), 0);
        assert_int_equal(p.ninst, 2);
        /* the oracle: bytes held at each place of the time order */
        int npos = 0, deferred = 0;
        for (int s = 0; s < p.n; s++) npos = p.pos[s] + 1 > npos ? p.pos[s] + 1 : npos;
        size_t peak = 0;
        for (int x = 0; x < npos; x++) {
            size_t held = 0;
            for (int s = 0; s < p.n; s++)
                if (p.strat[s] == PLAN_DEFERRED && p.pos[s] <= x &&
                    x <= p.pos[p.win_after[p.window[s]]])
                    held += p.kept[s];
            peak = held > peak ? held : peak;
        }
        for (int s = 0; s < p.n; s++) deferred += p.strat[s] == PLAN_DEFERRED;
        assert_true(peak <= budget && peak == dmr_plan_held_peak(&p, NULL));
        assert_true(deferred >= last_deferred && deferred > 0);
        last_deferred = deferred;
        dmr_plan_free(&p);
    }
    dmr_profile_free(&pf);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* A sequence the plan cannot follow per execution falls back to one slot per entry, each with
 * the time of all its executions: a replica that computed two shards in a step (SPARe after a
 * failure) runs micro-batch 0 twice; a micro-batch missing an entry; a step that ran another
 * sequence. The same profile with its sequence as recorded plans per micro-batch. */
static void test_plan_sequence_fallback(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, first = -1;
    for (int i = 0; i < mt->ne && first < 0; i++)
        if (mt->e[i].kind != FT_OP_MARK) first = i;
    for (int variant = 0; variant < 4; variant++) {
        /* 0: as recorded; 1: micro-batch 0 twice; 2: micro-batch 1 without its first op;
         * 3: a second step with another order */
        FtDmrProfile pf;
        dmr_profile_init(&pf, mt->ne, ot->ne);
        pf.steps = 1, pf.step_s = 1.0, pf.wall_s = 1.0;
        for (int i = 0; i < n; i++) pf.time[i] = 1e-3;
        for (int step = 0; step < (variant == 3 ? 2 : 1); step++) {
            int pos = 0, mbs[2] = {0, variant == 1 ? 0 : 1};
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < mt->ne; i++) {
                    if (mt->e[i].kind == FT_OP_MARK || (variant == 2 && k == 1 && i == first))
                        continue;
                    int mb = step == 1 ? 1 - mbs[k] : mbs[k];
                    dmr_profile_seq(&pf, pos++, i, mb, 0, 0);
                }
            for (int i = 0; i < ot->ne; i++)
                if (ot->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, mt->ne + i, 0, 0, 0);
            dmr_profile_seq(&pf, pos, -1, 0, 0, 0);
        }
        assert_true(pf.seq_done && pf.seq_bad == (variant == 3));
        FtDmrEntryPlan p;
        assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 20, PLAN_PHASE1, &p), 0);
        if (variant == 0) {
            assert_true(p.ninst == 2 && p.n == 2 * mt->ne + ot->ne);
            assert_true(fabs(p.time[first] - 0.5e-3) < 1e-15); /* one of its two executions */
        } else {
            assert_true(p.ninst == 1 && p.n == n);
            assert_true(fabs(p.time[first] - 1e-3) < 1e-15); /* all of them */
            for (int i = 1; i < n; i++) /* entry order */
                if (p.strat[i] >= 0 && p.strat[i - 1] >= 0) assert_true(p.pos[i] > p.pos[i - 1]);
        }
        assert_true(plan_covers(&tr, &p));
        dmr_plan_free(&p);
        dmr_profile_free(&pf);
    }
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* Last op entry of the micro-batch tape's backward (from fwd_end on) with this layer. */
static int last_bwd_of(const FtTape *mt, int layer)
{
    int last = -1;
    for (int i = mt->fwd_end; i < mt->ne; i++)
        if (mt->e[i].layer == layer && mt->e[i].kind != FT_OP_MARK) last = i;
    return last;
}

/* Phase 2 on a profile: a pipeline wait after the last backward op of the top two blocks opens
 * a PP window of that block (the block of the entry before it), where Phase 2 puts a segment of
 * the block's backward ops (the forward ones cost nothing here): two segments, numbered in
 * block order, so the later one in the file is segment 0. The per-op costs add up to the
 * overhead, boundary copies included. A wait before entry 0 opens a window after -1. The plan
 * file carries it all: phases 1,2, the windows, both segments. */
static void test_plan_agc_file(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, top = -1;
    for (int i = 0; i < mt->ne; i++)
        if (mt->e[i].layer > top) top = mt->e[i].layer;
    assert_true(top >= 1);
    int b1 = last_bwd_of(mt, top), b0 = last_bwd_of(mt, top - 1);
    assert_true(b1 >= 0 && b0 > b1);
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 1, pf.step_s = 1.0, pf.wall_s = 1.0;
    for (int i = 0; i < n; i++) {
        pf.time[i] = i < mt->fwd_end ? 0 : 1e-3;
        pf.copy[i] = 1e-5 * (1 + i % 3), pf.fp[i] = 1e-5;
    }
    pf.wait_other[0] = 5e-3, pf.wait_pp[b1 + 1] = 1e-2, pf.wait_pp[b0 + 1] = 1e-2;
    FtDmrEntryPlan p, q;
    int phases = PLAN_PHASE1 | PLAN_PHASE2;
    assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 20, phases, &p), 0);
    assert_int_equal(p.nwin, 3);
    assert_true(p.win_after[0] == -1 && p.win_after[1] == b1 && p.win_after[2] == b0);
    assert_true(p.win_use[0] == 0 && p.win_use[1] == 2 && p.win_use[2] == 2);
    assert_int_equal(p.nseg, 2);
    int seen[2] = {0}, lastseg = -1;
    for (int i = 0; i < p.n; i++) {
        if (p.seg[i] < 0) continue;
        const FtTapeEntry *e = &mt->e[i];
        assert_true(i >= mt->fwd_end && e->layer == (p.seg[i] == 0 ? top - 1 : top));
        seen[p.seg[i]]++, lastseg = p.seg[i];
    }
    assert_true(seen[0] > 1 && seen[1] > 1 && lastseg == 0); /* segments of several ops */
    double sum = 0;
    for (int i = 0; i < p.n; i++) sum += p.strat[i] >= 0 ? p.cost[i] : 0;
    assert_true(p.overhead > 0 && fabs(sum - p.overhead) <= 1e-9 * p.overhead);
    char path[64], err[512];
    ft_tmpfile("", 0, path);
    assert_int_equal(dmr_plan_write(&p, mt, ot, path, "rank 0 of 1 layout x", err, sizeof err), 0);
    int rc = dmr_plan_read(&q, mt, ot, path, "rank 0 of 1 layout x", 0, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_true(q.phases == phases && q.nseg == 2 && q.nwin == 3);
    assert_memory_equal(q.win_after, p.win_after, sizeof *p.win_after * 3);
    assert_memory_equal(q.win_use, p.win_use, sizeof *p.win_use * 3);
    assert_memory_equal(q.seg, p.seg, sizeof *p.seg * (size_t)p.n);
    assert_memory_equal(q.strat, p.strat, sizeof *p.strat * (size_t)p.n);
    unlink(path);
    dmr_plan_free(&p), dmr_plan_free(&q);
    dmr_profile_free(&pf);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* Phase 2 on a plan per micro-batch: a PP window's block is the block of the execution before
 * it, of that execution's micro-batch. Two micro-batches in the order F0 F1 B0 B1 (AC full:
 * the forward ops cost nothing), one pipeline wait after micro-batch 0's last backward op and
 * before micro-batch 1's first: its window belongs to micro-batch 0's block of that op, so the
 * one segment is of micro-batch 0's ops of that layer, all before the window. (A window
 * labelled with the next execution's micro-batch would hold a segment of micro-batch 1's
 * block, whose backward ops all come after it: no segment at all.) */
static void test_plan_agc_per_microbatch(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PLANNED, 1);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape, *ot = &tr.opt_tape;
    int n = mt->ne + ot->ne, pos = 0, lastb = -1;
    for (int i = mt->fwd_end; i < mt->ne; i++)
        if (mt->e[i].kind != FT_OP_MARK) lastb = i;
    assert_true(lastb >= 0);
    FtDmrProfile pf;
    dmr_profile_init(&pf, mt->ne, ot->ne);
    pf.steps = 1, pf.step_s = 1.0, pf.wall_s = 1.0;
    for (int i = 0; i < n; i++) {
        pf.time[i] = i < mt->fwd_end ? 0 : 1e-3;
        pf.copy[i] = 1e-5, pf.fp[i] = 1e-5;
    }
    for (int mb = 0; mb < 2; mb++) /* F0 F1 */
        for (int i = 0; i < mt->fwd_end; i++)
            if (mt->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, i, mb, 0, 0);
    bool wait = false;
    for (int mb = 0; mb < 2; mb++) /* B0, a 50 ms pipeline wait, B1 */
        for (int i = mt->fwd_end; i < mt->ne; i++)
            if (mt->e[i].kind != FT_OP_MARK) {
                double w = mb == 1 && !wait ? 5e-2 : 0;
                dmr_profile_seq(&pf, pos++, i, mb, w, w), wait = wait || w > 0;
            }
    for (int i = 0; i < ot->ne; i++)
        if (ot->e[i].kind != FT_OP_MARK) dmr_profile_seq(&pf, pos++, mt->ne + i, 0, 0, 0);
    dmr_profile_seq(&pf, pos, -1, 0, 0, 0);
    FtDmrEntryPlan p;
    assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 24, PLAN_PHASE1 | PLAN_PHASE2, &p), 0);
    assert_int_equal(p.ninst, 2);
    assert_int_equal(p.nwin, 1);
    assert_int_equal(p.win_kind[0], PLAN_WIN_PP);
    int wmb, we = dmr_plan_entry(&p, p.win_after[0], &wmb);
    assert_true(we == lastb && wmb == 0); /* after micro-batch 0's last backward op */
    assert_int_equal(p.nseg, 1);
    int members = 0;
    for (int s = 0; s < p.n; s++) {
        if (p.seg[s] < 0) continue;
        int mb, i = dmr_plan_entry(&p, s, &mb);
        assert_true(i < mt->ne && mb == 0 && mt->e[i].layer == mt->e[lastb].layer);
        assert_true(p.window[s] == 0 && p.pos[s] < p.pos[p.win_after[0]] + 1);
        members++;
    }
    assert_true(members > 1);
    dmr_plan_free(&p);
    dmr_profile_free(&pf);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* Copies the plan file src to dst with field `field` (0: "op" or "window") of the `kind` line
 * numbered num (-1: the one line of that kind) set to val, or that line left out (val NULL);
 * returns the line the reader finds wrong: the edited one, or where the dropped one was (the
 * end of the file for the last). */
static int plan_edit(const char *src, const char *dst, const char *kind, int num, int field,
                     const char *val)
{
    FILE *f = fopen(src, "r"), *o = fopen(dst, "w");
    assert_non_null(f);
    assert_non_null(o);
    char line[1024], want[32];
    if (num < 0) snprintf(want, sizeof want, "%s ", kind); /* the one line of that kind */
    else snprintf(want, sizeof want, "%s %d ", kind, num);
    int ln = 0, at = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (strncmp(line, want, strlen(want))) {
            fputs(line, o);
            continue;
        }
        at = ln;
        if (!val) continue;
        char *tok[16], *save = NULL;
        int nt = 0;
        for (char *t = strtok_r(line, " \n", &save); t && nt < 16; t = strtok_r(NULL, " \n", &save))
            tok[nt++] = t;
        assert_true(field < nt);
        tok[field] = (char *)val;
        for (int k = 0; k < nt; k++) fprintf(o, "%s%s", k ? " " : "", tok[k]);
        fputc('\n', o);
    }
    fclose(f);
    fclose(o);
    assert_true(at > 0);
    return !val && at == ln ? at - 1 : at;
}

/* The plan with that one edit is refused: "DST:LINE: ..." naming what is wrong (msg), or, with
 * msg NULL, read. */
static void plan_edited(const FtTrainer *tr, const char *src, const char *dst, const char *kind,
                        int num, int field, const char *val, const char *msg)
{
    int ln = plan_edit(src, dst, kind, num, field, val);
    FtDmrEntryPlan q;
    char err[512] = "", want[160];
    int rc = dmr_plan_read(&q, &tr->tape, &tr->opt_tape, dst, "rank 0 of 1 layout x", 0, err,
                           sizeof err);
    snprintf(want, sizeof want, "%s:%d: ", dst, ln);
    bool ok = msg ? rc == -1 && !strncmp(err, want, strlen(want)) && strstr(err, msg) : rc == 0;
    if (!ok)
        fprintf(stderr, "%s %d field %d = '%s': rc %d, '%s' (expected %s)\n", kind, num, field,
                val ? val : "(left out)", rc, err, msg ? msg : "read");
    assert_true(ok);
    dmr_plan_free(&q);
}

/* The plan reader refuses a strategy its entry does not allow (a MoE tape with AC full: its
 * routing writes integers: neither deferred nor agc), an agc op without its segment, a window
 * past the last, a window before any op of micro-batch 1, a segment on a naive op, a negative
 * time, a recomputation piggybacked apart from its forward twin, a micro-batch the plan does
 * not have, an execution's second line or one missing at the end, windows out of order, each
 * as "FILE:LINE: message"; and the planner
 * leaves the expert ops that AC recomputes piggyback under dmr.moe_dynamic (the dynamic planner
 * takes only those without a twin). */
static void test_plan_file_refusals(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_WARN);
    FtConfig c = cfg_of(&g_layouts[1], FT_DMR_PLANNED, 1); /* moe, AC full */
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    const FtTape *mt = &tr.tape;
    FtDmrEntryPlan p;
    synthetic_plan(&tr, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3, 1 << 16, true, &p);
    int twinned = 0, ints = -1, deferred = -1, naive = -1, bwd = -1, rec = -1, last = -1;
    for (int i = 0; i < p.n; i++)
        if (p.strat[i] >= 0) last = i;
    for (int i = 0; i < mt->ne; i++) {
        const FtTapeEntry *e = &mt->e[i];
        if (e->kind == FT_OP_MARK) continue;
        if (rec < 0 && e->phase == FT_PH_RECOMPUTE && e->twin >= 0 && e->twin < i &&
            p.strat[i] == PLAN_PIGGYBACK)
            rec = i;
        if (e->kind == FT_OP_MOE_EXPERT)
            assert_int_equal(p.strat[i], e->twin >= 0 ? PLAN_PIGGYBACK : PLAN_NAIVE);
        twinned += e->kind == FT_OP_MOE_EXPERT && e->twin >= 0;
        if (ints < 0 && !dmr_entry_deferrable(mt, e)) ints = i;
        if (deferred < 0 && p.strat[i] == PLAN_DEFERRED) deferred = i;
        if (naive < 0 && p.strat[i] == PLAN_NAIVE && dmr_entry_deferrable(mt, e)) naive = i;
        if (bwd < 0 && e->phase == FT_PH_BWD && p.strat[i] == PLAN_NAIVE) bwd = i;
    }
    assert_true(twinned > 0 && ints >= 0 && deferred >= 0 && naive >= 0 && bwd >= 0 && rec >= 0);
    char path[64], bad[80], err[512];
    ft_tmpfile("", 0, path);
    snprintf(bad, sizeof bad, "%s.bad", path);
    p.has_order = p.has_idle = true, p.order_s = 0.002, p.idle_s = 0.003; /* all three waits */
    assert_int_equal(dmr_plan_write(&p, mt, &tr.opt_tape, path, "rank 0 of 1 layout x", err,
                                    sizeof err), 0);
    /* fields: 2 micro-batch, 6 strategy, 8 segment, 9 time_ms, 11 cost_ms */
    plan_edited(&tr, path, bad, "op", deferred, 9, "7.5", NULL); /* an edit the reader takes */
    /* the header line ("budget_mb X phases P profile_steps N step_ms X overhead_ms X ..."):
     * each keyword and each number on its own */
    static const struct {
        int field;
        const char *val;
    } hdr[] = {{1, "lots"}, {2, "phase"}, {4, "profile"}, {5, "two"}, {5, "-1"},
               {6, "step_s"}, {7, "fast"}, {8, "overhead"}, {9, "none"},
               /* the optional waits: each a number >= 0 (seed 7's R08: a negative idle_ms
                * was taken) */
               {11, "-1"}, {13, "-0.5"}, {15, "-1"}, {15, "idle"}, {14, "idle_s"}};
    for (size_t k = 0; k < sizeof hdr / sizeof *hdr; k++)
        plan_edited(&tr, path, bad, "budget_mb", -1, hdr[k].field, hdr[k].val,
                    "expected 'budget_mb X phases P profile_steps N step_ms X overhead_ms X");
    plan_edited(&tr, path, bad, "budget_mb", -1, 3, "1,3", "phases '1,3': expected 1");
    plan_edited(&tr, path, bad, "op", ints, 6, "deferred", "writes integers");
    plan_edited(&tr, path, bad, "op", ints, 6, "agc", "writes integers"); /* agc keeps too */
    plan_edited(&tr, path, bad, "op", deferred, 6, "agc", "strategy agc needs a segment");
    plan_edited(&tr, path, bad, "op", naive, 8, "0", "only agc ops and piggyback ops");
    plan_edited(&tr, path, bad, "op", bwd, 6, "piggyback",
                "piggyback needs an AC recomputation twin");
    plan_edited(&tr, path, bad, "op", deferred, 9, "-1", "expected numbers >= 0");
    plan_edited(&tr, path, bad, "op", deferred, 11, "-0.5", "expected numbers >= 0");
    /* a recomputation piggybacked without its forward twin (or the reverse); a micro-batch the
     * plan does not have (it was made for one); a second line for an execution, or the last one
     * missing; windows out of order */
    char dup[16];
    snprintf(dup, sizeof dup, "%d", deferred);
    assert_true(last > deferred);
    plan_edited(&tr, path, bad, "op", rec, 6, "naive", "piggyback is for both or neither");
    plan_edited(&tr, path, bad, "op", deferred, 2, "1", "expected an integer in [0..0]");
    plan_edited(&tr, path, bad, "op", last, 1, dup, "a second line for the same execution");
    plan_edited(&tr, path, bad, "op", last, 0, NULL, "the file ends before the op line of entry");
    assert_true(p.nwin >= 2 && p.win_after[0] >= 0);
    plan_edited(&tr, path, bad, "window", 1, 3, "-1", "windows come in order");
    /* a window one past the last (its arrays end there), one before any op of another
     * micro-batch than 0 (the reader sets "after" to -1 from the ENTRY field alone) */
    char win[16], mid[80];
    snprintf(win, sizeof win, "%d", p.nwin);
    plan_edited(&tr, path, bad, "op", deferred, 7, win, "window '");
    snprintf(mid, sizeof mid, "%s.mid", path);
    plan_edit(path, mid, "window", 0, 3, "-1");
    plan_edited(&tr, mid, bad, "window", 0, 5, "1", "expected 'after -1 mb 0'");
    unlink(mid);
    unlink(path), unlink(bad);
    dmr_plan_free(&p);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
}

/* dmr_plan_bounds on a hand plan: entries 0 (naive) and 1 (piggyback) forward, 2 (naive) and 3
 * (deferred) backward; exposed work 2 + 5 + 4 = 11 ms, 2 of it forward; windows 6 + 3 ms. */
static void test_plan_bounds(void **state)
{
    (void)state;
    int strat[4] = {PLAN_NAIVE, PLAN_PIGGYBACK, PLAN_NAIVE, PLAN_DEFERRED};
    double time[4] = {2e-3, 3e-3, 5e-3, 4e-3}, cost[4] = {2e-3, 0, 5e-3, 1e-4};
    double len[2] = {6e-3, 3e-3}, used[2] = {0, 4e-3};
    int use[2] = {0, 3};
    FtDmrEntryPlan p = {.n = 4, .nmicro = 4, .strat = strat, .time = time, .cost = cost,
                        .nwin = 2, .win_len = len, .win_used = used, .win_use = use, .fwd_end = 2};
    FtDmrPlanTotals t;
    dmr_plan_totals(&p, &t);
    assert_true(fabs(t.exposed_s - 11e-3) < 1e-12 && fabs(t.exposed_fwd_s - 2e-3) < 1e-12);
    double ob, lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(lb - 0.2) < 1e-9 && fabs(ob - 0.2) < 1e-9); /* pre_bwd 0: the same */
    p.pre_bwd_s = 6e-3; /* the first window comes before every backward op: it holds 2 of 6 */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(lb - 0.2) < 1e-9 && fabs(ob - 0.6) < 1e-9);
    p.pre_bwd_s = 1e-3; /* shorter than the forward work: all of it holds forward checks */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(ob - 0.2) < 1e-9);
    p.pre_bwd_s = 20e-3; /* never more than the windows */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(ob - 0.9) < 1e-9);
    len[0] = 60e-3, p.pre_bwd_s = 0; /* more window than work: 0, never negative */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(lb == 0 && ob == 0);
    assert_true(dmr_plan_bounds(&p, 0, &ob) == 0 && ob == 0); /* no step: 0 */
    /* a profiled plan subtracts its idle_s (every wait scaled), not the windows' lengths */
    p.has_idle = true, p.idle_s = 1e-3;
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(lb - 1.0) < 1e-9 && fabs(ob - 1.0) < 1e-9);
    p.idle_s = 4e-3, p.pre_bwd_s = 6e-3; /* before the first backward op: at most idle_s, 4 ms,
                                             holding the 2 ms of forward checks */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(lb - 0.7) < 1e-9 && fabs(ob - 0.9) < 1e-9);
}

/* dmr_order_excess by hand: entries 0 (naive, 2 ms per step), 1 (piggyback), 2 (naive, 5 ms), 3
 * (deferred, 4 ms), two micro-batches: 0 1 0 1 then 2 3 2 3, a 5 ms wait before the first
 * execution, 1 before the second micro-batch's 0, 2 before the first 2, a 3 ms tail. Work and
 * waits are 11 ms each (issue 10's bound: 0); from the first execution of entry 2 on there are
 * 9 ms of checks (2.5 + 2 + 2.5 + 2) and only the 3 ms tail after its start: 6 ms. The profile's
 * sequence: a second step with the same executions adds its waits; a different one, or a step
 * that noted no end, marks it bad (the bound then falls back). */
static void test_order_excess(void **state)
{
    (void)state;
    int strat[4] = {PLAN_NAIVE, PLAN_PIGGYBACK, PLAN_NAIVE, PLAN_DEFERRED};
    double time[4] = {2e-3, 3e-3, 5e-3, 4e-3};
    int seq[8] = {0, 1, 0, 1, 2, 3, 2, 3}, inst[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    double wait[8] = {5e-3, 0, 1e-3, 0, 2e-3, 0, 0, 0};
    assert_true(fabs(dmr_order_excess(strat, time, 4, seq, wait, 8, 3e-3) - 6e-3) < 1e-12);
    wait[0] = 0, wait[3] = 5e-3; /* the 5 ms now after execution 2: k = 3 gives 9 - 3 */
    assert_true(fabs(dmr_order_excess(strat, time, 4, seq, wait, 8, 3e-3) - 6e-3) < 1e-12);
    wait[5] = 4e-3; /* after the first 2: from 2's first run 9 - 7, from 3's first 6.5 - 3 */
    assert_true(fabs(dmr_order_excess(strat, time, 4, seq, wait, 8, 3e-3) - 3.5e-3) < 1e-12);
    int one[1] = {2};
    double w1[1] = {50e-3}; /* a start bubble holds nothing: all 5 ms of entry 2 */
    assert_true(fabs(dmr_order_excess(strat, time, 4, one, w1, 1, 0) - 5e-3) < 1e-12);
    assert_true(dmr_order_excess(strat, time, 4, one, w1, 1, 9e-3) == 0); /* never negative */
    /* the bounds: has_order takes order_s, never below issue 10's */
    double len[1] = {11e-3}, used[1] = {0}, cost[4] = {0};
    int use[1] = {0};
    FtDmrEntryPlan p = {.n = 4, .nmicro = 4, .strat = strat, .time = time, .cost = cost,
                        .nwin = 1, .win_len = len, .win_used = used, .win_use = use, .fwd_end = 2,
                        .has_order = true, .order_s = 6e-3};
    double ob, lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(lb == 0 && fabs(ob - 0.6) < 1e-9);
    len[0] = 1e-3, p.order_s = 0; /* issue 10's: 10 ms, above a lower order_s */
    lb = dmr_plan_bounds(&p, 10e-3, &ob);
    assert_true(fabs(lb - 1.0) < 1e-9 && fabs(ob - 1.0) < 1e-9);
    /* the profile's sequence over two steps */
    FtDmrProfile pf;
    dmr_profile_init(&pf, 4, 0);
    for (int st = 0; st < 2; st++) {
        for (int k = 0; k < 8; k++)
            dmr_profile_seq(&pf, k, seq[k], inst[k], 1e-3 * (k + st), 0.5e-3 * k);
        dmr_profile_seq(&pf, 8, -1, 0, 1e-3, 0.25e-3);
    }
    assert_true(pf.seq_done && !pf.seq_bad && pf.nseq == 8);
    assert_memory_equal(pf.seq, seq, sizeof seq);
    assert_memory_equal(pf.seq_inst, inst, sizeof inst);
    for (int k = 0; k < 8; k++)
        assert_true(fabs(pf.seq_wait[k] - 1e-3 * (2 * k + 1)) < 1e-15 &&
                    fabs(pf.seq_wait_pp[k] - 1e-3 * k) < 1e-15);
    assert_true(fabs(pf.seq_tail - 2e-3) < 1e-15 && fabs(pf.seq_tail_pp - 0.5e-3) < 1e-15);
    for (int k = 0; k < 8; k++) dmr_profile_seq(&pf, k, seq[k ^ 1], inst[k ^ 1], 0, 0); /* another order */
    assert_true(pf.seq_bad);
    dmr_profile_free(&pf);
    dmr_profile_init(&pf, 4, 0);
    for (int k = 0; k < 8; k++) dmr_profile_seq(&pf, k, seq[k], inst[k], 0, 0);
    dmr_profile_seq(&pf, 8, -1, 0, 0, 0);
    for (int k = 0; k < 7; k++) dmr_profile_seq(&pf, k, seq[k], inst[k], 0, 0); /* one short */
    dmr_profile_seq(&pf, 7, -1, 0, 0, 0);
    assert_true(pf.seq_bad);
    dmr_profile_free(&pf);
    dmr_profile_init(&pf, 4, 0); /* the same entries in the same order, micro-batches swapped */
    for (int k = 0; k < 8; k++) dmr_profile_seq(&pf, k, seq[k], inst[k], 0, 0);
    dmr_profile_seq(&pf, 8, -1, 0, 0, 0);
    for (int k = 0; k < 8; k++) dmr_profile_seq(&pf, k, seq[k], 1 - inst[k], 0, 0);
    assert_true(pf.seq_bad);
    dmr_profile_free(&pf);
    dmr_profile_init(&pf, 4, 0);
    dmr_profile_seq(&pf, 1, 0, 0, 0, 0); /* a gap in the first step's positions */
    assert_true(pf.seq_bad);
    dmr_profile_free(&pf);
}

/* ---- suspects and the faults-only mode ------------------------------------------------------ */

/* Flips on the last rank in 3 steps with dmr.suspect_after = 3: that rank (and only it) is
 * suspect on every rank. With dmr.mode = off the same flips go unnoticed: injected, missed. */
static void test_suspect_and_off(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_ERROR);
    const Layout *l = dense_here();
    if (!l) skip();
    int last = ft_test_size() - 1;
    char text[256];
    snprintf(text, sizeof text,
             "sdc step=1 rank=%d op=gelu bit=31\nsdc step=2 rank=%d op=adamw:1 bit=7 "
             "target=checker\n# a comment\nsdc step=4 rank=%d op=layernorm:3 bit=0 elem=2\n",
             last, last, last);
    FtConfig c = cfg_of(l, FT_DMR_NAIVE, 5);
    c.dmr.suspect_after = 3;
    FtGrid g;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(grid_create(&g, ft_test_comm(), l->tp, l->pp, l->dp, l->ep, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtShard sh = {.tp = g.tp, .tp_rank = g.tp_rank, .pp = g.pp, .pp_rank = g.pp_rank,
                  .ep = g.ep, .ep_rank = g.ep_rank};
    FtModel m;
    model_create_sharded(&m, &mc, &sh);
    model_init_random(&m, 7);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init_grid(&tr, &c, &m, &g, &src, NULL);
    char path[64];
    ft_tmpfile(text, strlen(text), path);
    snprintf(c.faults.schedule, sizeof c.faults.schedule, "%s", path);
    FtTrainDmr *td;
    assert_all(train_dmr_setup(&td, &tr, &c, err, sizeof err) == 0);
    FtDmr *d = train_dmr_get(td);
    bool after2 = true;
    for (int s = 0; s < 5; s++) {
        FtStepInfo info;
        FtStepStatus st = train_step(&tr, &info);
        assert_all(st == (s == 0 || s == 1 || s == 3 ? FT_STEP_REDONE : FT_STEP_OK));
        if (s == 1) after2 = !dmr_is_suspect(d, last);
    }
    assert_all(after2 && dmr_is_suspect(d, last));
    for (int r = 0; r < last; r++) assert_all(!dmr_is_suspect(d, r));
    FtDmrStats st;
    train_dmr_stats(td, &st);
    assert_all(st.injected == 3 && st.detected == 3 && st.redone == 3);
    train_dmr_destroy(td);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);

    /* DMR off: the flips on primaries happen, nothing sees them, and the run ends elsewhere */
    FtConfig off = cfg_of(l, FT_DMR_OFF, 5), plain = off;
    FtModel a, b;
    FtDmrStats so, sp;
    train_layout(&off, text, &a, &so);
    train_layout(&plain, NULL, &b, &sp);
    if (ft_test_rank() == 0) unlink(path);
    /* the checker flip has no checker to land on */
    assert_all(so.injected == 2 && so.not_fired == 1 && so.detected == 0 && so.missed == 2 &&
               so.redone == 0);
    assert_all(ft_all(same_state(&a, &b)) == 0);
    model_free(&a), model_free(&b);
}

/* A run that starts after step 1 (as one resumed from a checkpoint does): the schedule's flip
 * of step 1 never fires (counted as not applied), the flip of a step it computes does. */
static void test_flip_before_start(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_ERROR);
    const Layout *l = dense_here();
    if (!l) skip();
    FtConfig c = cfg_of(l, FT_DMR_NAIVE, 4);
    const char *text = "sdc step=1 rank=0 op=gelu bit=30\nsdc step=3 rank=0 op=gelu:1 bit=30\n";
    FtModel m;
    Run r;
    run_open(&r, &c, text, &m);
    m.step = 2; /* steps 1 and 2 done */
    for (int s = 0; s < 2; s++) {
        FtStepInfo info;
        assert_all(train_step(&r.tr, &info) == (s == 0 ? FT_STEP_REDONE : FT_STEP_OK));
    }
    FtDmrStats st;
    run_close(&r, &st);
    assert_all(st.injected == 1 && st.detected == 1 && st.not_fired == 1 && st.redone == 1);
    model_free(&m);
}

/* Compares answered at the agreement, read early when dmr_set_pending_max's few are pending:
 * naive and piggyback, 3 at most, flips in steps 2 and 3 (a primary's and a checker's) are each
 * caught and their steps redone, the clean steps commit, and the run ends bitwise where DMR off
 * ends. */
static void test_pending_early(void **state)
{
    (void)state;
    log_init(ft_test_rank(), FT_LOG_ERROR);
    const Layout *l = dense_here();
    if (!l) skip();
    FtConfig c0 = cfg_of(l, FT_DMR_OFF, 4);
    FtModel ref;
    FtDmrStats s0;
    train_layout(&c0, NULL, &ref, &s0);
    const char *text = "sdc step=2 rank=0 op=gelu:1 bit=30\n"
                       "sdc step=3 rank=0 op=matmul:3 bit=29 target=checker\n";
    for (int mode = FT_DMR_NAIVE; mode <= FT_DMR_PIGGYBACK; mode++) {
        FtConfig c = cfg_of(l, mode, 4);
        FtModel m;
        Run r;
        run_open(&r, &c, text, &m);
        dmr_set_pending_max(train_dmr_get(r.td), 3);
        for (int s = 0; s < 4; s++) {
            FtStepInfo info;
            assert_all(train_step(&r.tr, &info) == (s == 1 || s == 2 ? FT_STEP_REDONE : FT_STEP_OK));
        }
        FtDmrStats st;
        run_close(&r, &st);
        assert_all(st.injected == 2 && st.detected == 2 && st.redone == 2 && st.missed == 0);
        assert_all(st.mismatches >= 2); /* piggyback: a flipped forward output also moves the
                                           fingerprints of the ops after it in its segment */
        assert_all(same_state(&m, &ref));
        model_free(&m);
    }
    model_free(&ref);
}

/* The execution number (op=KIND:N) of entry i of tape tp: entries of its kind before it, forward,
 * backward and recomputation counted alike (the first micro-batch's). */
static int nth_of(const FtTape *tp, int i)
{
    int n = 0;
    for (int j = 0; j < i; j++) n += tp->e[j].kind == tp->e[i].kind;
    return n;
}

/* Piggyback, one rank: the same bit of the same element flipped in a forward GELU's output and in
 * its recomputation's cancels out (the fingerprints agree: both flips missed), while a third flip
 * in the step is caught; the step is redone, so all three count as rolled back, and the run ends
 * where the fault-free run ends. */
static void test_rolled_back_missed(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    log_init(0, FT_LOG_ERROR);
    FtConfig c = cfg_of(&g_layouts[0], FT_DMR_PIGGYBACK, 2);
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    plan_trainer(&c, &g, &m, &tr);
    int f = -1;
    for (int i = 0; i < tr.tape.fwd_end && f < 0; i++)
        if (tr.tape.e[i].kind == FT_OP_GELU && tr.tape.e[i].twin >= 0) f = i;
    assert_true(f >= 0);
    int a = nth_of(&tr.tape, f), b = nth_of(&tr.tape, tr.tape.e[f].twin);
    train_free(&tr);
    model_free(&m);
    grid_destroy(&g);
    char text[256];
    snprintf(text, sizeof text, "sdc step=1 rank=0 op=gelu:%d elem=3 bit=20\nsdc step=1 rank=0 "
             "op=gelu:%d elem=3 bit=20\nsdc step=1 rank=0 op=adamw bit=30\n", a, b);
    FtConfig c0 = cfg_of(&g_layouts[0], FT_DMR_OFF, 2);
    FtModel ref;
    FtDmrStats s0, s;
    train_layout(&c0, NULL, &ref, &s0);
    train_layout(&c, text, &m, &s);
    assert_true(s.injected == 3 && s.detected == 1 && s.missed == 2 && s.rolled_back == 3);
    assert_true(s.redone == 1 && s.attempts == 3 && s.mismatches == 1);
    assert_true(same_state(&m, &ref));
    model_free(&m), model_free(&ref);
}

/* Who is handed to SPARe comes from the agreement's gathered counts alone. Ranks 0 .. n-1 agree
 * on steps where the last rank mismatches (d->mism set by hand, dmr_impl.h), dmr.suspect_after
 * = 2: it is handed over at its second on every rank, and again at its third (SPARe did not
 * retire it: in a run it would have left); then its replica "fails" by the fault schedule
 * (handed, not retired: nothing resets the others' view of the place) and a hot spare takes
 * the place, a fresh FtDmr on that rank alone; the spare mismatches twice and must be handed
 * over on every rank at its own second, not at its first, and the handed lists must be equal
 * everywhere (retire_suspects is collective: before, the others kept the earlier occupant's
 * flag, only the spare handed itself over, and the job hung). dmr_forget clears a place for
 * the report. agree_steps runs steps from..to (each mismatching on the last rank when bad, then
 * again clean) and, unless took is NULL, hands over the suspects into took[step]. */
static void agree_steps(FtDmr **d, FtComm *w, int from, int to, bool bad, int *took)
{
    int last = ft_test_size() - 1;
    FtExec ex;
    memset(&ex, 0, sizeof ex);
    for (int s = from; s <= to; s++) {
        int sus[8];
        dmr_step_begin(*d, s);
        if (bad && ft_test_rank() == last) (*d)->mism = 1;
        assert_all(dmr_agree(*d, &ex, w) == (bad ? 1 : 0));
        dmr_step_begin(*d, s); /* the step again, clean */
        assert_all(dmr_agree(*d, &ex, w) == 0);
        if (!took) continue; /* named, not handed over */
        int n = dmr_take_suspects(*d, sus, 8);
        assert_all(ft_same_bytes(&n, sizeof n) && (n == 0 || ft_same_bytes(sus, sizeof *sus * (size_t)n)));
        took[s] = n == 1 && sus[0] == last ? 1 : n;
    }
}

static void test_suspect_spare_place(void **state)
{
    (void)state;
    ft_require_ranks(2);
    log_init(ft_test_rank(), FT_LOG_ERROR);
    int last = ft_test_size() - 1, took[8] = {0};
    FtComm *w = comm_create_mpi(ft_test_comm(), "world");
    FtDmrCfg cfg = {.mode = FT_DMR_NAIVE, .suspect_after = 2};
    FtDmr *d = dmr_create(&cfg);
    agree_steps(&d, w, 1, 2, true, took);
    assert_all(took[1] == 0 && took[2] == 1 && dmr_is_suspect(d, last));
    agree_steps(&d, w, 3, 3, true, took); /* a third: handed again (not retired) */
    assert_all(took[3] == 1 && dmr_is_suspect(d, last));
    if (ft_test_rank() == last) { /* the hot spare: a fresh view */
        dmr_free(d);
        d = dmr_create(&cfg);
    }
    agree_steps(&d, w, 4, 5, true, took);
    assert_all(took[4] == 0 && took[5] == 1 && dmr_is_suspect(d, last));
    dmr_forget(d, last, 1);
    FtDmrStats st;
    dmr_stats(d, &st);
    assert_all(!dmr_is_suspect(d, last) && st.retired == 0);
    dmr_free(d);
    comm_destroy(w);
}

/* A suspect named at an agreement after which the grid was rebuilt before SPARe could act (a
 * process died: ULFM's recovery regrids and the step is computed again) is dropped
 * (dmr_regridded: its number is of the old world, and a hot spare may hold that place now) and
 * named again, on every rank, at its next mismatching step. */
static void test_suspect_regridded(void **state)
{
    (void)state;
    ft_require_ranks(2);
    log_init(ft_test_rank(), FT_LOG_ERROR);
    int last = ft_test_size() - 1, took[8] = {0};
    FtComm *w = comm_create_mpi(ft_test_comm(), "world");
    FtDmrCfg cfg = {.mode = FT_DMR_NAIVE, .suspect_after = 2};
    FtDmr *d = dmr_create(&cfg);
    agree_steps(&d, w, 1, 2, true, NULL); /* named at the second, not handed over yet */
    assert_all(dmr_is_suspect(d, last));
    dmr_regridded(d);
    int sus[8];
    assert_all(!dmr_is_suspect(d, last) && dmr_take_suspects(d, sus, 8) == 0);
    agree_steps(&d, w, 3, 3, false, took); /* a clean step: nothing */
    assert_all(took[3] == 0);
    agree_steps(&d, w, 4, 4, true, took); /* its third mismatch: named and handed over */
    assert_all(took[4] == 1 && dmr_is_suspect(d, last));
    dmr_free(d);
    comm_destroy(w);
}

/* A rank's own count of mismatching steps stays with it when the world shrinks (a replica
 * left: ranks numbered anew, flags dropped): with dmr.suspect_after = 2, the last rank
 * mismatches once in the world of every rank and once more in a world of its own: it is named
 * suspect there (rank 0 of that world). */
static void test_suspect_count_kept(void **state)
{
    (void)state;
    ft_require_ranks(2);
    log_init(ft_test_rank(), FT_LOG_ERROR);
    int last = ft_test_size() - 1, took[8] = {0};
    FtComm *w = comm_create_mpi(ft_test_comm(), "world");
    FtDmrCfg cfg = {.mode = FT_DMR_NAIVE, .suspect_after = 2};
    FtDmr *d = dmr_create(&cfg);
    agree_steps(&d, w, 1, 1, true, took);
    assert_all(took[1] == 0 && !dmr_is_suspect(d, last));
    comm_destroy(w);
    w = comm_create_mpi(MPI_COMM_SELF, "alone"); /* each rank in a world of its own */
    FtExec ex;
    memset(&ex, 0, sizeof ex);
    dmr_step_begin(d, 2);
    if (ft_test_rank() == last) d->mism = 1;
    assert_int_equal(dmr_agree(d, &ex, w), ft_test_rank() == last);
    assert_int_equal(dmr_is_suspect(d, 0), ft_test_rank() == last);
    assert_false(dmr_is_suspect(d, 1)); /* no rank 1 in a world of one */
    dmr_free(d);
    comm_destroy(w);
}

/* ---- a replica leaves mid-run (train_regrid) -------------------------------------------------- */

/* dp2 with naive DMR: a flip on each rank before replica 1 leaves after step 2, one on the
 * survivor after; the survivor's agreement runs over the new (one-rank) world and it ends
 * bitwise where the same run without DMR and faults ends; its suspects are of the new world. */
static bool g_regrid_suspects; /* regrid_run: the survivor's suspects were the new world's */

static void regrid_run(bool dmr, FtModel *m, FtDmrStats *st)
{
    const Layout *l = &g_layouts[4]; /* dp2 */
    FtConfig c = cfg_of(l, dmr ? FT_DMR_NAIVE : FT_DMR_OFF, 4);
    c.dmr.suspect_after = 1;
    FtGrid g, small;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(grid_create(&g, ft_test_comm(), 1, 1, 2, 1, err, sizeof err), 0);
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtShard sh = {.tp = 1, .pp = 1, .ep = 1};
    model_create_sharded(m, &mc, &sh);
    model_init_random(m, 7);
    FtBatchSource src = {ft_synth_fetch, g_dims};
    FtTrainer tr;
    train_init_grid(&tr, &c, m, &g, &src, NULL);
    const char *text = "sdc step=1 rank=1 op=attention bit=22\nsdc step=2 rank=0 op=adamw:3 bit=9 "
                       "target=checker\nsdc step=4 rank=0 op=matmul:7 bit=30\n";
    char path[64] = "";
    if (dmr) {
        ft_tmpfile(text, strlen(text), path);
        snprintf(c.faults.schedule, sizeof c.faults.schedule, "%s", path);
    }
    FtTrainDmr *td = NULL;
    assert_all(train_dmr_setup(&td, &tr, &c, err, sizeof err) == 0);
    if (path[0] && ft_test_rank() == 0) unlink(path);
    for (int s = 0; s < 2; s++) {
        FtStepInfo info;
        assert_all(train_step(&tr, &info) == (dmr ? FT_STEP_REDONE : FT_STEP_OK));
    }
    if (td) /* each rank mismatched once: both suspect (dmr.suspect_after = 1) */
        assert_all(dmr_is_suspect(train_dmr_get(td), 0) && dmr_is_suspect(train_dmr_get(td), 1));
    int rc = grid_shrink_dp(&g, 1, &small, err, sizeof err);
    memset(st, 0, sizeof *st);
    if (rc == 0) {
        train_regrid(&tr, &small);
        for (int s = 2; s < 4; s++) {
            FtStepInfo info;
            assert_true(train_step(&tr, &info) == (dmr && s == 3 ? FT_STEP_REDONE : FT_STEP_OK));
        }
        if (td) train_dmr_stats(td, st); /* over the survivors: rank 0's flips; steps 1, 2, 4 redone */
        if (td) /* ranks numbered anew, history anew: the survivor is suspect for step 4 alone, and
                   there is no rank 1 (asserted after the clean-up, which is collective) */
            g_regrid_suspects = dmr_is_suspect(train_dmr_get(td), 0) &&
                                !dmr_is_suspect(train_dmr_get(td), 1);
    }
    train_dmr_destroy(td);
    train_free(&tr);
    if (rc == 0) grid_destroy(&small);
    grid_destroy(&g);
}

static void test_regrid(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    log_init(ft_test_rank(), FT_LOG_ERROR);
    FtModel a, b;
    FtDmrStats sa, sb;
    g_regrid_suspects = false;
    regrid_run(true, &a, &sa);
    regrid_run(false, &b, &sb);
    if (ft_test_rank() == 0) {
        assert_true(sa.injected == 2 && sa.detected == 2 && sa.redone == 3 && sa.attempts == 7);
        assert_true(g_regrid_suspects);
        assert_true(same_state(&a, &b));
    }
    model_free(&a), model_free(&b);
}

/* dmr_pipe_rank_build on a real pp 2 tape (2 ranks), for 1F1B and GPipe over 3 micro-batches: a
 * profile in the schedule's time order (entry i of stage s takes (1 + i % 3)(s + 1) ms, no
 * waits but one before each schedule op's part: the windows; a profile's time is summed over
 * the micro-batches, so an execution takes a third) planned, each stage's part built, gathered and simulated: each stage sends and
 * receives one activation or gradient per micro-batch (the first stage sends activations and
 * receives gradients, the last the other way), a receive falls on the first execution of its
 * part, a send on the last; without checks, and with every check at once (each execution twice),
 * the simulated step equals a recursion over the two schedules' parts (each starts at the later
 * of its stage's end and its message's arrival; after both stages' last micro-batch op they
 * meet, then each runs its optimizer). Then the gathered stages refine from their plans. */
static void test_pipe_build(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    log_init(ft_test_rank(), FT_LOG_WARN);
    enum { M = 3 };
    for (int kind = 0; kind < 2; kind++) {
        FtConfig c = cfg_of(&g_layouts[3], FT_DMR_PLANNED, 1); /* pp2, AC full */
        c.parallel.microbatches = M;
        c.parallel.schedule = kind; /* 1f1b, gpipe */
        FtModel m;
        Run r;
        run_open(&r, &c, NULL, &m);
        const FtTape *mt = &r.tr.tape, *ot = &r.tr.opt_tape;
        int st = r.g.pp_rank;
        FtPipeOp ops[2 * M];
        pipeline_schedule(kind ? FT_PIPE_GPIPE : FT_PIPE_1F1B, 2, st, M, 0, ops);
        FtDmrProfile pf;
        dmr_profile_init(&pf, mt->ne, ot->ne);
        pf.steps = 1, pf.step_s = pf.wall_s = 1.0;
        for (int i = 0; i < mt->ne + ot->ne; i++) pf.time[i] = 1e-3 * (1 + i % 3) * (st + 1);
        double part[2 * M + 1] = {0}; /* this stage's parts' seconds, then its optimizer's */
        int pos = 0;
        for (int o = 0; o < 2 * M; o++) { /* a pipeline wait before each part: the windows */
            int lo = ops[o].fwd ? 0 : mt->fwd_end, hi = ops[o].fwd ? mt->fwd_end : mt->ne;
            double w = 5e-4;
            for (int i = lo; i < hi; i++)
                if (mt->e[i].kind != FT_OP_MARK)
                    dmr_profile_seq(&pf, pos++, i, ops[o].mb, w, w), part[o] += pf.time[i] / M, w = 0;
        }
        for (int i = 0; i < ot->ne; i++)
            if (ot->e[i].kind != FT_OP_MARK)
                dmr_profile_seq(&pf, pos++, mt->ne + i, 0, 0, 0), part[2 * M] += pf.time[mt->ne + i];
        dmr_profile_seq(&pf, pos, -1, 0, 0, 0);
        FtDmrEntryPlan p;
        assert_int_equal(dmr_plan_build(&pf, mt, ot, 1 << 24, PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3, &p), 0);
        FtPipeRank mine;
        assert_all(dmr_pipe_rank_build(&pf, &p, mt, ot, st, 2, 1 << 24, &mine) == 0);
        int nrecv = 0, nsend = 0, good = 1;
        for (int k = 0; k < mine.n; k++) {
            nrecv += mine.recv[k] >= 0, nsend += mine.send[k] >= 0;
            int mb, e = dmr_plan_entry(&p, mine.slot[k], &mb);
            /* a receive opens its part: the execution before it is of another part */
            if (mine.recv[k] >= 0 && k > 0) {
                int mb2, e2 = dmr_plan_entry(&p, mine.slot[k - 1], &mb2);
                good &= mb2 != mb || (e2 < mt->fwd_end) != (e < mt->fwd_end);
            }
            if (mine.send[k] >= 0 && k + 1 < mine.n) { /* a send closes its part */
                int mb2, e2 = dmr_plan_entry(&p, mine.slot[k + 1], &mb2);
                good &= mb2 != mb || (e2 < mt->fwd_end) != (e < mt->fwd_end) || e2 >= mt->ne;
            }
        }
        assert_all(good && nrecv == M && nsend == M);
        { /* waits other than the pipeline's: per step, stretched by the profile's step_s /
           * wall_s (a profiled step under a second: 0.25 s without its checks, 0.5 s with) */
            FtDmrProfile q = pf;
            q.seq_wait = malloc((size_t)pf.nseq * sizeof *q.seq_wait);
            for (int k = 0; k < pf.nseq; k++) q.seq_wait[k] = pf.seq_wait[k] + 1e-3 * (1 + k % 2);
            q.step_s = 0.25, q.wall_s = 0.5;
            FtPipeRank w;
            assert_all(dmr_pipe_rank_build(&q, &p, mt, ot, st, 2, 1 << 24, &w) == 0);
            good = w.n == mine.n && w.last_micro == mine.last_micro && w.last_micro > 0;
            for (int k = 0; good && k <= w.last_micro; k++)
                good &= fabs(w.wait[k] - (mine.wait[k] + 0.5e-3 * (1 + k % 2))) < 1e-15;
            assert_all(good);
            dmr_pipe_rank_free(&w);
            free(q.seq_wait);
        }
        /* gather both stages' parts (padded to the longer) and their schedules' seconds */
        double *buf;
        long long len = (long long)dmr_pipe_rank_pack(&mine, &buf), most;
        MPI_Allreduce(&len, &most, 1, MPI_LONG_LONG, MPI_MAX, ft_test_comm());
        double *pad = calloc((size_t)most, sizeof *pad), *all = malloc(2 * (size_t)most * sizeof *all);
        memcpy(pad, buf, (size_t)len * sizeof *buf);
        MPI_Allgather(pad, (int)most, MPI_DOUBLE, all, (int)most, MPI_DOUBLE, ft_test_comm());
        double parts[2][2 * M + 1];
        MPI_Allgather(part, 2 * M + 1, MPI_DOUBLE, parts, 2 * M + 1, MPI_DOUBLE, ft_test_comm());
        FtPipeOp sched[2][2 * M];
        for (int s = 0; s < 2; s++) pipeline_schedule(kind ? FT_PIPE_GPIPE : FT_PIPE_1F1B, 2, s, M, 0, sched[s]);
        FtPipeRank rr[2];
        for (int s = 0; s < 2; s++)
            assert_int_equal(dmr_pipe_rank_unpack(all + (size_t)s * (size_t)most, (size_t)most, &rr[s]), 0);
        for (int twice = 0; twice < 2; twice++) {
            double t[2] = {0, 0}, act[M], grad[M];
            int at[2] = {0, 0}, left = 4 * M;
            for (int q = 0; q < M; q++) act[q] = grad[q] = -1;
            while (left) { /* the recursion over the two schedules */
                int moved = 0;
                for (int s = 0; s < 2; s++) {
                    if (at[s] == 2 * M) continue;
                    FtPipeOp op = sched[s][at[s]];
                    double *in = op.fwd ? (s == 1 ? act : NULL) : (s == 0 ? grad : NULL);
                    if (in && in[op.mb] < 0) continue;
                    if (in && in[op.mb] > t[s]) t[s] = in[op.mb];
                    t[s] += (twice ? 2 : 1) * parts[s][at[s]];
                    if (op.fwd && s == 0) act[op.mb] = t[s];
                    if (!op.fwd && s == 1) grad[op.mb] = t[s];
                    at[s]++, left--, moved = 1;
                }
                assert_true(moved);
            }
            double T = fmax(t[0], t[1]), want = 0;
            for (int s = 0; s < 2; s++) want = fmax(want, T + (twice ? 2 : 1) * parts[s][2 * M]);
            for (int s = 0; s < 2; s++) /* every execution's slot: no check, or at once */
                for (int k = 0; k < rr[s].n; k++) rr[s].strat[rr[s].slot[k]] = twice ? PLAN_NAIVE : -1;
            FtPipeResult x = dmr_pipe_sim(rr, 2);
            assert_all(x.ok && fabs(x.step - want) < 1e-9 * want);
        }
        for (int s = 0; s < 2; s++) dmr_pipe_rank_free(&rr[s]);
        /* the stages' own plans refined: no longer, locally no single flip better */
        for (int s = 0; s < 2; s++)
            assert_int_equal(dmr_pipe_rank_unpack(all + (size_t)s * (size_t)most, (size_t)most, &rr[s]), 0);
        FtPipeRefine rf;
        dmr_pipe_refine(rr, 2, 1000000, &rf);
        assert_all(rf.start.ok && rf.best.step <= rf.start.step && rf.bound <= rf.best.step * (1 + 1e-12));
        /* this stage's part into its plan: the slots that differ change, once; a deferred one
         * has a window opening at or after it */
        int differ = 0;
        for (int i = 0; i < p.n; i++) differ += rr[st].strat[i] != p.strat[i];
        int applied = dmr_pipe_apply(&rr[st], &p), again = dmr_pipe_apply(&rr[st], &p);
        good = applied == differ && again == 0;
        for (int i = 0; i < p.n; i++) {
            good &= p.strat[i] == rr[st].strat[i];
            if (p.strat[i] == PLAN_DEFERRED)
                good &= p.window[i] >= 0 && dmr_plan_pos(&p, p.win_after[p.window[i]]) >= p.pos[i];
        }
        assert_all(good);
        long long moved_all = rf.flips, def = 0;
        for (int i = 0; i < p.n; i++) def += p.strat[i] == PLAN_DEFERRED;
        assert_all(def > 0 && moved_all >= 0);
        for (int s = 0; s < 2; s++) dmr_pipe_rank_free(&rr[s]);
        free(buf), free(pad), free(all);
        dmr_pipe_rank_free(&mine);
        dmr_plan_free(&p);
        dmr_profile_free(&pf);
        FtDmrStats sst;
        run_close(&r, &sst);
        model_free(&m);
    }
}

FT_TEST_MAIN(cmocka_unit_test(test_flip_campaign), cmocka_unit_test(test_pipe_build), cmocka_unit_test(test_clean_runs_match_off),
             cmocka_unit_test(test_validation_unchecked),
             cmocka_unit_test(test_planned_campaign), cmocka_unit_test(test_planned_clean),
             cmocka_unit_test(test_chain), cmocka_unit_test(test_grad_sole_writer),
             cmocka_unit_test(test_dyn_bytes),
             cmocka_unit_test(test_profile_steps), cmocka_unit_test(test_profile_window_kinds),
             cmocka_unit_test(test_profile_broken),
             cmocka_unit_test(test_profile_order),
             cmocka_unit_test(test_budget_exact), cmocka_unit_test(test_keep_pool),
             cmocka_unit_test(test_keep_pool_budget),
             cmocka_unit_test(test_poll_replays),
             cmocka_unit_test(test_agc_piggyback_members), cmocka_unit_test(test_agc_units),
             cmocka_unit_test(test_moe_dynamic), cmocka_unit_test(test_plan_file_roundtrip),
             cmocka_unit_test(test_plan_windows), cmocka_unit_test(test_plan_end_waits),
             cmocka_unit_test(test_plan_budget_per_execution),
             cmocka_unit_test(test_plan_sequence_fallback),
             cmocka_unit_test(test_plan_held_peak),
             cmocka_unit_test(test_plan_held_in_time_order),
             cmocka_unit_test(test_plan_agc_file), cmocka_unit_test(test_plan_agc_per_microbatch),
             cmocka_unit_test(test_plan_file_refusals),
             cmocka_unit_test(test_plan_bounds), cmocka_unit_test(test_order_excess),
             cmocka_unit_test(test_suspect_and_off), cmocka_unit_test(test_flip_before_start),
             cmocka_unit_test(test_pending_early),
             cmocka_unit_test(test_rolled_back_missed), cmocka_unit_test(test_suspect_spare_place),
             cmocka_unit_test(test_suspect_regridded), cmocka_unit_test(test_suspect_count_kept),
             cmocka_unit_test(test_regrid))

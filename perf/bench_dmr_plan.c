/* bench_dmr_plan.c: SpareTrain's ablation on this machine: step time with DMR off, naive, and
 * planned with phases 1, 1+2 and 1+2+3, and 1+2+3 under the paper's rules as published
 * (dmr.phases = paper: the "before" of this project's planner rules), 1+2+3 with each stage's
 * own plan (dmr.refine = off) and 1+2+3 without chains (dmr.chain = false: a deferred gradient
 * check copies the earlier micro-batches' sum), as overheads against off measured in one run,
 * beside the run's lower bound.
 *
 * Two ranks, pp 2 (1F1B, 4 micro-batches) or tp 2 (argument "tp"), a small GPT-2 (L 4, NH 8,
 * C 256, V 256, T 128, B 2 per micro-batch), AC full in every row, synthetic tokens, no faults.
 * The eight trainers live side by side, each on its own grid and copy of the same model; each round
 * runs one step of every trainer in an order rotated from round to round, and a step's time is
 * the slowest rank's. The planned trainers profile their own first dmr.profile_steps steps
 * (the warm-up rounds, checked naively) and plan them. Overheads are medians over rounds of a
 * step against the off step of the same round.
 * Lower bounds, per rank, from the phases-1,2,3 trainer's profile (dmr_plan_bounds): issue
 * 10's, (checker time of the ops AC does not recompute - the idle time measured in windows) /
 * the step without checks, and the same "in time order" (dmr_order_excess): a check runs after
 * its op, so the waits before an execution hold only the checks of the executions before it (a
 * last stage's wait for its first activation holds none); at least 0; the run's is
 * the largest rank's. The step without checks is the off row's median of this run (before
 * 2026-12-01: the profiled step, the checked step less its checks, which the partner's checks
 * stretch: 15-25% longer on pp 2). Beside them: what the pipeline's waits (PP windows: sends,
 * receives and bubbles) and the other waits give, per rank; and the drift: the profile's
 * checker time per step (warm-up rounds) against the naive row's in the timed rounds (the
 * same ops, checked at once), with the bound in time order again with every checker time
 * scaled by their ratio (dmr_plan_order_excess), so that the bound and the planned rows come
 * from the same rounds even when the machine's speed drifts between them.
 * FT_BENCH_SMOKE=1: a tiny model, 1 round. FT_BENCH_TRACE=1: then one step of each variant
 * with each rank's waits (over 0.5 ms) in time order and its check time (in the waits, and by
 * kind: at once, piggyback, keeping deferred inputs, replays); each wait is named by its
 * timeline kind (pp, emb: the tied embedding's gradient, other: loss and norm sums and the DMR
 * agreement, ...). FT_BENCH_PLAN=1: each rank's phases-1,2,3 plan, as `ftllm plan` prints it.
 * FT_BENCH_MICRO=M: M micro-batches per step on pp 2 (default 4).
 * Usage: mpiexec -n 2 bench_dmr_plan [pp|tp] [rounds] [warmup_extra]
 * (default pp, 8 timed rounds; warmup_extra: parallel.warmup_extra of pp 2 in every row,
 * default 0: plain 1F1B). */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/grid.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/timeline.h"
#include "ftllm/train.h"
#include "ftllm/train_dmr.h"

#include "bench_util.h"

enum { NV = 8, WARMUP = 4, PROFILE_STEPS = 3 };
static const struct {
    const char *name;
    int mode, phases, refine;
    bool no_chain; /* dmr.chain = false */
} g_var[NV] = {
    {"off", FT_DMR_OFF, 0, FT_DMR_REFINE_OFF},
    {"naive", FT_DMR_NAIVE, 0, FT_DMR_REFINE_OFF},
    {"planned, phase 1", FT_DMR_PLANNED, FT_DMR_PHASES_1, FT_DMR_REFINE_PIPELINE},
    {"planned, phases 1,2", FT_DMR_PLANNED, FT_DMR_PHASES_12, FT_DMR_REFINE_PIPELINE},
    {"planned, phases 1,2,3", FT_DMR_PLANNED, FT_DMR_PHASES_123, FT_DMR_REFINE_PIPELINE},
    {"planned, paper's rules", FT_DMR_PLANNED, FT_DMR_PHASES_PAPER, FT_DMR_REFINE_PIPELINE},
    {"1,2,3 per stage", FT_DMR_PLANNED, FT_DMR_PHASES_123, FT_DMR_REFINE_OFF},
    {"1,2,3 no chains", FT_DMR_PLANNED, FT_DMR_PHASES_123, FT_DMR_REFINE_PIPELINE, true},
};

typedef struct variant {
    FtConfig c;
    FtGrid g;
    FtModel m;
    FtTrainer tr;
    FtTrainDmr *td;
} Variant;

static int g_extra; /* parallel.warmup_extra (pp) */
static int g_micro = 4; /* parallel.microbatches (pp): FT_BENCH_MICRO */

static void setup(Variant *v, int k, bool tp, bool smoke, int *dims)
{
    char err[FT_DECK_ERR_MAX];
    FtConfig *c = &v->c;
    if (deck_defaults(c, err, sizeof err)) FT_DIE("%s", err);
    c->model.layers = 4, c->model.heads = smoke ? 4 : 8, c->model.channels = smoke ? 64 : 256;
    c->model.vocab = 256, c->model.vocab_pad = 128, c->model.seq_len = smoke ? 32 : 128;
    c->train.batch = 2, c->train.steps = 1000, c->train.warmup = 10;
    c->train.ac = FT_AC_CHOICE_FULL, c->train.val_batches = 0;
    c->parallel.pp = tp ? 1 : 2, c->parallel.tp = tp ? 2 : 1;
    c->parallel.microbatches = tp ? 1 : g_micro;
    c->parallel.warmup_extra = tp ? 0 : g_extra;
    c->dmr.mode = g_var[k].mode, c->dmr.phases = g_var[k].phases, c->dmr.refine = g_var[k].refine;
    c->dmr.chain = !g_var[k].no_chain;
    c->dmr.profile_steps = PROFILE_STEPS;
    if (deck_check(c, 2, err, sizeof err)) FT_DIE("%s", err);
    dims[0] = (int)c->model.seq_len, dims[1] = (int)c->model.vocab;
    if (grid_create(&v->g, MPI_COMM_WORLD, (int)c->parallel.tp, (int)c->parallel.pp, 1, 1, err,
                    sizeof err))
        FT_DIE("%s", err);
    FtGpt2Config mc;
    model_config_from_deck(c, &mc);
    FtShard sh = {.tp = v->g.tp, .tp_rank = v->g.tp_rank, .pp = v->g.pp, .pp_rank = v->g.pp_rank,
                  .ep = 1};
    model_create_sharded(&v->m, &mc, &sh);
    model_init_random(&v->m, 1337);
    FtBatchSource src = {bench_synth_fetch, dims};
    train_init_grid(&v->tr, c, &v->m, &v->g, &src, NULL);
    if (train_dmr_setup(&v->td, &v->tr, c, err, sizeof err)) FT_DIE("%s", err);
}

static const char *const g_tl_name[] = {
#define FT_TL_NAME(name, text, help) text,
    FT_TL_LIST(FT_TL_NAME)
#undef FT_TL_NAME
};

/* FT_BENCH_TRACE=1: one more step of each variant, and per rank its waits (timeline.h) in ms
 * from the step's start: where the bubbles are and what the checks do to them. */
static void trace(Variant *v, int rank)
{
    for (int k = 0; k < NV; k++) {
        FtTimeline *tl = &v[k].tr.tl;
        MPI_Barrier(MPI_COMM_WORLD);
        timeline_reset(tl);
        double base = MPI_Wtime();
        FtStepInfo st;
        FtDmrStats s0 = {0}, s1 = {0};
        if (k) dmr_stats(train_dmr_get(v[k].td), &s0);
        train_step(&v[k].tr, &st);
        double step = MPI_Wtime() - base;
        if (k) dmr_stats(train_dmr_get(v[k].td), &s1);
        char buf[4096];
        int o = snprintf(buf, sizeof buf, "trace %s, rank %d: step %.1f ms (checks %.1f ms, %.1f "
                         "of them in waits; at once %.1f, piggyback %.1f, keeping %.1f, replays "
                         "%.1f); waits", g_var[k].name, rank, 1e3 * step,
                         1e3 * (s1.check_s - s0.check_s), 1e3 * (s1.window_s - s0.window_s),
                         1e3 * (s1.naive_s - s0.naive_s), 1e3 * (s1.pb_s - s0.pb_s),
                         1e3 * (s1.keep_s - s0.keep_s), 1e3 * (s1.replay_s - s0.replay_s));
        for (size_t e = 0; e < tl->nev && o < (int)sizeof buf - 64; e++)
            if (tl->ev[e].kind != FT_TL_STEP && tl->ev[e].t1 - tl->ev[e].t0 > 5e-4)
                o += snprintf(buf + o, sizeof buf - (size_t)o, " %s %.1f-%.1f",
                              g_tl_name[tl->ev[e].kind],
                              1e3 * (tl->ev[e].t0 - base), 1e3 * (tl->ev[e].t1 - base));
        for (int q = 0; q < 2; q++) {
            if (q == rank) printf("%s\n", buf), fflush(stdout);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    log_init(rank, FT_LOG_WARN);
    if (nranks != 2) {
        if (rank == 0) fprintf(stderr, "bench_dmr_plan: run it on 2 ranks (mpiexec -n 2)\n");
        MPI_Finalize();
        return 2;
    }
    bool tp = argc > 1 && !strcmp(argv[1], "tp");
    bool smoke = getenv("FT_BENCH_SMOKE") && atoi(getenv("FT_BENCH_SMOKE"));
    int rounds = argc > 2 ? atoi(argv[2]) : smoke ? 1 : 8;
    if (rounds < 1) rounds = 1;
    g_extra = argc > 3 ? atoi(argv[3]) : 0;
    if (g_extra < 0) g_extra = 0;
    if (getenv("FT_BENCH_MICRO") && atoi(getenv("FT_BENCH_MICRO")) > 0)
        g_micro = atoi(getenv("FT_BENCH_MICRO"));
    static int dims[2];
    Variant *v = calloc(NV, sizeof *v);
    FT_ASSERT(v);
    for (int k = 0; k < NV; k++) setup(&v[k], k, tp, smoke, dims);
    const char *lay = tp ? "tp2" : "pp2";
    char sched[64];
    snprintf(sched, sizeof sched, "1F1B%s, %d micro-batches",
             g_extra ? (g_extra == 1 ? " + 1 warm-up forward" : " + warm-up forwards") : "",
             g_micro);
    if (rank == 0)
        printf("bench_dmr_plan: %s on 2 ranks (%s), GPT-2 L4 NH%lld C%lld V256 T%lld B2, AC full, "
               "%d thread%s per rank, %d warm-up rounds (the planned rows profile %d of them), "
               "%d timed rounds of one step per variant (order rotated)\n", lay,
               tp ? "1 micro-batch" : sched, v[0].c.model.heads,
               v[0].c.model.channels, v[0].c.model.seq_len, omp_get_max_threads(),
               omp_get_max_threads() == 1 ? "" : "s", WARMUP, PROFILE_STEPS, rounds);
    double *t = calloc((size_t)NV * rounds, sizeof *t), *nv = calloc((size_t)rounds, sizeof *nv);
    FT_ASSERT(t && nv);
    for (int r = -WARMUP; r < rounds; r++)
        for (int j = 0; j < NV; j++) {
            int k = (j + (r < 0 ? 0 : r)) % NV;
            FtStepInfo st;
            FtDmrStats n0, n1;
            if (k == 1) dmr_stats(train_dmr_get(v[k].td), &n0);
            train_step(&v[k].tr, &st);
            if (k == 1 && r >= 0) { /* this rank's naive checks in the timed rounds (drift) */
                dmr_stats(train_dmr_get(v[k].td), &n1);
                nv[r] = n1.naive_s - n0.naive_s;
            }
            double s = st.seconds, smax;
            MPI_Allreduce(&s, &smax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r >= 0) t[k * rounds + r] = smax;
        }
    double over[NV], ms[NV];
    for (int k = 0; k < NV; k++) {
        double rr[rounds], tt[rounds];
        for (int r = 0; r < rounds; r++) tt[r] = t[k * rounds + r], rr[r] = tt[r] / t[r];
        over[k] = 100 * (bench_median(rr, rounds) - 1), ms[k] = 1e3 * bench_median(tt, rounds);
    }
    /* per rank: the plans' predictions, the lower bound, what the windows give */
    enum { NM = 11 + NV }; /* per rank: windows pp, other, exposed, step, predictions, bounds,
                              pre-backward waits, forward checks, drift: the profile's checker
                              time, the naive row's, the bound in time order with it */
    double mine[NM] = {0}, all[2 * NM];
    const FtDmrEntryPlan *p3 = dmr_plan(train_dmr_get(v[4].td));
    FT_ASSERT(p3);
    FtDmrPlanTotals tot;
    dmr_plan_totals(p3, &tot);
    for (int w = 0; w < p3->nwin; w++) mine[p3->win_kind[w] == PLAN_WIN_PP ? 0 : 1] += p3->win_len[w];
    mine[2] = tot.exposed_s, mine[3] = p3->step_s;
    double off_s = ms[0] / 1e3; /* the bounds are over the step without checks, measured here */
    mine[4 + NV] = dmr_plan_bounds(p3, off_s, &mine[5 + NV]);
    for (int k = 2; k < NV; k++) {
        const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(v[k].td));
        mine[4 + k] = p && p->step_s > 0 ? 100 * p->overhead / p->step_s : 0;
    }
    mine[6 + NV] = p3->pre_bwd_s, mine[7 + NV] = tot.exposed_fwd_s;
    /* drift: the profile (warm-up rounds) against the naive row's checks in the timed rounds,
     * on the same ops; the bound in time order again with every checker time scaled by it */
    double prof_s = 0;
    for (int i = 0; i < p3->n; i++) prof_s += p3->strat[i] >= 0 ? p3->time[i] : 0;
    double naive_s = bench_median(nv, rounds), f = prof_s > 0 ? naive_s / prof_s : 1;
    double ox = dmr_plan_order_excess(p3, dmr_profile(train_dmr_get(v[4].td)), f);
    double lx = f * tot.exposed_s - (p3->has_idle ? p3->idle_s : tot.window_s);
    ox = ox > lx ? ox : lx;
    mine[8 + NV] = prof_s, mine[9 + NV] = naive_s, mine[10 + NV] = ox > 0 ? ox / off_s : 0;
    MPI_Allgather(mine, NM, MPI_DOUBLE, all, NM, MPI_DOUBLE, MPI_COMM_WORLD);
    FtDmrStats ds[NV];
    for (int k = 1; k < NV; k++) train_dmr_stats(v[k].td, &ds[k]);
    if (rank == 0) {
        printf("%-22s %10s %12s %10s %9s %9s %9s\n", "variant (AC full)", "median ms",
               "vs off", "predicted", "deferred", "agc", "windowed");
        for (int k = 0; k < NV; k++) {
            char pred[24] = "-", dc[16] = "-", ac[16] = "-", wc[16] = "-";
            if (k >= 2) {
                snprintf(pred, sizeof pred, "+%.1f%%", all[4 + k] > all[NM + 4 + k]
                                                           ? all[4 + k] : all[NM + 4 + k]);
                snprintf(dc, sizeof dc, "%lld", ds[k].checks[FT_DMR_S_DEFERRED]);
                snprintf(ac, sizeof ac, "%lld", ds[k].checks[FT_DMR_S_AGC]);
                snprintf(wc, sizeof wc, "%lld", ds[k].windowed);
            }
            printf("%-22s %10.1f %+11.1f%% %10s %9s %9s %9s\n", g_var[k].name, ms[k], over[k],
                   pred, dc, ac, wc);
        }
        double lb = 0, ob = 0, db = 0;
        for (int q = 0; q < 2; q++) {
            const double *a = all + q * NM;
            double l = 100 * a[4 + NV], o = 100 * a[5 + NV], x = 100 * a[10 + NV];
            lb = l > lb ? l : lb, ob = o > ob ? o : ob, db = x > db ? x : db;
            printf("rank %d: checker time not on recomputation %.2f ms per step (forward ops "
                   "%.2f); windows PP (sends, receives, bubbles) %.2f ms, other (tp/dp/ep/loss) "
                   "%.2f ms, %.2f ms of them before the first backward op; profiled step %.2f "
                   "ms; lower bound %.1f%%, in time order %.1f%% (of the off step, %.2f ms)\n",
                   q, 1e3 * a[2], 1e3 * a[7 + NV], 1e3 * a[0], 1e3 * a[1], 1e3 * a[6 + NV],
                   1e3 * a[3], l, o, ms[0]);
            printf("rank %d: drift: checker time %.2f ms per step profiled in the warm-up, the "
                   "naive row's %.2f ms in the timed rounds (x%.3f); in time order with that: "
                   "%.1f%%\n", q, 1e3 * a[8 + NV], 1e3 * a[9 + NV],
                   a[8 + NV] > 0 ? a[9 + NV] / a[8 + NV] : 1.0, x);
        }
        const FtPipeRefine *rf = train_dmr_refined(v[4].td);
        if (rf)
            printf("pipeline refinement (phases 1,2,3): simulated against measured, ms: off %.1f "
                   "/ %.1f, naive %.1f / %.1f, the stages' own plans %.1f / %.1f (row '%s'), "
                   "refined %.1f / %.1f; %d op executions moved, %lld simulations; the "
                   "pipeline's lower bound (simulated) %.1f ms, +%.1f%% over the simulated off "
                   "step, the refined plan +%.1f%%\n",
                   1e3 * rf->off.step, ms[0], 1e3 * rf->naive.step, ms[1], 1e3 * rf->start.step,
                   ms[6], g_var[6].name, 1e3 * rf->best.step, ms[4], rf->flips, rf->evals,
                   1e3 * rf->bound, 100 * (rf->bound / rf->off.step - 1),
                   100 * (rf->best.step / rf->off.step - 1));
        printf("RESULT %s: naive %+.1f%%, phase 1 %+.1f%%, phases 1,2 %+.1f%%, phases 1,2,3 "
               "%+.1f%% (paper's rules %+.1f%%, 1,2,3 per stage %+.1f%%, 1,2,3 without chains "
               "%+.1f%%); lower bound %.1f%%, in time order %.1f%% (%.1f%% with the timed "
               "rounds' checker times)\n",
               lay, over[1], over[2], over[3], over[4], over[5], over[6], over[7], lb, ob, db);
        fflush(stdout);
    }
    if (getenv("FT_BENCH_TRACE") && atoi(getenv("FT_BENCH_TRACE"))) trace(v, rank);
    if (getenv("FT_BENCH_PLAN") && atoi(getenv("FT_BENCH_PLAN")))
        for (int q = 0; q < 2; q++) { /* the phases-1,2,3 plan of each rank, as ftllm plan prints it */
            if (q == rank) {
                printf("plan of rank %d (phases 1,2,3):\n", rank);
                dmr_plan_print(stdout, p3, &v[4].tr.tape, &v[4].tr.opt_tape, true);
                fflush(stdout);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    for (int k = 0; k < NV; k++) {
        train_dmr_destroy(v[k].td);
        train_free(&v[k].tr);
        model_free(&v[k].m);
        grid_destroy(&v[k].g);
    }
    free(v), free(t), free(nv);
    MPI_Finalize();
    return 0;
}

/* train_dmr.c: DMR and fault injection wired into the trainer (train_dmr.h).
 *
 * Key decisions:
 *  - The DMR module (ft/) never sees FtTrainer; this file is the glue that does, as
 *    train_ckpt.c is for checkpoints. It learns where a step attempt begins, and that a
 *    validation pass runs in between, from the trainer's own batch sources (wrapped): every
 *    rank fetches each micro-batch it runs, training and validation alike, so no change to the
 *    train loop is needed.
 *  - The schedule is checked against what every rank runs: each rank counts its op kinds from
 *    its tapes (fault_ops_of) and one all-gather gives every rank all tables, so every rank
 *    resolves the same flips and reaches the same verdict on a bad line. */
#include "ftllm/train_dmr.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftllm/deck_keys.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/log.h"

struct ft_train_dmr {
    FtTrainer *tr;
    FtDmr *dmr;
    FtFaultSchedule sched;
    bool has_sched;
    FtBatchSource train, val; /* the trainer's own sources */
    FtExecHooks hooks;        /* and hooks, put back by train_dmr_destroy */
    FtPoll poll;
    char plan_path[FT_DECK_STR_MAX + 16]; /* mode planned: this rank's plan file, "" = none */
    char rank_line[160];                  /* its "rank R of N layout ..." line */
    bool plan_loaded;
    int (*prev_commit)(void *ctx, FtTrainer *tr, int attempt);
    void *prev_ctx;
    void (*prev_step)(void *ctx, FtTrainer *tr, long long step);
    void *prev_step_ctx;
    void (*prev_on_commit)(void *ctx, FtTrainer *tr);
    void *prev_on_commit_ctx;
    void (*prev_on_broken)(void *ctx, FtTrainer *tr);
    void *prev_on_broken_ctx;
    void (*prev_take)(void *ctx, FtTrainer *tr, FtComm *c, int root);
    void *prev_take_ctx;
    int replica_width; /* ranks per data-parallel replica in the first grid (tp x pp x ep) */
    long long regrids; /* the trainer's regrids at the last agreement (dmr_regridded) */
    int fail_early;    /* fail-stop events at steps a resumed checkpoint holds (not acted on) */
    bool refine;       /* dmr.refine = pipeline, and the plan may defer (phase 3, this
                          project's rules) */
    bool refined;      /* the refinement ran: rf */
    FtPipeRefine rf;
};

/* A replica's place among the live ones (SPARe's controller index: the place-th live
 * replica; world ranks place x replica width on), or -1 when it is not live; and back. */
static int live_place(const FtSpare *sp, int replica)
{
    for (int i = 0, place = 0; sp && i < sp->N; i++) {
        if (!spare_alive(sp, i)) continue;
        if (i == replica) return place;
        place++;
    }
    return -1;
}

static int live_replica(const FtSpare *sp, int place)
{
    for (int i = 0, seen = 0; sp && i < sp->N; i++)
        if (spare_alive(sp, i) && seen++ == place) return i;
    return -1;
}

/* The suspects DMR named at the last agreement (the same on every rank): with SPARe on, each
 * one's replica joins this step's fail-stops (its place in the grid is its world rank over the
 * replica width; the controller's index, the place-th live replica); without SPARe it stays. */
static int retire_suspects(FtTrainDmr *td, FtTrainer *tr, long long step, int *replicas, int n,
                           int *first)
{
    int sus[FT_SPARE_BATCH_MAX];
    int ns = td->dmr ? dmr_take_suspects(td->dmr, sus, FT_SPARE_BATCH_MAX) : 0;
    for (int k = 0; k < ns; k++) {
        int q = sus[k], place = q / td->replica_width;
        if (!tr->sp) {
            log_warn("dmr: rank %d stays in the run: nothing retires a suspect rank without "
                     "SPARe (spare.r = 0)", q);
            continue;
        }
        int replica = live_replica(tr->sp, place);
        bool dup = replica < 0 || n == FT_SPARE_BATCH_MAX;
        for (int j = 0; j < n && !dup; j++) dup = replicas[j] == replica;
        if (dup) continue;
        log_info("dmr: rank %d is suspect: SPARe retires its replica %d before step %lld", q,
                 replica, step);
        first[n] = place * td->replica_width;
        replicas[n++] = replica;
    }
    return n;
}

/* The fault schedule's fail-stop lines, before step `step` runs: `fail step=S replica=I` (or
 * rank=R: its whole replica, since a replica cannot compute without any of its ranks) fails
 * that replica by SPARe's injected fail-stop, collectively and in line order on every rank; a
 * step's lines go to SPARe at once (a hot spare that joins takes part in the rest). A step
 * computed again after a restart from a checkpoint does not fail again (fail_upto). The
 * suspects' replicas (retire_suspects) join them, on every step. */
static void before_step(void *ctx, FtTrainer *tr, long long step)
{
    FtTrainDmr *td = ctx;
    if (td->prev_step) td->prev_step(td->prev_step_ctx, tr, step);
    int replicas[FT_SPARE_BATCH_MAX], first[FT_SPARE_BATCH_MAX], n = 0;
    bool again = step <= tr->spare.fail_upto; /* computed again after a restart: no lines */
    if (!again) tr->spare.fail_upto = step;
    for (int i = 0; i < td->sched.nev && !again; i++) {
        const FtFaultEvent *e = &td->sched.ev[i];
        if (e->kind != FT_FAULT_FAIL || e->step != step) continue;
        int replica = e->replica >= 0 ? e->replica : e->rank / td->replica_width;
        if (n == FT_SPARE_BATCH_MAX) {
            log_warn("faults: %s:%d: more than %d fail-stops before step %lld: this one is left "
                     "out", td->sched.path, e->line, FT_SPARE_BATCH_MAX, step);
            continue;
        }
        log_info("faults: %s:%d: replica %d fails before step %lld", td->sched.path, e->line,
                 replica, step);
        replicas[n++] = replica;
    }
    int nsched = n;
    for (int k = 0; k < nsched; k++) { /* the first world rank of each one's place, or -1 */
        int place = live_place(tr->sp, replicas[k]);
        first[k] = place < 0 ? -1 : place * td->replica_width;
    }
    n = retire_suspects(td, tr, step, replicas, n, first);
    if (!n) return;
    long long wipes = tr->spare.wipeouts, masked = tr->spare.masked;
    int rc = train_fail_replicas(tr, replicas, n);
    for (int k = 0; k < n && rc >= 0 && td->dmr; k++) { /* those places start over */
        if (k >= nsched) dmr_retired(td->dmr, first[k], td->replica_width);
        else if (first[k] >= 0) dmr_forget(td->dmr, first[k], td->replica_width);
    }
    if (tr->left || nsched == 0) return;
    if (rc < 0 && tr->spare.masked == masked)
        log_warn("faults: %s: before step %lld: the replicas named have failed already: nothing "
                 "more to stop", td->sched.path, step);
    else if (tr->spare.wipeouts > wipes)
        log_info("faults: %s: before step %lld: a wipe-out (a shard type lost every holder)",
                 td->sched.path, step);
    else
        log_info("faults: %s: before step %lld: %lld failure%s masked by SPARe", td->sched.path,
                 step, tr->spare.masked - masked, tr->spare.masked - masked == 1 ? "" : "s");
}

static void fetch_train(void *ctx, uint64_t first, int B, int *inputs, int *targets)
{
    FtTrainDmr *td = ctx;
    dmr_step_begin(td->dmr, td->tr->model->step + 1);
    td->train.fetch(td->train.ctx, first, B, inputs, targets);
}

static void fetch_val(void *ctx, uint64_t first, int B, int *inputs, int *targets)
{
    FtTrainDmr *td = ctx;
    dmr_pause(td->dmr);
    td->val.fetch(td->val.ctx, first, B, inputs, targets);
}

static int before_commit(void *ctx, FtTrainer *tr, int attempt)
{
    FtTrainDmr *td = ctx;
    if (tr->regrids != td->regrids) { /* suspects named in the old world and not acted on */
        td->regrids = tr->regrids;
        dmr_regridded(td->dmr);
    }
    int redo = dmr_agree(td->dmr, &tr->ex, tr->c_world); /* the world after any regrid */
    timers_point(&tr->regions, FT_KILL_AGREED);         /* a testing aid (FTLLM_TEST_KILL) */
    if (redo) return 1;
    return td->prev_commit ? td->prev_commit(td->prev_ctx, tr, attempt) : 0;
}

/* The step was committed: the counters its agreement summed are the job's now. */
static void on_commit(void *ctx, FtTrainer *tr)
{
    FtTrainDmr *td = ctx;
    dmr_committed(td->dmr);
    if (td->prev_on_commit) td->prev_on_commit(td->prev_on_commit_ctx, tr);
}

/* A process failure broke the attempt: the survivors compute the step again. */
static void on_broken(void *ctx, FtTrainer *tr)
{
    FtTrainDmr *td = ctx;
    dmr_attempt_broken(td->dmr);
    if (td->prev_on_broken) td->prev_on_broken(td->prev_on_broken_ctx, tr);
}

/* A rank joins the training ranks: the job's counters so far, from a rank that trained. */
static void take_state(void *ctx, FtTrainer *tr, FtComm *c, int root)
{
    FtTrainDmr *td = ctx;
    dmr_take_state(td->dmr, c, root);
    if (td->prev_take) td->prev_take(td->prev_take_ctx, tr, c, root);
}

/* Every rank's op table (world order). */
static FtFaultOps *gather_ops(FtTrainer *tr, int nranks)
{
    FtFaultOps mine, *all = calloc((size_t)nranks, sizeof *all);
    FT_ASSERT(all);
    fault_ops_of(&tr->tape, tr->micro, &tr->opt_tape, &mine);
    if (nranks == 1) all[0] = mine;
    else comm_allgather(tr->c_world, &mine, all, sizeof mine, FT_U8);
    return all;
}

/* How many forward entries of a micro-batch the recomputation checks (piggyback). */
static int piggybacked(const FtTape *tp)
{
    int n = 0;
    for (int i = 0; i < tp->fwd_end; i++) {
        const FtTapeEntry *e = &tp->e[i];
        if (e->kind == FT_OP_MARK || e->twin < 0) continue;
        bool ints = false;
        for (int k = 0; k < FT_OP_MAX_OUT; k++)
            if (e->out[k] >= 0 && (tp->t[e->out[k]].dtype == FT_I32 || tp->t[e->out[k]].dtype == FT_I64))
                ints = true;
        n += !ints;
    }
    return n;
}

static int ops_on(const FtTape *tp)
{
    int n = 0;
    for (int i = 0; i < tp->ne; i++) n += tp->e[i].kind != FT_OP_MARK;
    return n;
}

/* dmr.refine = pipeline: the stages refine their plans together (dmr_pipesim.h), collective
 * over the world: every stage makes its plan at the same attempt's end (the profile's attempts
 * are agreed job-wide). With tp or ep > 1 the pipeline of tp rank 0, ep rank 0 refines and
 * every tensor- and expert-parallel peer of a stage runs its micro-batch plan
 * (dmr_refine_pipeline_peers: peers meet at every all-reduce and all-to-all, so a check one
 * runs at once is the others' wait); the peers' communicator is made here, for this once. */
static void pipe_refine(FtTrainDmr *td, FtDmr *d)
{
    FtTrainer *tr = td->tr;
    const FtGrid *g = tr->grid;
    if (!td->refine || !g || g->pp < 2 || !tr->c_pp) return;
    MPI_Comm pc = MPI_COMM_NULL;
    FtComm *peers = NULL;
    if (g->tp * g->ep > 1) { /* this stage's tp x ep ranks, tp rank 0 of ep rank 0 first */
        int key = g->ep_rank * g->tp + g->tp_rank;
        FT_CHECK_MPI(MPI_Comm_split(g->replica_comm, g->pp_rank, key, &pc));
        peers = comm_create_mpi(pc, "stage");
    }
    FtPipeRefine rf;
    double t0 = MPI_Wtime();
    int apart = dmr_refine_pipeline_peers(d, tr->c_pp, peers, 200000000LL, &rf);
    if (peers) {
        comm_destroy(peers);
        FT_CHECK_MPI(MPI_Comm_free(&pc));
    }
    if (apart < 0) {
        ft_log_rank(FT_LOG_INFO, "dmr: pipeline refinement skipped: a stage's plan has no "
                    "time order per execution, the stages' sequences do not make one pipeline, "
                    "or a stage's tensor- or expert-parallel peers run other micro-batch "
                    "executions");
        return;
    }
    td->rf = rf, td->refined = true;
    if (apart > 0) /* the first peer's plan could not be taken whole */
        ft_log_rank(FT_LOG_INFO, "dmr: pipeline refinement: %d micro-batch op executions keep "
                    "this rank's own strategy where its stage's first peer (tp and ep rank 0) "
                    "chose another (a window of the first peer's it lacks, so it took only "
                    "the naive/deferred choices its plan may move)", apart);
    /* the same on every stage and peer: one line per pipeline */
    if (comm_rank(tr->c_pp) == 0 && g->tp_rank == 0 && g->ep_rank == 0)
        ft_log_rank(FT_LOG_INFO, "dmr: pipeline refinement: simulated step %.3f ms without checks, "
                "%.3f ms all naive, %.3f ms under the stages' own plans, %.3f ms refined (%d "
                "op executions moved between naive and deferred over the pipeline, %lld "
                "simulations, %.0f ms); the pipeline's lower bound %.3f ms (+%.1f%%)",
                1e3 * rf.off.step, 1e3 * rf.naive.step, 1e3 * rf.start.step, 1e3 * rf.best.step,
                rf.flips, rf.evals, 1e3 * (MPI_Wtime() - t0), 1e3 * rf.bound,
                rf.off.step > 0 ? 100 * (rf.bound / rf.off.step - 1) : 0.0);
}

const FtPipeRefine *train_dmr_refined(const FtTrainDmr *td)
{
    return td && td->refined ? &td->rf : NULL;
}

/* The profile was planned (dmr.h on_plan): this rank writes its plan file when dmr.plan names
 * one (a failure is a warning: the run goes on with the plan in memory). */
static void plan_made(void *arg, FtDmr *d)
{
    FtTrainDmr *td = arg;
    pipe_refine(td, d);
    const FtDmrEntryPlan *p = dmr_plan(d);
    FtDmrPlanTotals t;
    dmr_plan_totals(p, &t);
    ft_log_rank(FT_LOG_INFO, "dmr: planned from %d profiled step%s: piggyback %d, agc %d (%d "
                "segment%s), deferred %d, naive %d op executions a step; predicted overhead "
                "%.3f ms of a %.3f ms step", p->profile_steps, p->profile_steps == 1 ? "" : "s", t.ops[PLAN_PIGGYBACK],
                t.ops[PLAN_AGC], t.segments, t.segments == 1 ? "" : "s", t.ops[PLAN_DEFERRED],
                t.ops[PLAN_NAIVE], 1e3 * p->overhead, 1e3 * p->step_s);
    if (!td->plan_path[0]) return;
    char err[FT_DECK_STR_MAX + 256];
    if (dmr_plan_write(p, &td->tr->tape, &td->tr->opt_tape, td->plan_path, td->rank_line, err,
                       sizeof err))
        ft_log_rank(FT_LOG_WARN, "%s", err);
    else
        ft_log_rank(FT_LOG_INFO, "dmr: wrote the plan to %s", td->plan_path);
}

static int plan_phases(long long choice)
{
    return choice == FT_DMR_PHASES_1     ? PLAN_PHASE1
           : choice == FT_DMR_PHASES_12  ? PLAN_PHASE1 | PLAN_PHASE2
           : choice == FT_DMR_PHASES_123 ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3
                                         : PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER;
}

/* Collective over the world: msg is this rank's error ("" when none). Returns -1 on every rank
 * when any rank has one, with the first such rank's message in err; else 0. */
static int agree_message(FtTrainer *tr, int nranks, const char *msg, size_t msglen, char *err,
                         size_t errlen)
{
    char *msgs = calloc((size_t)nranks, msglen);
    FT_ASSERT(msgs);
    if (nranks > 1) comm_allgather(tr->c_world, msg, msgs, msglen, FT_U8);
    else memcpy(msgs, msg, msglen);
    int bad = -1;
    for (int q = 0; q < nranks && bad < 0; q++)
        if (msgs[(size_t)q * msglen]) bad = q;
    if (bad >= 0) snprintf(err, errlen, "%s", msgs + (size_t)bad * msglen);
    free(msgs);
    return bad >= 0 ? -1 : 0;
}

/* Mode planned with dmr.plan set: every rank's file exists -> each loads and checks its own;
 * none exists -> profile (and write them); some -> an error. Collective over the world: the
 * verdict, and the first bad rank's message, are the same on every rank. */
static int plan_load(FtTrainDmr *td, const FtConfig *cfg, int nranks, char *err, size_t errlen)
{
    FtTrainer *tr = td->tr;
    int rank = tr->c_world ? comm_rank(tr->c_world) : 0;
    const FtGrid *g = tr->grid;
    snprintf(td->rank_line, sizeof td->rank_line, "rank %d of %d layout tp=%d pp=%d dp=%d ep=%d",
             rank, nranks, g ? g->tp : 1, g ? g->pp : 1, g ? g->dp : 1, g ? g->ep : 1);
    if (!cfg->dmr.plan[0]) return 0;
    if (nranks == 1) snprintf(td->plan_path, sizeof td->plan_path, "%s", cfg->dmr.plan);
    else snprintf(td->plan_path, sizeof td->plan_path, "%s.r%d", cfg->dmr.plan, rank);
    int here = access(td->plan_path, F_OK) == 0;
    int have = here, all = here;
    if (nranks > 1) {
        have = (int)comm_max_i64(tr->c_world, here);
        all = !comm_max_i64(tr->c_world, !here);
    }
    if (!have) return 0;
    char msg[512] = "";
    FtDmrEntryPlan p = {0};
    if (!all) {
        if (!here)
            snprintf(msg, sizeof msg, "%.200s: missing, while other ranks have their plan "
                     "files (HINT: remove them all, or make them again with ftllm plan)",
                     td->plan_path);
    } else {
        dmr_plan_read(&p, &tr->tape, &tr->opt_tape, td->plan_path, td->rank_line, tr->micro, msg,
                      sizeof msg);
    }
    if (agree_message(tr, nranks, msg, sizeof msg, err, errlen)) {
        dmr_plan_free(&p);
        return -1;
    }
    if (p.phases != plan_phases(cfg->dmr.phases) || p.budget_mb != cfg->dmr.deferred_mb)
        log_warn("dmr: %s was planned with other dmr.phases or dmr.deferred_mb than this run's: "
                 "its strategies are followed as written; the run's budget (%.6g MiB) still "
                 "bounds what deferred checks keep (HINT: ftllm plan with this deck makes a "
                 "matching plan)", td->plan_path, cfg->dmr.deferred_mb);
    dmr_set_plan(td->dmr, &p);
    td->plan_loaded = true;
    return 0;
}

int train_dmr_setup(FtTrainDmr **out, FtTrainer *tr, const FtConfig *cfg, char *err,
                    size_t errlen)
{
    *out = NULL;
    int mode = cfg->dmr.mode;
    const char *path = cfg->faults.schedule;
    if (mode == FT_DMR_OFF && !path[0]) return 0;
    FtTrainDmr *td = calloc(1, sizeof *td);
    FT_ASSERT(td);
    td->tr = tr;
    int nranks = tr->c_world ? comm_size(tr->c_world) : 1;
    FtFlip *flips = NULL;
    int nflips = 0;
    if (path[0]) {
        if (fault_load(&td->sched, path, tr->c_world, err, errlen)) goto out_free;
        td->has_sched = true;
    }
    if (path[0] && !tr->grid && tr->left) { /* a hot spare: the training ranks plan (and check)
                                               the flips (no grid alone: one rank, train_init) */
    } else if (path[0]) {
        FtFaultOps *ops = gather_ops(tr, nranks);
        FtFaultJob job = {.nranks = nranks, .dp = tr->grid ? tr->grid->dp : 1,
                          .steps = cfg->train.steps, .ops = ops, .seed = (uint64_t)cfg->run.seed};
        char warn[512];
        int rc = fault_plan(&td->sched, &job, &flips, &nflips, err, errlen, warn, sizeof warn);
        free(ops);
        if (rc) goto out_free;
        if (warn[0]) log_warn("%s", warn);
    }
    FtDmrCfg dc = {.mode = mode, .suspect_after = (int)cfg->dmr.suspect_after,
                   .be = tr->model->be, .world = tr->c_world, .flips = flips, .nflips = nflips,
                   .micro = &tr->tape, .opt = &tr->opt_tape, .phases = plan_phases(cfg->dmr.phases),
                   .budget = (size_t)(cfg->dmr.deferred_mb * 1048576.0),
                   .profile_steps = (int)cfg->dmr.profile_steps, .tl = &tr->tl,
                   .moe_dynamic = cfg->dmr.moe_dynamic,
                   .leftovers_end = cfg->dmr.leftovers == FT_DMR_LEFT_END,
                   .no_chain = !cfg->dmr.chain,
                   .on_plan = plan_made, .on_plan_arg = td};
    td->dmr = dmr_create(&dc);
    td->refine = cfg->dmr.refine == FT_DMR_REFINE_PIPELINE &&
                 (dc.phases & PLAN_PHASE3) && !(dc.phases & PLAN_PAPER);
    long long done = tr->model->step; /* steps a resumed checkpoint already holds */
    int nearly = 0, fearly = 0;
    for (int i = 0; i < nflips; i++) nearly += flips[i].step <= done;
    for (int i = 0; td->has_sched && i < td->sched.nev; i++)
        fearly += td->sched.ev[i].kind == FT_FAULT_FAIL && td->sched.ev[i].step <= done;
    td->fail_early = fearly;
    free(flips);
    if (mode == FT_DMR_PLANNED && plan_load(td, cfg, nranks, err, errlen)) {
        dmr_free(td->dmr);
        goto out_free;
    }
    td->train = tr->train, td->val = tr->val;
    td->hooks = tr->ex.hooks;
    td->prev_commit = tr->before_commit, td->prev_ctx = tr->before_commit_ctx;
    tr->train = (FtBatchSource){fetch_train, td};
    if (tr->has_val) tr->val = (FtBatchSource){fetch_val, td};
    tr->ex.hooks = dmr_hooks(td->dmr);
    td->poll = tr->ex.poll;
    if (mode == FT_DMR_PLANNED) tr->ex.poll = dmr_poll(td->dmr);
    tr->before_commit = before_commit, tr->before_commit_ctx = td;

    int nops = ops_on(&tr->tape), npb = piggybacked(&tr->tape);
    if (mode == FT_DMR_NAIVE)
        log_info("dmr: mode naive: every op of a step (forward, backward, recomputation, "
                 "optimizer) is run again at once and compared (the answers read at the step's "
                 "agreement); a mismatch anywhere redoes the step on every rank");
    else if (mode == FT_DMR_PIGGYBACK)
        log_info("dmr: mode piggyback: %d of the %d op entries of a micro-batch (rank 0) are "
                 "checked by their AC recomputation, the rest (and the optimizer) are run again "
                 "at once; a mismatch anywhere redoes the step on every rank", npb, nops);
    else if (mode == FT_DMR_PLANNED && td->plan_loaded)
        log_info("dmr: mode planned: the plan %s (per rank: FILE.rN) gives each op its check "
                 "(piggyback on AC recomputation, AGC segment or deferred checker in a "
                 "communication window, or naive)", cfg->dmr.plan);
    else if (mode == FT_DMR_PLANNED)
        log_info("dmr: mode planned: the first %lld step%s are profiled (checked naively), then "
                 "planned (phases %s, deferred checks keep at most %.6g MiB)%s%s",
                 cfg->dmr.profile_steps, cfg->dmr.profile_steps == 1 ? "" : "s",
                 cfg->dmr.phases == FT_DMR_PHASES_1     ? "1"
                 : cfg->dmr.phases == FT_DMR_PHASES_12  ? "1,2"
                 : cfg->dmr.phases == FT_DMR_PHASES_123 ? "1,2,3"
                                                        : "1,2,3 with the paper's rules",
                 cfg->dmr.deferred_mb, cfg->dmr.plan[0] ? "; the plan is written to " : "",
                 cfg->dmr.plan);
    if (mode == FT_DMR_PIGGYBACK && cfg->train.ac == FT_AC_CHOICE_NONE)
        log_warn("dmr.mode = piggyback with train.ac = none: nothing is recomputed, so every op "
                 "is checked by running it again (as naive)");
    if (td->has_sched && fault_count(&td->sched, FT_FAULT_FAIL)) {
        if (cfg->spare.r <= 0) {
            const FtFaultEvent *e = NULL;
            for (int i = 0; i < td->sched.nev && !e; i++)
                if (td->sched.ev[i].kind == FT_FAULT_FAIL) e = &td->sched.ev[i];
            snprintf(err, errlen, "%s:%d: a fail-stop line needs SPARe (spare.r >= 1): plain "
                     "data parallelism cannot mask a failed replica", path, e->line);
            dmr_free(td->dmr);
            tr->train = td->train, tr->val = td->val, tr->ex.hooks = td->hooks;
            tr->ex.poll = td->poll;
            tr->before_commit = td->prev_commit, tr->before_commit_ctx = td->prev_ctx;
            goto out_free;
        }
    }
    td->regrids = tr->regrids;
    td->prev_on_commit = tr->on_commit, td->prev_on_commit_ctx = tr->on_commit_ctx;
    td->prev_on_broken = tr->on_broken, td->prev_on_broken_ctx = tr->on_broken_ctx;
    td->prev_take = tr->take_state, td->prev_take_ctx = tr->take_state_ctx;
    tr->on_commit = on_commit, tr->on_commit_ctx = td;
    tr->on_broken = on_broken, tr->on_broken_ctx = td;
    tr->take_state = take_state, tr->take_state_ctx = td;
    /* before each step: the schedule's fail-stops, and suspects for SPARe to retire */
    if ((td->has_sched && fault_count(&td->sched, FT_FAULT_FAIL)) ||
        (mode != FT_DMR_OFF && cfg->dmr.suspect_after > 0)) {
        td->replica_width = (int)(cfg->parallel.tp * cfg->parallel.pp * cfg->parallel.ep);
        td->prev_step = tr->before_step, td->prev_step_ctx = tr->before_step_ctx;
        tr->before_step = before_step, tr->before_step_ctx = td;
    }
    if (td->has_sched) {
        int nfail = fault_count(&td->sched, FT_FAULT_FAIL);
        log_info("faults: %s: %d bit flip%s (%d sdc, %d sdc-random line%s), %d fail-stop event%s%s",
                 path, nflips, nflips == 1 ? "" : "s", fault_count(&td->sched, FT_FAULT_SDC),
                 fault_count(&td->sched, FT_FAULT_SDC_RANDOM),
                 fault_count(&td->sched, FT_FAULT_SDC_RANDOM) == 1 ? "" : "s", nfail,
                 nfail == 1 ? "" : "s", mode == FT_DMR_OFF ? "; dmr.mode = off: nothing checks "
                                                             "the flips" : "");
        if (nearly || fearly) /* a requeued job resumed with the same schedule */
            log_info("faults: %s: %d bit flip%s and %d fail-stop event%s at steps up to %lld, "
                     "which the resumed checkpoint holds, are not applied (this run computes "
                     "steps %lld on)", path, nearly, nearly == 1 ? "" : "s", fearly,
                     fearly == 1 ? "" : "s", done, done + 1);
        nfail -= fearly;
        if (nfail)
            log_info("faults: %s: %d fail-stop line%s: SPARe (r %lld) stops those replicas "
                     "before their steps and the survivors go on", path, nfail,
                     nfail == 1 ? "" : "s", cfg->spare.r);
    }
    *out = td;
    return 0;
out_free:
    if (td->has_sched) fault_free(&td->sched);
    free(td);
    return -1;
}

void train_dmr_report(FtTrainDmr *td, FtComm *job, bool trains, FILE *out)
{
    if (!td) return;
    dmr_report(td->dmr, trains ? td->tr->c_world : NULL, job,
               td->has_sched ? td->sched.path : "",
               td->has_sched ? fault_count(&td->sched, FT_FAULT_FAIL) - td->fail_early : 0, out);
}

void train_dmr_stats(FtTrainDmr *td, FtDmrStats *s)
{
    dmr_stats_job(td->dmr, td->tr->c_world, s);
}

FtDmr *train_dmr_get(FtTrainDmr *td) { return td ? td->dmr : NULL; }

int train_dmr_write_plan(FtTrainDmr *td, const char *path, char *file, size_t filelen, char *err,
                         size_t errlen)
{
    FtTrainer *tr = td->tr;
    int nranks = tr->c_world ? comm_size(tr->c_world) : 1;
    int rank = tr->c_world ? comm_rank(tr->c_world) : 0;
    const FtDmrEntryPlan *p = dmr_plan(td->dmr);
    FT_ASSERT(p);
    if (nranks == 1) snprintf(file, filelen, "%s", path);
    else snprintf(file, filelen, "%s.r%d", path, rank);
    char msg[512] = "";
    dmr_plan_write(p, &tr->tape, &tr->opt_tape, file, td->rank_line, msg, sizeof msg);
    return agree_message(tr, nranks, msg, sizeof msg, err, errlen);
}

void train_dmr_destroy(FtTrainDmr *td)
{
    if (!td) return;
    FtTrainer *tr = td->tr;
    tr->train = td->train;
    if (tr->has_val) tr->val = td->val;
    tr->ex.hooks = td->hooks;
    tr->ex.poll = td->poll;
    tr->before_commit = td->prev_commit, tr->before_commit_ctx = td->prev_ctx;
    tr->on_commit = td->prev_on_commit, tr->on_commit_ctx = td->prev_on_commit_ctx;
    tr->on_broken = td->prev_on_broken, tr->on_broken_ctx = td->prev_on_broken_ctx;
    tr->take_state = td->prev_take, tr->take_state_ctx = td->prev_take_ctx;
    if (tr->before_step == before_step)
        tr->before_step = td->prev_step, tr->before_step_ctx = td->prev_step_ctx;
    dmr_free(td->dmr);
    if (td->has_sched) fault_free(&td->sched);
    free(td);
}

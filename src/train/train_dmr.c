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

#include "ftllm/log.h"

struct ft_train_dmr {
    FtTrainer *tr;
    FtDmr *dmr;
    FtFaultSchedule sched;
    bool has_sched;
    FtBatchSource train, val; /* the trainer's own sources */
    FtExecHooks hooks;        /* and hooks, put back by train_dmr_destroy */
    int (*prev_commit)(void *ctx, FtTrainer *tr, int attempt);
    void *prev_ctx;
    void (*prev_step)(void *ctx, FtTrainer *tr, long long step);
    void *prev_step_ctx;
    int replica_width; /* ranks per data-parallel replica in the first grid (tp x pp x ep) */
};

/* The fault schedule's fail-stop lines, before step `step` runs: `fail step=S replica=I` (or
 * rank=R: its whole replica, since a replica cannot compute without any of its ranks) fails
 * that replica by SPARe's injected fail-stop, collectively and in line order on every rank; a
 * step's lines go to SPARe at once (a hot spare that joins takes part in the rest). A step
 * computed again after a restart from a checkpoint does not fail again (fail_upto). */
static void before_step(void *ctx, FtTrainer *tr, long long step)
{
    FtTrainDmr *td = ctx;
    if (td->prev_step) td->prev_step(td->prev_step_ctx, tr, step);
    if (step <= tr->spare.fail_upto) return;
    tr->spare.fail_upto = step;
    int replicas[FT_SPARE_BATCH_MAX], n = 0;
    for (int i = 0; i < td->sched.nev; i++) {
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
    if (!n) return;
    long long wipes = tr->spare.wipeouts, masked = tr->spare.masked;
    int rc = train_fail_replicas(tr, replicas, n);
    if (tr->left) return;
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
    if (dmr_agree(td->dmr, &tr->ex, tr->c_world)) return 1; /* the world after any regrid */
    return td->prev_commit ? td->prev_commit(td->prev_ctx, tr, attempt) : 0;
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

int train_dmr_setup(FtTrainDmr **out, FtTrainer *tr, const FtConfig *cfg, char *err,
                    size_t errlen)
{
    *out = NULL;
    int mode = cfg->dmr.mode;
    const char *path = cfg->faults.schedule;
    if (mode == FT_DMR_OFF && !path[0]) return 0;
    FT_ASSERT(mode != FT_DMR_PLANNED); /* deck_check refuses it */
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
    if (path[0] && !tr->grid) { /* a hot spare: the training ranks plan (and check) the flips */
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
                   .be = tr->model->be, .world = tr->c_world, .flips = flips, .nflips = nflips};
    td->dmr = dmr_create(&dc);
    free(flips);
    td->train = tr->train, td->val = tr->val;
    td->hooks = tr->ex.hooks;
    td->prev_commit = tr->before_commit, td->prev_ctx = tr->before_commit_ctx;
    tr->train = (FtBatchSource){fetch_train, td};
    if (tr->has_val) tr->val = (FtBatchSource){fetch_val, td};
    tr->ex.hooks = dmr_hooks(td->dmr);
    tr->before_commit = before_commit, tr->before_commit_ctx = td;

    int nops = ops_on(&tr->tape), npb = piggybacked(&tr->tape);
    if (mode == FT_DMR_NAIVE)
        log_info("dmr: mode naive: every op of a step (forward, backward, recomputation, "
                 "optimizer) is run again at once and compared; a mismatch anywhere redoes the "
                 "step on every rank");
    else if (mode == FT_DMR_PIGGYBACK)
        log_info("dmr: mode piggyback: %d of the %d op entries of a micro-batch (rank 0) are "
                 "checked by their AC recomputation, the rest (and the optimizer) are run again "
                 "at once; a mismatch anywhere redoes the step on every rank", npb, nops);
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
            tr->before_commit = td->prev_commit, tr->before_commit_ctx = td->prev_ctx;
            goto out_free;
        }
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

void train_dmr_report(FtTrainDmr *td, FILE *out)
{
    if (!td) return;
    dmr_report(td->dmr, td->tr->c_world, td->has_sched ? td->sched.path : "",
               td->has_sched ? fault_count(&td->sched, FT_FAULT_FAIL) : 0, out);
}

void train_dmr_stats(FtTrainDmr *td, FtDmrStats *s)
{
    dmr_stats_job(td->dmr, td->tr->c_world, s);
}

FtDmr *train_dmr_get(FtTrainDmr *td) { return td ? td->dmr : NULL; }

void train_dmr_destroy(FtTrainDmr *td)
{
    if (!td) return;
    FtTrainer *tr = td->tr;
    tr->train = td->train;
    if (tr->has_val) tr->val = td->val;
    tr->ex.hooks = td->hooks;
    tr->before_commit = td->prev_commit, tr->before_commit_ctx = td->prev_ctx;
    if (tr->before_step == before_step)
        tr->before_step = td->prev_step, tr->before_step_ctx = td->prev_step_ctx;
    dmr_free(td->dmr);
    if (td->has_sched) fault_free(&td->sched);
    free(td);
}

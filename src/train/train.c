/* train.c: the training step and loop (train.h).
 *
 * Key decisions:
 *  - The tape is built once per pipeline slot; each micro-batch copies its tokens into a slot's
 *    input tensors and the executor runs the forward and backward ranges in the order of the
 *    pipeline schedule (on one stage, 1F1B is F0 B0 F1 B1 ..., the plain loop). Before each
 *    backward, gradient sync (gradsync.h) says which gradient bank it writes on top of which:
 *    gradient accumulation over micro-batches is explicit tape arithmetic, with a loss scale
 *    of 1/(micro-batches of the whole job) folded into the cross-entropy backward. Gradient
 *    sync also owns the data-parallel reduction, the norm's and the loss's sums.
 *  - The optimizer is a tape too (optim.h): norm partial sums, then AdamW into the model's
 *    *_new buffers; nothing current is overwritten until model_commit, so a step can be redone
 *    from the same state (the before-commit hook asks for it) and ends bitwise the same.
 *  - Validation reuses the training tape's forward range (same shapes, no second arena).
 *  - Rates leave out the first train.rate_skip steps; the model FLOP count is the tape's
 *    forward + backward FLOPs without AC recomputation (so AC shows up as a lower rate).
 *  - SPARe only orchestrates here: the controller's plan (spare.h) says which shards this
 *    replica computes, each is one pass of the pipeline schedule over its micro-batches, and
 *    gradient sync's shard-keyed variant reduces them. The controller and its counters live in
 *    the trainer and survive train_regrid; the first grid's dp is the number of shard types. */
#include "ftllm/train.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "ftllm/pipeline.h"
#include "ftllm/progress.h"
#include "train_spare.h"

/* A communicator of the trainer: MPI for a model in host memory; for one on a device, MPI with
 * host staging, and with parallel.device_comm = nccl, where dev says it carries collectives on
 * device buffers (tp, ep, dp and the tied embedding's pair; not world and replica, whose
 * agreements and sums are host values, nor pp, whose messages are point-to-point), those
 * collectives over NCCL (comm_create_routed). `ftllm train` resolves auto before the trainer
 * starts, so auto here is MPI. */
static FtComm *train_comm(const FtConfig *cfg, const FtModel *model, MPI_Comm comm,
                          const char *name, bool dev)
{
    const FtBackend *be = model->be;
    if (backend_is_host(be)) return comm_create_mpi(comm, name);
    if (!be->is_device)
        FT_DIE("train: backend %s cannot tell its memory from the host's", be->name);
    FtCommStager st;
    backend_stager(be, &st);
    if (!dev || cfg->parallel.device_comm != FT_DEVCOMM_KEY_NCCL)
        return comm_create_staged(comm, name, &st);
    char err[256];
    FtComm *c = comm_create_routed(comm, name, &st, be->stream, err, sizeof err);
    if (!c) FT_DIE("train: the %s communicator: %s", name, err);
    return c;
}

/* ---- set-up -------------------------------------------------------------------------------- */

int train_seq_len(const FtConfig *cfg)
{
    return (int)(cfg->train.seq_len > 0 ? cfg->train.seq_len : cfg->model.seq_len);
}

void train_init(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtBatchSource *train,
                const FtBatchSource *val)
{
    train_init_grid(tr, cfg, model, NULL, train, val);
}

static FtTape *slot(FtTrainer *tr, int k) { return k == 0 ? &tr->tape : &tr->more[k - 1]; }

/* SPARe's state: a fresh controller for the first grid, or the one kept across a regrid. */
static void spare_setup(FtTrainer *tr, const FtConfig *cfg, const FtGrid *grid,
                        const FtTrainer *keep)
{
    if (keep && keep->sp) {
        tr->sp = keep->sp, tr->plan = keep->plan, tr->replica = keep->replica;
        tr->own_grid = keep->own_grid, tr->left = keep->left;
        tr->shard_loss = keep->shard_loss, tr->spare = keep->spare;
    } else if (cfg->spare.r > 0) {
        int N = (int)cfg->parallel.dp; /* also on a hot spare, which has no grid yet */
        if (cfg->spare.r > N)
            FT_DIE("train: spare.r = %lld needs 1 <= r <= dp = %d (deck_check)", cfg->spare.r,
                   N);
        tr->sp = spare_create(N, (int)cfg->spare.r);
        FT_ASSERT(tr->sp && spare_plan_init(&tr->plan, N, (int)cfg->spare.r) == 0);
        tr->replica = grid ? grid->dp_rank : -1;
        tr->shard_loss = calloc((size_t)N * cfg->parallel.ep, sizeof(double));
        FT_ASSERT(tr->shard_loss);
    }
    if (tr->sp) { /* data shards are the first grid's replicas, whatever failed since; each of
                     a replica's ep ranks reads its own part of the replica's shard */
        int ep = (int)cfg->parallel.ep, ep_rank = grid ? grid->ep_rank : 0;
        tr->data_rank = (tr->replica < 0 ? 0 : tr->replica) * ep + ep_rank;
        tr->data_width = tr->sp->N * ep;
        if (grid) tr->c_shards = grid->ep > 1 ? tr->c_edp : tr->c_dp;
    }
}

static void init_grid(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtGrid *grid,
                      const FtBatchSource *train, const FtBatchSource *val, const FtTrainer *keep)
{
    memset(tr, 0, sizeof *tr);
    tr->cfg = cfg;
    tr->model = model;
    tr->grid = grid;
    tr->train = *train;
    if (val) {
        tr->val = *val;
        tr->has_val = true;
    }
    tr->B = (int)cfg->train.batch;
    tr->T = train_seq_len(cfg);
    tr->micro = (int)cfg->parallel.microbatches;
    tr->schedule = (int)cfg->parallel.schedule;
    tr->warmup_extra = (int)cfg->parallel.warmup_extra;
    tr->data_width = 1;
    tr->emb_comm = MPI_COMM_NULL;
    if (grid) {
        if (model->sh.tp != grid->tp || model->sh.tp_rank != grid->tp_rank ||
            model->sh.pp != grid->pp || model->sh.pp_rank != grid->pp_rank ||
            model->sh.ep != grid->ep || model->sh.ep_rank != grid->ep_rank)
            FT_DIE("train: the model's shard (tp %d/%d, pp %d/%d, ep %d/%d) is not this rank's "
                   "grid place (tp %d/%d, pp %d/%d, ep %d/%d)", model->sh.tp_rank, model->sh.tp,
                   model->sh.pp_rank, model->sh.pp, model->sh.ep_rank, model->sh.ep,
                   grid->tp_rank, grid->tp, grid->pp_rank, grid->pp, grid->ep_rank, grid->ep);
        tr->data_rank = grid->dp_rank * grid->ep + grid->ep_rank;
        tr->data_width = grid->dp * grid->ep;
        tr->c_world = train_comm(cfg, model, grid->world, "world", false);
        tr->c_replica = train_comm(cfg, model, grid->replica_comm, "replica", false);
        if (grid->tp > 1) tr->c_tp = train_comm(cfg, model, grid->tp_comm, "tp", true);
        if (grid->pp > 1) {
            tr->c_pp = train_comm(cfg, model, grid->pp_comm, "pp", false);
            int ends = grid->pp_rank == 0 || grid->pp_rank == grid->pp - 1;
            FT_CHECK_MPI(MPI_Comm_split(grid->pp_comm, ends ? 0 : MPI_UNDEFINED, grid->pp_rank,
                                        &tr->emb_comm));
            if (ends) tr->c_emb = train_comm(cfg, model, tr->emb_comm, "emb", true);
        }
        if (grid->ep > 1) tr->c_ep = train_comm(cfg, model, grid->ep_comm, "ep", true);
        if (grid->dp > 1 && model->cfg.E)
            tr->c_edp = train_comm(cfg, model, grid->dp_comm, "dp.experts", true);
        if (grid->dp * grid->ep > 1)
            tr->c_dp = train_comm(cfg, model, grid->dense_dp_comm, "dp", true);
    }
    spare_setup(tr, cfg, grid, keep);
    FtGradSyncComms gc = {.dense = tr->c_dp, .expert = tr->c_edp, .emb = tr->c_emb,
                          .replica = tr->c_replica, .world = tr->c_world};
    if (tr->sp) { /* the whole gradient over the replicas at this (tp, pp, ep) place, after a
                     shard's dense gradient was summed over its replica's ep ranks */
        gc.dense = tr->c_shards, gc.expert = NULL, gc.ep = tr->c_ep;
        tr->gs = gradsync_create_shards(model, &gc, tr->micro, tr->sp->N, tr->sp->r);
    } else {
        tr->gs = gradsync_create(model, &gc, tr->micro, cfg->parallel.bucket_mb);
    }
    int pp = model->sh.pp, stage = model->sh.pp_rank;
    tr->nslots = pipeline_slots(tr->schedule, pp, stage, tr->micro, tr->warmup_extra);
    optim_cfg_from_deck(cfg, &tr->opt);
    FtTapeOpts o = {.B = tr->B, .T = tr->T, .backward = true,
                    .loss_scale = 1.0 / ((double)tr->micro * tr->data_width),
                    .ac_every = (int)cfg->train.ac_every};
    o.ac = cfg->train.ac == FT_AC_CHOICE_FULL    ? FT_AC_FULL
           : cfg->train.ac == FT_AC_CHOICE_EVERY ? FT_AC_EVERY
                                                 : FT_AC_OFF;
    if (tr->nslots > 1) {
        tr->more = calloc((size_t)tr->nslots - 1, sizeof *tr->more);
        FT_ASSERT(tr->more);
    }
    for (int k = 0; k < tr->nslots; k++) model_build_tape(model, &o, slot(tr, k));
    optim_build_tape(model, &tr->opt_tape);
    tr->step_flops = tr->micro * tape_flops(&tr->tape, 0, tr->tape.ne, false);
    timeline_init(&tr->tl, 1 << 16);
    tr->ex = (FtExec){.be = model->be, .stats = &tr->stats, .tl = &tr->tl, .tp = tr->c_tp,
                      .pp = tr->c_pp, .ep = tr->c_ep, .no_progress = !cfg->parallel.progress};
    tr->h_tokens = malloc(sizeof(int) * (size_t)tr->B * tr->T);
    tr->h_targets = malloc(sizeof(int) * (size_t)tr->B * tr->T);
    FT_ASSERT(tr->h_tokens && tr->h_targets);
}

void train_init_grid(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtGrid *grid,
                     const FtBatchSource *train, const FtBatchSource *val)
{
    init_grid(tr, cfg, model, grid, train, val, NULL);
}

void train_init_spare(FtTrainer *tr, const FtConfig *cfg, FtModel *model,
                      const FtBatchSource *train, const FtBatchSource *val)
{
    FT_ASSERT(cfg->spare.r > 0);
    init_grid(tr, cfg, model, NULL, train, val, NULL);
    tr->left = true; /* idles until it takes a failed replica's place (train_spare.c) */
}

/* The grid the trainer made after a failure, if any. */
static void free_own_grid(FtGrid *g)
{
    if (!g) return;
    grid_destroy(g);
    free(g);
}

void train_free(FtTrainer *tr)
{
    train_spare_detach(tr);
    if (tr->sp) {
        spare_destroy(tr->sp);
        spare_plan_free(&tr->plan);
        free(tr->shard_loss);
    }
    FtGrid *own = tr->own_grid;
    for (int k = 0; k < tr->nslots; k++) tape_free(slot(tr, k));
    tape_free(&tr->opt_tape);
    free(tr->more);
    free(tr->h_tokens), free(tr->h_targets);
    gradsync_free(tr->gs);
    comm_destroy(tr->c_tp), comm_destroy(tr->c_pp), comm_destroy(tr->c_dp);
    comm_destroy(tr->c_ep), comm_destroy(tr->c_edp);
    comm_destroy(tr->c_emb), comm_destroy(tr->c_replica), comm_destroy(tr->c_world);
    if (tr->emb_comm != MPI_COMM_NULL) MPI_Comm_free(&tr->emb_comm);
    timeline_free(&tr->tl);
    memset(tr, 0, sizeof *tr);
    free_own_grid(own); /* after the communicators built on it */
}

void train_regrid(FtTrainer *tr, const FtGrid *grid)
{
    /* a hot spare joins from no grid: init_grid checks its model's place instead */
    FT_ASSERT(grid && (!tr->grid || (grid->tp == tr->grid->tp && grid->pp == tr->grid->pp &&
              grid->ep == tr->grid->ep && grid->tp_rank == tr->grid->tp_rank &&
              grid->pp_rank == tr->grid->pp_rank && grid->ep_rank == tr->grid->ep_rank)));
    FtTrainer keep = *tr; /* what outlives the grid: the job's state and the hooks */
    keep.tl = (FtTimeline){0}; /* freed with the rest */
    tr->sp = NULL, tr->own_grid = NULL, tr->job = NULL; /* SPARe's state is kept, not freed */
    train_free(tr);
    init_grid(tr, keep.cfg, keep.model, grid, &keep.train, keep.has_val ? &keep.val : NULL,
              &keep);
    tr->cursor = keep.cursor;
    tr->regrids = keep.regrids + 1;
    tr->stats = keep.stats;
    tr->regions = keep.regions;
    tr->on_step = keep.on_step, tr->on_step_ctx = keep.on_step_ctx;
    tr->before_commit = keep.before_commit, tr->before_commit_ctx = keep.before_commit_ctx;
    tr->on_commit = keep.on_commit, tr->on_commit_ctx = keep.on_commit_ctx;
    tr->on_broken = keep.on_broken, tr->on_broken_ctx = keep.on_broken_ctx;
    tr->take_state = keep.take_state, tr->take_state_ctx = keep.take_state_ctx;
    tr->ex.hooks = keep.ex.hooks;
    tr->ex.poll = keep.ex.poll;
    tr->ex.no_progress = keep.ex.no_progress;
    tr->before_step = keep.before_step, tr->before_step_ctx = keep.before_step_ctx;
    tr->job = keep.job;
    tr->ckpt_regrid = keep.ckpt_regrid, tr->ckpt_newest = keep.ckpt_newest;
    tr->ckpt_restore = keep.ckpt_restore;
}

/* ---- the step ------------------------------------------------------------------------------ */

/* The batch into the tape's token tensors, through the host staging buffers. */
static void fetch(FtTrainer *tr, const FtBatchSource *src, FtTape *tp, uint64_t first)
{
    const FtBackend *be = tr->model->be;
    size_t bytes = sizeof(int) * (size_t)tr->B * tr->T;
    src->fetch(src->ctx, first, tr->B, tr->h_tokens, tr->h_targets);
    be->to_device(be->ctx, tp->t[tp->tokens].data, tr->h_tokens, bytes);
    be->to_device(be->ctx, tp->t[tp->targets].data, tr->h_targets, bytes);
}

/* The micro-batch's loss (last stage). */
static double read_loss(const FtTrainer *tr, const FtTape *tp)
{
    float v;
    tr->model->be->to_host(tr->model->be->ctx, &v, tp->t[tp->loss].data, sizeof v);
    return v;
}

/* The pipeline schedule over the M micro-batches of sequences first, first + B, ...: forwards
 * and backwards (banks from gradient sync). Returns the sum of the micro-batch losses (last
 * stage). */
static double run_microbatches(FtTrainer *tr, uint64_t first0)
{
    FtModel *m = tr->model;
    int M = tr->micro;
    FtPipeOp *ops = malloc(sizeof *ops * 2 * (size_t)M);
    FT_ASSERT(ops);
    pipeline_schedule(tr->schedule, m->sh.pp, m->sh.pp_rank, M, tr->warmup_extra, ops);
    double loss = 0;
    for (int i = 0; i < 2 * M; i++) {
        FtTape *tp = slot(tr, ops[i].mb % tr->nslots);
        tr->ex.instance = ops[i].mb; /* DMR's plan per micro-batch */
        if (ops[i].fwd) {
            uint64_t first = first0 + (uint64_t)ops[i].mb * tr->B;
            model_tape_bind(m, tp, m->grads, NULL);
            timers_begin(&tr->regions, FT_REGION_DATA);
            fetch(tr, &tr->train, tp, first);
            timers_end(&tr->regions, FT_REGION_DATA);
            timers_begin(&tr->regions, FT_REGION_FORWARD);
            exec_run_ctx(&tr->ex, tp, 0, tp->fwd_end);
            timers_end(&tr->regions, FT_REGION_FORWARD);
            if (m->last) loss += read_loss(tr, tp);
        } else {
            float *grads;
            const float *prev;
            gradsync_backward(tr->gs, &tr->ex, ops[i].mb, &grads, &prev);
            model_tape_bind(m, tp, grads, prev);
            tr->ex.grads_ready = gradsync_layer_ready;
            tr->ex.grads_arg = tr->gs;
            timers_begin(&tr->regions, FT_REGION_BACKWARD);
            exec_run_ctx(&tr->ex, tp, tp->fwd_end, tp->ne);
            timers_end(&tr->regions, FT_REGION_BACKWARD);
            tr->ex.grads_ready = NULL;
        }
    }
    tr->ex.instance = 0;
    free(ops);
    return loss;
}

/* SPARe: this replica's counted shards of the plan, level by level, each banked by gradient
 * sync; then the shard-keyed reduction and its exactly-once check. Returns the step's loss
 * summed over the shards in shard order (the same bits whoever computed them). */
static double spare_compute(FtTrainer *tr, long long step)
{
    FtSparePlan *p = &tr->plan;
    if (spare_plan(tr->sp, p))
        FT_DIE("spare: step %lld: no plan covers every shard (a wipe-out must stop the run)", step);
    int d = p->depth, N = tr->sp->N;
    int ep = tr->grid ? tr->grid->ep : 1, e = tr->grid ? tr->grid->ep_rank : 0;
    uint64_t per_shard = (uint64_t)tr->micro * tr->B; /* sequences of one data rank */
    bool count_loss = tr->model->last && tr->model->sh.tp_rank == 0;
    memset(tr->shard_loss, 0, sizeof(double) * (size_t)N * ep);
    for (int l = 0; l < d; l++) {
        size_t k = (size_t)tr->replica * d + l;
        if (!p->counted[k]) continue; /* computed by a replica at a lower place of the plan */
        int s = p->shard[k];
        double t0 = MPI_Wtime();
        gradsync_shard_begin(tr->gs, s);
        /* this ep rank's part of shard s: what data rank s ep + e reads without SPARe */
        double loss = run_microbatches(tr, tr->cursor + ((uint64_t)s * ep + e) * per_shard);
        gradsync_shard_end(tr->gs, &tr->ex);
        if (count_loss) tr->shard_loss[(size_t)s * ep + e] = loss;
        tr->spare.mine++;
        if (l > 0) {
            tr->spare.mine_deep++;
            tr->spare.deep_s += MPI_Wtime() - t0;
        }
    }
    timers_begin(&tr->regions, FT_REGION_GRADSYNC);
    exec_finish(&tr->ex);
    gradsync_finish(tr->gs, &tr->ex);
    int count, bad = gradsync_shard_violation(tr->gs, &count);
    if (bad >= 0 && !comm_ft_failed()) /* after a process failure the counts are undefined */
        FT_DIE("spare: step %lld: shard %d entered the gradient reduction %d times (exactly once "
               "required)", step, bad, count);
    timers_end(&tr->regions, FT_REGION_GRADSYNC);
    /* one nonzero per (shard, ep rank): the sum over ranks is exact, then added in that order
     * (the data ranks' order: plain data parallelism's loss sum) */
    size_t nl = (size_t)N * ep;
    if (tr->c_world) {
        FtReq r;
        comm_iallreduce_sum(tr->c_world, FT_IN_PLACE, tr->shard_loss, nl, FT_F64, &r);
        exec_wait(&tr->ex, &r, 1, FT_TL_OTHER);
    }
    double loss = 0;
    for (size_t k = 0; k < nl; k++) loss += tr->shard_loss[k];
    return loss;
}

/* SPARe's counters for a committed step (the same on every live rank). */
static void spare_count_step(FtTrainer *tr)
{
    const FtSparePlan *p = &tr->plan;
    size_t slots = (size_t)p->N * p->depth;
    long long live = 0, counted = 0;
    for (size_t k = 0; k < slots; k++) {
        live += p->shard[k] >= 0;
        counted += p->counted[k];
    }
    tr->spare.steps++;
    tr->spare.computed += counted;
    tr->spare.needed += p->N;
    tr->spare.skipped += live - counted;
    tr->spare.levels += p->depth;
}

/* One attempt at the step: every micro-batch's forward and backward, the step's gradient
 * synchronized, its norm, and the optimizer's outputs in the model's *_new buffers. Reads the
 * current parameters, moments and cursor and changes none of them. Returns the mean loss. */
static double step_compute(FtTrainer *tr, double *norm, double *lr)
{
    FtModel *m = tr->model;
    int M = tr->micro;
    double loss;
    if (tr->sp) {
        loss = spare_compute(tr, m->step + 1);
    } else {
        loss = run_microbatches(tr, tr->cursor + (uint64_t)tr->data_rank * M * tr->B);
        timers_begin(&tr->regions, FT_REGION_GRADSYNC);
        exec_finish(&tr->ex);
        gradsync_finish(tr->gs, &tr->ex);
        timers_end(&tr->regions, FT_REGION_GRADSYNC);
        loss = gradsync_sum_last_stage(tr->gs, &tr->ex, loss, true);
    }
    timers_begin(&tr->regions, FT_REGION_OPTIMIZER);
    FtTape *ot = &tr->opt_tape;
    model_tape_bind(m, ot, m->grads, NULL);
    exec_run_ctx(&tr->ex, ot, 0, ot->fwd_end);
    *norm = sqrt(gradsync_norm(tr->gs, &tr->ex, optim_tape_sumsq(ot)));
    *lr = optim_lr(&tr->opt, m->step);
    optim_tape_set(ot, m, &tr->opt, *lr, *norm);
    exec_run_ctx(&tr->ex, ot, ot->fwd_end, ot->ne);
    timers_end(&tr->regions, FT_REGION_OPTIMIZER);
    return loss / ((double)M * tr->data_width);
}

FtStepStatus train_step(FtTrainer *tr, FtStepInfo *info)
{
    double t0 = MPI_Wtime();
    timers_begin(&tr->regions, FT_REGION_STEP);
    FtModel *m = tr->model;
    FtStepStatus st = FT_STEP_OK;
    double norm = 0, lr = 0, loss = 0;
    FT_ASSERT(!tr->left);
    info->redos = 0;
    for (int attempt = 0;; attempt++) {
        loss = step_compute(tr, &norm, &lr);
        int redo = tr->before_commit ? tr->before_commit(tr->before_commit_ctx, tr, attempt) : 0;
        /* ULFM: did a process die during the step (its DMR agreement included)? Then the
         * survivors compute it again from the same state; not a DMR attempt */
        int f = train_spare_recover(tr, m->step + 1); /* train_spare.c */
        if (f < 0) {
            st = FT_STEP_STOPPED;
            break;
        }
        if (f > 0) {
            if (tr->on_broken) tr->on_broken(tr->on_broken_ctx, tr);
            attempt--;
            continue;
        }
        if (!redo) break;
        /* redo: the current state is untouched (the optimizer wrote *_new) */
        info->redos++;
        st = FT_STEP_REDONE;
        if (attempt + 1 >= FT_TRAIN_MAX_REDOS) {
            st = FT_STEP_FAILED;
            break;
        }
    }
    if (st != FT_STEP_FAILED && st != FT_STEP_STOPPED) {
        model_commit(m);
        tr->cursor += (uint64_t)tr->B * tr->micro * tr->data_width;
        if (tr->sp) spare_count_step(tr);
        if (tr->on_commit) tr->on_commit(tr->on_commit_ctx, tr);
    }
    info->live = tr->sp ? tr->sp->nlive : 0;
    info->depth = tr->sp ? tr->plan.depth : 0;
    info->step = m->step;
    info->loss = loss;
    info->lr = lr;
    info->grad_norm = norm;
    double t1 = MPI_Wtime();
    info->seconds = t1 - t0;
    timeline_add(&tr->tl, FT_TL_STEP, t0, t1);
    timers_end(&tr->regions, FT_REGION_STEP);
    return st;
}

double train_eval(FtTrainer *tr, int n)
{
    if (!tr->has_val || n <= 0) return NAN;
    timers_begin(&tr->regions, FT_REGION_EVAL);
    double s = 0;
    FtTape *tp = &tr->tape;
    model_tape_bind(tr->model, tp, tr->model->grads, NULL);
    for (int k = 0; k < n; k++) {
        fetch(tr, &tr->val, tp, (uint64_t)k * tr->B);
        exec_run_ctx(&tr->ex, tp, 0, tp->fwd_end);
        if (tr->model->last) s += read_loss(tr, tp);
    }
    exec_finish(&tr->ex);
    bool first = tr->sp ? !tr->grid || (tr->grid->dp_rank == 0 && tr->grid->ep_rank == 0)
                        : tr->data_rank == 0;
    double v = gradsync_sum_last_stage(tr->gs, &tr->ex, s, first) / n;
    timers_end(&tr->regions, FT_REGION_EVAL);
    return v;
}

void train_report_regions(const FtTrainer *tr, FILE *out)
{
    timers_report(&tr->regions, tr->grid ? tr->grid->world : MPI_COMM_SELF, out);
}

double train_report_waiting(const FtTrainer *tr, FILE *out)
{
    char label[48] = "";
    MPI_Comm comm = MPI_COMM_SELF;
    if (tr->grid) {
        snprintf(label, sizeof label, "dp %d pp %d ep %d tp %d", tr->grid->dp_rank,
                 tr->grid->pp_rank, tr->grid->ep_rank, tr->grid->tp_rank);
        comm = tr->grid->world;
    }
    return timeline_report(&tr->tl, comm, label, out);
}

/* Rank 0's data-parallel buckets (gradsync_buckets), the first few sizes, on one line. */
static void log_buckets(const FtTrainer *tr)
{
    enum { SHOW = 8 };
    size_t sz[SHOW];
    int nb = gradsync_buckets(tr->gs, sz, SHOW);
    if (!nb) return;
    char list[SHOW * 16 + 8] = "";
    size_t at = 0;
    for (int i = 0; i < nb && i < SHOW; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%.2f", i ? " " : "",
                               sz[i] * sizeof(float) / 1048576.0);
    if (nb > SHOW) snprintf(list + at, sizeof list - at, " ...");
    log_info("data-parallel buckets: %d on this rank, MiB in start order %s (parallel.bucket_mb "
             "%g), each all-reduced as the last micro-batch's backward completes it",
             nb, list, tr->cfg->parallel.bucket_mb);
}

void train_run(FtTrainer *tr, FtTrainSummary *s)
{
    const FtConfig *cfg = tr->cfg;
    long long steps = cfg->train.steps, skip = cfg->train.rate_skip;
    int nval = tr->has_val ? (int)cfg->train.val_batches : 0;
    memset(s, 0, sizeof *s);
    s->ok = true;
    s->val_loss = NAN;
    double timed = 0;
    long long ntimed = 0;
    double tokens = (double)tr->B * tr->T * tr->micro * tr->data_width;
    log_info("model: %zu parameters on this rank (%.2f M), L %d, NH %d, C %d, V %d (Vp %d), T %d; "
             "tape %d entries x %d slot%s, activations %.1f MiB; %.3f GFLOP per step per rank",
             tr->model->nparams, tr->model->nparams / 1e6, tr->model->cfg.L, tr->model->cfg.NH,
             tr->model->cfg.C, tr->model->cfg.V, tr->model->cfg.Vp, tr->T, tr->tape.ne,
             tr->nslots, tr->nslots == 1 ? "" : "s", tr->nslots * tr->tape.arena_bytes / 1048576.0,
             tr->step_flops / 1e9);
    log_buckets(tr);
    timeline_reset(&tr->tl);
    timers_reset(&tr->regions);
    FtProgress pr; /* the per-step line, or the live line on a terminal */
    progress_start(&pr, cfg->run.progress, steps);
    long long i = 0; /* steps this rank computed in this call (train.rate_skip counts these) */
    while (tr->model->step < steps) { /* a resumed or restarted run continues after its step */
        /* faults hook, failures, spares, restarts (train_spare.c); idle ranks wait there */
        int next = train_spare_before_step(tr);
        if (next == FT_SPARE_AGAIN) continue;
        if (next == FT_SPARE_LEFT || next == FT_SPARE_WIPEOUT) {
            s->left = next == FT_SPARE_LEFT;
            s->wipeout = next == FT_SPARE_WIPEOUT;
            s->ok = !s->wipeout;
            break;
        }
        if (i == skip) { /* warm-up steps out of the waiting fractions and the regions */
            timeline_reset(&tr->tl);
            timers_reset(&tr->regions);
        }
        FtStepInfo st;
        FtStepStatus ss = train_step(tr, &st);
        if (ss == FT_STEP_STOPPED) { /* ULFM: a process died (train_spare_recover) */
            if (tr->left) continue; /* this rank's replica failed: it waits, as above */
            s->wipeout = true;      /* no in-process restart after a real death: exit 5 */
            s->ok = false;
            break;
        }
        if (ss == FT_STEP_FAILED) {
            log_error("step %lld: still failing after %d attempts: stopping", st.step + 1,
                      FT_TRAIN_MAX_REDOS);
            s->ok = false;
            break;
        }
        if (i == 0) s->first_loss = st.loss;
        s->last_loss = st.loss;
        s->steps = st.step;
        if (i >= skip) {
            timed += st.seconds;
            ntimed++;
        }
        i++;
        char spare[48] = "";
        if (tr->sp) snprintf(spare, sizeof spare, " | live %d depth %d", st.live, st.depth);
        progress_step(&pr, &st, tokens / st.seconds, spare);
        if (!isfinite(st.loss) || !isfinite(st.grad_norm)) {
            log_error("step %lld: the loss is %g and the gradient norm %g: stopping", st.step,
                      st.loss, st.grad_norm);
            s->ok = false;
            break;
        }
        bool last = st.step == steps;
        if (nval && (last || (cfg->train.val_every > 0 && st.step % cfg->train.val_every == 0))) {
            s->val_loss = train_eval(tr, nval);
            log_info("step %5lld/%lld | val loss %.4f (%d x %d sequences)", st.step, steps,
                     s->val_loss, nval, tr->B);
            if (!isfinite(s->val_loss)) s->ok = false;
        }
        if (tr->on_step) { /* checkpoint hook: on the live ranks, after failures too */
            timers_begin(&tr->regions, FT_REGION_CHECKPOINT);
            tr->on_step(tr->on_step_ctx, tr, &st, last);
            timers_end(&tr->regions, FT_REGION_CHECKPOINT);
        }
    }
    progress_end(&pr);
    if (train_spare_end(tr)) { /* the ranks that idle leave their wait */
        s->wipeout = true;     /* ULFM: a death after the last step wiped the run out */
        s->ok = false;
    }
    s->left = s->left || tr->left; /* ULFM: this rank's replica died after the last step */
    if (ntimed) {
        s->mean_ms = 1e3 * timed / ntimed;
        s->tokens_per_s = tokens * ntimed / timed;
        s->gflops = tr->step_flops * ntimed / timed / 1e9;
    }
}

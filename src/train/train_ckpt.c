/* train_ckpt.c: checkpoints of the training state (train_ckpt.h).
 *
 * Key decisions:
 *  - Names: /params/NAME, /optim/m/NAME, /optim/v/NAME (NAME = the model's tensor names, llm.c's
 *    order; global shapes from model_param_slab: stacked per-layer tensors keep their layer
 *    axis, qkv its (q, k, v) axis), /state/step, /state/data_cursor, /state/seed, /state/lr,
 *    /config/deck, /config/resolved.
 *  - train_ckpt_slabs() is the single layout mapping, on the model's own model_param_slab():
 *    each rank writes its shard's hyperslab (one writer per element: replicated copies over tp,
 *    the tied wte's last-stage copy and dp replicas other than dp rank 0 write nothing) and
 *    reads back its own hyperslab of whatever layout wrote the file.
 *  - Decisions that could differ between ranks (the time trigger, auto's measured inputs) are
 *    agreed before anyone branches: rank 0's clock decides the time trigger, and the measured
 *    step and write times are agreed (max) before the optimizer runs, so every rank computes
 *    the same interval.
 *  - The time trigger never blocks a step: at the end of step s rank 0 decides whether step s+1
 *    is due (the time since the last checkpoint plus its last step time reaches every_s) and
 *    starts a non-blocking broadcast of that on the writer's own duplicate communicator; step
 *    s+1 completes it (long done by then: a whole step ran in between) and every rank branches
 *    on the same bit at the same step. So step 1 is never due by time, and a checkpoint comes at
 *    the step whose end rank 0 expects past every_s.
 *  - interval = auto: the first checkpoint comes after the first timed step (train.rate_skip);
 *    synchronous mode charges its write time per checkpoint, asynchronous mode the stall (copy +
 *    wait) but never checkpoints more often than one write takes. The failure model (GPUs,
 *    MTBF, law, restart, detection latency) comes from the deck's [cluster] section; the run
 *    length is train.steps.
 *  - The end of the run is always checkpointed when checkpoints are on, so a run can be extended
 *    (train.steps raised, checkpoint.resume=auto).
 *  - A model on a device (run.backend = cuda) is staged through host memory: a save copies the
 *    parameters and both moments into one host buffer (kept for the next save: in synchronous
 *    mode the writer reads it at the commit) and writes from there; a restore copies the device
 *    state to a host buffer, reads the file's slabs into it (what the file does not hold keeps
 *    its value) and copies it back. */
#include "ftllm/train_ckpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"
#include "ftllm/backend.h"
#include "ftllm/comm.h"
#include "ftllm/log.h"
#include "ftllm/sim.h"

struct ft_train_ckpt {
    const FtConfig *cfg;
    MPI_Comm comm;
    int rank;
    FtCkpt *w;
    bool async;
    long long interval;  /* steps; 0 = no step trigger (yet) */
    bool auto_pending;   /* interval = auto, not resolved yet */
    double every_s;      /* time trigger; 0 = none */
    double last_t;       /* MPI_Wtime of the last checkpoint (or of attach) */
    FtComm *agree;       /* a duplicate of comm: the time trigger's broadcast, auto's maxima */
    FtReq due_req;       /* the time trigger's broadcast for the next step, when active */
    int32_t due_next;    /* its payload: rank 0's decision for the next step */
    long long last_step; /* step of the last checkpoint written, -1 = none */
    long long nsteps;    /* steps seen by the hook in this run */
    double step_s_sum;   /* seconds of the timed steps (after train.rate_skip) */
    long long step_n;
    double auto_step_s, auto_ckpt_s; /* interval = auto: the inputs the optimizer got */
    int count;
    double stall;
    float *stage; /* a device model's parameters and moments in host memory (3 x nparams) */
    FtTimers *kill; /* the trainer's regions: FTLLM_TEST_KILL's `write` point (testing aid) */
    bool redo;      /* agreed: the next step's end writes a checkpoint (one was abandoned) */
    long long abandoned_step; /* the step of a write this rank abandoned (ULFM: a process
                                 died during it) and nobody wrote again since, -1 = none;
                                 agreed in on_regrid, written again after the recovery */
    long long prev_step;      /* last_step before the newest write (asynchronous: it may fail) */
    long long inflight;       /* asynchronous: the step of the write in flight, -1 = none */
    char *resolved; /* deck_print text */
    FtCkptOpts opts;
};

/* ULFM: the writer survives a process death (ckpt.h, FtCkptFt) through comm/'s tests */
static const FtCkptFt g_ft = {comm_ft_mpi_failed, comm_ft_mpi_lost, comm_ft_mpi_agree,
                              comm_ft_mpi_revoke};

static void before_dataset(void *ctx)
{
    FtTrainCkpt *tc = ctx;
    if (tc->kill) timers_point(tc->kill, FT_KILL_WRITE);
}

static const char *g_part_name[3] = {"params", "optim/m", "optim/v"};
static const char *g_part_desc[3] = {"model parameter", "AdamW first moment (mean of gradients)",
                                     "AdamW second moment (mean of squared gradients)"};

int train_ckpt_slabs(const FtTrainer *tr, MPI_Comm comm, FtCkptSlab slabs[FT_NPARAM_TENSORS])
{
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    const FtGrid *g = tr->grid;
    /* dp rank 0 writes; model_param_slab leaves the ep copies of dense tensors out */
    bool replica_writer = g ? g->dp_rank == 0 : rank == 0;
    /* shapes: (ndim, gshape[4]) per tensor, max over ranks (a rank without the tensor has 0s) */
    enum { W = 1 + FT_SLAB_MAX_DIMS };
    long long shp[FT_NPARAM_TENSORS * W];
    memset(shp, 0, sizeof shp);
    FtSlab ms[FT_NPARAM_TENSORS];
    for (int id = 0; id < FT_NPARAM_TENSORS; id++) {
        model_param_slab(tr->model, id, &ms[id]);
        shp[id * W] = ms[id].ndims;
        for (int k = 0; k < ms[id].ndims; k++) shp[id * W + 1 + k] = (long long)ms[id].gshape[k];
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, shp, FT_NPARAM_TENSORS * W, MPI_LONG_LONG, MPI_MAX, comm);
    if (rc != MPI_SUCCESS && comm_ft_mpi_failed(comm, rc)) return -1;
    FT_CHECK_MPI(rc);
    for (int id = 0; id < FT_NPARAM_TENSORS; id++) {
        FtCkptSlab *s = &slabs[id];
        memset(s, 0, sizeof *s);
        s->ndim = (int)shp[id * W];
        /* ndim 0: no rank holds it (the MoE router of a dense model): not stored */
        FT_ASSERT(s->ndim >= 0 && s->ndim <= FT_SLAB_MAX_DIMS && s->ndim <= CKPT_MAX_DIMS);
        bool held = ms[id].ndims > 0;
        for (int k = 0; k < s->ndim; k++) {
            s->gshape[k] = (uint64_t)shp[id * W + 1 + k];
            if (held) {
                FT_ASSERT(ms[id].gshape[k] == s->gshape[k]);
                s->offset[k] = ms[id].offset[k];
                s->count[k] = ms[id].count[k];
            }
        }
        s->local_offset = tr->model->p[id].offset;
        s->writer = held && ms[id].writer && replica_writer;
    }
    return 0;
}

static char *resolved_text(const FtConfig *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) FT_DIE("open_memstream failed");
    deck_print(f, cfg);
    fclose(f);
    return buf;
}

int train_ckpt_create(FtTrainCkpt **out, const FtConfig *cfg, MPI_Comm comm, char *err,
                      size_t errlen)
{
    *out = NULL;
    const struct ft_cfg_checkpoint *k = &cfg->checkpoint;
    if (k->interval == 0 && k->every_s <= 0) return 0;
    FtTrainCkpt *tc = calloc(1, sizeof *tc);
    if (!tc) FT_DIE("out of memory");
    tc->cfg = cfg;
    tc->comm = comm;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &tc->rank));
    tc->async = k->async;
    tc->interval = k->interval == FT_AUTO ? 0 : k->interval;
    tc->auto_pending = k->interval == FT_AUTO;
    tc->every_s = k->every_s;
    tc->last_step = tc->prev_step = tc->abandoned_step = tc->inflight = -1;
    FtCkptOpts o = {.keep = (int)k->keep, .async = k->async,
                    .debug_delay_ms = (int)k->debug_delay_ms,
                    .ft = comm_ft_enabled() ? &g_ft : NULL, .before_dataset = before_dataset,
                    .before_dataset_ctx = tc};
    tc->opts = o;
    tc->w = ckpt_create(k->dir, cfg->run.name, comm, &o, err, errlen);
    if (!tc->w) {
        free(tc);
        return -1;
    }
    tc->resolved = resolved_text(cfg);
    tc->agree = comm_create_mpi_dup(comm, "checkpoint");
    char when[160] = "";
    if (tc->auto_pending) snprintf(when, sizeof when, "interval auto (after the first timed step)");
    else if (tc->interval) snprintf(when, sizeof when, "every %lld steps", tc->interval);
    if (tc->every_s > 0)
        snprintf(when + strlen(when), sizeof when - strlen(when), "%severy %g s", when[0] ? ", " : "",
                 tc->every_s);
    log_info("checkpoints: %s/%s.step-*.h5, %s and at the end, keep %lld, %s", k->dir,
             cfg->run.name, when, k->keep, k->async ? "asynchronous" : "synchronous");
    *out = tc;
    return 0;
}

/* Where the parameters and both moments are in host memory: the model's own arrays, or for a
 * device model *stage (allocated when NULL: 3 x nparams floats) filled from the device. */
static void host_state(const FtModel *m, float **stage, float *base[3])
{
    base[0] = m->params, base[1] = m->m, base[2] = m->v;
    if (backend_is_host(m->be)) return;
    if (!*stage && !(*stage = malloc(3 * sizeof(float) * m->nparams)))
        FT_DIE("checkpoint: out of memory staging %zu parameters in host memory", m->nparams);
    for (int k = 0; k < 3; k++) {
        float *h = *stage + (size_t)k * m->nparams;
        m->be->to_host(m->be->ctx, h, base[k], sizeof(float) * m->nparams);
        base[k] = h;
    }
}

/* Asynchronous mode: waits for the write in flight; when a process failure made it abandon
 * the write, the run's newest checkpoint is the one before it again. */
static void settle(FtTrainCkpt *tc)
{
    if (tc->inflight < 0) return;
    ckpt_wait(tc->w);
    if (ckpt_abandoned(tc->w)) {
        tc->abandoned_step = tc->last_step;
        tc->last_step = tc->prev_step;
        tc->count--;
        ft_log_rank(FT_LOG_DEBUG, "checkpoint of step %lld: the background write was abandoned "
                    "(a process failed)", tc->abandoned_step);
    }
    tc->inflight = -1;
}

int train_ckpt_save(FtTrainCkpt *tc, const FtTrainer *tr)
{
    const FtModel *m = tr->model;
    settle(tc);
    float *base[3];
    host_state(m, &tc->stage, base); /* the stage is free again: an asynchronous write copies
                                        at each put, a synchronous one wrote at its commit */
    FtCkptSlab sl[FT_NPARAM_TENSORS];
    if (train_ckpt_slabs(tr, tc->comm, sl)) return -1;
    ckpt_begin(tc->w, m->step);
    for (int part = 0; part < 3; part++)
        for (int id = 0; id < FT_NPARAM_TENSORS; id++) {
            FtCkptSlab *s = &sl[id];
            if (!s->ndim) continue;
            uint64_t none[CKPT_MAX_DIMS] = {0};
            char name[CKPT_NAME_MAX], desc[160];
            snprintf(name, sizeof name, "%s/%s", g_part_name[part], m->p[id].name);
            snprintf(desc, sizeof desc, "%s %s%s", g_part_desc[part], m->p[id].name,
                     m->p[id].per_layer ? ", stacked over layers (L, ...)" : "");
            ckpt_put_tensor(tc->w, name, CKPT_F32, s->ndim, s->gshape, s->offset,
                            s->writer ? s->count : none, base[part] + s->local_offset, "1", desc);
        }
    ckpt_put_i64(tc->w, CKPT_DS_STEP, m->step, "steps",
                 "optimizer steps completed (also the learning-rate schedule position)");
    ckpt_put_u64(tc->w, "state/data_cursor", tr->cursor, "sequences",
                 "next training sequence number (data order: a pure function of run.seed and it)");
    ckpt_put_u64(tc->w, "state/seed", (uint64_t)tc->cfg->run.seed, "1",
                 "run.seed: seeds the data order (training has no other random state)");
    ckpt_put_f64(tc->w, "state/lr", optim_lr(&tr->opt, m->step), "1",
                 "learning rate of the next step (informational; recomputed from state/step)");
    ckpt_put_text(tc->w, CKPT_DS_DECK, tc->cfg->text ? tc->cfg->text : "", "the deck file as given");
    ckpt_put_text(tc->w, CKPT_DS_CONFIG, tc->resolved, "the resolved configuration (every key)");
    ckpt_commit(tc->w, NULL);
    if (!tc->async && ckpt_abandoned(tc->w)) return -1;
    tc->count++;
    tc->prev_step = tc->last_step;
    tc->last_step = m->step;
    if (tc->async) tc->inflight = m->step;
    return 0;
}

/* interval = auto: the optimizer's interval from what this run measured and the deck's cluster. */
static void resolve_auto(FtTrainCkpt *tc, double save_s)
{
    const FtConfig *cfg = tc->cfg;
    ckpt_wait(tc->w); /* async: the write time is known once it finished */
    double step_s = comm_max_f64_poll(tc->agree, tc->step_s_sum / (double)tc->step_n, NULL);
    double write_s = comm_max_f64_poll(tc->agree, ckpt_last_write_s(tc->w), NULL);
    double stall_s = comm_max_f64_poll(tc->agree, save_s, NULL);
    double C = tc->async ? stall_s : write_s;
    if (!(C > 0)) C = 1e-9;
    FtCluster c;
    sim_cluster_from_cfg(cfg, &c);
    c.step = step_s > 0 ? step_s : 1e-9;
    c.ckpt = C;
    c.steps = (double)(cfg->train.steps > 0 ? cfg->train.steps : 1);
    FtPlan plan;
    double tau;
    const char *how = "the optimizer (checkpoint-only policy, exact expected time-to-train)";
    double M = c.gpu_mtbf / (double)c.gpus; /* system MTBF, seconds */
    if (analytic_plan(&c, FT_POL_CKPT, 1, 0, &plan) == 0) {
        tau = plan.interval;
    } else {
        tau = analytic_daly(C, M);
        how = "Daly's interval (the optimizer found no finite plan)";
        plan.goodput = NAN;
    }
    long long n = llround(tau / c.step);
    if (tc->async && n * c.step < write_s) n = (long long)ceil(write_s / c.step);
    if (n < 1) n = 1;
    tc->interval = n;
    tc->auto_pending = false;
    tc->auto_step_s = c.step;
    tc->auto_ckpt_s = C;
    log_info("checkpoint.interval = auto: every %lld steps (%.3g s of work), chosen by %s", n,
             (double)n * c.step, how);
    log_info("  measured here: step %.3g s (mean of %lld timed steps), checkpoint write %.3g s "
             "(%.1f MB)%s; cost charged per checkpoint C = %.3g s",
             c.step, tc->step_n, write_s, ckpt_last_write_bytes(tc->w) / 1e6,
             tc->async ? ", training stall (async copy)" : "", C);
    log_info("  from the deck ([cluster]): %lld GPUs, %lld per replica, GPU MTBF %g h (%s) -> a "
             "failure every %.3g s; restart %g s, detection latency %g s; run of train.steps = "
             "%.0f steps", c.gpus, c.gpus_per_replica, cfg->cluster.gpu_mtbf_h,
             c.law == FT_LAW_WEIBULL ? "Weibull: its renewal rate over the run" : "exponential", M, c.restart,
             c.latency, c.steps);
    log_info("  why: Young sqrt(2CM) = %.3g s, Daly %.3g s; rounded to whole steps%s; predicted "
             "goodput %.4f", analytic_young(C, M), analytic_daly(C, M),
             tc->async ? ", at least one write time apart" : "", plan.goodput);
}

/* The time trigger's decision for this step (agreed at the end of the previous one). */
static bool time_due(FtTrainCkpt *tc)
{
    if (!tc->due_req.active) return false; /* none started: the first step */
    comm_wait(&tc->due_req, NULL);
    return tc->due_next != 0;
}

/* Rank 0 decides whether the next step is due by time (step_s: the step just done) and the
 * broadcast starts; every rank completes it at the next step. */
static void time_decide_next(FtTrainCkpt *tc, double step_s)
{
    if (tc->rank == 0) tc->due_next = MPI_Wtime() - tc->last_t + step_s >= tc->every_s;
    comm_ibcast(tc->agree, &tc->due_next, 1, FT_I32, 0, &tc->due_req);
}

static void on_step(void *ctx, FtTrainer *tr, const FtStepInfo *st, bool last)
{
    FtTrainCkpt *tc = ctx;
    tc->nsteps++;
    if (tc->nsteps > tr->cfg->train.rate_skip) {
        tc->step_s_sum += st->seconds;
        tc->step_n++;
    }
    long long step = st->step;
    bool due = last;
    if (tc->interval > 0)
        due = due || (tc->cfg->checkpoint.interval == FT_AUTO
                          ? step - (tc->last_step < 0 ? 0 : tc->last_step) >= tc->interval
                          : step % tc->interval == 0);
    if (tc->auto_pending && tc->step_n > 0) due = true;
    if (tc->every_s > 0) due = time_due(tc) || due; /* completes the request on every rank */
    due = due || tc->redo;
    if (due && step != tc->last_step) {
        double t0 = MPI_Wtime();
        if (tc->redo) /* after the recovery: the grid's rank 0 speaks now (on_regrid: not yet) */
            log_warn("checkpoint of step %lld abandoned: a process died during its write; the "
                     "survivors write step %lld's now (before it, the newest: %s)",
                     tc->abandoned_step, step, tc->last_step < 0 ? "none of this run" : "the one before");
        if (train_ckpt_save(tc, tr)) {
            /* ULFM: a process died during the write; the next step's agreement finds it (the
             * failure noted here makes that step fail at once) and the survivors recover;
             * on_regrid then agrees to write this checkpoint again */
            tc->abandoned_step = step;
            ft_log_rank(FT_LOG_DEBUG, "checkpoint of step %lld abandoned: a process failed "
                        "during its write", step);
            comm_ft_note_failure("the checkpoint write");
            tc->stall += MPI_Wtime() - t0;
        } else {
            tc->redo = false;
            if (tc->abandoned_step <= step) tc->abandoned_step = -1;
            double save_s = MPI_Wtime() - t0;
            if (tc->auto_pending && tc->step_n > 0) resolve_auto(tc, save_s);
            tc->last_t = MPI_Wtime();
            tc->stall += tc->last_t - t0;
            log_debug("checkpoint of step %lld: %.3f s in the training loop", step,
                      tc->last_t - t0);
        }
    }
    if (tc->every_s > 0 && !last) time_decide_next(tc, st->seconds);
}

/* SPARe: the writer follows the trainer onto another grid (train.h, ckpt_regrid): the write in
 * flight and the time trigger's broadcast finish on the old grid, then a writer on the new one
 * (none when this rank stops training). Checkpoint files are named by run and step only, so
 * the new writer continues the old one's series (keep-last-K reads the folder). */
static void on_regrid(void *ctx, FtTrainer *tr, MPI_Comm world)
{
    (void)tr;
    FtTrainCkpt *tc = ctx;
    if (tc->w) { /* collective over the old grid */
        double t0 = MPI_Wtime();
        settle(tc);
        ckpt_destroy(tc->w);
        tc->stall += MPI_Wtime() - t0;
        comm_wait(&tc->due_req, NULL);
        comm_destroy(tc->agree);
        tc->w = NULL, tc->agree = NULL;
    }
    if (world == MPI_COMM_NULL) return;
    char err[512];
    tc->w = ckpt_create(tc->cfg->checkpoint.dir, tc->cfg->run.name, world, &tc->opts, err,
                        sizeof err);
    if (!tc->w) FT_DIE("checkpoint: the writer cannot move onto the new grid: %s", err);
    tc->comm = world;
    FT_CHECK_MPI(MPI_Comm_rank(world, &tc->rank));
    tc->agree = comm_create_mpi_dup(world, "checkpoint");
    tc->due_req = (FtReq){0};
    tc->last_t = MPI_Wtime();
    /* ULFM: a write that a survivor abandoned (a process died during it) is written again at
     * the next step's end; the newest written is the latest any survivor saw committed (rank
     * 0 renames a complete file before the others may see the failure) */
    long long lost = comm_max_i64_poll(tc->agree, tc->abandoned_step, NULL);
    tc->last_step = comm_max_i64_poll(tc->agree, tc->last_step, NULL);
    tc->redo = lost > tc->last_step;
    tc->abandoned_step = tc->redo ? lost : -1; /* else committed after all */
}

/* SPARe: the step of the newest checkpoint this run wrote (or resumed from), when it verifies;
 * -1 otherwise. Only this run's own: the folder may hold a later step of an earlier run of the
 * same name. The step is agreed (max) over the grid: a spare that joined has written none. */
static long long newest(void *ctx, FtTrainer *tr)
{
    (void)tr;
    FtTrainCkpt *tc = ctx;
    ckpt_wait(tc->w);
    long long step = comm_max_i64_poll(tc->agree, tc->last_step, NULL);
    if (step < 0) return -1;
    char path[CKPT_PATH_MAX], err[512];
    ckpt_path(path, sizeof path, tc->cfg->checkpoint.dir, tc->cfg->run.name, step);
    FtCkptFile *f = ckpt_open(path, tc->comm, err, sizeof err);
    int bad = !f || ckpt_verify(f, err, sizeof err);
    if (f) ckpt_close(f);
    if (bad) {
        log_warn("spare: the newest checkpoint of this run does not verify: %s", err);
        return -1;
    }
    return step;
}

/* SPARe: the checkpoint of `step` (verified by newest) back into tr, on tr's grid. */
static void restore(void *ctx, FtTrainer *tr, long long step)
{
    FtTrainCkpt *tc = ctx;
    char path[CKPT_PATH_MAX], err[512];
    ckpt_path(path, sizeof path, tc->cfg->checkpoint.dir, tc->cfg->run.name, step);
    if (train_ckpt_restore(tr, path, false, tr->grid->world, err, sizeof err))
        FT_DIE("spare: restart: %s", err);
    tc->last_step = step; /* not written again */
    log_info("spare: restored %s: step %lld, data cursor %llu", path, step,
             (unsigned long long)tr->cursor);
}

void train_ckpt_attach(FtTrainCkpt *tc, FtTrainer *tr)
{
    if (!tc) return;
    tc->kill = &tr->regions;
    tr->on_step = on_step;
    tr->on_step_ctx = tc;
    tr->ckpt_regrid = on_regrid;
    tr->ckpt_newest = newest;
    tr->ckpt_restore = restore;
    tc->last_t = MPI_Wtime();
}

void train_ckpt_finish(FtTrainCkpt *tc)
{
    if (!tc) return;
    double t0 = MPI_Wtime();
    if (tc->w) settle(tc);
    tc->stall += MPI_Wtime() - t0; /* the run waits for its last write too */
    comm_wait(&tc->due_req, NULL); /* a run that stopped early left one in flight */
}

void train_ckpt_report(const FtTrainCkpt *tc, FILE *out)
{
    if (!tc || !tc->count || !out || log_rank() != 0) return;
    fprintf(out, "checkpoints: %d written, the training loop spent %.3f s in them (%.1f ms each)\n",
            tc->count, tc->stall, 1e3 * tc->stall / tc->count);
    fflush(out);
}

void train_ckpt_destroy(FtTrainCkpt *tc)
{
    if (!tc) return;
    train_ckpt_finish(tc);
    if (tc->w) ckpt_destroy(tc->w);
    comm_destroy(tc->agree);
    free(tc->resolved);
    free(tc->stage);
    free(tc);
}

int train_ckpt_count(const FtTrainCkpt *tc) { return tc ? tc->count : 0; }
long long train_ckpt_interval(const FtTrainCkpt *tc) { return tc ? tc->interval : 0; }

void train_ckpt_auto_inputs(const FtTrainCkpt *tc, double *step_s, double *ckpt_s)
{
    *step_s = tc ? tc->auto_step_s : 0;
    *ckpt_s = tc ? tc->auto_ckpt_s : 0;
}

int train_ckpt_restore(FtTrainer *tr, const char *path, bool verify, MPI_Comm comm, char *err,
                       size_t errlen)
{
    int rc = -1;
    FtModel *m = tr->model;
    float *stage = NULL;
    FtCkptFile *f = ckpt_open(path, comm, err, errlen);
    if (!f) return -1;
    if (verify && ckpt_verify(f, err, errlen)) goto out_close;
    float *base[3];
    host_state(m, &stage, base); /* a device model's: what the file lacks keeps its value */
    FtCkptSlab sl[FT_NPARAM_TENSORS];
    if (train_ckpt_slabs(tr, comm, sl)) {
        snprintf(err, errlen, "%s: a process failed while the ranks agreed on the layout", path);
        goto out_close;
    }
    ckpt_read_batch(f); /* one agreement on the reads, at the end */
    for (int part = 0; part < 3; part++)
        for (int id = 0; id < FT_NPARAM_TENSORS; id++) {
            FtCkptSlab *s = &sl[id];
            if (!s->ndim) continue;
            char name[CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%s/%s", g_part_name[part], m->p[id].name);
            if (ckpt_read_tensor(f, name, CKPT_F32, s->ndim, s->gshape, s->offset, s->count,
                                 base[part] + s->local_offset, err, errlen))
                goto out_close;
        }
    long long step;
    uint64_t cursor, seed;
    if (ckpt_read_i64(f, CKPT_DS_STEP, &step, err, errlen) ||
        ckpt_read_u64(f, "state/data_cursor", &cursor, err, errlen) ||
        ckpt_read_u64(f, "state/seed", &seed, err, errlen) ||
        ckpt_read_batch_end(f, err, errlen))
        goto out_close;
    if (step < 0) {
        snprintf(err, errlen, "%s: dataset 'state/step' is %lld, expected >= 0", path, step);
        goto out_close;
    }
    if (stage) {
        float *to[3] = {m->params, m->m, m->v};
        for (int k = 0; k < 3; k++)
            m->be->to_device(m->be->ctx, to[k], base[k], sizeof(float) * m->nparams);
    }
    m->step = step;
    tr->cursor = cursor;
    if (seed != (uint64_t)tr->cfg->run.seed)
        log_warn("%s: written with run.seed = %llu, this run has %lld: the data order from here on "
                 "differs from the original run's", path, (unsigned long long)seed,
                 tr->cfg->run.seed);
    rc = 0;
out_close:
    free(stage);
    ckpt_close(f);
    return rc;
}

int train_ckpt_resume(FtTrainer *tr, const FtConfig *cfg, MPI_Comm comm, char *path,
                      size_t pathlen, char *err, size_t errlen)
{
    const char *want = cfg->checkpoint.resume;
    char file[CKPT_PATH_MAX];
    bool verify = true;
    if (!want[0]) return 0;
    if (!strcmp(want, "auto")) {
        long long step = 0;
        int found = ckpt_find_latest(cfg->checkpoint.dir, cfg->run.name, comm, file, sizeof file,
                                     &step, err, errlen);
        if (found < 0) return -1;
        if (found == 0) {
            log_info("checkpoint.resume = auto: no checkpoint of run '%s' in %s: starting fresh",
                     cfg->run.name, cfg->checkpoint.dir);
            return 0;
        }
        verify = false; /* ckpt_find_latest verified it */
    } else {
        snprintf(file, sizeof file, "%s", want);
    }
    if (train_ckpt_restore(tr, file, verify, comm, err, errlen)) return -1;
    if (path) snprintf(path, pathlen, "%s", file);
    log_info("resumed from %s: step %lld, data cursor %llu (learning rate %.3e next)%s", file,
             tr->model->step, (unsigned long long)tr->cursor, optim_lr(&tr->opt, tr->model->step),
             tr->model->step >= cfg->train.steps ? "; train.steps is reached: nothing to train" : "");
    return 1;
}

int train_ckpt_setup(FtTrainCkpt **out, FtTrainer *tr, const FtConfig *cfg, MPI_Comm comm,
                     char *err, size_t errlen)
{
    *out = NULL;
    int resumed = train_ckpt_resume(tr, cfg, comm, NULL, 0, err, errlen);
    if (resumed < 0) return -1;
    if (train_ckpt_create(out, cfg, comm, err, errlen)) return -1;
    if (*out && resumed) (*out)->last_step = tr->model->step; /* a restart may go back to it */
    train_ckpt_attach(*out, tr);
    return 0;
}

long long train_ckpt_last_step(const FtTrainCkpt *tc) { return tc ? tc->last_step : -1; }
long long train_ckpt_lost_step(const FtTrainCkpt *tc)
{
    return tc && tc->abandoned_step > tc->last_step ? tc->abandoned_step : -1;
}

int train_ckpt_flush(FtTrainCkpt *tc, const FtTrainer *tr)
{
    if (!tc || !tc->w || !tc->redo) return 0;
    long long step = tr->model->step;
    log_warn("checkpoint of step %lld abandoned: a process died during its write, after the "
             "last step; the survivors write it now", tc->abandoned_step);
    double t0 = MPI_Wtime();
    int rc = train_ckpt_save(tc, tr);
    if (!rc) settle(tc);
    if (!rc && tc->last_step == step) tc->redo = false, tc->abandoned_step = -1;
    tc->stall += MPI_Wtime() - t0;
    return tc->redo ? -1 : 0;
}

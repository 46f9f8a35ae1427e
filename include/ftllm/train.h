/* train.h: the one training function.
 *
 * A trainer owns the micro-batch tape and the data cursor; train_step runs one optimizer step
 * (zero grads, for each micro-batch: fetch, forward, backward; then the gradient-reduction
 * point, grad norm, learning rate, AdamW) and train_run is the loop (per-step line, validation,
 * summary, verdict). Every later variant (CUDA, many ranks, DMR, SPARe) goes through these two
 * functions; what differs lives behind the op, comm and exec interfaces.
 *
 * Data comes from a batch source: "the B sequences starting at global sequence number first"
 * (data.h delivers exactly that; tests pass synthetic tokens), so the only data state is the
 * cursor (next sequence number), which a checkpoint saves.
 *
 * Parallel layouts (train_init_grid): the model holds this rank's shard (model.h), the tape its
 * stage's layers on its tensor-parallel part; a step walks the pipeline schedule (pipeline.h)
 * over tape instances, the executor does the tp all-reduces and pp messages the tapes mark.
 * Data parallelism: data rank d (of dp x ep ranks with distinct data) reads micro-batch k of a
 * step as the B sequences from cursor + (d M + k) B (M = parallel.microbatches), a pure function
 * of (step cursor, micro-batch, data rank, row), so the global batch is the single-rank batch
 * of M dp ep micro-batches and the loss scale is 1 / (M dp ep). During the last micro-batch's
 * backward each gradient bucket (parallel.bucket_mb, whole layers, in backward order) starts a
 * non-blocking sum over the data-parallel ranks as soon as its layers are complete; the tied
 * embedding's two copies (first and last stage) are summed first; every bucket is complete
 * before the gradient norm and AdamW. The global gradient norm counts each parameter once (tp
 * copies and the last stage's wte copy left out) and is summed over the replica in rank order,
 * so every rank gets the same bits and the same clipping.
 *
 * Mixture of experts (model.h): data ranks are dp x ep (each ep rank reads its own part of the
 * batch); the executor exchanges token rows with the other ep ranks at the tape's markers.
 * Dense gradients (replicated over dp x ep) are summed over dense_dp in the buckets; expert
 * gradients (split over ep) only over dp, as a second part of the same buckets. The grad norm
 * counts dense tensors on ep rank 0 and expert tensors on every ep rank. The load-balance loss
 * enters the objective through the routing op's backward (scaled like the cross-entropy); the
 * reported loss is the language-model loss alone.
 *
 * SPARe (spare.r = r > 0; spare.h, gradsync.h's shard-keyed variant): the N = dp replicas of the
 * first grid cut the global batch into N shard types, shard s being replica s's share of plain data
 * parallelism (its ep ranks' M micro-batches each: ep rank e's from cursor + (s ep + e) M B, what
 * data rank s ep + e reads without SPARe), and replica i stacks shards i, i+1, ..., i+r-1 (mod N).
 * Each step every live replica computes the shards the controller's plan counts for it, level by
 * level (with no failure: level 0 only, its own shard, so it reads exactly what plain data
 * parallelism gives it and r > 1 costs nothing); the step's gradient is the sum of the N shard
 * gradients in shard order, and every step checks that each shard entered exactly once (a violation
 * is fatal, naming the step and the shard). With expert parallelism a shard's dense gradient is
 * first summed over its replica's ep ranks in ep-rank order, and the shard-keyed sum runs over the
 * replicas' ranks at each (tp, pp, ep) place, dense and expert tensors alike (gradsync.h). The loss
 * scale stays 1 / (M N ep) and the cursor moves by M N ep B whatever fails; the loss is summed per
 * (shard, ep rank) in that order. A failed replica (train_fail_replica, its tp x pp x ep ranks)
 * leaves the training communicators; the survivors regrid and compute their plan's deeper levels,
 * so a masked failure changes no bit of the parameters. With the job channel (train_spare_attach,
 * train_spare.c) a hot spare takes a failed replica's place instead (spare.spares), and a wipe-out
 * restarts the job in-process from its newest verified checkpoint with every replica back; ranks
 * that do not train (failed replicas, spares) wait inside train_run for the job's next event.
 *
 * Real process death (the ULFM build, comm.h's comm_ft_*): every step ends (after the
 * before-commit hook) with an agreement over the grid on whether a process died during it; if
 * one did, the survivors shrink the grid's world and the job channel (the waiting ranks take
 * part: the failure revoked their wait), and the dead ranks' replicas fail through the same
 * path as train_fail_replicas (a hot spare takes a dead replica's place while one is left,
 * else the controller masks it; ranks of those replicas that are alive leave and wait), then
 * the survivors compute the step again from the same state; train_step returns
 * FT_STEP_STOPPED on a rank that left or on a wipe-out. A wipe-out after a real death is not
 * restarted in-process (the dead process cannot come back): the run stops with exit 5. Without
 * ULFM there is no agreement and no cost. */
#ifndef FTLLM_TRAIN_H
#define FTLLM_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "ftllm/comm.h"
#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/gradsync.h"
#include "ftllm/grid.h"
#include "ftllm/model.h"
#include "ftllm/optim.h"
#include "ftllm/spare.h"
#include "ftllm/tape.h"
#include "ftllm/timeline.h"
#include "ftllm/timers.h"

typedef struct ft_batch_source {
    /* Sequences first .. first+B-1: inputs and targets (B, T), row-major. */
    void (*fetch)(void *ctx, uint64_t first, int B, int *inputs, int *targets);
    void *ctx;
} FtBatchSource;

typedef struct ft_step_info {
    long long step; /* 1-based */
    double loss;    /* mean over the step's micro-batches */
    double lr, grad_norm, seconds;
    int redos;      /* times the step was computed again before its commit */
    int live, depth; /* SPARe: live replicas and the stack depth the step used (0: SPARe off) */
} FtStepInfo;

typedef enum ft_step_status {
    FT_STEP_OK,     /* computed once and committed */
    FT_STEP_REDONE, /* computed again (before_commit asked) and committed */
    FT_STEP_FAILED, /* still asked to redo after FT_TRAIN_MAX_REDOS attempts: not committed */
    FT_STEP_STOPPED, /* ULFM: a process died and this rank's replica failed with it (tr->left)
                        or a shard type lost every holder (a wipe-out): not committed */
} FtStepStatus;

#define FT_TRAIN_MAX_REDOS 8

typedef struct ft_train_summary {
    long long steps;
    double first_loss, last_loss, val_loss; /* val_loss NAN when there is no validation */
    double mean_ms, tokens_per_s, gflops;   /* over the steps after train.rate_skip */
    bool ok;                                /* every loss finite */
    bool left;    /* SPARe: this rank was not training at the end (its replica failed, or an
                     unused hot spare): not an error */
    bool wipeout; /* SPARe: a failure left some shard with no live holder and no in-process
                     restart was possible: the run stopped */
} FtTrainSummary;

/* SPARe's counters: the same on every live rank (the plan is), times on this rank. */
typedef struct ft_spare_stats {
    long long steps;          /* steps computed under SPARe */
    long long masked, wipeouts; /* failures masked; failures that wiped a shard out */
    long long computed;       /* shard computations that entered the reduction, all replicas */
    long long needed;         /* N per step */
    long long skipped;        /* stack slots within the depth left out: their shard was counted
                                 on another replica (the plan's uncounted computations) */
    long long levels;         /* sum over steps of the depth (the step's critical path, in
                                 shards) */
    long long mine, mine_deep; /* shards this replica computed; those at levels >= 1 */
    double deep_s;            /* this rank's time computing levels >= 1 (lost to failures) */
    double regrid_s;          /* this rank's time in train_fail_replica (regrid included) */
    long long restarts;       /* wipe-outs answered by an in-process restart from a checkpoint */
    long long recomputed;     /* steps computed again after those restarts (the work lost) */
    long long spares_used;    /* hot spares that took a failed replica's place */
    long long fail_upto;      /* the last step whose fail-stop events fired (the faults hook):
                                 a step computed again after a restart does not fail again */
    double restart_s;         /* this rank's time in restarts (agreement, regrid, restore) */
    double join_s;            /* this rank's time in spare joins (regrid, state copy) */
    double ulfm_s;            /* ULFM: time from the failure verdict to the redo (shrink,
                                 controller or spare, regrid) */
    double ulfm_detect_s;     /* ULFM: from this rank's first failed operation to the verdict */
} FtSpareStats;

typedef struct ft_spare_job FtSpareJob; /* the whole job's control channel (train_spare.c) */


typedef struct ft_trainer {
    const FtConfig *cfg;
    FtModel *model;
    FtOptimCfg opt;
    FtTape tape;   /* one micro-batch: forward + backward (pipeline slot 0) */
    FtTape *more;  /* pipeline slots 1 .. nslots-1: more micro-batches in flight */
    FtTape opt_tape; /* the optimizer (optim.h) */
    int *h_tokens, *h_targets; /* host staging of a micro-batch (B x T each) */
    int nslots;
    FtBatchSource train, val;
    bool has_val;
    uint64_t cursor; /* next training sequence of the whole job */
    long long regrids; /* grids this trainer moved to (train_regrid: failures, spares joining) */
    int B, T, micro; /* micro: micro-batches per step on each data rank */
    double step_flops; /* model FLOPs of one optimizer step on this rank (no recomputation) */
    FtExecStats stats;
    /* checkpoint hook: called by train_run after each step with a finite loss (last: the
     * run's final step); NULL = none. See train_ckpt.h. */
    void (*on_step)(void *ctx, struct ft_trainer *tr, const FtStepInfo *st, bool last);
    void *on_step_ctx;
    /* before-commit hook (DMR agreement, SPARe): called after a step was computed (gradients,
     * norm, optimizer outputs) and before it is made current; nonzero: compute the step again
     * from the same parameters, optimizer state and data cursor. Collective decisions must be
     * agreed inside the hook. NULL = commit. attempt counts from 0. */
    int (*before_commit)(void *ctx, struct ft_trainer *tr, int attempt);
    void *before_commit_ctx;
    /* after-commit hook: the step was made current (every live rank: after before_commit and
     * the check for process failures agreed on it). NULL = none. */
    void (*on_commit)(void *ctx, struct ft_trainer *tr);
    void *on_commit_ctx;
    /* broken-attempt hook: a process failure (ULFM) broke the step's attempt, and every
     * survivor computes the step again after the recovery (train_spare_recover agreed on it;
     * before_commit was called for the broken attempt). NULL = none. */
    void (*on_broken)(void *ctx, struct ft_trainer *tr);
    void *on_broken_ctx;
    /* joining hook: a rank joins the training ranks (a hot spare takes a place, a restart):
     * the state of the layers above the trainer (the DMR counters) from rank root of c, where
     * SPARe's counters come from; collective over c. NULL = none. */
    void (*take_state)(void *ctx, struct ft_trainer *tr, FtComm *c, int root);
    void *take_state_ctx;
    /* parallel layout; all NULL / 0 / 1 on one rank */
    const FtGrid *grid;
    FtComm *c_tp, *c_pp, *c_dp, *c_emb, *c_replica, *c_world;
    FtComm *c_ep;  /* expert-parallel all-to-alls (ep > 1) */
    FtComm *c_edp; /* MoE expert gradients: summed over dp only (dp > 1) */
    FtComm *c_shards; /* SPARe: the live replicas' ranks at this (tp, pp, ep) place, over which
                         shards are reduced and a hot spare's state is copied: c_dp when ep = 1,
                         else c_edp (not owned; NULL: one replica) */
    MPI_Comm emb_comm; /* first and last stage (tied embedding), MPI_COMM_NULL elsewhere */
    int data_rank, data_width; /* this rank's data shard of data_width = dp x ep */
    int schedule;              /* FtPipeSchedule */
    int warmup_extra;          /* parallel.warmup_extra (pipeline.h) */
    FtGradSync *gs;
    /* SPARe (spare.r > 0; NULL sp: off) */
    FtSpare *sp;       /* the controller: every rank runs its own copy, fed the same failures */
    FtSparePlan plan;  /* this step's plan */
    int replica;       /* this rank's replica in the first grid: the shard type it holds first */
    FtGrid *own_grid;  /* the grid after the last failure (owned; NULL: the caller's grid) */
    bool left;         /* this rank does not train now (its replica failed, or a hot spare):
                          train_step must not be called; train_run idles it */
    double *shard_loss; /* [N ep] the step's loss per shard and ep rank (last stage, tp rank 0) */
    FtSpareStats spare;
    FtSpareJob *job;   /* train_spare_attach: every rank of the job, training or not (NULL: a
                          wipe-out stops the run, no spares) */
    /* checkpoint hooks for SPARe (train_ckpt.h installs them; ctx: on_step_ctx; NULL = none):
     * ckpt_regrid: the writer moves onto world (MPI_COMM_NULL: this rank stops training);
     *   called on every rank of the old grid (collective there) and then of the new one;
     * ckpt_newest: the step of the newest verified checkpoint (any write in flight finished
     *   first), -1 when there is none; collective over the grid;
     * ckpt_restore: model and cursor from the checkpoint of that step; collective over the
     *   grid (it was verified by ckpt_newest: a failure is fatal). */
    void (*ckpt_regrid)(void *ctx, struct ft_trainer *tr, MPI_Comm world);
    long long (*ckpt_newest)(void *ctx, struct ft_trainer *tr);
    void (*ckpt_restore)(void *ctx, struct ft_trainer *tr, long long step);
    /* faults hook: called by train_run before each step (step: the 1-based step about to run);
     * the fault schedule (`fail step=S replica=I` lines) calls train_fail_replica from here.
     * NULL = none. */
    void (*before_step)(void *ctx, struct ft_trainer *tr, long long step);
    void *before_step_ctx;
    FtExec ex;
    FtTimeline tl;
    FtTimers regions; /* named regions (timers.h), steps after train.rate_skip */
} FtTrainer;

/* The training sequence length the deck asks for (train.seq_len, or model.seq_len). */
int train_seq_len(const FtConfig *cfg);

/* Builds the tape for the deck's batch shape and AC mode. val may be NULL. One rank. */
void train_init(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtBatchSource *train,
                const FtBatchSource *val);
/* The same on a process grid (NULL: one rank): model must be this rank's shard
 * (model_create_sharded with the grid's tp and pp coordinates). Collective over the grid. */
void train_init_grid(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtGrid *grid,
                     const FtBatchSource *train, const FtBatchSource *val);
void train_free(FtTrainer *tr);

/* Moves the trainer onto another grid of the same tp, pp and ep with this rank at the same
 * (tp, pp, ep) place, e.g. after a data-parallel replica left (grid_shrink_dp): rebuilds the
 * communicators, gradient sync, tapes and executor context; keeps the model (parameters,
 * optimizer state, step), the data cursor (the next step reads on from it with the new number
 * of data ranks), the statistics and the hooks. Collective over the new grid; the old grid
 * may be destroyed after. */
void train_regrid(FtTrainer *tr, const FtGrid *grid);

/* SPARe, a hot spare's rank (spare.spares): a trainer with no grid that idles (tr->left) until
 * train_run's job channel asks it to take a failed replica's place; model: its shard for its
 * place in a replica (grid_place). Call train_spare_attach on it too. Not collective. */
void train_init_spare(FtTrainer *tr, const FtConfig *cfg, FtModel *model,
                      const FtBatchSource *train, const FtBatchSource *val);

/* SPARe: the job channel over `all` (every rank of the job: the layout's tp*pp*dp*ep ranks
 * first, in grid order, then spare.spares replicas of tp*pp*ep ranks), which must outlive the
 * trainer. With it, train_run answers a wipe-out by an in-process restart from the newest
 * verified checkpoint (spare.wipeout = restart, checkpoint hooks installed), with every
 * replica back; a failed replica's ranks and the spares idle inside train_run until they are
 * needed or the run ends. Collective over all; nothing when SPARe is off. */
void train_spare_attach(FtTrainer *tr, MPI_Comm all);

/* SPARe, spare.r = auto (train_spare_auto.c): replaces FT_AUTO in cfg->spare.r by the
 * redundancy `ftllm optimize` recommends for N = parallel.dp replicas with the deck's [cluster]
 * keys (cluster.step_s: before the first step), clamped to 1..dp; on resume the checkpoint's r
 * when its dp is the same. Logs one line with the choice and why. Call before the trainer is
 * built. Collective over comm (rank 0 decides, everyone gets its r). 0, or -1 with err set
 * (the same on every rank). Nothing to do (0) when spare.r is a number. */
int train_spare_auto(FtConfig *cfg, MPI_Comm comm, char *err, size_t errlen);

/* SPARe: the replicas of one step's fail-stops (n <= FT_SPARE_BATCH_MAX), in order, as
 * train_fail_replica does one; a hot spare, while one is left, takes a failed replica's place
 * instead (its index and stack: the controller is unchanged, the redundancy restored; state
 * copied from a live replica), and joins the rest of the batch. Stops at a wipe-out. Returns
 * the outcome of the last failure handled (enum ft_spare_outcome), -1 as train_fail_replica. */
#define FT_SPARE_BATCH_MAX 32
int train_fail_replicas(FtTrainer *tr, const int *replicas, int n);

/* SPARe: replica `replica` (an index of the first grid's dp replicas) fails by injection (a
 * fail-stop on MPICH, which has no working ULFM): the controller masks it (spare_fail, RECTLR);
 * the replica's ranks leave the training communicators (MPI_Comm_split with MPI_UNDEFINED,
 * grid_shrink_dp) and stop (tr->left; train_step must not be called again there); the
 * survivors regrid (train_regrid: model, cursor, hooks kept) and compute their plan's deeper
 * levels from the next step on. Call between steps, collectively over the current grid, with
 * the same replica on every rank (and, with the job channel, on every rank of the job that
 * waits: a hot spare, while one is left, takes the replica's place instead, see
 * train_fail_replicas). Returns the outcome (enum ft_spare_outcome): on SPARE_WIPEOUT nothing
 * changes and this step cannot run (train_run restarts from a checkpoint when it can); -1 when
 * SPARe is off, the replica is out of range or already failed (nothing changes). */
int train_fail_replica(FtTrainer *tr, int replica);

/* SPARe: rank 0 of the current grid prints one line to out (NULL: nothing): "spare: r R, N
 * replicas, live L, depth D; failures masked K, wipe-outs W; shards computed C vs needed X
 * (...); spares used U of S; restarts Q (P steps recomputed); time lost: deeper levels A s,
 * regrid B s, spare joins J s, restarts T s". Collective over the current grid (call on the
 * ranks that did not leave). Nothing when SPARe is off. */
void train_report_spare(const FtTrainer *tr, FILE *out);

/* One optimizer step over parallel.microbatches micro-batches of train.batch sequences (on
 * every data rank): computed, offered to before_commit (which may ask for it again: the step
 * is then recomputed from the same state), committed. Collective over the grid. After it,
 * model->grads holds the step's gradient (summed over micro-batches and data ranks, before
 * clipping). */
FtStepStatus train_step(FtTrainer *tr, FtStepInfo *info);

/* Mean loss over n micro-batches of the validation source (sequences 0, B, 2B, ...). */
double train_eval(FtTrainer *tr, int n);

/* The loop: train.steps steps with a line per step, validation every train.val_every steps
 * and at the end, then a summary. Returns with s->ok false when a loss was not finite (the loop
 * stops at that step). */
void train_run(FtTrainer *tr, FtTrainSummary *s);

/* Collective: rank 0 prints each rank's fraction of step time spent waiting on messages (steps
 * after train.rate_skip) to out (NULL: nothing printed); returns this rank's fraction. */
double train_report_waiting(const FtTrainer *tr, FILE *out);

/* Collective: rank 0 prints the named regions' table (timers.h) to out (NULL: nothing). */
void train_report_regions(const FtTrainer *tr, FILE *out);

#endif

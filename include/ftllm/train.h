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
 * reported loss is the language-model loss alone. */
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
} FtStepInfo;

typedef enum ft_step_status {
    FT_STEP_OK,     /* computed once and committed */
    FT_STEP_REDONE, /* computed again (before_commit asked) and committed */
    FT_STEP_FAILED, /* still asked to redo after FT_TRAIN_MAX_REDOS attempts: not committed */
} FtStepStatus;

#define FT_TRAIN_MAX_REDOS 8

typedef struct ft_train_summary {
    long long steps;
    double first_loss, last_loss, val_loss; /* val_loss NAN when there is no validation */
    double mean_ms, tokens_per_s, gflops;   /* over the steps after train.rate_skip */
    bool ok;                                /* every loss finite */
} FtTrainSummary;


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
    /* parallel layout; all NULL / 0 / 1 on one rank */
    const FtGrid *grid;
    FtComm *c_tp, *c_pp, *c_dp, *c_emb, *c_replica, *c_world;
    FtComm *c_ep;  /* expert-parallel all-to-alls (ep > 1) */
    FtComm *c_edp; /* MoE expert gradients: summed over dp only (dp > 1) */
    MPI_Comm emb_comm; /* first and last stage (tied embedding), MPI_COMM_NULL elsewhere */
    int data_rank, data_width; /* this rank's data shard of data_width = dp x ep */
    int schedule;              /* FtPipeSchedule */
    FtGradSync *gs;
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

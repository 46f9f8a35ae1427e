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
 * cursor (next sequence number), which a checkpoint saves. */
#ifndef FTLLM_TRAIN_H
#define FTLLM_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"
#include "ftllm/optim.h"
#include "ftllm/tape.h"

typedef struct ft_batch_source {
    /* Sequences first .. first+B-1: inputs and targets (B, T), row-major. */
    void (*fetch)(void *ctx, uint64_t first, int B, int *inputs, int *targets);
    void *ctx;
} FtBatchSource;

typedef struct ft_step_info {
    long long step; /* 1-based */
    double loss;    /* mean over the step's micro-batches */
    double lr, grad_norm, seconds;
} FtStepInfo;

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
    FtTape tape; /* one micro-batch: forward + backward */
    FtBatchSource train, val;
    bool has_val;
    uint64_t cursor; /* next training sequence */
    int B, T, micro;
    double step_flops; /* model FLOPs of one optimizer step (no recomputation) */
    FtExecStats stats;
    /* checkpoint hook: called by train_run after each step with a finite loss (last: the
     * run's final step); NULL = none. See train_ckpt.h. */
    void (*on_step)(void *ctx, struct ft_trainer *tr, const FtStepInfo *st, bool last);
    void *on_step_ctx;
} FtTrainer;

/* The training sequence length the deck asks for (train.seq_len, or model.seq_len). */
int train_seq_len(const FtConfig *cfg);

/* Builds the tape for the deck's batch shape and AC mode. val may be NULL. */
void train_init(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtBatchSource *train,
                const FtBatchSource *val);
void train_free(FtTrainer *tr);

/* One optimizer step over parallel.microbatches micro-batches of train.batch sequences. */
void train_step(FtTrainer *tr, FtStepInfo *info);

/* Mean loss over n micro-batches of the validation source (sequences 0, B, 2B, ...). */
double train_eval(FtTrainer *tr, int n);

/* The loop: train.steps steps with a line per step, validation every train.val_every steps
 * and at the end, then a summary. Returns with s->ok false when a loss was not finite (the loop
 * stops at that step). */
void train_run(FtTrainer *tr, FtTrainSummary *s);

#endif

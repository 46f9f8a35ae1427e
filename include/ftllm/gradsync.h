/* gradsync.h: gradient synchronization, everything between the backward passes of a step and
 * the optimizer that involves other ranks or other micro-batches.
 *
 * It owns: which gradient bank each micro-batch's backward writes into and on top of what
 * (model.h: the tape writes prev + contribution, out of place), the data-parallel reduction of
 * the step's gradient (today: buckets of whole layers, each a non-blocking all-reduce started
 * from the executor's gradients-complete hook during the last micro-batch's backward, so late
 * layers' sums overlap early layers' backward), the tied embedding's two pipeline copies, the
 * global gradient norm's sum over the replica and the loss's sum over the job.
 *
 * The train loop calls only these functions, so another reduction (SPARe's shard-keyed sum in
 * a fixed shard order, which wants each micro-batch's gradient on its own) replaces the
 * buckets behind the same calls: gradsync_backward says where a micro-batch's gradient goes,
 * gradsync_layer_ready sees every layer of every micro-batch, gradsync_finish leaves the
 * step's gradient in m->grads. Never sees the trainer. Every wait goes through the executor
 * (its poll hook, its timeline). */
#ifndef FTLLM_GRADSYNC_H
#define FTLLM_GRADSYNC_H

#include <stdbool.h>

#include "ftllm/comm.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"

/* The communicators gradient sync uses; NULL: that dimension has width 1. */
typedef struct ft_gradsync_comms {
    FtComm *dense;   /* dense gradients: summed over dp x ep (dense_dp) */
    FtComm *expert;  /* MoE expert gradients: summed over dp only */
    FtComm *emb;     /* first and last pipeline stage: the tied wte's two copies */
    FtComm *replica; /* the gradient norm's partial sums (tp x pp x ep ranks of one replica) */
    FtComm *world;   /* the loss */
} FtGradSyncComms;

typedef struct ft_gradsync FtGradSync;

/* For model m (this rank's shard) with micro micro-batches per step; bucket_mb: the least size
 * of a data-parallel bucket. Not collective. */
FtGradSync *gradsync_create(FtModel *m, const FtGradSyncComms *c, int micro, double bucket_mb);
void gradsync_free(FtGradSync *g);

/* Before micro-batch mb's backward (mb = 0 .. micro-1, in order) on executor ex: the gradient
 * bank it writes (*grads) and the earlier sum it adds onto (*prev, NULL for mb 0); the last
 * micro-batch writes m->grads. Also arms gradsync_layer_ready for that micro-batch (reductions
 * it starts are watched by ex, exec_watch). */
void gradsync_backward(FtGradSync *g, FtExec *ex, int mb, float **grads, const float **prev);

/* The executor's gradients-complete hook (FtExec.grads_ready, arg = the FtGradSync): layer's
 * gradients (-1: the final LayerNorm's) are complete for the armed micro-batch. */
void gradsync_layer_ready(void *g, int layer);

/* After the last backward: the step's gradient, summed over every micro-batch and data rank,
 * is in m->grads on every rank. Collective over the data-parallel and embedding comms. */
void gradsync_finish(FtGradSync *g, FtExec *ex);

/* The global gradient norm from this rank's sum of squares (of the tensors it counts, see
 * optim.h): summed over the replica in rank order, so every rank gets the same bits. */
double gradsync_norm(FtGradSync *g, FtExec *ex, double local_sumsq);

/* Sum over the job of a value held on the last pipeline stage, counted once per data rank
 * (tp rank 0 of the last stage, when count_here); the same bits on every rank. */
double gradsync_sum_last_stage(FtGradSync *g, FtExec *ex, double v, bool count_here);

#endif

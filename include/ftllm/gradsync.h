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
    FtComm *ep;      /* SPARe with expert parallelism only: the replica's ep ranks at this
                      * (tp, pp) place, over which a shard's dense gradient is summed before it
                      * is banked (NULL: ep = 1, or no SPARe) */
} FtGradSyncComms;

typedef struct ft_gradsync FtGradSync;

/* For model m (this rank's shard) with micro micro-batches per step; bucket_mb: the least size
 * of a data-parallel bucket. Not collective. */
FtGradSync *gradsync_create(FtModel *m, const FtGradSyncComms *c, int micro, double bucket_mb);
void gradsync_free(FtGradSync *g);

/* The data-parallel buckets (none with one data rank or in the shard-keyed variant): returns
 * their number and puts the first max bucket's sizes in floats (dense and expert parts
 * together) in sizes[], in the order they start: [the final LayerNorm's on the last stage,]
 * the stage's layers from the last, whole layers closing a bucket once it holds at least
 * bucket_mb, then the embeddings alone. Every gradient float is in exactly one bucket. */
int gradsync_buckets(const FtGradSync *g, size_t *sizes, int max);

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

/* ---- SPARe: the shard-keyed reduction (spare.h) ------------------------------------------
 * The global batch is cut into nshards shard types (one replica's share of plain data
 * parallelism each: its micro micro-batches); a replica computes the shards its plan names, one
 * after the other (gradsync_shard_begin, micro-batches through gradsync_backward as above,
 * gradsync_shard_end banks the shard's gradient). gradsync_finish then sums the shards in shard
 * order 0, 1, ..., nshards-1, whichever replica computed each: every rank of `dense` owns a
 * slice of the gradient; each shard's holder sends the shard's slices to their owners; an owner
 * adds shard 0's slice, then shard 1's, ... and the slices are all-gathered. So a step's
 * gradient is bitwise the same whichever live replica computed each shard. Before any data
 * moves the ranks all-gather which shards each contributes: every shard must enter exactly
 * once (gradsync_shard_violation says which did not; the data exchange is skipped then). With
 * no failure it moves the bytes of a ring reduce-scatter + all-gather. */

/* The shard-keyed variant: nshards shard types, at most max_local of them computed here per step
 * (spare.r); c->dense: the live replicas' ranks at this (tp, pp, ep) place (NULL: one replica),
 * over which the whole gradient (dense and expert tensors) is reduced; c->expert must be NULL.
 * With expert parallelism (c->ep), a shard is computed by the replica's ep ranks together, each
 * on its own tokens of it: gradsync_shard_end sums the dense tensors over c->ep in ep-rank order
 * before banking, so every ep rank banks the shard's whole dense gradient (the same bits on
 * each, whichever replica computed it) beside its own experts' gradient. Not collective. */
FtGradSync *gradsync_create_shards(FtModel *m, const FtGradSyncComms *c, int micro, int nshards,
                                   int max_local);
/* Before the first micro-batch of shard `shard` (0 .. nshards-1). */
void gradsync_shard_begin(FtGradSync *g, int shard);
/* After the shard's last backward: the tied embedding's copies summed (c->emb), the dense
 * tensors summed over the replica's ep ranks (c->ep), the gradient (m->grads) banked and
 * counted as this replica's contribution of the shard. Collective over c->emb and c->ep. */
void gradsync_shard_end(FtGradSync *g, FtExec *ex);
/* After gradsync_finish of the shard-keyed variant: -1 when every shard entered exactly once,
 * else the first shard that did not, with the number of times it entered in *count (the same
 * on every rank of c->dense). */
int gradsync_shard_violation(const FtGradSync *g, int *count);

/* The global gradient norm from this rank's sum of squares (of the tensors it counts, see
 * optim.h): summed over the replica in rank order, so every rank gets the same bits. */
double gradsync_norm(FtGradSync *g, FtExec *ex, double local_sumsq);

/* Sum over the job of a value held on the last pipeline stage, counted once per data rank
 * (tp rank 0 of the last stage, when count_here); the same bits on every rank. */
double gradsync_sum_last_stage(FtGradSync *g, FtExec *ex, double v, bool count_here);

#endif

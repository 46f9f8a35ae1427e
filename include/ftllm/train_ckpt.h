/* train_ckpt.h: checkpoints of the training state: what `ftllm train` saves, when, and how a
 * run resumes from one. Built on the model-independent HDF5 layer (ckpt.h).
 *
 * Saved (checkpoint/README.md, "What ftllm train stores"): every parameter tensor and its AdamW
 * moments as global datasets in their full logical shape (/params/NAME, /optim/m/NAME,
 * /optim/v/NAME; shapes as model_param_slab() gives them), the optimizer step count
 * (which is also the learning-rate schedule position), the data cursor (next training
 * sequence; data.h makes the order a pure function of run.seed and the sequence number), the
 * seed, the learning rate of the next step (informational), the deck text and the resolved
 * configuration. Training has no other random state (no dropout): the step, the cursor and the
 * seed determine every later step, so N steps + save + resume + N steps gives bitwise the same
 * parameters as 2N steps straight.
 *
 * Layout mapping: train_ckpt_slabs() (on model_param_slab) says which hyperslab of each global
 * tensor this rank holds, so a checkpoint written with one tp/pp/dp layout restarts with any
 * other: each rank reads its own hyperslab back.
 *
 * When (deck [checkpoint]): after every `interval` steps (multiples of it), and/or when
 * `every_s` seconds passed since the last one, and at the end of the run. The time trigger is
 * rank 0's clock, agreed without blocking a step: at the end of step s rank 0 decides whether
 * step s+1 ends past every_s (the time since the last checkpoint plus step s's time) and a
 * non-blocking broadcast carries that to step s+1, where every rank branches on it (so the
 * first step is never due by time).
 * interval = auto: a first checkpoint is written after the first timed step (after
 * train.rate_skip), and its write time, with the measured mean step time and the deck's
 * [cluster] failure model, goes to the optimizer (analytic_plan, checkpoint-only policy), which
 * gives the interval in steps. The run prints the chosen value and its inputs.
 *
 * Every function is collective over the communicator given to train_ckpt_create /
 * train_ckpt_resume; cfg and the model's shape must be equal on every rank. */
#ifndef FTLLM_TRAIN_CKPT_H
#define FTLLM_TRAIN_CKPT_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "ftllm/ckpt.h"
#include "ftllm/deck.h"
#include "ftllm/model.h"
#include "ftllm/train.h"

typedef struct ft_train_ckpt FtTrainCkpt;

/* This rank's part of each parameter tensor (the same layout for m and v): the global dataset
 * shape, this rank's hyperslab (all counts 0 when this rank does not hold the tensor, e.g. wpe
 * on a later pipeline stage), the element offset of the hyperslab in the model's base arrays and
 * whether this rank writes it (one writer per element: the first tp / pp copy of a replicated
 * tensor, on data-parallel rank 0; without a grid, rank 0). Built on model_param_slab(); the
 * global shapes are agreed with one all-reduce, so ranks that lack a tensor still name it.
 * Collective over comm (the communicator of the checkpoint: every rank of the job). */
typedef struct ft_ckpt_slab {
    int ndim;
    uint64_t gshape[CKPT_MAX_DIMS], offset[CKPT_MAX_DIMS], count[CKPT_MAX_DIMS];
    size_t local_offset;
    bool writer;
} FtCkptSlab;
/* Returns 0, or -1 when a process failed during the all-reduce (ULFM only: without it an MPI
 * error is fatal); then slabs are undefined. */
int train_ckpt_slabs(const FtTrainer *tr, MPI_Comm comm, FtCkptSlab slabs[FT_NPARAM_TENSORS]);

/* The writer for the deck's [checkpoint] settings, or NULL with *out = NULL when checkpoint.
 * interval and checkpoint.every_s are both 0 (no checkpoints). Returns 0, or -1 with a one-line
 * message (the folder cannot be created, a bad run name); the same on every rank. */
int train_ckpt_create(FtTrainCkpt **out, const FtConfig *cfg, MPI_Comm comm, char *err,
                      size_t errlen);

/* Waits for a write in flight (the end of a run; NULL is fine, calling it again too). */
void train_ckpt_finish(FtTrainCkpt *tc);
/* Rank 0 prints "checkpoints: N written, the training loop spent S s in them (M ms each)" to
 * out (NULL, or no checkpoint written: nothing). */
void train_ckpt_report(const FtTrainCkpt *tc, FILE *out);
/* Waits for a write in flight (train_ckpt_finish) and frees the writer (NULL is fine). */
void train_ckpt_destroy(FtTrainCkpt *tc);

/* Installs the per-step hook on tr (train_run then checkpoints on schedule). */
void train_ckpt_attach(FtTrainCkpt *tc, FtTrainer *tr);

/* Writes a checkpoint of tr's current state now (asynchronous mode returns after the copy).
 * Returns 0, or -1 (ULFM only) when a process failed during the write: abandoned (on this
 * rank's account; the hook then notes the failure and writes again after the recovery). */
int train_ckpt_save(FtTrainCkpt *tc, const FtTrainer *tr);
/* The step of the newest checkpoint this rank knows written (-1: none), and of a write that was
 * abandoned after it (ULFM: a process died during it) and not written again (-1: none).
 * Local: agree (max) before branching. */
long long train_ckpt_last_step(const FtTrainCkpt *tc);
/* ULFM, after the run on the training ranks (collective over the checkpoint's grid): when a
 * death after the last step's agreement made the survivors abandon the last checkpoint and
 * rebuild their grid at the end (train_spare_end), writes it now. Returns 0, or -1 when it is
 * still lost (another death). NULL or nothing to write: 0. */
int train_ckpt_flush(FtTrainCkpt *tc, const FtTrainer *tr);
long long train_ckpt_lost_step(const FtTrainCkpt *tc);

/* Checkpoints written so far, and the seconds the training loop spent inside the checkpoint
 * code (the stall: the whole write when synchronous, the copy and any wait when asynchronous). */
int train_ckpt_count(const FtTrainCkpt *tc);
/* The interval in steps in use (after auto resolved it; 0 = none yet / time trigger only). */
long long train_ckpt_interval(const FtTrainCkpt *tc);
/* interval = auto, once resolved: the inputs the optimizer got, agreed over the ranks (max):
 * the mean time of the timed steps and the cost charged per checkpoint C (the write time, or
 * the training stall when asynchronous), seconds; 0 before. */
void train_ckpt_auto_inputs(const FtTrainCkpt *tc, double *step_s, double *ckpt_s);

/* Restores tr's model (parameters, moments, step) and data cursor from checkpoint file path,
 * after verifying every checksum when verify is set. Returns 0, or -1 with a one-line message
 * naming the file (and the dataset): not a checkpoint, corrupt, another model shape. */
int train_ckpt_restore(FtTrainer *tr, const char *path, bool verify, MPI_Comm comm, char *err,
                       size_t errlen);

/* checkpoint.resume of cfg: "" = start fresh (returns 0); "auto" = the newest checkpoint of
 * run.name in checkpoint.dir that verifies (bad ones are reported and skipped; none at all =
 * start fresh, returns 0); otherwise a file name, which must verify. Returns 1 when tr was
 * restored (its file name in path, may be NULL), 0 when starting fresh, -1 with a one-line
 * message in err. */
int train_ckpt_resume(FtTrainer *tr, const FtConfig *cfg, MPI_Comm comm, char *path,
                      size_t pathlen, char *err, size_t errlen);

/* What `ftllm train` calls before train_run: train_ckpt_resume, then train_ckpt_create and
 * train_ckpt_attach. Returns 0 (*out may be NULL: no checkpoints), or -1 with a one-line
 * message in err (nothing left allocated). */
int train_ckpt_setup(FtTrainCkpt **out, FtTrainer *tr, const FtConfig *cfg, MPI_Comm comm,
                     char *err, size_t errlen);

#endif

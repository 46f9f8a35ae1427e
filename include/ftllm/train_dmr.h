/* train_dmr.h: DMR and fault injection (dmr.h, fault.h) wired into a trainer, from the deck's
 * [dmr] and [faults] sections; what `ftllm train` calls, like train_ckpt.h for checkpoints.
 *
 * Set-up loads faults.schedule (rank 0 reads, every rank parses), checks it against the job
 * (ranks, replicas, steps, and per rank the op kinds and executions of a step, gathered from
 * every rank's tapes), resolves its flips, and installs on the trainer: the executor's after-op
 * hook (checks and injections), the before-commit hook (the agreement: a mismatch anywhere
 * redoes the step on every rank; an earlier before-commit hook is still called after it when
 * the step commits) and a wrap of its batch sources (a training micro-batch opens a step
 * attempt, a validation one pauses the checks). Fail-stop lines (`fail step=S replica=I`, or
 * rank=R: that rank's replica) become SPARe's injected fail-stops: the trainer's before-step
 * hook calls train_fail_replica before step S; they need spare.r >= 1 (a setup error
 * otherwise: plain data parallelism cannot mask a failure).
 *
 * Every function is collective over the trainer's grid. */
#ifndef FTLLM_TRAIN_DMR_H
#define FTLLM_TRAIN_DMR_H

#include <stdio.h>

#include "ftllm/deck.h"
#include "ftllm/dmr.h"
#include "ftllm/fault.h"
#include "ftllm/train.h"

typedef struct ft_train_dmr FtTrainDmr;

/* Returns 0 with *out (NULL when dmr.mode = off and there is no fault schedule: nothing to
 * do), or -1 with a one-line message in err (a bad schedule: "FILE:LINE: message"), the same on
 * every rank. tr must stay at its address while *out is in use. */
int train_dmr_setup(FtTrainDmr **out, FtTrainer *tr, const FtConfig *cfg, char *err,
                    size_t errlen);

/* Collective over job (every rank of the job: those still training pass trains true, the
 * others, whose replica failed or that wait as hot spares, false): the counters of them all;
 * the training rank 0 prints the `faults:` and `dmr:` lines to out (NULL: nothing). td may be
 * NULL (then on every rank). */
void train_dmr_report(FtTrainDmr *td, FtComm *job, bool trains, FILE *out);

/* The job's DMR counters (dmr_stats_job over the trainer's world). Collective. */
void train_dmr_stats(FtTrainDmr *td, FtDmrStats *s);

/* The DMR context and the schedule (fail-stop events for SPARe). */
FtDmr *train_dmr_get(FtTrainDmr *td);

/* dmr.refine = pipeline, once planned: what the stages' refinement simulated (dmr_pipesim.h;
 * the same on every stage), NULL when it did not run (not planned yet, refine off, no
 * pipeline, or skipped). */
struct ft_pipe_refine;
const struct ft_pipe_refine *train_dmr_refined(const FtTrainDmr *td);

/* Mode planned, once planned: writes this rank's plan to path (with several ranks to
 * path.rN; the name written into *file). Collective: returns 0, or -1 on every rank with the
 * first failing rank's "FILE: why" in err. */
int train_dmr_write_plan(FtTrainDmr *td, const char *path, char *file, size_t filelen, char *err,
                         size_t errlen);
/* Puts the trainer's hooks and batch sources back as they were and frees td (NULL is fine).
 * Call it while the trainer is still alive. */
void train_dmr_destroy(FtTrainDmr *td);

#endif

/* progress.h: the per-step output of a training run.
 *
 * Two forms (run.progress): lines, one log line per step ("step 3/20 | loss ... | tok/s"),
 * the form scripts and tests read; and live, one status line on rank 0's terminal rewritten in
 * place (log_status) with the step out of the total, the loss, tokens/s and the estimated time
 * to the end, while every other message still prints as its own line above it. auto picks live
 * when rank 0's stdout is a terminal (isatty), lines otherwise (a pipe, a file, mpiexec's
 * forwarding). The estimate is the wall time per step since the end of the run's first step
 * (validation and checkpoints included) times the steps left. Rank 0 prints; the others only
 * keep the state. */
#ifndef FTLLM_PROGRESS_H
#define FTLLM_PROGRESS_H

#include <stdbool.h>

#include "ftllm/train.h"

typedef struct ft_progress {
    bool live;
    long long total;   /* the run's last step (train.steps) */
    long long done;    /* steps shown so far in this run */
    double t_first;    /* MPI_Wtime at the end of the run's first step */
} FtProgress;

/* mode: enum ft_progress_choice (run.progress); total: train.steps. */
void progress_start(FtProgress *p, int mode, long long total);
/* One committed step: tok_per_s its tokens per second, extra appended as is (may be ""). */
void progress_step(FtProgress *p, const FtStepInfo *st, double tok_per_s, const char *extra);
/* Ends the live line (its last text stays on the screen); nothing for lines. */
void progress_end(FtProgress *p);

/* Writes seconds as "1:02:03" / "2:03" (at most len bytes); "?" when not finite. */
void progress_format_eta(double seconds, char *buf, size_t len);

#endif

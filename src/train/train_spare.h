/* train_spare.h: what train_run asks of SPARe's failure handling (train_spare.c); private to
 * src/train. The public part (train_spare_attach, train_fail_replicas, train_report_spare) is
 * in train.h. */
#ifndef FTLLM_TRAIN_SPARE_H
#define FTLLM_TRAIN_SPARE_H

#include "ftllm/train.h"

enum ft_spare_next {
    FT_SPARE_GO,      /* compute the next step */
    FT_SPARE_AGAIN,   /* the state changed (a restart, this rank left): ask again */
    FT_SPARE_LEFT,    /* the run ended while this rank was not training */
    FT_SPARE_WIPEOUT, /* a wipe-out with no in-process restart: the run stops (exit 5) */
};

/* Before a step: on a training rank, the faults hook (tr->before_step) and what its failures
 * call for (a restart after a wipe-out); on a rank that is not training, the wait for the
 * job's next event (a spare joins, a restart brings every replica back, the end). Returns enum
 * ft_spare_next. Collective over the job (the grid when there is no job channel). */
int train_spare_before_step(FtTrainer *tr);

/* ULFM, at the end of each attempt of step `step` on a training rank (train_step): the
 * agreement on whether a process died during it; if one did, the survivors of the job shrink,
 * the dead ranks' replicas fail (hot spares first, then the controller; train_spare.c) and the
 * survivors regrid. Returns 0 (no failure, or no ULFM), 1 (recovered: compute the step again
 * from the same state) or -1 (this rank left, tr->left, or a wipe-out: the step stops). */
int train_spare_recover(FtTrainer *tr, long long step);

/* After the loop on a training rank: the job's end event, which lets the idle ranks go. ULFM:
 * a training rank that died after the last step's agreement fails its replica as in a step
 * (this rank may leave: tr->left) and the survivors regrid. Returns 0, or -1 after such a death
 * when it wiped the run out. */
int train_spare_end(FtTrainer *tr);

/* Frees the job channel (train_free). */
void train_spare_detach(FtTrainer *tr);

#endif

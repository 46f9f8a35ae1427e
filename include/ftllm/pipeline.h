/* pipeline.h: the pipeline-parallel schedules over the micro-batches of one optimizer step.
 *
 * A schedule is, for one stage, the ordered list of (forward | backward, micro-batch) it runs;
 * the train loop walks it, the executor does the sends and receives the tape marks. Micro-batch
 * k runs on tape instance k % pipeline_slots(...) (each instance holds one micro-batch's
 * activations).
 *   GPipe (Huang et al. 2019): every forward, then every backward (in micro-batch order, so
 *   gradients accumulate in the same order as on one rank); M activation sets per stage.
 *   1F1B (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's default): stage s runs
 *   min(pp - s - 1, M) warm-up forwards, then alternates one forward and one backward, then
 *   drains the remaining backwards; at most pp - s micro-batches are in flight on stage s, so it
 *   holds min(pp - s, M) activation sets. Backwards run in micro-batch order, too.
 *   With extra > 0 (parallel.warmup_extra) every stage but the last runs extra more warm-up
 *   forwards (min(pp - s - 1 + extra, M)) and holds that many more sets: its forwards run
 *   further ahead of the backwards it waits for, so work a stage adds between a backward and its
 *   next forward (DMR's inline checks) delays its neighbour less. The last stage is unchanged
 *   (its forward's backward needs nothing from another stage). */
#ifndef FTLLM_PIPELINE_H
#define FTLLM_PIPELINE_H

#include <stdbool.h>

typedef enum ft_pipe_schedule { FT_PIPE_1F1B, FT_PIPE_GPIPE } FtPipeSchedule; /* deck order */

typedef struct ft_pipe_op {
    bool fwd;
    int mb;
} FtPipeOp;

/* Fills ops[0 .. 2M) with stage's schedule (0 <= stage < pp, M >= 1; extra: 1F1B's warm-up
 * forwards beyond pp - s - 1 on every stage s but the last, parallel.warmup_extra; GPipe
 * ignores it). */
void pipeline_schedule(FtPipeSchedule kind, int pp, int stage, int M, int extra, FtPipeOp *ops);

/* Activation sets (tape instances) stage needs. */
int pipeline_slots(FtPipeSchedule kind, int pp, int stage, int M, int extra);

#endif

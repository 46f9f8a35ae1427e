/* timers.h: the named regions of a run, in one list.
 *
 * Each region is a span of the training loop that a person profiling it asks about; its
 * begin/end calls are the one place where per-region instruments hang (wall time here; PAPI
 * counters and NVTX ranges go into timers_begin / timers_end). Regions nest (forward inside
 * step); the end-of-run table gives, per region, calls, total seconds and the share of the
 * step time, each as min / avg / max over ranks. Event counters (counters.h, the deck's
 * perf.papi_events) attached with timers_attach are read at the same begin/end calls, so they
 * nest the same way, and add one column per event (min / avg / max over ranks) to the table.
 * No globals: one FtTimers per trainer. */
#ifndef FTLLM_TIMERS_H
#define FTLLM_TIMERS_H

#include <mpi.h>
#include <stdio.h>

#include "ftllm/counters.h"

/* X(enum suffix, name, what it covers) */
#define FT_REGION_LIST(X)                                                                      \
    X(STEP, "step", "a whole optimizer step, redos included")                                  \
    X(DATA, "data", "reading a micro-batch's tokens")                                          \
    X(FORWARD, "forward", "micro-batch forward passes (their messages included)")              \
    X(BACKWARD, "backward", "micro-batch backward passes with AC recomputation")               \
    X(GRADSYNC, "gradsync", "finishing the data-parallel and embedding gradient sums")         \
    X(OPTIMIZER, "optimizer", "gradient norm and AdamW")                                       \
    X(EVAL, "eval", "validation")                                                              \
    X(CHECKPOINT, "checkpoint", "the checkpoint hook after a step (sync write or async stage)")

typedef enum ft_region {
#define FT_REGION_ENUM(name, text, help) FT_REGION_##name,
    FT_REGION_LIST(FT_REGION_ENUM)
#undef FT_REGION_ENUM
    FT_NREGIONS
} FtRegion;

typedef struct ft_timers {
    double t0[FT_NREGIONS], total[FT_NREGIONS];
    long long calls[FT_NREGIONS];
    FtCounters *ctr;     /* event counters read at the same boundaries (NULL: none; not owned) */
    int kill_region;     /* testing aid (timers_kill_at): the region, or -1 */
    long long kill_left; /* entries into it still to go */
} FtTimers;

/* Wall-clock seconds (CLOCK_REALTIME): comparable between the processes of a node (a test
 * kill's time against the survivors' detection, perf/bench_ulfm.sh); MPI_Wtime need not be. */
double timers_wall(void);
/* Zeroes the times and calls (and the attached counters' totals); keeps the counters and a
 * kill point set by timers_kill_at (its count is not restarted). */
void timers_reset(FtTimers *t);
/* Attaches counters opened with FT_NREGIONS slots (NULL detaches); their totals are reset. */
void timers_attach(FtTimers *t, FtCounters *ctr);
/* The region named `name` ("backward"), or -1. */
int timers_region_of(const char *name);
/* Testing aid for real process failures (tests/e2e/ulfm.sh): this process raises SIGKILL on
 * its nth entry into region r from now on, or its nth pass of kill point r (below)
 * (timers_reset does not restart the count). */
void timers_kill_at(FtTimers *t, int r, long long nth);
/* Kill points that are not regions: FT_KILL_AGREED ("agreed"), just after a step attempt's DMR
 * agreement (train_dmr.c), before the trainer's own agreement on process failures;
 * FT_KILL_IDLE ("idle"), a rank that does not train (a hot spare, a replica that left) each
 * time it starts waiting for the job's next event (train_spare.c); FT_KILL_REGRID ("regrid"),
 * every rank of a job with hot spares or failed replicas each time the job's ranks split a
 * new training grid out of the job (a spare joins, a restart, a rebuild after a death);
 * FT_KILL_WRITE ("write"), a rank that writes checkpoint data, before each dataset it writes
 * (train_ckpt.c; from the writer's thread in asynchronous mode). */
enum { FT_KILL_AGREED = FT_NREGIONS, FT_KILL_IDLE, FT_KILL_REGRID, FT_KILL_WRITE };
/* A region's number by name, or a kill point's ("agreed", "idle", "regrid", "write"); -1:
 * neither. */
int timers_kill_point_of(const char *name);
/* Kill point p passed (counted for timers_kill_at). */
void timers_point(FtTimers *t, int p);
void timers_begin(FtTimers *t, FtRegion r);
void timers_end(FtTimers *t, FtRegion r);

/* Collective over comm: rank 0 prints the table (region, calls, seconds and % of step as
 * min / avg / max over the ranks, then each counter's min / avg / max) to out (NULL: nothing).
 * Regions never entered are left out. Counters must be attached on every rank or on none. */
void timers_report(const FtTimers *t, MPI_Comm comm, FILE *out);

#endif

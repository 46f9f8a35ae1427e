/* fault.h: the fault schedule, the user's "deck of faults" (`[faults] schedule = FILE`).
 *
 * A small text file, one event per line; `;` or `#` starts a comment (anywhere on a line),
 * blank lines are ignored, fields are `key=value` words in any order:
 *
 *   sdc         step=S rank=R op=NAME[:N] bit=B [elem=I] [target=primary|checker]
 *   sdc-random  count=K seed=X [steps=A-B] [ranks=R1,R2,...] [ops=NAME,NAME,...]
 *               [target=primary|checker|both]
 *   fail        step=S replica=I          (a whole data-parallel replica stops)
 *   fail        step=S rank=R             (one rank stops)
 *
 * sdc: flip bit B of one element of the outputs of the N-th execution (from 0, default 0) of op
 * kind NAME on rank R during step S (1-based, the step being computed). Executions are counted
 * in execution order over the whole step: forward, backward, AC recomputation and optimizer
 * alike (validation passes are not counted). NAME is an op kind as the tape printout names it
 * (encoder, layernorm, matmul, attention, gelu, residual, crossentropy (or crossent), lossmean,
 * gradnorm, adamw, moe_route, moe_dispatch, moe_expert, moe_combine). The element I counts over
 * the execution's outputs in order (out[0]'s elements, then out[1]'s, ...); without elem= it is
 * drawn from a seeded stream (run.seed and the line), so a run is reproducible. Bit B is a bit of
 * the element's integer image (0 = least significant; 31 = a float's sign). target=primary (the
 * default) flips the op's own output right after it wrote it; target=checker flips the output of
 * the execution that checks it (DMR's re-execution, or with piggyback DMR the AC recomputation).
 * A flip fires once: the redone step after a rollback runs clean.
 *
 * sdc-random: K flips drawn with seed X, each at a uniform step of A..B (default the whole run),
 * rank of the list (default every rank), op kind of the list that runs on that rank (default
 * every kind that does), execution, bit and element; no two in the same execution.
 *
 * fail: fail-stop events, parsed and checked here and exposed for SPARe; training does not act
 * on them yet (the train verb says so in one warning line).
 *
 * Errors are one line, `FILE:LINE: message`: syntax and ranges (fault_parse), then against the
 * job (fault_plan: ranks, replicas, op kinds and executions that exist on each rank, sdc-random
 * step ranges); an event after the run's last step is left out with a warning. */
#ifndef FTLLM_FAULT_H
#define FTLLM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftllm/comm.h"
#include "ftllm/ops.h"
#include "ftllm/tape.h"

typedef enum ft_fault_kind { FT_FAULT_SDC, FT_FAULT_SDC_RANDOM, FT_FAULT_FAIL } FtFaultKind;
typedef enum ft_fault_target {
    FT_TARGET_PRIMARY,
    FT_TARGET_CHECKER,
    FT_TARGET_BOTH /* sdc-random: each flip picks one at random */
} FtFaultTarget;

#define FT_FAULT_MAX_LINE 1024 /* longest line accepted, bytes */

/* One line of the schedule. Unused fields are -1 (or 0 for masks and counts). */
typedef struct ft_fault_event {
    FtFaultKind kind;
    int line;
    long long step;       /* sdc, fail */
    int rank;             /* sdc; fail: -1 when replica= is given */
    int replica;          /* fail: -1 when rank= is given */
    FtOpKind op;          /* sdc */
    long long nth;        /* sdc: execution N of op (0 when not given) */
    int bit;              /* sdc */
    long long elem;       /* sdc: -1 = drawn at random */
    FtFaultTarget target; /* sdc, sdc-random */
    long long count;      /* sdc-random */
    uint64_t seed;        /* sdc-random */
    long long step_lo, step_hi; /* sdc-random: 0, 0 = the whole run */
    int *ranks;           /* sdc-random: NULL = every rank */
    int nranks;
    uint32_t ops;         /* sdc-random: bit k = op kind k allowed; 0 = every kind */
} FtFaultEvent;

typedef struct ft_fault_schedule {
    char path[256];
    FtFaultEvent *ev;
    int nev;
} FtFaultSchedule;

/* What a rank runs in one training step, per op kind: executions, the largest number of output
 * elements of one execution, and the narrowest output element in bits (0: the kind does not
 * run). fault_plan needs one per rank of the job. */
typedef struct ft_fault_ops {
    long long count[FT_OP_NKINDS];
    long long max_elems[FT_OP_NKINDS];
    int bits[FT_OP_NKINDS];
} FtFaultOps;

/* The job a schedule is checked against. */
typedef struct ft_fault_job {
    int nranks;          /* ranks of the job */
    int dp;              /* data-parallel replicas */
    long long steps;     /* the run's last step (train.steps) */
    const FtFaultOps *ops; /* nranks tables, rank order */
    uint64_t seed;       /* run.seed: the stream of elements drawn for sdc lines without elem= */
} FtFaultJob;

/* One bit flip, resolved: where and when it fires. */
typedef struct ft_flip {
    int line;            /* schedule line it came from */
    long long step;
    int rank;
    FtOpKind op;
    long long nth;
    int bit;
    long long elem;      /* -1: elem_draw % (the execution's output elements) */
    uint64_t elem_draw;
    FtFaultTarget target; /* primary or checker */
} FtFlip;

/* Parses schedule text (len bytes, need not be NUL-terminated; path names it in messages).
 * Returns 0, or -1 with one line "PATH:LINE: message" in err (s is left empty). */
int fault_parse(FtFaultSchedule *s, const char *path, const char *text, size_t len, char *err,
                size_t errlen);

/* Collective over world (NULL: one rank): rank 0 reads path, every rank parses the same bytes.
 * Returns the same on every rank: 0, or -1 with a one-line message in err. */
int fault_load(FtFaultSchedule *s, const char *path, FtComm *world, char *err, size_t errlen);

void fault_free(FtFaultSchedule *s);

/* This rank's op table (FtFaultOps) for a step of `micro` runs of each model tape `tape` plus one
 * run of the optimizer tape `opt` (may be NULL). */
void fault_ops_of(const FtTape *tape, int micro, const FtTape *opt, FtFaultOps *o);

/* Checks the schedule against the job and resolves its sdc and sdc-random lines into flips
 * (every rank's, in line order; sdc-random draws in order). Deterministic: every rank gets the
 * same answer from the same inputs. Returns 0 with *flips (malloc'd, may be NULL when *n is 0),
 * or -1 with "PATH:LINE: message" in err. An sdc or fail line whose step is after the run's
 * last is checked and left out (a schedule may outlive a shorter run): warn (may be NULL) gets
 * "PATH:LINE: ..." about the first, "" when there is none. */
int fault_plan(const FtFaultSchedule *s, const FtFaultJob *job, FtFlip **flips, int *n,
               char *err, size_t errlen, char *warn, size_t warnlen);

/* Fail-stop lines of the schedule (for SPARe). */
int fault_count(const FtFaultSchedule *s, FtFaultKind kind);

/* The op kind named (the table's names; "crossent" for crossentropy), or -1. */
int fault_op_kind(const char *name);

/* A splitmix64 step: the stream flips are drawn from. */
uint64_t fault_rng(uint64_t *state);

#endif

/* exec.h: the executor, the one place ops are launched.
 *
 * It runs a range of tape entries (resolving tensor ids to pointers and calling the op table's
 * forward or backward) or a single op call (the optimizer's kernels). Later issues hook DMR
 * re-execution, fault injection and comm windows here; the model code never launches an op.
 * Optional statistics: per op kind and direction, calls, seconds and FLOPs. */
#ifndef FTLLM_EXEC_H
#define FTLLM_EXEC_H

#include "ftllm/ops.h"
#include "ftllm/tape.h"

typedef struct ft_exec_stats {
    long long calls[FT_OP_NKINDS][2];
    double seconds[FT_OP_NKINDS][2];
    double flops[FT_OP_NKINDS][2];
} FtExecStats;

/* Runs entries [begin, end) of the tape in order. stats may be NULL (no timing). */
void exec_run(const FtTape *tp, int begin, int end, FtExecStats *stats);

/* Runs one op call outside a tape. */
void exec_op(FtOpKind kind, FtOpDir dir, const FtOpCall *c, FtExecStats *stats);

/* Prints a per-kind table of the statistics (calls, ms, GFLOP/s, % of total). */
void exec_stats_print(FILE *out, const FtExecStats *s);

#endif

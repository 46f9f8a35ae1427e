/* exec.h: the executor, the one place ops are launched.
 *
 * It runs a range of tape entries (resolving tensor ids to pointers and calling the op table's
 * forward or backward) or a single op call (the optimizer's kernels). Communication points on
 * the tape (tape.h markers) are carried out here, from an FtExec context: tensor-parallel
 * all-reduces, pipeline sends and receives between stages, expert-parallel all-to-alls (row
 * counts first, then the rows), and the "layer gradients complete"
 * hook the train loop uses to start data-parallel bucket reductions. Every message is a
 * non-blocking comm call; the executor owns the wait (comm_wait with the context's poll hook,
 * where DMR's deferred checkers will run) and charges the time spent waiting to a timeline
 * (timeline.h). Pipeline sends are left in flight: a tape's activation send is completed before
 * that tape's next forward, its gradient send before its next backward, all of them by
 * exec_finish. DMR re-execution and fault injection hook in here (FtExecHooks); the model code
 * never launches an op. Optional statistics: per op kind and direction, calls, seconds, FLOPs. */
#ifndef FTLLM_EXEC_H
#define FTLLM_EXEC_H

#include <stdbool.h>
#include <stdio.h>

#include "ftllm/backend.h"
#include "ftllm/comm.h"
#include "ftllm/ops.h"
#include "ftllm/tape.h"
#include "ftllm/timeline.h"

typedef struct ft_exec_stats {
    /* time each op to its end: a backend that is not the host's (a GPU) waits for its stream
     * before and after each op, which serializes the host with it (the op table `ftllm train`
     * prints at run.log_level = debug). Off, a device op's time is its launch. */
    bool sync;
    long long calls[FT_OP_NKINDS][2];
    double seconds[FT_OP_NKINDS][2];
    double flops[FT_OP_NKINDS][2];
} FtExecStats;

#define FT_EXEC_MAX_TAPES 64
#define FT_EXEC_MAX_WATCH 64

/* What fault tolerance plugs into: the executor calls these and knows nothing of DMR or fault
 * injection (the engine never includes ft/). The in-window hook is FtExec.poll, run while a
 * message is in flight; the before-commit hook is the trainer's (train.h). */
typedef struct ft_exec_hooks {
    /* right after op entry `entry` of tp wrote its outputs; c is the call it ran (re-running c
     * must give the same bytes: ops.h); instance: the executor's `instance` (the micro-batch
     * of the step the tape ran for) */
    void (*after_op)(void *arg, const FtTape *tp, int entry, int instance, const FtOpCall *c);
    void *arg;
} FtExecHooks;

/* What the executor needs to carry out a tape's communication points; zero-initialized it is
 * the single-rank executor (markers are no-ops). */
typedef struct ft_exec {
    const FtBackend *be; /* the op table and context; NULL: the CPU backend */
    FtExecStats *stats;  /* may be NULL */
    FtTimeline *tl;      /* may be NULL */
    FtComm *tp;          /* FT_MARK_COMM_TP all-reduces; NULL: tp width 1 */
    FtComm *pp;          /* FT_MARK_PP_*: stage i is rank i of this communicator; NULL: pp 1 */
    FtComm *ep;          /* FT_MARK_EP_* all-to-alls: expert-parallel rank q is rank q; NULL:
                            ep 1 (the markers' buffers are shared, nothing moves) */
    /* FT_MARK_COMM_GRADS: called with the entry's layer (-1: final LayerNorm); NULL: ignored */
    void (*grads_ready)(void *arg, int layer);
    void *grads_arg;
    FtPoll poll;         /* run while waiting for a message */
    FtExecHooks hooks;
    /* which execution of the tapes in a step this is: the trainer sets the micro-batch before
     * running a micro-batch tape and 0 before the optimizer's; handed to hooks.after_op (DMR's
     * plan gives each micro-batch's execution of an op its own strategy, dmr_plan.h) */
    int instance;
    /* requests the executor tests after every op (exec_watch): MPICH moves a non-blocking
     * collective forward only inside MPI calls, so without these tests a gradient bucket's
     * all-reduce would not overlap the backward that follows it */
    FtReq *watch[FT_EXEC_MAX_WATCH];
    int nwatch;
    bool no_progress; /* do not test watched requests (to measure what testing buys) */
    struct {             /* pipeline sends in flight, per tape */
        const FtTape *tape;
        FtReq act, grad;
    } sends[FT_EXEC_MAX_TAPES];
    int nsends;
} FtExec;

/* Runs entries [begin, end) with ex's backend and communication (a zeroed FtExec: one rank,
 * the CPU, markers are no-ops). Collective over ex->tp for tapes with
 * tensor-parallel markers; pipeline markers talk to the neighbouring stages. */
void exec_run_ctx(FtExec *ex, const FtTape *tp, int begin, int end);

/* Tests req after every op until it completes (req must stay valid until then; a request the
 * owner waits for itself is simply complete by then). Not collective. */
void exec_watch(FtExec *ex, FtReq *req);

/* Completes every pipeline send still in flight. */
void exec_finish(FtExec *ex);

/* Waits for the requests (the executor's wait: poll hook, time charged to ex->tl as `kind`). */
void exec_wait(FtExec *ex, FtReq *reqs, int n, FtTlKind kind);

/* Runs one op call outside a tape, on the CPU backend. */
void exec_op(FtOpKind kind, FtOpDir dir, const FtOpCall *c, FtExecStats *stats);
/* The same on backend be (NULL: CPU), with its context in the call. */
void exec_op_on(const FtBackend *be, FtOpKind kind, FtOpDir dir, FtOpCall *c, FtExecStats *stats);

/* Prints a per-kind table of the statistics (calls, ms, GFLOP/s, % of total). */
void exec_stats_print(FILE *out, const FtExecStats *s);

#endif

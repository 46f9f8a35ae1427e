/* dmr_pipesim.h: a pipeline's step under a DMR plan, simulated, and the plans of its stages
 * refined together (dmr.refine = pipeline).
 *
 * Why. Each stage plans from its own profile (dmr_plan.h), and its windows are the waits it
 * measured. In a pipeline those waits are the other stages' work: a check a stage runs at once
 * before a send delays its neighbour, which then waits longer (the last stage's checks of
 * micro-batch 0 are the first stage's warm-up wait), and a deferred check replayed in a wait can
 * overrun the message and delay the stage's next send. A plan made from one rank's profile cannot
 * see this; a simulation of every stage's step can (perf/README.md, 2026-12-02).
 *
 * The model (dmr_pipe_sim), deterministic, per stage in its profile's time order:
 *  - execution k takes dur[k] seconds (the op's checker time: a re-execution), plus, by its
 *    slot's strategy: naive its checker time chk; deferred its bookkeeping keep (copying the
 *    kept inputs, fingerprinting), and a unit of chk seconds joins the stage's queue; an AGC
 *    member its planned inline cost (inl), and it joins its segment's unit, complete at the
 *    segment's last member; piggyback inl (its fingerprint).
 *  - a pipeline receive before execution k waits for the matching send (act(m) from the stage
 *    before, grad(m) from the stage after: the tape's markers), a send after execution k is at
 *    its end; other waits (wait[k]: tensor-parallel, data-parallel, ...) are fixed lengths.
 *  - in a wait the stage replays queued units one member at a time while the message has not
 *    arrived (the executor's poll hook: a member started runs to its end, past the arrival),
 *    in queue order, finishing a unit begun first;
 *  - after its last micro-batch execution every stage meets the others (the tied embedding's
 *    exchange, the loss and norm sums, gradient sync): a barrier at the latest of them, which
 *    holds replays too; then its remaining executions (the optimizer), then it replays what is
 *    queued (the drain before the agreement). The step is the latest stage's end.
 *  - memory as the runtime keeps it: a deferred member's kept bytes from its execution until
 *    its unit is replayed (an AGC unit's first member's and the segment's last member's); a
 *    member that would pass the budget is checked at once (its open unit replayed first) and
 *    counted as demoted.
 * Its error against measured steps: perf/README.md.
 *
 * The refinement (dmr_pipe_refine) starts from the stages' own plans and flips op executions
 * between naive and deferred (those both allow: no AGC members, no piggyback, no integer
 * writers, no dynamic MoE experts), one stage after the other in time order, keeping a flip
 * when the simulated step gets shorter without more demotions; each pass first moves every
 * micro-batch's execution of an op together (a group: as many candidates as op entries, which
 * keeps a pass affordable where a stage runs tens of thousands of executions), then single
 * executions; passes until none helps or the evaluation cap; from three starts (the stages' own
 * plans, every flippable check at once, every one deferred), the best end. Every stage runs it on the same gathered input, so every stage gets the
 * same answer and takes its own slots (dmr_pipe.c). */
#ifndef FTLLM_DMR_PIPESIM_H
#define FTLLM_DMR_PIPESIM_H

#include <stdbool.h>
#include <stddef.h>

#include "ftllm/dmr_plan.h"

typedef struct ft_pipe_rank {
    int stage, nstage;
    int n;            /* executions in time order */
    int nslot;        /* the plan's slots */
    int last_micro;   /* the barrier comes after execution last_micro (-1: before any) */
    double budget;    /* bytes deferred checks may keep at once */
    int *slot;        /* [n] the plan's slot of each execution */
    int *recv, *send; /* [n] message received just before / sent just after it, -1: none */
    double *dur;      /* [n] seconds */
    double *lat;      /* [n] seconds from the send after it to the message's arrival (0 in a
                         profiled run: its transfers are in its measured waits) */
    double *wait;     /* [n + 1] fixed waits just before each ([n]: after the last) */
    int *strat;       /* [nslot] enum ft_plan_strategy (-1: a marker, never run) */
    int *seg;         /* [nslot] AGC segment, -1 */
    unsigned char *flip; /* [nslot] may move between naive and deferred */
    double *chk;      /* [nslot] checker seconds of one execution */
    double *keep;     /* [nslot] bookkeeping seconds when deferred */
    double *inl;      /* [nslot] seconds at the primary as an AGC member or piggyback */
    double *kept;     /* [nslot] bytes a deferred check keeps */
    int hops_only;    /* 1: while waiting on a pipeline message the stage replays deferred checks
                         only for the message's transfer time (its PP hop, what the paper calls
                         the PP communication window), not in the rest of the wait (the bubbles,
                         a slower neighbour) nor at the stages' meeting: the paper's rule, to
                         measure what those give. Not packed (a run's stages replay in every
                         wait: 0). */
    int *group;       /* [nslot] the search's group (the slot's entry: every micro-batch's
                         execution of an op moves together first), -1: none */
    /* filled by dmr_pipe_sim */
    int *replayed_before; /* [nslot] the execution whose waits replayed it (n: the barrier or
                             the drain; -1: not deferred) */
    double *start;        /* [n] when each execution began */
} FtPipeRank;

typedef struct ft_pipe_result {
    double step;       /* seconds: the latest stage's end */
    double end[64];    /* per stage (the first 64) */
    long long demoted; /* deferred members checked at once: the budget */
    double peak;       /* most bytes kept at once, the largest stage's */
    bool ok;           /* false: a receive no stage sends (the input is not one pipeline) */
} FtPipeResult;

/* Stage `stage` of nstage as the plan p built from profile pf has it (p->pos: a plan per
 * execution), budget in bytes. Returns 0, or -1 when the plan has no time order or the
 * markers do not fit the sequence (then r is empty). */
int dmr_pipe_rank_build(const FtDmrProfile *pf, const FtDmrEntryPlan *p, const FtTape *micro,
                        const FtTape *opt, int stage, int nstage, size_t budget, FtPipeRank *r);
void dmr_pipe_rank_free(FtPipeRank *r);
/* An empty stage of n executions and nslot slots to fill by hand (plan_predict_pipe.c): no
 * messages, no waits, every slot a marker (strat -1, no segment, no group, not flippable). */
void dmr_pipe_rank_init(FtPipeRank *r, int stage, int nstage, int n, int nslot, double budget);

/* The id of micro-batch m's activation (grad false) or gradient (grad true) message that stage
 * `stage` of nstage sends: recv[] and send[] hold these. */
int dmr_pipe_msg(int m, int stage, int nstage, bool grad);

/* r as doubles (every integer exactly), and back: *buf is malloc'd, returns its length. */
size_t dmr_pipe_rank_pack(const FtPipeRank *r, double **buf);
/* Returns 0, or -1 when buf is not one (then r is empty). */
int dmr_pipe_rank_unpack(const double *buf, size_t len, FtPipeRank *r);

/* The step of the nstage stages r[0..nstage) (r[s].stage == s) under their strategies. */
FtPipeResult dmr_pipe_sim(FtPipeRank *r, int nstage);

/* Every flippable slot of every stage set to strategy st (PLAN_NAIVE or PLAN_DEFERRED). */
void dmr_pipe_set_all(FtPipeRank *r, int nstage, int st);

/* A lower bound of the step under any strategies that keep r's piggyback choices, in the
 * model: without checks every execution starts at its earliest (start_k); adding checks only
 * delays (every stage's time is a max of sums of non-negative terms), and from execution k's
 * start its stage still runs its ops from k on and the checks of them that do not ride on
 * recomputation (naive, deferred or AGC, each on its own stage, after its op):
 *   step >= max over stages and k of (start_k without checks + sum over j >= k of (dur_j +
 *           exposed chk_j)), and >= the step without checks.
 * Issue 10's bounds subtract every rank's idle time as if it could hold any of its checks; in
 * a pipeline much of it cannot (the first stage's warm-up wait comes before its backward ops;
 * the last stage's waits are the first stage's checks), so this one is higher and closer to
 * what a plan can reach (perf/README.md). -1 when r is not one pipeline. */
double dmr_pipe_bound(FtPipeRank *r, int nstage);

typedef struct ft_pipe_refine {
    FtPipeResult start, best; /* the stages' own plans, and the refined ones */
    FtPipeResult off, naive;  /* no checks; every check at once */
    double bound;             /* dmr_pipe_bound of the stages' own plans */
    int deferred[64];         /* per stage (the first 64): its slots deferred once refined */
    unsigned long long sig[64]; /* ... and dmr_pipe_sig of its strategies */
    int flips;                /* slots whose strategy changed */
    long long evals;          /* simulations run */
    int passes;
} FtPipeRefine;

/* A hash of n strategies (FNV-1a over their values): which plan a stage runs. */
unsigned long long dmr_pipe_sig(const int *strat, int n);

/* Refines r's strategies (above); at most max_evals simulations. Deterministic. */
void dmr_pipe_refine(FtPipeRank *r, int nstage, long long max_evals, FtPipeRefine *out);

/* Plan p (the one r was built from) takes r's strategies: a slot flipped to deferred gets the
 * window its simulated replay fell in (or the first after it), one flipped to naive loses its
 * window; costs and the windows' used time follow. Returns how many slots changed. */
int dmr_pipe_apply(const FtPipeRank *r, FtDmrEntryPlan *p);

/* Mode planned, once d has made its plan from its profile (FtDmrCfg.on_plan), on every stage
 * of pipeline pp at once: collective over pp (comm_rank = stage). Each stage's part is
 * gathered, every stage refines the same input and d's plan takes this stage's strategies.
 * Returns 0 with *out filled; -1 on every stage (and d's plan as it was) when a stage has no
 * plan per execution (a sequence it could not follow) or the stages do not make one pipeline.
 * max_work bounds the search: simulations times the executions each simulates (at least
 * 1000 simulations; 2e8 is a few seconds on one core). */
struct ft_dmr;
struct ft_comm;
int dmr_refine_pipeline(struct ft_dmr *d, struct ft_comm *pp, long long max_work,
                        FtPipeRefine *out);
/* The same where each stage has tensor- or expert-parallel peers (peers: this stage's tp x ep
 * ranks, the first peer's pipeline first, as rank 0; NULL or one rank: dmr_refine_pipeline):
 * collective over pp and peers. Rank 0 of peers' pipeline refines; each peer's plan then takes
 * its stage's first peer's for every micro-batch execution (strategy, AGC segment, window,
 * cost; its optimizer part stays its own), or where that cannot be taken whole, its
 * naive/deferred choices where the peer's plan may move the slot; every peer gets the first
 * peer's *out. Returns how many micro-batch executions the peer's plan has another strategy
 * or segment for than the first peer's (0 when taken whole), or -1 on every rank of the
 * pipeline and its peers (d's plan as it was) when dmr_refine_pipeline would fail or the
 * peers' micro-batch tapes or execution orders differ. */
int dmr_refine_pipeline_peers(struct ft_dmr *d, struct ft_comm *pp, struct ft_comm *peers,
                              long long max_work, FtPipeRefine *out);

#endif

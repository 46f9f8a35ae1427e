/* dmr_plan.h: the DMR plan of one rank (dmr.mode = planned) in tape-entry space: what the
 * profiler measured, the planner's strategy for each op execution, and the plan file.
 *
 * Entry space. A rank runs two tapes in a step: the micro-batch tape (forward, backward and AC
 * recomputation; every pipeline slot is a copy of it, and each of its entries runs once per
 * micro-batch) and the optimizer tape. Entry i < nmicro is the micro-batch tape's entry i,
 * entry nmicro + k the optimizer tape's entry k.
 *
 * Slots. A plan gives each op execution of a step its own strategy: slot (i, m) is micro-batch
 * m's execution of entry i, s = m * nmicro + i for a micro-batch entry, ninst * nmicro + k for
 * the optimizer's entry k (run once a step, m = 0). A pipeline's waits come once: the first
 * stage's warm-up wait falls in micro-batch 0's backward, the last stage's in its end, so the
 * checks that a wait can hold are those of the executions before it in time order, not every
 * micro-batch's execution of the entries before its place in the tape. With ninst = 1 a slot is
 * an entry and its strategy applies to every execution (a plan made without a time order, or
 * read from a version 1 file). Until 2026-12-02 every plan was one strategy per entry: its
 * windows were the waits at an entry's place summed over the micro-batches, and the run kept
 * 3-10 times what its plan said (perf/README.md).
 *
 * Profile (dmr.c, during the first dmr.profile_steps steps, checked naively): per entry the
 * checker time (the naive re-execution and the comparison of its outputs, timed), summed over
 * micro-batches;
 * per entry the bookkeeping a deferred check would add at the primary, timed by doing it once
 * after the naive check (copying the kept inputs into buffers reused as a deferral's are,
 * fingerprinting outputs);
 * per position (after entry i, the one that ran last before the wait) the time this rank waited
 * on messages (timeline.h), pipeline waits apart from the others (tensor-parallel all-reduces,
 * expert all-to-alls, data-parallel buckets, tied-embedding exchange, loss/norm sums). Pipeline
 * waits are the PP windows and bubbles together: with 1F1B a stage's bubble is its wait for the
 * neighbour's activation or gradient. And the step in time order: the sequence of its op
 * executions (entry and micro-batch, the executor's instance) with the waits before each
 * (dmr_profile_seq): the planner's input, and the time-order bound's (dmr_order_excess).
 *
 * Build (dmr_plan_build): planner.h's operators are the op executions of the profile's sequence
 * that may be planned, in time order, one slot each (time, bookkeeping: the entry's per step
 * over its executions); its windows the waits before each, one per kind with time > 0, opening
 * after the last planned operator before it. Without a usable sequence (none recorded, steps
 * that ran different ones, an execution that came twice, as under SPARe with several shards a
 * step) the plan has one slot per entry, the waits at their entries (ninst = 1). Entries that
 * write integers (MoE routing indices and counts, which later ops use as addresses before a
 * deferred check could run) are always naive, and so are, in the plan, the MoE expert ops
 * without an AC twin when the profile says moe_dynamic (the dynamic planner decides them at run
 * time from the rows routed: they take no window time and reserve no memory here). An op's kept
 * bytes are its inputs that are not model state (parameters and AdamW moments do not change
 * before the commit; everything else is copied) plus 8 bytes per output (a fingerprint); its
 * copy and fp times are the profiled bookkeeping, which the planner charges to deferred and AGC
 * checks. recomputed = the entry has an AC twin; block = (micro-batch, layer + 1) (0: outside
 * the blocks; the optimizer's apart): an AGC segment stays inside one micro-batch. A PP window's
 * block is the block of the execution before it. Times and lengths are per step (means over the
 * profiled steps). The waits were measured while every rank checked naively, which stretches a
 * pipeline's bubbles and a neighbour's lateness with the compute: window lengths are scaled by
 * step_s / wall_s (the step without its checks over the step with them), to first order what
 * they are once most checks are off the critical path. Except the waits that came after the
 * rank's last micro-batch op in time order: those are the other ranks finishing their last ops
 * (in a pipeline the first stage's last backward, waited for by the last stage), and the checks
 * of those ops have no long window after them, so plans leave them on the path and those waits
 * keep their measured length. Issue 10's bound still subtracts every wait scaled (idle_s): the
 * idle time of the step without checks. Memory is exact per slot: one execution's kept bytes,
 * from the execution to its window.
 *
 * The file (dmr_plan_write / dmr_plan_read): text, '#' starts a comment line:
 *   ftllm-dmr-plan 2
 *   rank R of N layout LAYOUT
 *   tape HASH entries NMICRO optimizer NOPT micro_batches M
 *   budget_mb X phases P profile_steps S step_ms X overhead_ms X [prebwd_ms X] [order_ms X]
 *             [idle_ms X]
 *   window W after ENTRY mb MB kind pp|intra len_ms X use -|agc|deferred used_ms X
 *   op ENTRY MB KIND.DIR PHASE LAYER STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES COST_MS
 * (a window opens after op execution (ENTRY, MB), "-1 mb 0": before any; COST_MS: naive, its
 * time; deferred, its bookkeeping; AGC members, their share of the segment's bookkeeping, plus
 * the replay for a piggyback member; piggyback, 0; times per step)
 * one op line per op slot (micro-batch entries: MB in [0, M); optimizer entries: 0), in the
 * step's time order (the order is the plan's: memory in time is counted along it). Version 1
 * (until 2026-12-02) has no micro_batches, no MB fields and windows "after ENTRY", op lines in
 * entry order: read as ninst = 1. Reading checks every field and the lines against this rank's
 * tapes (same hash, same kind, direction, phase and layer at each entry, a strategy the entry
 * allows: piggyback needs an AC twin, and the twin's execution of the same micro-batch the
 * same, deferred and agc an entry that writes no integers, agc a segment) and a version 2
 * plan's micro-batches against the run's: a bad line is "FILE:LINE: message". */
#ifndef FTLLM_DMR_PLAN_H
#define FTLLM_DMR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ftllm/planner.h"
#include "ftllm/tape.h"

typedef struct ft_dmr_profile {
    int nmicro, nopt;   /* entry space (above) */
    int steps;          /* steps measured */
    double *time;       /* [nmicro + nopt] checker seconds, summed over the steps */
    double *copy, *fp;  /* [nmicro + nopt] bookkeeping seconds a deferred check would add:
                           copying the kept inputs, fingerprinting the outputs (summed) */
    double *wait_pp;    /* [nmicro + nopt + 1]: seconds waited after entry i - 1 (0: before */
    double *wait_other; /*   any op of the step), summed over the steps */
    double pre_bwd_s;   /* of those waits, the ones before the step's first backward op (no
                           check of a backward op can run in them), summed over the steps */
    /* The step in time order: its op executions, seq[k] the entry and seq_inst[k] the
     * micro-batch of the k-th (recorded in the first measured step), seq_wait[k] the seconds
     * waited just before it (seq_wait_pp[k] of them pipeline waits) and seq_tail after the last
     * (summed over the steps); seq_bad: the steps ran different sequences (then the plan has one
     * slot per entry and the time-order bound falls back to pre_bwd_s) */
    int *seq, *seq_inst, nseq, capseq;
    double *seq_wait, *seq_wait_pp, seq_tail, seq_tail_pp;
    bool seq_done, seq_bad;
    double step_s;      /* step attempts' seconds without their checks, summed */
    double wall_s;      /* step attempts' seconds, checks included, summed */
    bool moe_dynamic;   /* dmr.moe_dynamic: expert ops without an AC twin are decided at run
                           time (dmr.h), so the plan leaves them out (naive in it) */
} FtDmrProfile;

typedef struct ft_dmr_entry_plan {
    int nmicro, nopt;
    int ninst;           /* micro-batches planned apart (0 or 1: one slot per entry) */
    int n;               /* slots: ninst * nmicro + nopt (above) */
    int *strat;          /* [n] enum ft_plan_strategy; -1: a marker */
    int *seg;            /* [n] AGC segment of a member (covered, or a piggyback op replayed
                            inside it), else -1 */
    int *window;         /* [n] the window of a deferred or AGC check, else -1 */
    double *time;        /* [n] checker seconds per step */
    size_t *kept;        /* [n] bytes a deferred check of one execution keeps */
    double *cost;        /* [n] predicted overhead seconds per step (naive: its time) */
    int *pos;            /* [n] the slot's place in the step's time order (-1: a marker, or it
                            never ran); NULL: its index (entry order) */
    int nwin, nseg;
    int *win_after;      /* [nwin] the slot it opens after (-1: before any) */
    int *win_kind;       /* [nwin] enum ft_plan_window_kind */
    int *win_use;        /* [nwin] 0 unused, 2 an AGC segment, 3 deferred checks */
    double *win_len, *win_used; /* [nwin] seconds per step */
    double overhead;     /* predicted seconds per step (planner.h's cost model) */
    double step_s;       /* profiled step seconds (0: unknown) */
    double pre_bwd_s;    /* window seconds per step before the first backward op (scaled as
                            the windows; dmr_plan_bounds); 0: none or not measured */
    bool has_idle;       /* idle_s was measured (a plan file made before it: false) */
    double idle_s;       /* the waits, seconds per step, every one scaled as the step without
                            checks has them: what issue 10's bound subtracts (dmr_plan_bounds;
                            without it, the windows' lengths) */
    bool has_order;      /* order_s was measured (a plan file made before it: false) */
    double order_s;      /* the time-order bound's excess, seconds per step (dmr_order_excess
                            of the profile's sequence under this plan's strategies) */
    int fwd_end;         /* entries [0, fwd_end) are the micro-batch tape's forward */
    double budget_mb;
    int phases;          /* enum ft_plan_phase mask */
    int profile_steps;
    uint64_t tape_hash;
} FtDmrEntryPlan;

/* Profile of nmicro + nopt entries, zeroed. */
void dmr_profile_init(FtDmrProfile *pf, int nmicro, int nopt);
void dmr_profile_free(FtDmrProfile *pf);
/* dst becomes a copy of src (dst initialized, or zeroed: its storage is reused or grown). */
void dmr_profile_copy(FtDmrProfile *dst, const FtDmrProfile *src);
/* The profiler's note: execution pos of the measured step is entry idx of micro-batch inst
 * (-1: the step's end), after `wait` seconds of waits, wait_pp of them pipeline waits. The
 * first step records the sequence, later ones add their waits to it (a different sequence sets
 * seq_bad). */
void dmr_profile_seq(FtDmrProfile *pf, int pos, int idx, int inst, double wait, double wait_pp);

/* Whether entry e may be deferred (it writes no integers) and whether AC checks it (a twin). */
bool dmr_entry_deferrable(const FtTape *tp, const FtTapeEntry *e);
bool dmr_entry_piggyback(const FtTape *tp, const FtTapeEntry *e);
/* Bytes a deferred check of entry i keeps (copied inputs + fingerprints). */
size_t dmr_entry_kept(const FtTape *tp, int i);
/* The most bytes the plan's deferred and AGC checks keep at once, memory in time (planner.h)
 * along the plan's time order (pos): an AGC segment its first and last member's kept bytes
 * from its first member to its window, a deferred check its kept bytes from its slot to its
 * window. Slots with skip[s] set are left out (skip may be NULL). */
size_t dmr_plan_held_peak(const FtDmrEntryPlan *p, const unsigned char *skip);

/* Slot of micro-batch inst's execution of entry i (an optimizer entry: inst ignored; a plan
 * with one slot per entry: every micro-batch's is the entry's), and back. */
static inline int dmr_plan_slot(const FtDmrEntryPlan *p, int i, int inst)
{
    int M = p->ninst > 1 ? p->ninst : 1;
    if (i >= p->nmicro) return M * p->nmicro + (i - p->nmicro);
    return (M > 1 ? inst : 0) * p->nmicro + i;
}
static inline int dmr_plan_entry(const FtDmrEntryPlan *p, int s, int *inst)
{
    int M = p->ninst > 1 ? p->ninst : 1;
    *inst = s < M * p->nmicro ? s / p->nmicro : 0;
    return s < M * p->nmicro ? s % p->nmicro : p->nmicro + (s - M * p->nmicro);
}
/* The slot's place in the time order. */
static inline int dmr_plan_pos(const FtDmrEntryPlan *p, int s)
{
    return s < 0 ? -1 : p->pos ? p->pos[s] : s;
}

/* A hash of the tapes' structure (kinds, directions, phases, layers, twins, tensor sizes). */
uint64_t dmr_tape_hash(const FtTape *micro, const FtTape *opt);

/* Plans the profiled tapes (phases: enum ft_plan_phase mask, budget in bytes). Returns 0, or -1
 * when out of memory. */
int dmr_plan_build(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, size_t budget,
                   int phases, FtDmrEntryPlan *p);
void dmr_plan_free(FtDmrEntryPlan *p);

/* The entry-space tape and index of entry i (an entry, not a slot). */
static inline const FtTape *dmr_plan_tape(const FtDmrEntryPlan *p, const FtTape *micro,
                                          const FtTape *opt, int i, int *k)
{
    *k = i < p->nmicro ? i : i - p->nmicro;
    return i < p->nmicro ? micro : opt;
}

/* Writes the plan to path; rank_line is "rank R of N layout L". Returns 0, or -1 with
 * "PATH: why" in err. */
int dmr_plan_write(const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                   const char *path, const char *rank_line, char *err, size_t errlen);
/* Reads path and checks it against the tapes, rank_line and the run's micro-batches per step
 * (a version 2 plan of several must have as many; 0: not checked). Returns 0, or -1 with
 * "PATH:LINE: message" (or "PATH: message") in err; p is then empty. */
int dmr_plan_read(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const char *path,
                  const char *rank_line, int micro_batches, char *err, size_t errlen);

/* Per strategy: ops, checker seconds per step, predicted cost (naive: all of it). */
typedef struct ft_dmr_plan_totals {
    int ops[4];
    double time[4], cost[4];
    int segments, windows_used;
    double hidden_s;  /* checker time assigned to windows */
    double window_s;  /* all windows' length */
    double exposed_s; /* checker time of ops AC does not recompute (the lower bound's work) */
    double exposed_fwd_s; /* ... of them forward ops (the last AC segment's, the embedding) */
} FtDmrPlanTotals;
void dmr_plan_totals(const FtDmrEntryPlan *p, FtDmrPlanTotals *t);

/* The time-order bound's excess over the step without checks, seconds, at least 0. The step's
 * op executions in time order: seq[k] (a slot of the plan) after a wait of wait[k]
 * seconds, tail seconds of waits after the last; slot i's exposed checker work per step,
 * time[i] unless strat[i] is piggyback or a marker (< 0), is split evenly over its executions
 * in seq (several where a slot is an entry). A check runs after its op, on the rank's one stream of work, so from the start of
 * execution k to the end of the step the rank does at least the ops from k on, and their
 * exposed checks, and only the waits after k's start can hold any check:
 *   excess = max over k of (exposed work of executions k.. - waits after k's start),
 * never below issue 10's bound (every wait counted, the one before the first execution too). For
 * the last pipeline stage the wait for its first activation comes before every op: it holds
 * nothing. Waits and times are per step, as measured without (or scaled to no) checks. */
double dmr_order_excess(const int *strat, const double *time, int n, const int *seq,
                        const double *wait, int nseq, double tail);

/* dmr_order_excess of profile pf's step under plan p (the plan built from it), every checker
 * time times f (1: the plan's order_s; a benchmark scales them by how its checks ran later
 * against the profile). Returns -1 when pf has no sequence. */
double dmr_plan_order_excess(const FtDmrEntryPlan *p, const FtDmrProfile *pf, double f);

/* Lower bounds of the overhead, as fractions of step_s (> 0), at least 0:
 *   returned  issue 10's: (checker time AC does not recompute - every window) / step_s;
 *   *ordered  in time order: order_s / step_s when has_order (dmr_order_excess; never below
 *             the first). A plan file made before order_ms falls back to the coarser form
 *             with pre_bwd_s: the windows before the step's first backward op hold at most the
 *             forward ops' share of the work; equal to the first when pre_bwd_s is 0. */
double dmr_plan_bounds(const FtDmrEntryPlan *p, double step_s, double *ordered);

/* The table (one row per op slot in time order: entry, micro-batch, op, phase, layer,
 * strategy, window, time, cost) when
 * `table`, then the per-strategy totals and the predicted overhead; dmr_plan_print_table: the
 * table alone. */
void dmr_plan_print_table(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro,
                          const FtTape *opt);
void dmr_plan_print(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                    bool table);

#endif

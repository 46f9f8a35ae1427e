/* dmr_plan.h: the DMR plan of one rank (dmr.mode = planned) in tape-entry space: what the
 * profiler measured, the planner's strategy for each op, and the plan file.
 *
 * Entry space. A rank runs two tapes in a step: the micro-batch tape (forward, backward and AC
 * recomputation; every pipeline slot is a copy of it, and each of its entries runs once per
 * micro-batch) and the optimizer tape. Entry i < nmicro is the micro-batch tape's entry i,
 * entry nmicro + k the optimizer tape's entry k. A plan gives every op entry (markers have
 * none) one strategy, applied to each of its executions.
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
 * executions with the wait before each (dmr_profile_seq), for the time-order bound
 * (dmr_order_excess): per entry the waits of all micro-batches are summed, which loses when
 * each came.
 *
 * Build (dmr_plan_build): planner.h's operators are the op entries that may be planned; entries
 * that write integers (MoE routing indices and counts, which later ops use as addresses before a
 * deferred check could run) are always naive, and so are, in the plan, the MoE expert ops
 * without an AC twin when the profile says moe_dynamic (the dynamic planner decides them at run
 * time from the rows routed: they take no window time and reserve no memory here). An op's kept bytes are its inputs that are not
 * model state (parameters and AdamW moments do not change before the commit; everything else is
 * copied) plus 8 bytes per output (a fingerprint); its copy and fp times are the profiled
 * bookkeeping, which the planner charges to deferred and AGC checks. recomputed = the entry has an
 * AC twin; block = layer + 1 (0: outside the blocks). One window per position and kind with time >
 * 0, opening after the last planned op at or before it; a PP window's block is the block of the
 * entry before it. Times and lengths are per step (means over the profiled steps). The waits were
 * measured while every rank checked naively, which stretches a pipeline's bubbles and a
 * neighbour's lateness with the compute: window lengths are scaled by step_s / wall_s (the
 * step without its checks over the step with them), to first order what they are once most
 * checks are off the critical path. Except the waits that came after the rank's last
 * micro-batch op in time order (the sequence below): those are the other ranks finishing their
 * last ops (in a pipeline the first stage's last backward, waited for by the last stage), and
 * the checks of those ops have no long window after them, so plans leave them on the path and
 * those waits keep their measured length. Issue 10's bound still subtracts every wait scaled
 * (idle_s): the idle time of the step without checks. Memory: an op's kept bytes are one
 * execution's, and a check deferred to a window after the last micro-batch's entries is kept by
 * every micro-batch of the step (reps, counted in the profile's sequence): the plan is made by
 * dmr_plan_fit, which holds the budget over the whole step (since 2026-12-02; before, a plan for
 * inputs/dmr-planned.ini said 1.8 and 5.6 MiB at once on its two ranks where the run kept 24.3).
 *
 * The file (dmr_plan_write / dmr_plan_read): text, '#' starts a comment line:
 *   ftllm-dmr-plan 1
 *   rank R of N layout LAYOUT
 *   tape HASH entries NMICRO optimizer NOPT
 *   budget_mb X phases P profile_steps S step_ms X overhead_ms X [prebwd_ms X] [order_ms X]
 *             [idle_ms X]
 *   window W after ENTRY kind pp|intra len_ms X use -|agc|deferred used_ms X
 *   op ENTRY KIND.DIR PHASE LAYER STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES COST_MS
 * (COST_MS: naive, its time; deferred, its bookkeeping; AGC members, their share of the
 * segment's bookkeeping, plus the replay for a piggyback member; piggyback, 0)
 * one op line per op entry, in entry order (WINDOW and SEGMENT: - when none). Reading checks
 * every field and the lines against this rank's tapes (same hash, same kind, direction, phase
 * and layer at each entry, a strategy the entry allows: piggyback needs an AC twin, deferred
 * and agc an entry that writes no integers, agc a segment): a bad line is "FILE:LINE: message". */
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
    /* The step in time order: its op executions, seq[k] the entry of the k-th (recorded in
     * the first measured step), seq_wait[k] the seconds waited just before it and seq_tail
     * after the last (summed over the steps); seq_bad: the steps ran different sequences
     * (then the time-order bound falls back to pre_bwd_s) */
    int *seq, nseq, capseq;
    double *seq_wait, seq_tail;
    bool seq_done, seq_bad;
    double step_s;      /* step attempts' seconds without their checks, summed */
    double wall_s;      /* step attempts' seconds, checks included, summed */
    bool moe_dynamic;   /* dmr.moe_dynamic: expert ops without an AC twin are decided at run
                           time (dmr.h), so the plan leaves them out (naive in it) */
} FtDmrProfile;

typedef struct ft_dmr_entry_plan {
    int nmicro, nopt, n; /* n = nmicro + nopt */
    int *strat;          /* [n] enum ft_plan_strategy; -1: a marker */
    int *seg;            /* [n] AGC segment of a member (covered, or a piggyback op replayed
                            inside it), else -1 */
    int *window;         /* [n] the window of a deferred or AGC check, else -1 */
    double *time;        /* [n] checker seconds per step */
    size_t *kept;        /* [n] bytes a deferred check of one execution keeps */
    double *cost;        /* [n] predicted overhead seconds per step (naive: its time) */
    int nwin, nseg;
    int *win_after;      /* [nwin] entry it opens after (-1: before any) */
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
    int reps;            /* micro-batches per step its memory was fitted to (dmr_plan_fit; 0 or
                            1: one, as for a plan read from a file) */
    uint64_t tape_hash;
} FtDmrEntryPlan;

/* Profile of nmicro + nopt entries, zeroed. */
void dmr_profile_init(FtDmrProfile *pf, int nmicro, int nopt);
void dmr_profile_free(FtDmrProfile *pf);
/* dst becomes a copy of src (dst initialized, or zeroed: its storage is reused or grown). */
void dmr_profile_copy(FtDmrProfile *dst, const FtDmrProfile *src);
/* The profiler's note: execution pos of the measured step is entry idx (-1: the step's end),
 * after `wait` seconds of waits. The first step records the sequence, later ones add their
 * waits to it (a different sequence sets seq_bad). */
void dmr_profile_seq(FtDmrProfile *pf, int pos, int idx, double wait);

/* Whether entry e may be deferred (it writes no integers) and whether AC checks it (a twin). */
bool dmr_entry_deferrable(const FtTape *tp, const FtTapeEntry *e);
bool dmr_entry_piggyback(const FtTape *tp, const FtTapeEntry *e);
/* Bytes a deferred check of entry i keeps (copied inputs + fingerprints). */
size_t dmr_entry_kept(const FtTape *tp, int i);
/* The most bytes the plan's deferred and AGC checks keep at once over a step of p->reps
 * micro-batches, memory in time (planner.h): an AGC segment its first and last member's kept
 * bytes from its first member to its window, a deferred check its kept bytes from its entry to
 * its window; a check of a micro-batch entry whose window comes once a step (after the last
 * micro-batch's entries) is kept by every micro-batch until then, so the other reps - 1 copies
 * are added (they are all held through the last micro-batch). Entries with skip[i] set are left
 * out (skip may be NULL). */
size_t dmr_plan_held_peak(const FtDmrEntryPlan *p, const unsigned char *skip);

/* The same for a planner plan over operators that stand for every execution in a step (their
 * time the sum), whose kept bytes are one execution's: once[w] marks the windows that come
 * once a step after every execution of the operators with rep[o] set (NULL: none), which keep
 * reps copies of those: planner_peak_held (one copy each) plus the other reps - 1 copies of
 * what goes to those windows, held all through the last micro-batch. */
size_t dmr_plan_fit_peak(const FtPlanOp *ops, const FtPlanWindow *win, const unsigned char *once,
                         const unsigned char *rep, int reps, const FtDmrPlan *pl);
/* The plan of dmr_plan_build under memory over the step: planner_run with every repeated
 * operator that no window before the step's end can hold (none long enough from its position
 * on) counted with all its copies, then again under a smaller budget while the plan's
 * dmr_plan_fit_peak passes `budget` (at worst down to a budget of 0: nothing kept); *peak gets
 * the final plan's. Returns planner_run's result. */
int dmr_plan_fit(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin,
                 const unsigned char *once, const unsigned char *rep, int reps, size_t budget,
                 int phases, FtDmrPlan *pl, size_t *peak);
/* A hash of the tapes' structure (kinds, directions, phases, layers, twins, tensor sizes). */
uint64_t dmr_tape_hash(const FtTape *micro, const FtTape *opt);

/* Plans the profiled tapes (phases: enum ft_plan_phase mask, budget in bytes). Returns 0, or -1
 * when out of memory. */
int dmr_plan_build(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, size_t budget,
                   int phases, FtDmrEntryPlan *p);
void dmr_plan_free(FtDmrEntryPlan *p);

/* The entry-space tape and index of entry i. */
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
/* Reads path and checks it against the tapes and rank_line. Returns 0, or -1 with
 * "PATH:LINE: message" (or "PATH: message") in err; p is then empty. */
int dmr_plan_read(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const char *path,
                  const char *rank_line, char *err, size_t errlen);

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
 * op executions in time order: seq[k] (an entry of the plan's space) after a wait of wait[k]
 * seconds, tail seconds of waits after the last; entry i's exposed checker work per step,
 * time[i] unless strat[i] is piggyback or a marker (< 0), is split evenly over its executions
 * in seq. A check runs after its op, on the rank's one stream of work, so from the start of
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

/* The table (one row per op: entry, op, phase, layer, strategy, window, time, cost) when
 * `table`, then the per-strategy totals and the predicted overhead; dmr_plan_print_table: the
 * table alone. */
void dmr_plan_print_table(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro,
                          const FtTape *opt);
void dmr_plan_print(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                    bool table);

#endif

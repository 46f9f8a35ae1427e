/* planner.h: SpareTrain's three-phase static DMR planner (PAPERS.md section 1), as a pure
 * algorithm: plain structs in, one strategy per operator and a predicted overhead out. No MPI,
 * no training; the profiler that measures the inputs and the wiring into dmr.mode come later.
 *
 * Inputs. Operators in execution order (checker time, bytes kept to defer the check, whether AC
 * recomputes it, its transformer block); idle windows in execution order (opening after operator
 * `after`, a length, a kind: PP inter-node window after a block's backward, or TP/EP intra-node);
 * a memory budget for deferred checkers; the enabled phases.
 *
 * Phases.
 *   1  operators AC recomputes -> PLAN_PIGGYBACK (their recomputation is the checker).
 *   2  per block b, in block order, at most one AGC segment for the first PP window whose
 *      block is b: a contiguous run [i, j] of block b's operators (indices in the block's own
 *      order, all <= the window's `after`). The segment keeps only its boundary: the kept tensors
 *      of its first and its last operator (mem[i] + mem[j], mem[i] once when i == j); replaying
 *      it re-executes every operator inside, so replay time = sum of their times <= window len.
 *      gain = time of the not-yet-assigned operators it covers (they become PLAN_AGC)
 *           - extra = time of the piggyback-protected operators inside (replayed needlessly).
 *      Candidates over the memory slack (budget - boundary memory of the segments already chosen
 *      that are held at the same time: below) or over the window are dropped; the largest gain > 0 wins; ties: fewer operators, then
 *      the earliest start. Under the paper's rules a window holding a segment is used (Phase 3
 *      skips it); under this project's, Phase 3 may give it deferred checks up to what the
 *      segment's replay leaves of it (a pipeline's warm-up wait is far longer than the one
 *      segment of the block before it: planned per micro-batch on pp2, the first stage's
 *      warm-up wait held a 2.8 ms segment in 25 ms, and its first micro-batch's forward checks
 *      went naive; with the fill pp2's phases 1,2,3 ran 4-5 points faster, 2026-12-02).
 *   3  scan windows in order; at each window not used by Phase 2 (or with room beside its
 *      segment, above): enqueue the unassigned
 *      operators with index <= after not yet enqueued, except two kinds that go PLAN_NAIVE at
 *      once instead: (a) an operator whose bookkeeping (copy + fp) exceeds its checker time
 *      (deferring it would cost more than checking it now); (b) an operator whose checker time
 *      exceeds every Phase-3 window from this one on (no window can ever hold it: queued, it
 *      would only hold memory and force "demote the shortest" onto operators that would fit);
 *      likewise a queued operator leaves the queue (naive) at the first window from which on
 *      no window can hold it, before the demotion.
 *      (b) and the bookkeeping are this project's, not the paper's (PLAN_PAPER turns both
 *      off); (b) leaves the worked example's plan as it is (every op there fits the last
 *      window). While the queue's memory exceeds the Phase-3 budget (budget - all AGC boundary
 *      memory held then: below), demote operators to PLAN_NAIVE: under the paper's rules the
 *      shortest (ties: the earliest index); under this project's, the one that loses the least
 *      hidden checking per byte freed (its time x its prospect, the share of its time that the
 *      windows from here on long enough for it can still give, against the time of the queued
 *      operators at least as long, which compete for them; ties: the shorter, then the
 *      earlier; scored once per window). With one window left both rules demote the shortest
 *      first; where long operators queue for one late window (a DP reduce-scatter) while short
 *      ones could fill the many intra-node windows before it, the paper's rule demotes the short
 *      ones and the long ones mostly end naive anyway. Then
 *      give the window the subset of the queue with the largest total time <= len (less a
 *      segment's replay) (planner_best_fit) as PLAN_DEFERRED; the rest stays queued. Leftovers at the end and
 *      everything no phase took -> PLAN_NAIVE.
 * Memory in time: an AGC segment holds its boundary from its first operator to its window
 * (operators seg_first .. win[seg_win].after); a queued operator from its execution to its
 * window or its demotion. Phase 2 charges a candidate the most that the segments already
 * chosen hold at once at any point of its own interval; Phase 3 at window w charges the queue
 * the most they hold at once at any point since the previous window without a segment
 * (planner_agc_held), where the queue holds at most its memory at w. So "AGC memory + deferred
 * queue <= budget" holds at every operator position. (Until 2026-12-02 every segment was
 * charged for the whole step: a few segments could then take the whole budget, and Phase 3 got
 * none.) Here an operator keeps one execution's tensors; where it stands for all the
 * executions of a step (dmr_plan_build: its time is their sum) and its window comes once a step
 * (after the last micro-batch), the run keeps every micro-batch's copies until then:
 * dmr_plan_fit plans such operators with their copies and shrinks the budget until the plan
 * holds over the whole step (dmr_plan.h). The run's own guard (dmr_defer.c) still checks at
 * once what would pass the budget.
 *
 * Cost model (predicted overhead, seconds per step):
 *   overhead = sum of checker time of PLAN_NAIVE operators + sum of AGC extra costs
 *            + bookkeeping: copy + fp of each PLAN_DEFERRED operator; per AGC segment the fp
 *              of every operator in it (covered or replayed piggyback: the replay compares each
 *              output) and the copy of its boundary (first and last operator, once if one).
 *   Bookkeeping runs at the primary's execution, on the critical path; a segment's gain in
 *   Phase 2 is net of it.
 * Piggyback checks and checks hidden in windows (deferred, AGC replays of the covered
 * operators) cost 0. The extra cost of a segment (the needless replay of piggyback operators
 * inside) is charged even though it runs in the window: it stands for the costs the paper
 * names (needless replays, extra communication) that do not hide. Under this model adding a
 * phase never increases the overhead: Phase 2 only takes a segment of net gain > 0 (the
 * overhead drops by exactly the gain), Phase 3 only turns would-be naive operators into
 * deferred ones whose bookkeeping is at most their checker time.
 *
 * Determinism: every choice is made in index order with the tie-breaks above; the same inputs
 * give the same plan bytes. */
#ifndef FTLLM_PLANNER_H
#define FTLLM_PLANNER_H

#include <stddef.h>

enum ft_plan_strategy { PLAN_PIGGYBACK = 0, PLAN_NAIVE = 1, PLAN_DEFERRED = 2, PLAN_AGC = 3 };
enum ft_plan_window_kind { PLAN_WIN_PP = 0, PLAN_WIN_INTRA = 1 };
enum ft_plan_phase { PLAN_PHASE1 = 1, PLAN_PHASE2 = 2, PLAN_PHASE3 = 4 };
/* Option bit with the phases: the paper's rules as published, for the ablation: Phase 3 queues
 * operators no window can hold (rule (b) off) and bookkeeping is free (copy and fp read as 0). */
#define PLAN_PAPER 8

/* One operator, in execution order. */
typedef struct ft_plan_op {
    const char *name; /* for reports; may be NULL */
    double time;      /* checker run time (s), >= 0 */
    size_t mem;       /* bytes of the tensors kept to defer its check */
    int recomputed;   /* 1 when AC recomputes it (P-DMR eligible) */
    int block;        /* its transformer block, >= 0 */
    double copy;      /* bookkeeping of a deferred check (s, >= 0; 0: free, the paper's model): */
    double fp;        /* copying the kept inputs, and fingerprinting the outputs */
} FtPlanOp;

/* One idle window, in execution order (after non-decreasing). */
typedef struct ft_plan_window {
    int after;  /* opens after operator `after` (-1: before the first; checks only ops <= after) */
    double len; /* length (s), >= 0 */
    int kind;   /* enum ft_plan_window_kind */
    int block;  /* PLAN_WIN_PP: the block whose backward it follows; ignored otherwise */
} FtPlanWindow;

typedef struct ft_dmr_plan {
    int nops, nwin;
    int *strategy;      /* [nops] enum ft_plan_strategy */
    int *window;        /* [nops] the window of a deferred / AGC check, else -1 */
    int *segment;       /* [nops] AGC segment id (0, 1, ... in block order), else -1 */
    int nseg;           /* AGC segments */
    int *seg_first;     /* [nseg] operator index of each segment's first and last operator: */
    int *seg_last;      /* the boundary (a piggyback operator may be one: its tensors can be
                           smaller; it is replayed, not covered) */
    int *seg_win;       /* [nseg] the PP window each segment is replayed in */
    int *win_phase;     /* [nwin] 0 unused, 2 (holds an AGC segment) or 3 (deferred checks) */
    double *win_time;   /* [nwin] checker time assigned to it (an AGC segment's replay, plus
                           the deferred checks beside it) */
    size_t agc_mem;     /* boundary memory of all AGC segments together (not all held at once) */
    size_t *win_qmem;   /* [nwin] Phase 3: queue memory after demotion at that window */
    int *qoff;          /* [nwin + 1] Phase 3 trace: window w's queue after demotion is */
    int *q;             /* q[qoff[w] .. qoff[w+1]) (operator indices, enqueue order) */
    double overhead;    /* predicted, seconds (cost model above) */
    double agc_extra;   /* the AGC extra costs inside overhead */
    double keep_cost;   /* the bookkeeping inside overhead (deferred and AGC) */
    int too_long;       /* Phase 3: operators sent naive as no later window holds them */
} FtDmrPlan;

/* Plans nops operators and nwin windows under `budget` bytes with the phases given (a mask of
 * enum ft_plan_phase, optionally | PLAN_PAPER). Returns 0, or -1 on invalid input (negative
 * time, copy, fp or length, block < 0, after out of [-1, nops-1] or decreasing, unknown kind or
 * phase bit) or out of memory; p is then empty (planner_free is still safe). */
int planner_run(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin, size_t budget,
                int phases, FtDmrPlan *p);
void planner_free(FtDmrPlan *p);

/* The AGC boundary memory charged against Phase 3's queue at window w of a plan: the most the
 * segments hold at once at an operator position after the previous window without a segment,
 * up to w's (planner.h, "Memory in time"). */
size_t planner_agc_held(const FtDmrPlan *p, const FtPlanOp *ops, const FtPlanWindow *win, int w);
/* The most bytes the plan's AGC boundaries and deferred checks keep at once at any operator
 * position (its final strategies; memory in time): at most the budget. (size_t)-1 when out of
 * memory. */
size_t planner_peak_held(const FtDmrPlan *p, const FtPlanOp *ops, const FtPlanWindow *win);

/* The subset of t[0..n) with the largest sum <= len: pick[i] = 1 for the chosen; returns the
 * sum (added in index order), or -1 when out of memory. Exact for n <= PLANNER_EXACT_MAX
 * (depth-first search, include before exclude, a later subset replaces the best only when
 * strictly larger: so among equal sums the one taking earlier items wins). Above, a 0/1
 * knapsack on times rounded up to len / PLANNER_DP_UNITS: never overfills, and holds at least
 * the best fit of a window n units shorter (not the optimum less n units: 30 checks of 273.05
 * units fill 8192 units to 8191.5, but rounded up to 274 only 29 fit). */
#define PLANNER_EXACT_MAX 24
#define PLANNER_DP_UNITS 8192
double planner_best_fit(const double *t, int n, double len, unsigned char *pick);

const char *planner_strategy_name(int s); /* "piggyback", "naive", "deferred", "agc" */

#endif

/* dmr.h: dual modular redundancy against silent data corruption (after SpareTrain), and the
 * bit-flip injection that proves it works.
 *
 * DMR plugs into the executor's after-op hook (exec.h) and never into the model: every op the
 * executor runs during a training step is checked by one of two strategies (dmr.mode):
 *   naive      run the op again right after the primary, from the same inputs, into scratch
 *              outputs, and compare bytes (ops are bitwise deterministic, ops.h); the primary's
 *              bytes go on. On a mismatch the op runs a third time into its own outputs, so
 *              what later ops read is a clean execution's (a corrupted MoE index would otherwise
 *              send them out of bounds before the rollback).
 *   piggyback  with activation checkpointing the backward recomputes each checkpointed
 *              segment's forward ops (tape.h: a forward entry and its recompute twin): the
 *              forward fingerprints its outputs (fingerprint.h: any one or two changed bits
 *              change it) and the twin compares its own outputs' fingerprints
 *              with them, so the recomputation is the checker and costs nothing extra. Entries
 *              without a twin (the backward, the optimizer, the last segment, everything when
 *              nothing is recomputed) and entries that write integers (MoE routing indices and
 *              counts, which later ops use as addresses before the twin could compare them) are
 *              checked naively.
 *   planned    a plan (dmr_plan.h) gives each op entry one strategy, from a profile of the
 *              first dmr.profile_steps steps (checked naively) or from the plan file dmr.plan:
 *              piggyback and naive as above, and
 *              deferred  the primary's inputs that are not model state are copied and its
 *                        outputs fingerprinted; the checker runs later from the copies into
 *                        scratch and compares fingerprints. Queued checkers run from the
 *                        executor's poll hook (dmr_poll: FtExec.poll, called while a message is
 *                        in flight), one op per call, so the wait tests its requests between
 *                        chunks (MPICH has no progress thread); what is still queued runs in
 *                        dmr_agree before the agreement, so no step commits unchecked.
 *              agc       the ops of an AGC segment (a run of one block's ops) form one deferred
 *                        unit: an input another member of the unit wrote (with nothing else
 *                        writing or sending it in between) is not kept but replayed, so only
 *                        the segment's boundary tensors are kept; each replayed op's output
 *                        fingerprint is compared (piggyback ops inside are replayed, not
 *                        counted as checks).
 *              At most dmr.deferred_mb bytes are kept at once (copies + fingerprints): an op
 *              that would pass it is checked at once (naive) and its open segment replayed
 *              first. Entries that write integers (MoE routing) are never deferred. A corrupted
 *              output a deferred check has not compared yet reaches later ops (floats only) and
 *              maybe other ranks, but not the parameters: the step is redone by every rank.
 *              The dynamic planner (dmr.moe_dynamic, dmr_dynamic.c) decides the MoE expert ops
 *              (moe_expert forward and backward, whose real work is the rows routed at run
 *              time, not the capacity the static plan sized them by) when each one runs: its
 *              kept bytes are counted from the actual routed rows (the row-indexed inputs are
 *              kept up to the routed rows only: the op reads nothing past them), and the check
 *              is deferred as a unit of its own when those bytes fit the dynamic guard (what
 *              dmr.deferred_mb leaves after the static plan's reservations: its AGC boundaries
 *              plus its largest deferred queue at any window) and the budget itself, else naive
 *              at once. Its units drain into whatever waits come next, notably the EP
 *              all-to-alls that open at run time (dynamic windows), beside the plan's windows.
 *              Expert ops the plan gave piggyback or an AGC segment keep that (they keep
 *              nothing of their own).
 * Validation passes are not checked (they change no state) and not counted.
 *
 * A step is one or more attempts (train.h before_commit): dmr_agree ends one. Every check of the
 * attempt has run by then (piggyback twins run inside the step's backward); one small
 * all-reduce over the job says whether any rank mismatched, and if so every rank redoes the
 * step from the same state (rank, op, step and strategy of each rank's first mismatch are
 * logged). A rank whose checks mismatched in dmr.suspect_after steps is reported as suspect,
 * for SPARe to retire; the list is the same on every rank.
 *
 * Fault injection (fault.h): each flip fires once, on its rank, during its step, at the N-th
 * execution of its op kind (forward, backward, recomputation and optimizer counted alike), on
 * the primary's outputs right after the op wrote them or on the checker's outputs (the naive
 * re-execution, or with piggyback the recomputation twin; a piggybacked recomputation is itself
 * the checker, so both targets flip its output). An injected flip counts as detected
 * when a check of that very execution mismatched, as rolled back when its attempt was redone.
 *
 * The checks go through the backend (backend.h: checker_run, equal, fingerprint), so they run
 * where the tensors live (CUDA: the naive re-execution and the deferred replays on the checker
 * stream into device scratch, the compare and the fingerprints as device kernels); flips go
 * through the backend's copies. Where the backend has mark_differs and fingerprint_into, a
 * check does not wait for its answer: naive compares, piggyback compares and deferred replays
 * leave theirs in backend memory, read in one copy at the agreement (or earlier when
 * dmr_set_pending_max of them are pending). Only ops that write integers compare at once. */
#ifndef FTLLM_DMR_H
#define FTLLM_DMR_H

#include <stdbool.h>
#include <stdio.h>

#include "ftllm/backend.h"
#include "ftllm/comm.h"
#include "ftllm/exec.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/fault.h"
#include "ftllm/timeline.h"

typedef enum ft_dmr_strategy {
    FT_DMR_S_NAIVE,
    FT_DMR_S_PIGGYBACK,
    FT_DMR_S_DEFERRED, /* planned: one op's checker, queued */
    FT_DMR_S_AGC,      /* planned: an op replayed in its AGC segment */
    FT_DMR_NSTRAT
} FtDmrStrategy;

typedef struct ft_dmr FtDmr;

typedef struct ft_dmr_cfg {
    int mode;            /* enum ft_dmr_mode (deck_keys.h): off (injection only), naive, piggyback */
    int suspect_after;   /* steps with a mismatch that make a rank suspect; 0 = never */
    const FtBackend *be; /* where the tapes' tensors live; NULL: the CPU */
    FtComm *world;       /* every rank of the job now; NULL: one rank. Only read here: this
                            rank's number picks its flips */
    const FtFlip *flips; /* the schedule's flips (every rank's: this rank keeps its own) */
    int nflips;
    /* mode planned */
    const FtTape *micro, *opt; /* the entry space (dmr_plan.h): the micro-batch tape (every
                                  other tape the hooks see is a pipeline slot's copy of it) and
                                  the optimizer tape */
    int phases;                /* enum ft_plan_phase mask */
    size_t budget;             /* bytes deferred checks may keep at once */
    int profile_steps;         /* steps profiled when no plan is given */
    bool moe_dynamic;          /* the dynamic planner for MoE expert ops (above) */
    bool leftovers_end;        /* dmr.leftovers = end: the micro-batch ops the plan leaves naive
                                  are deferred instead (replayed in any later wait or at the
                                  drain; over the budget, naive as before) */
    bool no_chain;             /* dmr.chain = false: a deferred parameter gradient check keeps a
                                  copy of the earlier micro-batches' sum it adds onto, instead of
                                  joining the previous micro-batch's check and taking that sum
                                  from its replay (dmr_defer.c, "chains") */
    const FtTimeline *tl;      /* the executor's timeline: the profiler reads its waits */
    /* called once the profile is planned (dmr_plan has it), at the end of an attempt */
    void (*on_plan)(void *arg, FtDmr *d);
    void *on_plan_arg;
} FtDmrCfg;

/* Counters of one rank (dmr_stats) or summed over the job (dmr_stats_job). */
typedef struct ft_dmr_stats {
    long long checks[FT_DMR_NSTRAT]; /* executions checked, per strategy */
    long long mismatches;            /* checks whose outputs differed */
    long long attempts, redone;      /* step attempts, and those rolled back (job-wide) */
    long long retired;               /* suspects whose replica SPARe retired (job-wide) */
    long long unchecked;             /* piggyback fingerprints whose twin never ran */
    long long windowed;  /* deferred units (an op, or an AGC segment) checked in windows */
    long long drained;   /* ... checked before the agreement (no window came) */
    long long demoted;   /* ... checked at once: keeping them would pass dmr.deferred_mb */
    long long dyn_deferred; /* dynamic planner: expert op executions deferred */
    long long dyn_naive;    /* ... checked at once: their routed bytes passed the guard */
    long long dyn_windowed; /* ... deferred ones replayed in a window (the rest: drained) */
    long long dyn_bytes;     /* bytes the dynamic planner's executions would keep (routed rows) */
    long long dyn_cap_bytes; /* ... sized by capacity instead (as the static plan does) */
    long long keep_allocs; /* buffers allocated for kept inputs (the others were reused) */
    long long chained;     /* deferred parameter gradient checks that took the earlier sum from
                              the previous micro-batch's replay (a chain) instead of a copy */
    long long injected, detected, rolled_back, missed, not_fired;
    long long injected_at[FT_OP_NKINDS][3]; /* by op kind and phase (FtPhase; optimizer = fwd) */
    long long injected_by[FT_DMR_NSTRAT + 1][2]; /* by the strategy checking it (last: none) and
                                                    target (primary, checker) */
    double check_s;   /* inside the checks, the injections and the agreement */
    double compute_s; /* step attempts, from the first micro-batch to the agreement */
    double redo_s;    /* attempts that were rolled back */
    double window_s;  /* deferred checks run inside windows (part of check_s) */
    /* check_s by kind (the rest of it: the agreement, injections, the hook's own work) */
    double naive_s;   /* checks at once: the re-execution and the compare (naive, demoted) */
    double pb_s;      /* piggyback: fingerprints of forward outputs and of their recomputation */
    double keep_s;    /* deferred checks' keeping: inputs copied, the primary's outputs
                         fingerprinted (on the critical path, unlike their replays) */
    double replay_s;  /* deferred replays and their fingerprints, in windows or drained */
    long long kept_peak; /* most bytes deferred checks kept at once (job: the largest rank's) */
    long long dyn_kept_peak; /* ... of them the dynamic planner's (job: the largest rank's) */
    long long dyn_guard;     /* the dynamic guard in bytes (job: the largest rank's) */
    long long dyn_slack;     /* dyn_guard - dyn_kept_peak (job: the smallest rank's) */
    long long held_peak;     /* most bytes of kept-input buffers held at once, kept and pooled
                                for reuse together (job: the largest rank's) */
} FtDmrStats;

/* Not collective. cfg->flips is copied (this rank's). */
FtDmr *dmr_create(const FtDmrCfg *cfg);
void dmr_free(FtDmr *d);

/* The executor hooks to install (FtExec.hooks), and the poll hook (FtExec.poll) that runs
 * queued deferred checks while a message is in flight (mode planned; it does nothing
 * otherwise). */
FtExecHooks dmr_hooks(FtDmr *d);
FtPoll dmr_poll(FtDmr *d);

/* How many compares answered at the agreement (naive and piggyback, on a backend with
 * mark_differs / fingerprint_into) may be pending at once; when that many are, the host reads
 * their answers early (one copy) and goes on. Default 4096; call before the first step. */
void dmr_set_pending_max(FtDmr *d, int n);

/* Mode planned: gives d the plan to follow from the next attempt (d owns *p afterwards, p is
 * zeroed); without one, d profiles dmr.profile_steps attempts first (checked naively) and plans
 * them. dmr_plan is the plan in use, NULL while profiling. */
void dmr_set_plan(FtDmr *d, FtDmrEntryPlan *p);
const FtDmrEntryPlan *dmr_plan(const FtDmr *d);
/* The profile the plan in use was built from (NULL: none measured here, e.g. a plan file). */
const FtDmrProfile *dmr_profile(const FtDmr *d);

/* A training micro-batch of step `step` (1-based: the step being computed) begins; the first
 * call after dmr_agree opens a new attempt (execution counts start from 0). */
void dmr_step_begin(FtDmr *d, long long step);

/* A validation pass begins: ops are neither checked nor counted until dmr_step_begin. */
void dmr_pause(FtDmr *d);

/* Ends the attempt: collective over world, every rank of the job (NULL: one rank): one
 * all-reduce through ex's wait (the mismatch flag, and the rank's counters not yet summed:
 * dmr_committed), and on a mismatch one all-gather of who. Returns 1 on every rank
 * when any rank mismatched (redo the step), else 0; 0 also where this rank saw a process die
 * during it (comm_ft_failed: ULFM), since no verdict is one then and the trainer computes the
 * step again after the recovery (its flips count as rolled back). After the world shrank
 * (train_regrid) the suspect flags start over (ranks are numbered anew); each rank keeps its
 * own count of mismatching steps, which it sends at the next mismatch. */
int dmr_agree(FtDmr *d, FtExec *ex, FtComm *world);

/* The step whose agreement came last was committed (every live rank, after the trainer's
 * check for process failures): the counters that agreement summed become the job's agreed
 * ones. Not called for an attempt computed again (a mismatch, or a process death): its
 * counters are summed again at the next agreement. Not collective. */
void dmr_committed(FtDmr *d);
/* The attempt whose agreement came last was broken by a process failure (ULFM: every survivor,
 * after the trainer's recovery agreed on it) and is computed again. Mode planned while it
 * profiles: that attempt leaves the profile as it was before it (its waits hold the failure's
 * detection, which a cluster's heartbeat timeout can make seconds long, and its ops the
 * survivors' part of a broken step), and the profile takes the next attempt in its place.
 * Otherwise nothing. Not collective. */
void dmr_attempt_broken(FtDmr *d);
/* A rank joins the training ranks (a hot spare, a restart): the job's agreed counters from
 * rank root of c. Collective over c. */
void dmr_take_state(FtDmr *d, FtComm *c, int root);

void dmr_stats(const FtDmr *d, FtDmrStats *s);
/* Collective over world (NULL: one rank): the job's sums (times summed over ranks too). The
 * counters are the agreed ones (rank 0's) plus every rank's since its last committed step,
 * so a process that died is counted up to there (dmr_report). */
void dmr_stats_job(FtDmr *d, FtComm *world, FtDmrStats *s);

/* Whether rank r of the world is suspect (the same answer on every rank). */
bool dmr_is_suspect(const FtDmr *d, int r);
/* The ranks that became suspect since the last call (at most max, in rank order, the same on
 * every rank): each is handed over once, for SPARe to retire (train_dmr.c). A rank becomes
 * suspect at each agreement where its own count of mismatching steps (sent by it, dmr_agree)
 * is dmr.suspect_after or more, so every rank decides from the same gathered numbers: a hot
 * spare that took a place counts from 0 and is handed over when its own count gets there,
 * whatever the others remember of the place's earlier occupant; a suspect not retired (no
 * SPARe, or its flag dropped by dmr_regridded) is handed over again at its next mismatch. */
int dmr_take_suspects(FtDmr *d, int *ranks, int max);
/* SPARe retired a suspect's replica, world ranks [first, first + n) of the world the suspect
 * was named in: their history starts over (a hot spare takes those places) and the job's count
 * of retirements (the dmr line) grows by one. */
void dmr_retired(FtDmr *d, int first, int n);
/* The same without counting a retirement: world ranks [first, first + n) start over because
 * their replica failed (the fault schedule, a dead process) and a spare may take the place. */
void dmr_forget(FtDmr *d, int first, int n);
/* The trainer's grid was rebuilt since the last agreement (a process died and ULFM's recovery
 * regridded, a replica failed, a spare joined): suspects named but not handed over yet are
 * dropped, since their numbers are of the old world (one of them may be a place a hot spare
 * now holds). Each is named again at its next mismatching step. The same on every rank: a
 * joined spare has none to drop. */
void dmr_regridded(FtDmr *d);

/* Collective over job (NULL: world), every rank of the job, trained to the end or not: the
 * counters are summed over all of them, so the flips and checks of a rank whose replica failed
 * (SPARe) or that trained as a hot spare and went back to waiting are counted too, and those
 * of a process that died (ULFM) up to the last step it committed (each agreement sums them;
 * the attempt it died in is lost with it: its flips count as not applied, since no state
 * kept them). Times, peaks and the check-time split are the reporting ranks' only. Rank 0 of
 * world (the ranks still training; NULL on the others) prints the end-of-run lines to out
 * (NULL: nothing):
 *   faults: sdc injected K, detected K, rolled back K, missed K (...)
 *   dmr: mode M, checks naive N piggyback N, mismatches N (...), overhead X% (...)
 * schedule names the fault file ("" = none), nfail its fail-stop lines. */
void dmr_report(FtDmr *d, FtComm *world, FtComm *job, const char *schedule, int nfail,
                FILE *out);

/* "off", "naive", "piggyback", "planned" */
const char *dmr_mode_name(int mode);

#endif

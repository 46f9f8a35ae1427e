/* dmr_impl.h: what the DMR module's files share (dmr.c: set-up, the after-op hook, naive and
 * piggyback checks, injection, agreement, counters; dmr_defer.c: mode planned's deferred
 * checks, AGC segment replays, the poll hook and the profile; dmr_dynamic.c: the MoE dynamic
 * planner). Not a public header: only src/ft/dmr*.c include it. */
#ifndef FTLLM_DMR_IMPL_H
#define FTLLM_DMR_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftllm/dmr.h"
#include "ftllm/dmr_plan.h"

/* FtDmrStats' counters (the long longs before its times), summed over the job */
#define DMR_NCOUNT ((int)(offsetof(FtDmrStats, check_s) / sizeof(long long)))

enum strat { S_NONE, S_NAIVE, S_PB_SAVE, S_PB_CHECK, S_DEFER, S_AGC, S_DYN };

/* A deferred check (mode planned): one op (D-DMR) or the members of an AGC segment that ran so
 * far, replayed from what was kept when each primary ran. */
typedef struct member {
    const FtTape *tp;           /* its tape (a chain's members: the pipeline slots' copies) */
    int entry;                  /* in its tape */
    long long run;              /* micro-batch entries: which execution of the entry (d->runs) */
    FtOpCall c;                 /* inputs: kept copies, model state, or NULL where link >= 0 */
    int link[FT_OP_MAX_IN];     /* input k is member link/FT_OP_MAX_OUT's output link%MAX, or -1 */
    void *copy[FT_OP_MAX_IN];   /* kept copies (back to the pool with the unit) */
    size_t nb[FT_OP_MAX_IN];    /* ... their bytes */
    uint64_t fp[FT_OP_MAX_OUT]; /* the primary's output fingerprints (slot < 0) */
    int slot;                   /* ... or their slot in dfp (the backend's fingerprint_into) */
    int chk[4], nchk;           /* checker flips (applied to the replay's outputs) */
    bool covered;               /* counted as a check (AGC: not a piggyback op replayed) */
} Member;

typedef struct unit {
    const FtTape *tp;
    int seg;        /* AGC segment, -1: one op */
    Member *m;
    int nm, cap;
    size_t kept;    /* bytes charged to the budget */
    bool complete;  /* its last member ran (or it was closed) */
    bool dyn;       /* the dynamic planner's (its bytes count against dyn_guard too) */
    int next;       /* members replayed so far */
    size_t *roff;   /* [nm x FT_OP_MAX_OUT] replay output offsets in the replay scratch */
} Unit;

/* Piggyback fingerprints of one tape. */
typedef struct fp_store {
    const FtTape *tp;
    int ne;
    uint64_t *fp;           /* ne x FT_OP_MAX_OUT */
    uint64_t *fp_dev;       /* the same in backend memory (its fingerprint_into), or NULL */
    unsigned char *pending; /* ne: fingerprinted, twin not run yet */
    int npending;
} FpStore;

typedef struct inj { /* a flip applied in this attempt */
    int flip;
    const FtTape *tp;
    int key; /* the entry whose check covers it */
    bool detected;
} Inj;

typedef struct deferred { /* a checker flip waiting for its recompute twin */
    int flip;
    const FtTape *tp;
    int entry, key;
} Deferred;

#define MAX_STORES (FT_EXEC_MAX_TAPES + 2)

struct ft_dmr {
    int mode, suspect_after;
    const FtBackend *be;
    int rank, nranks; /* in the world of the last agreement */
    FtFlip *flips;
    bool *fired;
    int nflips;
    FpStore st[MAX_STORES];
    int nst;
    void *scratch;
    size_t scratch_bytes;
    /* naive compares answered at the agreement (the backend's mark_differs): flags[j] (backend
     * memory, zero until a compare differs) belongs to entry pend[j] */
    unsigned *flags;
    struct { const FtTape *tp; int i; } *pend;
    int npend, cappend;
    int pend_max;         /* capacity of flags/pend and of pbfp/pb (dmr_set_pending_max) */
    /* piggyback compares and deferred replays answered at the agreement (the backend's
     * fingerprint_into): pbfp (backend memory) holds per compare j the saved fingerprints of
     * entry pb[j].f, copied at the check, then the check's own (2 x FT_OP_MAX_OUT words) */
    uint64_t *pbfp;
    struct { const FtTape *tp; int i, f; enum strat s; } *pb;
    int npb, cappb;
    /* the attempt */
    bool in_attempt, active;
    long long step;
    long long count[FT_OP_NKINDS];
    int *armed, narmed; /* this step's flips not fired yet (-1: fired) */
    Inj *inj;
    int ninj, capinj;
    Deferred *def;
    int ndef, capdef;
    long long mism;
    char first[256];
    double t_attempt;
    /* mode planned */
    const FtTape *micro, *opt;
    int phases, profile_left, profile_steps;
    size_t budget, kept;
    const FtTimeline *tl;
    FtDmrEntryPlan plan; /* plan.strat NULL: profiling */
    FtDmrProfile prof;
    int inst;            /* the micro-batch of the op running now (the executor's instance) */
    int prof_last;       /* entry space index of the op that ran last (-1: none this attempt) */
    int prof_pos;        /* executions noted this attempt (dmr_profile_seq) */
    bool prof_bwd;       /* a backward op of this attempt ran (the waits since are after it) */
    double prof_w[2];    /* the timeline's waits (pp, others) at the last op */
    bool prof_count;     /* this attempt is measured */
    int prof_attempt;    /* attempts profiled */
    bool prof_open;      /* an attempt of the profile reached its agreement; whether it counts
                            is open until the step commits, is computed again for a mismatch
                            (it counts) or was broken by a process failure (it does not) */
    FtDmrProfile prof_snap; /* the profile before the open attempt (prof_count) */
    double att_check_s;  /* check_s when the attempt began */
    int *seg_last;       /* [plan.nseg] entry of each segment's last member */
    Unit *cur;           /* the unit being replayed (its outputs are in rscratch) */
    bool chain;          /* dmr.chain: a gradient's deferred micro-batches form one unit */
    signed char *sole;   /* [sole_ne x FT_OP_MAX_OUT] dmr_grad_sole_writer's answers (-1: not
                            yet), for the micro-batch tape (its pipeline slots' copies alike) */
    int sole_ne;
    long long *runs;     /* [micro->ne] executions of each micro-batch tape entry so far: a chain
                            joins only the entry's execution just before (a plan may check the
                            ones between otherwise, and the banks alternate: every other one
                            writes the same bank) */
    int *link;           /* [n x FT_OP_MAX_IN] AGC members: producer entry * MAX_OUT + k, or -1 */
    Unit **units;        /* deferred checks in order: open and complete */
    int nunits, capunits;
    struct { void *p; size_t bytes; } *pool; /* freed kept-input buffers, oldest first: the next
                                                 keep of the same size takes one (dmr_keep_alloc) */
    int npool, cappool;
    size_t pool_bytes;
    uint64_t *dfp;       /* deferred members' primary fingerprints (backend memory), slots of
                            FT_OP_MAX_OUT words: the free ones in dfree */
    int capdfp, *dfree, ndfree;
    void *rscratch;      /* the replay outputs of the unit being replayed */
    size_t rscratch_bytes;
    bool in_poll;
    bool moe_dyn;        /* dmr.moe_dynamic */
    bool left_end;       /* dmr.leftovers = end */
    size_t dyn_guard;    /* bytes the dynamic planner may keep: budget - the plan's reservations */
    size_t dyn_kept;     /* ... kept now */
    void (*on_plan)(void *arg, FtDmr *d);
    void *on_plan_arg;
    /* the run */
    FtDmrStats s;
    /* The job's counters as of the last committed step (dmr.c, "counters that outlive a
     * process"): agreed is the sum of every rank's contributions (the same on every live rank;
     * a joining rank takes it, dmr_take_state); sent is what this rank contributed; stash the
     * last agreement's sum and snap this rank's counters then, applied when that step commits
     * (dmr_committed) */
    long long agreed[DMR_NCOUNT], sent[DMR_NCOUNT], stash[DMR_NCOUNT], snap[DMR_NCOUNT];
    bool stashed;
    int my_bad;   /* this rank's steps with a mismatch (its own: kept when the world changes) */
    int *who;     /* per world rank: the counts gathered at the last mismatching agreement */
    bool *suspect;
    bool *handed; /* suspects handed over (dmr_take_suspects) */
};

/* dmr.c */
int dmr_entry_index(const FtDmr *d, const FtTape *tp, int i); /* entry space (dmr_plan.h) */
FtOpFn dmr_op_fn(const FtDmr *d, const FtTapeEntry *e); /* the backend's function of entry e */
void dmr_run_op(const FtDmr *d, const FtTapeEntry *e, const FtOpCall *c);
/* Applies flip fi to outs (outputs of entry i of tp); the check of `key` covers it. */
void dmr_inject(FtDmr *d, int fi, const FtTape *tp, int i, void *const *outs, int key,
                enum strat s);
/* A check of entry i (covering `key`) by strategy s mismatched. */
void dmr_mismatch(FtDmr *d, const FtTape *tp, int i, int key, enum strat s);
void dmr_fingerprint(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e, const FtOpCall *c,
                     uint64_t *fp);
/* The fingerprints of entry i's outputs into slot[0 .. FT_OP_MAX_OUT) of backend memory (0 for
 * an output it does not have), without waiting (the backend's fingerprint_into). */
void dmr_fingerprint_into(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e,
                          const FtOpCall *c, uint64_t *slot);
/* Slots (backend memory) for a compare answered at the agreement: entry i's check (strategy
 * s) against the fingerprints `saved` of entry f, which are copied in now; returns where the
 * check's own fingerprints go. */
uint64_t *dmr_pending_pair(FtDmr *d, const FtTape *tp, int i, int f, const uint64_t *saved,
                           enum strat s);
/* Runs entry i again into scratch (checker flips chk[0..nchk) applied there) and compares. */
void dmr_check_naive(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                     int nchk);

/* dmr_defer.c */
/* Entry i (the plan's slot `slot`) becomes a member of a deferred unit: its own (seg < 0) or
 * its AGC segment's. */
void dmr_defer_add(FtDmr *d, const FtTape *tp, int i, int slot, const FtOpCall *c, int seg,
                   bool covered, const int *chk, int nchk);
void dmr_drain(FtDmr *d);              /* replays every queued unit */
/* Whether output q of micro-batch tape entry i (a parameter gradient) is the only writer of its
 * bytes on the tape (no other entry's output, no marker's message overlaps it): what lets the
 * next micro-batch's deferred check of i take its earlier sum from this one's replay (a chain,
 * dmr.chain). Cached in d per entry and output. */
bool dmr_grad_sole_writer(FtDmr *d, const FtTape *tp, int i, int q);
/* With dmr.chain: the output of micro-batch tape entry i that its input k (a gradient's earlier
 * sum) is the previous execution's value of, its sole writer; else -1. */
int dmr_chain_out(FtDmr *d, const FtTape *tp, int i, int k);
void dmr_unit_free(FtDmr *d, Unit *u); /* frees u and its kept copies */
/* Buffers for kept inputs (the backend's memory; aligned host memory on the CPU), reused: a
 * freed one joins the pool and the next of the same size takes it; kept and pooled bytes
 * together stay within the budget (the pool's oldest are released first). */
void *dmr_keep_alloc(FtDmr *d, size_t bytes, const char *what);
void dmr_keep_free(FtDmr *d, void *p, size_t bytes);
/* ... and memory that is not pooled (the replay scratch; the pool's own release). */
void *dmr_mem_alloc(const FtDmr *d, size_t bytes, const char *what);
void dmr_mem_free(const FtDmr *d, void *p);
void dmr_pool_release(FtDmr *d); /* empties the pool */
void dmr_prof_waits(const FtDmr *d, double *w);
void dmr_prof_note(FtDmr *d, int idx);
void dmr_profile_end(FtDmr *d, double now);
void dmr_profile_settle(FtDmr *d);
/* A lone deferred unit of entry i keeping nb[k] bytes of input k (0: not kept: model state),
 * bytes in all (nb + fingerprints), charged to the budget and, when dyn, to dyn_kept. */
void dmr_defer_keep(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const size_t *nb,
                    size_t bytes, bool dyn, const int *chk, int nchk);

/* dmr_dynamic.c */
bool dmr_dyn_op(const FtTapeEntry *e); /* an op the dynamic planner decides */
void dmr_dyn_prepare(FtDmr *d);        /* dyn_guard from the plan in use */
/* Whether entry e (entry-space index idx) is the dynamic planner's under the plan in use. */
bool dmr_dyn_takes(const FtDmr *d, const FtTapeEntry *e, int idx);
/* What a deferred check of expert entry i (its call c, `rows` of its c->d[0] routed) keeps:
 * nb[k] bytes of input k (the row-indexed inputs, forward x and backward dy and x, up to the
 * routed rows; the others whole; model state none); returns nb's sum plus a fingerprint per
 * output. */
size_t dmr_dyn_bytes(const FtTape *tp, int i, const FtOpCall *c, long long rows,
                     size_t nb[FT_OP_MAX_IN]);
/* Entry i (an expert op) ran: defer its check or run it now (dmr.h). */
void dmr_dyn_check(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                   int nchk);

#endif

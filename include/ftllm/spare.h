/* spare.h: the controller half of SPARe (PAPERS.md section 2): shard stacks, the reaction to a
 * failed replica, and the per-step plan with exactly-once accounting. Pure C, no MPI and no
 * training: every rank runs its own copy, fed the same failures in the same order, and gets the
 * same bytes (every choice is made in index order). Training integration (which gradient buffer
 * each replica reduces, regrid) sits above this and calls it.
 *
 * Stacks. The global batch is cut into N shard types; N replicas; with redundancy r replica i
 * holds shards i, i+1, ..., i+r-1 (mod N), in that stack order, so every stack level holds all N
 * shard types once. A step computes stack levels in order, and the reduction fires as soon as
 * every shard type has been computed by some live replica (on-demand). The depth d is the number
 * of levels every live replica computes in a step: 1 with no failure (r > 1 costs nothing).
 *
 * A failure (spare_fail) runs RECTLR (rectlr.h) on the survivors:
 *   SPARE_MASKED  the survivors still cover every shard within the current depth: with the
 *                 current orders (phase 0), or after a reordering at the same depth (phase 2);
 *   SPARE_DEEPER  masked at a deeper depth (the least that free reordering allows, phase 1),
 *                 with the least-movement reordering (phase 2) when the orders need one;
 *   SPARE_WIPEOUT some shard type has lost every holder: the job must restart from a
 *                 checkpoint (spare_reset gives back the first state).
 * The depth after every failure is the least depth with free reordering (phase 0 succeeding at
 * d means the least is <= d, and it cannot be less than before because the live set only
 * shrinks), i.e. exactly analytic.h's d_k, so the controller's mean failures until wipe-out and
 * mean depth are analytic's mu(N, r) and S(N, r).
 *
 * Plan (spare_plan). At depth d each live replica computes its first d levels in order. For each
 * shard type, one computed copy enters the reduction: the one at the lowest level, and among
 * those the lowest replica index. That copy is "counted"; a replica's contribution to the
 * all-reduce is the sum of its counted shards' gradients, so each shard enters exactly once
 * (count[s] == 1, the proof of invariant 3). The uncounted computations are redundant and may be
 * skipped. The reduction can fire after level max_s owner_level[s], which is d - 1 (d is the
 * least depth at which the current orders cover). */
#ifndef FTLLM_SPARE_H
#define FTLLM_SPARE_H

#include "ftllm/rectlr.h"

enum ft_spare_outcome { SPARE_MASKED = 0, SPARE_DEEPER = 1, SPARE_WIPEOUT = 2 };

/* The controller's state. Read the fields; change them only through the functions below. */
typedef struct ft_spare {
    int N, r;
    int depth;         /* levels each live replica computes; r + 1 after a wipe-out */
    int nlive;         /* live replicas */
    int failures;      /* failures since create/reset, the wiping one included */
    int moved;         /* stack positions changed by reorderings since create/reset */
    FtStacks st;       /* N replicas x r levels (st.order), st.alive */
    int *holders;      /* [N] live replicas holding each shard type */
} FtSpare;

/* What one failure did. */
typedef struct ft_spare_event {
    int outcome;       /* enum ft_spare_outcome */
    int depth_before;  /* depth before the failure */
    int depth;         /* depth after (r + 1 on a wipe-out) */
    int phase;         /* the last RECTLR phase that ran (0, 1 or 2; see rectlr.h); 1 on a
                          wipe-out (phase 1's verdict, read from the holder counts) */
    int moved;         /* stack positions the reordering changed */
} FtSpareEvent;

/* N >= 1 replicas and shard types, 1 <= r <= N. NULL when out of range or out of memory. */
FtSpare *spare_create(int N, int r);
void spare_destroy(FtSpare *sp);
/* Every replica alive again, the original (cyclic) orders, depth 1: after a global restart. */
void spare_reset(FtSpare *sp);

/* Replica i has failed: updates the live set, runs RECTLR, and writes what happened into ev (may
 * be NULL). Returns the outcome (enum ft_spare_outcome), or -1 when i is out of range or already
 * failed, after a wipe-out (reset first), or out of memory; the state is unchanged then. */
int spare_fail(FtSpare *sp, int i, FtSpareEvent *ev);

/* Replica i's stack order (r shard types, level 0 first). */
static inline const int *spare_order(const FtSpare *sp, int i)
{
    return sp->st.order + (size_t)i * sp->r;
}
static inline int spare_alive(const FtSpare *sp, int i) { return sp->st.alive[i]; }

/* One step's plan, for a depth up to r. Arrays are sized at init for depth r. */
typedef struct ft_spare_plan {
    int N, r, depth;
    int *shard;               /* [N * depth] replica i computes shard[i*depth + l] at level l
                                 (its stack's first depth levels); -1 for a failed replica */
    unsigned char *counted;   /* [N * depth] 1 when that computation enters the reduction */
    int *owner;               /* [N] shard type -> the replica whose gradient of it is counted */
    int *owner_level;         /* [N] the level at which the owner computes it */
    int *count;               /* [N] counted computations per shard type: 1 (exactly once) */
} FtSparePlan;

int spare_plan_init(FtSparePlan *p, int N, int r); /* 0, or -1 (out of memory / range) */
void spare_plan_free(FtSparePlan *p);
/* Fills p for the current state (p from spare_plan_init with the same N and r). Returns 0, or
 * -1 after a wipe-out (no plan covers every shard) or on a size mismatch. */
int spare_plan(const FtSpare *sp, FtSparePlan *p);

#endif

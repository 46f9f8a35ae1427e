/* rectlr.h: SPARe's reordering controller (RECTLR, PAPERS.md section 2) on a general set of
 * shard stacks, and the two graph algorithms under it: Hopcroft-Karp maximum bipartite matching
 * and min-cost max-flow. Pure C, no MPI, no allocation kept between calls: the same inputs give
 * the same outputs on every rank (every choice is made in index order), so each rank can run
 * the controller itself and agree with the others without talking to them.
 *
 * Stacks. M replicas and N shard types; replica i holds r distinct shard types in stack order,
 * order[i*r + l] at level l = 0..r-1. At depth d every live replica computes its levels
 * 0..d-1, so the first d levels of the live replicas must cover every shard type. A replica can
 * reorder its own stack (any permutation of the r shards whose data it holds); it can never take
 * a shard it does not hold.
 *
 * Movement. The cost of going from one order to another is the number of (live replica, level)
 * positions whose shard changes: the Hamming distance of the two stacks, summed over the live
 * replicas. A reordering whose new first-d set is C_i (old: O_i) changes at least
 * 2 |C_i \ O_i| positions (every shard that enters the first d levels displaces one that leaves,
 * and both positions change), and swapping each incoming shard with an outgoing one reaches
 * exactly that. So the least movement at depth d is 2 x (the least number of (shard, replica)
 * assignments outside the replicas' current first d levels), which is a min-cost flow with
 * 0/1 costs (rectlr_reorder).
 *
 * Phases (rectlr_run):
 *   0 (HK-FIXED) do the current orders cover every shard within depth d? A maximum matching of
 *     shards to the (live replica, level < d) slots that hold them, size N or not.
 *   1 (HK-FREE)  the least depth d' such that, with free reordering, the live replicas cover
 *     every shard within d' levels: shards matched to slots (i, l < d') of any replica i that
 *     holds them (each replica then computes at most d' of its shards). r + 1 when no depth
 *     works: some shard type has no live holder (a wipe-out).
 *   2 (MCMF)     among the orders that cover within d', the one with the least movement. */
#ifndef FTLLM_RECTLR_H
#define FTLLM_RECTLR_H

#include <stdint.h>

/* ---- Hopcroft-Karp ---------------------------------------------------------------------- */

/* Maximum matching of a bipartite graph: left vertices 0..nl-1, right 0..nr-1, the neighbours
 * of left u in adj[off[u] .. off[u+1]-1] (CSR, off has nl + 1 entries; repeated edges are
 * harmless). Writes mate_l[u] (its right vertex or -1) and mate_r[v] (its left vertex or -1).
 * Returns the size of the matching, or -1 when out of memory. Deterministic: vertices and
 * edges are visited in index order. O(E sqrt(V)). */
int hk_match(int nl, int nr, const int *off, const int *adj, int *mate_l, int *mate_r);

/* ---- min-cost max-flow ---------------------------------------------------------------------- */

/* A flow network built edge by edge. Edge e is arc 2e; its reverse is arc 2e + 1, whose
 * residual capacity is the flow on e. */
typedef struct ft_flow {
    int n;             /* nodes 0..n-1 */
    int m, max_m;      /* edges added, room for */
    int *head;         /* [n] first arc out of each node, or -1 */
    int *next, *to;    /* [2 max_m] arc list */
    int64_t *cap;      /* [2 max_m] residual capacity */
    int64_t *cost;     /* [2 max_m] cost per unit (the reverse arc has the negated cost) */
} FtFlow;

int flow_init(FtFlow *f, int n, int max_edges); /* 0, or -1 (out of memory / range) */
void flow_free(FtFlow *f);
/* Adds u -> v with capacity cap >= 0 and an integer cost per unit; returns the edge id e, or
 * -1 when full or out of range. */
int flow_add_edge(FtFlow *f, int u, int v, int64_t cap, int64_t cost);
/* Units on edge e. */
int64_t flow_on(const FtFlow *f, int e);
/* Puts units on edge e before flow_mincost (a warm start). The preset flow must conserve flow at
 * every node but s and t, and be a min-cost flow of its value: any flow on zero-cost edges is,
 * when no cost is negative. Returns 0, or -1 (out of range, or over the capacity left). */
int flow_preset(FtFlow *f, int e, int64_t units);
/* Sends as much flow as possible from s to t (in all at most limit units; limit < 0: no limit)
 * at the least total cost, by successive shortest paths with potentials (Bellman-Ford once when
 * some residual arc has a negative cost, then Dijkstra on reduced costs), continuing from the
 * preset flow if any. Costs may be negative only if the residual network has no negative cycle.
 * Writes the flow value and its cost (preset included); returns 0, or -1 (out of memory, or a
 * negative cycle). Every intermediate flow is a min-cost flow of its value, so a limit gives the
 * cheapest flow of that value. Deterministic. Call once per network. */
int flow_mincost(FtFlow *f, int s, int t, int64_t limit, int64_t *flow, int64_t *cost);

/* ---- RECTLR ------------------------------------------------------------------------------ */

typedef struct ft_stacks {
    int N, M, r;          /* shard types, replicas, stack height (r <= N) */
    int *order;           /* [M * r] replica i's shard at level l: order[i*r + l] */
    unsigned char *alive; /* [M] 1 = live */
} FtStacks;

/* Phase 0: 1 when the first d levels of the live replicas cover every shard type, 0 when not,
 * -1 out of memory. slot (may be NULL, [N]) gets, per shard, the matched slot i*r + l (-1 when
 * uncovered): the lowest level holding the shard, then the lowest replica. */
int rectlr_fixed(const FtStacks *st, int d, int *slot);

/* Phase 1 at one depth: 1 when some reordering covers every shard within d levels, 0 when
 * none does, -1 out of memory. */
int rectlr_free_ok(const FtStacks *st, int d);

/* Phase 1: the least such depth in 1..r, or r + 1 when some shard has no live holder; -1 out
 * of memory. */
int rectlr_free_depth(const FtStacks *st);

/* Phase 2: reorders the live replicas' stacks in place so that they cover every shard within d
 * levels with the least movement (defined above); dead replicas' stacks are left alone. Each
 * incoming shard swaps with an outgoing one (lowest positions first), every other shard keeps its
 * position. Returns the movement (an even number of changed positions), or -1 when no
 * reordering covers within d, or out of memory. */
int rectlr_reorder(FtStacks *st, int d);

/* What rectlr_run did. */
typedef struct ft_rectlr_result {
    int phase;   /* the last phase that ran: 0 (current orders cover at d), 1 (they cover at the
                    new depth, or wipe-out), 2 (reordered) */
    int depth;   /* the depth to run at; r + 1 on a wipe-out */
    int moved;   /* positions changed by phase 2 */
} FtRectlrResult;

/* The controller after a change of the live set, at current depth d: phase 0 at d; if that
 * fails, phase 1 (the least depth with free reordering) and, unless the current orders already
 * cover at that depth (least movement: none), phase 2. Returns 0, or -1 (out of memory). */
int rectlr_run(FtStacks *st, int d, FtRectlrResult *out);

#endif

/* test_spare.c: SPARe's controller (spare.h) and RECTLR with its graph algorithms (rectlr.h):
 * Hopcroft-Karp, min-cost max-flow and the three phases against brute force on thousands of small
 * random instances; the controller along random failure sequences (depth = analytic's depth
 * oracle, every plan counts each shard exactly once, reorderings of least movement, the same
 * inputs give the same bytes); and the Monte Carlo mean failures until wipe-out and mean depth
 * against analytic's exact mu(N, r) and S(N, r). Fixed seeds throughout.
 * ft-test: ranks 1 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/analytic.h"
#include "ftllm/rectlr.h"
#include "ftllm/sim.h"
#include "ftllm/spare.h"

static int rnd(FtRng *g, int lo, int hi) { return lo + (int)rng_below(g, (uint64_t)(hi - lo + 1)); }

/* ---- Hopcroft-Karp ---------------------------------------------------------------------- */

/* Largest matching of left vertices u.. given the right vertices used (memoized, nr <= 8). */
static int match_brute(int u, int nl, const int *off, const int *adj, unsigned used,
                       int (*memo)[256])
{
    if (u == nl) return 0;
    if (memo[u][used] >= 0) return memo[u][used];
    int best = match_brute(u + 1, nl, off, adj, used, memo);
    for (int e = off[u]; e < off[u + 1]; e++)
        if (!(used >> adj[e] & 1)) {
            int m = 1 + match_brute(u + 1, nl, off, adj, used | 1u << adj[e], memo);
            if (m > best) best = m;
        }
    return memo[u][used] = best;
}

/* Kuhn's augmenting paths, an independent O(V E) matcher for the larger graphs. */
static int kuhn_try(int u, const int *off, const int *adj, int *mr, unsigned char *seen)
{
    for (int e = off[u]; e < off[u + 1]; e++) {
        int v = adj[e];
        if (seen[v]) continue;
        seen[v] = 1;
        if (mr[v] < 0 || kuhn_try(mr[v], off, adj, mr, seen)) {
            mr[v] = u;
            return 1;
        }
    }
    return 0;
}

static int kuhn(int nl, int nr, const int *off, const int *adj)
{
    int *mr = malloc((size_t)nr * sizeof *mr + 1), size = 0;
    unsigned char *seen = malloc((size_t)nr + 1);
    for (int v = 0; v < nr; v++) mr[v] = -1;
    for (int u = 0; u < nl; u++) {
        memset(seen, 0, (size_t)nr);
        size += kuhn_try(u, off, adj, mr, seen);
    }
    free(mr), free(seen);
    return size;
}

/* A random bipartite graph (edges in random order, some repeated); returns the edge count. */
static int random_bigraph(FtRng *g, int nl, int nr, int pct, int *off, int *adj)
{
    int m = 0;
    off[0] = 0;
    for (int u = 0; u < nl; u++) {
        for (int v = 0; v < nr; v++)
            if (rnd(g, 1, 100) <= pct) {
                adj[m++] = v;
                if (rnd(g, 1, 20) == 1) adj[m++] = v;
            }
        for (int a = off[u]; a < m; a++) { /* shuffle u's list */
            int b = rnd(g, a, m - 1), t = adj[a];
            adj[a] = adj[b], adj[b] = t;
        }
        off[u + 1] = m;
    }
    return m;
}

/* mate_l / mate_r form a matching of the graph's edges with `size` pairs. */
static void check_matching(int nl, int nr, const int *off, const int *adj, const int *ml,
                           const int *mr, int size)
{
    int pairs = 0;
    for (int u = 0; u < nl; u++) {
        if (ml[u] < 0) continue;
        int found = 0;
        for (int e = off[u]; e < off[u + 1]; e++) found |= adj[e] == ml[u];
        assert_true(found);
        assert_int_equal(mr[ml[u]], u);
        pairs++;
    }
    for (int v = 0; v < nr; v++)
        if (mr[v] >= 0) assert_int_equal(ml[mr[v]], v);
    assert_int_equal(pairs, size);
}

static void test_hk_vs_brute(void **state)
{
    (void)state;
    FtRng g;
    rng_seed(&g, 11, 0);
    int off[64], adj[4096], ml[64], mr[64], memo[9][256];
    for (int it = 0; it < 5000; it++) {
        int nl = rnd(&g, 0, 8), nr = rnd(&g, 0, 8);
        random_bigraph(&g, nl, nr, rnd(&g, 5, 70), off, adj);
        memset(memo, -1, sizeof memo);
        int size = hk_match(nl, nr, off, adj, ml, mr);
        assert_int_equal(size, match_brute(0, nl, off, adj, 0, memo));
        check_matching(nl, nr, off, adj, ml, mr, size);
    }
    for (int it = 0; it < 300; it++) { /* larger: against Kuhn's algorithm */
        int nl = rnd(&g, 10, 60), nr = rnd(&g, 10, 60);
        random_bigraph(&g, nl, nr, rnd(&g, 2, 12), off, adj);
        int size = hk_match(nl, nr, off, adj, ml, mr);
        assert_int_equal(size, kuhn(nl, nr, off, adj));
        check_matching(nl, nr, off, adj, ml, mr, size);
    }
}

/* ---- min-cost max-flow ---------------------------------------------------------------------- */

#define NET_MAX_E 8
typedef struct net {
    int n, m, u[NET_MAX_E], v[NET_MAX_E], cap[NET_MAX_E], cost[NET_MAX_E];
} Net;

/* Every integer flow on the edges; best[F] = the least cost of a flow of value F from 0 to n-1
 * (LLONG_MAX when none). Returns the largest feasible value. */
static int mcmf_brute(const Net *g, long long *best)
{
    int x[NET_MAX_E] = {0}, maxv = 0;
    for (int F = 0; F <= 64; F++) best[F] = LLONG_MAX;
    for (;;) {
        int bal[8] = {0}, ok = 1;
        long long c = 0;
        for (int e = 0; e < g->m; e++) {
            bal[g->u[e]] += x[e], bal[g->v[e]] -= x[e];
            c += (long long)x[e] * g->cost[e];
        }
        for (int w = 1; w < g->n - 1; w++) ok &= bal[w] == 0;
        if (ok && bal[0] >= 0) {
            if (c < best[bal[0]]) best[bal[0]] = c;
            if (bal[0] > maxv) maxv = bal[0];
        }
        int e = 0;
        while (e < g->m && x[e] == g->cap[e]) x[e++] = 0;
        if (e == g->m) break;
        x[e]++;
    }
    return maxv;
}

/* A simple path of zero-cost edges with capacity from 0 to n-1 (DFS); its edges into path[],
 * returns their count, or 0 when there is none. */
static int zero_path(const Net *g, int u, unsigned seen, int *path, int len)
{
    if (u == g->n - 1) return len;
    for (int e = 0; e < g->m; e++)
        if (g->u[e] == u && g->cost[e] == 0 && g->cap[e] > 0 && !(seen >> g->v[e] & 1)) {
            path[len] = e;
            int k = zero_path(g, g->v[e], seen | 1u << g->v[e], path, len + 1);
            if (k) return k;
        }
    return 0;
}

/* Builds g, runs flow_mincost with the limit (warm = 1: from one unit preset along a zero-cost
 * path, when the costs are non-negative and there is one), checks the edge flows; returns the
 * value and cost. */
static void mcmf_run(const Net *g, int64_t limit, int warm, int64_t *value, int64_t *cost)
{
    FtFlow f;
    assert_int_equal(flow_init(&f, g->n, g->m), 0);
    for (int e = 0; e < g->m; e++)
        assert_int_equal(flow_add_edge(&f, g->u[e], g->v[e], g->cap[e], g->cost[e]), e);
    assert_int_equal(flow_add_edge(&f, 0, 1, 1, 0), -1); /* full */
    int path[NET_MAX_E], len = warm ? zero_path(g, 0, 1u, path, 0) : 0;
    for (int k = 0; k < len; k++) assert_int_equal(flow_preset(&f, path[k], 1), 0);
    assert_int_equal(flow_mincost(&f, 0, g->n - 1, limit, value, cost), 0);
    int64_t bal[8] = {0}, c = 0;
    for (int e = 0; e < g->m; e++) {
        int64_t x = flow_on(&f, e);
        assert_true(x >= 0 && x <= g->cap[e]);
        bal[g->u[e]] += x, bal[g->v[e]] -= x;
        c += x * g->cost[e];
    }
    for (int w = 1; w < g->n - 1; w++) assert_true(bal[w] == 0);
    assert_true(bal[0] == *value && c == *cost);
    flow_free(&f);
}

static void test_mcmf_vs_brute(void **state)
{
    (void)state;
    FtRng g;
    rng_seed(&g, 12, 0);
    long long best[65];
    int warm = 0;
    for (int it = 0; it < 4000; it++) {
        Net net;
        int dag = it % 2; /* DAGs may carry negative costs; general graphs (cycles) do not */
        net.n = rnd(&g, 2, 6), net.m = rnd(&g, 1, NET_MAX_E);
        for (int e = 0; e < net.m; e++) {
            int a = rnd(&g, 0, net.n - 1), b = rnd(&g, 0, net.n - 2);
            if (b >= a) b++;
            if (dag && a > b) {
                int t = a;
                a = b, b = t;
            }
            net.u[e] = a, net.v[e] = b;
            net.cap[e] = rnd(&g, 0, 2);
            net.cost[e] = dag ? rnd(&g, -3, 6) : rnd(&g, 0, 1) * rnd(&g, 0, 6); /* half zero */
        }
        int maxv = mcmf_brute(&net, best);
        int64_t value, cost;
        mcmf_run(&net, -1, 0, &value, &cost);
        assert_int_equal(value, maxv);
        assert_true(cost == best[maxv]);
        int F = rnd(&g, 0, maxv); /* a limit: the cheapest flow of exactly that value */
        mcmf_run(&net, F, 0, &value, &cost);
        assert_int_equal(value, F);
        assert_true(cost == best[F]);
        if (!dag) { /* warm start from a zero-cost unit, when there is one */
            mcmf_run(&net, -1, 1, &value, &cost);
            assert_int_equal(value, maxv);
            assert_true(cost == best[maxv]);
            warm += zero_path(&net, 0, 1u, (int[NET_MAX_E]){0}, 0) > 0;
        }
    }
    printf("min-cost flow vs brute force: 4000 networks, %d also from a warm start\n", warm);
    assert_true(warm > 400);
    /* a negative cycle reachable from the source is refused */
    FtFlow f;
    int64_t value, cost;
    assert_int_equal(flow_init(&f, 4, 4), 0);
    flow_add_edge(&f, 0, 1, 1, 0), flow_add_edge(&f, 1, 2, 1, -2);
    flow_add_edge(&f, 2, 1, 1, 1), flow_add_edge(&f, 2, 3, 1, 0);
    assert_int_equal(flow_mincost(&f, 0, 3, -1, &value, &cost), -1);
    flow_free(&f);
    /* a preset zero-cost cycle through the source carries no value out of it: the flow value
     * is what leaves the source net, and the search still sends the rest */
    assert_int_equal(flow_init(&f, 3, 3), 0);
    int out = flow_add_edge(&f, 0, 1, 1, 0), back = flow_add_edge(&f, 1, 0, 1, 0);
    flow_add_edge(&f, 0, 2, 2, 1);
    assert_int_equal(flow_preset(&f, out, 1), 0), assert_int_equal(flow_preset(&f, back, 1), 0);
    assert_int_equal(flow_mincost(&f, 0, 2, -1, &value, &cost), 0);
    assert_true(value == 2 && cost == 2);
    flow_free(&f);
}

/* No cycle of negative cost among the residual arcs (capacity left): a flow is a min-cost flow
 * of its value exactly then. Bellman-Ford from every node at once (all distances 0). */
static int residual_no_negative_cycle(const FtFlow *f)
{
    long long dist[512];
    for (int v = 0; v < f->n; v++) dist[v] = 0;
    for (int round = 0; round <= f->n; round++) {
        int changed = 0;
        for (int a = 0; a < 2 * f->m; a++) {
            int u = f->to[a ^ 1], v = f->to[a];
            if (f->cap[a] > 0 && dist[u] + f->cost[a] < dist[v])
                dist[v] = dist[u] + f->cost[a], changed = 1;
        }
        if (!changed) return 1;
    }
    return 0;
}

/* Assignment networks of a hundred-odd shards, from a cold start (a shortest-path search per
 * unit of flow): the value is the maximum matching's (Kuhn), and the flow is of least cost (no
 * negative residual cycle). */
static void test_mcmf_large_assignment(void **state)
{
    (void)state;
    FtRng g;
    rng_seed(&g, 14, 0);
    static int off[201], adj[20000];
    for (int it = 0; it < 20; it++) {
        int nl = rnd(&g, 90, 200), nr = rnd(&g, 90, 200);
        int m = random_bigraph(&g, nl, nr, 6, off, adj);
        FtFlow f;
        int s = 0, t = 1 + nl + nr;
        assert_int_equal(flow_init(&f, nl + nr + 2, nl + nr + m), 0);
        for (int u = 0; u < nl; u++) flow_add_edge(&f, s, 1 + u, 1, 0);
        for (int u = 0; u < nl; u++)
            for (int e = off[u]; e < off[u + 1]; e++)
                flow_add_edge(&f, 1 + u, 1 + nl + adj[e], 1, rnd(&g, 0, 9));
        for (int v = 0; v < nr; v++) flow_add_edge(&f, 1 + nl + v, t, 1, 0);
        int64_t value, cost, c = 0;
        assert_int_equal(flow_mincost(&f, s, t, -1, &value, &cost), 0);
        assert_int_equal(value, kuhn(nl, nr, off, adj));
        for (int e = 0; e < f.m; e++) c += flow_on(&f, e) * f.cost[2 * e];
        assert_true(c == cost);
        assert_true(residual_no_negative_cycle(&f));
        flow_free(&f);
    }
}

/* ---- RECTLR against every reordering ------------------------------------------------------ */

#define ST_MAX_M 6
#define ST_MAX_R 4
typedef struct inst {
    int order[ST_MAX_M * ST_MAX_R];
    unsigned char alive[ST_MAX_M];
    FtStacks st;
} Inst;

/* The depth at which the given orders cover every shard: max over shards of the lowest live
 * level + 1; r + 1 when a shard has no live holder. */
static int cover_depth(const FtStacks *st)
{
    int lv[64];
    for (int s = 0; s < st->N; s++) lv[s] = st->r + 1;
    for (int i = 0; i < st->M; i++)
        if (st->alive[i])
            for (int l = 0; l < st->r; l++) {
                int s = st->order[i * st->r + l];
                if (l + 1 < lv[s]) lv[s] = l + 1;
            }
    int d = 1;
    for (int s = 0; s < st->N; s++)
        if (lv[s] > d) d = lv[s];
    return st->N == 0 ? 1 : d;
}

static int hamming(const FtStacks *a, const int *old_order)
{
    int h = 0;
    for (int i = 0; i < a->M; i++)
        for (int l = 0; l < a->r; l++) h += a->order[i * a->r + l] != old_order[i * a->r + l];
    return h;
}

/* Brute force over every permutation of every live stack: least covering depth (r + 1 when
 * none) and, per depth d, the least movement (INT_MAX when none). */
typedef struct brute {
    int perms[24][ST_MAX_R], nperm; /* all permutations of 0..r-1 */
    int live[ST_MAX_M], nlive;
    int best_depth, best_move[ST_MAX_R + 2];
} Brute;

static void brute_perms(Brute *b, int r)
{
    int p[ST_MAX_R];
    for (int l = 0; l < r; l++) p[l] = l;
    b->nperm = 0;
    for (;;) { /* lexicographic order */
        memcpy(b->perms[b->nperm++], p, sizeof p);
        int k = r - 2;
        while (k >= 0 && p[k] > p[k + 1]) k--;
        if (k < 0) break;
        int j = r - 1;
        while (p[j] < p[k]) j--;
        int t = p[k];
        p[k] = p[j], p[j] = t;
        for (int a = k + 1, c = r - 1; a < c; a++, c--) t = p[a], p[a] = p[c], p[c] = t;
    }
}

static void brute_walk(Brute *b, const FtStacks *st, int k, const int *lv, int moved)
{
    int N = st->N, r = st->r;
    if (k == b->nlive) {
        int d = 1;
        for (int s = 0; s < N; s++) d = lv[s] > d ? lv[s] : d;
        if (d < b->best_depth) b->best_depth = d;
        for (int dd = d; dd <= r; dd++)
            if (moved < b->best_move[dd]) b->best_move[dd] = moved;
        return;
    }
    int i = b->live[k], nlv[64];
    for (int p = 0; p < b->nperm; p++) {
        memcpy(nlv, lv, (size_t)N * sizeof *nlv);
        int mv = 0;
        for (int l = 0; l < r; l++) {
            int s = st->order[i * r + b->perms[p][l]];
            mv += b->perms[p][l] != l;
            if (l + 1 < nlv[s]) nlv[s] = l + 1;
        }
        brute_walk(b, st, k + 1, nlv, moved + mv);
    }
}

static void brute_stacks(Brute *b, const FtStacks *st)
{
    brute_perms(b, st->r);
    b->nlive = 0;
    for (int i = 0; i < st->M; i++)
        if (st->alive[i]) b->live[b->nlive++] = i;
    b->best_depth = st->r + 1;
    for (int d = 0; d <= st->r + 1; d++) b->best_move[d] = INT_MAX;
    int lv[64];
    for (int s = 0; s < st->N; s++) lv[s] = st->r + 1;
    brute_walk(b, st, 0, lv, 0);
}

/* A random instance: each replica holds r distinct shards in random order; live replicas are
 * capped so that the brute force stays small ((r!)^live <= max_combos). */
static void random_inst(FtRng *g, Inst *in, long max_combos)
{
    int N = rnd(g, 1, 7), M = rnd(g, 1, ST_MAX_M), r = rnd(g, 1, N < ST_MAX_R ? N : ST_MAX_R);
    long fact = 1, combos = 1;
    for (int k = 2; k <= r; k++) fact *= k;
    for (int i = 0; i < M; i++) {
        int pool[8];
        for (int s = 0; s < N; s++) pool[s] = s;
        for (int l = 0; l < r; l++) {
            int j = rnd(g, l, N - 1), t = pool[l];
            pool[l] = pool[j], pool[j] = t;
            in->order[i * r + l] = pool[l];
        }
        in->alive[i] = rnd(g, 1, 4) > 1 && combos * fact <= max_combos;
        if (in->alive[i]) combos *= fact;
    }
    in->st = (FtStacks){.N = N, .M = M, .r = r, .order = in->order, .alive = in->alive};
}

/* Most instances keep every shard on some live replica (the interesting ones); some do not. */
static void random_inst_mostly_covered(FtRng *g, Inst *in, long max_combos)
{
    for (;;) {
        random_inst(g, in, max_combos);
        if (cover_depth(&in->st) <= in->st.r || rnd(g, 1, 5) == 1) return;
    }
}

/* Phase 0's slot per shard: lowest level, then lowest replica; -1 when not in the first d. */
static int expected_slot(const FtStacks *st, int d, int s)
{
    for (int l = 0; l < d && l < st->r; l++)
        for (int i = 0; i < st->M; i++)
            if (st->alive[i] && st->order[i * st->r + l] == s) return i * st->r + l;
    return -1;
}

/* st2 is a reordering of st (same shards per replica, dead replicas untouched). */
static void check_reordering(const FtStacks *st2, const int *old_order)
{
    int r = st2->r;
    for (int i = 0; i < st2->M; i++) {
        unsigned a = 0, b = 0;
        for (int l = 0; l < r; l++)
            a |= 1u << old_order[i * r + l], b |= 1u << st2->order[i * r + l];
        assert_int_equal(a, b);
        if (!st2->alive[i])
            for (int l = 0; l < r; l++)
                assert_int_equal(st2->order[i * r + l], old_order[i * r + l]);
    }
}

static void check_phases(const Inst *in0, FtRng *g)
{
    const FtStacks *st = &in0->st;
    int r = st->r, slot[8];
    Brute b;
    brute_stacks(&b, st);
    int dcur = cover_depth(st);
    assert_int_equal(rectlr_free_depth(st), b.best_depth);
    for (int d = 1; d <= r; d++) {
        assert_int_equal(rectlr_fixed(st, d, slot), dcur <= d);
        for (int s = 0; s < st->N; s++)
            if (dcur <= d) assert_int_equal(slot[s], expected_slot(st, d, s));
        assert_int_equal(rectlr_free_ok(st, d), b.best_depth <= d);
        Inst in = *in0;
        in.st.order = in.order, in.st.alive = in.alive;
        int moved = rectlr_reorder(&in.st, d);
        if (b.best_depth > d) {
            assert_int_equal(moved, -1);
            assert_memory_equal(in.order, in0->order, sizeof in.order);
            continue;
        }
        assert_int_equal(moved, b.best_move[d]); /* least movement */
        check_reordering(&in.st, in0->order);
        assert_int_equal(hamming(&in.st, in0->order), moved);
        assert_true(cover_depth(&in.st) <= d);
    }
    /* the whole controller from a random current depth */
    int d0 = rnd(g, 1, r);
    Inst in = *in0;
    in.st.order = in.order, in.st.alive = in.alive;
    FtRectlrResult res;
    assert_int_equal(rectlr_run(&in.st, d0, &res), 0);
    if (dcur <= d0) {
        assert_int_equal(res.phase, 0), assert_int_equal(res.depth, d0);
        assert_int_equal(res.moved, 0);
    } else {
        assert_int_equal(res.depth, b.best_depth);
        if (b.best_depth <= r) {
            assert_int_equal(res.moved, b.best_move[b.best_depth]);
            assert_int_equal(res.phase, res.moved > 0 ? 2 : 1);
            assert_true(cover_depth(&in.st) <= res.depth);
        } else {
            assert_int_equal(res.phase, 1);
        }
    }
    /* a current depth outside 1..r (0, or r + 1 after a wipe-out) is never kept: the controller
     * finds the least depth as from a failed phase 0 (random mutant R16 of seed 8 kept it) */
    for (int k = 0; k < 2; k++) {
        Inst out = *in0;
        out.st.order = out.order, out.st.alive = out.alive;
        assert_int_equal(rectlr_run(&out.st, k ? r + 1 : 0, &res), 0);
        assert_int_equal(res.depth, b.best_depth);
        assert_true(res.phase >= 1);
        if (b.best_depth <= r) assert_true(cover_depth(&out.st) <= res.depth);
    }
}

static void test_rectlr_vs_brute(void **state)
{
    (void)state;
    FtRng g;
    rng_seed(&g, 13, 0);
    int reordered = 0, wiped = 0;
    for (int it = 0; it < 4000; it++) {
        Inst in;
        random_inst_mostly_covered(&g, &in, 3000);
        Brute b;
        brute_stacks(&b, &in.st);
        reordered += b.best_depth <= in.st.r && b.best_move[b.best_depth] > 0;
        wiped += b.best_depth > in.st.r;
        check_phases(&in, &g);
    }
    printf("RECTLR vs brute force: 4000 instances, %d need a reordering at their least depth, %d "
           "wiped out\n", reordered, wiped);
    assert_true(reordered > 400 && wiped > 100);
}

/* ---- the controller ---------------------------------------------------------------------- */

/* Every invariant of a plan: it lists each live replica's first d levels, counts each shard
 * type exactly once (recounted here from the flags), at the lowest level and then the lowest
 * replica, and the reduction fires after level d - 1. */
static void check_plan(const FtSpare *sp, const FtSparePlan *p)
{
    int N = sp->N, r = sp->r, d = sp->depth, cnt[64] = {0}, last = 0;
    assert_int_equal(p->depth, d);
    for (int i = 0; i < N; i++)
        for (int l = 0; l < d; l++) {
            int k = i * d + l;
            if (!spare_alive(sp, i)) {
                assert_int_equal(p->shard[k], -1);
                assert_int_equal(p->counted[k], 0);
                continue;
            }
            assert_int_equal(p->shard[k], spare_order(sp, i)[l]);
            if (p->counted[k]) {
                int s = p->shard[k];
                cnt[s]++;
                assert_int_equal(p->owner[s], i), assert_int_equal(p->owner_level[s], l);
            }
        }
    for (int s = 0; s < N; s++) {
        assert_int_equal(cnt[s], 1);
        assert_int_equal(p->count[s], 1);
        int o = p->owner[s], ol = p->owner_level[s];
        assert_true(spare_alive(sp, o) && spare_order(sp, o)[ol] == s);
        for (int i = 0; i < N; i++) /* nobody live holds s lower, nobody before o at that level */
            for (int l = 0; l < ol || (l == ol && i < o); l++)
                if (spare_alive(sp, i) && l < r) assert_true(spare_order(sp, i)[l] != s);
        last = ol > last ? ol : last;
    }
    assert_int_equal(last, d - 1);
}

/* Replica i still holds exactly shards i..i+r-1 (mod N). */
static void check_holdings(const FtSpare *sp)
{
    for (int i = 0; i < sp->N; i++) {
        int seen[64] = {0};
        for (int l = 0; l < sp->r; l++) seen[spare_order(sp, i)[l]]++;
        for (int l = 0; l < sp->r; l++) assert_int_equal(seen[(i + l) % sp->N], 1);
    }
}

static void shuffle(FtRng *g, int *perm, int N)
{
    for (int i = 0; i < N; i++) perm[i] = i;
    for (int i = 0; i < N - 1; i++) {
        int j = rnd(g, i, N - 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

/* Along random failure orders: the depth is analytic's (the least depth with free reordering),
 * the outcome says how it moved, every plan is valid. */
static void test_spare_sequences(void **state)
{
    (void)state;
    const int Ns[] = {4, 5, 7, 12, 31, 64};
    int events[3] = {0}, phase2 = 0;
    FtRng g;
    for (int a = 0; a < 6; a++)
        for (int r = 1; r <= 5 && r <= Ns[a]; r++) {
            int N = Ns[a], perm[64];
            FtSpare *sp = spare_create(N, r);
            FtSparePlan plan;
            assert_non_null(sp);
            assert_int_equal(spare_plan_init(&plan, N, r), 0);
            for (int trial = 0; trial < 40; trial++) {
                rng_seed(&g, 21, (uint64_t)(1000 * N + 100 * r + trial));
                shuffle(&g, perm, N);
                spare_reset(sp); /* after the previous trial's wipe-out: a fresh start */
                assert_int_equal(sp->failures, 0), assert_int_equal(sp->nlive, N);
                assert_int_equal(sp->depth, 1), assert_int_equal(sp->moved, 0);
                assert_int_equal(spare_plan(sp, &plan), 0);
                check_plan(sp, &plan);
                for (int k = 0; k < N; k++) {
                    FtSpareEvent ev;
                    int before = sp->depth, out = spare_fail(sp, perm[k], &ev);
                    assert_int_equal(out, ev.outcome);
                    assert_int_equal(sp->failures, k + 1), assert_int_equal(sp->nlive, N - k - 1);
                    assert_int_equal(ev.depth_before, before);
                    assert_int_equal(ev.depth, sp->depth);
                    unsigned char dead[64];
                    for (int i = 0; i < N; i++) dead[i] = !spare_alive(sp, i);
                    assert_int_equal(sp->depth, analytic_depth(dead, N, r));
                    events[out]++;
                    phase2 += ev.phase == 2;
                    check_holdings(sp);
                    if (out == SPARE_WIPEOUT) {
                        assert_int_equal(sp->depth, r + 1);
                        assert_int_equal(spare_plan(sp, &plan), -1);
                        assert_int_equal(spare_fail(sp, perm[(k + 1) % N], NULL), -1);
                        break;
                    }
                    assert_int_equal(out, sp->depth > before ? SPARE_DEEPER : SPARE_MASKED);
                    assert_true(ev.phase == 2 || ev.moved == 0);
                    assert_int_equal(spare_plan(sp, &plan), 0);
                    check_plan(sp, &plan);
                }
            }
            spare_plan_free(&plan);
            spare_destroy(sp);
        }
    printf("failure sequences: %d masked, %d deeper, %d wipe-outs, %d reorderings\n", events[0],
           events[1], events[2], phase2);
    assert_true(events[0] > 0 && events[1] > 0 && events[2] > 0 && phase2 > 0);
}

/* Every reordering the controller makes along random failure orders is one of least movement:
 * against every permutation of the surviving stacks (the orders before the failure, the live set
 * after it), at the depth the controller chose, which is also the least possible. */
static void test_spare_reorder_minimal(void **state)
{
    (void)state;
    int checked = 0, nonzero = 0;
    for (int N = 4; N <= 6; N++)
        for (int r = 2; r <= 3; r++) {
            FtSpare *sp = spare_create(N, r);
            assert_non_null(sp);
            for (int trial = 0; trial < 150; trial++) {
                FtRng g;
                int perm[8], before[8 * 3];
                rng_seed(&g, 41, (uint64_t)(100 * N + 10 * r + trial) * 7);
                shuffle(&g, perm, N);
                spare_reset(sp);
                for (int k = 0; k < N; k++) {
                    FtSpareEvent ev;
                    memcpy(before, sp->st.order, (size_t)N * r * sizeof *before);
                    if (spare_fail(sp, perm[k], &ev) == SPARE_WIPEOUT) break;
                    FtStacks pre = {.N = N, .M = N, .r = r, .order = before, .alive = sp->st.alive};
                    Brute b;
                    brute_stacks(&b, &pre);
                    assert_int_equal(sp->depth, b.best_depth);
                    assert_int_equal(ev.moved, b.best_move[sp->depth]);
                    assert_int_equal(hamming(&sp->st, before), ev.moved);
                    checked++, nonzero += ev.moved > 0;
                }
            }
            spare_destroy(sp);
        }
    printf("controller reorderings vs brute force: %d failures checked, %d moved stacks\n", checked,
           nonzero);
    assert_true(nonzero > 100);
}

/* A worked case. N = 6, r = 3 (replica i holds i, i+1, i+2). Failing 0 needs depth 2 (5
 * replicas for 6 shards); the current orders cover there. Failing 3: still covered at depth 2.
 * Failing 2 leaves replicas 1 (1 2 3), 4 (4 5 0), 5 (5 0 1): only replica 1 holds 2 and 3, so it
 * must compute both, which its first two levels (1 2) do not: reordering at the same depth,
 * 3 swaps with 1 (2 positions) and replica 5 brings 1 into its first two levels (2 more).
 * Failing 5: 2 replicas for 6 shards, depth 3. Failing 1: shards 1-3 are lost. */
static void test_spare_worked_case(void **state)
{
    (void)state;
    FtSpare *sp = spare_create(6, 3);
    FtSparePlan p;
    FtSpareEvent ev;
    assert_non_null(sp);
    assert_int_equal(spare_plan_init(&p, 6, 3), 0);
    assert_int_equal(spare_plan(sp, &p), 0);
    for (int s = 0; s < 6; s++) assert_int_equal(p.owner[s], s); /* failure-free: one level */
    assert_int_equal(spare_fail(sp, 0, &ev), SPARE_DEEPER);
    assert_int_equal(ev.depth, 2), assert_int_equal(ev.phase, 1), assert_int_equal(ev.moved, 0);
    assert_int_equal(spare_plan(sp, &p), 0);
    assert_int_equal(p.owner[0], 5), assert_int_equal(p.owner_level[0], 1);
    assert_int_equal(spare_fail(sp, 3, &ev), SPARE_MASKED);
    assert_int_equal(ev.phase, 0), assert_int_equal(sp->depth, 2);
    assert_int_equal(spare_fail(sp, 2, &ev), SPARE_MASKED);
    assert_int_equal(ev.phase, 2), assert_int_equal(ev.moved, 4), assert_int_equal(sp->depth, 2);
    assert_memory_equal(spare_order(sp, 1), ((int[]){3, 2, 1}), 3 * sizeof(int));
    const int *o4 = spare_order(sp, 4), *o5 = spare_order(sp, 5);
    printf("worked case: after failing 0, 3, 2: replica 4 (%d %d %d), replica 5 (%d %d %d)\n",
           o4[0], o4[1], o4[2], o5[0], o5[1], o5[2]);
    assert_memory_equal(o4, ((int[]){4, 5, 0}), 3 * sizeof(int));
    assert_memory_equal(o5, ((int[]){1, 0, 5}), 3 * sizeof(int));
    assert_int_equal(spare_plan(sp, &p), 0);
    check_plan(sp, &p);
    assert_int_equal(spare_fail(sp, 5, &ev), SPARE_DEEPER);
    assert_int_equal(ev.depth, 3), assert_int_equal(ev.phase, 1);
    assert_int_equal(spare_fail(sp, 5, &ev), -1); /* already failed: nothing changes */
    assert_int_equal(sp->failures, 4);
    assert_int_equal(spare_fail(sp, 1, &ev), SPARE_WIPEOUT);
    assert_int_equal(ev.depth, 4), assert_int_equal(sp->moved, 4);
    spare_reset(sp);
    assert_int_equal(sp->depth, 1), assert_int_equal(sp->nlive, 6), assert_int_equal(sp->moved, 0);
    assert_memory_equal(spare_order(sp, 1), ((int[]){1, 2, 3}), 3 * sizeof(int));
    assert_int_equal(spare_fail(sp, 6, &ev), -1);
    assert_int_equal(spare_fail(sp, -1, &ev), -1);
    /* replica N is out of range on every size, whatever lies past the last replica's flag */
    for (int n = 1; n <= 40; n++) {
        FtSpare *big = spare_create(n, 1);
        assert_non_null(big);
        assert_int_equal(spare_fail(big, n, &ev), -1);
        assert_int_equal(big->nlive, n), assert_int_equal(big->failures, 0);
        spare_destroy(big);
    }
    assert_null(spare_create(3, 4));
    assert_null(spare_create(0, 1));
    spare_plan_free(&p);
    spare_destroy(sp);
}

/* The same failures in the same order give the same bytes (orders, events, plans) on two
 * controllers, and a plan computed twice is the same. */
static void test_spare_deterministic(void **state)
{
    (void)state;
    const int N = 40, r = 4;
    FtSpare *a = spare_create(N, r), *b = spare_create(N, r);
    FtSparePlan pa, pb;
    assert_int_equal(spare_plan_init(&pa, N, r), 0);
    assert_int_equal(spare_plan_init(&pb, N, r), 0);
    FtRng g;
    int perm[64], reorders = 0;
    for (int trial = 0; trial < 50; trial++) {
        rng_seed(&g, 31, (uint64_t)trial);
        shuffle(&g, perm, N);
        spare_reset(a), spare_reset(b);
        for (int k = 0; k < N; k++) {
            FtSpareEvent ea, eb;
            int oa = spare_fail(a, perm[k], &ea), ob = spare_fail(b, perm[k], &eb);
            assert_int_equal(oa, ob);
            assert_memory_equal(&ea, &eb, sizeof ea);
            assert_memory_equal(a->st.order, b->st.order, (size_t)N * r * sizeof(int));
            reorders += ea.phase == 2;
            if (oa == SPARE_WIPEOUT) break;
            assert_int_equal(spare_plan(a, &pa), 0);
            assert_int_equal(spare_plan(b, &pb), 0);
            size_t n = (size_t)N * pa.depth;
            assert_memory_equal(pa.shard, pb.shard, n * sizeof(int));
            assert_memory_equal(pa.counted, pb.counted, n);
            assert_memory_equal(pa.owner, pb.owner, (size_t)N * sizeof(int));
            assert_int_equal(spare_plan(a, &pb), 0); /* again, into the other plan */
            assert_memory_equal(pa.owner, pb.owner, (size_t)N * sizeof(int));
            assert_memory_equal(pa.counted, pb.counted, n);
        }
    }
    assert_true(reorders > 0);
    spare_plan_free(&pa), spare_plan_free(&pb);
    spare_destroy(a), spare_destroy(b);
}

/* ---- Monte Carlo against analytic's exact mu(N, r) and S(N, r) ----------------------------- */

/* One epoch: replicas fail in a uniformly random order until a wipe-out. T = the failures up to
 * and including the wiping one; D = the sum of the depths of the states k = 0..T-1 (each
 * inter-failure interval of the epoch counted once), as in analytic.h. */
static void mc_epoch(FtSpare *sp, FtRng *g, int *perm, double *T, double *D)
{
    int N = sp->N;
    spare_reset(sp);
    *T = 0, *D = 0;
    for (int k = 0; k < N; k++) {
        *T += 1, *D += sp->depth;
        int j = k + (int)rng_below(g, (uint64_t)(N - k)), x = perm[j];
        perm[j] = perm[k], perm[k] = x;
        int out = spare_fail(sp, x, NULL);
        assert_true(out >= 0);
        if (out == SPARE_WIPEOUT) return;
    }
    fail_msg("no wipe-out after every replica failed");
}

static void test_spare_mc_vs_analytic(void **state)
{
    (void)state;
    static const struct {
        int N, r, trials;
    } cases[] = {{4, 1, 1000},     {64, 1, 1000},    {4, 2, 40000},   {8, 2, 40000},
                 {16, 2, 40000},   {64, 2, 40000},   {6, 3, 40000},   {16, 3, 40000},
                 {32, 3, 40000},   {64, 3, 40000},   {16, 4, 30000},  {64, 4, 20000}};
    printf("  N  r  trials   mu (MC +- 95%%)       mu exact  err%%"
           "   S (MC +- 95%%)       S exact  err%%\n");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int N = cases[c].N, r = cases[c].r, n = cases[c].trials, perm[64];
        FtSpare *sp = spare_create(N, r);
        assert_non_null(sp);
        for (int i = 0; i < N; i++) perm[i] = i;
        double sT = 0, sT2 = 0, sD = 0, sD2 = 0, sTD = 0;
        for (int t = 0; t < n; t++) {
            FtRng g;
            double T, D;
            rng_seed(&g, 2026, (uint64_t)(t + 1000000 * c));
            mc_epoch(sp, &g, perm, &T, &D);
            sT += T, sT2 += T * T, sD += D, sD2 += D * D, sTD += T * D;
        }
        spare_destroy(sp);
        double mu = sT / n, S = sD / sT;
        double varT = (sT2 - n * mu * mu) / (n - 1);
        /* S is a ratio of means: its variance by the delta method, Var(D - S T) / (n E[T]^2) */
        double vare = (sD2 - 2 * S * sTD + S * S * sT2) / (n - 1);
        double hw_mu = 1.96 * sqrt(varT > 0 ? varT / n : 0) / mu;
        double hw_S = 1.96 * sqrt(vare > 0 ? vare / n : 0) / mu / S;
        FtSpareEpoch ex;
        assert_int_equal(analytic_spare_epoch(N, r, 1e12, &ex), 0);
        double emu = fabs(mu / ex.mu - 1), eS = fabs(S / ex.S - 1);
        printf("%3d %2d %7d  %8.4f +- %5.2f%%  %8.4f  %5.2f  %7.4f +- %5.2f%%  %7.4f  %5.2f\n", N,
               r, n, mu, 100 * hw_mu, ex.mu, 100 * emu, S, 100 * hw_S, ex.S, 100 * eS);
        assert_true(hw_mu < 0.01 && hw_S < 0.01); /* the 2% tolerance is over twice the CI */
        assert_true(emu < 0.02 && eS < 0.02);
    }
}

FT_TEST_MAIN(cmocka_unit_test(test_hk_vs_brute), cmocka_unit_test(test_mcmf_vs_brute),
             cmocka_unit_test(test_mcmf_large_assignment),
             cmocka_unit_test(test_rectlr_vs_brute), cmocka_unit_test(test_spare_sequences),
             cmocka_unit_test(test_spare_reorder_minimal),
             cmocka_unit_test(test_spare_worked_case), cmocka_unit_test(test_spare_deterministic),
             cmocka_unit_test(test_spare_mc_vs_analytic))

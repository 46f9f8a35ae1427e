/* rectlr.c: Hopcroft-Karp, min-cost max-flow and SPARe's reordering controller on top of them
 * (definitions in rectlr.h).
 *
 * Hopcroft-Karp: a BFS from the free left vertices layers the graph up to the first free right
 * vertex; an iterative DFS (no recursion: N can be thousands) then augments along layered paths
 * until none is left, and the phases repeat until the BFS finds no free right vertex.
 *
 * Min-cost flow: successive shortest paths. Potentials h make every residual arc's reduced cost
 * c + h[u] - h[v] non-negative, so Dijkstra (binary heap, lazy deletion) finds each shortest
 * path. Nodes unreachable from s stay unreachable (augmenting only adds arcs between nodes on the
 * path), so their potentials never matter.
 *
 * Phase 2 network: source -> shard s (capacity 1) -> live replica i holding s (capacity 1,
 * cost 0 when s is in i's first d levels, else 1) -> sink (capacity d). A flow of value N is an
 * assignment of every shard to one replica computing at most d shards; its cost is the number
 * of shards that must enter some replica's first d levels, and the least movement is twice that
 * (rectlr.h). The flow starts from the zero-cost assignment of every shard the current first d
 * levels already cover, so the shortest-path search routes only the uncovered few. */
#include <stdlib.h>
#include <string.h>

#include "ftllm/rectlr.h"

/* ---- Hopcroft-Karp ---------------------------------------------------------------------- */

#define HK_INF 0x3fffffff

/* Layers from the free left vertices; returns the length of the shortest augmenting path in
 * left-vertex layers (dist of its last left vertex + 1), or HK_INF when there is none. */
static int hk_bfs(int nl, const int *off, const int *adj, const int *mate_l, const int *mate_r,
                  int *dist, int *queue)
{
    int qh = 0, qt = 0, limit = HK_INF;
    for (int u = 0; u < nl; u++) {
        if (mate_l[u] < 0) dist[u] = 0, queue[qt++] = u;
        else dist[u] = HK_INF;
    }
    while (qh < qt) {
        int u = queue[qh++];
        if (dist[u] + 1 >= limit) continue;
        for (int e = off[u]; e < off[u + 1]; e++) {
            int w = mate_r[adj[e]];
            if (w < 0) {
                if (limit == HK_INF) limit = dist[u] + 1;
            } else if (dist[w] == HK_INF) {
                dist[w] = dist[u] + 1;
                queue[qt++] = w;
            }
        }
    }
    return limit;
}

/* One layered DFS from the free vertex u0; augments and returns 1 when it reaches a free right
 * vertex. it[] keeps each vertex's next edge across the phase; a dead end is cut (dist = INF). */
static int hk_dfs(int u0, int limit, const int *off, const int *adj, int *mate_l, int *mate_r,
                  int *dist, int *it, int *stack)
{
    int sp = 0;
    stack[sp++] = u0;
    while (sp > 0) {
        int u = stack[sp - 1];
        if (it[u] == off[u + 1]) {
            dist[u] = HK_INF;
            sp--;
            if (sp > 0) it[stack[sp - 1]]++;
            continue;
        }
        int v = adj[it[u]], w = mate_r[v];
        if (w < 0 && dist[u] + 1 == limit) {
            for (int k = sp - 1; k >= 0; k--) { /* flip the path: u_k takes its current edge */
                int uk = stack[k], vk = adj[it[uk]];
                mate_l[uk] = vk, mate_r[vk] = uk;
            }
            return 1;
        }
        if (w >= 0 && dist[w] == dist[u] + 1 && dist[w] < limit) stack[sp++] = w;
        else it[u]++;
    }
    return 0;
}

int hk_match(int nl, int nr, const int *off, const int *adj, int *mate_l, int *mate_r)
{
    for (int u = 0; u < nl; u++) mate_l[u] = -1;
    for (int v = 0; v < nr; v++) mate_r[v] = -1;
    if (nl == 0) return 0;
    int *buf = malloc(4 * (size_t)nl * sizeof *buf);
    if (!buf) return -1;
    int *dist = buf, *queue = buf + nl, *it = buf + 2 * (size_t)nl, *stack = buf + 3 * (size_t)nl;
    int size = 0;
    for (;;) {
        int limit = hk_bfs(nl, off, adj, mate_l, mate_r, dist, queue);
        if (limit == HK_INF) break;
        memcpy(it, off, (size_t)nl * sizeof *it);
        for (int u = 0; u < nl; u++)
            if (mate_l[u] < 0 && dist[u] == 0)
                size += hk_dfs(u, limit, off, adj, mate_l, mate_r, dist, it, stack);
    }
    free(buf);
    return size;
}

/* ---- min-cost max-flow ---------------------------------------------------------------------- */

#define FLOW_INF INT64_MAX

int flow_init(FtFlow *f, int n, int max_edges)
{
    memset(f, 0, sizeof *f);
    if (n < 1 || max_edges < 0) return -1;
    size_t na = 2 * (size_t)max_edges + 1;
    f->head = malloc((size_t)n * sizeof *f->head);
    f->next = malloc(na * sizeof *f->next);
    f->to = malloc(na * sizeof *f->to);
    f->cap = malloc(na * sizeof *f->cap);
    f->cost = malloc(na * sizeof *f->cost);
    if (!f->head || !f->next || !f->to || !f->cap || !f->cost) {
        flow_free(f);
        return -1;
    }
    for (int v = 0; v < n; v++) f->head[v] = -1;
    f->n = n, f->max_m = max_edges;
    return 0;
}

void flow_free(FtFlow *f)
{
    free(f->head), free(f->next), free(f->to), free(f->cap), free(f->cost);
    memset(f, 0, sizeof *f);
}

int flow_add_edge(FtFlow *f, int u, int v, int64_t cap, int64_t cost)
{
    if (f->m >= f->max_m || u < 0 || u >= f->n || v < 0 || v >= f->n || cap < 0) return -1;
    int e = f->m++, a = 2 * e, b = a + 1;
    f->to[a] = v, f->cap[a] = cap, f->cost[a] = cost, f->next[a] = f->head[u], f->head[u] = a;
    f->to[b] = u, f->cap[b] = 0, f->cost[b] = -cost, f->next[b] = f->head[v], f->head[v] = b;
    return e;
}

int64_t flow_on(const FtFlow *f, int e) { return f->cap[2 * e + 1]; }

int flow_preset(FtFlow *f, int e, int64_t units)
{
    if (e < 0 || e >= f->m || units < 0 || units > f->cap[2 * e]) return -1;
    f->cap[2 * e] -= units, f->cap[2 * e + 1] += units;
    return 0;
}

/* The arc list is built by prepending; walk it in the order edges were added instead, so ties
 * go to the earlier edge. Arcs out of u in insertion order are found by reversing once. */
static void flow_order_arcs(FtFlow *f)
{
    for (int u = 0; u < f->n; u++) {
        int prev = -1, a = f->head[u];
        while (a >= 0) {
            int nx = f->next[a];
            f->next[a] = prev;
            prev = a, a = nx;
        }
        f->head[u] = prev;
    }
}

/* Bellman-Ford from s over arcs with capacity: h = shortest distances (0 where unreachable).
 * Returns 0, or -1 on a negative cycle. */
static int flow_bellman_ford(const FtFlow *f, int s, int64_t *h, int64_t *dist)
{
    for (int v = 0; v < f->n; v++) dist[v] = FLOW_INF;
    dist[s] = 0;
    for (int round = 0; round <= f->n; round++) {
        int changed = 0;
        for (int u = 0; u < f->n; u++) {
            if (dist[u] == FLOW_INF) continue;
            for (int a = f->head[u]; a >= 0; a = f->next[a])
                if (f->cap[a] > 0 && dist[u] + f->cost[a] < dist[f->to[a]]) {
                    dist[f->to[a]] = dist[u] + f->cost[a];
                    changed = 1;
                }
        }
        if (!changed) break;
        if (round == f->n) return -1;
    }
    for (int v = 0; v < f->n; v++) h[v] = dist[v] == FLOW_INF ? 0 : dist[v];
    return 0;
}

/* A binary min-heap of (key, node) with lazy deletion. */
typedef struct flow_heap {
    int64_t *key;
    int *node;
    int len;
} FlowHeap;

static void heap_push(FlowHeap *q, int64_t k, int v)
{
    int i = q->len++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (q->key[p] < k || (q->key[p] == k && q->node[p] <= v)) break;
        q->key[i] = q->key[p], q->node[i] = q->node[p];
        i = p;
    }
    q->key[i] = k, q->node[i] = v;
}

static void heap_pop(FlowHeap *q, int64_t *k, int *v)
{
    *k = q->key[0], *v = q->node[0];
    int64_t lk = q->key[--q->len];
    int lv = q->node[q->len], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->len) break;
        if (c + 1 < q->len && (q->key[c + 1] < q->key[c] ||
                               (q->key[c + 1] == q->key[c] && q->node[c + 1] < q->node[c])))
            c++;
        if (lk < q->key[c] || (lk == q->key[c] && lv <= q->node[c])) break;
        q->key[i] = q->key[c], q->node[i] = q->node[c];
        i = c;
    }
    q->key[i] = lk, q->node[i] = lv;
}

/* Dijkstra on reduced costs; prev[v] = the arc into v on the shortest path. */
static void flow_dijkstra(const FtFlow *f, int s, const int64_t *h, int64_t *dist, int *prev,
                          FlowHeap *q)
{
    for (int v = 0; v < f->n; v++) dist[v] = FLOW_INF, prev[v] = -1;
    dist[s] = 0;
    q->len = 0;
    heap_push(q, 0, s);
    while (q->len > 0) {
        int64_t d;
        int u;
        heap_pop(q, &d, &u);
        if (d > dist[u]) continue;
        for (int a = f->head[u]; a >= 0; a = f->next[a]) {
            if (f->cap[a] <= 0) continue;
            int v = f->to[a];
            int64_t nd = d + f->cost[a] + h[u] - h[v];
            if (nd < dist[v]) {
                dist[v] = nd, prev[v] = a;
                heap_push(q, nd, v);
            }
        }
    }
}

int flow_mincost(FtFlow *f, int s, int t, int64_t limit, int64_t *flow_out, int64_t *cost_out)
{
    int n = f->n, rc = -1;
    int64_t flow = 0, cost = 0;
    for (int e = 0; e < f->m; e++) { /* the preset flow, if any */
        int64_t x = f->cap[2 * e + 1];
        cost += x * f->cost[2 * e];
        if (f->to[2 * e + 1] == s) flow += x; /* out of s */
        if (f->to[2 * e] == s) flow -= x;     /* into s */
    }
    size_t na = 2 * (size_t)f->m + 1;
    int64_t *h = calloc((size_t)n, sizeof *h), *dist = malloc((size_t)n * sizeof *dist);
    int *prev = malloc((size_t)n * sizeof *prev);
    FlowHeap q = {malloc(na * sizeof *q.key), malloc(na * sizeof *q.node), 0};
    if (!h || !dist || !prev || !q.key || !q.node || s < 0 || s >= n || t < 0 || t >= n) goto out;
    flow_order_arcs(f);
    int negative = 0;
    for (int a = 0; a < 2 * f->m; a++) negative |= f->cap[a] > 0 && f->cost[a] < 0;
    if (negative && flow_bellman_ford(f, s, h, dist)) goto out;
    while (s != t && (limit < 0 || flow < limit)) {
        flow_dijkstra(f, s, h, dist, prev, &q);
        if (dist[t] == FLOW_INF) break;
        for (int v = 0; v < n; v++)
            if (dist[v] != FLOW_INF) h[v] += dist[v];
        int64_t push = limit < 0 ? FLOW_INF : limit - flow;
        for (int v = t; v != s; v = f->to[prev[v] ^ 1])
            if (f->cap[prev[v]] < push) push = f->cap[prev[v]];
        for (int v = t; v != s; v = f->to[prev[v] ^ 1]) {
            f->cap[prev[v]] -= push, f->cap[prev[v] ^ 1] += push;
            cost += push * f->cost[prev[v]];
        }
        flow += push;
    }
    rc = 0;
out:
    free(h), free(dist), free(prev), free(q.key), free(q.node);
    *flow_out = flow, *cost_out = cost;
    return rc;
}

/* ---- RECTLR ------------------------------------------------------------------------------ */

/* CSR of shards (left) to slots i*r + l (right) with l < d of live replicas; free_order = 0:
 * only the slot that holds the shard now (current orders), 1: every first-d slot of a replica
 * that holds it. Each shard's slots are listed by level, then replica. Returns 0 or -1. */
static int slots_graph(const FtStacks *st, int d, int free_order, int **off_out, int **adj_out)
{
    int N = st->N, M = st->M, r = st->r, lmax = free_order ? r : d;
    int *off = calloc((size_t)N + 1, sizeof *off), *pos = malloc(((size_t)N + 1) * sizeof *pos);
    int *adj = malloc(((size_t)M * r * (free_order ? (size_t)d : 1) + 1) * sizeof *adj);
    if (!off || !pos || !adj) {
        free(off), free(pos), free(adj);
        return -1;
    }
    for (int i = 0; i < M; i++)
        if (st->alive[i])
            for (int l = 0; l < lmax; l++)
                off[st->order[(size_t)i * r + l] + 1] += free_order ? d : 1;
    for (int s = 0; s < N; s++) off[s + 1] += off[s];
    memcpy(pos, off, (size_t)N * sizeof *pos);
    for (int lp = 0; lp < d; lp++)
        for (int i = 0; i < M; i++) {
            if (!st->alive[i]) continue;
            const int *o = st->order + (size_t)i * r;
            if (free_order)
                for (int l = 0; l < r; l++) adj[pos[o[l]]++] = i * r + lp;
            else
                adj[pos[o[lp]]++] = i * r + lp;
        }
    free(pos);
    *off_out = off, *adj_out = adj;
    return 0;
}

static int match_slots(const FtStacks *st, int d, int free_order, int *slot)
{
    if (d < 1) return st->N == 0;
    if (d > st->r) d = st->r;
    int *off, *adj;
    if (slots_graph(st, d, free_order, &off, &adj)) return -1;
    int nr = st->M * st->r;
    int *mate_l = malloc(((size_t)st->N + 1) * sizeof *mate_l),
        *mate_r = malloc(((size_t)nr + 1) * sizeof *mate_r);
    int rc = -1;
    if (mate_l && mate_r) {
        int size = hk_match(st->N, nr, off, adj, mate_l, mate_r);
        if (size >= 0) {
            rc = size == st->N;
            if (slot) memcpy(slot, mate_l, (size_t)st->N * sizeof *slot);
        }
    }
    free(off), free(adj), free(mate_l), free(mate_r);
    return rc;
}

int rectlr_fixed(const FtStacks *st, int d, int *slot) { return match_slots(st, d, 0, slot); }

int rectlr_free_ok(const FtStacks *st, int d) { return match_slots(st, d, 1, NULL); }

int rectlr_free_depth(const FtStacks *st)
{
    int live = 0;
    for (int i = 0; i < st->M; i++) live += st->alive[i] != 0;
    if (live == 0) return st->N == 0 ? 1 : st->r + 1;
    int d = (st->N + live - 1) / live; /* d * live >= N is necessary */
    for (d = d < 1 ? 1 : d; d <= st->r; d++) {
        int ok = rectlr_free_ok(st, d);
        if (ok < 0) return -1;
        if (ok) return d;
    }
    return st->r + 1;
}

/* Replica order o (r positions): assigned[l] says the shard at l was assigned to this replica.
 * Each assigned shard below d stays; each one at or above d swaps with an unassigned shard below
 * d (both in ascending position order). Returns the positions changed. */
static int reorder_one(int *o, int r, int d, const unsigned char *assigned)
{
    int lo = 0, moved = 0;
    for (int hi = d; hi < r; hi++) {
        if (!assigned[hi]) continue;
        while (lo < d && assigned[lo]) lo++;
        if (lo >= d) return -1; /* more than d assigned: not a valid assignment */
        int t = o[lo];
        o[lo] = o[hi], o[hi] = t;
        lo++;
        moved += 2;
    }
    return moved;
}

/* The warm start: every shard already in some live replica's first d levels goes, at cost 0, to
 * the lowest such level, then the lowest replica (a replica gets at most its d first shards).
 * A zero-cost flow is a min-cost flow of its value, so the search only routes the rest. */
static void reorder_preset(FtFlow *f, const FtStacks *st, int d, const int *eid,
                           const int *sink_eid, int *taken)
{
    for (int s = 0; s < st->N; s++) taken[s] = 0;
    for (int l = 0; l < d; l++)
        for (int i = 0; i < st->M; i++) {
            if (!st->alive[i]) continue;
            int s = st->order[(size_t)i * st->r + l];
            if (taken[s]) continue;
            taken[s] = 1;
            flow_preset(f, s, 1); /* edge s is source -> shard s */
            flow_preset(f, eid[(size_t)i * st->r + l], 1);
            flow_preset(f, sink_eid[i], 1);
        }
}

int rectlr_reorder(FtStacks *st, int d)
{
    int N = st->N, M = st->M, r = st->r, moved = -1;
    if (d < 1 || d > r) return -1;
    int src = 0, sink = 1 + N + M;
    FtFlow f;
    int *eid = malloc(((size_t)M * r + (size_t)M + (size_t)N + 1) * sizeof *eid);
    unsigned char *assigned = malloc((size_t)r);
    if (!eid || !assigned || flow_init(&f, N + M + 2, N + M * r + M)) {
        free(eid), free(assigned);
        return -1;
    }
    int *sink_eid = eid + (size_t)M * r, *taken = sink_eid + M;
    for (int s = 0; s < N; s++) flow_add_edge(&f, src, 1 + s, 1, 0);
    for (int i = 0; i < M; i++) {
        for (int l = 0; l < r; l++) {
            int s = st->order[(size_t)i * r + l]; /* cost 1 when s must enter the first d */
            eid[(size_t)i * r + l] =
                st->alive[i] ? flow_add_edge(&f, 1 + s, 1 + N + i, 1, l >= d) : -1;
        }
        sink_eid[i] = st->alive[i] ? flow_add_edge(&f, 1 + N + i, sink, d, 0) : -1;
    }
    reorder_preset(&f, st, d, eid, sink_eid, taken);
    int64_t flow, cost;
    if (flow_mincost(&f, src, sink, -1, &flow, &cost) || flow < N) goto out;
    moved = 0;
    for (int i = 0; i < M && moved >= 0; i++) {
        if (!st->alive[i]) continue;
        for (int l = 0; l < r; l++) assigned[l] = flow_on(&f, eid[(size_t)i * r + l]) > 0;
        int m = reorder_one(st->order + (size_t)i * r, r, d, assigned);
        moved = m < 0 ? -1 : moved + m;
    }
    if (moved >= 0 && moved != 2 * cost) moved = -1; /* cannot happen: cost = incoming shards */
out:
    flow_free(&f);
    free(eid), free(assigned);
    return moved;
}

int rectlr_run(FtStacks *st, int d, FtRectlrResult *out)
{
    out->phase = 0, out->depth = d, out->moved = 0;
    int ok = d >= 1 && d <= st->r ? rectlr_fixed(st, d, NULL) : 0;
    if (ok < 0) return -1;
    if (ok) return 0;
    int nd = rectlr_free_depth(st);
    if (nd < 0) return -1;
    out->phase = 1, out->depth = nd;
    if (nd > st->r) return 0; /* wipe-out */
    ok = rectlr_fixed(st, nd, NULL);
    if (ok < 0) return -1;
    if (ok) return 0; /* the current orders already cover at the new depth: no movement */
    int moved = rectlr_reorder(st, nd);
    if (moved < 0) return -1;
    out->phase = 2, out->moved = moved;
    return 0;
}

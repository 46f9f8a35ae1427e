/* planner.c: SpareTrain's three-phase static DMR planner (definitions and cost model in
 * planner.h).
 *
 * Phase 2 enumerates every contiguous run of a block's operators (O(m^2) per block with running
 * sums, m = the block's operators). Phase 3 keeps the queue in enqueue order, which is index
 * order, so "the earliest index" and "queue order" are the same tie-break. The best fit is an
 * exact depth-first search up to PLANNER_EXACT_MAX items and a knapsack on rounded-up times
 * above (queues that long are rare: the budget bounds them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/planner.h"

#define UNASSIGNED (-1)

const char *planner_strategy_name(int s)
{
    static const char *const names[] = {"piggyback", "naive", "deferred", "agc"};
    return s >= 0 && s < 4 ? names[s] : "?";
}

/* ---- best fit (subset sum) ------------------------------------------------------------------ */

typedef struct fit_search {
    const double *t, *suf; /* suf[i] = t[i] + ... + t[n-1] */
    int n;
    double len, best;
    unsigned char *cur, *pick;
} FitSearch;

static void fit_dfs(FitSearch *s, int i, double sum)
{
    if (i == s->n || sum + s->suf[i] <= s->len) {
        /* everything left fits: taking all of it is the best in this subtree */
        for (int k = i; k < s->n; k++) sum += s->t[k], s->cur[k] = 1;
        if (sum > s->best) s->best = sum, memcpy(s->pick, s->cur, (size_t)s->n);
        for (int k = i; k < s->n; k++) s->cur[k] = 0;
        return;
    }
    /* no strictly larger sum below (the margin covers rounding of the bound) */
    if ((sum + s->suf[i]) * (1 + 1e-12) <= s->best) return;
    if (sum + s->t[i] <= s->len) {
        s->cur[i] = 1;
        fit_dfs(s, i + 1, sum + s->t[i]);
        s->cur[i] = 0;
    }
    fit_dfs(s, i + 1, sum);
}

static double fit_exact(const double *t, int n, double len, unsigned char *pick)
{
    double suf[PLANNER_EXACT_MAX + 1];
    unsigned char cur[PLANNER_EXACT_MAX];
    suf[n] = 0;
    for (int i = n - 1; i >= 0; i--) suf[i] = t[i] + suf[i + 1];
    memset(cur, 0, sizeof cur);
    memset(pick, 0, (size_t)n);
    FitSearch s = {.t = t, .suf = suf, .n = n, .len = len, .best = -1, .cur = cur, .pick = pick};
    fit_dfs(&s, 0, 0.0);
    return s.best;
}

static double fit_knapsack(const double *t, int n, double len, unsigned char *pick)
{
    const int C = PLANNER_DP_UNITS;
    double q = len / C;
    memset(pick, 0, (size_t)n);
    if (!(q > 0)) { /* len 0: only zero-time checks fit */
        for (int i = 0; i < n; i++) pick[i] = t[i] == 0;
        return 0;
    }
    int *w = malloc((size_t)n * sizeof *w);
    double *best = calloc((size_t)C + 1, sizeof *best);
    unsigned char *took = calloc((size_t)n * (C + 1), 1);
    if (!w || !best || !took) {
        free(w), free(best), free(took);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        double u = ceil(t[i] / q);
        w[i] = u > C ? C + 1 : (int)u;
        for (int c = C; c >= w[i]; c--)
            if (best[c - w[i]] + t[i] > best[c])
                best[c] = best[c - w[i]] + t[i], took[(size_t)i * (C + 1) + c] = 1;
    }
    for (int i = n - 1, c = C; i >= 0; i--)
        if (took[(size_t)i * (C + 1) + c]) pick[i] = 1, c -= w[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += pick[i] ? t[i] : 0;
    for (int i = n - 1; i >= 0 && sum > len; i--) /* rounding of the units: never overfill */
        if (pick[i]) {
            pick[i] = 0, sum = 0;
            for (int k = 0; k < n; k++) sum += pick[k] ? t[k] : 0;
        }
    free(w), free(best), free(took);
    return sum;
}

double planner_best_fit(const double *t, int n, double len, unsigned char *pick)
{
    if (n <= 0) return 0;
    return n <= PLANNER_EXACT_MAX ? fit_exact(t, n, len, pick) : fit_knapsack(t, n, len, pick);
}

/* ---- the plan ------------------------------------------------------------------------------- */

void planner_free(FtDmrPlan *p)
{
    if (!p) return;
    free(p->strategy), free(p->window), free(p->segment), free(p->win_phase), free(p->win_time);
    free(p->win_qmem), free(p->qoff), free(p->q), free(p->seg_first), free(p->seg_last),
        free(p->seg_win);
    memset(p, 0, sizeof *p);
}

static int check_input(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin,
                       int phases)
{
    if (nops < 0 || nwin < 0 || (nops && !ops) || (nwin && !win)) return -1;
    if (phases & ~(PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER)) return -1;
    for (int i = 0; i < nops; i++)
        if (!(ops[i].time >= 0) || !(ops[i].copy >= 0) || !(ops[i].fp >= 0) || ops[i].block < 0)
            return -1;
    for (int w = 0; w < nwin; w++) {
        if (!(win[w].len >= 0) || win[w].after < -1 || win[w].after >= nops) return -1;
        if (win[w].kind != PLAN_WIN_PP && win[w].kind != PLAN_WIN_INTRA) return -1;
        if (w && win[w].after < win[w - 1].after) return -1;
    }
    return 0;
}

/* Boundary memory of AGC segment s (its first and last operator's kept tensors). */
static size_t seg_mem(const FtPlanOp *ops, const FtDmrPlan *p, int s)
{
    int lo = p->seg_first[s], hi = p->seg_last[s];
    return ops[lo].mem + (hi > lo ? ops[hi].mem : 0);
}

/* The most boundary memory that the segments chosen so far hold at once at any operator
 * position lo..hi (segment s is held from its first operator to its window's). The sum only
 * grows at a segment's first operator, so the most is at lo or at one of those. */
static size_t agc_peak(const FtPlanOp *ops, const FtPlanWindow *win, const FtDmrPlan *p, int lo,
                       int hi)
{
    size_t best = 0;
    if (hi < lo) return 0;
    for (int c = -1; c < p->nseg; c++) {
        int x = c < 0 ? lo : p->seg_first[c];
        if (c >= 0 && (x <= lo || x > hi)) continue;
        size_t m = 0;
        for (int s = 0; s < p->nseg; s++)
            if (p->seg_first[s] <= x && x <= win[p->seg_win[s]].after) m += seg_mem(ops, p, s);
        if (m > best) best = m;
    }
    return best;
}

size_t planner_agc_held(const FtDmrPlan *p, const FtPlanOp *ops, const FtPlanWindow *win, int w)
{
    int prev = w - 1; /* the window before w that is not an AGC segment's */
    while (prev >= 0 && p->win_phase[prev] == 2) prev--;
    int hi = win[w].after, lo = prev >= 0 ? win[prev].after + 1 : 0;
    return agc_peak(ops, win, p, lo < hi ? lo : hi, hi);
}

size_t planner_peak_held(const FtDmrPlan *p, const FtPlanOp *ops, const FtPlanWindow *win)
{
    long long *d = calloc((size_t)p->nops + 2, sizeof *d); /* a difference array over positions */
    if (!d) return (size_t)-1;
    for (int s = 0; s < p->nseg; s++) {
        long long m = (long long)seg_mem(ops, p, s);
        d[p->seg_first[s]] += m, d[win[p->seg_win[s]].after + 1] -= m;
    }
    for (int i = 0; i < p->nops; i++)
        if (p->strategy[i] == PLAN_DEFERRED) {
            long long m = (long long)ops[i].mem;
            d[i] += m, d[win[p->window[i]].after + 1] -= m;
        }
    long long run = 0, peak = 0;
    for (int i = 0; i < p->nops; i++) {
        run += d[i];
        if (run > peak) peak = run;
    }
    free(d);
    return (size_t)peak;
}

/* Phase 2 for block b: the best segment of its operators idx[0..m) into window w, or none. */
static void phase2_block(const FtPlanOp *ops, const int *idx, int m, const FtPlanWindow *win,
                         int w, size_t budget, FtDmrPlan *p)
{
    int bi = -1, bj = -1;
    double bgain = 0, bextra = 0, btime = 0, bkeep = 0;
    for (int i = 0; i < m && idx[i] <= win[w].after; i++) {
        double replay = 0, gain = 0, extra = 0, fp = 0;
        size_t held = agc_peak(ops, win, p, idx[i], win[w].after);
        size_t slack = held < budget ? budget - held : 0;
        for (int j = i; j < m && idx[j] <= win[w].after; j++) {
            const FtPlanOp *o = &ops[idx[j]];
            replay += o->time, fp += o->fp;
            if (p->strategy[idx[j]] == PLAN_PIGGYBACK) extra += o->time;
            else gain += o->time;
            if (replay > win[w].len) break; /* times >= 0: longer runs only grow */
            size_t mem = ops[idx[i]].mem + (j > i ? o->mem : 0);
            if (mem > slack) continue;
            double keep = fp + ops[idx[i]].copy + (j > i ? o->copy : 0);
            double net = gain - extra - keep;
            /* strictly larger only: ties keep the shorter, then the earlier segment */
            if (net > bgain || (net == bgain && bi >= 0 && net > 0 && j - i < bj - bi)) {
                bi = i, bj = j, bgain = net, bextra = extra, btime = replay, bkeep = keep;
            }
        }
    }
    if (bi < 0) return;
    for (int k = bi; k <= bj; k++)
        if (p->strategy[idx[k]] == UNASSIGNED)
            p->strategy[idx[k]] = PLAN_AGC, p->window[idx[k]] = w, p->segment[idx[k]] = p->nseg;
    p->seg_first[p->nseg] = idx[bi], p->seg_last[p->nseg] = idx[bj], p->seg_win[p->nseg] = w;
    p->agc_mem += ops[idx[bi]].mem + (bj > bi ? ops[idx[bj]].mem : 0);
    p->agc_extra += bextra, p->keep_cost += bkeep;
    p->win_phase[w] = 2, p->win_time[w] = btime;
    p->nseg++;
}

static int phase2(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin,
                  size_t budget, FtDmrPlan *p)
{
    int nblk = 0;
    for (int i = 0; i < nops; i++)
        if (ops[i].block + 1 > nblk) nblk = ops[i].block + 1;
    int *idx = malloc((size_t)nops * sizeof *idx + 1);
    if (!idx) return -1;
    for (int b = 0; b < nblk; b++) {
        int w = 0;
        while (w < nwin && !(win[w].kind == PLAN_WIN_PP && win[w].block == b && !p->win_phase[w]))
            w++;
        if (w == nwin) continue;
        int m = 0;
        for (int i = 0; i < nops; i++)
            if (ops[i].block == b) idx[m++] = i;
        phase2_block(ops, idx, m, win, w, budget, p);
    }
    free(idx);
    return 0;
}

/* Appends the queue (after demotion) at window w to the trace. */
static int trace_queue(FtDmrPlan *p, int w, const int *queue, int nq, size_t *cap)
{
    size_t need = (size_t)p->qoff[w] + nq;
    if (need > *cap) {
        size_t c = *cap * 2 > need ? *cap * 2 : need;
        int *q = realloc(p->q, c * sizeof *q);
        if (!q) return -1;
        p->q = q, *cap = c;
    }
    if (nq) memcpy(p->q + p->qoff[w], queue, (size_t)nq * sizeof *queue);
    p->qoff[w + 1] = (int)need;
    return 0;
}

/* Phase 3's demotion under this project's rules (planner.h): demote, one at a time, the queued
 * operator whose demotion loses the least hidden checking per byte it frees, until the queue
 * fits `room`. The loss comes from a fluid model of what the windows from w on can still hold:
 * operators are grouped by time, longest first (a window long enough for an operator holds any
 * shorter one, not the reverse); each group gets what the windows long enough for it have left
 * after the longer groups, at most its own time; an operator of a group whose time exceeds what
 * it gets by `excess` loses t - excess if demoted (0 when the others of its group would fill its
 * share anyway). Per byte: of the bytes it frees up to what the queue is over `room` (a small
 * operator that frees enough beats a large one whose extra bytes are not needed). Ties: the
 * shorter, then the earlier. An operator of zero memory frees nothing. */
static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

typedef struct queued {
    double t; /* its checker time */
    int i;    /* operator index */
} Queued;

static int cmp_queued_desc(const void *a, const void *b) /* longest first, then the earlier */
{
    const Queued *x = a, *y = b;
    if (x->t != y->t) return x->t > y->t ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int demote_by_loss(const FtPlanOp *ops, const FtPlanWindow *win, int nwin, int w,
                          size_t room, FtDmrPlan *p, int *queue, int *nq, size_t *qmem)
{
    int n = *nq, nl = 0, rc = -1;
    double *len = malloc((size_t)(nwin - w) * sizeof *len + 1);
    double *lcum = malloc((size_t)(nwin - w + 1) * sizeof *lcum);
    Queued *ord = malloc((size_t)n * sizeof *ord + 1);
    unsigned char *gone = calloc((size_t)n + 1, 1);
    if (!len || !lcum || !ord || !gone) goto out;
    for (int v = w; v < nwin; v++)
        if (!p->win_phase[v]) len[nl++] = win[v].len; /* w itself, and the ones Phase 3 gets */
    qsort(len, (size_t)nl, sizeof *len, cmp_desc);
    lcum[0] = 0;
    for (int v = 0; v < nl; v++) lcum[v + 1] = lcum[v] + len[v];
    for (int k = 0; k < n; k++) ord[k] = (Queued){ops[queue[k]].time, queue[k]};
    qsort(ord, (size_t)n, sizeof *ord, cmp_queued_desc);
    while (*qmem > room) {
        double given = 0, best_loss = INFINITY, best_t = 0, need = (double)(*qmem - room);
        int best = -1;
        for (int a = 0, b; a < n; a = b) { /* group [a, b): one time */
            double t = ord[a].t, demand = 0;
            for (b = a; b < n && ord[b].t == t; b++) demand += gone[b] ? 0 : t;
            int lo = 0, hi = nl; /* windows with len >= t: the first lo of the sorted lengths */
            while (lo < hi) {
                int m = (lo + hi) / 2;
                if (len[m] >= t) lo = m + 1;
                else hi = m;
            }
            double left = lcum[lo] - given, get = left < demand ? left : demand;
            if (get < 0) get = 0;
            given += get;
            double loss = t - (demand - get);
            if (loss < 0) loss = 0;
            for (int k = a; k < b; k++) {
                const FtPlanOp *o = &ops[ord[k].i];
                if (gone[k] || !o->mem) continue;
                double per = loss / fmin((double)o->mem, need); /* bytes beyond the need
                                                                    free nothing useful */
                if (per < best_loss || (per == best_loss && t < best_t)) /* earlier: first seen */
                    best = k, best_loss = per, best_t = t;
            }
        }
        if (best < 0) break; /* only operators of zero memory left (then qmem is 0) */
        gone[best] = 1, p->strategy[ord[best].i] = PLAN_NAIVE, *qmem -= ops[ord[best].i].mem;
    }
    int keep = 0; /* queued operators are unassigned; the demoted are now naive */
    for (int k = 0; k < n; k++)
        if (p->strategy[queue[k]] != PLAN_NAIVE) queue[keep++] = queue[k];
    *nq = keep;
    rc = 0;
out:
    free(len), free(lcum), free(ord), free(gone);
    return rc;
}

/* What Phase 3 may give window w: all of it, or under this project's rules what its AGC
 * segment's replay leaves (the paper's: nothing, a segment's window is used); -1: nothing. */
static double room_of(const FtDmrPlan *p, const FtPlanWindow *win, int w, int paper)
{
    if (p->win_phase[w] == 2) return paper ? -1 : fmax(0.0, win[w].len - p->win_time[w]);
    return p->win_phase[w] ? -1 : win[w].len;
}

static int phase3(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin, size_t budget,
                  int paper, FtDmrPlan *p)
{
    int rc = -1, nq = 0, next = 0;
    size_t qmem = 0, cap = 0;
    int *queue = malloc((size_t)nops * sizeof *queue + 1);
    double *t = malloc((size_t)nops * sizeof *t + 1);
    double *longest = malloc((size_t)nwin * sizeof *longest + 1); /* of windows w.. for Phase 3 */
    unsigned char *pick = malloc((size_t)nops + 1);
    if (!queue || !t || !pick || !longest) goto out;
    for (int w = nwin - 1; w >= 0; w--) {
        double l = room_of(p, win, w, paper), after = w + 1 < nwin ? longest[w + 1] : -1;
        longest[w] = l > after ? l : after;
    }
    for (int w = 0; w < nwin; w++) {
        p->qoff[w + 1] = p->qoff[w];
        if (room_of(p, win, w, paper) < 0) continue;
        for (; next <= win[w].after; next++) {
            const FtPlanOp *o = &ops[next];
            if (p->strategy[next] != UNASSIGNED) continue;
            if (o->copy + o->fp > o->time) { /* deferring costs more than checking now */
                p->strategy[next] = PLAN_NAIVE;
            } else if (!paper && o->time > longest[w]) { /* no window from here on holds it */
                p->strategy[next] = PLAN_NAIVE, p->too_long++;
            } else {
                queue[nq++] = next, qmem += o->mem;
            }
        }
        for (int k = 0, keep = 0; !paper && k <= nq; k++) { /* queued ops that outlived theirs */
            if (k == nq) {
                nq = keep;
            } else if (ops[queue[k]].time > longest[w]) {
                p->strategy[queue[k]] = PLAN_NAIVE, p->too_long++, qmem -= ops[queue[k]].mem;
            } else {
                queue[keep++] = queue[k];
            }
        }
        size_t held = planner_agc_held(p, ops, win, w), room = held < budget ? budget - held : 0;
        if (!paper && qmem > room) {
            if (demote_by_loss(ops, win, nwin, w, room, p, queue, &nq, &qmem)) goto out;
        }
        while (qmem > room) { /* the paper's: demote the shortest, the earliest on ties */
            int s = 0;
            for (int k = 1; k < nq; k++)
                if (ops[queue[k]].time < ops[queue[s]].time) s = k;
            p->strategy[queue[s]] = PLAN_NAIVE, qmem -= ops[queue[s]].mem;
            memmove(queue + s, queue + s + 1, (size_t)(nq - s - 1) * sizeof *queue), nq--;
        }
        p->win_qmem[w] = qmem;
        if (trace_queue(p, w, queue, nq, &cap)) goto out;
        for (int k = 0; k < nq; k++) t[k] = ops[queue[k]].time;
        double used = planner_best_fit(t, nq, room_of(p, win, w, paper), pick);
        if (used < 0) goto out;
        if (p->win_phase[w] != 2) p->win_phase[w] = 3, p->win_time[w] = 0;
        p->win_time[w] += used;
        int keep = 0;
        for (int k = 0; k < nq; k++) {
            if (pick[k]) {
                p->strategy[queue[k]] = PLAN_DEFERRED, p->window[queue[k]] = w;
                qmem -= ops[queue[k]].mem;
            } else {
                queue[keep++] = queue[k];
            }
        }
        nq = keep;
    }
    rc = 0; /* what is still queued, or never reached a window, goes naive in planner_run */
out:
    free(queue), free(t), free(pick), free(longest);
    return rc;
}

int planner_run(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin, size_t budget,
                int phases, FtDmrPlan *p)
{
    memset(p, 0, sizeof *p);
    if (check_input(ops, nops, win, nwin, phases)) return -1;
    FtPlanOp *free_ops = NULL; /* PLAN_PAPER: the operators with free bookkeeping */
    if (phases & PLAN_PAPER) {
        free_ops = malloc((size_t)nops * sizeof *free_ops + 1);
        if (!free_ops) return -1;
        for (int i = 0; i < nops; i++)
            free_ops[i] = ops[i], free_ops[i].copy = free_ops[i].fp = 0;
        ops = free_ops;
    }
    p->nops = nops, p->nwin = nwin;
    p->strategy = malloc((size_t)nops * sizeof *p->strategy + 1);
    p->window = malloc((size_t)nops * sizeof *p->window + 1);
    p->segment = malloc((size_t)nops * sizeof *p->segment + 1);
    p->seg_first = malloc((size_t)nops * sizeof *p->seg_first + 1);
    p->seg_last = malloc((size_t)nops * sizeof *p->seg_last + 1);
    p->seg_win = malloc((size_t)nops * sizeof *p->seg_win + 1);
    p->win_phase = calloc((size_t)nwin + 1, sizeof *p->win_phase);
    p->win_time = calloc((size_t)nwin + 1, sizeof *p->win_time);
    p->win_qmem = calloc((size_t)nwin + 1, sizeof *p->win_qmem);
    p->qoff = calloc((size_t)nwin + 1, sizeof *p->qoff);
    if (!p->strategy || !p->window || !p->segment || !p->win_phase || !p->win_time ||
        !p->win_qmem || !p->qoff || !p->seg_first || !p->seg_last || !p->seg_win)
        goto fail;
    for (int i = 0; i < nops; i++) {
        p->strategy[i] = (phases & PLAN_PHASE1) && ops[i].recomputed ? PLAN_PIGGYBACK : UNASSIGNED;
        p->window[i] = p->segment[i] = -1;
    }
    if ((phases & PLAN_PHASE2) && phase2(ops, nops, win, nwin, budget, p)) goto fail;
    if ((phases & PLAN_PHASE3) &&
        phase3(ops, nops, win, nwin, budget, phases & PLAN_PAPER, p))
        goto fail;
    double naive = 0;
    for (int i = 0; i < nops; i++) {
        if (p->strategy[i] == UNASSIGNED) p->strategy[i] = PLAN_NAIVE;
        if (p->strategy[i] == PLAN_NAIVE) naive += ops[i].time;
        if (p->strategy[i] == PLAN_DEFERRED) p->keep_cost += ops[i].copy + ops[i].fp;
    }
    p->overhead = naive + p->agc_extra + p->keep_cost;
    free(free_ops);
    return 0;
fail:
    free(free_ops);
    planner_free(p);
    return -1;
}

/* dmr_plan.c: the DMR plan in tape-entry space: profile to planner input and back, the plan
 * file, the table (dmr_plan.h).
 *
 * Key decisions:
 *  - The planner (planner.h) sees only the entries that may be planned; the mapping back to
 *    entries is one index array. Integer-writing entries are naive before the planner runs.
 *  - The file is line-oriented text read with strtok_r over a copy of each line: every field is
 *    checked (names against the tape, numbers for range), so a hand-edited plan that would
 *    check an op wrongly is refused with its line number rather than trusted. */
#include "ftllm/dmr_plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

static const char *const g_phase_name[] = {"forward", "backward", "recompute"};
static const char *const g_kind_name[] = {"pp", "intra"};
static const char *const g_use_name[] = {"-", "-", "agc", "deferred"};

void dmr_profile_init(FtDmrProfile *pf, int nmicro, int nopt)
{
    memset(pf, 0, sizeof *pf);
    pf->nmicro = nmicro, pf->nopt = nopt;
    int n = nmicro + nopt;
    pf->time = calloc((size_t)n + 1, sizeof *pf->time);
    pf->copy = calloc((size_t)n + 1, sizeof *pf->copy);
    pf->fp = calloc((size_t)n + 1, sizeof *pf->fp);
    pf->wait_pp = calloc((size_t)n + 2, sizeof *pf->wait_pp);
    pf->wait_other = calloc((size_t)n + 2, sizeof *pf->wait_other);
    FT_ASSERT(pf->time && pf->copy && pf->fp && pf->wait_pp && pf->wait_other);
}

void dmr_profile_seq(FtDmrProfile *pf, int pos, int idx, double wait)
{
    if (pf->seq_bad) return;
    if (idx < 0) { /* the step's end: what came after its last op */
        if (pf->seq_done && pos != pf->nseq) pf->seq_bad = true;
        pf->seq_tail += wait, pf->seq_done = true;
        return;
    }
    if (pf->seq_done) {
        if (pos >= pf->nseq || pf->seq[pos] != idx) pf->seq_bad = true;
        else pf->seq_wait[pos] += wait;
        return;
    }
    if (pos != pf->nseq) { /* not called for every op: no sequence */
        pf->seq_bad = true;
        return;
    }
    if (pf->nseq == pf->capseq) {
        int cap = pf->capseq ? 2 * pf->capseq : 256;
        int *s = realloc(pf->seq, (size_t)cap * sizeof *s);
        double *w = realloc(pf->seq_wait, (size_t)cap * sizeof *w);
        FT_ASSERT(s && w);
        pf->seq = s, pf->seq_wait = w, pf->capseq = cap;
    }
    pf->seq[pf->nseq] = idx, pf->seq_wait[pf->nseq++] = wait;
}

void dmr_profile_free(FtDmrProfile *pf)
{
    free(pf->time), free(pf->copy), free(pf->fp), free(pf->wait_pp), free(pf->wait_other);
    free(pf->seq), free(pf->seq_wait);
    memset(pf, 0, sizeof *pf);
}

static void *grow_copy(void *dst, const void *src, size_t bytes)
{
    void *p = realloc(dst, bytes ? bytes : 1);
    FT_ASSERT(p);
    if (bytes) memcpy(p, src, bytes);
    return p;
}

void dmr_profile_copy(FtDmrProfile *dst, const FtDmrProfile *src)
{
    size_t n = (size_t)(src->nmicro + src->nopt), ns = (size_t)src->nseq;
    FtDmrProfile d = *src;
    d.time = grow_copy(dst->time, src->time, (n + 1) * sizeof *src->time);
    d.copy = grow_copy(dst->copy, src->copy, (n + 1) * sizeof *src->copy);
    d.fp = grow_copy(dst->fp, src->fp, (n + 1) * sizeof *src->fp);
    d.wait_pp = grow_copy(dst->wait_pp, src->wait_pp, (n + 2) * sizeof *src->wait_pp);
    d.wait_other = grow_copy(dst->wait_other, src->wait_other, (n + 2) * sizeof *src->wait_other);
    d.seq = grow_copy(dst->seq, src->seq, ns * sizeof *src->seq);
    d.seq_wait = grow_copy(dst->seq_wait, src->seq_wait, ns * sizeof *src->seq_wait);
    d.capseq = src->nseq; /* what the copy holds: the next append grows it */
    *dst = d;
}

bool dmr_entry_deferrable(const FtTape *tp, const FtTapeEntry *e)
{
    if (e->kind == FT_OP_MARK) return false;
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && (tp->t[e->out[k]].dtype == FT_I32 || tp->t[e->out[k]].dtype == FT_I64))
            return false;
    return true;
}

bool dmr_entry_piggyback(const FtTape *tp, const FtTapeEntry *e)
{
    return e->twin >= 0 && dmr_entry_deferrable(tp, e);
}

size_t dmr_entry_kept(const FtTape *tp, int i)
{
    const FtTapeEntry *e = &tp->e[i];
    size_t b = 0;
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        if (e->in[k] < 0) continue;
        FtTensorRole r = tp->t[e->in[k]].role;
        if (r == FT_TR_PARAM || r == FT_TR_MOM1 || r == FT_TR_MOM2) continue; /* stable */
        b += tape_tensor_bytes(tp, e->in[k]);
    }
    for (int k = 0; k < FT_OP_MAX_OUT; k++) b += e->out[k] >= 0 ? 8 : 0;
    return b;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

uint64_t dmr_tape_hash(const FtTape *micro, const FtTape *opt)
{
    uint64_t h = 1469598103934665603ULL;
    const FtTape *tps[2] = {micro, opt};
    for (int t = 0; t < 2; t++) {
        const FtTape *tp = tps[t];
        h = mix(h, (uint64_t)tp->ne);
        for (int i = 0; i < tp->ne; i++) {
            const FtTapeEntry *e = &tp->e[i];
            h = mix(h, (uint64_t)e->kind * 131 + (uint64_t)e->dir * 17 + (uint64_t)e->phase);
            h = mix(h, (uint64_t)(e->layer + 1) * 7919 + (uint64_t)(e->twin + 1));
            h = mix(h, (uint64_t)e->mark);
            for (int k = 0; k < FT_OP_MAX_IN; k++) h = mix(h, tape_tensor_bytes(tp, e->in[k]));
            for (int k = 0; k < FT_OP_MAX_OUT; k++) h = mix(h, tape_tensor_bytes(tp, e->out[k]));
        }
    }
    return h;
}

/* The planner's block of entry i: layer + 1 (0 outside the blocks), the optimizer apart. */
static int block_of(const FtTape *micro, const FtTape *opt, int i)
{
    if (i >= micro->ne) {
        int top = -1;
        for (int j = 0; j < micro->ne; j++)
            if (micro->e[j].layer > top) top = micro->e[j].layer;
        return top + 2;
    }
    return micro->e[i].layer + 1;
}

static const FtTapeEntry *entry_of(const FtTape *micro, const FtTape *opt, int i, const FtTape **tp,
                                   int *k)
{
    *k = i < micro->ne ? i : i - micro->ne;
    *tp = i < micro->ne ? micro : opt;
    return &(*tp)->e[*k];
}

void dmr_plan_free(FtDmrEntryPlan *p)
{
    if (!p) return;
    free(p->strat), free(p->seg), free(p->window), free(p->time), free(p->kept), free(p->cost);
    free(p->win_after), free(p->win_kind), free(p->win_use), free(p->win_len), free(p->win_used);
    memset(p, 0, sizeof *p);
}

static void plan_alloc(FtDmrEntryPlan *p, int nmicro, int nopt, int nwin)
{
    memset(p, 0, sizeof *p);
    p->nmicro = nmicro, p->nopt = nopt, p->n = nmicro + nopt, p->nwin = nwin;
    size_t n = (size_t)p->n + 1, w = (size_t)nwin + 1;
    p->strat = malloc(n * sizeof *p->strat), p->seg = malloc(n * sizeof *p->seg);
    p->window = malloc(n * sizeof *p->window), p->time = calloc(n, sizeof *p->time);
    p->kept = calloc(n, sizeof *p->kept), p->cost = calloc(n, sizeof *p->cost);
    p->win_after = calloc(w, sizeof *p->win_after), p->win_kind = calloc(w, sizeof *p->win_kind);
    p->win_use = calloc(w, sizeof *p->win_use), p->win_len = calloc(w, sizeof *p->win_len);
    p->win_used = calloc(w, sizeof *p->win_used);
    FT_ASSERT(p->strat && p->seg && p->window && p->time && p->kept && p->cost && p->win_after &&
              p->win_kind && p->win_use && p->win_len && p->win_used);
    for (int i = 0; i < p->n; i++) p->strat[i] = -1, p->seg[i] = p->window[i] = -1;
}

/* ---- build --------------------------------------------------------------------------------- */

/* end[i], i in [0, n]: the seconds (summed over the steps) of position i's waits that came after
 * the rank's last micro-batch op in time order (the profile's sequence: the wait before
 * execution k was booked after execution k - 1's entry, dmr_prof_note); all 0 without a
 * sequence. */
static void end_waits(const FtDmrProfile *pf, int n, double *end)
{
    for (int i = 0; i <= n; i++) end[i] = 0;
    if (!pf->seq_done || pf->seq_bad || pf->nseq <= 0) return;
    int last = -1;
    for (int k = 0; k < pf->nseq; k++)
        if (pf->seq[k] >= 0 && pf->seq[k] < pf->nmicro) last = k;
    if (last < 0) return;
    for (int k = last + 1; k < pf->nseq; k++)
        if (pf->seq[k - 1] + 1 <= n) end[pf->seq[k - 1] + 1] += pf->seq_wait[k];
    if (pf->seq[pf->nseq - 1] + 1 <= n) end[pf->seq[pf->nseq - 1] + 1] += pf->seq_tail;
}

/* Micro-batches per step: the executions of one micro-batch entry in the profile's sequence (1
 * without a sequence). */
static int profile_reps(const FtDmrProfile *pf)
{
    int first = -1, count = 0;
    for (int k = 0; k < pf->nseq && pf->seq_done; k++)
        if (pf->seq[k] >= 0 && pf->seq[k] < pf->nmicro) {
            if (first < 0) first = pf->seq[k];
            count += pf->seq[k] == first;
        }
    return count > 1 ? count : 1;
}

/* The waits' scale of dmr_plan_build: measured under naive checks, to the step without them. */
static double wait_scale(const FtDmrProfile *pf)
{
    return pf->wall_s > 0 && pf->step_s > 0 && pf->step_s < pf->wall_s ? pf->step_s / pf->wall_s
                                                                        : 1.0;
}

/* A difference array's largest prefix sum over positions [0, n). */
static long long peak_of(const long long *d, int n)
{
    long long run = 0, peak = 0;
    for (int i = 0; i < n; i++) {
        run += d[i];
        if (run > peak) peak = run;
    }
    return peak;
}

size_t dmr_plan_held_peak(const FtDmrEntryPlan *p, const unsigned char *skip)
{
    long long *d = calloc((size_t)p->n + 2, sizeof *d), more = 0; /* over entries */
    FT_ASSERT(d);
    int reps = p->reps > 1 ? p->reps : 1;
    for (int s = 0; s < p->nseg; s++) {
        int first = -1, last = -1, w = -1;
        for (int i = 0; i < p->n; i++)
            if (p->seg[i] == s) {
                last = i, first = first < 0 ? i : first;
                if (p->window[i] >= 0) w = p->window[i]; /* covered members: its window */
            }
        if (first < 0 || w < 0 || p->win_after[w] < first) continue;
        long long m = (long long)(p->kept[first] + (last != first ? p->kept[last] : 0));
        d[first] += m, d[p->win_after[w] + 1] -= m;
        if (first < p->nmicro && p->win_after[w] >= p->nmicro - 1) more += (reps - 1) * m;
    }
    for (int i = 0; i < p->n; i++) {
        int w = p->window[i];
        if (p->strat[i] != PLAN_DEFERRED || w < 0 || p->win_after[w] < i || (skip && skip[i]))
            continue;
        long long m = (long long)p->kept[i];
        d[i] += m, d[p->win_after[w] + 1] -= m;
        if (i < p->nmicro && p->win_after[w] >= p->nmicro - 1) more += (reps - 1) * m;
    }
    long long peak = peak_of(d, p->n) + more;
    free(d);
    return (size_t)peak;
}

size_t dmr_plan_fit_peak(const FtPlanOp *ops, const FtPlanWindow *win, const unsigned char *once,
                         const unsigned char *rep, int reps, const FtDmrPlan *pl)
{
    size_t peak = planner_peak_held(pl, ops, win); /* one copy of each */
    FT_ASSERT(peak != (size_t)-1);
    if (!once || !rep || reps <= 1) return peak;
    for (int s = 0; s < pl->nseg; s++) { /* the other copies, held through the last one */
        int lo = pl->seg_first[s], hi = pl->seg_last[s], v = pl->seg_win[s];
        if (once[v] && rep[lo])
            peak += (size_t)(reps - 1) * (ops[lo].mem + (hi > lo ? ops[hi].mem : 0));
    }
    for (int i = 0; i < pl->nops; i++)
        if (pl->strategy[i] == PLAN_DEFERRED && once[pl->window[i]] && rep[i])
            peak += (size_t)(reps - 1) * ops[i].mem;
    return peak;
}

int dmr_plan_fit(const FtPlanOp *ops, int nops, const FtPlanWindow *win, int nwin,
                 const unsigned char *once, const unsigned char *rep, int reps, size_t budget,
                 int phases, FtDmrPlan *pl, size_t *peak)
{
    /* an operator no window before the step's end can hold is planned with all its copies */
    FtPlanOp *eff = malloc((size_t)nops * sizeof *eff + 1);
    if (!eff) return -1;
    double inner = -1; /* the longest window, not once a step, from operator i's position on */
    for (int i = nops - 1, w = nwin - 1; i >= 0; i--) {
        for (; w >= 0 && win[w].after >= i; w--)
            if (!(once && once[w]) && win[w].len > inner) inner = win[w].len;
        eff[i] = ops[i];
        if (once && rep && rep[i] && reps > 1 && ops[i].time > inner) eff[i].mem *= (size_t)reps;
    }
    size_t room = budget;
    int rc = 0;
    for (int it = 0;; it++) {
        if (planner_run(eff, nops, win, nwin, room, phases, pl)) {
            rc = -1;
            break;
        }
        *peak = dmr_plan_fit_peak(ops, win, once, rep, reps, pl);
        if (*peak <= budget || room == 0) break;
        planner_free(pl);
        /* shrink by the overshoot (a little more), strictly; 0 after 16 tries */
        size_t next = (size_t)((double)room * ((double)budget / (double)*peak * 0.99));
        room = it >= 15 ? 0 : next < room ? next : room - 1;
    }
    free(eff);
    return rc;
}

int dmr_plan_build(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, size_t budget,
                   int phases, FtDmrEntryPlan *p)
{
    FT_ASSERT(pf->nmicro == micro->ne && pf->nopt == opt->ne);
    int n = micro->ne + opt->ne, steps = pf->steps > 0 ? pf->steps : 1, rc = -1;
    FtPlanOp *ops = calloc((size_t)n + 1, sizeof *ops);
    FtPlanWindow *win = calloc(2 * ((size_t)n + 1), sizeof *win);
    int *ent = malloc(((size_t)n + 1) * sizeof *ent), *opi = malloc(((size_t)n + 1) * sizeof *opi);
    int *went = malloc(2 * ((size_t)n + 1) * sizeof *went);
    double *end = malloc(((size_t)n + 1) * sizeof *end);
    unsigned char *once = calloc(2 * ((size_t)n + 1), 1), *rep = calloc((size_t)n + 1, 1);
    FtDmrPlan pl = {0};
    if (!ops || !win || !ent || !opi || !went || !end || !once || !rep) goto out;
    int nops = 0, nwin = 0, last = -1;
    double scale = wait_scale(pf); /* waits measured under naive checks */
    double idle = 0; /* the waits as the step without checks has them */
    end_waits(pf, n, end);
    for (int i = 0; i <= n; i++) {
        /* the waits just before entry i (after entry i - 1): one window per kind; the share
         * that came after the rank's last micro-batch op is not scaled (dmr_plan.h) */
        double all = pf->wait_pp[i] + pf->wait_other[i];
        double f = all > 0 ? fmin(1.0, end[i] / all) : 0, sc = scale + (1 - scale) * f;
        double w[2] = {sc * pf->wait_pp[i] / steps, sc * pf->wait_other[i] / steps};
        idle += scale * all / steps;
        for (int k = 0; k < 2; k++) {
            if (!(w[k] > 0)) continue;
            int blk = i > 0 ? block_of(micro, opt, i - 1) : 0;
            win[nwin] = (FtPlanWindow){.after = last, .len = w[k],
                                       .kind = k == 0 ? PLAN_WIN_PP : PLAN_WIN_INTRA, .block = blk};
            went[nwin++] = i - 1;
        }
        if (i == n) break;
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = entry_of(micro, opt, i, &tp, &j);
        opi[i] = -1;
        if (e->kind == FT_OP_MARK || !dmr_entry_deferrable(tp, e)) continue;
        if (pf->moe_dynamic && e->kind == FT_OP_MOE_EXPERT && e->twin < 0) continue; /* run time */
        ops[nops] = (FtPlanOp){.name = ops_desc(e->kind)->name, .time = pf->time[i] / steps,
                               .mem = dmr_entry_kept(tp, j), .recomputed = e->twin >= 0,
                               .block = block_of(micro, opt, i),
                               .copy = pf->copy[i] / steps,
                               .fp = pf->fp[i] / steps};
        opi[i] = nops, ent[nops++] = i, last = nops - 1;
    }
    /* memory over the step's micro-batches: a window after the last micro-batch's entries comes
     * once a step, and a micro-batch op's check deferred to it is kept by each micro-batch */
    int reps = profile_reps(pf);
    for (int w = 0; w < nwin; w++) once[w] = went[w] >= micro->ne - 1;
    for (int o = 0; o < nops; o++) rep[o] = ent[o] < micro->ne;
    size_t peak;
    if (dmr_plan_fit(ops, nops, win, nwin, once, rep, reps, budget, phases, &pl, &peak)) goto out;
    plan_alloc(p, micro->ne, opt->ne, nwin);
    p->reps = reps;
    p->phases = phases, p->budget_mb = (double)budget / (1024.0 * 1024.0);
    p->step_s = pf->step_s / steps, p->overhead = pl.overhead, p->nseg = pl.nseg;
    p->pre_bwd_s = scale * pf->pre_bwd_s / steps, p->fwd_end = micro->fwd_end;
    p->has_idle = true, p->idle_s = idle;
    p->tape_hash = dmr_tape_hash(micro, opt);
    for (int i = 0; i < n; i++) {
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = entry_of(micro, opt, i, &tp, &j);
        if (e->kind == FT_OP_MARK) continue;
        p->time[i] = pf->time[i] / steps, p->kept[i] = dmr_entry_kept(tp, j);
        int o = opi[i];
        if (o < 0) { /* writes integers, or decided at run time: naive */
            p->strat[i] = PLAN_NAIVE, p->cost[i] = p->time[i];
            p->overhead += p->time[i];
            continue;
        }
        p->strat[i] = pl.strategy[o], p->window[i] = pl.window[o];
        p->cost[i] = pl.strategy[o] == PLAN_NAIVE      ? p->time[i]
                     : pl.strategy[o] == PLAN_DEFERRED ? ops[o].copy + ops[o].fp
                                                       : 0;
    }
    for (int s = 0; s < pl.nseg; s++) { /* members: block b's ops from first to last */
        int b = ops[pl.seg_first[s]].block;
        for (int o = pl.seg_first[s]; o <= pl.seg_last[s]; o++)
            if (ops[o].block == b) {
                p->seg[ent[o]] = s;
                if (pl.strategy[o] == PLAN_PIGGYBACK) p->cost[ent[o]] = ops[o].time; /* extra */
                p->cost[ent[o]] +=
                    ops[o].fp + (o == pl.seg_first[s] || o == pl.seg_last[s] ? ops[o].copy : 0);
            }
    }
    p->order_s = dmr_plan_order_excess(p, pf, 1.0);
    p->has_order = p->order_s >= 0;
    if (!p->has_order) p->order_s = 0;
    for (int w = 0; w < nwin; w++) {
        p->win_after[w] = went[w], p->win_kind[w] = win[w].kind, p->win_len[w] = win[w].len;
        p->win_use[w] = pl.win_phase[w], p->win_used[w] = pl.win_time[w];
    }
    rc = 0;
out:
    planner_free(&pl);
    free(ops), free(win), free(ent), free(opi), free(went), free(end), free(once), free(rep);
    return rc;
}

/* ---- totals and table ---------------------------------------------------------------------- */

void dmr_plan_totals(const FtDmrEntryPlan *p, FtDmrPlanTotals *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < p->n; i++) {
        int s = p->strat[i];
        if (s < 0) continue;
        t->ops[s]++, t->time[s] += p->time[i], t->cost[s] += p->cost[i];
        if (s != PLAN_PIGGYBACK) t->exposed_s += p->time[i];
        if (s != PLAN_PIGGYBACK && i < p->fwd_end) t->exposed_fwd_s += p->time[i];
    }
    t->segments = p->nseg;
    for (int w = 0; w < p->nwin; w++) {
        t->window_s += p->win_len[w];
        t->hidden_s += p->win_used[w];
        t->windows_used += p->win_use[w] != 0;
    }
}

double dmr_order_excess(const int *strat, const double *time, int n, const int *seq,
                        const double *wait, int nseq, double tail)
{
    int *runs = calloc((size_t)n + 1, sizeof *runs);
    FT_ASSERT(runs);
    for (int k = 0; k < nseq; k++)
        if (seq[k] >= 0 && seq[k] < n) runs[seq[k]]++;
    double work = 0, after = tail, best = 0; /* from execution k on; waits after its start */
    for (int k = nseq - 1; k >= 0; k--) {
        int i = seq[k];
        if (i >= 0 && i < n && strat[i] >= 0 && strat[i] != PLAN_PIGGYBACK)
            work += time[i] / runs[i];
        if (work - after > best) best = work - after;
        after += wait[k];
    }
    free(runs);
    return best;
}

double dmr_plan_order_excess(const FtDmrEntryPlan *p, const FtDmrProfile *pf, double f)
{
    if (!pf || !pf->seq_done || pf->seq_bad || pf->nseq <= 0 || pf->nmicro + pf->nopt != p->n)
        return -1;
    int steps = pf->steps > 0 ? pf->steps : 1;
    double scale = wait_scale(pf), *w = malloc(((size_t)pf->nseq + (size_t)p->n) * sizeof *w);
    FT_ASSERT(w);
    double *t = w + pf->nseq;
    for (int k = 0; k < pf->nseq; k++) w[k] = scale * pf->seq_wait[k] / steps;
    for (int i = 0; i < p->n; i++) t[i] = f * p->time[i];
    double x = dmr_order_excess(p->strat, t, p->n, pf->seq, w, pf->nseq, scale * pf->seq_tail / steps);
    free(w);
    return x;
}

double dmr_plan_bounds(const FtDmrEntryPlan *p, double step_s, double *ordered)
{
    FtDmrPlanTotals t;
    dmr_plan_totals(p, &t);
    double idle = p->has_idle ? p->idle_s : t.window_s;
    double pre = p->pre_bwd_s < idle ? p->pre_bwd_s : idle;
    double held = pre < t.exposed_fwd_s ? pre : t.exposed_fwd_s; /* what those waits can hold */
    double lb = t.exposed_s - idle, ob = t.exposed_s - (idle - pre) - held;
    if (p->has_order) ob = p->order_s > lb ? p->order_s : lb;
    *ordered = step_s > 0 && ob > 0 ? ob / step_s : 0.0;
    return step_s > 0 && lb > 0 ? lb / step_s : 0.0;
}

static const char *phases_text(int phases)
{
    return phases == (PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER) ? "paper"
           : phases == (PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3)            ? "1,2,3"
           : phases == (PLAN_PHASE1 | PLAN_PHASE2)                          ? "1,2"
           : phases == PLAN_PHASE1                                          ? "1"
                                                                            : "?";
}

void dmr_plan_print_table(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro,
                          const FtTape *opt)
{
    fprintf(out, "%6s  %-18s %-9s %5s  %-9s %6s %4s %10s %10s\n", "entry", "op", "phase",
            "layer", "strategy", "window", "seg", "time_ms", "cost_ms");
    for (int i = 0; i < p->n; i++) {
        if (p->strat[i] < 0) continue;
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = entry_of(micro, opt, i, &tp, &j);
        char op[40], w[16] = "-", sg[16] = "-";
        snprintf(op, sizeof op, "%s.%s", ops_desc(e->kind)->name, e->dir == FT_FWD ? "fwd" : "bwd");
        if (p->window[i] >= 0)
            snprintf(w, sizeof w, "%s%d", g_kind_name[p->win_kind[p->window[i]]], p->window[i]);
        if (p->seg[i] >= 0) snprintf(sg, sizeof sg, "%d", p->seg[i]);
        fprintf(out, "%6d  %-18s %-9s %5d  %-9s %6s %4s %10.4f %10.4f\n", i, op,
                tp == opt ? "optimizer" : g_phase_name[e->phase], e->layer,
                planner_strategy_name(p->strat[i]), w, sg, 1e3 * p->time[i], 1e3 * p->cost[i]);
    }
}

void dmr_plan_print(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                    bool table)
{
    if (table) dmr_plan_print_table(out, p, micro, opt);
    FtDmrPlanTotals t;
    dmr_plan_totals(p, &t);
    double needless = 0; /* piggyback ops replayed in a segment; the rest of their cost is fp */
    for (int i = 0; i < p->n; i++)
        if (p->strat[i] == PLAN_PIGGYBACK && p->seg[i] >= 0) needless += p->time[i];
    double keep = t.cost[PLAN_DEFERRED] + t.cost[PLAN_AGC] + t.cost[PLAN_PIGGYBACK] - needless;
    char kept[96];
    double at_once = (double)dmr_plan_held_peak(p, NULL) / (1024.0 * 1024.0);
    if (p->reps > 1)
        snprintf(kept, sizeof kept, "its checks keep at most %.1f MiB at once over the step's %d "
                 "micro-batches", at_once, p->reps);
    else
        snprintf(kept, sizeof kept, "its checks keep at most %.1f MiB at once", at_once);
    fprintf(out, "plan: phases %s, budget %.1f MiB (%s); phase 1 piggyback %d ops (%.3f ms hidden "
                 "in AC recomputation); phase 2 agc %d segment%s, %d ops (%.3f ms in PP windows, "
                 "%.3f ms replayed needlessly); phase 3 deferred %d ops (%.3f ms in windows); "
                 "naive %d ops (%.3f ms); bookkeeping of deferred and AGC checks %.3f ms\n",
            phases_text(p->phases), p->budget_mb, kept, t.ops[PLAN_PIGGYBACK],
            1e3 * t.time[PLAN_PIGGYBACK],
            t.segments, t.segments == 1 ? "" : "s", t.ops[PLAN_AGC], 1e3 * t.time[PLAN_AGC],
            1e3 * needless, t.ops[PLAN_DEFERRED], 1e3 * t.time[PLAN_DEFERRED],
            t.ops[PLAN_NAIVE], 1e3 * t.time[PLAN_NAIVE], 1e3 * keep);
    double ob, lb = dmr_plan_bounds(p, p->step_s, &ob);
    char held[160] = "";
    if (p->has_idle && t.window_s > p->idle_s)
        snprintf(held, sizeof held, "; %.3f ms of them the other ranks' checks at the step's end, "
                 "which the step without checks does not wait for", 1e3 * (t.window_s - p->idle_s));
    fprintf(out, "plan: windows %d (%.3f ms per step, %d used%s), predicted overhead %.3f ms per "
                 "step = %.1f%% of the profiled step %.3f ms; lower bound %.1f%% (checker time "
                 "not on recomputation %.3f ms minus the %s %.3f ms)",
            p->nwin, 1e3 * t.window_s, t.windows_used, held, 1e3 * p->overhead,
            p->step_s > 0 ? 100 * p->overhead / p->step_s : 0.0, 1e3 * p->step_s, 100 * lb,
            1e3 * t.exposed_s, p->has_idle ? "waits of the step without checks" : "windows",
            1e3 * (p->has_idle ? p->idle_s : t.window_s));
    if (p->has_order)
        fprintf(out, ", %.1f%% in time order (a check runs after its op: a wait holds only the "
                     "checks of the ops before it)", 100 * ob);
    else if (p->pre_bwd_s > 0)
        fprintf(out, ", %.1f%% in time order (%.3f ms of the windows come before the first "
                     "backward op: they can hold only the %.3f ms of forward checks)",
                100 * ob, 1e3 * p->pre_bwd_s, 1e3 * t.exposed_fwd_s);
    fprintf(out, "\n");
}

/* ---- the file ------------------------------------------------------------------------------ */

int dmr_plan_write(const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                   const char *path, const char *rank_line, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write the DMR plan: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# ftllm DMR plan (dmr.mode = planned, dmr.plan): one 'op' line per op entry of "
               "this rank's micro-batch tape\n# (entries 0..%d) and optimizer tape (entries "
               "%d..%d); '#' starts a comment. Made by `ftllm plan` or the\n# first "
               "dmr.profile_steps steps of `ftllm train`; checked against the tapes when read.\n",
            p->nmicro - 1, p->nmicro, p->n - 1);
    fprintf(f, "ftllm-dmr-plan 1\n%s\ntape %016llx entries %d optimizer %d\n", rank_line,
            (unsigned long long)p->tape_hash, p->nmicro, p->nopt);
    fprintf(f, "budget_mb %.6g phases %s profile_steps %d step_ms %.6f overhead_ms %.6f "
               "prebwd_ms %.6f",
            p->budget_mb, phases_text(p->phases), p->profile_steps, 1e3 * p->step_s,
            1e3 * p->overhead, 1e3 * p->pre_bwd_s);
    if (p->has_order) fprintf(f, " order_ms %.6f", 1e3 * p->order_s);
    if (p->has_idle) fprintf(f, " idle_ms %.6f", 1e3 * p->idle_s);
    fprintf(f, "\n");
    fprintf(f, "# window W after ENTRY kind pp|intra len_ms X use -|agc|deferred used_ms X\n");
    for (int w = 0; w < p->nwin; w++)
        fprintf(f, "window %d after %d kind %s len_ms %.6f use %s used_ms %.6f\n", w,
                p->win_after[w], g_kind_name[p->win_kind[w]], 1e3 * p->win_len[w],
                g_use_name[p->win_use[w]], 1e3 * p->win_used[w]);
    fprintf(f, "# op ENTRY KIND.DIR PHASE LAYER STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES "
               "COST_MS\n");
    for (int i = 0; i < p->n; i++) {
        if (p->strat[i] < 0) continue;
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = entry_of(micro, opt, i, &tp, &j);
        char w[16] = "-", sg[16] = "-";
        if (p->window[i] >= 0) snprintf(w, sizeof w, "%d", p->window[i]);
        if (p->seg[i] >= 0) snprintf(sg, sizeof sg, "%d", p->seg[i]);
        fprintf(f, "op %d %s.%s %s %d %s %s %s %.6f %zu %.6f\n", i, ops_desc(e->kind)->name,
                e->dir == FT_FWD ? "fwd" : "bwd", tp == opt ? "optimizer" : g_phase_name[e->phase],
                e->layer, planner_strategy_name(p->strat[i]), w, sg, 1e3 * p->time[i], p->kept[i],
                1e3 * p->cost[i]);
    }
    if (fclose(f)) {
        snprintf(err, errlen, "%s: cannot write the DMR plan: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A line's tokens (at most 24). */
static int split(char *s, char **tok)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " \t\r\n", &save); t && n < 24; t = strtok_r(NULL, " \t\r\n", &save))
        tok[n++] = t;
    return n;
}

static bool num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && !*end && !errno && isfinite(*v) && *v >= 0;
}

static bool int_of(const char *s, long lo, long hi, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || *end || errno || x < lo || x > hi) return false;
    *v = (int)x;
    return true;
}

/* "-" or an integer in [0, hi]. */
static bool opt_int(const char *s, int hi, int *v)
{
    if (!strcmp(s, "-")) return *v = -1, true;
    return int_of(s, 0, hi, v);
}

static int strategy_of(const char *s)
{
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, planner_strategy_name(k))) return k;
    return -1;
}

#define BAD(...) do { snprintf(msg, sizeof msg, __VA_ARGS__); goto bad; } while (0)

/* One 'op' line (tok[0] == "op"); *next: the entry expected next (op entries in order). */
static int read_op(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, char **tok, int nt,
                   int *next, char *msg, size_t len)
{
    int i, layer, win, seg;
    double t, c;
    if (nt != 11) return snprintf(msg, len, "an op line has 11 fields (op ENTRY KIND.DIR PHASE "
                                  "LAYER STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES COST_MS), "
                                  "not %d", nt), -1;
    if (!int_of(tok[1], 0, p->n - 1, &i))
        return snprintf(msg, len, "entry '%s': expected an integer in [0..%d]", tok[1], p->n - 1), -1;
    while (*next < p->n) { /* the op entry expected next */
        int k;
        const FtTape *tp;
        if (entry_of(micro, opt, *next, &tp, &k)->kind != FT_OP_MARK) break;
        (*next)++;
    }
    if (i != *next)
        return snprintf(msg, len, "entry %d: expected the op entry %d next (one line per op "
                        "entry, in order)", i, *next), -1;
    (*next)++;
    const FtTape *tp;
    int j;
    const FtTapeEntry *e = entry_of(micro, opt, i, &tp, &j);
    char op[48];
    snprintf(op, sizeof op, "%s.%s", ops_desc(e->kind)->name, e->dir == FT_FWD ? "fwd" : "bwd");
    const char *ph = tp == opt ? "optimizer" : g_phase_name[e->phase];
    if (strcmp(tok[2], op) || strcmp(tok[3], ph) || !int_of(tok[4], -1, 1 << 20, &layer) ||
        layer != e->layer)
        return snprintf(msg, len, "entry %d is %s %s layer %d on this rank's tape, not '%s %s "
                        "%s' (the plan is for another model, layout or train.ac)", i, op, ph,
                        e->layer, tok[2], tok[3], tok[4]), -1;
    int s = strategy_of(tok[5]);
    if (s < 0)
        return snprintf(msg, len, "strategy '%s': expected piggyback, naive, deferred or agc",
                        tok[5]), -1;
    if (s == PLAN_PIGGYBACK && !dmr_entry_piggyback(tp, e))
        return snprintf(msg, len, "entry %d (%s): piggyback needs an AC recomputation twin "
                        "writing floats; this entry has none", i, op), -1;
    if ((s == PLAN_DEFERRED || s == PLAN_AGC) && !dmr_entry_deferrable(tp, e))
        return snprintf(msg, len, "entry %d (%s) writes integers (addresses for later ops): it "
                        "cannot be deferred, only naive or piggyback", i, op), -1;
    if (!opt_int(tok[6], p->nwin - 1, &win))
        return snprintf(msg, len, "window '%s': expected - or an integer in [0..%d]", tok[6],
                        p->nwin - 1), -1;
    if (!opt_int(tok[7], 1 << 20, &seg))
        return snprintf(msg, len, "segment '%s': expected - or an integer >= 0", tok[7]), -1;
    if (tp == micro && e->phase == FT_PH_RECOMPUTE && e->twin >= 0 && e->twin < i &&
        (s == PLAN_PIGGYBACK) != (p->strat[e->twin] == PLAN_PIGGYBACK))
        return snprintf(msg, len, "entry %d recomputes entry %d: piggyback is for both or "
                        "neither (the recomputation is the forward's checker)", i, e->twin), -1;
    if (s == PLAN_AGC && seg < 0)
        return snprintf(msg, len, "entry %d: strategy agc needs a segment", i), -1;
    if (seg >= 0 && s != PLAN_AGC && s != PLAN_PIGGYBACK)
        return snprintf(msg, len, "entry %d: only agc ops and piggyback ops replayed inside a "
                        "segment have one, not %s", i, tok[5]), -1;
    if (!num(tok[8], &t) || !num(tok[10], &c))
        return snprintf(msg, len, "time_ms '%s' / cost_ms '%s': expected numbers >= 0", tok[8],
                        tok[10]), -1;
    char *end;
    errno = 0;
    unsigned long long kept = strtoull(tok[9], &end, 10);
    if (end == tok[9] || *end || errno || tok[9][0] == '-')
        return snprintf(msg, len, "kept_bytes '%s': expected an integer >= 0", tok[9]), -1;
    p->strat[i] = s, p->window[i] = win, p->seg[i] = seg;
    p->time[i] = t / 1e3, p->cost[i] = c / 1e3, p->kept[i] = (size_t)kept;
    if (seg + 1 > p->nseg) p->nseg = seg + 1;
    return 0;
}

/* One 'window' line (tok[0] == "window"), appended to p's windows. */
static int read_window(FtDmrEntryPlan *p, char **tok, int nt, char *msg, size_t len)
{
    int w, after, kind = -1, use = -1;
    double wl, used;
    if (nt != 12 || !int_of(tok[1], 0, 1 << 30, &w) || strcmp(tok[2], "after") ||
        !int_of(tok[3], -1, p->n - 1, &after) || strcmp(tok[4], "kind") ||
        strcmp(tok[6], "len_ms") || !num(tok[7], &wl) || strcmp(tok[8], "use") ||
        strcmp(tok[10], "used_ms") || !num(tok[11], &used))
        return snprintf(msg, len, "expected 'window %d after ENTRY kind pp|intra len_ms X use "
                        "-|agc|deferred used_ms X' (ENTRY in [-1..%d], times >= 0)", p->nwin,
                        p->n - 1), -1;
    if (w != p->nwin) return snprintf(msg, len, "window %d: expected window %d next", w, p->nwin), -1;
    if (p->nwin && after < p->win_after[p->nwin - 1])
        return snprintf(msg, len, "window %d opens after entry %d, before window %d (entry %d): "
                        "windows come in order", w, after, w - 1, p->win_after[w - 1]), -1;
    for (int k = 0; k < 2; k++)
        if (!strcmp(tok[5], g_kind_name[k])) kind = k;
    for (int k = 1; k < 4; k++)
        if (!strcmp(tok[9], g_use_name[k])) use = k == 1 ? 0 : k;
    if (kind < 0) return snprintf(msg, len, "window kind '%s': expected pp or intra", tok[5]), -1;
    if (use < 0) return snprintf(msg, len, "window use '%s': expected -, agc or deferred", tok[9]), -1;
    size_t c = (size_t)p->nwin + 2;
    int *a = realloc(p->win_after, c * sizeof *a), *k = realloc(p->win_kind, c * sizeof *k);
    p->win_after = a ? a : p->win_after, p->win_kind = k ? k : p->win_kind;
    int *u = realloc(p->win_use, c * sizeof *u);
    p->win_use = u ? u : p->win_use;
    double *l = realloc(p->win_len, c * sizeof *l), *d = realloc(p->win_used, c * sizeof *d);
    p->win_len = l ? l : p->win_len, p->win_used = d ? d : p->win_used;
    FT_ASSERT(a && k && u && l && d);
    p->win_after[w] = after, p->win_kind[w] = kind, p->win_use[w] = use;
    p->win_len[w] = wl / 1e3, p->win_used[w] = used / 1e3;
    p->nwin++;
    return 0;
}

int dmr_plan_read(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const char *path,
                  const char *rank_line, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the DMR plan: %s (dmr.plan)", path, strerror(errno));
        return -1;
    }
    char line[1024], copy[1024], msg[512] = "", *tok[24];
    int ln = 0, state = 0, next = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) BAD("line longer than %zu characters", sizeof line - 2);
        snprintf(copy, sizeof copy, "%s", line);
        int nt = split(copy, tok);
        if (nt == 0 || tok[0][0] == '#') continue;
        if (state == 0) {
            if (nt != 2 || strcmp(tok[0], "ftllm-dmr-plan") || strcmp(tok[1], "1"))
                BAD("expected 'ftllm-dmr-plan 1' (not a DMR plan file, or another version)");
        } else if (state == 1) {
            line[strcspn(line, "\r\n")] = 0;
            if (strcmp(line, rank_line))
                BAD("'%.120s': this plan is for another rank or layout (expected '%.120s')", line,
                    rank_line);
        } else if (state == 2) {
            int nm, no;
            unsigned long long h = 0;
            if (nt != 6 || strcmp(tok[0], "tape") || sscanf(tok[1], "%llx", &h) != 1 ||
                strcmp(tok[2], "entries") || !int_of(tok[3], 0, 1 << 30, &nm) ||
                strcmp(tok[4], "optimizer") || !int_of(tok[5], 0, 1 << 30, &no))
                BAD("expected 'tape HASH entries N optimizer N'");
            if (h != dmr_tape_hash(micro, opt) || nm != micro->ne || no != opt->ne)
                BAD("the plan was made for other tapes (hash %016llx, %d + %d entries; this "
                    "rank's: %016llx, %d + %d): model, layout or train.ac differ (HINT: make it "
                    "again with ftllm plan)", h, nm, no,
                    (unsigned long long)dmr_tape_hash(micro, opt), micro->ne, opt->ne);
            plan_alloc(p, nm, no, 0);
            p->tape_hash = h, p->fwd_end = micro->fwd_end;
        } else if (state == 3) {
            double mb, st, ov, pb = 0, ob = -1, ib = -1;
            int ps;
            /* [prebwd_ms X] [order_ms X] [idle_ms X] */
            bool opt_ok = nt >= 10 && nt <= 16 && nt % 2 == 0;
            for (int k = 10; opt_ok && k < nt; k += 2)
                opt_ok = k == 10 && !strcmp(tok[k], "prebwd_ms") ? num(tok[k + 1], &pb) && pb >= 0
                         : !strcmp(tok[k], "order_ms") && ob < 0 ? num(tok[k + 1], &ob) && ob >= 0
                         : !strcmp(tok[k], "idle_ms") && ib < 0  ? num(tok[k + 1], &ib) && ib >= 0
                                                                 : false;
            if (!opt_ok || strcmp(tok[0], "budget_mb") || !num(tok[1], &mb) ||
                strcmp(tok[2], "phases") || strcmp(tok[4], "profile_steps") ||
                !int_of(tok[5], 0, 1000000, &ps) || strcmp(tok[6], "step_ms") ||
                !num(tok[7], &st) || strcmp(tok[8], "overhead_ms") || !num(tok[9], &ov))
                BAD("expected 'budget_mb X phases P profile_steps N step_ms X overhead_ms X "
                    "[prebwd_ms X] [order_ms X] [idle_ms X]'");
            p->pre_bwd_s = pb / 1e3, p->has_order = ob >= 0, p->order_s = ob >= 0 ? ob / 1e3 : 0;
            p->has_idle = ib >= 0, p->idle_s = ib >= 0 ? ib / 1e3 : 0;
            p->phases = !strcmp(tok[3], "1")       ? PLAN_PHASE1
                        : !strcmp(tok[3], "1,2")   ? PLAN_PHASE1 | PLAN_PHASE2
                        : !strcmp(tok[3], "1,2,3") ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3
                        : !strcmp(tok[3], "paper")
                            ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER
                            : 0;
            if (!p->phases) BAD("phases '%s': expected 1, 1,2, 1,2,3 or paper", tok[3]);
            p->budget_mb = mb, p->profile_steps = ps, p->step_s = st / 1e3, p->overhead = ov / 1e3;
        } else if (!strcmp(tok[0], "window")) {
            if (next > 0) BAD("window lines come before the op lines");
            if (read_window(p, tok, nt, msg, sizeof msg)) goto bad;
        } else if (!strcmp(tok[0], "op")) {
            if (read_op(p, micro, opt, tok, nt, &next, msg, sizeof msg)) goto bad;
        } else {
            BAD("'%s': expected a window or op line", tok[0]);
        }
        if (state < 4) state++;
    }
    if (ferror(f)) BAD("read error: %s", strerror(errno));
    if (state < 4) BAD("the file ends before its header is complete");
    while (next < p->n) {
        const FtTape *tp;
        int k;
        if (entry_of(micro, opt, next, &tp, &k)->kind != FT_OP_MARK)
            BAD("the file ends before the op line of entry %d (every op entry has one)", next);
        next++;
    }
    fclose(f);
    return 0;
bad:
    fclose(f);
    snprintf(err, errlen, "%s:%d: %s", path, ln, msg);
    dmr_plan_free(p);
    return -1;
}

/* dmr_plan.c: the DMR plan in tape-entry space: the profile, profile to planner input and back
 * (one slot per op execution of a step), totals, bounds and the table (dmr_plan.h); the plan
 * file is dmr_plan_file.c.
 *
 * Key decisions:
 *  - The planner (planner.h) sees only the executions that may be planned, in the profile's
 *    time order; the mapping back to slots is one index array. Integer-writing entries are
 *    naive before the planner runs.
 *  - Without a usable time order the plan has one slot per entry (the waits at their entries):
 *    the same code with a sequence made from the entry order. */
#include "ftllm/dmr_plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "dmr_plan_impl.h"

const char *const dmr_phase_names[3] = {"forward", "backward", "recompute"};
const char *const dmr_kind_names[2] = {"pp", "intra"};
const char *const dmr_use_names[4] = {"-", "-", "agc", "deferred"};

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

void dmr_profile_seq(FtDmrProfile *pf, int pos, int idx, int inst, double wait, double wait_pp)
{
    if (pf->seq_bad) return;
    if (idx < 0) { /* the step's end: what came after its last op */
        if (pf->seq_done && pos != pf->nseq) pf->seq_bad = true;
        pf->seq_tail += wait, pf->seq_tail_pp += wait_pp, pf->seq_done = true;
        return;
    }
    if (pf->seq_done) {
        if (pos >= pf->nseq || pf->seq[pos] != idx || pf->seq_inst[pos] != inst) pf->seq_bad = true;
        else pf->seq_wait[pos] += wait, pf->seq_wait_pp[pos] += wait_pp;
        return;
    }
    if (pos != pf->nseq) { /* not called for every op: no sequence */
        pf->seq_bad = true;
        return;
    }
    if (pf->nseq == pf->capseq) {
        int cap = pf->capseq ? 2 * pf->capseq : 256;
        int *s = realloc(pf->seq, (size_t)cap * sizeof *s);
        FT_ASSERT(s);
        pf->seq = s;
        int *m = realloc(pf->seq_inst, (size_t)cap * sizeof *m);
        FT_ASSERT(m);
        pf->seq_inst = m;
        double *w = realloc(pf->seq_wait, (size_t)cap * sizeof *w);
        FT_ASSERT(w);
        pf->seq_wait = w;
        double *wp = realloc(pf->seq_wait_pp, (size_t)cap * sizeof *wp);
        FT_ASSERT(wp);
        pf->seq_wait_pp = wp, pf->capseq = cap;
    }
    pf->seq[pf->nseq] = idx, pf->seq_inst[pf->nseq] = inst;
    pf->seq_wait[pf->nseq] = wait, pf->seq_wait_pp[pf->nseq++] = wait_pp;
}

void dmr_profile_free(FtDmrProfile *pf)
{
    free(pf->time), free(pf->copy), free(pf->fp), free(pf->wait_pp), free(pf->wait_other);
    free(pf->seq), free(pf->seq_inst), free(pf->seq_wait), free(pf->seq_wait_pp);
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
    d.seq_inst = grow_copy(dst->seq_inst, src->seq_inst, ns * sizeof *src->seq_inst);
    d.seq_wait = grow_copy(dst->seq_wait, src->seq_wait, ns * sizeof *src->seq_wait);
    d.seq_wait_pp = grow_copy(dst->seq_wait_pp, src->seq_wait_pp, ns * sizeof *src->seq_wait_pp);
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

/* Blocks of one micro-batch: 0 outside the blocks, layer + 1 inside. */
static int blocks_per_micro(const FtTape *micro)
{
    int top = -1;
    for (int j = 0; j < micro->ne; j++)
        if (micro->e[j].layer > top) top = micro->e[j].layer;
    return top + 2;
}

/* The planner's block of micro-batch m's execution of entry i, nb blocks per micro-batch and M
 * micro-batches: (m, layer + 1), the optimizer's after all of them. */
static int exec_block(const FtTape *micro, int nb, int M, int i, int m)
{
    return i < micro->ne ? m * nb + micro->e[i].layer + 1 : M * nb;
}

const FtTapeEntry *dmr_plan_entry_of(const FtTape *micro, const FtTape *opt, int i,
                                     const FtTape **tp, int *k)
{
    *k = i < micro->ne ? i : i - micro->ne;
    *tp = i < micro->ne ? micro : opt;
    return &(*tp)->e[*k];
}

void dmr_plan_free(FtDmrEntryPlan *p)
{
    if (!p) return;
    free(p->strat), free(p->seg), free(p->window), free(p->time), free(p->kept), free(p->cost);
    free(p->pos);
    free(p->win_after), free(p->win_kind), free(p->win_use), free(p->win_len), free(p->win_used);
    memset(p, 0, sizeof *p);
}

void dmr_plan_alloc(FtDmrEntryPlan *p, int nmicro, int nopt, int ninst, bool order, int nwin)
{
    memset(p, 0, sizeof *p);
    p->nmicro = nmicro, p->nopt = nopt, p->ninst = ninst > 1 ? ninst : 1;
    p->n = p->ninst * nmicro + nopt, p->nwin = nwin;
    size_t n = (size_t)p->n + 1, w = (size_t)nwin + 1;
    p->strat = malloc(n * sizeof *p->strat), p->seg = malloc(n * sizeof *p->seg);
    p->window = malloc(n * sizeof *p->window), p->time = calloc(n, sizeof *p->time);
    p->kept = calloc(n, sizeof *p->kept), p->cost = calloc(n, sizeof *p->cost);
    p->pos = order ? malloc(n * sizeof *p->pos) : NULL;
    p->win_after = calloc(w, sizeof *p->win_after), p->win_kind = calloc(w, sizeof *p->win_kind);
    p->win_use = calloc(w, sizeof *p->win_use), p->win_len = calloc(w, sizeof *p->win_len);
    p->win_used = calloc(w, sizeof *p->win_used);
    FT_ASSERT(p->strat && p->seg && p->window && p->time && p->kept && p->cost &&
              (p->pos || !order) && p->win_after && p->win_kind && p->win_use && p->win_len &&
              p->win_used);
    for (int i = 0; i < p->n; i++) {
        p->strat[i] = -1, p->seg[i] = p->window[i] = -1;
        if (p->pos) p->pos[i] = -1;
    }
}

/* ---- build --------------------------------------------------------------------------------- */

/* The step's op executions in time order as the plan sees them (dmr_plan_build). */
typedef struct steps {
    int n, ninst;       /* executions; micro-batches planned apart */
    int *ent, *inst;    /* [n] entry and micro-batch of each */
    double *wpp, *woth; /* [n + 1] waits just before each, pipeline and others ([n]: after the
                           last), summed over the steps */
    bool real;          /* the profile's sequence (else one per op entry, in entry order) */
    int last_micro;     /* the last execution of a micro-batch entry (-1: none) */
} Steps;

static void steps_free(Steps *s)
{
    free(s->ent), free(s->inst), free(s->wpp), free(s->woth);
    memset(s, 0, sizeof *s);
}

/* Whether the profile's sequence can be the plan's time order: every micro-batch op entry
 * executed once in each of the same micro-batches 0..M-1, every optimizer op entry once (0),
 * no marker. *ninst gets M. */
static bool seq_usable(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, int *ninst)
{
    int nm = micro->ne, n = nm + opt->ne, M = 0;
    if (!pf->seq_done || pf->seq_bad || pf->nseq <= 0 || !pf->seq_inst) return false;
    for (int k = 0; k < pf->nseq; k++) {
        int e = pf->seq[k], m = pf->seq_inst[k];
        if (e < 0 || e >= n || m < 0 || m >= pf->nseq || (e >= nm && m != 0))
            return false;
        if (e < nm && m + 1 > M) M = m + 1;
    }
    if (M == 0) M = 1;
    const FtDmrEntryPlan shape = {.nmicro = nm, .nopt = opt->ne, .ninst = M}; /* its slots */
    unsigned char *seen = calloc((size_t)M * (size_t)nm + (size_t)opt->ne + 1, 1);
    FT_ASSERT(seen);
    bool ok = true;
    for (int k = 0; k < pf->nseq && ok; k++) {
        int e = pf->seq[k], s = dmr_plan_slot(&shape, e, pf->seq_inst[k]);
        const FtTape *tp;
        int j;
        ok = !seen[s] && dmr_plan_entry_of(micro, opt, e, &tp, &j)->kind != FT_OP_MARK;
        seen[s] = 1;
    }
    for (int e = 0; e < n && ok; e++) {
        const FtTape *tp;
        int j;
        if (dmr_plan_entry_of(micro, opt, e, &tp, &j)->kind == FT_OP_MARK) continue;
        for (int m = 0; m < (e < nm ? M : 1) && ok; m++) ok = seen[dmr_plan_slot(&shape, e, m)];
    }
    free(seen);
    *ninst = M;
    return ok;
}

static void steps_of(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, Steps *st)
{
    memset(st, 0, sizeof *st);
    int nm = micro->ne, n = nm + opt->ne;
    st->real = seq_usable(pf, micro, opt, &st->ninst);
    int cap = st->real ? pf->nseq : n;
    st->ent = malloc(((size_t)cap + 1) * sizeof *st->ent);
    st->inst = malloc(((size_t)cap + 1) * sizeof *st->inst);
    st->wpp = calloc((size_t)cap + 2, sizeof *st->wpp);
    st->woth = calloc((size_t)cap + 2, sizeof *st->woth);
    FT_ASSERT(st->ent && st->inst && st->wpp && st->woth);
    st->last_micro = -1;
    if (st->real) {
        st->n = pf->nseq;
        for (int k = 0; k < pf->nseq; k++) {
            st->ent[k] = pf->seq[k], st->inst[k] = pf->seq_inst[k];
            st->wpp[k] = pf->seq_wait_pp[k];
            st->woth[k] = fmax(0.0, pf->seq_wait[k] - pf->seq_wait_pp[k]);
            if (pf->seq[k] < nm) st->last_micro = k;
        }
        st->wpp[st->n] = pf->seq_tail_pp, st->woth[st->n] = fmax(0.0, pf->seq_tail - pf->seq_tail_pp);
        return;
    }
    /* one execution per op entry; the waits booked after entry i - 1 go before the next op */
    st->ninst = 1;
    double wp = 0, wo = 0;
    for (int i = 0; i <= n; i++) {
        wp += pf->wait_pp[i], wo += pf->wait_other[i];
        if (i == n) break;
        const FtTape *tp;
        int j;
        if (dmr_plan_entry_of(micro, opt, i, &tp, &j)->kind == FT_OP_MARK) continue;
        st->ent[st->n] = i, st->inst[st->n] = 0, st->wpp[st->n] = wp, st->woth[st->n++] = wo;
        wp = wo = 0;
    }
    st->wpp[st->n] = wp, st->woth[st->n] = wo;
}

/* The waits' scale of dmr_plan_build: measured under naive checks, to the step without them. */
static double wait_scale(const FtDmrProfile *pf)
{
    return pf->wall_s > 0 && pf->step_s > 0 && pf->step_s < pf->wall_s ? pf->step_s / pf->wall_s
                                                                        : 1.0;
}

size_t dmr_plan_held_peak(const FtDmrEntryPlan *p, const unsigned char *skip)
{
    int npos = 0;
    for (int s = 0; s < p->n; s++)
        if (dmr_plan_pos(p, s) + 1 > npos) npos = dmr_plan_pos(p, s) + 1;
    long long *d = calloc((size_t)npos + 2, sizeof *d); /* over the time order */
    FT_ASSERT(d);
    for (int g = 0; g < p->nseg; g++) {
        int first = -1, last = -1, w = -1; /* members by place */
        for (int s = 0; s < p->n; s++) {
            if (p->seg[s] != g || dmr_plan_pos(p, s) < 0) continue;
            if (first < 0 || dmr_plan_pos(p, s) < dmr_plan_pos(p, first)) first = s;
            if (last < 0 || dmr_plan_pos(p, s) > dmr_plan_pos(p, last)) last = s;
            if (p->window[s] >= 0) w = p->window[s]; /* covered members: its window */
        }
        if (first < 0 || w < 0) continue;
        int lo = dmr_plan_pos(p, first), hi = dmr_plan_pos(p, p->win_after[w]);
        if (hi < lo) continue;
        long long m = (long long)(p->kept[first] + (last != first ? p->kept[last] : 0));
        d[lo] += m, d[hi + 1] -= m;
    }
    for (int s = 0; s < p->n; s++) {
        int w = p->window[s];
        if (p->strat[s] != PLAN_DEFERRED || w < 0 || (skip && skip[s])) continue;
        int lo = dmr_plan_pos(p, s), hi = dmr_plan_pos(p, p->win_after[w]);
        if (lo < 0 || hi < lo) continue;
        d[lo] += (long long)p->kept[s], d[hi + 1] -= (long long)p->kept[s];
    }
    long long run = 0, peak = 0;
    for (int i = 0; i < npos; i++) {
        run += d[i];
        if (run > peak) peak = run;
    }
    free(d);
    return (size_t)peak;
}

int dmr_plan_build(const FtDmrProfile *pf, const FtTape *micro, const FtTape *opt, size_t budget,
                   int phases, FtDmrEntryPlan *p)
{
    FT_ASSERT(pf->nmicro == micro->ne && pf->nopt == opt->ne);
    int nm = micro->ne, n = nm + opt->ne, steps = pf->steps > 0 ? pf->steps : 1, rc = -1;
    Steps st;
    steps_of(pf, micro, opt, &st);
    int M = st.ninst, ns = M * nm + opt->ne, nb = blocks_per_micro(micro);
    const FtDmrEntryPlan shape = {.nmicro = nm, .nopt = opt->ne, .ninst = M}; /* its slots */
    FtPlanOp *ops = calloc((size_t)st.n + 1, sizeof *ops);
    FtPlanWindow *win = calloc(2 * ((size_t)st.n + 1), sizeof *win);
    int *oslot = malloc(((size_t)st.n + 1) * sizeof *oslot);
    int *opi = malloc(((size_t)ns + 1) * sizeof *opi), *runs = calloc((size_t)n + 1, sizeof *runs);
    int *went = malloc(2 * ((size_t)st.n + 1) * sizeof *went);
    FtDmrPlan pl = {0};
    if (!ops || !win || !oslot || !opi || !runs || !went) goto out;
    for (int k = 0; k < st.n; k++) runs[st.ent[k]]++;
    for (int s = 0; s < ns; s++) opi[s] = -1;
    int nops = 0, nwin = 0, last = -1;
    double scale = wait_scale(pf); /* waits measured under naive checks */
    double idle = 0; /* the waits as the step without checks has them */
    for (int k = 0; k <= st.n; k++) {
        /* the waits just before execution k: one window per kind; those after the rank's last
         * micro-batch op keep their measured length (dmr_plan.h) */
        double sc = st.real && k > st.last_micro ? 1.0 : scale;
        double w[2] = {sc * st.wpp[k] / steps, sc * st.woth[k] / steps};
        idle += scale * (st.wpp[k] + st.woth[k]) / steps;
        int before = k > 0 ? dmr_plan_slot(&shape, st.ent[k - 1], st.inst[k - 1]) : -1;
        int blk = k > 0 ? exec_block(micro, nb, M, st.ent[k - 1], st.inst[k - 1]) : 0;
        for (int q = 0; q < 2; q++) {
            if (!(w[q] > 0)) continue;
            win[nwin] = (FtPlanWindow){.after = last, .len = w[q],
                                       .kind = q == 0 ? PLAN_WIN_PP : PLAN_WIN_INTRA, .block = blk};
            went[nwin++] = before;
        }
        if (k == st.n) break;
        int i = st.ent[k], s = dmr_plan_slot(&shape, i, st.inst[k]), j;
        const FtTape *tp;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        if (!dmr_entry_deferrable(tp, e)) continue;
        if (pf->moe_dynamic && e->kind == FT_OP_MOE_EXPERT && e->twin < 0) continue; /* run time */
        double per = 1.0 / steps / runs[i];
        ops[nops] = (FtPlanOp){.name = ops_desc(e->kind)->name, .time = pf->time[i] * per,
                               .mem = dmr_entry_kept(tp, j), .recomputed = e->twin >= 0,
                               .block = exec_block(micro, nb, M, i, st.inst[k]),
                               .copy = pf->copy[i] * per, .fp = pf->fp[i] * per};
        opi[s] = nops, oslot[nops++] = s, last = nops - 1;
    }
    if (planner_run(ops, nops, win, nwin, budget, phases, &pl)) goto out;
    dmr_plan_alloc(p, nm, opt->ne, M, true, nwin);
    for (int k = 0; k < st.n; k++) p->pos[dmr_plan_slot(p, st.ent[k], st.inst[k])] = k;
    p->phases = phases, p->budget_mb = (double)budget / (1024.0 * 1024.0);
    p->step_s = pf->step_s / steps, p->overhead = pl.overhead, p->nseg = pl.nseg;
    p->pre_bwd_s = scale * pf->pre_bwd_s / steps, p->fwd_end = micro->fwd_end;
    p->has_idle = true, p->idle_s = idle;
    p->tape_hash = dmr_tape_hash(micro, opt);
    for (int s = 0; s < ns; s++) {
        int m, i = dmr_plan_entry(p, s, &m), j;
        const FtTape *tp;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        if (e->kind == FT_OP_MARK) continue;
        p->time[s] = runs[i] ? pf->time[i] / steps / runs[i] : 0, p->kept[s] = dmr_entry_kept(tp, j);
        int o = opi[s];
        if (o < 0) { /* writes integers, decided at run time, or never ran: naive */
            p->strat[s] = PLAN_NAIVE, p->cost[s] = p->time[s];
            p->overhead += p->time[s];
            continue;
        }
        p->strat[s] = pl.strategy[o], p->window[s] = pl.window[o];
        p->cost[s] = pl.strategy[o] == PLAN_NAIVE      ? p->time[s]
                     : pl.strategy[o] == PLAN_DEFERRED ? ops[o].copy + ops[o].fp
                                                       : 0;
    }
    for (int g = 0; g < pl.nseg; g++) { /* members: block b's ops from first to last */
        int b = ops[pl.seg_first[g]].block;
        for (int o = pl.seg_first[g]; o <= pl.seg_last[g]; o++)
            if (ops[o].block == b) {
                p->seg[oslot[o]] = g;
                if (pl.strategy[o] == PLAN_PIGGYBACK) p->cost[oslot[o]] = ops[o].time; /* extra */
                p->cost[oslot[o]] +=
                    ops[o].fp + (o == pl.seg_first[g] || o == pl.seg_last[g] ? ops[o].copy : 0);
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
    steps_free(&st);
    free(ops), free(win), free(oslot), free(opi), free(runs), free(went);
    return rc;
}

/* ---- totals and table ---------------------------------------------------------------------- */

void dmr_plan_totals(const FtDmrEntryPlan *p, FtDmrPlanTotals *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < p->n; i++) {
        int s = p->strat[i];
        if (s < 0) continue;
        int m, e = dmr_plan_entry(p, i, &m);
        t->ops[s]++, t->time[s] += p->time[i], t->cost[s] += p->cost[i];
        if (s != PLAN_PIGGYBACK) t->exposed_s += p->time[i];
        if (s != PLAN_PIGGYBACK && e < p->fwd_end) t->exposed_fwd_s += p->time[i];
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
    if (!pf || !pf->seq_done || pf->seq_bad || pf->nseq <= 0 || pf->nmicro != p->nmicro ||
        pf->nopt != p->nopt)
        return -1;
    int steps = pf->steps > 0 ? pf->steps : 1;
    double scale = wait_scale(pf), *w = malloc(((size_t)pf->nseq + (size_t)p->n) * sizeof *w);
    int *slot = malloc(((size_t)pf->nseq + 1) * sizeof *slot);
    FT_ASSERT(w && slot);
    double *t = w + pf->nseq;
    for (int k = 0; k < pf->nseq; k++) {
        w[k] = scale * pf->seq_wait[k] / steps;
        int m = pf->seq_inst ? pf->seq_inst[k] : 0;
        bool fits = p->ninst <= 1 || pf->seq[k] >= p->nmicro || (m >= 0 && m < p->ninst);
        slot[k] = pf->seq[k] >= 0 && pf->seq[k] < p->nmicro + p->nopt && fits
                      ? dmr_plan_slot(p, pf->seq[k], m)
                      : -1;
    }
    for (int i = 0; i < p->n; i++) t[i] = f * p->time[i];
    double x = dmr_order_excess(p->strat, t, p->n, slot, w, pf->nseq, scale * pf->seq_tail / steps);
    free(w), free(slot);
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

const char *dmr_op_label(const FtTapeEntry *e, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%s", ops_desc(e->kind)->name, e->dir == FT_FWD ? "fwd" : "bwd");
    return buf;
}

const char *dmr_phase_label(const FtTape *tp, const FtTape *opt, const FtTapeEntry *e)
{
    return tp == opt ? "optimizer" : dmr_phase_names[e->phase];
}

const char *dmr_phases_text(int phases)
{
    return phases == (PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER) ? "paper"
           : phases == (PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3)            ? "1,2,3"
           : phases == (PLAN_PHASE1 | PLAN_PHASE2)                          ? "1,2"
           : phases == PLAN_PHASE1                                          ? "1"
                                                                            : "?";
}

int dmr_plan_time_order(const FtDmrEntryPlan *p, int **order)
{
    int npos = 0, k = 0;
    for (int s = 0; s < p->n; s++)
        if (dmr_plan_pos(p, s) + 1 > npos) npos = dmr_plan_pos(p, s) + 1;
    int *at = malloc(((size_t)npos + 1) * sizeof *at), *o = malloc(((size_t)p->n + 1) * sizeof *o);
    FT_ASSERT(at && o);
    for (int i = 0; i < npos; i++) at[i] = -1;
    for (int s = 0; s < p->n; s++)
        if (p->strat[s] >= 0 && dmr_plan_pos(p, s) >= 0) at[dmr_plan_pos(p, s)] = s;
    for (int i = 0; i < npos; i++)
        if (at[i] >= 0) o[k++] = at[i];
    for (int s = 0; s < p->n; s++)
        if (p->strat[s] >= 0 && dmr_plan_pos(p, s) < 0) o[k++] = s;
    free(at);
    *order = o;
    return k;
}

void dmr_plan_print_table(FILE *out, const FtDmrEntryPlan *p, const FtTape *micro,
                          const FtTape *opt)
{
    fprintf(out, "%6s %3s  %-18s %-9s %5s  %-9s %6s %4s %10s %10s\n", "entry", "mb", "op", "phase",
            "layer", "strategy", "window", "seg", "time_ms", "cost_ms");
    int *order, no = dmr_plan_time_order(p, &order);
    for (int k = 0; k < no; k++) {
        int s = order[k], m, i = dmr_plan_entry(p, s, &m);
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        char op[40], w[16] = "-", sg[16] = "-", mb[16] = "*";
        dmr_op_label(e, op, sizeof op);
        if (p->window[s] >= 0)
            snprintf(w, sizeof w, "%s%d", dmr_kind_names[p->win_kind[p->window[s]]], p->window[s]);
        if (p->seg[s] >= 0) snprintf(sg, sizeof sg, "%d", p->seg[s]);
        if (p->pos) snprintf(mb, sizeof mb, "%d", m); /* *: every one (a version 1 plan) */
        fprintf(out, "%6d %3s  %-18s %-9s %5d  %-9s %6s %4s %10.4f %10.4f\n", i, mb, op,
                dmr_phase_label(tp, opt, e), e->layer,
                planner_strategy_name(p->strat[s]), w, sg, 1e3 * p->time[s], 1e3 * p->cost[s]);
    }
    free(order);
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
    if (p->ninst > 1)
        snprintf(kept, sizeof kept, "its checks keep at most %.1f MiB at once; the step's %d "
                 "micro-batches planned apart", at_once, p->ninst);
    else
        snprintf(kept, sizeof kept, "its checks keep at most %.1f MiB at once", at_once);
    fprintf(out, "plan: phases %s, budget %.1f MiB (%s); phase 1 piggyback %d op executions (%.3f "
                 "ms hidden in AC recomputation); phase 2 agc %d segment%s, %d (%.3f ms in PP "
                 "windows, %.3f ms replayed needlessly); phase 3 deferred %d (%.3f ms in windows); "
                 "naive %d (%.3f ms); bookkeeping of deferred and AGC checks %.3f ms\n",
            dmr_phases_text(p->phases), p->budget_mb, kept, t.ops[PLAN_PIGGYBACK],
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


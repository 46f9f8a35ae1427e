/* dmr_pipesim.c: a pipeline's step under DMR plans, simulated, and the stages' plans refined
 * together (dmr_pipesim.h).
 *
 * Key decisions:
 *  - Event order, not a priority queue: each stage advances until a receive whose send is not
 *    known yet, or its barrier; the stages are swept in turn until all are done (a sweep without
 *    progress: a receive nobody sends, the input is rejected). Deterministic: the same input
 *    gives the same bits on every rank.
 *  - The queue of deferred units is the runtime's (dmr_defer.c): creation order, the unit
 *    being replayed first, an AGC unit open until its segment's last member; memory charged per
 *    member and released with the unit; over the budget, demoted at once. Units done are
 *    skipped through a path-compressed link (next_live): an open AGC unit at the head used to
 *    make every wait rescan the whole queue (65% of plan --predict's time on Llama-3-70B: 4.5x
 *    faster with it, the same steps).
 *  - The search is first-improvement hill climbing over single flips; a flip is kept only when
 *    the simulated step shrinks by more than a relative 1e-9 (rounding) and demotions do not
 *    grow. */
#include "ftllm/dmr_pipesim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "dmr_plan_impl.h"

/* ---- building a stage ---------------------------------------------------------------------- */

static void rank_alloc(FtPipeRank *r, int n, int nslot)
{
    r->n = n, r->nslot = nslot;
    size_t a = (size_t)n + 1, b = (size_t)nslot + 1;
    r->slot = calloc(a, sizeof *r->slot), r->recv = malloc(a * sizeof *r->recv);
    r->send = malloc(a * sizeof *r->send), r->dur = calloc(a, sizeof *r->dur);
    r->lat = calloc(a, sizeof *r->lat);
    r->wait = calloc(a + 1, sizeof *r->wait);
    r->strat = malloc(b * sizeof *r->strat), r->seg = malloc(b * sizeof *r->seg);
    r->flip = calloc(b, 1), r->chk = calloc(b, sizeof *r->chk), r->keep = calloc(b, sizeof *r->keep);
    r->inl = calloc(b, sizeof *r->inl), r->kept = calloc(b, sizeof *r->kept);
    r->group = malloc(b * sizeof *r->group);
    r->replayed_before = malloc(b * sizeof *r->replayed_before);
    r->start = calloc(a, sizeof *r->start);
    FT_ASSERT(r->start && r->lat && r->group && r->slot && r->recv && r->send && r->dur && r->wait && r->strat && r->seg &&
              r->flip && r->chk && r->keep && r->inl && r->kept && r->replayed_before);
    for (int k = 0; k < n; k++) r->recv[k] = r->send[k] = -1;
    for (int s = 0; s < nslot; s++)
        r->strat[s] = -1, r->seg[s] = -1, r->replayed_before[s] = -1, r->group[s] = -1;
}

void dmr_pipe_rank_init(FtPipeRank *r, int stage, int nstage, int n, int nslot, double budget)
{
    FT_ASSERT(nstage >= 1 && stage >= 0 && stage < nstage && n >= 0 && nslot >= 0);
    memset(r, 0, sizeof *r);
    rank_alloc(r, n, nslot);
    r->stage = stage, r->nstage = nstage, r->budget = budget, r->last_micro = -1;
}

void dmr_pipe_rank_free(FtPipeRank *r)
{
    if (!r) return;
    free(r->slot), free(r->recv), free(r->send), free(r->dur), free(r->wait), free(r->strat);
    free(r->seg), free(r->flip), free(r->chk), free(r->keep), free(r->inl), free(r->kept);
    free(r->replayed_before), free(r->start), free(r->group), free(r->lat);
    memset(r, 0, sizeof *r);
}

int dmr_pipe_msg(int m, int stage, int nstage, bool grad)
{
    return (2 * m + (grad ? 1 : 0)) * nstage + stage;
}
static int msg_act(int m, int s, int P) { return dmr_pipe_msg(m, s, P, false); }
static int msg_grad(int m, int s, int P) { return dmr_pipe_msg(m, s, P, true); }

/* The pipeline markers of the micro-batch tape on the executions: a receive goes before the
 * first execution of its micro-batch's part (forward [0, fwd_end) or backward) after the
 * marker, a send after the last one before it. Returns -1 when a marker has no execution to
 * go with, or two receives fall on one. */
static int place_markers(FtPipeRank *r, const FtDmrEntryPlan *p, const FtTape *micro,
                         const int *ent, const int *inst)
{
    int P = r->nstage, st = r->stage;
    for (int j = 0; j < micro->ne; j++) {
        const FtTapeEntry *e = &micro->e[j];
        if (e->kind != FT_OP_MARK || (e->mark != FT_MARK_PP_RECV && e->mark != FT_MARK_PP_SEND))
            continue;
        bool fwd = e->dir == FT_FWD, recv = e->mark == FT_MARK_PP_RECV;
        int lo = j < micro->fwd_end ? 0 : micro->fwd_end, hi = j < micro->fwd_end ? micro->fwd_end : micro->ne;
        for (int m = 0; m < (p->ninst > 1 ? p->ninst : 1); m++) {
            int at = -1;
            for (int k = 0; k < r->n; k++) {
                if (inst[k] != m || ent[k] < lo || ent[k] >= hi) continue;
                if (recv && ent[k] > j) { at = k; break; }       /* the first after it */
                if (!recv && ent[k] < j) at = k;                /* the last before it */
            }
            if (at < 0) return -1;
            if (recv) {
                int from = fwd ? st - 1 : st + 1;
                if (from < 0 || from >= P || r->recv[at] >= 0) return -1;
                r->recv[at] = fwd ? msg_act(m, from, P) : msg_grad(m, from, P);
            } else {
                int to = fwd ? st + 1 : st - 1;
                if (to < 0 || to >= P || r->send[at] >= 0) return -1;
                r->send[at] = fwd ? msg_act(m, st, P) : msg_grad(m, st, P);
            }
        }
    }
    return 0;
}

int dmr_pipe_rank_build(const FtDmrProfile *pf, const FtDmrEntryPlan *p, const FtTape *micro,
                        const FtTape *opt, int stage, int nstage, size_t budget, FtPipeRank *r)
{
    memset(r, 0, sizeof *r);
    if (!p->pos || !pf || !pf->seq_done || pf->seq_bad || pf->nseq <= 0 ||
        pf->nmicro != p->nmicro || pf->nopt != p->nopt || nstage < 1 || stage < 0 ||
        stage >= nstage)
        return -1;
    int n = 0;
    for (int s = 0; s < p->n; s++)
        if (p->strat[s] >= 0 && p->pos[s] + 1 > n) n = p->pos[s] + 1;
    if (n != pf->nseq) return -1;
    dmr_pipe_rank_init(r, stage, nstage, n, p->n, (double)budget);
    int *ent = malloc(((size_t)n + 1) * sizeof *ent), *inst = malloc(((size_t)n + 1) * sizeof *inst);
    FT_ASSERT(ent && inst);
    for (int k = 0; k < n; k++) r->slot[k] = -1;
    for (int s = 0; s < p->n; s++)
        if (p->strat[s] >= 0 && p->pos[s] >= 0) r->slot[p->pos[s]] = s;
    int steps = pf->steps > 0 ? pf->steps : 1, M = p->ninst > 1 ? p->ninst : 1;
    double scale = pf->wall_s > 0 && pf->step_s > 0 && pf->step_s < pf->wall_s ? pf->step_s / pf->wall_s
                                                                                : 1.0;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int s = r->slot[k];
        if (s < 0) { rc = -1; break; }
        ent[k] = dmr_plan_entry(p, s, &inst[k]);
        if (ent[k] != pf->seq[k] || (ent[k] < p->nmicro && inst[k] != pf->seq_inst[k])) rc = -1;
        if (ent[k] < p->nmicro) r->last_micro = k;
    }
    if (!rc) rc = place_markers(r, p, micro, ent, inst);
    for (int k = 0; k < n && !rc; k++) {
        int s = r->slot[k], i = ent[k], j;
        const FtTape *tp;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        double per = 1.0 / steps / (i < p->nmicro ? M : 1);
        r->dur[k] = p->time[s];
        /* waits other than the pipeline's, before the barrier (after it: the barrier's) */
        if (k <= r->last_micro) r->wait[k] = scale * fmax(0.0, pf->seq_wait[k] - pf->seq_wait_pp[k]) / steps;
        r->strat[s] = p->strat[s], r->seg[s] = p->seg[s], r->chk[s] = p->time[s];
        r->keep[s] = (pf->copy[i] + pf->fp[i]) * per, r->kept[s] = (double)p->kept[s];
        r->group[s] = i;
        /* at the primary: an AGC member its share of the segment's bookkeeping (the plan's
         * cost); a piggyback op its fingerprint, inside a segment its share too (the plan's cost
         * less the replay, which the unit does) */
        r->inl[s] = p->strat[s] == PLAN_AGC         ? p->cost[s]
                    : p->strat[s] != PLAN_PIGGYBACK ? 0
                    : p->seg[s] >= 0                ? p->cost[s] - p->time[s]
                                                    : pf->fp[i] * per;
        if (r->inl[s] < 0) r->inl[s] = 0;
        bool dyn = pf->moe_dynamic && e->kind == FT_OP_MOE_EXPERT && e->twin < 0;
        r->flip[s] = (p->strat[s] == PLAN_NAIVE || p->strat[s] == PLAN_DEFERRED) && p->seg[s] < 0 &&
                     dmr_entry_deferrable(tp, e) && !dyn;
    }
    if (!rc) { /* a deferred check needs a window at or after it (the plan file names one) */
        int lastw = -1;
        for (int w = 0; w < p->nwin; w++)
            if (dmr_plan_pos(p, p->win_after[w]) > lastw) lastw = dmr_plan_pos(p, p->win_after[w]);
        for (int k = 0; k < n; k++)
            if (k > lastw) r->flip[r->slot[k]] = 0;
    }
    free(ent), free(inst);
    if (rc) dmr_pipe_rank_free(r);
    return rc;
}

/* ---- packing ------------------------------------------------------------------------------- */

enum { HEAD = 6 };

size_t dmr_pipe_rank_pack(const FtPipeRank *r, double **buf)
{
    size_t n = (size_t)r->n, ns = (size_t)r->nslot, len = HEAD + 6 * n + 1 + 8 * ns;
    double *b = malloc(len * sizeof *b), *q = b;
    FT_ASSERT(b);
    *q++ = r->stage, *q++ = r->nstage, *q++ = r->n, *q++ = r->nslot, *q++ = r->last_micro;
    *q++ = r->budget;
    for (size_t k = 0; k < n; k++)
        *q++ = r->slot[k], *q++ = r->recv[k], *q++ = r->send[k], *q++ = r->dur[k], *q++ = r->wait[k],
        *q++ = r->lat[k];
    *q++ = r->wait[n];
    for (size_t s = 0; s < ns; s++)
        *q++ = r->strat[s], *q++ = r->seg[s], *q++ = r->flip[s], *q++ = r->chk[s],
        *q++ = r->keep[s], *q++ = r->inl[s], *q++ = r->kept[s], *q++ = r->group[s];
    *buf = b;
    return len;
}

static bool int_in(double v, int lo, int hi)
{
    return v == floor(v) && v >= lo && v <= hi;
}

int dmr_pipe_rank_unpack(const double *b, size_t len, FtPipeRank *r)
{
    memset(r, 0, sizeof *r);
    if (len < HEAD || !int_in(b[1], 1, 1 << 20) || !int_in(b[0], 0, (int)b[1] - 1) ||
        !int_in(b[2], 0, 1 << 28) || !int_in(b[3], 0, 1 << 28) || !int_in(b[4], -1, (int)b[2] - 1) ||
        !(b[5] >= 0))
        return -1;
    size_t n = (size_t)b[2], ns = (size_t)b[3];
    if (len < HEAD + 6 * n + 1 + 8 * ns) return -1;
    dmr_pipe_rank_init(r, (int)b[0], (int)b[1], (int)n, (int)ns, b[5]);
    r->last_micro = (int)b[4];
    const double *q = b + HEAD;
    bool ok = true;
    for (size_t k = 0; k < n; k++, q += 6) {
        ok = ok && int_in(q[0], 0, (int)ns - 1) && int_in(q[1], -1, 1 << 30) && int_in(q[2], -1, 1 << 30) &&
             q[5] >= 0;
        if (!ok) break;
        r->slot[k] = (int)q[0], r->recv[k] = (int)q[1], r->send[k] = (int)q[2];
        r->dur[k] = q[3], r->wait[k] = q[4], r->lat[k] = q[5];
    }
    if (ok) r->wait[n] = *q++;
    for (size_t s = 0; s < ns && ok; s++, q += 8) {
        ok = int_in(q[0], -1, 3) && int_in(q[1], -1, 1 << 28) && int_in(q[2], 0, 1) &&
             int_in(q[7], -1, 1 << 28);
        if (!ok) break;
        r->strat[s] = (int)q[0], r->seg[s] = (int)q[1], r->flip[s] = (unsigned char)q[2];
        r->chk[s] = q[3], r->keep[s] = q[4], r->inl[s] = q[5], r->kept[s] = q[6];
        r->group[s] = (int)q[7];
    }
    if (!ok) dmr_pipe_rank_free(r);
    return ok ? 0 : -1;
}

/* ---- the simulation ------------------------------------------------------------------------ */

typedef struct unit {
    int head, tail, next; /* member lists (by member index), next to replay (-1: none) */
    double bytes;
    bool complete, done;
} Unit;

typedef struct sim_rank {
    FtPipeRank *r;
    int k;           /* next execution */
    int state;       /* 0 running, 1 at the barrier, 2 past it, 3 done */
    bool received;   /* the receive before execution k was waited for */
    double t;
    int *mslot, *mnext, nm; /* members: their slot and the next in their unit */
    Unit *u;
    int nu, qhead, cur;     /* units in creation order; the first not done (unit_done keeps
                               it so); being replayed (-1) */
    int *skip;              /* [unit] itself while not done, else towards the next one not done
                               (path-compressed: the queue is scanned in the waits of every op) */
    int *seg_open, *seg_last, nseg;
    double held, peak;
    long long demoted;
    int at;                 /* the execution whose waits are replaying now (n: barrier, drain) */
} SimRank;

static void sim_rank_init(SimRank *q, FtPipeRank *r)
{
    memset(q, 0, sizeof *q);
    q->r = r, q->cur = -1;
    size_t b = (size_t)r->nslot + 1;
    q->mslot = malloc(b * sizeof *q->mslot), q->mnext = malloc(b * sizeof *q->mnext);
    q->u = malloc(b * sizeof *q->u), q->skip = malloc(b * sizeof *q->skip);
    int nseg = 0;
    for (int s = 0; s < r->nslot; s++)
        if (r->seg[s] + 1 > nseg) nseg = r->seg[s] + 1;
    q->nseg = nseg;
    q->seg_open = malloc(((size_t)nseg + 1) * sizeof *q->seg_open);
    q->seg_last = malloc(((size_t)nseg + 1) * sizeof *q->seg_last);
    FT_ASSERT(q->mslot && q->mnext && q->u && q->skip && q->seg_open && q->seg_last);
    for (int g = 0; g < nseg; g++) q->seg_open[g] = -1, q->seg_last[g] = -1;
    for (int s = 0; s < r->nslot; s++) /* the runtime's: the highest slot of the segment */
        if (r->seg[s] >= 0) q->seg_last[r->seg[s]] = s;
    for (int s = 0; s < r->nslot; s++) r->replayed_before[s] = -1;
}

static void sim_rank_free(SimRank *q)
{
    free(q->mslot), free(q->mnext), free(q->u), free(q->skip), free(q->seg_open), free(q->seg_last);
}

/* The first unit at or after i not done (q->nu: none). */
static int next_live(SimRank *q, int i)
{
    int root = i;
    while (root < q->nu && q->skip[root] != root) root = q->skip[root];
    while (i < root) {
        int nx = q->skip[i];
        q->skip[i] = root, i = nx;
    }
    return root;
}

static void unit_done(SimRank *q, int ui)
{
    q->u[ui].done = true, q->held -= q->u[ui].bytes, q->skip[ui] = ui + 1;
    if (q->cur == ui) q->cur = -1;
    q->qhead = next_live(q, q->qhead);
}

/* Replays unit u's next member. */
static void step_member(SimRank *q, int ui)
{
    Unit *u = &q->u[ui];
    int m = u->next, s = q->mslot[m];
    q->t += q->r->chk[s];
    q->r->replayed_before[s] = q->at;
    u->next = q->mnext[m];
    if (u->next < 0 && u->complete) {
        unit_done(q, ui);
    } else {
        q->cur = ui;
    }
}

/* The unit the poll hook replays next (-1: none). */
static int pick(SimRank *q)
{
    if (q->cur >= 0 && q->u[q->cur].next >= 0) return q->cur;
    for (int i = q->qhead; i < q->nu; i = next_live(q, i + 1))
        if (q->u[i].complete && q->u[i].next >= 0) return i;
    return -1;
}

static void replay_until(SimRank *q, double arrive)
{
    while (q->t < arrive) {
        int ui = pick(q);
        if (ui < 0) break;
        step_member(q, ui);
    }
    if (q->t < arrive) q->t = arrive;
}

/* Unit ui replayed whole now (the unit being replayed finished first: they share a scratch). */
static void run_unit(SimRank *q, int ui)
{
    if (q->cur >= 0 && q->cur != ui)
        while (q->cur >= 0) step_member(q, q->cur);
    q->u[ui].complete = true;
    while (!q->u[ui].done && q->u[ui].next >= 0) step_member(q, ui);
    if (!q->u[ui].done) unit_done(q, ui); /* no member left (cannot happen: units start with one) */
}

static void drain(SimRank *q)
{
    q->at = q->r->n;
    for (;;) {
        int ui = q->cur;
        if (ui < 0 && q->qhead < q->nu) ui = q->qhead;
        if (ui < 0) return;
        run_unit(q, ui);
    }
}

/* Execution k's check under its slot's strategy (after its primary). */
static void check(SimRank *q, int k)
{
    FtPipeRank *r = q->r;
    int s = r->slot[k], st = r->strat[s], g = r->seg[s];
    bool agc = st == PLAN_AGC || (st == PLAN_PIGGYBACK && g >= 0);
    if (st == PLAN_NAIVE) { q->t += r->chk[s]; return; }
    if (st == PLAN_PIGGYBACK && g < 0) { q->t += r->inl[s]; return; }
    if (st != PLAN_DEFERRED && !agc) return;
    int ui = agc && g < q->nseg ? q->seg_open[g] : -1;
    if (ui >= 0 && q->u[ui].complete) ui = -1;
    double bytes = st == PLAN_DEFERRED || ui < 0 || (agc && q->seg_last[g] == s) ? r->kept[s] : 0;
    if (st == PLAN_PIGGYBACK) bytes = ui < 0 ? r->kept[s] : 0;
    if (q->held + bytes > r->budget) { /* over the budget: at once, nothing kept */
        if (ui >= 0) run_unit(q, ui);
        q->demoted++;
        q->t += r->chk[s];
        return;
    }
    q->t += (st == PLAN_DEFERRED ? r->keep[s] : r->inl[s]);
    int m = q->nm++;
    q->mslot[m] = s, q->mnext[m] = -1;
    if (ui < 0) {
        ui = q->nu++;
        q->u[ui] = (Unit){.head = m, .tail = m, .next = m};
        q->skip[ui] = ui;
        if (agc && g < q->nseg) q->seg_open[g] = ui;
    } else {
        Unit *u = &q->u[ui];
        q->mnext[u->tail] = m, u->tail = m;
        if (u->next < 0) u->next = m;
    }
    q->u[ui].bytes += bytes, q->held += bytes;
    if (q->held > q->peak) q->peak = q->held;
    if (!agc || q->seg_last[g] == s) q->u[ui].complete = true;
}

/* Advances stage q until it blocks (a receive not yet sent, the barrier) or ends. */
static bool advance(SimRank *q, double *sent, int nmsg)
{
    FtPipeRank *r = q->r;
    bool moved = false;
    while (q->state == 0 || q->state == 2) {
        if (q->k == r->n) {
            q->at = r->n;
            replay_until(q, q->t + r->wait[r->n]);
            drain(q);
            q->state = 3;
            return true;
        }
        int k = q->k;
        if (!q->received && r->recv[k] >= 0) {
            double a = r->recv[k] < nmsg ? sent[r->recv[k]] : NAN;
            if (isnan(a)) return moved; /* not sent yet */
            q->at = k;
            /* hops_only: replays in the message's transfer time alone */
            replay_until(q, r->hops_only ? fmin(a, q->t + sent[nmsg + r->recv[k]]) : a);
            if (q->t < a) q->t = a;
            q->received = true;
        }
        q->at = k;
        if (r->wait[k] > 0) replay_until(q, q->t + r->wait[k]);
        r->start[k] = q->t;
        q->t += r->dur[k];
        check(q, k);
        if (r->send[k] >= 0 && r->send[k] < nmsg)
            sent[r->send[k]] = q->t + r->lat[k], sent[nmsg + r->send[k]] = r->lat[k];
        q->k++, q->received = false, moved = true;
        if (k == r->last_micro && q->state == 0) {
            q->state = 1;
            return true;
        }
    }
    return moved;
}

FtPipeResult dmr_pipe_sim(FtPipeRank *r, int P)
{
    FtPipeResult res = {.ok = true};
    int nmsg = 0;
    for (int s = 0; s < P; s++)
        for (int k = 0; k < r[s].n; k++) {
            if (r[s].recv[k] + 1 > nmsg) nmsg = r[s].recv[k] + 1;
            if (r[s].send[k] + 1 > nmsg) nmsg = r[s].send[k] + 1;
        }
    double *sent = malloc((2 * (size_t)nmsg + 1) * sizeof *sent); /* arrivals, then lat */
    SimRank *q = malloc((size_t)P * sizeof *q);
    FT_ASSERT(sent && q);
    for (int i = 0; i < nmsg; i++) sent[i] = NAN;
    for (int s = 0; s < P; s++) {
        sim_rank_init(&q[s], &r[s]);
        if (r[s].last_micro < 0) q[s].state = 1; /* no micro-batch op: at the barrier at once */
    }
    bool barrier_done = false;
    for (;;) {
        bool moved = false, all_done = true, all_bar = true;
        for (int s = 0; s < P; s++) moved |= advance(&q[s], sent, nmsg);
        for (int s = 0; s < P; s++) {
            all_done &= q[s].state == 3;
            all_bar &= q[s].state >= 1;
        }
        if (all_done) break;
        if (all_bar && !barrier_done) { /* every stage at the barrier: meet at the latest */
            double T = 0;
            for (int s = 0; s < P; s++) T = fmax(T, q[s].t);
            for (int s = 0; s < P; s++) {
                q[s].at = r[s].n;
                if (!r[s].hops_only) replay_until(&q[s], T);
                if (q[s].t < T) q[s].t = T;
                q[s].state = 2;
            }
            barrier_done = moved = true;
        }
        if (!moved) { res.ok = false; break; }
    }
    for (int s = 0; s < P; s++) {
        res.step = fmax(res.step, q[s].t);
        if (s < 64) res.end[s] = q[s].t;
        res.demoted += q[s].demoted;
        res.peak = fmax(res.peak, q[s].peak);
        sim_rank_free(&q[s]);
    }
    free(sent), free(q);
    return res;
}

/* ---- the refinement ------------------------------------------------------------------------ */

void dmr_pipe_set_all(FtPipeRank *r, int P, int st)
{
    for (int s = 0; s < P; s++)
        for (int i = 0; i < r[s].nslot; i++)
            if (r[s].flip[i]) r[s].strat[i] = st;
}

/* Per stage, room for its strategies (nslot each), and copies between it and r. */
static int **strat_new(const FtPipeRank *r, int P)
{
    int **a = malloc((size_t)P * sizeof *a);
    FT_ASSERT(a);
    for (int s = 0; s < P; s++) {
        a[s] = malloc(((size_t)r[s].nslot + 1) * sizeof **a);
        FT_ASSERT(a[s]);
    }
    return a;
}

static void strat_del(int **a, int P)
{
    for (int s = 0; s < P; s++) free(a[s]);
    free(a);
}

static void strat_copy(int **dst, FtPipeRank *r, int P, bool to_r)
{
    for (int s = 0; s < P; s++)
        if (to_r) memcpy(r[s].strat, dst[s], (size_t)r[s].nslot * sizeof *r[s].strat);
        else memcpy(dst[s], r[s].strat, (size_t)r[s].nslot * sizeof *r[s].strat);
}

/* The step with every check of r set to strategy st (-1: no check), r's strategies kept
 * (saved: strat_new's room). */
static FtPipeResult sim_with(FtPipeRank *r, int P, int **saved, int st)
{
    strat_copy(saved, r, P, false);
    for (int s = 0; s < P; s++)
        for (int i = 0; i < r[s].nslot; i++)
            if (r[s].strat[i] >= 0) r[s].strat[i] = st;
    FtPipeResult x = dmr_pipe_sim(r, P);
    strat_copy(saved, r, P, true);
    return x;
}

double dmr_pipe_bound(FtPipeRank *r, int P)
{
    int **saved = strat_new(r, P);
    FtPipeResult off = sim_with(r, P, saved, -1); /* no checks: the earliest starts */
    strat_del(saved, P);
    double bound = off.ok ? off.step : -1;
    for (int s = 0; s < P; s++) {
        double after = 0; /* the stage's work from execution k on, exposed checks included */
        for (int k = r[s].n - 1; k >= 0 && off.ok; k--) {
            int i = r[s].slot[k], st = r[s].strat[i];
            after += r[s].dur[k] + (st >= 0 && st != PLAN_PIGGYBACK ? r[s].chk[i] : 0);
            if (r[s].start[k] + after > bound) bound = r[s].start[k] + after;
        }
    }
    return bound;
}

unsigned long long dmr_pipe_sig(const int *strat, int n)
{
    unsigned long long h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) h = (h ^ (unsigned long long)(strat[i] + 2)) * 1099511628211ULL;
    return h;
}

/* The slots of each group of stage r, as lists: head[g] (groups in [0, ng)), next[slot];
 * first[g]: its first execution in time order. Returns ng. */
static int group_lists(const FtPipeRank *r, int **head, int **next, int **first)
{
    int ng = 0;
    for (int i = 0; i < r->nslot; i++)
        if (r->group[i] + 1 > ng) ng = r->group[i] + 1;
    *head = malloc(((size_t)ng + 1) * sizeof **head), *first = malloc(((size_t)ng + 1) * sizeof **first);
    *next = malloc(((size_t)r->nslot + 1) * sizeof **next);
    FT_ASSERT(*head && *next && *first);
    for (int g = 0; g < ng; g++) (*head)[g] = -1, (*first)[g] = -1;
    for (int i = r->nslot - 1; i >= 0; i--) {
        (*next)[i] = -1;
        if (r->group[i] < 0 || !r->flip[i]) continue;
        (*next)[i] = (*head)[r->group[i]], (*head)[r->group[i]] = i;
    }
    for (int k = r->n - 1; k >= 0; k--)
        if (r->group[r->slot[k]] >= 0) (*first)[r->group[r->slot[k]]] = k;
    return ng;
}

/* One pass of group moves (every flippable slot of a group to deferred when one of them is
 * naive, else to naive), stage after stage, groups by their first execution. */
static bool pass_groups(FtPipeRank *r, int P, FtPipeResult *cur, long long *evals, long long max,
                        int **head, int **next, int **first, int *was)
{
    bool improved = false;
    for (int s = 0; s < P && *evals < max; s++)
        for (int k = 0; k < r[s].n && *evals < max; k++) {
            int g = r[s].group[r[s].slot[k]];
            if (g < 0 || first[s][g] != k || head[s][g] < 0 || next[s][head[s][g]] < 0)
                continue; /* not a group's first, or fewer than two to move */
            int to = PLAN_NAIVE, changed = 0;
            for (int i = head[s][g]; i >= 0; i = next[s][i])
                if (r[s].strat[i] == PLAN_NAIVE) to = PLAN_DEFERRED;
            for (int i = head[s][g]; i >= 0; i = next[s][i]) changed += r[s].strat[i] != to;
            if (!changed) continue;
            for (int i = head[s][g]; i >= 0; i = next[s][i]) was[i] = r[s].strat[i], r[s].strat[i] = to;
            FtPipeResult x = dmr_pipe_sim(r, P);
            ++*evals;
            if (x.ok && x.step < cur->step * (1 - 1e-9) && x.demoted <= cur->demoted) *cur = x, improved = true;
            else
                for (int i = head[s][g]; i >= 0; i = next[s][i]) r[s].strat[i] = was[i];
        }
    return improved;
}

/* One pass of single flips, stage after stage in time order. */
static bool pass_single(FtPipeRank *r, int P, FtPipeResult *cur, long long *evals, long long max)
{
    bool improved = false;
    for (int s = 0; s < P && *evals < max; s++)
        for (int k = 0; k < r[s].n && *evals < max; k++) {
            int i = r[s].slot[k];
            if (!r[s].flip[i]) continue;
            int before = r[s].strat[i];
            r[s].strat[i] = before == PLAN_NAIVE ? PLAN_DEFERRED : PLAN_NAIVE;
            FtPipeResult x = dmr_pipe_sim(r, P);
            ++*evals;
            if (x.ok && x.step < cur->step * (1 - 1e-9) && x.demoted <= cur->demoted) *cur = x, improved = true;
            else r[s].strat[i] = before;
        }
    return improved;
}

/* First-improvement hill climbing from r's strategies (their step: cur) until no move helps or
 * evals reaches max. Single flips pass after pass, and group moves once they converge (to leave
 * a local optimum that needs a whole op moved); coarse first (group moves, then single flips,
 * each pass) when `coarse`: where a pass of single flips alone would not fit the budget. */
static FtPipeResult climb(FtPipeRank *r, int P, FtPipeResult cur, long long *evals, long long max,
                          int *passes, bool coarse)
{
    int **head = malloc((size_t)P * sizeof *head), **next = malloc((size_t)P * sizeof *next);
    int **first = malloc((size_t)P * sizeof *first);
    FT_ASSERT(head && next && first);
    int most = 0;
    for (int s = 0; s < P; s++) {
        group_lists(&r[s], &head[s], &next[s], &first[s]);
        most = r[s].nslot > most ? r[s].nslot : most;
    }
    int *was = malloc(((size_t)most + 1) * sizeof *was); /* a group's strategies before a move */
    FT_ASSERT(was);
    for (;;) {
        ++*passes;
        bool g = coarse && pass_groups(r, P, &cur, evals, max, head, next, first, was);
        bool one = pass_single(r, P, &cur, evals, max);
        if (*evals >= max) break;
        if (g || one) continue;
        if (coarse || !pass_groups(r, P, &cur, evals, max, head, next, first, was)) break;
    }
    for (int s = 0; s < P; s++) free(head[s]), free(next[s]), free(first[s]);
    free(head), free(next), free(first), free(was);
    return cur;
}

void dmr_pipe_refine(FtPipeRank *r, int P, long long max_evals, FtPipeRefine *out)
{
    memset(out, 0, sizeof *out);
    int **saved = strat_new(r, P), **own = strat_new(r, P), **best = strat_new(r, P);
    out->off = sim_with(r, P, saved, -1);
    out->naive = sim_with(r, P, saved, PLAN_NAIVE);
    out->bound = dmr_pipe_bound(r, P);
    out->start = out->best = dmr_pipe_sim(r, P);
    out->evals = 4;
    if (!out->start.ok) goto done;
    strat_copy(own, r, P, false), strat_copy(best, r, P, false);
    long long flippable = 0; /* a pass of single flips */
    for (int s = 0; s < P; s++)
        for (int i = 0; i < r[s].nslot; i++) flippable += r[s].flip[i];
    bool coarse = 3 * 4 * flippable > max_evals; /* three starts of about four passes */
    /* three starts: the stages' own plans, every flippable check at once, every one deferred;
     * the best end wins (the first of equals), never with more demotions than the own plans */
    for (int start = 0; start < 3 && out->evals < max_evals; start++) {
        strat_copy(own, r, P, true);
        if (start) dmr_pipe_set_all(r, P, start == 1 ? PLAN_NAIVE : PLAN_DEFERRED);
        FtPipeResult x = start ? dmr_pipe_sim(r, P) : out->start;
        out->evals += start > 0;
        if (!x.ok) continue;
        x = climb(r, P, x, &out->evals, max_evals, &out->passes, coarse);
        if (x.step < out->best.step * (1 - 1e-9) && x.demoted <= out->start.demoted)
            out->best = x, strat_copy(best, r, P, false);
    }
    strat_copy(best, r, P, true);
    for (int s = 0; s < P; s++)
        for (int i = 0; i < r[s].nslot; i++) {
            out->flips += r[s].strat[i] != own[s][i];
            if (s < 64) out->deferred[s] += r[s].strat[i] == PLAN_DEFERRED;
        }
    for (int s = 0; s < P && s < 64; s++) out->sig[s] = dmr_pipe_sig(r[s].strat, r[s].nslot);
    dmr_pipe_sim(r, P); /* replayed_before of the strategies kept */
done:
    strat_del(saved, P), strat_del(own, P), strat_del(best, P);
}

/* ---- back into the plan -------------------------------------------------------------------- */

int dmr_pipe_apply(const FtPipeRank *r, FtDmrEntryPlan *p)
{
    FT_ASSERT(r->nslot == p->n && p->pos);
    int changed = 0;
    for (int s = 0; s < p->n; s++) {
        if (r->strat[s] == p->strat[s]) continue;
        FT_ASSERT(r->flip[s] && (r->strat[s] == PLAN_NAIVE || r->strat[s] == PLAN_DEFERRED));
        changed++;
        int w = p->window[s];
        if (w >= 0) p->win_used[w] -= p->time[s];
        p->overhead -= p->cost[s];
        if (r->strat[s] == PLAN_NAIVE) {
            p->strat[s] = PLAN_NAIVE, p->window[s] = -1, p->cost[s] = p->time[s];
            p->overhead += p->cost[s];
            continue;
        }
        /* the window its replay fell in: the last opening before the execution whose waits
         * replayed it, at or after the slot itself; else the first after the slot */
        int ps = p->pos[s], before = r->replayed_before[s], best = -1, first = -1;
        for (int v = 0; v < p->nwin; v++) {
            int at = dmr_plan_pos(p, p->win_after[v]);
            if (at < ps) continue;
            if (first < 0) first = v;
            if (before >= 0 && at < before) best = v;
        }
        w = best >= 0 ? best : first;
        FT_ASSERT(w >= 0); /* flip needs a window after the slot (dmr_pipe_rank_build) */
        p->strat[s] = PLAN_DEFERRED, p->window[s] = w, p->cost[s] = r->keep[s];
        p->overhead += p->cost[s], p->win_used[w] += p->time[s];
        if (p->win_use[w] == 0) p->win_use[w] = 3;
    }
    for (int w = 0; w < p->nwin; w++) {
        if (p->win_used[w] < 1e-15) p->win_used[w] = 0;
        if (p->win_use[w] == 3 && p->win_used[w] == 0) p->win_use[w] = 0;
    }
    return changed;
}

/* dmr_dynamic.c: the dynamic planner of mode planned (dmr.moe_dynamic, dmr.h): the MoE expert
 * ops' checks decided when each op runs, from the rows actually routed to this rank.
 *
 * Key decisions:
 *  - The guard is what dmr.deferred_mb leaves after the static plan's reservations, computed
 *    once per plan the way the planner charges memory (planner.h, "Memory in time"): the most
 *    the plan's AGC boundaries and deferred checks keep at once at any entry
 *    (dmr_plan_held_peak; until 2026-12-02 every segment's boundary plus the largest queue, as
 *    if all were held at once). Expert entries the dynamic planner takes over are left out:
 *    their bytes are counted here, per execution. A dynamic check is deferred only when it fits
 *    both the guard (beside the other dynamic checks kept now) and the budget (beside
 *    everything kept now), so the static plan's checks are not demoted to make room for it.
 *  - Real bytes: moe_expert reads only the rows its counts route to this rank (ops.h: rows
 *    past the blocks are never read), so its row-indexed inputs (forward x; backward dy and x)
 *    are kept up to those rows; the rest (counts, the gradient accumulators) whole, model
 *    state never. The replay runs from the copies like any deferred check.
 *  - A deferred dynamic check is a unit of its own in the same queue (dmr_defer.c): the poll
 *    hook replays it in the next wait, which for an expert op is usually the EP all-to-all
 *    right after it (a window only known at run time), or dmr_drain before the agreement. */
#include <stdlib.h>

#include "ftllm/log.h"
#include "dmr_impl.h"

bool dmr_dyn_op(const FtTapeEntry *e) { return e->kind == FT_OP_MOE_EXPERT; }

/* Whether the plan's choice for slot idx is replaced (deferred or naive: not piggyback, not an
 * AGC segment member). */
static bool taken_over(const FtDmr *d, const FtTapeEntry *e, int idx)
{
    return dmr_dyn_op(e) && d->plan.seg[idx] < 0 &&
           (d->plan.strat[idx] == PLAN_DEFERRED || d->plan.strat[idx] == PLAN_NAIVE);
}

static const FtTapeEntry *entry_at(const FtDmr *d, int slot)
{
    int m, idx = dmr_plan_entry(&d->plan, slot, &m);
    return idx < d->plan.nmicro ? &d->micro->e[idx] : &d->opt->e[idx - d->plan.nmicro];
}

void dmr_dyn_prepare(FtDmr *d)
{
    if (!d->moe_dyn) return;
    const FtDmrEntryPlan *p = &d->plan;
    unsigned char *skip = calloc((size_t)p->n + 1, 1); /* the expert slots taken over */
    FT_ASSERT(skip);
    for (int i = 0; i < p->n; i++) skip[i] = taken_over(d, entry_at(d, i), i);
    size_t held = dmr_plan_held_peak(p, skip);
    free(skip);
    d->dyn_guard = d->budget > held ? d->budget - held : 0;
    d->s.dyn_guard = (long long)d->dyn_guard;
}

/* Rows routed to this rank: the sum of the op's counts (G x El blocks), read through the
 * backend's copy to the host (on a device a small wait, as the expert op's own GEMMs make). */
static long long routed_rows(const FtDmr *d, const FtOpCall *c)
{
    long long G = (long long)c->x[0], El = c->d[3], total = 0;
    int *counts = malloc(sizeof *counts * (size_t)(G * El > 0 ? G * El : 1));
    FT_ASSERT(counts);
    d->be->to_host(d->be->ctx, counts, c->in[3], sizeof *counts * (size_t)(G * El));
    for (long long b = 0; b < G * El; b++) total += counts[b] > 0 ? counts[b] : 0;
    free(counts);
    return total < c->d[0] ? total : c->d[0];
}

size_t dmr_dyn_bytes(const FtTape *tp, int i, const FtOpCall *c, long long rows,
                     size_t nb[FT_OP_MAX_IN])
{
    const FtTapeEntry *e = &tp->e[i];
    long long R = c->d[0];
    size_t bytes = 0;
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        nb[k] = 0;
        if (e->in[k] < 0 || !c->in[k]) continue;
        FtTensorRole r = tp->t[e->in[k]].role;
        if (r == FT_TR_PARAM || r == FT_TR_MOM1 || r == FT_TR_MOM2) continue; /* stable */
        size_t whole = tape_tensor_bytes(tp, e->in[k]);
        bool by_row = k == 0 || (e->dir == FT_BWD && k == 1); /* x; dy, x (ops.h) */
        /* routed rows only (none routed: nothing kept, the replay reads none of it) */
        nb[k] = by_row && R > 0 ? whole / (size_t)R * (size_t)rows : whole;
        bytes += nb[k];
    }
    for (int k = 0; k < FT_OP_MAX_OUT; k++) bytes += e->out[k] >= 0 ? sizeof(uint64_t) : 0;
    return bytes;
}

void dmr_dyn_check(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                   int nchk)
{
    size_t nb[FT_OP_MAX_IN];
    size_t bytes = dmr_dyn_bytes(tp, i, c, routed_rows(d, c), nb);
    d->s.dyn_bytes += (long long)bytes;
    d->s.dyn_cap_bytes += (long long)dmr_entry_kept(tp, i);
    if (d->dyn_kept + bytes > d->dyn_guard || d->kept + bytes > d->budget) {
        d->s.dyn_naive++;
        dmr_check_naive(d, tp, i, c, chk, nchk);
        return;
    }
    d->s.dyn_deferred++;
    dmr_defer_keep(d, tp, i, c, nb, bytes, true, chk, nchk);
}

/* For strategy() in dmr.c: whether slot idx (entry e) is the dynamic planner's. */
bool dmr_dyn_takes(const FtDmr *d, const FtTapeEntry *e, int idx)
{
    return d->moe_dyn && d->plan.strat && taken_over(d, e, idx);
}

/* dmr_defer.c: mode planned's deferred checks (dmr.h): units (one op, or the members of an AGC
 * segment) kept at the primary, replayed from the executor's poll hook one op per call and
 * drained before the agreement; the plan's links between segment members; the profile that
 * the first steps record and plan.
 *
 * Key decisions:
 *  - One mechanism for D-DMR and AGC: a unit is a list of members; an input that an earlier
 *    member of the same unit wrote (with nothing else writing or sending that tensor in
 *    between, plan_prepare) is taken from that member's replay instead of being kept, so a
 *    segment keeps its boundary and a lone op keeps all its inputs. A unit may start in the
 *    middle of its segment (after the budget closed the earlier part): what it lacks is kept.
 *  - The replay outputs of the unit being replayed live in one scratch buffer; one unit is
 *    replayed at a time (a forced replay finishes the current one first).
 *  - Memory is charged when a member is added and released when its unit is freed: the
 *    budget holds at every moment, whatever the order of polls. The dynamic planner's units
 *    (dmr_dynamic.c, dmr_defer_keep) are lone ops in the same queue, charged to its guard too. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck_keys.h"
#include "ftllm/log.h"
#include "dmr_impl.h"

/* ---- deferred checks (mode planned) -------------------------------------------------------- */

static bool stable_role(FtTensorRole r)
{
    return r == FT_TR_PARAM || r == FT_TR_MOM1 || r == FT_TR_MOM2; /* unchanged until commit */
}

/* Memory for kept inputs and replay outputs: the backend's (a device's), or plain aligned host
 * memory on the CPU (the backend's zeroing would cost a pass the copy makes anyway). */
void *dmr_mem_alloc(const FtDmr *d, size_t bytes, const char *what)
{
    if (!backend_is_host(d->be)) return backend_alloc(d->be, bytes, what);
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    FT_ASSERT(p);
    return p;
}

void dmr_mem_free(const FtDmr *d, void *p)
{
    if (!p) return;
    if (backend_is_host(d->be)) free(p);
    else d->be->release(d->be->ctx, p);
}

/* Kept inputs are reused rather than allocated per deferred op: a step keeps the same sizes
 * every step, and a fresh buffer costs page faults on the CPU (glibc returns large blocks to
 * the kernel at free) and, on a GPU, a cudaMalloc and a cudaFree, which waits for the device.
 * The pool counts bytes as the budget does (unrounded). */
static void pool_held(FtDmr *d)
{
    long long held = (long long)(d->kept + d->pool_bytes);
    if (held > d->s.held_peak) d->s.held_peak = held;
}

void *dmr_keep_alloc(FtDmr *d, size_t bytes, const char *what)
{
    for (int i = d->npool - 1; i >= 0; i--) /* the newest of that size */
        if (d->pool[i].bytes == bytes) {
            void *p = d->pool[i].p;
            memmove(d->pool + i, d->pool + i + 1, sizeof *d->pool * (size_t)(d->npool - i - 1));
            d->npool--, d->pool_bytes -= bytes;
            return p;
        }
    d->s.keep_allocs++;
    return dmr_mem_alloc(d, bytes, what);
}

void dmr_keep_free(FtDmr *d, void *p, size_t bytes)
{
    if (!p) return;
    if (d->npool == d->cappool) {
        d->cappool = d->cappool ? 2 * d->cappool : 64;
        void *np = realloc(d->pool, sizeof *d->pool * (size_t)d->cappool);
        FT_ASSERT(np);
        d->pool = np;
    }
    d->pool[d->npool].p = p, d->pool[d->npool++].bytes = bytes, d->pool_bytes += bytes;
    int drop = 0; /* kept and pooled within the budget: the oldest go */
    while (drop < d->npool && d->kept + d->pool_bytes > d->budget) {
        dmr_mem_free(d, d->pool[drop].p);
        d->pool_bytes -= d->pool[drop++].bytes;
    }
    if (drop) {
        memmove(d->pool, d->pool + drop, sizeof *d->pool * (size_t)(d->npool - drop));
        d->npool -= drop;
    }
    pool_held(d);
}

void dmr_pool_release(FtDmr *d)
{
    for (int i = 0; i < d->npool; i++) dmr_mem_free(d, d->pool[i].p);
    free(d->pool);
    d->pool = NULL, d->npool = d->cappool = 0, d->pool_bytes = 0;
}

/* A slot of dfp for a deferred member's primary fingerprints. dfp grows by a copy on the
 * backend's stream, ordered before any later use; members hold slot numbers, not addresses. */
static int slot_take(FtDmr *d)
{
    if (!d->ndfree) {
        int cap = d->capdfp ? 2 * d->capdfp : 16; /* grows: tests pass through it */
        size_t w = sizeof(uint64_t) * FT_OP_MAX_OUT;
        uint64_t *nf = backend_alloc(d->be, w * (size_t)cap, "DMR deferred fingerprints");
        int *free_ = realloc(d->dfree, sizeof *free_ * (size_t)cap);
        FT_ASSERT(free_);
        d->dfree = free_;
        if (d->dfp) {
            d->be->copy(d->be->ctx, nf, d->dfp, w * (size_t)d->capdfp);
            d->be->release(d->be->ctx, d->dfp);
        }
        d->dfp = nf;
        for (int j = cap - 1; j >= d->capdfp; j--) d->dfree[d->ndfree++] = j;
        d->capdfp = cap;
    }
    return d->dfree[--d->ndfree];
}

static void slot_give(FtDmr *d, Member *m)
{
    if (m->slot < 0) return;
    d->dfree[d->ndfree++] = m->slot;
    m->slot = -1;
}

void dmr_unit_free(FtDmr *d, Unit *u)
{
    if (!u) return;
    d->kept -= u->kept; /* first: the pool may keep what this frees */
    for (int j = 0; j < u->nm; j++) {
        for (int k = 0; k < FT_OP_MAX_IN; k++) dmr_keep_free(d, u->m[j].copy[k], u->m[j].nb[k]);
        slot_give(d, &u->m[j]);
    }
    if (u->dyn) d->dyn_kept -= u->kept;
    free(u->m), free(u->roff), free(u);
}

static void unit_remove(FtDmr *d, Unit *u)
{
    for (int i = 0; i < d->nunits; i++)
        if (d->units[i] == u) {
            memmove(d->units + i, d->units + i + 1, sizeof *d->units * (size_t)(d->nunits - i - 1));
            d->nunits--;
            break;
        }
    if (d->cur == u) d->cur = NULL;
    dmr_unit_free(d, u);
}

static void unit_step_(FtDmr *d, Unit *u);

/* Replays u's next member into the replay scratch (through the backend's checker_run: on a
 * device, its checker stream) and compares its output fingerprints with the primary's, at the
 * agreement where the backend fingerprints without waiting; the last member frees u. Timed
 * (replay_s). */
static void unit_step(FtDmr *d, Unit *u)
{
    double t0 = omp_get_wtime();
    unit_step_(d, u);
    d->s.replay_s += omp_get_wtime() - t0;
}

/* The replay outputs' layout in the replay scratch, when u's replay begins: an output that a
 * later member reads (link) has its own place until the unit ends; the others are compared as
 * soon as their member ran, so every member's unlinked outputs share one region after them.
 * (On a device the next member's replay is ordered after the fingerprints on the backend's
 * stream: checker_run waits for it.) A chain of a gradient's micro-batches then holds its
 * earlier sums and one member's other outputs, not every member's activation gradients. */
static void unit_layout(FtDmr *d, Unit *u)
{
    size_t no = (size_t)u->nm * FT_OP_MAX_OUT;
    u->roff = calloc(no, sizeof *u->roff);
    bool *linked = calloc(no, sizeof *linked);
    FT_ASSERT(u->roff && linked);
    for (int j = 0; j < u->nm; j++)
        for (int k = 0; k < FT_OP_MAX_IN; k++)
            if (u->m[j].link[k] >= 0) linked[u->m[j].link[k]] = true;
    size_t held = 0, shared = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < u->nm; j++) {
            const FtTape *tp = u->m[j].tp;
            const FtTapeEntry *e = &tp->e[u->m[j].entry];
            size_t own = 0;
            for (int k = 0; k < FT_OP_MAX_OUT; k++) {
                size_t at = (size_t)j * FT_OP_MAX_OUT + (size_t)k;
                if (e->out[k] < 0 || !u->m[j].c.out[k] || linked[at] != (pass == 0)) continue;
                size_t b = (tape_tensor_bytes(tp, e->out[k]) + 63) & ~(size_t)63;
                if (pass == 0) u->roff[at] = held, held += b;
                else u->roff[at] = held + own, own += b;
            }
            if (own > shared) shared = own;
        }
    free(linked);
    size_t total = held + shared;
    if (total > d->rscratch_bytes) {
        dmr_mem_free(d, d->rscratch);
        d->rscratch_bytes = total + total / 4;
        d->rscratch = dmr_mem_alloc(d, d->rscratch_bytes, "DMR replay outputs");
    }
}

static void unit_step_(FtDmr *d, Unit *u)
{
    if (u->next == 0) {
        unit_layout(d, u);
        d->cur = u;
    }
    Member *m = &u->m[u->next];
    const FtTape *tp = m->tp; /* a chain's members may run on different pipeline slots' tapes */
    const FtTapeEntry *e = &tp->e[m->entry];
    char *rs = d->rscratch;
    FtOpCall cc = m->c;
    for (int k = 0; k < FT_OP_MAX_IN; k++)
        if (m->link[k] >= 0) cc.in[k] = rs + u->roff[m->link[k]];
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && m->c.out[k]) cc.out[k] = rs + u->roff[u->next * FT_OP_MAX_OUT + k];
    d->be->checker_run(d->be->ctx, dmr_op_fn(d, e), &cc); /* a device's checker stream */
    enum strat s = u->seg < 0 ? S_DEFER : S_AGC;
    for (int j = 0; j < m->nchk; j++) dmr_inject(d, m->chk[j], tp, m->entry, cc.out, m->entry, s);
    if (m->covered) d->s.checks[u->seg < 0 ? FT_DMR_S_DEFERRED : FT_DMR_S_AGC]++;
    if (m->slot >= 0) { /* answered at the agreement: no wait here */
        const uint64_t *saved = d->dfp + (size_t)m->slot * FT_OP_MAX_OUT;
        dmr_fingerprint_into(d, tp, e, &cc,
                             dmr_pending_pair(d, tp, m->entry, m->entry, saved, s));
        slot_give(d, m);
    } else {
        uint64_t fp[FT_OP_MAX_OUT];
        dmr_fingerprint(d, tp, e, &cc, fp);
        if (memcmp(fp, m->fp, sizeof fp)) dmr_mismatch(d, tp, m->entry, m->entry, s);
    }
    if (++u->next == u->nm) unit_remove(d, u);
}

/* Replays all of u now (finishing the unit being replayed first: they share the scratch). */
static void unit_run(FtDmr *d, Unit *u)
{
    if (d->cur && d->cur != u)
        while (d->cur) unit_step(d, d->cur);
    u->complete = true;
    while (u->nm && u->next < u->nm) {
        Unit *v = u;
        int left = u->nm - u->next;
        unit_step(d, v);
        if (left == 1) return; /* freed */
    }
    if (u->nm == 0) unit_remove(d, u);
}

static bool poll_fn(void *arg)
{
    FtDmr *d = arg;
    if (d->in_poll || !d->nunits) return false;
    Unit *u = d->cur;
    for (int i = 0; i < d->nunits && !u; i++)
        if (d->units[i]->complete) u = d->units[i];
    if (!u) return false;
    d->in_poll = true;
    double t0 = omp_get_wtime();
    if (u->next == 0) d->s.windowed++, d->s.dyn_windowed += u->dyn;
    unit_step(d, u); /* one op: then the wait tests its requests again */
    double dt = omp_get_wtime() - t0;
    d->s.check_s += dt, d->s.window_s += dt;
    d->in_poll = false;
    return true;
}

FtPoll dmr_poll(FtDmr *d) { return (FtPoll){.fn = poll_fn, .arg = d}; }

/* Replays every queued unit (before the agreement: no step commits unchecked). */
void dmr_drain(FtDmr *d)
{
    while (d->nunits) {
        Unit *u = d->cur ? d->cur : d->units[0];
        if (u->next == 0) d->s.drained++;
        unit_run(d, u);
    }
}

static Unit *unit_push_(FtDmr *d, Unit *u, const FtTape *tp, int seg, const Member *mp,
                        const size_t *nb, size_t bytes, const FtOpCall *c, const int *chk,
                        int nchk);

/* Keeps nb[k] bytes of each input of m (the primary's call c), fingerprints its outputs and
 * appends it to u (NULL: a new unit at the end of the queue); bytes are charged. Timed: the
 * keeping of a deferred check (keep_s). */
static Unit *unit_push(FtDmr *d, Unit *u, const FtTape *tp, int seg, const Member *mp,
                       const size_t *nb, size_t bytes, const FtOpCall *c, const int *chk,
                       int nchk)
{
    double t0 = omp_get_wtime();
    u = unit_push_(d, u, tp, seg, mp, nb, bytes, c, chk, nchk);
    d->s.keep_s += omp_get_wtime() - t0;
    return u;
}

static Unit *unit_push_(FtDmr *d, Unit *u, const FtTape *tp, int seg, const Member *mp,
                        const size_t *nb, size_t bytes, const FtOpCall *c, const int *chk,
                        int nchk)
{
    Member m = *mp;
    m.tp = tp, m.run = tp != d->opt ? d->runs[m.entry] : 0;
    const FtTapeEntry *e = &tp->e[m.entry];
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        if (!nb[k]) continue;
        m.copy[k] = dmr_keep_alloc(d, nb[k], "DMR kept inputs"); /* aligned as the model's */
        m.nb[k] = nb[k];
        if (d->be->copy_cold) d->be->copy_cold(d->be->ctx, m.copy[k], c->in[k], nb[k]);
        else d->be->copy(d->be->ctx, m.copy[k], c->in[k], nb[k]);
        m.c.in[k] = m.copy[k];
    }
    m.slot = -1;
    if (d->be->fingerprint_into) { /* the primary's, without waiting */
        m.slot = slot_take(d);
        dmr_fingerprint_into(d, tp, e, c, d->dfp + (size_t)m.slot * FT_OP_MAX_OUT);
    } else {
        dmr_fingerprint(d, tp, e, c, m.fp);
    }
    for (int j = 0; j < nchk && m.nchk < 4; j++) m.chk[m.nchk++] = chk[j];
    if (!u) {
        u = calloc(1, sizeof *u);
        FT_ASSERT(u);
        u->tp = tp, u->seg = seg;
        if (d->nunits == d->capunits) {
            d->capunits = d->capunits ? 2 * d->capunits : 16;
            Unit **nu = realloc(d->units, sizeof *nu * (size_t)d->capunits);
            FT_ASSERT(nu);
            d->units = nu;
        }
        d->units[d->nunits++] = u;
    }
    if (u->nm == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 4;
        Member *nm = realloc(u->m, sizeof *nm * (size_t)u->cap);
        FT_ASSERT(nm);
        u->m = nm;
    }
    u->m[u->nm++] = m;
    u->kept += bytes, d->kept += bytes;
    if ((long long)d->kept > d->s.kept_peak) d->s.kept_peak = (long long)d->kept;
    pool_held(d);
    return u;
}

/* ---- chains: a parameter gradient's micro-batches in one unit ------------------------------ */

/* Whether output q of micro-batch tape entry i (a parameter gradient, written on top of the
 * earlier micro-batches' sum) is the only writer of its bytes on the tape: no other entry's
 * output and no marker's message touches them. Then the next micro-batch's execution of i
 * reads as its earlier sum exactly what this one wrote (the banks alternate between
 * micro-batches, gradsync_backward; the data-parallel reduction starts after the last one).
 * From the tape's bound pointers (both banks have one layout); cached per entry and output. */
bool dmr_grad_sole_writer(FtDmr *d, const FtTape *tp, int i, int q)
{
    size_t at = (size_t)i * FT_OP_MAX_OUT + (size_t)q;
    if (!d->sole) {
        d->sole_ne = tp->ne;
        d->sole = malloc((size_t)tp->ne * FT_OP_MAX_OUT);
        FT_ASSERT(d->sole);
        memset(d->sole, -1, (size_t)tp->ne * FT_OP_MAX_OUT);
    }
    FT_ASSERT(tp->ne == d->sole_ne && i >= 0 && i < tp->ne); /* the micro-batch tape's copies */
    if (d->sole[at] >= 0) return d->sole[at];
    const FtTensor *g = &tp->t[tp->e[i].out[q]];
    const char *lo = g->data, *hi = lo + tape_tensor_bytes(tp, tp->e[i].out[q]);
    bool only = lo != NULL;
    for (int j = 0; j < tp->ne && only; j++) {
        const FtTapeEntry *f = &tp->e[j];
        for (int k = 0; k < FT_OP_MAX_OUT + FT_OP_MAX_IN && only; k++) {
            bool is_out = k < FT_OP_MAX_OUT;
            int t = is_out ? f->out[k] : f->in[k - FT_OP_MAX_OUT];
            if (t < 0 || (j == i && k == q) || (!is_out && f->kind != FT_OP_MARK)) continue;
            const char *a = tp->t[t].data, *b = a + tape_tensor_bytes(tp, t);
            if (a && a < hi && lo < b) only = false; /* written, or sent or received in place */
        }
    }
    d->sole[at] = only;
    return only;
}

/* The deferred unit that micro-batch tape entry i's check can join as a chain: a lone op's
 * unit whose last member is entry i (the previous micro-batch's execution) and whose replay
 * has not begun (its replay outputs are laid out when it begins). NULL: none. */
static Unit *chain_unit(FtDmr *d, const FtTape *tp, int i)
{
    if (tp == d->opt) return NULL; /* a micro-batch's: d->micro or a pipeline slot's copy */
    for (int j = d->nunits - 1; j >= 0; j--) {
        Unit *u = d->units[j];
        if (u->tp != d->opt && u->tp->ne == tp->ne && u->seg < 0 && !u->dyn && u != d->cur &&
            u->next == 0 && u->nm > 0 && u->m[u->nm - 1].entry == i)
            return u;
    }
    return NULL;
}

/* The output of micro-batch tape entry i that input k's earlier sum becomes (a parameter
 * gradient of the same parameter and layer, this entry its sole writer on the tape), or -1:
 * input k cannot be taken from the previous execution's replay. */
int dmr_chain_out(FtDmr *d, const FtTape *tp, int i, int k)
{
    const FtTapeEntry *e = &tp->e[i];
    if (!d->chain || tp == d->opt || e->in[k] < 0) return -1;
    const FtTensor *prev = &tp->t[e->in[k]];
    if (prev->role != FT_TR_GRAD_PREV) return -1;
    for (int q = 0; q < FT_OP_MAX_OUT; q++) {
        if (e->out[q] < 0) continue;
        const FtTensor *g = &tp->t[e->out[q]];
        if (g->role == FT_TR_GRAD && g->param == prev->param && g->layer == prev->layer &&
            g->n == prev->n && dmr_grad_sole_writer(d, tp, i, q))
            return q;
    }
    return -1;
}

/* Input k of entry i (the call's pointer p) as the output of u's last member: an earlier sum of
 * a parameter gradient that the entry's execution just before this one wrote (u's last member:
 * the same bank alone would also match the execution before that one), with nothing writing it
 * since. Returns that output's link (member * FT_OP_MAX_OUT + output), or -1. */
static int chain_link(FtDmr *d, const FtTape *tp, int i, int k, const Unit *u, const void *p)
{
    const Member *pm = &u->m[u->nm - 1];
    if (!p || pm->run != d->runs[i] - 1) return -1;
    int q = dmr_chain_out(d, tp, i, k);
    return q >= 0 && pm->c.out[q] == p ? (u->nm - 1) * FT_OP_MAX_OUT + q : -1;
}

/* Entry i (primary outputs c->out) of tape tp, the plan's slot idx (its execution in this
 * micro-batch: the after-op hook's lookup), becomes a member of a deferred unit: its own
 * (seg < 0) or its AGC segment's. Inputs are kept (copied) unless they are model state or the
 * output of an earlier member of the same unit; over the budget, the unit is replayed at once
 * and entry i checked naively. */
void dmr_defer_add(FtDmr *d, const FtTape *tp, int i, int idx, const FtOpCall *c, int seg,
                   bool covered, const int *chk, int nchk)
{
    const FtTapeEntry *e = &tp->e[i];
    Unit *u = NULL;
    for (int j = 0; j < d->nunits && seg >= 0 && !u; j++)
        if (!d->units[j]->complete && d->units[j]->tp == tp && d->units[j]->seg == seg)
            u = d->units[j];
    if (u)
        for (int j = 0; j < u->nm; j++)
            if (u->m[j].entry == i) { /* the tape runs again (next micro-batch): close it */
                u->complete = true;
                u = NULL;
                break;
            }
    Member m = {.entry = i, .c = *c, .covered = covered};
    size_t bytes = 0, nb[FT_OP_MAX_IN] = {0};
    Unit *chain = seg < 0 && d->chain ? chain_unit(d, tp, i) : NULL;
    bool chained = false;
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        m.link[k] = -1;
        if (e->in[k] < 0 || !c->in[k] || stable_role(tp->t[e->in[k]].role)) continue;
        if (chain && (m.link[k] = chain_link(d, tp, i, k, chain, c->in[k])) >= 0) {
            /* charged as the copy it replaces: the previous member's replay output is held
             * until this member's replay reads it */
            m.c.in[k] = NULL, chained = true;
            bytes += tape_tensor_bytes(tp, e->in[k]);
            continue;
        }
        int pr = u && d->link ? d->link[(size_t)idx * FT_OP_MAX_IN + k] : -1;
        for (int j = u ? u->nm - 1 : -1; pr >= 0 && j >= 0; j--)
            if (u->m[j].entry == pr / FT_OP_MAX_OUT) {
                m.link[k] = j * FT_OP_MAX_OUT + pr % FT_OP_MAX_OUT;
                m.c.in[k] = NULL;
                break;
            }
        if (m.link[k] < 0) bytes += nb[k] = tape_tensor_bytes(tp, e->in[k]);
    }
    for (int k = 0; k < FT_OP_MAX_OUT; k++) bytes += e->out[k] >= 0 ? sizeof(uint64_t) : 0;
    if (chained) u = chain;
    if (d->kept + bytes > d->budget) {
        if (u) unit_run(d, u);
        d->s.demoted++;
        dmr_check_naive(d, tp, i, c, chk, nchk);
        return;
    }
    u = unit_push(d, u, tp, seg, &m, nb, bytes, c, chk, nchk);
    if (chained) d->s.chained++;
    if (seg < 0 || d->seg_last[seg] == idx) u->complete = true;
}

void dmr_defer_keep(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const size_t *nb,
                    size_t bytes, bool dyn, const int *chk, int nchk)
{
    Member m = {.entry = i, .c = *c, .covered = true};
    for (int k = 0; k < FT_OP_MAX_IN; k++) m.link[k] = -1;
    Unit *u = unit_push(d, NULL, tp, -1, &m, nb, bytes, c, chk, nchk);
    u->dyn = dyn, u->complete = true;
    if (dyn) {
        d->dyn_kept += bytes;
        if ((long long)d->dyn_kept > d->s.dyn_kept_peak) d->s.dyn_kept_peak = (long long)d->dyn_kept;
    }
}

/* For the AGC members of the plan (by slot): which earlier member of the same segment (and
 * tape, and micro-batch) wrote each input, with no other entry writing or communicating it in
 * between (else -1: kept). A segment's last member: the one of its highest entry (a segment
 * stays inside one micro-batch's execution of a tape). */
static void plan_prepare(FtDmr *d)
{
    const FtDmrEntryPlan *p = &d->plan;
    free(d->link), free(d->seg_last);
    d->link = malloc(((size_t)p->n * FT_OP_MAX_IN + 1) * sizeof *d->link);
    d->seg_last = malloc(((size_t)p->nseg + 1) * sizeof *d->seg_last);
    FT_ASSERT(d->link && d->seg_last);
    for (int s = 0; s < p->nseg; s++) d->seg_last[s] = -1;
    for (int idx = 0; idx < p->n; idx++) {
        for (int k = 0; k < FT_OP_MAX_IN; k++) d->link[(size_t)idx * FT_OP_MAX_IN + k] = -1;
        if (p->seg[idx] < 0) continue;
        d->seg_last[p->seg[idx]] = idx;
        int m, ei = dmr_plan_entry(p, idx, &m);
        const FtTape *tp = ei < p->nmicro ? d->micro : d->opt;
        int i = ei < p->nmicro ? ei : ei - p->nmicro, base = idx - i; /* slot of entry 0 */
        const FtTapeEntry *e = &tp->e[i];
        for (int k = 0; k < FT_OP_MAX_IN; k++) {
            int t = e->in[k];
            if (t < 0) continue;
            for (int j = i - 1; j >= 0; j--) {
                const FtTapeEntry *f = &tp->e[j];
                int w = -1;
                bool touches = false;
                for (int q = 0; q < FT_OP_MAX_OUT; q++)
                    if (f->out[q] == t) w = q, touches = true;
                for (int q = 0; q < FT_OP_MAX_IN && f->kind == FT_OP_MARK; q++)
                    if (f->in[q] == t) touches = true;
                if (!touches) continue;
                if (w >= 0 && f->kind != FT_OP_MARK && p->seg[base + j] == p->seg[idx])
                    d->link[(size_t)idx * FT_OP_MAX_IN + k] = j * FT_OP_MAX_OUT + w;
                break;
            }
        }
    }
}

void dmr_set_plan(FtDmr *d, FtDmrEntryPlan *p)
{
    FT_ASSERT(d->mode == FT_DMR_PLANNED && p->nmicro == d->micro->ne && p->nopt == d->opt->ne);
    dmr_plan_free(&d->plan);
    d->plan = *p;
    memset(p, 0, sizeof *p);
    d->profile_left = 0;
    plan_prepare(d);
    dmr_dyn_prepare(d);
}

const FtDmrEntryPlan *dmr_plan(const FtDmr *d) { return d->plan.strat ? &d->plan : NULL; }

const FtDmrProfile *dmr_profile(const FtDmr *d)
{
    return d->plan.strat && d->prof.steps > 0 ? &d->prof : NULL;
}

/* ---- the profile --------------------------------------------------------------------------- */

void dmr_prof_waits(const FtDmr *d, double *w)
{
    w[0] = w[1] = 0;
    if (!d->tl) return;
    for (int k = 0; k < FT_TL_NKINDS; k++)
        if (k != FT_TL_STEP) w[k != FT_TL_PP] += d->tl->total[k];
}

/* The waits since the last op go after it; idx (-2: none) runs next. */
void dmr_prof_note(FtDmr *d, int idx)
{
    double w[2];
    dmr_prof_waits(d, w);
    if (d->prof_count) {
        d->prof.wait_pp[d->prof_last + 1] += w[0] - d->prof_w[0];
        d->prof.wait_other[d->prof_last + 1] += w[1] - d->prof_w[1];
        double dw = (w[0] - d->prof_w[0]) + (w[1] - d->prof_w[1]);
        if (!d->prof_bwd) d->prof.pre_bwd_s += dw;
        dmr_profile_seq(&d->prof, d->prof_pos, idx > -2 ? idx : -1, d->inst, dw, w[0] - d->prof_w[0]);
        if (idx > -2) d->prof_pos++;
    }
    d->prof_w[0] = w[0], d->prof_w[1] = w[1];
    if (idx > -2) d->prof_last = idx;
}

/* An attempt of the profile reached its agreement at `now`: measured, and open until its fate
 * is known (dmr_profile_settle, dmr_attempt_broken). */
void dmr_profile_end(FtDmr *d, double now)
{
    if (d->prof_count) {
        d->prof.steps++;
        d->prof.step_s += now - d->t_attempt - (d->s.check_s - d->att_check_s); /* unchecked */
        d->prof.wall_s += now - d->t_attempt;
    }
    d->prof_open = true;
}

/* The open attempt counts (its step committed, or it is computed again for a mismatch: a whole
 * attempt, its times as valid as any); after the profile's last, plan. */
void dmr_profile_settle(FtDmr *d)
{
    if (!d->prof_open) return;
    d->prof_open = false;
    if (--d->profile_left > 0) return;
    FtDmrEntryPlan p;
    if (dmr_plan_build(&d->prof, d->micro, d->opt, d->budget, d->phases, &p))
        FT_DIE("dmr: out of memory planning %d entries", d->micro->ne + d->opt->ne);
    p.profile_steps = d->profile_steps;
    dmr_set_plan(d, &p);
    if (d->on_plan) d->on_plan(d->on_plan_arg, d);
}

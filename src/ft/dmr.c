/* dmr.c: dual modular redundancy and fault injection on the executor's after-op hook (dmr.h).
 *
 * Key decisions:
 *  - The naive checker runs the op's own call with its outputs pointed at scratch memory (ops
 *    write every output byte from their inputs alone, ops.h), so the primary's bytes are never
 *    touched by a clean check and the comparison is exact (memcmp), not a hash.
 *  - Piggyback keeps one fingerprint per output of each forward entry that has a recompute
 *    twin (per tape: the pipeline slots are separate tapes), not a copy: the checkpoint
 *    checksum, whose per-element terms are bijections, so a single corrupted element can never
 *    collide.
 *  - An attempt starts at the first training micro-batch after the last agreement and ends at
 *    dmr_agree; everything per attempt (execution counts, injections, mismatches) lives in the
 *    context and is reset there. The agreement is one all-reduce of one integer; who mismatched
 *    is asked (an all-gather) only when someone did, so suspects are counted the same on every
 *    rank.
 *  - Time is wall time of this thread (omp_get_wtime): no MPI outside comm/. */
#include "ftllm/dmr.h"

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/ckpt.h"
#include "ftllm/deck_keys.h"
#include "ftllm/log.h"

enum strat { S_NONE, S_NAIVE, S_PB_SAVE, S_PB_CHECK, S_DEFER, S_AGC };

/* A deferred check (mode planned): one op (D-DMR) or the members of an AGC segment that ran so
 * far, replayed from what was kept when each primary ran. */
typedef struct member {
    int entry;                  /* in its tape */
    FtOpCall c;                 /* inputs: kept copies, model state, or NULL where link >= 0 */
    int link[FT_OP_MAX_IN];     /* input k is member link/FT_OP_MAX_OUT's output link%MAX, or -1 */
    void *copy[FT_OP_MAX_IN];   /* kept copies (freed with the unit) */
    uint64_t fp[FT_OP_MAX_OUT]; /* the primary's output fingerprints */
    int chk[4], nchk;           /* checker flips (applied to the replay's outputs) */
    bool covered;               /* counted as a check (AGC: not a piggyback op replayed) */
} Member;

typedef struct unit {
    const FtTape *tp;
    int seg;        /* AGC segment, -1: one op */
    Member *m;
    int nm, cap;
    size_t kept;    /* bytes charged to the budget */
    bool complete;  /* its last member ran (or it was closed) */
    int next;       /* members replayed so far */
    size_t *roff;   /* [nm x FT_OP_MAX_OUT] replay output offsets in the replay scratch */
} Unit;

/* Piggyback fingerprints of one tape. */
typedef struct fp_store {
    const FtTape *tp;
    int ne;
    uint64_t *fp;           /* ne x FT_OP_MAX_OUT */
    unsigned char *pending; /* ne: fingerprinted, twin not run yet */
    int npending;
} FpStore;

typedef struct inj { /* a flip applied in this attempt */
    int flip;
    const FtTape *tp;
    int key; /* the entry whose check covers it */
    bool detected;
} Inj;

typedef struct deferred { /* a checker flip waiting for its recompute twin */
    int flip;
    const FtTape *tp;
    int entry, key;
} Deferred;

#define MAX_STORES (FT_EXEC_MAX_TAPES + 2)

struct ft_dmr {
    int mode, suspect_after;
    const FtBackend *be;
    int rank, nranks; /* in the world of the last agreement */
    FtFlip *flips;
    bool *fired;
    int nflips;
    FpStore st[MAX_STORES];
    int nst;
    void *scratch;
    size_t scratch_bytes;
    /* the attempt */
    bool in_attempt, active;
    long long step;
    long long count[FT_OP_NKINDS];
    int *armed, narmed; /* this step's flips not fired yet (-1: fired) */
    Inj *inj;
    int ninj, capinj;
    Deferred *def;
    int ndef, capdef;
    long long mism;
    char first[256];
    double t_attempt;
    /* mode planned */
    const FtTape *micro, *opt;
    int phases, profile_left, profile_steps;
    size_t budget, kept;
    const FtTimeline *tl;
    FtDmrEntryPlan plan; /* plan.strat NULL: profiling */
    FtDmrProfile prof;
    int prof_last;       /* entry space index of the op that ran last (-1: none this attempt) */
    double prof_w[2];    /* the timeline's waits (pp, others) at the last op */
    bool prof_count;     /* this attempt is measured */
    int prof_attempt;    /* attempts profiled */
    double att_check_s;  /* check_s when the attempt began */
    int *seg_last;       /* [plan.nseg] entry of each segment's last member */
    Unit *cur;           /* the unit being replayed (its outputs are in rscratch) */
    int *link;           /* [n x FT_OP_MAX_IN] AGC members: producer entry * MAX_OUT + k, or -1 */
    Unit **units;        /* deferred checks in order: open and complete */
    int nunits, capunits;
    void *rscratch;      /* the replay outputs of the unit being replayed */
    size_t rscratch_bytes;
    bool in_poll;
    void (*on_plan)(void *arg, FtDmr *d);
    void *on_plan_arg;
    /* the run */
    FtDmrStats s;
    int *bad_steps, *who; /* per world rank */
    bool *suspect;
};

const char *dmr_mode_name(int mode)
{
    static const char *const names[] = {"off", "naive", "piggyback", "planned"};
    return mode >= 0 && mode < 4 ? names[mode] : "?";
}

static void unit_free(FtDmr *d, Unit *u);

static const char *const g_strat_name[] = {"none", "naive", "piggyback", "piggyback", "deferred",
                                           "agc"};

/* ---- set-up -------------------------------------------------------------------------------- */

FtDmr *dmr_create(const FtDmrCfg *cfg)
{
    FtDmr *d = calloc(1, sizeof *d);
    FT_ASSERT(d);
    d->mode = cfg->mode;
    FT_ASSERT(d->mode >= FT_DMR_OFF && d->mode <= FT_DMR_PLANNED);
    if (d->mode == FT_DMR_PLANNED) {
        FT_ASSERT(cfg->micro && cfg->opt);
        d->micro = cfg->micro, d->opt = cfg->opt, d->tl = cfg->tl;
        d->phases = cfg->phases, d->budget = cfg->budget;
        d->profile_steps = d->profile_left = cfg->profile_steps > 0 ? cfg->profile_steps : 1;
        d->on_plan = cfg->on_plan, d->on_plan_arg = cfg->on_plan_arg;
        dmr_profile_init(&d->prof, d->micro->ne, d->opt->ne);
    }
    d->suspect_after = cfg->suspect_after;
    d->be = cfg->be ? cfg->be : backend_cpu();
    if (strcmp(d->be->name, "cpu"))
        FT_DIE("dmr: the checks compare outputs through host pointers; the %s backend needs a "
               "device-side compare first", d->be->name);
    d->rank = cfg->world ? comm_rank(cfg->world) : 0;
    d->nranks = cfg->world ? comm_size(cfg->world) : 1;
    for (int i = 0; i < cfg->nflips; i++) d->nflips += cfg->flips[i].rank == d->rank;
    d->flips = calloc((size_t)d->nflips + 1, sizeof *d->flips);
    d->fired = calloc((size_t)d->nflips + 1, sizeof *d->fired);
    d->armed = calloc((size_t)d->nflips + 1, sizeof *d->armed);
    d->bad_steps = calloc((size_t)d->nranks, sizeof *d->bad_steps);
    d->who = calloc((size_t)d->nranks, sizeof *d->who);
    d->suspect = calloc((size_t)d->nranks, sizeof *d->suspect);
    FT_ASSERT(d->flips && d->fired && d->armed && d->bad_steps && d->who && d->suspect);
    int n = 0;
    for (int i = 0; i < cfg->nflips; i++)
        if (cfg->flips[i].rank == d->rank) d->flips[n++] = cfg->flips[i];
    return d;
}

void dmr_free(FtDmr *d)
{
    if (!d) return;
    for (int i = 0; i < d->nst; i++) free(d->st[i].fp), free(d->st[i].pending);
    if (d->scratch) d->be->release(d->be->ctx, d->scratch);
    free(d->flips), free(d->fired), free(d->armed), free(d->inj), free(d->def);
    free(d->bad_steps), free(d->who), free(d->suspect);
    for (int i = 0; i < d->nunits; i++) unit_free(d, d->units[i]);
    free(d->units), free(d->link), free(d->seg_last), free(d->rscratch);
    dmr_plan_free(&d->plan);
    dmr_profile_free(&d->prof);
    free(d);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static bool writes_ints(const FtTape *tp, const FtTapeEntry *e)
{
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && (tp->t[e->out[k]].dtype == FT_I32 || tp->t[e->out[k]].dtype == FT_I64))
            return true;
    return false;
}

/* Entry i of tape tp in the plan's entry space (dmr_plan.h). */
static int entry_index(const FtDmr *d, const FtTape *tp, int i)
{
    return tp == d->opt ? d->micro->ne + i : i;
}

static enum strat strategy(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e, int idx)
{
    if (d->mode == FT_DMR_OFF) return S_NONE;
    bool pb = e->twin >= 0 && !writes_ints(tp, e);
    if (d->mode == FT_DMR_PIGGYBACK && pb) return e->phase == FT_PH_RECOMPUTE ? S_PB_CHECK : S_PB_SAVE;
    if (d->mode != FT_DMR_PLANNED || !d->plan.strat) return S_NAIVE; /* planned: profiling */
    switch (d->plan.strat[idx]) {
    case PLAN_PIGGYBACK:
        if (pb) return e->phase == FT_PH_RECOMPUTE ? S_PB_CHECK : S_PB_SAVE;
        return S_NAIVE;
    case PLAN_DEFERRED: return S_DEFER;
    case PLAN_AGC: return S_AGC;
    default: return S_NAIVE;
    }
}

static FpStore *store(FtDmr *d, const FtTape *tp)
{
    FpStore *s = NULL;
    for (int i = 0; i < d->nst && !s; i++)
        if (d->st[i].tp == tp) s = &d->st[i];
    if (!s) {
        if (d->nst == MAX_STORES) FT_DIE("dmr: more than %d tapes", MAX_STORES);
        s = &d->st[d->nst++];
        *s = (FpStore){.tp = tp};
    }
    if (s->ne != tp->ne) { /* new, or a tape rebuilt at the same address (regrid) */
        free(s->fp), free(s->pending);
        s->ne = tp->ne;
        s->fp = calloc((size_t)tp->ne * FT_OP_MAX_OUT, sizeof *s->fp);
        s->pending = calloc((size_t)tp->ne, 1);
        s->npending = 0;
        FT_ASSERT(s->fp && s->pending);
    }
    return s;
}

static void run_op(const FtDmr *d, const FtTapeEntry *e, const FtOpCall *c)
{
    const FtOpDesc *od = &d->be->ops[e->kind];
    (e->dir == FT_FWD ? od->fwd : od->bwd)(c);
}

static void entry_name(const FtTape *tp, int i, char *buf, size_t len)
{
    const FtTapeEntry *e = &tp->e[i];
    static const char *const ph[] = {"forward", "backward", "recompute"};
    bool opt = e->kind == FT_OP_ADAMW || e->kind == FT_OP_GRADNORM;
    char layer[24] = "";
    if (e->layer >= 0) snprintf(layer, sizeof layer, " layer %d", e->layer);
    snprintf(buf, len, "%s.%s '%s'%s (entry %d, %s)", ops_desc(e->kind)->name,
             e->dir == FT_FWD ? "fwd" : "bwd", e->label ? e->label : "", layer, i,
             opt ? "optimizer" : ph[e->phase]);
}

/* Flips f's bit in outs (the outputs of entry i, the primary's or a checker's). Returns false
 * when the element is past them (nothing flipped). */
static bool flip_bit(FtDmr *d, const FtTape *tp, int i, void *const *outs, const FtFlip *f,
                     long long *elem_out, int *out_k)
{
    const FtTapeEntry *e = &tp->e[i];
    long long total = 0;
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && outs[k]) total += (long long)tp->t[e->out[k]].n;
    if (total == 0) return false;
    long long el = f->elem >= 0 ? f->elem : (long long)(f->elem_draw % (uint64_t)total);
    if (el >= total) return false;
    *elem_out = el;
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        if (e->out[k] < 0 || !outs[k]) continue;
        const FtTensor *t = &tp->t[e->out[k]];
        if (el >= (long long)t->n) {
            el -= (long long)t->n;
            continue;
        }
        size_t es = ft_dtype_size(t->dtype);
        if ((size_t)f->bit >= 8 * es) return false;
        unsigned char b[8];
        char *p = (char *)outs[k] + (size_t)el * es;
        d->be->to_host(d->be->ctx, b, p, es);
        b[f->bit / 8] ^= (unsigned char)(1u << (f->bit % 8));
        d->be->to_device(d->be->ctx, p, b, es);
        *out_k = k;
        return true;
    }
    return false;
}

static int strat_index(enum strat s)
{
    return s == S_NAIVE   ? FT_DMR_S_NAIVE
           : s == S_NONE  ? FT_DMR_NSTRAT
           : s == S_DEFER ? FT_DMR_S_DEFERRED
           : s == S_AGC   ? FT_DMR_S_AGC
                          : FT_DMR_S_PIGGYBACK;
}

/* Applies flip fi to outs of entry i; its check covers `key`. */
static void inject(FtDmr *d, int fi, const FtTape *tp, int i, void *const *outs, int key,
                   enum strat s)
{
    const FtFlip *f = &d->flips[fi];
    const FtTapeEntry *e = &tp->e[i];
    long long el = 0;
    int k = 0;
    char nm[160];
    entry_name(tp, i, nm, sizeof nm);
    if (!flip_bit(d, tp, i, outs, f, &el, &k)) {
        d->s.not_fired++;
        ft_log_rank(FT_LOG_WARN, "faults: line %d: step %lld: %s has no element %lld with a bit "
                    "%d: flip not applied", f->line, d->step, nm, f->elem, f->bit);
        return;
    }
    if (d->ninj == d->capinj) {
        d->capinj = d->capinj ? 2 * d->capinj : 16;
        Inj *ni = realloc(d->inj, sizeof *ni * (size_t)d->capinj);
        FT_ASSERT(ni);
        d->inj = ni;
    }
    d->inj[d->ninj++] = (Inj){.flip = fi, .tp = tp, .key = key};
    d->s.injected++;
    d->s.injected_at[e->kind][e->phase]++;
    d->s.injected_by[strat_index(s)][f->target == FT_TARGET_CHECKER]++;
    ft_log_rank(FT_LOG_INFO, "faults: step %lld: flipped bit %d of %s[%lld] written by %s, "
                "execution %lld of %s (%s; schedule line %d)", d->step, f->bit,
                tp->t[e->out[k]].name, el, nm, f->nth, ops_desc(e->kind)->name,
                f->target == FT_TARGET_CHECKER ? "its checker's output" : "the primary's output",
                f->line);
}

static void defer(FtDmr *d, int fi, const FtTape *tp, int twin, int key)
{
    if (d->ndef == d->capdef) {
        d->capdef = d->capdef ? 2 * d->capdef : 8;
        Deferred *nd = realloc(d->def, sizeof *nd * (size_t)d->capdef);
        FT_ASSERT(nd);
        d->def = nd;
    }
    d->def[d->ndef++] = (Deferred){.flip = fi, .tp = tp, .entry = twin, .key = key};
}

static void mismatch(FtDmr *d, const FtTape *tp, int i, int key, enum strat s)
{
    d->mism++;
    d->s.mismatches++;
    for (int j = 0; j < d->ninj; j++)
        if (d->inj[j].tp == tp && d->inj[j].key == key) d->inj[j].detected = true;
    if (!d->first[0]) {
        char nm[160];
        entry_name(tp, i, nm, sizeof nm);
        snprintf(d->first, sizeof d->first, "%s, %s check", nm, g_strat_name[s]);
    }
}

/* ---- the checks ---------------------------------------------------------------------------- */

static void scratch_reserve(FtDmr *d, size_t bytes)
{
    if (bytes <= d->scratch_bytes) return;
    if (d->scratch) d->be->release(d->be->ctx, d->scratch);
    d->scratch_bytes = bytes + bytes / 4;
    d->scratch = backend_alloc(d->be, d->scratch_bytes, "DMR checker outputs");
}

/* Runs entry i again into scratch outputs (flipping the checker flips chk[0..nchk) there) and
 * compares with the primary's outputs c->out. */
static void check_naive(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                        int nchk)
{
    const FtTapeEntry *e = &tp->e[i];
    size_t nb[FT_OP_MAX_OUT], off[FT_OP_MAX_OUT], total = 0;
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        nb[k] = e->out[k] >= 0 && c->out[k] ? tape_tensor_bytes(tp, e->out[k]) : 0;
        off[k] = total;
        total += (nb[k] + 63) & ~(size_t)63;
    }
    if (total == 0) return;
    scratch_reserve(d, total);
    FtOpCall cc = *c;
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (nb[k]) cc.out[k] = (char *)d->scratch + off[k];
    double t0 = omp_get_wtime();
    run_op(d, e, &cc);
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat && d->prof_count)
        d->prof.time[entry_index(d, tp, i)] += omp_get_wtime() - t0; /* the checker's time */
    for (int j = 0; j < nchk; j++) inject(d, chk[j], tp, i, cc.out, i, S_NAIVE);
    bool same = true;
    for (int k = 0; k < FT_OP_MAX_OUT && same; k++)
        if (nb[k] && memcmp(c->out[k], cc.out[k], nb[k])) same = false;
    d->s.checks[FT_DMR_S_NAIVE]++;
    if (same) return;
    mismatch(d, tp, i, i, S_NAIVE);
    run_op(d, e, c); /* a third run into the primary's outputs: clean bytes go on */
}

static void fingerprint(const FtTape *tp, const FtTapeEntry *e, const FtOpCall *c, uint64_t *fp)
{
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        fp[k] = 0;
        if (e->out[k] < 0 || !c->out[k]) continue;
        const FtTensor *t = &tp->t[e->out[k]];
        fp[k] = ckpt_checksum_array(c->out[k], ft_dtype_size(t->dtype), t->n);
    }
}

/* ---- deferred checks (mode planned) -------------------------------------------------------- */

static bool stable_role(FtTensorRole r)
{
    return r == FT_TR_PARAM || r == FT_TR_MOM1 || r == FT_TR_MOM2; /* unchanged until commit */
}

static void unit_free(FtDmr *d, Unit *u)
{
    if (!u) return;
    for (int j = 0; j < u->nm; j++)
        for (int k = 0; k < FT_OP_MAX_IN; k++) free(u->m[j].copy[k]);
    d->kept -= u->kept;
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
    unit_free(d, u);
}

/* Replays u's next member into the replay scratch and compares its output fingerprints with
 * the primary's; the last member frees u. */
static void unit_step(FtDmr *d, Unit *u)
{
    if (u->next == 0) { /* the replay outputs of every member, carved from one buffer */
        u->roff = calloc((size_t)u->nm * FT_OP_MAX_OUT, sizeof *u->roff);
        FT_ASSERT(u->roff);
        size_t total = 0;
        for (int j = 0; j < u->nm; j++) {
            const FtTapeEntry *e = &u->tp->e[u->m[j].entry];
            for (int k = 0; k < FT_OP_MAX_OUT; k++) {
                u->roff[j * FT_OP_MAX_OUT + k] = total;
                if (e->out[k] >= 0 && u->m[j].c.out[k])
                    total += (tape_tensor_bytes(u->tp, e->out[k]) + 63) & ~(size_t)63;
            }
        }
        if (total > d->rscratch_bytes) {
            free(d->rscratch);
            d->rscratch_bytes = total + total / 4;
            d->rscratch = aligned_alloc(64, (d->rscratch_bytes + 63) & ~(size_t)63);
            FT_ASSERT(d->rscratch);
        }
        d->cur = u;
    }
    Member *m = &u->m[u->next];
    const FtTapeEntry *e = &u->tp->e[m->entry];
    char *rs = d->rscratch;
    FtOpCall cc = m->c;
    for (int k = 0; k < FT_OP_MAX_IN; k++)
        if (m->link[k] >= 0) cc.in[k] = rs + u->roff[m->link[k]];
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && m->c.out[k]) cc.out[k] = rs + u->roff[u->next * FT_OP_MAX_OUT + k];
    run_op(d, e, &cc);
    enum strat s = u->seg < 0 ? S_DEFER : S_AGC;
    for (int j = 0; j < m->nchk; j++) inject(d, m->chk[j], u->tp, m->entry, cc.out, m->entry, s);
    uint64_t fp[FT_OP_MAX_OUT];
    fingerprint(u->tp, e, &cc, fp);
    if (m->covered) d->s.checks[u->seg < 0 ? FT_DMR_S_DEFERRED : FT_DMR_S_AGC]++;
    if (memcmp(fp, m->fp, sizeof fp)) mismatch(d, u->tp, m->entry, m->entry, s);
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
    if (u->next == 0) d->s.windowed++;
    unit_step(d, u); /* one op: then the wait tests its requests again */
    double dt = omp_get_wtime() - t0;
    d->s.check_s += dt, d->s.window_s += dt;
    d->in_poll = false;
    return true;
}

FtPoll dmr_poll(FtDmr *d) { return (FtPoll){.fn = poll_fn, .arg = d}; }

/* Replays every queued unit (before the agreement: no step commits unchecked). */
static void drain(FtDmr *d)
{
    while (d->nunits) {
        Unit *u = d->cur ? d->cur : d->units[0];
        if (u->next == 0) d->s.drained++;
        unit_run(d, u);
    }
}

/* Entry i (primary outputs c->out) of tape tp becomes a member of a deferred unit: its own
 * (seg < 0) or its AGC segment's. Inputs are kept (copied) unless they are model state or the
 * output of an earlier member of the same unit; over the budget, the unit is replayed at once
 * and entry i checked naively. */
static void defer_add(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, int seg,
                      bool covered, const int *chk, int nchk)
{
    const FtTapeEntry *e = &tp->e[i];
    int idx = entry_index(d, tp, i);
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
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        m.link[k] = -1;
        if (e->in[k] < 0 || !c->in[k] || stable_role(tp->t[e->in[k]].role)) continue;
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
    if (d->kept + bytes > d->budget) {
        if (u) unit_run(d, u);
        d->s.demoted++;
        check_naive(d, tp, i, c, chk, nchk);
        return;
    }
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        if (!nb[k]) continue;
        m.copy[k] = aligned_alloc(64, (nb[k] + 63) & ~(size_t)63); /* as the model's buffers */
        FT_ASSERT(m.copy[k]);
        memcpy(m.copy[k], c->in[k], nb[k]);
        m.c.in[k] = m.copy[k];
    }
    fingerprint(tp, e, c, m.fp);
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
    if (seg < 0 || d->seg_last[seg] == idx) u->complete = true;
}

/* For the AGC members of the plan: which earlier member of the same segment (and tape) wrote
 * each input, with no other entry writing or communicating it in between (else -1: kept). */
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
        const FtTape *tp = idx < p->nmicro ? d->micro : d->opt;
        int i = idx < p->nmicro ? idx : idx - p->nmicro, base = idx - i;
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
}

const FtDmrEntryPlan *dmr_plan(const FtDmr *d) { return d->plan.strat ? &d->plan : NULL; }

/* ---- the profile --------------------------------------------------------------------------- */

static void prof_waits(const FtDmr *d, double *w)
{
    w[0] = w[1] = 0;
    if (!d->tl) return;
    for (int k = 0; k < FT_TL_NKINDS; k++)
        if (k != FT_TL_STEP) w[k != FT_TL_PP] += d->tl->total[k];
}

/* The waits since the last op go after it; idx (-2: none) runs next. */
static void prof_note(FtDmr *d, int idx)
{
    double w[2];
    prof_waits(d, w);
    if (d->prof_count) {
        d->prof.wait_pp[d->prof_last + 1] += w[0] - d->prof_w[0];
        d->prof.wait_other[d->prof_last + 1] += w[1] - d->prof_w[1];
    }
    d->prof_w[0] = w[0], d->prof_w[1] = w[1];
    if (idx > -2) d->prof_last = idx;
}

/* ---- the after-op hook --------------------------------------------------------------------- */

static void after_op(void *arg, const FtTape *tp, int i, const FtOpCall *c)
{
    FtDmr *d = arg;
    if (!d->active) return;
    double t0 = omp_get_wtime();
    const FtTapeEntry *e = &tp->e[i];
    long long nth = d->count[e->kind]++;
    int idx = 0;
    if (d->mode == FT_DMR_PLANNED) {
        FT_ASSERT(tp == d->opt || tp->ne == d->micro->ne); /* a pipeline slot: a copy */
        idx = entry_index(d, tp, i);
        if (!d->plan.strat) prof_note(d, idx);
    }
    enum strat s = strategy(d, tp, e, idx);
    int key = s == S_PB_CHECK ? e->twin : i;
    int chk[16], nchk = 0;
    for (int a = 0; a < d->narmed; a++) {
        int fi = d->armed[a];
        if (fi < 0 || d->flips[fi].op != e->kind || d->flips[fi].nth != nth) continue;
        d->armed[a] = -1;
        d->fired[fi] = true;
        const FtFlip *f = &d->flips[fi];
        if (f->target == FT_TARGET_PRIMARY || s == S_PB_CHECK) {
            inject(d, fi, tp, i, c->out, key, s);
        } else if ((s == S_NAIVE || s == S_DEFER || s == S_AGC) && nchk < 16) {
            chk[nchk++] = fi;
        } else if (s == S_PB_SAVE) {
            defer(d, fi, tp, e->twin, i);
        } else {
            d->s.not_fired++;
            ft_log_rank(FT_LOG_DEBUG, "faults: line %d: no checker runs (dmr.mode = %s): flip "
                        "not applied", f->line, dmr_mode_name(d->mode));
        }
    }
    if (s == S_PB_CHECK)
        for (int j = 0; j < d->ndef; j++)
            if (d->def[j].tp == tp && d->def[j].entry == i) {
                inject(d, d->def[j].flip, tp, i, c->out, d->def[j].key, s);
                d->def[j--] = d->def[--d->ndef];
            }
    switch (s) {
    case S_NONE: break;
    case S_NAIVE: check_naive(d, tp, i, c, chk, nchk); break;
    case S_DEFER: defer_add(d, tp, i, c, -1, true, chk, nchk); break;
    case S_AGC: defer_add(d, tp, i, c, d->plan.seg[idx], true, chk, nchk); break;
    case S_PB_SAVE: {
        FpStore *st = store(d, tp);
        fingerprint(tp, e, c, st->fp + (size_t)i * FT_OP_MAX_OUT);
        if (!st->pending[i]) st->pending[i] = 1, st->npending++;
        break;
    }
    case S_PB_CHECK: {
        FpStore *st = store(d, tp);
        int f = e->twin;
        if (!st->pending[f]) {
            d->s.unchecked++;
            break;
        }
        uint64_t fp[FT_OP_MAX_OUT];
        fingerprint(tp, e, c, fp);
        st->pending[f] = 0;
        st->npending--;
        d->s.checks[FT_DMR_S_PIGGYBACK]++;
        if (memcmp(fp, st->fp + (size_t)f * FT_OP_MAX_OUT, sizeof fp)) mismatch(d, tp, i, f, s);
        break;
    }
    }
    if ((s == S_PB_SAVE || s == S_PB_CHECK) && d->plan.strat && d->plan.seg[idx] >= 0)
        defer_add(d, tp, i, c, d->plan.seg[idx], false, NULL, 0); /* replayed in its segment */
    d->s.check_s += omp_get_wtime() - t0;
}

FtExecHooks dmr_hooks(FtDmr *d) { return (FtExecHooks){.after_op = after_op, .arg = d}; }

/* The job's world changed size (a replica left: train_regrid): per-rank history starts over,
 * since the ranks are numbered anew. */
static void resize_world(FtDmr *d, FtComm *world)
{
    int n = world ? comm_size(world) : 1;
    d->rank = world ? comm_rank(world) : 0;
    if (n == d->nranks) return;
    d->nranks = n;
    free(d->bad_steps), free(d->who), free(d->suspect);
    d->bad_steps = calloc((size_t)n, sizeof *d->bad_steps);
    d->who = calloc((size_t)n, sizeof *d->who);
    d->suspect = calloc((size_t)n, sizeof *d->suspect);
    FT_ASSERT(d->bad_steps && d->who && d->suspect);
}

/* ---- attempts ------------------------------------------------------------------------------ */

void dmr_step_begin(FtDmr *d, long long step)
{
    if (!d->in_attempt) {
        d->in_attempt = true;
        d->step = step;
        memset(d->count, 0, sizeof d->count);
        d->mism = 0;
        d->first[0] = '\0';
        d->ninj = d->ndef = 0;
        d->narmed = 0;
        for (int i = 0; i < d->nflips; i++)
            if (!d->fired[i] && d->flips[i].step == step) d->armed[d->narmed++] = i;
        d->t_attempt = omp_get_wtime();
        d->s.attempts++;
        d->att_check_s = d->s.check_s;
        if (d->mode == FT_DMR_PLANNED && !d->plan.strat) {
            d->prof_attempt++;
            d->prof_count = d->profile_steps == 1 || d->prof_attempt > 1; /* 1st: warm-up */
            d->prof_last = -1;
            prof_waits(d, d->prof_w);
        }
    }
    FT_ASSERT(d->step == step);
    d->active = true;
}

void dmr_pause(FtDmr *d) { d->active = false; }

/* An attempt of the profile ended at `now`; after the last one, plan. */
static void profile_end(FtDmr *d, double now)
{
    if (d->prof_count) {
        d->prof.steps++;
        d->prof.step_s += now - d->t_attempt - (d->s.check_s - d->att_check_s); /* unchecked */
        d->prof.wall_s += now - d->t_attempt;
    }
    if (--d->profile_left > 0) return;
    FtDmrEntryPlan p;
    if (dmr_plan_build(&d->prof, d->micro, d->opt, d->budget, d->phases, &p))
        FT_DIE("dmr: out of memory planning %d entries", d->micro->ne + d->opt->ne);
    p.profile_steps = d->profile_steps;
    dmr_set_plan(d, &p);
    if (d->on_plan) d->on_plan(d->on_plan_arg, d);
}

int dmr_agree(FtDmr *d, FtExec *ex, FtComm *world)
{
    double t0 = omp_get_wtime();
    resize_world(d, world);
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat) prof_note(d, -2);
    drain(d);
    for (int i = 0; i < d->nst; i++) { /* forward fingerprints whose twin never ran */
        FpStore *st = &d->st[i];
        for (int j = 0; j < st->ne && st->npending; j++)
            if (st->pending[j]) st->pending[j] = 0, st->npending--, d->s.unchecked++;
    }
    d->s.not_fired += d->ndef; /* checker flips whose twin never ran */
    d->ndef = 0;
    long long mine = d->mism > 0, all = mine;
    FtReq r;
    if (world && d->nranks > 1) {
        comm_iallreduce_sum(world, &mine, &all, 1, FT_I64, &r);
        exec_wait(ex, &r, 1, FT_TL_OTHER);
    }
    int redo = all > 0;
    if (redo) {
        int me = mine > 0;
        if (world && d->nranks > 1) {
            comm_iallgather(world, &me, d->who, 1, FT_I32, &r);
            exec_wait(ex, &r, 1, FT_TL_OTHER);
        } else {
            d->who[0] = me;
        }
        if (d->mism)
            ft_log_rank(FT_LOG_INFO, "dmr: step %lld: %lld check%s mismatched, the first: %s",
                        d->step, d->mism, d->mism == 1 ? "" : "s", d->first);
        char list[256] = "";
        size_t len = 0;
        int nbad = 0;
        for (int q = 0; q < d->nranks; q++) {
            if (!d->who[q]) continue;
            nbad++;
            if (len + 16 < sizeof list) len += (size_t)snprintf(list + len, sizeof list - len, "%sr%d", nbad > 1 ? " " : "", q);
            d->bad_steps[q]++;
            if (d->suspect_after > 0 && d->bad_steps[q] >= d->suspect_after && !d->suspect[q]) {
                d->suspect[q] = true;
                log_warn("dmr: rank %d is suspect: its checks mismatched in %d steps "
                         "(dmr.suspect_after = %d); SPARe is to retire it", q, d->bad_steps[q],
                         d->suspect_after);
            }
        }
        log_info("dmr: step %lld: mismatch on %d of %d rank%s (%s): rolled back, computing the "
                 "step again from the same state", d->step, nbad, d->nranks,
                 d->nranks == 1 ? "" : "s", list);
        d->s.redone++;
    }
    for (int j = 0; j < d->ninj; j++) {
        if (d->inj[j].detected) d->s.detected++;
        else d->s.missed++;
        if (redo) d->s.rolled_back++;
    }
    d->ninj = 0;
    double now = omp_get_wtime();
    d->s.compute_s += now - d->t_attempt;
    if (redo) d->s.redo_s += now - d->t_attempt;
    d->s.check_s += now - t0;
    d->in_attempt = d->active = false;
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat) profile_end(d, now);
    return redo;
}

/* ---- counters and report ------------------------------------------------------------------- */

void dmr_stats(const FtDmr *d, FtDmrStats *s)
{
    *s = d->s;
    for (int i = 0; i < d->nflips; i++) s->not_fired += !d->fired[i];
}

/* The counters as one array of long longs (and the times apart). */
#define NCOUNT ((int)(offsetof(FtDmrStats, check_s) / sizeof(long long)))

void dmr_stats_job(FtDmr *d, FtComm *world, FtDmrStats *s)
{
    dmr_stats(d, s);
    if (!world || comm_size(world) == 1) return;
    long long c[NCOUNT];
    memcpy(c, s, sizeof c);
    comm_allreduce_sum(world, FT_IN_PLACE, c, NCOUNT, FT_I64);
    double t[4] = {s->check_s, s->compute_s, s->redo_s, s->window_s};
    comm_allreduce_sum(world, FT_IN_PLACE, t, 4, FT_F64);
    long long peak = comm_max_i64(world, s->kept_peak);
    memcpy(s, c, sizeof c);
    s->check_s = t[0], s->compute_s = t[1], s->redo_s = t[2], s->window_s = t[3];
    s->kept_peak = peak;
    s->attempts = d->s.attempts; /* job-wide already: every rank takes part in each */
    s->redone = d->s.redone;
}

bool dmr_is_suspect(const FtDmr *d, int r) { return r >= 0 && r < d->nranks && d->suspect[r]; }

void dmr_report(FtDmr *d, FtComm *world, const char *schedule, int nfail, FILE *out)
{
    FtDmrStats s;
    resize_world(d, world);
    dmr_stats_job(d, world, &s);
    if (d->rank != 0 || !out) return;
    fprintf(out, "faults: sdc injected %lld, detected %lld, rolled back %lld, missed %lld "
                 "(schedule %s; %lld flip%s not applied; fail-stop events %d%s)\n",
            s.injected, s.detected, s.rolled_back, s.missed,
            schedule && schedule[0] ? schedule : "none", s.not_fired, s.not_fired == 1 ? "" : "s",
            nfail, nfail ? ", acted on by SPARe" : "");
    char sus[256] = "none";
    size_t len = 0;
    for (int q = 0; q < d->nranks; q++)
        if (d->suspect[q] && len + 16 < sizeof sus)
            len += (size_t)snprintf(sus + len, sizeof sus - len, "%sr%d", len ? " " : "", q);
    double rest = s.compute_s - s.check_s;
    if (d->mode == FT_DMR_OFF) {
        fprintf(out, "dmr: mode off (no checks), steps redone %lld of %lld attempts\n", s.redone,
                s.attempts);
    } else if (d->mode == FT_DMR_PLANNED) {
        fprintf(out, "dmr: mode planned, checks naive %lld piggyback %lld deferred %lld agc %lld, "
                     "mismatches %lld, steps redone %lld of %lld attempts, unchecked %lld, "
                     "suspects %s, overhead %.1f%% (checks %.3f s, %.3f s of them in windows, vs "
                     "the rest of the steps %.3f s, summed over ranks; rolled-back attempts "
                     "%.3f s)\n",
                s.checks[FT_DMR_S_NAIVE], s.checks[FT_DMR_S_PIGGYBACK],
                s.checks[FT_DMR_S_DEFERRED], s.checks[FT_DMR_S_AGC], s.mismatches, s.redone,
                s.attempts, s.unchecked, sus, rest > 0 ? 100.0 * (s.check_s - s.window_s) / rest : 0.0,
                s.check_s, s.window_s, rest, s.redo_s);
        fprintf(out, "dmr: planned: deferred units (an op or an AGC segment) checked in windows "
                     "%lld, before the agreement %lld, at once over the budget %lld; kept at most "
                     "%.3f MiB (dmr.deferred_mb = %.3f, the largest rank's)\n",
                s.windowed, s.drained, s.demoted, (double)s.kept_peak / 1048576.0,
                (double)d->budget / 1048576.0);
    } else {
        fprintf(out, "dmr: mode %s, checks naive %lld piggyback %lld, mismatches %lld, steps "
                     "redone %lld of %lld attempts, unchecked %lld, suspects %s, overhead %.1f%% "
                     "(checks %.3f s vs the rest of the steps %.3f s, summed over ranks; "
                     "rolled-back attempts %.3f s)\n",
                dmr_mode_name(d->mode), s.checks[FT_DMR_S_NAIVE], s.checks[FT_DMR_S_PIGGYBACK],
                s.mismatches, s.redone, s.attempts, s.unchecked, sus,
                rest > 0 ? 100.0 * s.check_s / rest : 0.0, s.check_s, rest, s.redo_s);
    }
    fflush(out);
}

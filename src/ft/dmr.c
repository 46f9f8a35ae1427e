/* dmr.c: dual modular redundancy and fault injection on the executor's after-op hook (dmr.h);
 * mode planned's deferred checks and profile are in dmr_defer.c (shared types: dmr_impl.h).
 *
 * Key decisions:
 *  - The naive checker runs the op's own call with its outputs pointed at scratch memory (ops
 *    write every output byte from their inputs alone, ops.h), so the primary's bytes are never
 *    touched by a clean check and the comparison is exact (every byte), not a hash. It runs
 *    through the backend's checker_run (CUDA: the checker stream with its own cuBLAS handle)
 *    and compares with the backend's equal, so the outputs never leave the device.
 *  - Piggyback keeps one fingerprint per output of each forward entry that has a recompute
 *    twin (per tape: the pipeline slots are separate tapes), not a copy: fingerprint.h's sum
 *    of words times odd, distinct keys, which any one or two flipped bits change (proved
 *    there), at about copy speed.
 *  - An attempt starts at the first training micro-batch after the last agreement and ends at
 *    dmr_agree; everything per attempt (execution counts, injections, mismatches) lives in the
 *    context and is reset there. The agreement is one all-reduce (a flag and the counters);
 *    who mismatched is asked (an all-gather) only when someone did, each mismatching rank
 *    sending its own count of such steps, so suspects are counted the same on every rank (a
 *    hot spare that joined mid-run included).
 *  - Counters that outlive a process: the agreement's all-reduce also carries each rank's
 *    counters not summed yet (now less `sent`); the sum becomes the job's `agreed` counters when
 *    the step commits (dmr_committed, after the trainer's check for process failures, so every
 *    live rank applies the same sums), and a joining rank takes them (dmr_take_state). The
 *    report adds every rank's unsummed rest to world rank 0's agreed sums: a process that died
 *    is counted to its last committed step. Times are not carried (the living ranks' only).
 *  - Time is wall time of this thread (omp_get_wtime): no MPI outside comm/. */
#include "ftllm/dmr.h"

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/comm.h"
#include "ftllm/deck_keys.h"
#include "ftllm/log.h"
#include "dmr_impl.h"

const char *dmr_mode_name(int mode)
{
    static const char *const names[] = {"off", "naive", "piggyback", "planned"};
    return mode >= 0 && mode < 4 ? names[mode] : "?";
}

static const char *const g_strat_name[] = {"none", "naive", "piggyback", "piggyback", "deferred",
                                           "agc", "dynamic"};

/* ---- set-up -------------------------------------------------------------------------------- */

/* The per-rank history of d->nranks world ranks, zeroed (a new world numbers them anew). */
static void ranks_alloc(FtDmr *d)
{
    size_t n = (size_t)d->nranks;
    d->who = calloc(n, sizeof *d->who);
    d->suspect = calloc(n, sizeof *d->suspect);
    d->handed = calloc(n, sizeof *d->handed);
    FT_ASSERT(d->who && d->suspect && d->handed);
}

static void ranks_free(FtDmr *d)
{
    free(d->who), free(d->suspect), free(d->handed);
}

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
        d->moe_dyn = cfg->moe_dynamic;
        d->left_end = cfg->leftovers_end;
        d->chain = !cfg->no_chain;
        dmr_profile_init(&d->prof, d->micro->ne, d->opt->ne);
        d->runs = calloc((size_t)d->micro->ne, sizeof *d->runs);
        FT_ASSERT(d->runs);
        d->prof.moe_dynamic = cfg->moe_dynamic;
    }
    d->suspect_after = cfg->suspect_after;
    d->pend_max = 4096;
    d->be = cfg->be ? cfg->be : backend_cpu();
    FT_ASSERT(d->be->checker_run && d->be->equal && d->be->fingerprint);
    d->rank = cfg->world ? comm_rank(cfg->world) : 0;
    d->nranks = cfg->world ? comm_size(cfg->world) : 1;
    for (int i = 0; i < cfg->nflips; i++) d->nflips += cfg->flips[i].rank == d->rank;
    d->flips = calloc((size_t)d->nflips + 1, sizeof *d->flips);
    d->fired = calloc((size_t)d->nflips + 1, sizeof *d->fired);
    d->armed = calloc((size_t)d->nflips + 1, sizeof *d->armed);
    FT_ASSERT(d->flips && d->fired && d->armed);
    ranks_alloc(d);
    int n = 0;
    for (int i = 0; i < cfg->nflips; i++)
        if (cfg->flips[i].rank == d->rank) d->flips[n++] = cfg->flips[i];
    return d;
}

void dmr_free(FtDmr *d)
{
    if (!d) return;
    for (int i = 0; i < d->nst; i++) {
        free(d->st[i].fp), free(d->st[i].pending);
        if (d->st[i].fp_dev) d->be->release(d->be->ctx, d->st[i].fp_dev);
    }
    if (d->pbfp) d->be->release(d->be->ctx, d->pbfp);
    free(d->pb);
    if (d->scratch) d->be->release(d->be->ctx, d->scratch);
    if (d->flags) d->be->release(d->be->ctx, d->flags);
    free(d->pend);
    free(d->flips), free(d->fired), free(d->armed), free(d->inj), free(d->def);
    ranks_free(d);
    for (int i = 0; i < d->nunits; i++) dmr_unit_free(d, d->units[i]);
    free(d->units), free(d->link), free(d->seg_last), free(d->sole), free(d->runs);
    if (d->dfp) d->be->release(d->be->ctx, d->dfp);
    free(d->dfree);
    dmr_mem_free(d, d->rscratch);
    dmr_pool_release(d);
    dmr_plan_free(&d->plan);
    dmr_profile_free(&d->prof);
    dmr_profile_free(&d->prof_snap);
    free(d);
}

/* ---- helpers ------------------------------------------------------------------------------- */

_Static_assert(offsetof(FtDmrStats, check_s) == DMR_NCOUNT * sizeof(long long),
               "FtDmrStats: its counters are long longs before its times, without padding");

/* This rank's counters now (dmr_stats: the flips that never fired among not_fired). */
static void counts_now(const FtDmr *d, long long *c)
{
    FtDmrStats s;
    dmr_stats(d, &s);
    memcpy(c, &s, sizeof(long long) * DMR_NCOUNT);
}

static bool writes_ints(const FtTape *tp, const FtTapeEntry *e)
{
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        if (e->out[k] >= 0 && (tp->t[e->out[k]].dtype == FT_I32 || tp->t[e->out[k]].dtype == FT_I64))
            return true;
    return false;
}

/* Entry i of tape tp in the plan's entry space (dmr_plan.h). */
int dmr_entry_index(const FtDmr *d, const FtTape *tp, int i)
{
    return tp == d->opt ? d->micro->ne + i : i;
}

/* The strategy of entry e (plan slot idx under a plan). */
static enum strat strategy(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e, int idx)
{
    if (d->mode == FT_DMR_OFF) return S_NONE;
    bool pb = e->twin >= 0 && !writes_ints(tp, e);
    if (d->mode == FT_DMR_PIGGYBACK && pb) return e->phase == FT_PH_RECOMPUTE ? S_PB_CHECK : S_PB_SAVE;
    if (d->mode != FT_DMR_PLANNED || !d->plan.strat) return S_NAIVE; /* planned: profiling */
    if (dmr_dyn_takes(d, e, idx)) return S_DYN;
    switch (d->plan.strat[idx]) {
    case PLAN_PIGGYBACK:
        if (pb) return e->phase == FT_PH_RECOMPUTE ? S_PB_CHECK : S_PB_SAVE;
        return S_NAIVE;
    case PLAN_DEFERRED: return S_DEFER;
    case PLAN_AGC: return S_AGC;
    default: /* a leftover: deferred under dmr.leftovers = end (micro-batch ops only: the
                optimizer's checks come right before the agreement anyway) */
        return d->left_end && tp != d->opt && !writes_ints(tp, e) ? S_DEFER : S_NAIVE;
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
        if (s->fp_dev) d->be->release(d->be->ctx, s->fp_dev), s->fp_dev = NULL;
        s->ne = tp->ne;
        if (d->be->fingerprint_into && tp->ne)
            s->fp_dev = backend_alloc(d->be, sizeof(uint64_t) * FT_OP_MAX_OUT * (size_t)tp->ne,
                                      "DMR fingerprints");
        s->fp = calloc((size_t)tp->ne * FT_OP_MAX_OUT, sizeof *s->fp);
        s->pending = calloc((size_t)tp->ne, 1);
        s->npending = 0;
        FT_ASSERT(s->fp && s->pending);
    }
    return s;
}

FtOpFn dmr_op_fn(const FtDmr *d, const FtTapeEntry *e)
{
    const FtOpDesc *od = &d->be->ops[e->kind];
    return e->dir == FT_FWD ? od->fwd : od->bwd;
}

void dmr_run_op(const FtDmr *d, const FtTapeEntry *e, const FtOpCall *c)
{
    dmr_op_fn(d, e)(c);
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
           : s == S_DEFER || s == S_DYN ? FT_DMR_S_DEFERRED
           : s == S_AGC   ? FT_DMR_S_AGC
                          : FT_DMR_S_PIGGYBACK;
}

/* Applies flip fi to outs of entry i; its check covers `key`. */
void dmr_inject(FtDmr *d, int fi, const FtTape *tp, int i, void *const *outs, int key,
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

void dmr_mismatch(FtDmr *d, const FtTape *tp, int i, int key, enum strat s)
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

/* Profile: what deferring entry i's check would add at the primary (as dmr_defer_add does it):
 * copying its inputs that are not model state into kept buffers (reused, as a deferral's),
 * fingerprinting its outputs. A gradient's earlier sum is priced as a copy even with dmr.chain:
 * a chain forms only where the execution before is deferred too and no wait replayed it yet
 * (pricing chains instead changed nothing measurable on pp 2, perf/README.md 2026-12-04). */
static void prof_keep(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c)
{
    const FtTapeEntry *e = &tp->e[i];
    double t0 = omp_get_wtime();
    for (int k = 0; k < FT_OP_MAX_IN; k++) {
        if (e->in[k] < 0 || !c->in[k]) continue;
        FtTensorRole r = tp->t[e->in[k]].role;
        size_t nb = tape_tensor_bytes(tp, e->in[k]);
        if (r == FT_TR_PARAM || r == FT_TR_MOM1 || r == FT_TR_MOM2 || !nb) continue;
        unsigned char *cp = dmr_keep_alloc(d, nb, "DMR profile copy"); /* as a deferral's */
        d->be->copy(d->be->ctx, cp, c->in[k], nb);
        if (backend_is_host(d->be)) *(volatile unsigned char *)cp; /* not elided */
        else d->be->sync(d->be->ctx);                               /* timed to its end */
        dmr_keep_free(d, cp, nb);
    }
    double t1 = omp_get_wtime();
    uint64_t fp[FT_OP_MAX_OUT];
    dmr_fingerprint(d, tp, e, c, fp); /* waits for its answer */
    int idx = dmr_entry_index(d, tp, i);
    d->prof.copy[idx] += t1 - t0, d->prof.fp[idx] += omp_get_wtime() - t1;
}

/* The answers of the compares pending since the last call: one copy of their flags to the host,
 * a mismatch for each that differed, the flags zeroed again. */
static void resolve_pending(FtDmr *d)
{
    if (d->npb) {
        size_t w = 2 * FT_OP_MAX_OUT, bytes = sizeof(uint64_t) * w * (size_t)d->npb;
        uint64_t *h = malloc(bytes);
        FT_ASSERT(h);
        d->be->to_host(d->be->ctx, h, d->pbfp, bytes);
        for (int j = 0; j < d->npb; j++)
            if (memcmp(h + j * w, h + j * w + FT_OP_MAX_OUT, sizeof(uint64_t) * FT_OP_MAX_OUT))
                dmr_mismatch(d, d->pb[j].tp, d->pb[j].i, d->pb[j].f, d->pb[j].s);
        d->npb = 0;
        free(h);
    }
    if (!d->npend) return;
    size_t bytes = sizeof(unsigned) * (size_t)d->npend;
    unsigned *h = malloc(bytes);
    FT_ASSERT(h);
    d->be->to_host(d->be->ctx, h, d->flags, bytes);
    for (int j = 0; j < d->npend; j++)
        if (h[j]) dmr_mismatch(d, d->pend[j].tp, d->pend[j].i, d->pend[j].i, S_NAIVE);
    d->be->set(d->be->ctx, d->flags, 0, bytes);
    d->npend = 0;
    free(h);
}

/* The fingerprints of entry i's outputs into slot[0 .. FT_OP_MAX_OUT) of backend memory (0 for
 * an output it does not have), without waiting. */
void dmr_fingerprint_into(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e,
                          const FtOpCall *c, uint64_t *slot)
{
    d->be->set(d->be->ctx, slot, 0, sizeof(uint64_t) * FT_OP_MAX_OUT);
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        if (e->out[k] < 0 || !c->out[k]) continue;
        const FtTensor *t = &tp->t[e->out[k]];
        d->be->fingerprint_into(d->be->ctx, c->out[k], ft_dtype_size(t->dtype), t->n, slot + k);
    }
}

/* Slots for one more pending fingerprint compare (strategy s) of entry i against the saved
 * fingerprints of entry f (its piggyback twin, or i itself at a deferred replay), the pending
 * ones answered first when all are taken: the saved ones are copied in now, as their slot may
 * be written again before the agreement. */
uint64_t *dmr_pending_pair(FtDmr *d, const FtTape *tp, int i, int f, const uint64_t *saved,
                           enum strat s)
{
    size_t w = 2 * FT_OP_MAX_OUT;
    if (!d->pbfp) {
        d->cappb = d->pend_max;
        d->pbfp = backend_alloc(d->be, sizeof(uint64_t) * w * (size_t)d->cappb, "DMR checks");
        d->pb = malloc(sizeof *d->pb * (size_t)d->cappb);
        FT_ASSERT(d->pb);
    }
    if (d->npb == d->cappb) resolve_pending(d);
    d->pb[d->npb].tp = tp, d->pb[d->npb].i = i, d->pb[d->npb].f = f, d->pb[d->npb].s = s;
    uint64_t *slot = d->pbfp + w * (size_t)d->npb++;
    d->be->copy(d->be->ctx, slot, saved, sizeof(uint64_t) * FT_OP_MAX_OUT);
    return slot + FT_OP_MAX_OUT;
}

/* A flag for one more pending compare (the pending ones answered first when all are taken). */
static unsigned *pending_flag(FtDmr *d, const FtTape *tp, int i)
{
    if (!d->flags) {
        d->cappend = d->pend_max;
        d->flags = backend_alloc(d->be, sizeof(unsigned) * (size_t)d->cappend, "DMR flags");
        d->pend = malloc(sizeof *d->pend * (size_t)d->cappend);
        FT_ASSERT(d->pend);
    }
    if (d->npend == d->cappend) resolve_pending(d);
    d->pend[d->npend].tp = tp, d->pend[d->npend].i = i;
    return d->flags + d->npend++;
}

static void check_naive(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                        int nchk);

/* Runs entry i again into scratch outputs (flipping the checker flips chk[0..nchk) there) and
 * compares with the primary's outputs c->out: at once for an op that writes integers (they are
 * addresses for later ops: a flipped one must not go on) or where the backend has no
 * mark_differs, else answered at the agreement (resolve_pending): the compare does not wait, and
 * a mismatch redoes the step, whose bytes then do not matter. */
void dmr_check_naive(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, const int *chk,
                     int nchk)
{
    double t0 = omp_get_wtime();
    check_naive(d, tp, i, c, chk, nchk);
    d->s.naive_s += omp_get_wtime() - t0;
}

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
    /* profiling on a device: the checker's own time, not its launch (waits only then) */
    bool timed = d->mode == FT_DMR_PLANNED && !d->plan.strat && d->prof_count &&
                 !backend_is_host(d->be);
    if (timed) d->be->sync(d->be->ctx);
    double t0 = omp_get_wtime();
    d->be->checker_run(d->be->ctx, dmr_op_fn(d, e), &cc);
    if (timed) d->be->sync(d->be->ctx);
    double t1 = omp_get_wtime();
    for (int j = 0; j < nchk; j++) dmr_inject(d, chk[j], tp, i, cc.out, i, S_NAIVE);
    double t2 = omp_get_wtime();
    bool same = true, later = d->be->mark_differs && !writes_ints(tp, e);
    unsigned *flag = later ? pending_flag(d, tp, i) : NULL;
    for (int k = 0; k < FT_OP_MAX_OUT && same; k++) {
        if (!nb[k]) continue;
        if (later) d->be->mark_differs(d->be->ctx, c->out[k], cc.out[k], nb[k], flag);
        else if (!d->be->equal(d->be->ctx, c->out[k], cc.out[k], nb[k])) same = false;
    }
    if (timed) d->be->sync(d->be->ctx);
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat && d->prof_count) {
        /* the checker's time: its run and the comparison (a deferred check instead pays a
         * fingerprint of the replay, about the same pass over the outputs) */
        d->prof.time[dmr_entry_index(d, tp, i)] += (t1 - t0) + (omp_get_wtime() - t2);
        prof_keep(d, tp, i, c);
    }
    d->s.checks[FT_DMR_S_NAIVE]++;
    if (same) return;
    dmr_mismatch(d, tp, i, i, S_NAIVE);
    dmr_run_op(d, e, c); /* a third run into the primary's outputs: clean bytes go on */
}

void dmr_fingerprint(const FtDmr *d, const FtTape *tp, const FtTapeEntry *e, const FtOpCall *c,
                     uint64_t *fp)
{
    for (int k = 0; k < FT_OP_MAX_OUT; k++) {
        fp[k] = 0;
        if (e->out[k] < 0 || !c->out[k]) continue;
        const FtTensor *t = &tp->t[e->out[k]];
        fp[k] = d->be->fingerprint(d->be->ctx, c->out[k], ft_dtype_size(t->dtype), t->n);
    }
}


/* Piggyback's save: forward entry i's output fingerprints, for its recompute twin. */
static void pb_save(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c)
{
    const FtTapeEntry *e = &tp->e[i];
    FpStore *st = store(d, tp);
    if (st->fp_dev) dmr_fingerprint_into(d, tp, e, c, st->fp_dev + (size_t)i * FT_OP_MAX_OUT);
    else dmr_fingerprint(d, tp, e, c, st->fp + (size_t)i * FT_OP_MAX_OUT);
    if (!st->pending[i]) st->pending[i] = 1, st->npending++;
}

/* Piggyback's check of recompute entry i against its twin's saved fingerprints. */
static void pb_check(FtDmr *d, const FtTape *tp, int i, const FtOpCall *c, enum strat s)
{
    const FtTapeEntry *e = &tp->e[i];
    FpStore *st = store(d, tp);
    int f = e->twin;
    if (!st->pending[f]) {
        d->s.unchecked++;
        return;
    }
    st->pending[f] = 0;
    st->npending--;
    d->s.checks[FT_DMR_S_PIGGYBACK]++;
    if (st->fp_dev) { /* answered at the agreement (resolve_pending) */
        dmr_fingerprint_into(d, tp, e, c,
                             dmr_pending_pair(d, tp, i, f, st->fp_dev + (size_t)f * FT_OP_MAX_OUT,
                                              S_PB_CHECK));
        return;
    }
    uint64_t fp[FT_OP_MAX_OUT];
    dmr_fingerprint(d, tp, e, c, fp);
    if (memcmp(fp, st->fp + (size_t)f * FT_OP_MAX_OUT, sizeof fp)) dmr_mismatch(d, tp, i, f, s);
}

/* ---- the after-op hook --------------------------------------------------------------------- */

static void after_op(void *arg, const FtTape *tp, int i, int inst, const FtOpCall *c)
{
    FtDmr *d = arg;
    if (!d->active) return;
    d->inst = tp == d->opt ? 0 : inst;
    /* profiling on a device: the primary's queued work is the step's, not its check's: wait for
     * it before the check's clock starts (check_naive's own wait then finds the stream idle).
     * Without this wait the profile charged every primary to the checks, and its step without
     * checks was the host's launch time alone (24.8 ms against 153 ms on the H200, 2026-12-04) */
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat && d->prof_count && !backend_is_host(d->be))
        d->be->sync(d->be->ctx);
    double t0 = omp_get_wtime();
    const FtTapeEntry *e = &tp->e[i];
    long long nth = d->count[e->kind]++;
    int idx = 0;
    if (d->mode == FT_DMR_PLANNED) {
        FT_ASSERT(tp == d->opt || tp->ne == d->micro->ne); /* a pipeline slot: a copy */
        if (tp != d->opt) d->runs[i]++;
        idx = dmr_entry_index(d, tp, i);
        if (!d->plan.strat) {
            dmr_prof_note(d, idx);
            if (tp != d->opt && e->phase == FT_PH_BWD) d->prof_bwd = true;
        } else {
            FT_ASSERT(d->plan.ninst <= 1 || d->inst < d->plan.ninst); /* read: checked */
            idx = dmr_plan_slot(&d->plan, idx, d->inst); /* the plan's slot */
        }
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
            dmr_inject(d, fi, tp, i, c->out, key, s);
        } else if ((s == S_NAIVE || s == S_DEFER || s == S_AGC || s == S_DYN) && nchk < 16) {
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
                dmr_inject(d, d->def[j].flip, tp, i, c->out, d->def[j].key, s);
                d->def[j--] = d->def[--d->ndef];
            }
    switch (s) {
    case S_NONE: break;
    case S_NAIVE: dmr_check_naive(d, tp, i, c, chk, nchk); break;
    case S_DEFER: dmr_defer_add(d, tp, i, idx, c, -1, true, chk, nchk); break;
    case S_AGC: dmr_defer_add(d, tp, i, idx, c, d->plan.seg[idx], true, chk, nchk); break;
    case S_DYN: dmr_dyn_check(d, tp, i, c, chk, nchk); break;
    case S_PB_SAVE:
    case S_PB_CHECK: {
        double tp0 = omp_get_wtime();
        if (s == S_PB_SAVE) pb_save(d, tp, i, c);
        else pb_check(d, tp, i, c, s);
        d->s.pb_s += omp_get_wtime() - tp0;
        break;
    }
    }
    if ((s == S_PB_SAVE || s == S_PB_CHECK) && d->plan.strat && d->plan.seg[idx] >= 0)
        dmr_defer_add(d, tp, i, idx, c, d->plan.seg[idx], false, NULL, 0); /* replayed in its segment */
    d->s.check_s += omp_get_wtime() - t0;
}

FtExecHooks dmr_hooks(FtDmr *d) { return (FtExecHooks){.after_op = after_op, .arg = d}; }

/* The job's world changed size (a replica left: train_regrid): the suspect flags start over,
 * since the ranks are numbered anew; each rank's own count of mismatching steps (my_bad) stays
 * with it. */
static void resize_world(FtDmr *d, FtComm *world)
{
    int n = world ? comm_size(world) : 1;
    d->rank = world ? comm_rank(world) : 0;
    if (n == d->nranks) return;
    d->nranks = n;
    ranks_free(d);
    ranks_alloc(d);
}

/* ---- attempts ------------------------------------------------------------------------------ */

void dmr_step_begin(FtDmr *d, long long step)
{
    if (!d->in_attempt) {
        dmr_profile_settle(d); /* an attempt computed again for a mismatch counts */
        d->in_attempt = true;
        d->step = step;
        memset(d->count, 0, sizeof d->count);
        d->mism = 0;
        d->first[0] = '\0';
        d->ninj = d->ndef = 0;
        d->narmed = 0;
        if (d->npend) { /* an attempt that never reached its agreement */
            d->be->set(d->be->ctx, d->flags, 0, sizeof(unsigned) * (size_t)d->npend);
            d->npend = 0;
        }
        d->npb = 0;
        for (int i = 0; i < d->nflips; i++)
            if (!d->fired[i] && d->flips[i].step == step) d->armed[d->narmed++] = i;
        d->t_attempt = omp_get_wtime();
        d->s.attempts++;
        d->att_check_s = d->s.check_s;
        if (d->mode == FT_DMR_PLANNED && !d->plan.strat) {
            d->prof_attempt++;
            d->prof_count = d->profile_steps == 1 || d->prof_attempt > 1; /* 1st: warm-up */
            if (d->prof_count) dmr_profile_copy(&d->prof_snap, &d->prof); /* dmr_attempt_broken */
            d->prof_last = -1, d->prof_bwd = false, d->prof_pos = 0;
            dmr_prof_waits(d, d->prof_w);
        }
    }
    FT_ASSERT(d->step == step);
    d->active = true;
}

void dmr_pause(FtDmr *d) { d->active = false; }

void dmr_set_pending_max(FtDmr *d, int n)
{
    FT_ASSERT(n > 0 && !d->flags && !d->pbfp);
    d->pend_max = n;
}

int dmr_agree(FtDmr *d, FtExec *ex, FtComm *world)
{
    double t0 = omp_get_wtime();
    resize_world(d, world);
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat) dmr_prof_note(d, -2);
    dmr_drain(d);
    resolve_pending(d);
    for (int i = 0; i < d->nst; i++) { /* forward fingerprints whose twin never ran */
        FpStore *st = &d->st[i];
        for (int j = 0; j < st->ne && st->npending; j++)
            if (st->pending[j]) st->pending[j] = 0, st->npending--, d->s.unchecked++;
    }
    d->s.not_fired += d->ndef; /* checker flips whose twin never ran */
    d->ndef = 0;
    long long mine = d->mism > 0;
    if (mine) d->my_bad++; /* this rank's own count: known here, whatever the collective says */
    /* the same sum carries the counters this rank has not contributed yet (dmr_committed) */
    long long v[1 + DMR_NCOUNT], all[1 + DMR_NCOUNT];
    counts_now(d, d->snap);
    v[0] = mine;
    for (int k = 0; k < DMR_NCOUNT; k++) v[1 + k] = d->snap[k] - d->sent[k];
    memcpy(all, v, sizeof v);
    d->stashed = false;
    FtReq r;
    if (world && d->nranks > 1) {
        comm_iallreduce_sum(world, v, all, 1 + DMR_NCOUNT, FT_I64, &r);
        exec_wait(ex, &r, 1, FT_TL_OTHER);
    }
    /* a process died (ULFM): the sum is not one, and the trainer computes the step again on
     * every survivor after the recovery (train_spare_recover agrees on the failure): no verdict
     * here, no names from a gather that cannot complete */
    bool died = comm_ft_failed();
    int redo = all[0] > 0 && !died;
    if (!died) memcpy(d->stash, all + 1, sizeof d->stash), d->stashed = true;
    if (d->mism)
        ft_log_rank(FT_LOG_INFO, "dmr: step %lld: %lld check%s mismatched, the first: %s",
                    d->step, d->mism, d->mism == 1 ? "" : "s", d->first);
    if (redo) {
        /* each mismatching rank sends its own count of such steps (0: none now): a hot spare
         * that joined mid-run never saw the others' earlier steps, and a count only it lacks
         * would make its verdict on a suspect differ (retire_suspects is collective) */
        int me = mine > 0 ? d->my_bad : 0;
        if (world && d->nranks > 1) {
            comm_iallgather(world, &me, d->who, 1, FT_I32, &r);
            exec_wait(ex, &r, 1, FT_TL_OTHER);
        } else {
            d->who[0] = me;
        }
        died = comm_ft_failed(); /* a death the sum did not see: the gather's counts are not one */
        redo = !died;
    }
    if (redo) {
        char list[256] = "";
        size_t len = 0;
        int nbad = 0;
        for (int q = 0; q < d->nranks; q++) {
            if (!d->who[q]) continue;
            nbad++;
            if (len + 16 < sizeof list) len += (size_t)snprintf(list + len, sizeof list - len, "%sr%d", nbad > 1 ? " " : "", q);
            /* q's own count at or past the threshold, from the gathered values alone: no
             * rank's earlier view (a stale flag of a replaced replica's rank, a spare's blank
             * one) decides who is handed to SPARe (retire_suspects is collective); at or past,
             * not at: a suspect whose flag was dropped (dmr_regridded) or not acted on is
             * handed over again at its next mismatching step */
            if (d->suspect_after > 0 && d->who[q] >= d->suspect_after) {
                d->suspect[q] = true, d->handed[q] = false;
                log_warn("dmr: rank %d is suspect: its checks mismatched in %d steps "
                         "(dmr.suspect_after = %d)", q, d->who[q], d->suspect_after);
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
        if (redo || died) d->s.rolled_back++; /* died: computed again from the same state */
    }
    d->ninj = 0;
    double now = omp_get_wtime();
    d->s.compute_s += now - d->t_attempt;
    if (redo) d->s.redo_s += now - d->t_attempt;
    d->s.check_s += now - t0;
    d->in_attempt = d->active = false;
    if (d->mode == FT_DMR_PLANNED && !d->plan.strat) dmr_profile_end(d, now);
    return redo;
}

/* ---- counters and report ------------------------------------------------------------------- */

void dmr_stats(const FtDmr *d, FtDmrStats *s)
{
    *s = d->s;
    for (int i = 0; i < d->nflips; i++) s->not_fired += !d->fired[i];
    s->dyn_slack = s->dyn_guard - s->dyn_kept_peak;
}

void dmr_attempt_broken(FtDmr *d)
{
    if (!d->prof_open) return;
    d->prof_open = false;
    if (d->prof_count) dmr_profile_copy(&d->prof, &d->prof_snap);
    d->prof_attempt--; /* profiled again: a warm-up attempt stays the warm-up */
    log_info("dmr: step %lld: a process failure broke the attempt, which the profile does not "
             "count (its waits hold the failure's detection); the profile goes on with the "
             "step's next attempt", d->step);
}

void dmr_committed(FtDmr *d)
{
    dmr_profile_settle(d);
    if (!d->stashed) return;
    for (int k = 0; k < DMR_NCOUNT; k++) d->agreed[k] += d->stash[k];
    memcpy(d->sent, d->snap, sizeof d->sent);
    d->stashed = false;
}

void dmr_take_state(FtDmr *d, FtComm *c, int root)
{
    comm_bcast(c, d->agreed, DMR_NCOUNT, FT_I64, root);
    d->stashed = false;
}

/* The job's sums over world (collective). The counters: every rank's not yet agreed, plus the
 * agreed sum from the one rank that `carries` it (rank 0 of the trainer's world: every live
 * rank holds the same). */
static void stats_job(FtDmr *d, FtComm *world, bool carries, FtDmrStats *s)
{
    dmr_stats(d, s);
    if (!world || comm_size(world) == 1) return;
    long long c[DMR_NCOUNT];
    counts_now(d, c);
    for (int k = 0; k < DMR_NCOUNT; k++) c[k] += (carries ? d->agreed[k] : 0) - d->sent[k];
    comm_allreduce_sum(world, FT_IN_PLACE, c, DMR_NCOUNT, FT_I64);
    double t[8] = {s->check_s, s->compute_s, s->redo_s, s->window_s,
                   s->naive_s,  s->pb_s,      s->keep_s, s->replay_s};
    comm_allreduce_sum(world, FT_IN_PLACE, t, 8, FT_F64);
    long long peak = comm_max_i64(world, s->kept_peak);
    long long dpeak = comm_max_i64(world, s->dyn_kept_peak);
    long long guard = comm_max_i64(world, s->dyn_guard), slack = -comm_max_i64(world, -s->dyn_slack);
    long long held = comm_max_i64(world, s->held_peak);
    memcpy(s, c, sizeof c);
    s->check_s = t[0], s->compute_s = t[1], s->redo_s = t[2], s->window_s = t[3];
    s->naive_s = t[4], s->pb_s = t[5], s->keep_s = t[6], s->replay_s = t[7];
    s->kept_peak = peak, s->dyn_kept_peak = dpeak, s->dyn_guard = guard, s->dyn_slack = slack;
    s->held_peak = held;
    /* job-wide already: every rank takes part in each; the largest, as a hot spare that
     * joined mid-run (or a replica that left) saw fewer */
    s->attempts = comm_max_i64(world, d->s.attempts);
    s->redone = comm_max_i64(world, d->s.redone), s->retired = comm_max_i64(world, d->s.retired);
}

void dmr_stats_job(FtDmr *d, FtComm *world, FtDmrStats *s)
{
    stats_job(d, world, world && comm_rank(world) == 0, s);
}

bool dmr_is_suspect(const FtDmr *d, int r) { return r >= 0 && r < d->nranks && d->suspect[r]; }

int dmr_take_suspects(FtDmr *d, int *ranks, int max)
{
    int n = 0;
    for (int q = 0; q < d->nranks && n < max; q++)
        if (d->suspect[q] && !d->handed[q]) d->handed[q] = true, ranks[n++] = q;
    return n;
}

void dmr_forget(FtDmr *d, int first, int n)
{
    for (int q = first; q < first + n && q < d->nranks; q++)
        if (q >= 0) d->suspect[q] = d->handed[q] = false;
    if (d->rank >= first && d->rank < first + n) d->my_bad = 0;
}

void dmr_regridded(FtDmr *d)
{
    for (int q = 0; q < d->nranks; q++)
        if (d->suspect[q] && !d->handed[q]) d->suspect[q] = false;
}

void dmr_retired(FtDmr *d, int first, int n)
{
    dmr_forget(d, first, n);
    d->s.retired++;
}

void dmr_report(FtDmr *d, FtComm *world, FtComm *job, const char *schedule, int nfail,
                FILE *out)
{
    FtDmrStats s;
    if (world) resize_world(d, world);
    FtComm *all = job ? job : world;
    stats_job(d, all, world && d->rank == 0, &s); /* world rank 0 carries the agreed sum */
    /* planned: the plan's lower bounds and profiled step (ms per step), the largest rank's */
    double bound[3] = {0, 0, 0};
    if (d->mode == FT_DMR_PLANNED) {
        if (d->plan.strat && d->plan.step_s > 0) {
            double ob, lb = dmr_plan_bounds(&d->plan, d->plan.step_s, &ob);
            bound[0] = 1e3 * lb * d->plan.step_s, bound[1] = 1e3 * ob * d->plan.step_s;
            bound[2] = 1e3 * d->plan.step_s;
        }
        for (int k = 0; k < 3 && all && comm_size(all) > 1; k++)
            bound[k] = comm_max_f64_poll(all, bound[k], NULL);
    }
    if (!world || d->rank != 0 || !out) return;
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
    if (s.retired) /* suspects whose replicas SPARe took out of the run (their ranks left) */
        snprintf(sus + strlen(sus), sizeof sus - strlen(sus), " (%lld retired by SPARe)",
                 s.retired);
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
                     "%.3f MiB (dmr.deferred_mb = %.3f, the largest rank's), %.3f MiB with the "
                     "buffers held for reuse; %lld buffers allocated; %lld gradient checks "
                     "chained to their previous micro-batch's%s\n",
                s.windowed, s.drained, s.demoted, (double)s.kept_peak / 1048576.0,
                (double)d->budget / 1048576.0, (double)s.held_peak / 1048576.0, s.keep_allocs,
                s.chained,
                d->left_end ? "; the plan's naive checks deferred too (dmr.leftovers = end)" : "");
        if (bound[2] > 0)
            fprintf(out, "dmr: planned: lower bound %.3f ms per step (issue 10's: checker time "
                         "not on recomputation less the waits), %.3f ms in time order, of a "
                         "profiled step of %.3f ms without checks (%.1f%%, %.1f%%; the largest "
                         "rank's each)\n",
                    bound[0], bound[1], bound[2], 100 * bound[0] / bound[2],
                    100 * bound[1] / bound[2]);
        if (d->moe_dyn)
            fprintf(out, "dmr: dynamic (MoE expert ops, dmr.moe_dynamic): deferred %lld (%lld "
                         "replayed in windows, the rest before the agreement), naive %lld (their "
                         "routed bytes passed the guard); kept at most %.3f MiB of a guard of "
                         "%.3f MiB (what dmr.deferred_mb leaves after the static plan's "
                         "reservations; the largest rank's each, %.3f MiB to spare on the "
                         "tightest); routed rows %.1f%% of the capacity-sized bytes\n",
                    s.dyn_deferred, s.dyn_windowed, s.dyn_naive,
                    (double)s.dyn_kept_peak / 1048576.0, (double)s.dyn_guard / 1048576.0,
                    (double)s.dyn_slack / 1048576.0,
                    s.dyn_cap_bytes > 0 ? 100.0 * (double)s.dyn_bytes / (double)s.dyn_cap_bytes : 0.0);
    } else {
        fprintf(out, "dmr: mode %s, checks naive %lld piggyback %lld, mismatches %lld, steps "
                     "redone %lld of %lld attempts, unchecked %lld, suspects %s, overhead %.1f%% "
                     "(checks %.3f s vs the rest of the steps %.3f s, summed over ranks; "
                     "rolled-back attempts %.3f s)\n",
                dmr_mode_name(d->mode), s.checks[FT_DMR_S_NAIVE], s.checks[FT_DMR_S_PIGGYBACK],
                s.mismatches, s.redone, s.attempts, s.unchecked, sus,
                rest > 0 ? 100.0 * s.check_s / rest : 0.0, s.check_s, rest, s.redo_s);
    }
    if (d->mode != FT_DMR_OFF) {
        double other = s.check_s - s.naive_s - s.pb_s - s.keep_s - s.replay_s;
        fprintf(out, "dmr: check time by kind, summed over ranks (host wall time): at once "
                     "(re-execution and compare) %.3f s, piggyback fingerprints %.3f s, keeping "
                     "deferred checks' inputs %.3f s, deferred replays %.3f s (%.3f s in "
                     "windows), the rest (agreement, injections) %.3f s\n",
                s.naive_s, s.pb_s, s.keep_s, s.replay_s, s.window_s, other > 0 ? other : 0.0);
    }
    fflush(out);
}

/* model_gpt2.c: GPT-2's parameter layout, sharding, initialization and state commit (model.h;
 * the tape builder is model_tape.c).
 *
 * Key decisions:
 *  - One allocation holds params | grads | m | v | params_new | m_new | v_new | grads_alt
 *    (FT_MODEL_BUFFERS buffers of nparams floats, each 64-byte aligned: twice the memory of
 *    in-place training), each carved
 *    into the 17 tensors in llm.c's order, so an llm.c model file is one read into `params`
 *    and the optimizer is a loop over contiguous ranges. The optimizer writes the *_new buffers
 *    and model_commit swaps them in; micro-batches alternate between the two gradient banks.
 */
#include "ftllm/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

static const char *const g_pnames[FT_NPARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "routerw"};

void model_config_from_deck(const FtConfig *cfg, FtGpt2Config *mc)
{
    mc->L = (int)cfg->model.layers;
    mc->NH = (int)cfg->model.heads;
    mc->C = (int)cfg->model.channels;
    mc->V = (int)cfg->model.vocab;
    long long pad = cfg->model.vocab_pad;
    mc->Vp = (int)((cfg->model.vocab + pad - 1) / pad * pad);
    mc->maxT = (int)cfg->model.seq_len;
    mc->E = (int)cfg->model.experts;
    mc->K = mc->E ? (int)cfg->model.top_k : 0;
    mc->capacity_factor = mc->E ? cfg->model.capacity_factor : 0.0;
    mc->aux_coef = mc->E ? cfg->model.aux_loss_coef : 0.0;
}

int model_moe_capacity(const FtGpt2Config *mc, long long N)
{
    FT_ASSERT(mc->E > 0 && mc->K >= 1 && mc->K <= mc->E && N > 0);
    if (mc->capacity_factor <= 0) return (int)N;
    double c = ceil(mc->capacity_factor * (double)N * mc->K / mc->E - 1e-9);
    return c < 1 ? 1 : c > (double)N ? (int)N : (int)c;
}

void model_create(FtModel *m, const FtGpt2Config *mc) { model_create_sharded(m, mc, NULL); }

void model_create_sharded(FtModel *m, const FtGpt2Config *mc, const FtShard *sh)
{
    model_create_on(m, mc, sh, backend_cpu());
}

void model_create_on(FtModel *m, const FtGpt2Config *mc, const FtShard *sh, const FtBackend *be)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    m->cfg = *mc;
    m->sh = sh ? *sh : (FtShard){.tp = 1, .pp = 1};
    if (m->sh.ep < 1) m->sh.ep = 1, m->sh.ep_rank = 0;
    int tp = m->sh.tp, pp = m->sh.pp, ep = m->sh.ep;
    if (tp < 1 || pp < 1 || m->sh.tp_rank < 0 || m->sh.tp_rank >= tp || m->sh.pp_rank < 0 ||
        m->sh.pp_rank >= pp || m->sh.ep_rank < 0 || m->sh.ep_rank >= ep || mc->NH % tp ||
        mc->L % pp || (mc->E ? mc->E % ep : ep != 1))
        FT_DIE("model: shard tp %d/%d pp %d/%d ep %d/%d does not divide NH %d, L %d, E %d",
               m->sh.tp_rank, tp, m->sh.pp_rank, pp, m->sh.ep_rank, ep, mc->NH, mc->L, mc->E);
    m->El = mc->E / ep;
    m->e0 = m->sh.ep_rank * m->El;
    m->nl = mc->L / pp;
    m->l0 = m->sh.pp_rank * m->nl;
    m->first = m->sh.pp_rank == 0;
    m->last = m->sh.pp_rank == pp - 1;
    size_t L = m->nl, C = mc->C, Vp = mc->Vp, T = mc->maxT, Ct = C / tp;
    bool f = m->first, la = m->last, moe = mc->E > 0;
    size_t El = moe ? (size_t)m->El : 1, E = (size_t)mc->E;
    /* rows, cols of one layer's slice on this rank; per-layer flag; decay; TP split; held */
    struct { size_t r, c; bool pl, dec; int split; bool held; } s[FT_NPARAM_TENSORS] = {
        [FT_P_WTE] = {Vp, C, false, true, FT_SPLIT_NONE, f || la},
        [FT_P_WPE] = {T, C, false, true, FT_SPLIT_NONE, f},
        [FT_P_LN1W] = {C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_LN1B] = {C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_QKVW] = {3 * Ct, C, true, true, FT_SPLIT_ROWS, true},
        [FT_P_QKVB] = {3 * Ct, 1, true, false, FT_SPLIT_ROWS, true},
        [FT_P_ATTPROJW] = {C, Ct, true, true, FT_SPLIT_COLS, true},
        [FT_P_ATTPROJB] = {C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_LN2W] = {C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_LN2B] = {C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_FCW] = {El * 4 * Ct, C, true, true, FT_SPLIT_ROWS, true},
        [FT_P_FCB] = {El * 4 * Ct, 1, true, false, FT_SPLIT_ROWS, true},
        [FT_P_FCPROJW] = {El * C, 4 * Ct, true, true, FT_SPLIT_COLS, true},
        [FT_P_FCPROJB] = {El * C, 1, true, false, FT_SPLIT_NONE, true},
        [FT_P_LNFW] = {C, 1, false, false, FT_SPLIT_NONE, la},
        [FT_P_LNFB] = {C, 1, false, false, FT_SPLIT_NONE, la},
        [FT_P_ROUTERW] = {E, C, true, true, FT_SPLIT_NONE, moe},
    };
    size_t off = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        FtParamInfo *p = &m->p[i];
        p->name = g_pnames[i];
        p->rows = (int)s[i].r;
        p->cols = (int)s[i].c;
        p->per_layer = s[i].pl;
        p->decay = s[i].dec;
        p->tp_split = s[i].split;
        p->expert = moe && i >= FT_P_FCW && i <= FT_P_FCPROJB;
        p->size = s[i].held ? s[i].r * s[i].c * (s[i].pl ? L : 1) : 0;
        p->offset = off;
        off += p->size;
    }
    m->nparams = off;
    char what[96];
    snprintf(what, sizeof what, "%zu parameters (x%d: gradients, AdamW moments, the optimizer's "
             "outputs)", off, FT_MODEL_BUFFERS);
    /* each buffer starts on a 64-byte boundary, so a tensor has the same alignment in all of
     * them (AdamW's streaming stores need its three outputs aligned alike) */
    m->stride = (off + 15) & ~(size_t)15;
    m->mem = backend_alloc(be, sizeof(float) * FT_MODEL_BUFFERS * (m->stride ? m->stride : 16),
                           what);
    float **bufs[FT_MODEL_BUFFERS] = {&m->params, &m->grads, &m->m, &m->v, &m->params_new,
                                      &m->m_new, &m->v_new, &m->grads_alt};
    for (int i = 0; i < FT_MODEL_BUFFERS; i++) *bufs[i] = m->mem + (size_t)i * m->stride;
}

void model_free(FtModel *m)
{
    if (m->mem) m->be->release(m->be->ctx, m->mem);
    memset(m, 0, sizeof *m);
}

float *model_tensor(const FtModel *m, float *base, int id, int l)
{
    const FtParamInfo *p = &m->p[id];
    FT_ASSERT(p->per_layer ? (l >= m->l0 && l < m->l0 + m->nl) : l < 0);
    return base + p->offset + (p->per_layer ? (size_t)(l - m->l0) * (p->size / m->nl) : 0);
}

void model_param_slab(const FtModel *m, int id, FtSlab *s)
{
    memset(s, 0, sizeof *s);
    const FtParamInfo *p = &m->p[id];
    if (!p->size) return;
    size_t L = m->cfg.L, C = m->cfg.C, tp = m->sh.tp, r = m->sh.tp_rank, Ct = C / tp;
    size_t nl = m->nl, l0 = m->l0, E = m->cfg.E, e0 = m->e0, El = m->El;
#define SLAB(n, ...)                                                                             \
    do {                                                                                         \
        size_t v_[][3] = {__VA_ARGS__}; /* {gshape, offset, count} per dimension */              \
        s->ndims = n;                                                                            \
        for (int k_ = 0; k_ < n; k_++) {                                                         \
            s->gshape[k_] = v_[k_][0], s->offset[k_] = v_[k_][1], s->count[k_] = v_[k_][2];      \
        }                                                                                        \
    } while (0)
    switch (E && id >= FT_P_FCW && id <= FT_P_FCPROJB ? -1 - id : id) {
    case -1 - FT_P_FCW: SLAB(4, {L, l0, nl}, {E, e0, El}, {4 * C, r * 4 * Ct, 4 * Ct}, {C, 0, C}); break;
    case -1 - FT_P_FCB: SLAB(3, {L, l0, nl}, {E, e0, El}, {4 * C, r * 4 * Ct, 4 * Ct}); break;
    case -1 - FT_P_FCPROJW: SLAB(4, {L, l0, nl}, {E, e0, El}, {C, 0, C}, {4 * C, r * 4 * Ct, 4 * Ct}); break;
    case -1 - FT_P_FCPROJB: SLAB(3, {L, l0, nl}, {E, e0, El}, {C, 0, C}); break;
    case FT_P_ROUTERW: SLAB(3, {L, l0, nl}, {E, 0, E}, {C, 0, C}); break;
    case FT_P_WTE: SLAB(2, {m->cfg.Vp, 0, m->cfg.Vp}, {C, 0, C}); break;
    case FT_P_WPE: SLAB(2, {m->cfg.maxT, 0, m->cfg.maxT}, {C, 0, C}); break;
    case FT_P_LNFW:
    case FT_P_LNFB: SLAB(1, {C, 0, C}); break;
    case FT_P_QKVW: SLAB(4, {L, l0, nl}, {3, 0, 3}, {C, r * Ct, Ct}, {C, 0, C}); break;
    case FT_P_QKVB: SLAB(3, {L, l0, nl}, {3, 0, 3}, {C, r * Ct, Ct}); break;
    case FT_P_ATTPROJW: SLAB(3, {L, l0, nl}, {C, 0, C}, {C, r * Ct, Ct}); break;
    case FT_P_FCW: SLAB(3, {L, l0, nl}, {4 * C, r * 4 * Ct, 4 * Ct}, {C, 0, C}); break;
    case FT_P_FCB: SLAB(2, {L, l0, nl}, {4 * C, r * 4 * Ct, 4 * Ct}); break;
    case FT_P_FCPROJW: SLAB(3, {L, l0, nl}, {C, 0, C}, {4 * C, r * 4 * Ct, 4 * Ct}); break;
    default: SLAB(2, {L, l0, nl}, {C, 0, C}); break; /* LN weights/biases, row-parallel biases */
    }
#undef SLAB
    bool tp_copy = p->tp_split == FT_SPLIT_NONE && r != 0;
    bool pp_copy = id == FT_P_WTE && !m->first; /* the last stage's copy of the tied wte */
    bool ep_copy = !p->expert && m->sh.ep_rank != 0;
    s->writer = !tp_copy && !pp_copy && !ep_copy;
    size_t n = 1;
    for (int k = 0; k < s->ndims; k++) n *= s->count[k];
    FT_ASSERT(n == p->size);
}

/* Copies the slab (row-major, up to 4 dims) between a global array and a packed local one. */
static void slab_copy(const FtSlab *s, const float *global, float *local)
{
    size_t g[4] = {1, 1, 1, 1}, o[4] = {0, 0, 0, 0}, c[4] = {1, 1, 1, 1};
    int pad = FT_SLAB_MAX_DIMS - s->ndims;
    for (int k = 0; k < s->ndims; k++)
        g[pad + k] = s->gshape[k], o[pad + k] = s->offset[k], c[pad + k] = s->count[k];
    for (size_t a = 0; a < c[0]; a++)
        for (size_t b = 0; b < c[1]; b++)
            for (size_t d = 0; d < c[2]; d++) {
                size_t src = (((a + o[0]) * g[1] + b + o[1]) * g[2] + d + o[2]) * g[3] + o[3];
                memcpy(local, global + src, sizeof(float) * c[3]);
                local += c[3];
            }
}

void model_slab_extract(const FtModel *m, int id, const float *global, float *local)
{
    FtSlab s;
    model_param_slab(m, id, &s);
    if (s.ndims) slab_copy(&s, global, local);
}

void model_copy_from_full(FtModel *m, const FtModel *full)
{
    FT_ASSERT(full->sh.tp == 1 && full->sh.pp == 1 && full->sh.ep == 1 &&
              full->cfg.L == m->cfg.L && full->cfg.C == m->cfg.C && full->cfg.Vp == m->cfg.Vp &&
              full->cfg.E == m->cfg.E);
    for (int i = 0; i < FT_NPARAM_TENSORS; i++)
        model_slab_extract(m, i, full->params + full->p[i].offset, m->params + m->p[i].offset);
    m->step = full->step;
}

void model_commit(FtModel *m)
{
    float *t;
    t = m->params, m->params = m->params_new, m->params_new = t;
    t = m->m, m->m = m->m_new, m->m_new = t;
    t = m->v, m->v = m->v_new, m->v_new = t;
    m->step++;
}

void model_copy_state(FtModel *dst, const FtModel *src)
{
    FT_ASSERT(dst->nparams == src->nparams && dst->cfg.L == src->cfg.L &&
              dst->cfg.C == src->cfg.C && dst->sh.tp_rank == src->sh.tp_rank &&
              dst->sh.pp_rank == src->sh.pp_rank && dst->sh.ep_rank == src->sh.ep_rank);
    size_t bytes = sizeof(float) * dst->nparams;
    float *to[3] = {dst->params, dst->m, dst->v};
    const float *from[3] = {src->params, src->m, src->v};
    for (int k = 0; k < 3; k++) {
        if (backend_is_host(dst->be)) src->be->to_host(src->be->ctx, to[k], from[k], bytes);
        else if (backend_is_host(src->be)) dst->be->to_device(dst->be->ctx, to[k], from[k], bytes);
        else FT_DIE("model_copy_state: neither model is in host memory (%s, %s)", dst->be->name,
                    src->be->name);
    }
    dst->step = src->step;
}

uint64_t model_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double model_rng_uniform(uint64_t *s) { return (model_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }
double model_rng_normal(uint64_t *s) /* Box-Muller, one value per call */
{
    double u1 = model_rng_uniform(s), u2 = model_rng_uniform(s);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

void model_init_random(FtModel *m, uint64_t seed)
{
    const FtGpt2Config *c = &m->cfg;
    memset(m->mem, 0, sizeof(float) * FT_MODEL_BUFFERS * m->stride);
    m->step = 0;
    bool whole = m->sh.tp == 1 && m->sh.pp == 1 && m->sh.ep == 1;
    float *buf = NULL; /* a whole tensor, when this rank holds only part of it */
    if (!whole) {
        size_t big = 0;
        for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
            FtSlab sl;
            model_param_slab(m, i, &sl);
            size_t n = 1;
            for (int k = 0; k < sl.ndims; k++) n *= sl.gshape[k];
            if (sl.ndims && n > big) big = n;
        }
        buf = calloc(big ? big : 1, sizeof(float));
        if (!buf) FT_DIE("out of memory: %zu floats to initialize a shard", big);
    }
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m->p[i];
        if (!p->size) continue;
        FtSlab sl;
        model_param_slab(m, i, &sl);
        size_t gsize = 1;
        for (int k = 0; k < sl.ndims; k++) gsize *= sl.gshape[k];
        float *w = whole ? m->params + p->offset : buf;
        if (!whole) memset(w, 0, sizeof(float) * gsize);
        uint64_t st = seed * 0x100000001B3ull + (uint64_t)i; /* one stream per tensor */
        bool weight = (i == FT_P_WTE || i == FT_P_WPE || i == FT_P_QKVW || i == FT_P_ATTPROJW ||
                       i == FT_P_FCW || i == FT_P_FCPROJW || i == FT_P_ROUTERW);
        bool resid = (i == FT_P_ATTPROJW || i == FT_P_FCPROJW);
        if (weight) {
            double sd = resid ? 0.02 / sqrt(2.0 * c->L) : 0.02;
            size_t n = i == FT_P_WTE ? (size_t)c->V * c->C : gsize; /* padded rows stay 0 */
            for (size_t k = 0; k < n; k++) w[k] = (float)(sd * model_rng_normal(&st));
        } else if (i == FT_P_LN1W || i == FT_P_LN2W || i == FT_P_LNFW) {
            for (size_t k = 0; k < gsize; k++) w[k] = 1.0f;
        }
        if (!whole) slab_copy(&sl, w, m->params + p->offset);
    }
    free(buf);
}

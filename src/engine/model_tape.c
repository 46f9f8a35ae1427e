/* model_tape.c: the GPT-2 / MoE tape builder and the binding of a tape to the model's buffers
 * (model.h).
 *
 * Key decisions:
 *  - The tape is the model: model_build_tape writes the forward of one micro-batch (encoder,
 *    L blocks, final LN, LM head, cross-entropy, mean loss) and its backward, entry by entry.
 *    The residual stream's gradient enters LayerNorm's backward (dx = dres + dLN), so every
 *    activation gradient is written exactly once by one pure op. Each parameter gradient is
 *    written once per micro-batch, as its earlier sum (an input) plus this micro-batch's part;
 *    on a one-stage model the tied wte's two uses are one call (the encoder backward also does
 *    the LM head's dW, ops.h), so no pass over the table is spent on chaining. Tensor views of model state carry (role, param, layer) and are
 *    pointed at buffers by model_tape_bind. Activation gradients inside a block are short-lived
 *    and share one set of buffers across layers; dres[0..L] are kept per layer.
 *  - Activation checkpointing: blocks are grouped into segments (1 block for `full`, k for
 *    `every`). Activations inside a segment live in slot buffers that all segments share; only
 *    each segment's input (a residual-stream tensor) is kept. During backward each segment but
 *    the last (whose activations are still in the slots) is preceded by its forward ops again,
 *    as FT_PH_RECOMPUTE entries on the same tensors: the same ops on the same inputs give the
 *    same bytes, so gradients are bitwise identical with AC on or off. Each recompute entry and
 *    its forward twin point at each other (the pairing DMR's piggyback check compares).
 *  - Markers: segment begin/end, recompute, a tensor-parallel all-reduce point after each
 *    row-parallel projection (forward) and before each block's backward, and "layer gradients
 *    complete" after each block's backward (where a data-parallel bucket would be reduced).
 */
#include "ftllm/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

typedef struct block_acts {
    int ln1, m1, r1, qkv, atty, att, attproj, res2, ln2, m2, r2, fch, fchg, fcproj;
    /* MoE (-1 in a dense model): router logits, routing, the packed token rows on this rank's
     * side (xs, yr: N K rows) and on the experts' side (xe, ye: R rows), kept rows per expert
     * sent (counts, E) and received (ecounts, ep x El) */
    int rlog, probs, expert, gate, row, aux, xs, counts, xe, ecounts, ye, yr;
} BlockActs;
#define NACTS ((int)(sizeof(BlockActs) / sizeof(int)))

typedef struct builder {
    const FtModel *m;
    FtTape *tp;
    int B, T, N;
    int *pid, *gid, *prv;        /* (FT_NPARAM_TENSORS x max(L,1)) tensor ids of params, grads,
                                    the grads' earlier sums */
    int *res;                    /* res[0..L] residual stream tensors */
    BlockActs *act;              /* per layer */
    int *seg;                    /* segment of each layer, -1 without AC */
    double loss_scale;
    /* MoE: top-k, capacity, expert-parallel width, rows on the experts' side of the exchange */
    long long K, cap, ep, R;
    /* backward scratch */
    int dfchg, dfch, dln2, dres2, datty, dqkv, dln1, *dres;
    int dyr, dye, dxe, dxs, dgate, drlog, dln2r; /* MoE */
    /* where entries go: phase and layer of the entries being written */
    FtPhase ph;
    int l;
    int *fwd_start; /* per layer: index of its first forward entry */
    int twin_next;  /* recomputing: the forward entry the next entry repeats; -1 otherwise */
} Builder;

static int pt(const Builder *b, int id, int l) { return b->pid[id * b->m->cfg.L + (l < 0 ? 0 : l)]; }
static int gt(const Builder *b, int id, int l) { return b->gid[id * b->m->cfg.L + (l < 0 ? 0 : l)]; }
static int gp(const Builder *b, int id, int l) { return b->prv[id * b->m->cfg.L + (l < 0 ? 0 : l)]; }

/* An activation named prefix.name (or name) in the arena. */
static int act(Builder *b, const char *prefix, const char *name, int l, size_t n)
{
    char full[40];
    if (prefix) snprintf(full, sizeof full, "%s.%s", prefix, name);
    else snprintf(full, sizeof full, "%s", name);
    return tape_tensor(b->tp, full, FT_F32, FT_TR_ACT, n, NULL, l);
}

/* Tensor id lists and dimensions of an entry: IN(a, b), OUT(y), D(N, C, OC). */
typedef struct ids { int n, id[FT_OP_MAX_IN]; } Ids;
typedef struct dims { long long d[FT_OP_MAX_DIMS]; } Dims;
#define IN(...) ((Ids){(int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), {__VA_ARGS__}})
#define OUT IN
#define D(...) ((Dims){{__VA_ARGS__}})

/* Appends e in the builder's phase and layer; while recomputing, links it with its forward
 * twin (the same kind, label, inputs and outputs: checked). */
static void push(Builder *b, FtTapeEntry *e)
{
    e->phase = b->ph;
    e->layer = b->l;
    e->seg = b->l >= 0 && b->seg ? b->seg[b->l] : -1;
    e->twin = -1;
    if (b->twin_next >= 0) {
        FtTapeEntry *f = &b->tp->e[b->twin_next];
        FT_ASSERT(f->kind == e->kind && f->dir == e->dir && f->mark == e->mark &&
                  f->label == e->label && !memcmp(f->in, e->in, sizeof f->in) &&
                  !memcmp(f->out, e->out, sizeof f->out) && f->twin < 0);
        e->twin = b->twin_next;
        f->twin = b->tp->ne;
        b->twin_next++;
    }
    tape_push(b->tp, e);
}

static void emit(Builder *b, FtOpKind k, FtOpDir dir, const char *label, Ids in, Ids out, Dims d)
{
    FT_ASSERT(in.n <= FT_OP_MAX_IN && out.n <= FT_OP_MAX_OUT);
    FtTapeEntry e = {.kind = k, .dir = dir, .label = label};
    memcpy(e.d, d.d, sizeof e.d);
    for (int i = 0; i < FT_OP_MAX_IN; i++) e.in[i] = i < in.n ? in.id[i] : -1;
    for (int i = 0; i < FT_OP_MAX_OUT; i++) e.out[i] = i < out.n ? out.id[i] : -1;
    push(b, &e);
}

static void mark(Builder *b, FtMark mk, FtOpDir dir, int tin, int tout)
{
    FtTapeEntry e = {.kind = FT_OP_MARK, .dir = dir, .mark = mk};
    for (int i = 0; i < FT_OP_MAX_IN; i++) e.in[i] = -1;
    for (int i = 0; i < FT_OP_MAX_OUT; i++) e.out[i] = -1;
    e.in[0] = tin;
    e.out[0] = tout;
    push(b, &e);
}

/* An expert-parallel exchange: send in[0] (rows of width `width`; counts in[1] per expert on
 * this rank's side, in[2] per (source, local expert) on the experts' side) into out[0]; out[1]
 * >= 0: the experts' side counts are exchanged first, into out[1]. */
static void ep_mark(Builder *b, FtMark mk, FtOpDir dir, int send, int counts, int ecounts_in,
                    int recv, int ecounts_out, long long width)
{
    FtTapeEntry e = {.kind = FT_OP_MARK, .dir = dir, .mark = mk, .d = {width}};
    for (int i = 0; i < FT_OP_MAX_IN; i++) e.in[i] = -1;
    for (int i = 0; i < FT_OP_MAX_OUT; i++) e.out[i] = -1;
    e.in[0] = send, e.in[1] = counts, e.in[2] = ecounts_in;
    e.out[0] = recv, e.out[1] = ecounts_out;
    push(b, &e);
}

/* The last pushed entry's scalars. */
static void set_x(Builder *b, double x0, double x1)
{
    b->tp->e[b->tp->ne - 1].x[0] = x0;
    b->tp->e[b->tp->ne - 1].x[1] = x1;
}

static void moe_fwd(Builder *b, int l);
static void moe_bwd(Builder *b, int l);

/* One block's forward on this rank's shard. Dimensions: C the residual width, Ct = C/tp this
 * rank's attention channels (NH/tp heads), Ht = 4C/tp its MLP columns. The row-parallel
 * projections give partial sums, completed by a tensor-parallel all-reduce; their bias is added
 * by tp rank 0 only (before the sum), so it enters once. Recomputing (ph FT_PH_RECOMPUTE), the
 * entries repeat the forward's one for one. */
static void block_fwd(Builder *b, int l, FtPhase ph)
{
    const BlockActs *a = &b->act[l];
    int tp = b->m->sh.tp;
    long long N = b->N, C = b->m->cfg.C, Ct = C / tp, NHt = b->m->cfg.NH / tp, Ht = 4 * Ct;
    int x = b->res[l], y = b->res[l + 1];
    bool bias_here = b->m->sh.tp_rank == 0;
    b->ph = ph, b->l = l;
    if (ph == FT_PH_FWD) b->fwd_start[l] = b->tp->ne;
    else b->twin_next = b->fwd_start[l];
    emit(b, FT_OP_LAYERNORM, FT_FWD, "ln1", IN(x, pt(b, FT_P_LN1W, l), pt(b, FT_P_LN1B, l)),
         OUT(a->ln1, a->m1, a->r1), D(N, C));
    emit(b, FT_OP_MATMUL, FT_FWD, "qkv", IN(a->ln1, pt(b, FT_P_QKVW, l), pt(b, FT_P_QKVB, l)),
         OUT(a->qkv), D(N, C, 3 * Ct));
    emit(b, FT_OP_ATTENTION, FT_FWD, "attn", IN(a->qkv), OUT(a->atty, a->att),
         D(b->B, b->T, Ct, NHt));
    emit(b, FT_OP_MATMUL, FT_FWD, "attproj",
         IN(a->atty, pt(b, FT_P_ATTPROJW, l), bias_here ? pt(b, FT_P_ATTPROJB, l) : -1),
         OUT(a->attproj), D(N, Ct, C));
    mark(b, FT_MARK_COMM_TP, FT_FWD, a->attproj, a->attproj);
    emit(b, FT_OP_RESIDUAL, FT_FWD, "res1", IN(x, a->attproj), OUT(a->res2), D(N * C));
    emit(b, FT_OP_LAYERNORM, FT_FWD, "ln2", IN(a->res2, pt(b, FT_P_LN2W, l), pt(b, FT_P_LN2B, l)),
         OUT(a->ln2, a->m2, a->r2), D(N, C));
    if (b->m->cfg.E) {
        moe_fwd(b, l);
    } else {
        emit(b, FT_OP_MATMUL, FT_FWD, "fc", IN(a->ln2, pt(b, FT_P_FCW, l), pt(b, FT_P_FCB, l)),
             OUT(a->fch), D(N, C, Ht));
        emit(b, FT_OP_GELU, FT_FWD, "gelu", IN(a->fch), OUT(a->fchg), D(N * Ht));
        emit(b, FT_OP_MATMUL, FT_FWD, "fcproj",
             IN(a->fchg, pt(b, FT_P_FCPROJW, l), bias_here ? pt(b, FT_P_FCPROJB, l) : -1),
             OUT(a->fcproj), D(N, Ht, C));
        mark(b, FT_MARK_COMM_TP, FT_FWD, a->fcproj, a->fcproj);
    }
    emit(b, FT_OP_RESIDUAL, FT_FWD, "res2", IN(a->res2, a->fcproj), OUT(y), D(N * C));
    b->twin_next = -1;
}

/* A MoE block's MLP forward, from ln2 to its output (a->fcproj, before the residual): router,
 * routing, dispatch into packed rows, the exchange to the experts' ranks, each expert's GELU MLP
 * on its rows (column- then row-parallel over tp, completed by a tp all-reduce), the exchange
 * back and the gate-weighted combine. */
static void moe_fwd(Builder *b, int l)
{
    const BlockActs *a = &b->act[l];
    const FtModel *m = b->m;
    long long N = b->N, C = m->cfg.C, Ht = 4 * C / m->sh.tp, E = m->cfg.E, K = b->K, R = b->R;
    bool bias_here = m->sh.tp_rank == 0;
    emit(b, FT_OP_MATMUL, FT_FWD, "router", IN(a->ln2, pt(b, FT_P_ROUTERW, l), -1), OUT(a->rlog),
         D(N, C, E));
    emit(b, FT_OP_MOE_ROUTE, FT_FWD, "route", IN(a->rlog),
         OUT(a->probs, a->expert, a->gate, a->row, a->aux), D(N, E, K, b->cap));
    set_x(b, m->cfg.aux_coef, 0);
    emit(b, FT_OP_MOE_DISPATCH, FT_FWD, "dispatch", IN(a->ln2, a->expert, a->row),
         OUT(a->xs, a->counts), D(N, C, K, E));
    ep_mark(b, FT_MARK_EP_TO_EXPERTS, FT_FWD, a->xs, a->counts, -1, a->xe, a->ecounts, C);
    emit(b, FT_OP_MOE_EXPERT, FT_FWD, "fc",
         IN(a->xe, pt(b, FT_P_FCW, l), pt(b, FT_P_FCB, l), a->ecounts), OUT(a->fch),
         D(R, C, Ht, m->El));
    set_x(b, (double)b->ep, (double)(N * K));
    emit(b, FT_OP_GELU, FT_FWD, "gelu", IN(a->fch), OUT(a->fchg), D(R * Ht));
    emit(b, FT_OP_MOE_EXPERT, FT_FWD, "fcproj",
         IN(a->fchg, pt(b, FT_P_FCPROJW, l), bias_here ? pt(b, FT_P_FCPROJB, l) : -1, a->ecounts),
         OUT(a->ye), D(R, Ht, C, m->El));
    set_x(b, (double)b->ep, (double)(N * K));
    mark(b, FT_MARK_COMM_TP, FT_FWD, a->ye, a->ye);
    ep_mark(b, FT_MARK_EP_TO_SOURCES, FT_FWD, a->ye, a->counts, a->ecounts, a->yr, -1, C);
    emit(b, FT_OP_MOE_COMBINE, FT_FWD, "combine", IN(a->yr, a->gate, a->row), OUT(a->fcproj),
         D(N, C, K));
}

/* Its backward, from the block output's gradient to d.ln2 (complete: the experts' input
 * gradient is all-reduced over tp before it goes back, the router's path is replicated). */
static void moe_bwd(Builder *b, int l)
{
    const BlockActs *a = &b->act[l];
    const FtModel *m = b->m;
    long long N = b->N, C = m->cfg.C, Ht = 4 * C / m->sh.tp, E = m->cfg.E, K = b->K, R = b->R;
    int dy = b->dres[l + 1];
    emit(b, FT_OP_MOE_COMBINE, FT_BWD, "combine", IN(dy, a->yr, a->gate, a->row),
         OUT(b->dyr, b->dgate), D(N, C, K));
    ep_mark(b, FT_MARK_EP_TO_EXPERTS, FT_BWD, b->dyr, a->counts, a->ecounts, b->dye, -1, C);
    emit(b, FT_OP_MOE_EXPERT, FT_BWD, "fcproj",
         IN(b->dye, a->fchg, pt(b, FT_P_FCPROJW, l), a->ecounts, gp(b, FT_P_FCPROJW, l),
            gp(b, FT_P_FCPROJB, l)),
         OUT(b->dfchg, gt(b, FT_P_FCPROJW, l), gt(b, FT_P_FCPROJB, l)), D(R, Ht, C, m->El));
    set_x(b, (double)b->ep, (double)(N * K));
    emit(b, FT_OP_GELU, FT_BWD, "gelu", IN(b->dfchg, a->fch), OUT(b->dfch), D(R * Ht));
    emit(b, FT_OP_MOE_EXPERT, FT_BWD, "fc",
         IN(b->dfch, a->xe, pt(b, FT_P_FCW, l), a->ecounts, gp(b, FT_P_FCW, l),
            gp(b, FT_P_FCB, l)),
         OUT(b->dxe, gt(b, FT_P_FCW, l), gt(b, FT_P_FCB, l)), D(R, C, Ht, m->El));
    set_x(b, (double)b->ep, (double)(N * K));
    mark(b, FT_MARK_COMM_TP, FT_BWD, b->dxe, b->dxe);
    ep_mark(b, FT_MARK_EP_TO_SOURCES, FT_BWD, b->dxe, a->counts, a->ecounts, b->dxs, -1, C);
    emit(b, FT_OP_MOE_ROUTE, FT_BWD, "route", IN(b->dgate, a->probs, a->expert), OUT(b->drlog),
         D(N, E, K));
    set_x(b, m->cfg.aux_coef, b->loss_scale);
    emit(b, FT_OP_MATMUL, FT_BWD, "router",
         IN(b->drlog, a->ln2, pt(b, FT_P_ROUTERW, l), gp(b, FT_P_ROUTERW, l), -1),
         OUT(b->dln2r, gt(b, FT_P_ROUTERW, l), -1), D(N, C, E));
    emit(b, FT_OP_MOE_DISPATCH, FT_BWD, "dispatch", IN(b->dxs, a->row, b->dln2r), OUT(b->dln2),
         D(N, C, K, E));
}

/* One block's backward. The column-parallel layers' input gradients (d.ln2, d.ln1) are partial
 * sums over tp, completed by an all-reduce before the LayerNorm backward; everything the
 * replicated parameters' gradients are computed from is then equal on every tp rank, so those
 * gradients are bitwise equal there without a reduction. The row-parallel biases' gradients are
 * computed on every tp rank from the (replicated) output gradient. Each parameter gradient is
 * written by one entry: its earlier sum (gp: the previous micro-batches') plus this one's. */
static void block_bwd(Builder *b, int l)
{
    const BlockActs *a = &b->act[l];
    int tp = b->m->sh.tp;
    long long N = b->N, C = b->m->cfg.C, Ct = C / tp, NHt = b->m->cfg.NH / tp, Ht = 4 * Ct;
    b->ph = FT_PH_BWD, b->l = l;
    int dy = b->dres[l + 1];
    if (b->m->cfg.E) {
        moe_bwd(b, l);
    } else {
        emit(b, FT_OP_MATMUL, FT_BWD, "fcproj",
             IN(dy, a->fchg, pt(b, FT_P_FCPROJW, l), gp(b, FT_P_FCPROJW, l),
                gp(b, FT_P_FCPROJB, l)),
             OUT(b->dfchg, gt(b, FT_P_FCPROJW, l), gt(b, FT_P_FCPROJB, l)), D(N, Ht, C));
        emit(b, FT_OP_GELU, FT_BWD, "gelu", IN(b->dfchg, a->fch), OUT(b->dfch), D(N * Ht));
        emit(b, FT_OP_MATMUL, FT_BWD, "fc",
             IN(b->dfch, a->ln2, pt(b, FT_P_FCW, l), gp(b, FT_P_FCW, l), gp(b, FT_P_FCB, l)),
             OUT(b->dln2, gt(b, FT_P_FCW, l), gt(b, FT_P_FCB, l)), D(N, C, Ht));
        mark(b, FT_MARK_COMM_TP, FT_BWD, b->dln2, b->dln2);
    }
    emit(b, FT_OP_LAYERNORM, FT_BWD, "ln2",
         IN(b->dln2, a->res2, pt(b, FT_P_LN2W, l), a->m2, a->r2, dy, gp(b, FT_P_LN2W, l),
            gp(b, FT_P_LN2B, l)),
         OUT(b->dres2, gt(b, FT_P_LN2W, l), gt(b, FT_P_LN2B, l)), D(N, C));
    emit(b, FT_OP_MATMUL, FT_BWD, "attproj",
         IN(b->dres2, a->atty, pt(b, FT_P_ATTPROJW, l), gp(b, FT_P_ATTPROJW, l),
            gp(b, FT_P_ATTPROJB, l)),
         OUT(b->datty, gt(b, FT_P_ATTPROJW, l), gt(b, FT_P_ATTPROJB, l)), D(N, Ct, C));
    emit(b, FT_OP_ATTENTION, FT_BWD, "attn", IN(b->datty, a->qkv, a->att), OUT(b->dqkv),
         D(b->B, b->T, Ct, NHt));
    emit(b, FT_OP_MATMUL, FT_BWD, "qkv",
         IN(b->dqkv, a->ln1, pt(b, FT_P_QKVW, l), gp(b, FT_P_QKVW, l), gp(b, FT_P_QKVB, l)),
         OUT(b->dln1, gt(b, FT_P_QKVW, l), gt(b, FT_P_QKVB, l)), D(N, C, 3 * Ct));
    mark(b, FT_MARK_COMM_TP, FT_BWD, b->dln1, b->dln1);
    emit(b, FT_OP_LAYERNORM, FT_BWD, "ln1",
         IN(b->dln1, b->res[l], pt(b, FT_P_LN1W, l), a->m1, a->r1, b->dres2, gp(b, FT_P_LN1W, l),
            gp(b, FT_P_LN1B, l)),
         OUT(b->dres[l], gt(b, FT_P_LN1W, l), gt(b, FT_P_LN1B, l)), D(N, C));
    mark(b, FT_MARK_COMM_GRADS, FT_BWD, -1, -1);
}

/* Declares the activations of one block into *out, named prefix.*: own storage, or aliases of
 * those of `slot`. MoE tensors that the exchange leaves in place on one expert-parallel rank
 * (ep 1) share the storage of their counterpart (xe = xs, ecounts = counts, yr = ye). */
static void block_acts(Builder *b, const char *prefix, int l, const BlockActs *slot,
                       BlockActs *out)
{
    const FtModel *m = b->m;
    int tp = m->sh.tp;
    bool moe = m->cfg.E > 0, one = b->ep == 1;
    size_t N = b->N, C = m->cfg.C, Ct = C / tp, NHt = m->cfg.NH / tp, T = b->T;
    size_t E = (size_t)m->cfg.E, NK = N * (size_t)b->K, R = (size_t)b->R, Ht = 4 * Ct;
    size_t fcrows = moe ? R : N;
    enum { F = FT_F32, I = FT_I32 };
    struct { const char *name; size_t n; int dt, same; } spec[NACTS] = {
        {"ln1", N * C, F, -1}, {"ln1.mean", N, F, -1}, {"ln1.rstd", N, F, -1},
        {"qkv", N * 3 * Ct, F, -1}, {"atty", N * Ct, F, -1},
        {"att.lse", (size_t)b->B * NHt * T, F, -1}, {"attproj", N * C, F, -1},
        {"resmid", N * C, F, -1}, {"ln2", N * C, F, -1}, {"ln2.mean", N, F, -1},
        {"ln2.rstd", N, F, -1}, {"fch", fcrows * Ht, F, -1}, {"fchg", fcrows * Ht, F, -1},
        {"fcproj", N * C, F, -1},
        /* MoE */
        {"rlogits", N * E, F, -1}, {"probs", N * E, F, -1}, {"expert", NK, I, -1},
        {"gate", NK, F, -1}, {"row", NK, I, -1}, {"aux", 1, F, -1}, {"xs", NK * C, F, -1},
        {"counts", E, I, -1}, {"xe", R * C, F, one ? 20 : -1},
        {"ecounts", (size_t)b->ep * m->El, I, one ? 21 : -1}, {"ye", R * C, F, -1},
        {"yr", NK * C, F, one ? 24 : -1}};
    int *ids = (int *)out;
    const int *sl = (const int *)slot;
    for (int i = 0; i < NACTS; i++) {
        char full[40];
        snprintf(full, sizeof full, "%s.%s", prefix, spec[i].name);
        if (i >= 14 && !moe) {
            ids[i] = -1;
        } else if (slot) {
            int of = sl[i];
            if (b->tp->t[of].alias >= 0) of = b->tp->t[of].alias;
            ids[i] = tape_alias(b->tp, full, of, l);
        } else if (spec[i].same >= 0) {
            ids[i] = tape_alias(b->tp, full, ids[spec[i].same], l);
        } else {
            ids[i] = tape_tensor(b->tp, full, (FtDtype)spec[i].dt, FT_TR_ACT, spec[i].n, NULL, l);
        }
    }
}

void model_build_tape(const FtModel *m, const FtTapeOpts *o, FtTape *tp)
{
    const FtGpt2Config *c = &m->cfg;
    FT_ASSERT(o->B > 0 && o->T > 0 && o->T <= c->maxT && c->L > 0 && m->nl > 0);
    tape_init(tp);
    tp->be = m->be;
    tp->B = o->B;
    tp->T = o->T;
    int L = c->L, l0 = m->l0, l1 = m->l0 + m->nl; /* this stage: layers [l0, l1) */
    size_t N = (size_t)o->B * o->T, C = c->C, Vp = c->Vp, Ct = C / m->sh.tp;
    bool first = m->first, last = m->last;
    Builder b = {.m = m, .tp = tp, .B = o->B, .T = o->T, .N = (int)N,
                 .loss_scale = o->loss_scale, .ep = m->sh.ep, .l = -1, .twin_next = -1};
    if (c->E) { /* rows on the experts' side: all N K when ep is 1, else at most El cap from
                   each of the ep sources (and never more than the source's N K) */
        b.K = c->K;
        b.cap = model_moe_capacity(c, (long long)N);
        long long per = (long long)m->El * b.cap < (long long)N * b.K ? (long long)m->El * b.cap
                                                                        : (long long)N * b.K;
        b.R = b.ep == 1 ? (long long)N * b.K : b.ep * per;
    }
    b.pid = malloc(sizeof(int) * FT_NPARAM_TENSORS * (size_t)L);
    b.gid = malloc(sizeof(int) * FT_NPARAM_TENSORS * (size_t)L);
    b.prv = malloc(sizeof(int) * FT_NPARAM_TENSORS * (size_t)L);
    b.res = malloc(sizeof(int) * (size_t)(L + 1));
    b.dres = malloc(sizeof(int) * (size_t)(L + 1));
    b.act = malloc(sizeof(BlockActs) * (size_t)L);
    b.fwd_start = malloc(sizeof(int) * (size_t)L);
    FT_ASSERT(b.pid && b.gid && b.prv && b.res && b.dres && b.act && b.fwd_start);
    for (int i = 0; i < FT_NPARAM_TENSORS * L; i++) b.pid[i] = b.gid[i] = b.prv[i] = -1;

    /* views of the parameters, gradients and the gradients' earlier sums this rank holds */
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m->p[i];
        if (!p->size) continue;
        for (int l = p->per_layer ? l0 : 0; l < (p->per_layer ? l1 : 1); l++) {
            char nm[40];
            int ll = p->per_layer ? l : -1;
            size_t n = p->per_layer ? p->size / m->nl : p->size;
            if (p->per_layer) snprintf(nm, sizeof nm, "l%d.%s", l, p->name);
            else snprintf(nm, sizeof nm, "%s", p->name);
            b.pid[i * L + l] = tape_state(tp, nm, FT_TR_PARAM, i, ll, n);
            if (o->backward) {
                char gn[48];
                snprintf(gn, sizeof gn, "d.%s", nm);
                b.gid[i * L + l] = tape_state(tp, gn, FT_TR_GRAD, i, ll, n);
                snprintf(gn, sizeof gn, "d.%s.prev", nm);
                b.prv[i * L + l] = tape_state(tp, gn, FT_TR_GRAD_PREV, i, ll, n);
            }
        }
    }

    /* AC segments: k blocks each, counted from this stage's first layer */
    int k = o->ac == FT_AC_FULL ? 1 : o->ac == FT_AC_EVERY ? o->ac_every : 0;
    FT_ASSERT(o->ac == FT_AC_OFF || k >= 1);
    if (k > m->nl) k = m->nl;
    int nseg = k ? (m->nl + k - 1) / k : 0;
    if (k) {
        b.seg = malloc(sizeof(int) * (size_t)L);
        FT_ASSERT(b.seg);
        for (int l = 0; l < L; l++) b.seg[l] = l >= l0 && l < l1 ? (l - l0) / k : -1;
    }

    /* I/O and activations */
    tp->tokens = tape_tensor(tp, "tokens", FT_I32, FT_TR_IO, N, NULL, -1);
    tp->targets = tape_tensor(tp, "targets", FT_I32, FT_TR_IO, N, NULL, -1);
    char rn[16];
    snprintf(rn, sizeof rn, "res%d", l0);
    b.res[l0] = act(&b, NULL, rn, -1, N * C);
    BlockActs *slots = NULL;
    int *slot_res = NULL;
    if (k) { /* slot j: the storage of the j-th block of whichever segment runs */
        slots = malloc(sizeof(BlockActs) * (size_t)k);
        slot_res = malloc(sizeof(int) * (size_t)k);
        FT_ASSERT(slots && slot_res);
        for (int j = 0; j < k; j++) {
            char pre[16];
            snprintf(pre, sizeof pre, "slot%d", j);
            block_acts(&b, pre, -1, NULL, &slots[j]);
            slot_res[j] = act(&b, pre, "res", -1, N * C);
        }
    }
    for (int l = l0; l < l1; l++) {
        char pre[16], nm[16];
        snprintf(pre, sizeof pre, "l%d", l);
        block_acts(&b, pre, l, k ? &slots[(l - l0) % k] : NULL, &b.act[l]);
        snprintf(nm, sizeof nm, "res%d", l + 1);
        bool saved = !k || (l - l0) % k == k - 1 || l == l1 - 1; /* a segment's output: kept */
        if (saved) b.res[l + 1] = act(&b, NULL, nm, -1, N * C);
        else b.res[l + 1] = tape_alias(tp, nm, slot_res[(l - l0) % k], l);
    }
    int lnf = -1, lnfm = -1, lnfr = -1, losses = -1;
    if (last) {
        lnf = act(&b, NULL, "lnf", -1, N * C), lnfm = act(&b, NULL, "lnf.mean", -1, N),
        lnfr = act(&b, NULL, "lnf.rstd", -1, N);
        tp->logits = act(&b, NULL, "logits", -1, N * Vp);
        tp->probs = act(&b, NULL, "probs", -1, N * Vp);
        losses = act(&b, NULL, "losses", -1, N);
        tp->loss = tape_tensor(tp, "loss", FT_F32, FT_TR_IO, 1, NULL, -1);
    }

    /* forward */
    b.ph = FT_PH_FWD, b.l = -1;
    if (first)
        emit(&b, FT_OP_ENCODER, FT_FWD, "encoder",
             IN(tp->tokens, pt(&b, FT_P_WTE, -1), pt(&b, FT_P_WPE, -1)), OUT(b.res[l0]),
             D(o->B, o->T, C));
    else
        mark(&b, FT_MARK_PP_RECV, FT_FWD, -1, b.res[l0]);
    for (int l = l0; l < l1; l++) {
        b.ph = FT_PH_FWD, b.l = l;
        if (k && (l - l0) % k == 0) mark(&b, FT_MARK_SEG_BEGIN, FT_FWD, -1, -1);
        block_fwd(&b, l, FT_PH_FWD);
        if (k && ((l - l0) % k == k - 1 || l == l1 - 1)) mark(&b, FT_MARK_SEG_END, FT_FWD, -1, -1);
    }
    b.l = -1;
    if (last) {
        emit(&b, FT_OP_LAYERNORM, FT_FWD, "lnf",
             IN(b.res[L], pt(&b, FT_P_LNFW, -1), pt(&b, FT_P_LNFB, -1)), OUT(lnf, lnfm, lnfr),
             D(N, C));
        emit(&b, FT_OP_MATMUL, FT_FWD, "lmhead", IN(lnf, pt(&b, FT_P_WTE, -1), -1),
             OUT(tp->logits), D(N, C, Vp));
        emit(&b, FT_OP_CROSSENT, FT_FWD, "loss", IN(tp->logits, tp->targets),
             OUT(tp->probs, losses), D(N, c->V, Vp));
        emit(&b, FT_OP_LOSSMEAN, FT_FWD, "loss", IN(losses), OUT(tp->loss), D(N));
    } else {
        mark(&b, FT_MARK_PP_SEND, FT_FWD, b.res[l1], -1);
    }
    tp->fwd_end = tp->ne;

    /* backward */
    if (o->backward) {
        for (int l = l0; l <= l1; l++) {
            char nm[40];
            snprintf(nm, sizeof nm, "d.res%d", l);
            b.dres[l] = tape_tensor(tp, nm, FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
        }
        size_t fcrows = c->E ? (size_t)b.R : N, NK = N * (size_t)b.K;
        b.dfchg = tape_tensor(tp, "d.fchg", FT_F32, FT_TR_ACT_GRAD, fcrows * 4 * Ct, NULL, -1);
        b.dfch = tape_tensor(tp, "d.fch", FT_F32, FT_TR_ACT_GRAD, fcrows * 4 * Ct, NULL, -1);
        if (c->E) {
            b.dyr = tape_tensor(tp, "d.yr", FT_F32, FT_TR_ACT_GRAD, NK * C, NULL, -1);
            b.dye = b.ep == 1 ? tape_alias(tp, "d.ye", b.dyr, -1)
                              : tape_tensor(tp, "d.ye", FT_F32, FT_TR_ACT_GRAD, b.R * C, NULL, -1);
            b.dxe = tape_tensor(tp, "d.xe", FT_F32, FT_TR_ACT_GRAD, b.R * C, NULL, -1);
            b.dxs = b.ep == 1 ? tape_alias(tp, "d.xs", b.dxe, -1)
                              : tape_tensor(tp, "d.xs", FT_F32, FT_TR_ACT_GRAD, NK * C, NULL, -1);
            b.dgate = tape_tensor(tp, "d.gate", FT_F32, FT_TR_ACT_GRAD, NK, NULL, -1);
            b.drlog = tape_tensor(tp, "d.rlogits", FT_F32, FT_TR_ACT_GRAD, N * c->E, NULL, -1);
            b.dln2r = tape_tensor(tp, "d.ln2.router", FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
        }
        b.dln2 = tape_tensor(tp, "d.ln2", FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
        b.dres2 = tape_tensor(tp, "d.resmid", FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
        b.datty = tape_tensor(tp, "d.atty", FT_F32, FT_TR_ACT_GRAD, N * Ct, NULL, -1);
        b.dqkv = tape_tensor(tp, "d.qkv", FT_F32, FT_TR_ACT_GRAD, N * 3 * Ct, NULL, -1);
        b.dln1 = tape_tensor(tp, "d.ln1", FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
        /* the tied wte's gradient has two uses on a one-stage model: the LM head's dW is then
         * folded into the encoder's backward (ops.h), so one call writes the whole table */
        bool tied_here = first && last;
        int dlogits = -1;
        b.ph = FT_PH_BWD, b.l = -1;
        if (last) {
            dlogits = tape_tensor(tp, "d.logits", FT_F32, FT_TR_ACT_GRAD, N * Vp, NULL, -1);
            int dlnf = tape_tensor(tp, "d.lnf", FT_F32, FT_TR_ACT_GRAD, N * C, NULL, -1);
            emit(&b, FT_OP_CROSSENT, FT_BWD, "loss", IN(tp->probs, tp->targets), OUT(dlogits),
                 D(N, c->V, Vp));
            tp->e[tp->ne - 1].x[0] = o->loss_scale / (double)N; /* d(objective)/d(each loss) */
            if (tied_here)
                emit(&b, FT_OP_MATMUL, FT_BWD, "lmhead", IN(dlogits, lnf, pt(&b, FT_P_WTE, -1)),
                     OUT(dlnf, -1, -1), D(N, C, Vp));
            else
                emit(&b, FT_OP_MATMUL, FT_BWD, "lmhead",
                     IN(dlogits, lnf, pt(&b, FT_P_WTE, -1), gp(&b, FT_P_WTE, -1), -1),
                     OUT(dlnf, gt(&b, FT_P_WTE, -1), -1), D(N, C, Vp));
            emit(&b, FT_OP_LAYERNORM, FT_BWD, "lnf",
                 IN(dlnf, b.res[L], pt(&b, FT_P_LNFW, -1), lnfm, lnfr, -1,
                    gp(&b, FT_P_LNFW, -1), gp(&b, FT_P_LNFB, -1)),
                 OUT(b.dres[L], gt(&b, FT_P_LNFW, -1), gt(&b, FT_P_LNFB, -1)), D(N, C));
            mark(&b, FT_MARK_COMM_GRADS, FT_BWD, -1, -1);
        } else {
            mark(&b, FT_MARK_PP_RECV, FT_BWD, -1, b.dres[l1]);
        }
        for (int l = l1 - 1; l >= l0; l--) {
            if (k && ((l - l0) % k == k - 1 || l == l1 - 1) && b.seg[l] != nseg - 1) {
                /* recompute this segment's forward from its saved input res[first] */
                int fl = l0 + b.seg[l] * k;
                b.ph = FT_PH_RECOMPUTE, b.l = fl;
                mark(&b, FT_MARK_RECOMPUTE, FT_FWD, -1, -1);
                for (int j = fl; j <= l; j++) block_fwd(&b, j, FT_PH_RECOMPUTE);
            }
            block_bwd(&b, l);
        }
        b.ph = FT_PH_BWD, b.l = -1;
        if (first) {
            emit(&b, FT_OP_ENCODER, FT_BWD, "encoder",
                 IN(b.dres[l0], tp->tokens, gp(&b, FT_P_WTE, -1), gp(&b, FT_P_WPE, -1),
                    tied_here ? dlogits : -1, tied_here ? lnf : -1),
                 OUT(gt(&b, FT_P_WTE, -1), gt(&b, FT_P_WPE, -1)), D(o->B, o->T, C));
            set_x(&b, (double)Vp, (double)c->maxT);
        } else {
            mark(&b, FT_MARK_PP_SEND, FT_BWD, b.dres[l0], -1);
        }
    }
    tape_alloc(tp);
    model_tape_bind(m, tp, m->grads, NULL);
    free(b.pid), free(b.gid), free(b.prv), free(b.res), free(b.dres), free(b.act), free(b.seg),
        free(b.fwd_start), free(slots), free(slot_res);
}

void model_tape_bind(const FtModel *m, FtTape *tp, float *grads, const float *grads_prev)
{
    for (int i = 0; i < tp->nt; i++) {
        FtTensor *t = &tp->t[i];
        if (!tape_role_is_state(t->role)) continue;
        const float *base = NULL;
        switch (t->role) {
        case FT_TR_PARAM: base = m->params; break;
        case FT_TR_GRAD: base = grads; break;
        case FT_TR_GRAD_PREV: base = grads_prev; break;
        case FT_TR_MOM1: base = m->m; break;
        case FT_TR_MOM2: base = m->v; break;
        case FT_TR_PARAM_NEW: base = m->params_new; break;
        case FT_TR_MOM1_NEW: base = m->m_new; break;
        case FT_TR_MOM2_NEW: base = m->v_new; break;
        default: FT_DIE("model_tape_bind: %s has role %d", t->name, (int)t->role);
        }
        const FtParamInfo *p = &m->p[t->param];
        FT_ASSERT(t->param >= 0 && t->param < FT_NPARAM_TENSORS && p->size);
        bool slice = p->per_layer && t->layer >= 0;
        FT_ASSERT(!slice || (t->layer >= m->l0 && t->layer < m->l0 + m->nl));
        FT_ASSERT(t->n == (slice ? p->size / m->nl : p->size));
        t->data = base ? (void *)(base + p->offset +
                                  (slice ? (size_t)(t->layer - m->l0) * (p->size / m->nl) : 0))
                       : NULL;
    }
    for (int i = 0; i < tp->nt; i++)
        if (tp->t[i].alias >= 0) tp->t[i].data = tp->t[tp->t[i].alias].data;
}

/* plan_predict.c: the what-if model of one pipeline stage's step (equations and assumptions in
 * plan_predict.h): its operators and windows in execution order, their analytic times, the
 * stage's memory footprint, then the three-phase planner on them.
 *
 * The stage is built by appending operators and windows as a 1F1B last stage executes them:
 * micro-batch after micro-batch (forward, head, backward with each AC segment's recomputation
 * before its blocks' backward, the PP hop), then the DP reduction and the optimizer. A window
 * opens after the operator appended last. */
#include "ftllm/plan_predict.h"

#include "ftllm/dmr_pipesim.h"
#include "ftllm/log.h"

#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB 1e9
#define BF16 2.0 /* bytes */

static const char *const g_group_names[] = {
#define FT_PREDICT_GROUP_NAME_(g) #g,
    FT_PREDICT_GROUPS(FT_PREDICT_GROUP_NAME_)
#undef FT_PREDICT_GROUP_NAME_
};

const char *predict_group_name(int g)
{
    return g >= 0 && g < PRED_NGROUPS ? g_group_names[g] : "?";
}

const char *predict_win_name(int w)
{
    static const char *const names[PRED_NWIN] = {"TP", "PP", "DP"};
    return w >= 0 && w < PRED_NWIN ? names[w] : "?";
}

/* The shapes of one GPU's share (plan_predict.h), in elements, and the hardware rates. */
typedef struct shape {
    double N, B, T, C, Q, K, F, g, V; /* tokens, batch, seq, width, q/kv/ffn widths, gates, vocab */
    double rate, hbm;                 /* FLOP/s, bytes/s */
    int keep_copy;                    /* cluster.dmr_keep = copy: deferring costs bandwidth */
} Shape;

typedef struct builder {
    FtPredict *p;
    const Shape *s;
    int cap_ops, cap_win, cap_ev, oom;
    int entry;      /* the next operator's position in its micro-batch part (-1: the optimizer) */
    int nfwd;       /* operators in a micro-batch's forward part (the backward's entries follow) */
} Builder;

/* Appends one event of the stage's timeline (plan_predict.h). */
static void add_ev(Builder *b, int kind, int arg, double t)
{
    FtPredict *p = b->p;
    if (b->oom) return;
    if (p->nev == b->cap_ev) {
        int cap = b->cap_ev ? 2 * b->cap_ev : 1024;
        FtPredictEv *e = realloc(p->ev, (size_t)cap * sizeof *e);
        if (!e) {
            b->oom = 1;
            return;
        }
        p->ev = e, b->cap_ev = cap;
    }
    p->ev[p->nev++] = (FtPredictEv){.kind = kind, .arg = arg, .t = t};
}

static double op_time(const Shape *s, double flops, double bytes)
{
    double a = flops / s->rate, b = bytes / s->hbm;
    return a > b ? a : b;
}

/* Appends one operator; returns its time. kept: bytes its deferred check keeps; out: bytes of
 * its outputs. Deferring it costs (cluster.dmr_keep = copy) a copy of what it keeps, read and
 * written, and a fingerprint of its outputs, read once, at HBM bandwidth. */
static double add_op(Builder *b, int group, double flops, double bytes, double kept, double out,
                     int recomputed, int block)
{
    FtPredict *p = b->p;
    if (p->nops == b->cap_ops) {
        int cap = b->cap_ops ? 2 * b->cap_ops : 1024;
        FtPlanOp *o = realloc(p->ops, (size_t)cap * sizeof *o);
        if (o) p->ops = o;
        int *gr = realloc(p->group, (size_t)cap * sizeof *gr);
        if (gr) p->group = gr;
        int *en = realloc(p->entry, (size_t)cap * sizeof *en);
        if (en) p->entry = en;
        if (!o || !gr || !en) {
            b->oom = 1;
            return 0;
        }
        b->cap_ops = cap;
    }
    double t = op_time(b->s, flops, bytes);
    double hbm = b->s->keep_copy ? b->s->hbm : INFINITY;
    p->ops[p->nops] = (FtPlanOp){.name = predict_group_name(group), .time = t,
                                 .mem = (size_t)kept, .recomputed = recomputed, .block = block,
                                 .copy = 2 * kept / hbm, .fp = out / hbm};
    p->group[p->nops] = group;
    p->entry[p->nops] = b->entry >= 0 ? b->entry++ : -1;
    add_ev(b, PRED_EV_OP, p->nops++, t);
    return t;
}

/* Appends a window opening after the last operator appended. */
static void add_win(Builder *b, int cls, double len, int block)
{
    FtPredict *p = b->p;
    if (p->nwin == b->cap_win) {
        int cap = b->cap_win ? 2 * b->cap_win : 1024;
        FtPlanWindow *w = realloc(p->win, (size_t)cap * sizeof *w);
        if (w) p->win = w;
        int *c = realloc(p->win_class, (size_t)cap * sizeof *c);
        if (c) p->win_class = c;
        if (!w || !c) {
            b->oom = 1;
            return;
        }
        b->cap_win = cap;
    }
    p->win[p->nwin] = (FtPlanWindow){.after = p->nops - 1, .len = len,
                                     .kind = cls == PRED_W_PP ? PLAN_WIN_PP : PLAN_WIN_INTRA,
                                     .block = block};
    p->win_class[p->nwin++] = cls;
    /* a PP window stands for the hops, which the simulation makes from the messages */
    if (cls != PRED_W_PP) add_ev(b, PRED_EV_WAIT, -1, len);
}

/* ---- one block ------------------------------------------------------------------------------ */

/* A block's forward; recomputed: its operators are recomputed by AC (then `last_kept`: the
 * last one, res2, is not). Returns its time (TP all-reduces not included). */
static double block_fwd(Builder *b, int block, int recomputed, int last_kept)
{
    const Shape *s = b->s;
    double N = s->N, C = s->C, Q = s->Q, K = s->K, F = s->F, g = s->g;
    double qkv = Q + 2 * K, t = 0;
    int rc = recomputed;
    t += add_op(b, PRED_G_norm1, 5 * N * C, BF16 * 2 * N * C, BF16 * N * C, BF16 * N * C, rc,
                block);
    t += add_op(b, PRED_G_qkv, 2 * N * C * qkv, BF16 * (N * C + C * qkv + N * qkv),
                BF16 * N * C, BF16 * N * qkv, rc, block);
    t += add_op(b, PRED_G_attn, 2 * s->B * s->T * s->T * Q, BF16 * (N * qkv + N * Q),
                BF16 * N * qkv, BF16 * N * Q, rc, block);
    t += add_op(b, PRED_G_proj, 2 * N * Q * C, BF16 * (N * Q + Q * C + N * C), BF16 * N * Q,
                BF16 * N * C, rc, block);
    if (b->p->t_tp_one > 0) add_win(b, PRED_W_TP, b->p->t_tp_one, block);
    t += add_op(b, PRED_G_res1, N * C, BF16 * 3 * N * C, BF16 * 2 * N * C, BF16 * N * C, rc,
                block);
    t += add_op(b, PRED_G_norm2, 5 * N * C, BF16 * 2 * N * C, BF16 * N * C, BF16 * N * C, rc,
                block);
    t += add_op(b, PRED_G_up, 2 * N * C * g * F, BF16 * (N * C + C * g * F + N * g * F),
                BF16 * N * C, BF16 * N * g * F, rc, block);
    t += add_op(b, PRED_G_act, 8 * g * N * F, BF16 * (g * N * F + N * F), BF16 * g * N * F,
                BF16 * N * F, rc, block);
    t += add_op(b, PRED_G_down, 2 * N * F * C, BF16 * (N * F + F * C + N * C), BF16 * N * F,
                BF16 * N * C, rc, block);
    if (b->p->t_tp_one > 0) add_win(b, PRED_W_TP, b->p->t_tp_one, block);
    t += add_op(b, PRED_G_res2, N * C, BF16 * 3 * N * C, BF16 * 2 * N * C, BF16 * N * C,
                rc && !last_kept, block);
    return t;
}

/* A block's recomputation by AC (no operators: the checkers of the piggyback ones); its TP
 * all-reduces are windows. Returns its time. */
static double block_recompute(Builder *b, int block, int last_kept)
{
    FtPredict *p = b->p;
    int first = p->nops, win0 = p->nwin, ev0 = p->nev, entry = b->entry;
    double t = block_fwd(b, block, 1, last_kept); /* appended only to time them */
    if (b->oom) return 0;
    if (last_kept) t -= p->ops[p->nops - 1].time; /* res2 of the segment's end: kept */
    /* take the operators back out; the windows stay, opening after the last real operator;
     * in the timeline the operators become busy time (merged between waits) */
    for (int w = win0; w < p->nwin; w++) p->win[w].after = first - 1;
    int n = ev0;
    for (int e = ev0; e < p->nev; e++) {
        FtPredictEv v = p->ev[e];
        if (v.kind == PRED_EV_OP) {
            if (last_kept && v.arg == p->nops - 1) continue;
            v = (FtPredictEv){.kind = PRED_EV_BUSY, .arg = -1, .t = p->ops[v.arg].time};
            if (n > ev0 && p->ev[n - 1].kind == PRED_EV_BUSY) {
                p->ev[n - 1].t += v.t;
                continue;
            }
        }
        p->ev[n++] = v;
    }
    p->nev = n, p->nops = first, b->entry = entry;
    return t;
}

/* A block's backward: FLOPs twice the forward's (attention 2.5x), bytes 2x for GEMMs and 1.5x
 * for elementwise operators; kept = the forward's inputs + the output gradient. */
static double block_bwd(Builder *b, int block)
{
    const Shape *s = b->s;
    double N = s->N, C = s->C, Q = s->Q, K = s->K, F = s->F, g = s->g;
    double qkv = Q + 2 * K, t = 0;
    t += add_op(b, PRED_G_down_b, 4 * N * F * C, 2 * BF16 * (N * F + F * C + N * C),
                BF16 * (N * F + N * C), BF16 * (N * F + F * C), 0, block);
    t += add_op(b, PRED_G_act_b, 16 * g * N * F, 1.5 * BF16 * (g * N * F + N * F),
                BF16 * (g * N * F + N * F), BF16 * g * N * F, 0, block);
    t += add_op(b, PRED_G_up_b, 4 * N * C * g * F, 2 * BF16 * (N * C + C * g * F + N * g * F),
                BF16 * (N * C + N * g * F), BF16 * (N * C + C * g * F), 0, block);
    if (b->p->t_tp_one > 0) add_win(b, PRED_W_TP, b->p->t_tp_one, block);
    t += add_op(b, PRED_G_norm2_b, 10 * N * C, 1.5 * BF16 * 2 * N * C, BF16 * 2 * N * C,
                BF16 * N * C, 0, block);
    t += add_op(b, PRED_G_proj_b, 4 * N * Q * C, 2 * BF16 * (N * Q + Q * C + N * C),
                BF16 * (N * Q + N * C), BF16 * (N * Q + Q * C), 0, block);
    t += add_op(b, PRED_G_attn_b, 2.5 * 2 * s->B * s->T * s->T * Q,
                2 * BF16 * (N * qkv + N * Q), BF16 * (N * qkv + 2 * N * Q), BF16 * N * qkv, 0,
                block);
    t += add_op(b, PRED_G_qkv_b, 4 * N * C * qkv, 2 * BF16 * (N * C + C * qkv + N * qkv),
                BF16 * (N * C + N * qkv), BF16 * (N * C + C * qkv), 0, block);
    if (b->p->t_tp_one > 0) add_win(b, PRED_W_TP, b->p->t_tp_one, block);
    t += add_op(b, PRED_G_norm1_b, 10 * N * C, 1.5 * BF16 * 2 * N * C, BF16 * 2 * N * C,
                BF16 * N * C, 0, block);
    return t;
}

/* ---- the stage ------------------------------------------------------------------------------ */

/* Block b's position in its AC segment: sets *in_seg (the block is checkpointed) and *seg_end
 * (it is its segment's last block). */
static void ac_segment(const FtConfig *cfg, int Ls, int b, int *in_seg, int *seg_end)
{
    int k = cfg->train.ac == FT_AC_CHOICE_FULL ? 1 : (int)cfg->train.ac_every;
    *in_seg = cfg->train.ac != FT_AC_CHOICE_NONE;
    *seg_end = *in_seg && (b % k == k - 1 || b == Ls - 1);
}

/* Whether stages a and b sit on different nodes (their first GPUs; Megatron order). */
static bool hop_inter(const FtConfig *cfg, long long a, long long b)
{
    long long tp = cfg->parallel.tp, per = cfg->cluster.gpus_per_node;
    return (tp * a) / per != (tp * b) / per;
}

/* Seconds from a send of stage `from` to its arrival at stage `to` (a PP hop: one activation
 * over the inter- or intra-node link). */
static double hop_time(const FtConfig *cfg, const Shape *s, int from, int to)
{
    const struct ft_cfg_cluster *c = &cfg->cluster;
    double act = BF16 * s->N * s->C;
    return hop_inter(cfg, from, to) ? c->inter_lat_us * 1e-6 + act / (c->inter_gbs * GB)
                                    : c->intra_lat_us * 1e-6 + act / (c->intra_gbs * GB);
}

/* Micro-batch i's forward on the stage: the activation received, the embedding (stage 0), its
 * blocks, the head and the loss (the last stage), the activation sent. */
static void fwd_part(Builder *b, const FtConfig *cfg, int i)
{
    FtPredict *p = b->p;
    const Shape *s = b->s;
    double N = s->N, C = s->C, V = s->V;
    int Ls = p->Ls, st = p->stage, P = p->nstage, base = i * Ls, last = base + Ls - 1;
    double fwd = 0;
    b->entry = 0;
    if (st > 0) add_ev(b, PRED_EV_RECV, dmr_pipe_msg(i, st - 1, P, false), 0);
    if (st == 0)
        fwd += add_op(b, PRED_G_embed, 0, BF16 * 2 * N * C, 4 * N, BF16 * N * C, 0, base);
    for (int k = 0; k < Ls; k++) {
        int in_seg, seg_end;
        ac_segment(cfg, Ls, k, &in_seg, &seg_end);
        fwd += block_fwd(b, base + k, in_seg, seg_end);
    }
    if (st == P - 1) {
        fwd += add_op(b, PRED_G_normf, 5 * N * C, BF16 * 2 * N * C, BF16 * N * C, BF16 * N * C, 0,
                      last);
        fwd += add_op(b, PRED_G_head, 2 * N * C * V, BF16 * (N * C + C * V + N * V),
                      BF16 * N * C, BF16 * N * V, 0, last);
        fwd += add_op(b, PRED_G_loss, 5 * N * V, 10 * N * V, BF16 * N * V, 4 * N, 0, last);
    } else {
        add_ev(b, PRED_EV_SEND, dmr_pipe_msg(i, st, P, false), hop_time(cfg, s, st, st + 1));
    }
    if (i == 0) p->t_fwd = fwd, b->nfwd = b->entry;
    b->entry = -1;
}

/* Micro-batch i's backward: the gradient received, the loss and head (the last stage), its
 * blocks in reverse with each AC segment's recomputation first, the embedding (stage 0), the
 * gradient sent; then the planner's PP window (the two hops of the stage's cycle). */
static void bwd_part(Builder *b, const FtConfig *cfg, int i)
{
    FtPredict *p = b->p;
    const Shape *s = b->s;
    double N = s->N, C = s->C, V = s->V;
    int Ls = p->Ls, st = p->stage, P = p->nstage, base = i * Ls, last = base + Ls - 1;
    double bwd = 0, rec = 0;
    b->entry = b->nfwd;
    if (st < P - 1) add_ev(b, PRED_EV_RECV, dmr_pipe_msg(i, st + 1, P, true), 0);
    if (st == P - 1) {
        bwd += add_op(b, PRED_G_loss_b, 5 * N * V, 10 * N * V, BF16 * N * V, BF16 * N * V, 0,
                      last);
        bwd += add_op(b, PRED_G_head_b, 4 * N * C * V, 2 * BF16 * (N * C + C * V + N * V),
                      BF16 * (N * C + N * V), BF16 * (N * C + C * V), 0, last);
        if (p->t_tp_one > 0) add_win(b, PRED_W_TP, p->t_tp_one, last);
        bwd += add_op(b, PRED_G_normf_b, 10 * N * C, 1.5 * BF16 * 2 * N * C, BF16 * 2 * N * C,
                      BF16 * N * C, 0, last);
    }
    int k_ac = cfg->train.ac == FT_AC_CHOICE_EVERY ? (int)cfg->train.ac_every : 1;
    for (int k = Ls - 1; k >= 0; k--) {
        int in_seg, seg_end;
        ac_segment(cfg, Ls, k, &in_seg, &seg_end);
        /* entering segment [first, k] from its end: recompute its blocks' forward first */
        if (in_seg && (k == Ls - 1 || k % k_ac == k_ac - 1)) {
            int first = k - k % k_ac;
            for (int r = first; r <= k; r++) rec += block_recompute(b, base + r, r == k);
        }
        bwd += block_bwd(b, base + k);
    }
    if (st == 0)
        bwd += add_op(b, PRED_G_embed_b, 0, BF16 * 3 * N * C, BF16 * N * C, BF16 * 2 * N * C, 0,
                      base);
    if (st > 0)
        add_ev(b, PRED_EV_SEND, dmr_pipe_msg(i, st, P, true), hop_time(cfg, s, st, st - 1));
    if (P > 1) add_win(b, PRED_W_PP, 2 * p->t_pp_hop, base);
    if (i == 0) p->t_bwd = bwd, p->t_recompute = rec;
    b->entry = -1;
}

/* The stage's micro-batches in its schedule's order (pipeline.h's: GPipe every forward, then
 * every backward; 1F1B pp - 1 - stage warm-up forwards, then one forward and one backward). */
static void micro_batches(Builder *b, const FtConfig *cfg)
{
    FtPredict *p = b->p;
    int m = p->m, f = 0, k = 0;
    int warm = cfg->parallel.schedule == 1 /* deck order: 1f1b|gpipe */ ? m : p->nstage - 1 - p->stage;
    if (warm > m) warm = m;
    for (; f < warm && !b->oom; f++) fwd_part(b, cfg, f);
    for (; f < m && !b->oom; f++, k++) fwd_part(b, cfg, f), bwd_part(b, cfg, k);
    for (; k < m && !b->oom; k++) bwd_part(b, cfg, k);
}

/* Parameters of one block, and of the head / embedding table, on one GPU. */
static double block_params(const FtConfig *cfg)
{
    const struct ft_cfg_model *m = &cfg->model;
    double C = (double)m->channels, NH = (double)m->heads;
    double KV = m->kv_heads ? (double)m->kv_heads : NH, HS = C / NH;
    double F = m->ffn ? (double)m->ffn : 4 * C, g = m->mlp == FT_MLP_SWIGLU ? 2 : 1;
    double tp = (double)cfg->parallel.tp;
    return (C * (NH * HS + 2 * KV * HS) + NH * HS * C + (g + 1) * C * F) / tp + 2 * C;
}

/* Saved activations of one block without AC, bytes (the inputs of every forward operator). */
static double block_act_full(const Shape *s)
{
    double N = s->N;
    return BF16 * N * (4 * s->C + 2 * (s->Q + 2 * s->K) + 2 * s->Q + s->g * s->F + s->F);
}

/* Footprint of stage st (bytes): parameter state, activations in flight, reserve. */
static double stage_footprint(const FtConfig *cfg, const Shape *s, const FtPredict *p, int st,
                              double *state, double *act)
{
    int pp = (int)cfg->parallel.pp, m = p->m, Ls = p->Ls;
    double table = (double)cfg->model.vocab * s->C / (double)cfg->parallel.tp;
    double params = Ls * block_params(cfg) + (st == pp - 1 ? table + s->C : 0) +
                    (st == 0 ? table : 0);
    *state = params * (BF16 + 16.0 / (double)cfg->parallel.dp);
    int one_f_one_b = cfg->parallel.schedule == 0; /* deck order: 1f1b|gpipe */
    int in_flight = one_f_one_b ? (pp - st < m ? pp - st : m) : m;
    /* block inputs kept by AC are sequence-parallel shards (TorchTitan and Megatron shard the
     * residual stream over tp along the sequence between TP regions) */
    double ckpt = BF16 * s->N * s->C / (double)cfg->parallel.tp, full = block_act_full(s);
    double a;
    if (cfg->train.ac == FT_AC_CHOICE_NONE) {
        a = in_flight * Ls * full;
    } else {
        int k = cfg->train.ac == FT_AC_CHOICE_FULL ? 1 : (int)cfg->train.ac_every;
        int segs = (Ls + k - 1) / k;
        a = in_flight * segs * ckpt + (k < Ls ? k : Ls) * full;
    }
    if (st == pp - 1) a += 10 * s->N * s->V; /* logits, probabilities, their gradient */
    *act = a;
    return *state + a + cfg->cluster.mem_reserve_gb * GB;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int check_cfg(const FtConfig *cfg, char *err, size_t errlen)
{
    char pre[FT_DECK_STR_MAX + 64];
    long long tp = cfg->parallel.tp, per = cfg->cluster.gpus_per_node;
    if (cfg->model.experts > 0) {
        deck_error_prefix(cfg, FT_KEY_model_experts, pre, sizeof pre);
        return fail(err, errlen, "%smodel.experts = %lld: plan --predict models dense models "
                    "only (the MoE run-time planner has no analytic model yet)", pre,
                    cfg->model.experts);
    }
    /* about 20 operators per block and micro-batch: keep the planner's input bounded */
    double nops = 20.0 * (double)(cfg->model.layers / cfg->parallel.pp) *
                  (double)cfg->parallel.microbatches;
    if (nops > PREDICT_MAX_OPS) {
        deck_error_prefix(cfg, FT_KEY_parallel_microbatches, pre, sizeof pre);
        return fail(err, errlen, "%sparallel.microbatches = %lld: about %.0f operators per step "
                    "on a stage, more than plan --predict plans (%d; HINT: fewer micro-batches "
                    "of more sequences, train.batch)", pre, cfg->parallel.microbatches, nops,
                    PREDICT_MAX_OPS);
    }
    if (tp > per || per % tp) {
        deck_error_prefix(cfg, FT_KEY_parallel_tp, pre, sizeof pre);
        return fail(err, errlen, "%sparallel.tp = %lld: plan --predict keeps tensor parallelism "
                    "inside a node (a divisor of cluster.gpus_per_node = %lld)", pre, tp, per);
    }
    return 0;
}

/* Shapes of one GPU's share. */
static void shape_from(const FtConfig *cfg, Shape *s)
{
    const struct ft_cfg_model *m = &cfg->model;
    double tp = (double)cfg->parallel.tp, NH = (double)m->heads;
    double KV = m->kv_heads ? (double)m->kv_heads : NH;
    s->B = (double)cfg->train.batch;
    s->T = (double)(cfg->train.seq_len ? cfg->train.seq_len : m->seq_len);
    s->N = s->B * s->T;
    s->C = (double)m->channels;
    double HS = s->C / NH;
    s->Q = NH / tp * HS;
    s->K = ceil(KV / tp) * HS;
    s->F = (m->ffn ? (double)m->ffn : 4 * s->C) / tp;
    s->g = m->mlp == FT_MLP_SWIGLU ? 2 : 1;
    s->V = ceil((double)m->vocab / tp);
    s->rate = cfg->cluster.gpu_tflops * 1e12 * cfg->cluster.gpu_eff;
    s->hbm = cfg->cluster.hbm_gbs * GB;
    s->keep_copy = cfg->cluster.dmr_keep == FT_DMR_KEEP_COPY;
}

/* Communication times: one TP all-reduce, one PP hop, the DP reduce-scatter. */
static void comm_times(const FtConfig *cfg, const Shape *s, FtPredict *p)
{
    const struct ft_cfg_cluster *c = &cfg->cluster;
    long long tp = cfg->parallel.tp, pp = cfg->parallel.pp, dp = cfg->parallel.dp;
    long long per = c->gpus_per_node;
    double act = BF16 * s->N * s->C;
    double ilat = c->intra_lat_us * 1e-6, xlat = c->inter_lat_us * 1e-6;
    double ibw = c->intra_gbs * GB, xbw = c->inter_gbs * GB;
    p->t_tp_one = tp > 1 ? 2.0 * (tp - 1) * ilat + 2.0 * (tp - 1) / tp * act / ibw : 0;
    int st = p->stage, nb = st > 0 ? st - 1 : st + 1; /* the neighbour of its PP window */
    p->pp_inter = pp > 1 && hop_inter(cfg, st, nb);
    p->t_pp_hop = pp > 1 ? hop_time(cfg, s, st, nb) : 0;
    int dp_inter = (tp * pp * (dp - 1)) / per != 0;
    double grads = 4.0 * (p->Ls * block_params(cfg) + s->V * s->C); /* the last stage's */
    p->t_dp = dp > 1 ? (double)(dp - 1) * (dp_inter ? xlat : ilat) +
                           (double)(dp - 1) / dp * grads / (dp_inter ? xbw : ibw)
                     : 0;
}

void predict_free(FtPredict *p)
{
    if (!p) return;
    free(p->ops), free(p->win), free(p->group), free(p->win_class), free(p->entry), free(p->ev);
    memset(p, 0, sizeof *p);
}

int predict_build(const FtConfig *cfg, FtPredict *p, char *err, size_t errlen)
{
    return predict_build_stage(cfg, (int)cfg->parallel.pp - 1, p, err, errlen);
}

int predict_build_stage(const FtConfig *cfg, int stage, FtPredict *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    FT_ASSERT(stage >= 0 && stage < cfg->parallel.pp);
    if (check_cfg(cfg, err, errlen)) return -1;
    Shape s;
    shape_from(cfg, &s);
    p->stage = stage, p->nstage = (int)cfg->parallel.pp;
    p->Ls = (int)(cfg->model.layers / cfg->parallel.pp);
    p->m = (int)cfg->parallel.microbatches;
    comm_times(cfg, &s, p);
    Builder b = {.p = p, .s = &s, .entry = -1};
    micro_batches(&b, cfg);
    int ntp = 0;
    for (int w = 0; w < p->nwin; w++) ntp += p->win_class[w] == PRED_W_TP;
    p->t_tp = p->t_tp_one * ntp / p->m;
    p->t_pp = 2 * p->t_pp_hop;
    if (p->t_dp > 0) add_win(&b, PRED_W_DP, p->t_dp, p->nops ? p->ops[p->nops - 1].block : 0);
    add_ev(&b, PRED_EV_MEET, -1, 0);
    /* the optimizer: one AdamW per block of the last micro-batch (and the head on the last
     * stage, the embedding table on the first of several) */
    bool last = stage == p->nstage - 1, table = stage == 0 && p->nstage > 1;
    double per_block = block_params(cfg), head = s.V * s.C + s.C, emb = s.V * s.C;
    int base = (p->m - 1) * p->Ls;
    p->t_opt = 0;
    for (int k = 0; k < p->Ls && !b.oom; k++)
        p->t_opt += add_op(&b, PRED_G_adamw, 0, 30 * per_block, 16 * per_block, 14 * per_block, 0,
                           base + k);
    if (last)
        p->t_opt += add_op(&b, PRED_G_adamw, 0, 30 * head, 16 * head, 14 * head, 0,
                           base + p->Ls - 1);
    if (table) p->t_opt += add_op(&b, PRED_G_adamw, 0, 30 * emb, 16 * emb, 14 * emb, 0, base);
    if (b.oom) {
        predict_free(p);
        return fail(err, errlen, "plan --predict: out of memory for %d micro-batches",
                    (int)cfg->parallel.microbatches);
    }
    p->t_cycle = p->t_fwd + p->t_recompute + p->t_bwd + p->t_tp + p->t_pp;
    p->t_bubble = (double)(cfg->parallel.pp - 1) * p->t_cycle;
    p->t_step = p->m * p->t_cycle + p->t_bubble + p->t_dp + p->t_opt;
    for (int i = 0; i < p->nops; i++) p->t_naive += p->ops[i].time;
    /* memory */
    p->params = p->Ls * per_block + (last ? head : 0) + (table ? emb : 0);
    p->gpu_mem = cfg->cluster.gpu_mem_gb * GB;
    p->mem_reserve = cfg->cluster.mem_reserve_gb * GB;
    p->footprint = stage_footprint(cfg, &s, p, stage, &p->mem_state, &p->mem_act);
    double stl, actl, st0, act0;
    double fl = stage_footprint(cfg, &s, p, p->nstage - 1, &stl, &actl);
    p->footprint0 = stage_footprint(cfg, &s, p, 0, &st0, &act0);
    double worst = fl > p->footprint0 ? fl : p->footprint0;
    if (worst >= p->gpu_mem) {
        char pre[FT_DECK_STR_MAX + 64];
        deck_error_prefix(cfg, FT_KEY_cluster_gpu_mem_gb, pre, sizeof pre);
        double gb = p->gpu_mem / GB;
        predict_free(p);
        return fail(err, errlen, "%sthe training footprint (%.1f GB on the %s stage) does not "
                    "fit cluster.gpu_mem_gb = %.1f GB (HINT: more parallel.pp, train.ac = full, "
                    "or a smaller train.batch)", pre, worst / GB,
                    worst == fl ? "last" : "first", gb);
    }
    p->budget = (size_t)(p->gpu_mem - p->footprint);
    return 0;
}

int predict_plan(const FtPredict *p, int phases, FtDmrPlan *plan)
{
    return planner_run(p->ops, p->nops, p->win, p->nwin, p->budget, phases, plan);
}

double predict_overhead_pct(const FtPredict *p, const FtDmrPlan *plan)
{
    if (!(p->t_step > 0)) return 0;
    return 100.0 * (plan ? plan->overhead : p->t_naive) / p->t_step;
}

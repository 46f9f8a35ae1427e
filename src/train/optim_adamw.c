/* optim_adamw.c: learning-rate schedule, gradient norm and the AdamW step (optim.h).
 * The arithmetic is in the GRADNORM and ADAMW op kinds; this file builds the optimizer's tape
 * (what runs on which parameter range, one entry per parameter tensor, so weight decay follows
 * each tensor's flag) and sets each step's scalars on it. */
#include "ftllm/optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ftllm/log.h"

void optim_cfg_from_deck(const FtConfig *cfg, FtOptimCfg *o)
{
    o->lr = cfg->train.lr;
    o->lr_min_frac = cfg->train.lr_min_frac;
    o->warmup = cfg->train.warmup;
    o->steps = cfg->train.steps;
    o->schedule = cfg->train.schedule;
    o->beta1 = cfg->train.beta1;
    o->beta2 = cfg->train.beta2;
    o->eps = cfg->train.eps;
    o->weight_decay = cfg->train.weight_decay;
    o->grad_clip = cfg->train.grad_clip;
}

double optim_lr(const FtOptimCfg *o, long long step)
{
    if (step < o->warmup) return o->lr * (double)(step + 1) / (double)o->warmup;
    double lo = o->lr * o->lr_min_frac;
    long long span = o->steps - o->warmup - 1;
    double p = span > 0 ? (double)(step - o->warmup) / (double)span : 1.0;
    if (p > 1) p = 1;
    switch (o->schedule) {
    case FT_SCHED_COSINE: return lo + 0.5 * (o->lr - lo) * (1.0 + cos(M_PI * p));
    case FT_SCHED_LINEAR: return o->lr - (o->lr - lo) * p;
    default: return o->lr;
    }
}

bool optim_norm_counts(const FtModel *m, int i)
{
    const FtParamInfo *p = &m->p[i];
    if (!p->size) return false;
    if (p->tp_split == FT_SPLIT_NONE && m->sh.tp_rank != 0) return false; /* a tp copy */
    if (i == FT_P_WTE && !m->first) return false; /* the last stage's copy of the tied wte */
    if (!p->expert && m->sh.ep_rank != 0) return false; /* an ep copy of a dense tensor */
    return true;
}

void optim_build_tape(const FtModel *m, FtTape *tp)
{
    tape_init(tp);
    tp->be = m->be;
    int g[FT_NPARAM_TENSORS];
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m->p[i];
        g[i] = -1;
        if (!p->size) continue;
        char nm[48];
        snprintf(nm, sizeof nm, "d.%s", p->name);
        g[i] = tape_state(tp, nm, FT_TR_GRAD, i, -1, p->size);
    }
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) { /* the norm's partial sums */
        if (!optim_norm_counts(m, i)) continue;
        char nm[48];
        snprintf(nm, sizeof nm, "sumsq.%s", m->p[i].name);
        int s = tape_tensor(tp, nm, FT_F64, FT_TR_SCRATCH, 1, NULL, -1);
        FtTapeEntry e = {.kind = FT_OP_GRADNORM, .dir = FT_FWD, .phase = FT_PH_FWD, .layer = -1,
                         .seg = -1, .label = m->p[i].name, .d = {(long long)m->p[i].size},
                         .twin = -1};
        for (int k = 0; k < FT_OP_MAX_IN; k++) e.in[k] = -1;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) e.out[k] = -1;
        e.in[0] = g[i], e.out[0] = s;
        tape_push(tp, &e);
    }
    tp->fwd_end = tp->ne;
    static const FtTensorRole roles[6] = {FT_TR_PARAM, FT_TR_MOM1, FT_TR_MOM2,
                                          FT_TR_PARAM_NEW, FT_TR_MOM1_NEW, FT_TR_MOM2_NEW};
    static const char *const prefix[6] = {"", "m.", "v.", "new.", "new.m.", "new.v."};
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) { /* AdamW, one entry per tensor */
        const FtParamInfo *p = &m->p[i];
        if (!p->size) continue;
        int id[6];
        for (int k = 0; k < 6; k++) {
            char nm[48];
            snprintf(nm, sizeof nm, "%s%s", prefix[k], p->name);
            id[k] = tape_state(tp, nm, roles[k], i, -1, p->size);
        }
        FtTapeEntry e = {.kind = FT_OP_ADAMW, .dir = FT_FWD, .phase = FT_PH_FWD, .layer = -1,
                         .seg = -1, .label = p->name, .d = {(long long)p->size}, .twin = -1};
        for (int k = 0; k < FT_OP_MAX_IN; k++) e.in[k] = -1;
        for (int k = 0; k < FT_OP_MAX_OUT; k++) e.out[k] = -1;
        e.in[0] = g[i], e.in[1] = id[0], e.in[2] = id[1], e.in[3] = id[2];
        e.out[0] = id[3], e.out[1] = id[4], e.out[2] = id[5];
        e.x[4] = p->decay; /* weight decay flag until optim_tape_set */
        tape_push(tp, &e);
    }
    tape_alloc(tp);
    model_tape_bind(m, tp, m->grads, NULL);
}

double optim_tape_sumsq(const FtTape *tp)
{
    double s = 0;
    for (int i = 0; i < tp->fwd_end; i++) {
        double v;
        tp->be->to_host(tp->be->ctx, &v, tp->t[tp->e[i].out[0]].data, sizeof v);
        s += v;
    }
    return s;
}

void optim_tape_set(FtTape *tp, const FtModel *m, const FtOptimCfg *o, double lr,
                    double grad_norm)
{
    double gs = 1.0;
    if (o->grad_clip > 0 && grad_norm > o->grad_clip) gs = o->grad_clip / (grad_norm + 1e-6);
    double t = (double)(m->step + 1);
    double bc1 = 1.0 - pow(o->beta1, t), bc2 = 1.0 - pow(o->beta2, t);
    for (int i = tp->fwd_end; i < tp->ne; i++) {
        FtTapeEntry *e = &tp->e[i];
        FT_ASSERT(e->kind == FT_OP_ADAMW);
        double wd = m->p[tp->t[e->in[1]].param].decay ? o->weight_decay : 0.0;
        double x[FT_OP_MAX_X] = {lr, o->beta1, o->beta2, o->eps, wd, bc1, bc2, gs};
        memcpy(e->x, x, sizeof x);
    }
}

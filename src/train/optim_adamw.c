/* optim_adamw.c: learning-rate schedule, gradient norm and the AdamW step (optim.h).
 * The arithmetic is in the GRADNORM and ADAMW op kinds; this file decides what runs on which
 * parameter range with which scalars, one call per parameter tensor (so weight decay follows
 * each tensor's flag). */
#include "ftllm/optim.h"

#include <math.h>

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

double optim_grad_norm(const FtModel *m, FtExecStats *stats)
{
    double total = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        double s = 0;
        FtOpCall c = {.in = {m->grads + m->p[i].offset}, .out = {&s},
                      .d = {(long long)m->p[i].size}};
        exec_op(FT_OP_GRADNORM, FT_FWD, &c, stats);
        total += s;
    }
    return sqrt(total);
}

void optim_adamw_step(FtModel *m, const FtOptimCfg *o, double lr, double grad_norm,
                      FtExecStats *stats)
{
    m->step++;
    double gs = 1.0;
    if (o->grad_clip > 0 && grad_norm > o->grad_clip) gs = o->grad_clip / (grad_norm + 1e-6);
    double bc1 = 1.0 - pow(o->beta1, (double)m->step), bc2 = 1.0 - pow(o->beta2, (double)m->step);
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        size_t off = m->p[i].offset;
        FtOpCall c = {.in = {m->grads + off},
                      .out = {m->params + off, m->m + off, m->v + off},
                      .d = {(long long)m->p[i].size},
                      .x = {lr, o->beta1, o->beta2, o->eps, m->p[i].decay ? o->weight_decay : 0.0,
                            bc1, bc2, gs},
                      .acc = 7};
        exec_op(FT_OP_ADAMW, FT_FWD, &c, stats);
    }
}

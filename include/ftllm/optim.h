/* optim.h: the optimizer step: global gradient norm, clipping, learning-rate schedule, AdamW.
 *
 * AdamW (Loshchilov & Hutter 2019): decoupled weight decay, applied to matrices and embeddings
 * only (FtParamInfo.decay), not to biases and LayerNorm parameters. Clipping scales the
 * gradients by grad_clip / (norm + 1e-6) when the norm exceeds grad_clip (as
 * torch.nn.utils.clip_grad_norm_), folded into the AdamW kernel rather than a separate pass.
 * Schedule: linear warm-up over `warmup` steps to lr, then constant, cosine or linear decay to
 * lr * lr_min_frac at the last step. The kernels are op kinds (GRADNORM, ADAMW) launched
 * through the executor. */
#ifndef FTLLM_OPTIM_H
#define FTLLM_OPTIM_H

#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"

typedef struct ft_optim_cfg {
    double lr, lr_min_frac;
    long long warmup, steps;
    int schedule; /* enum ft_schedule */
    double beta1, beta2, eps, weight_decay, grad_clip;
} FtOptimCfg;

void optim_cfg_from_deck(const FtConfig *cfg, FtOptimCfg *o);

/* Learning rate of optimizer step `step` (0-based). */
double optim_lr(const FtOptimCfg *o, long long step);

/* L2 norm of all gradients (sum of squares in double over fixed chunks per tensor). */
double optim_grad_norm(const FtModel *m, FtExecStats *stats);

/* One AdamW step at learning rate lr, clipping by grad_norm; increments m->step. */
void optim_adamw_step(FtModel *m, const FtOptimCfg *o, double lr, double grad_norm,
                      FtExecStats *stats);

#endif
